"""Servers in front of the coordinator: PostgreSQL wire protocol (`pgwire`)
and HTTP (`http`: /api/sql, /metrics, /api/health, webhooks). They speak
only to `coordinator_lib.adapter.client`."""
