"""Readers of an output folder: pipelines, random access, and the order records are read in."""
