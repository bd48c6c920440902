"""Writing an output: the plan, the shard tasks, the runners and the driver."""
