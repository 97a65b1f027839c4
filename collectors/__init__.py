"""Everything that reads the world: sources, the Snapshot model, the hub."""
