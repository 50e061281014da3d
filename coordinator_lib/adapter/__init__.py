"""The adapter (seed 000): the coordinator, its durable catalog, the
timestamp oracle and timestamp selection, sessions, and the client interface
the servers and Dagster use (`client`)."""
