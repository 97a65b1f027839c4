"""Experiments: a change measured on the live cluster in alternated windows (stats.py)."""
