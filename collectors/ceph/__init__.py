"""The Ceph backend's reading side: parsers, the librados connection, the source."""
