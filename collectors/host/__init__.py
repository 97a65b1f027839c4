"""The host backend's reading side: processes, cgroups, disks, and the source that joins them."""
