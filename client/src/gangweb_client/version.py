"""The client's version, in a module of its own so the modules the package imports can read it without importing
the package (an import circle otherwise). Keep it equal to `version` in client/pyproject.toml."""
__version__ = "0.1.0"
