"""tahoe's version: the one place it is written (`tahoe.__version__`, the `engineInfo` of every commit)."""

__version__ = "0.1.0"
