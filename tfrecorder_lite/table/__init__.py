"""The table: sources, kinds, labels, splits, columns and the checks of each."""
