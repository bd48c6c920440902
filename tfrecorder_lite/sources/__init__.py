"""Conversion sources: one module per source format, each saying whether a path is of its
kind and reading it into a table, registered in ``registry.py``, whose ``read_source`` reads
any of them."""
