"""Reading an output: load(), random access by index and the global order, verify, inspect,
the shard cache, exports to other formats."""
