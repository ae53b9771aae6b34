"""The library's version, in a module of its own so that any layer can read it without importing
the package root (which reaches up to :mod:`gspdml.retrieval.bundle` for ``from_pretrained``)."""

__version__ = "0.1.0"
