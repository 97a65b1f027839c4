"""Curve (CurveBS): wire formats (parse), model fields (metrics), HTTP (connection), source."""
