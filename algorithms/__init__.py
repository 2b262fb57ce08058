"""The reference zoo: losses, test problems, baselines and the algorithms of the papers.

Every algorithm here reaches data only through a :class:`dpverify.core.curator.Curator`. The
registry (``dpverify list``) discovers them through the ``dpverify.algorithms`` entry point.
"""
