"""Tests of the mini-k3 example (a package so their module names cannot clash with tests/)."""
