"""Shared fixtures: one SparkSession per test session, a real PostgreSQL
server started on loopback for the consensus tests."""

pytest_plugins = ["tests.fixtures.spark", "tests.fixtures.postgres"]
