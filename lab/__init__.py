"""A real throwaway Ceph cluster on this host, for rehearsal, demos and tests."""
