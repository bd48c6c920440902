"""The output folder: its file names (layout), metadata.json and receipts (manifest), the
resume state, the lock, and the files tensorflow-datasets reads."""
