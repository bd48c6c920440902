"""Conversion sources: one module per source format (``csv_table``, ``image_folder``,
``coco``, ``voc``, ``automl_csv``, ``vertex``, ``yolo``), each saying whether a path is of its
kind and reading it into a table, registered in ``registry.py``, whose ``read_source`` reads
any of them."""
