"""Configuration: config files, schedules, suites, the demo, the local vendor, roles, tokens."""
