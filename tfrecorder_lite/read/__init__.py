"""Readers of an output folder: they depend on the manifest and the record format only."""
