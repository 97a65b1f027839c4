"""stormdeck: a terminal console for Ceph and Curve block-storage operators."""

__version__ = "0.1.0"
