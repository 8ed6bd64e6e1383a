"""The package version, kept in one place for setup.cfg and the CONNECT op."""

__version__ = "0.2.0"
