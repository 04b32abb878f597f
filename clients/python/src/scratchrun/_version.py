"""The package's version, its one place (the build backend reads it too)."""

__version__ = "0.1.0"
