"""The Curve source as every surface lists it (collectors/registry.py)."""

from stormdeck.collectors.declaration import SourceDeclaration

DECLARATION = SourceDeclaration(
    name="curve",
    parts=("chunkserver", "curve"),
    scope="cluster",
    enabled_by=("curve_mds", "curve_chunkserver", "curve_ops_tool", "curve_cli"),
)
