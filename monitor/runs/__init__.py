"""A run's life: created, claimed, measured, evaluated in the sandbox, ended."""
