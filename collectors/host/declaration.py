"""This host's source as every surface lists it (collectors/registry.py)."""

from stormdeck.collectors.declaration import SourceDeclaration

DECLARATION = SourceDeclaration(
    name="host",
    # Daemons' cores and disks of this host; its Curve chunkservers' processes too.
    parts=("cores", "chunkserver", "disks", "hosts"),
    scope="host",
    # On unless --no-host: no option names it, so it never keeps the config file out.
    enabled_by=(),
    validate=True,
)
