"""The Ceph source as every surface lists it (collectors/registry.py)."""

from stormdeck.collectors.declaration import SourceDeclaration

DECLARATION = SourceDeclaration(
    name="ceph",
    parts=("cluster", "osd"),
    scope="cluster",
    # The ceph CLI's client options name Ceph as `ceph` takes them (CEPH_ARGS too, read
    # by stormdeck/sources.py: names_ceph); CEPH_CONF does not, being only where a
    # default cluster's conf is.
    enabled_by=("conf", "ceph", "client_id", "client_name", "keyring"),
    validate=True,
)
