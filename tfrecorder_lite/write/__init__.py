"""Writing: the plan, the shard task, the runners and the driver."""
