"""The package version, in a leaf module that every other module can import."""

__version__ = "0.1.0"
