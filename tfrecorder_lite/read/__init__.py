"""Reading an output: load(), the table's dataset(), verify, inspect, the shard cache, COCO
export."""
