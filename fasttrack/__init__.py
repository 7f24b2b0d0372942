"""fasttrack: a compliance gate for fast-track model optimisations."""

__version__ = "0.1.0"
