"""Shared fixtures: one SparkSession per test session, a real PostgreSQL
server started on loopback for the consensus tests."""

import os

pytest_plugins = [
    "tests.fixtures.spark",
    "tests.fixtures.postgres",
    "tests.fixtures.served",
    "tests.fixtures.one_jvm",
]

# Secrets are encrypted at rest with a key from outside the data directory
# (adapter/secrets_key.py); tests that create secrets use this one.
os.environ.setdefault("TIDEMARK_SECRETS_KEY", "dGlkZW1hcmstdGVzdC1zZWNyZXRzLWtleS0zMmJ5dGU=")
