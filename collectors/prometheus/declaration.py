"""The Prometheus source as every surface lists it (collectors/registry.py)."""

from stormdeck.collectors.declaration import SourceDeclaration

DECLARATION = SourceDeclaration(
    name="prometheus",
    # The fleet's exporters stand in for what librados and this host read, where those
    # are late or absent.
    parts=("cluster", "osd", "cores", "disks"),
    scope="cluster",
    enabled_by=("prometheus",),
)
