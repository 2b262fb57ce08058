"""Mechanisms algorithms build on top of the curator: the tree mechanism, privacy filters."""
