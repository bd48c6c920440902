"""The table stage: sources, kinds of tables, labels, splits, columns, validate()."""
