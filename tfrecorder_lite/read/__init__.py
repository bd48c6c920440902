"""Reading an output: load(), random access by index and the global order, the table's
dataset(), verify, inspect, the shard cache, COCO export."""
