"""Alert rules, an alert's life, channels and their transports, maintenance windows."""
