"""What the executor changes: the Actuator contract, one module per backend, and the table."""
