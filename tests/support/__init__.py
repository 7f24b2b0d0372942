"""Builders shared by the test suite: fixture projects, evidence files, fake targets and servers.

Importable as ``support.*`` because pytest's ``pythonpath`` (pyproject.toml) names ``tests/``."""
