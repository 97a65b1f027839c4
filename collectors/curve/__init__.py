"""Curve (CurveBS): its wire formats read (parse), bvars made model fields (metrics), HTTP
and tools (connection), and the source that polls them (source)."""
