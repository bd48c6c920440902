"""The table stage: which kind a table is (the kinds registered in ``kinds.py``), its labels,
columns and the checks of its cells and files."""
