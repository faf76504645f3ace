"""openslob: the SLOB method for databases anyone can run."""

__version__ = "0.1.0"
