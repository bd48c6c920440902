"""The table stage: which kind a table is (classification, detection, segmentation), its labels,
columns and the checks of its cells and files."""
