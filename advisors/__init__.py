"""Everything that judges and changes the world: rules, engine, plans, executor, journal."""
