"""`tidemark serve`: the coordinator with its PostgreSQL and HTTP servers.

The coordinator runs continuous maintenance of materialized views on its own
thread; the servers each run on theirs. `Environment.stop()` stops the
servers first (clients get a clean shutdown), then the coordinator.
"""

from __future__ import annotations

import logging
import signal
import ssl
import threading

from coordinator_lib.adapter.client import Handle, serve
from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.server.heap import freeze_startup_heap
from coordinator_lib.server.http import HttpServer
from coordinator_lib.server.pgwire import PgwireServer
from coordinator_lib.server.scheduler_api import scheduler_routes
from coordinator_lib.server.webhook import WebhookEndpoint

log = logging.getLogger(__name__)

DEFAULT_PGWIRE_PORT = 6875
DEFAULT_HTTP_PORT = 6876


class Environment:
    def __init__(
        self,
        config: Config,
        pgwire_port: int = DEFAULT_PGWIRE_PORT,
        http_port: int = DEFAULT_HTTP_PORT,
        host: str = "127.0.0.1",
        spark: object = None,
        tls: tuple[str, str] | None = None,
    ) -> None:
        """`tls`: (certificate file, private key file), PEM; then pgwire
        accepts SSLRequest and HTTP serves https."""
        ssl_context = None
        if tls is not None:
            ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_context.load_cert_chain(*tls)  # a bad file fails here, before anything runs
        self.handle: Handle = serve(config, spark)
        client = self.handle.client
        self.pgwire = PgwireServer(client, host=host, port=pgwire_port, ssl_context=ssl_context)
        # Webhook sources' endpoint (POST /api/webhook/...) on the HTTP port.
        self.webhooks = WebhookEndpoint(self.handle.coordinator)
        # The table scheduler's owner and worker supervisor (docs/scheduler.md).
        self.cluster_service = None
        if config.scheduler or config.workers > 0:
            from coordinator_lib.adapter.cluster_supervisor import ClusterService

            self.cluster_service = ClusterService(self.handle.coordinator)
        self.http = HttpServer(
            client,
            self.handle.coordinator.metrics,
            host=host,
            port=http_port,
            extra_routes=scheduler_routes(self.cluster_service),
            raw_routes=[self.webhooks],
            tls=tls,
        )

    def start(self) -> None:
        self.pgwire.start()
        self.http.start()
        if self.cluster_service is not None:
            self.cluster_service.start()
        log.info("pgwire on %s, HTTP on %s", self.pgwire.port, self.http.port)

    def stop(self) -> None:
        self.http.shutdown()
        self.webhooks.close()
        self.pgwire.shutdown()
        if self.cluster_service is not None:
            self.cluster_service.stop()
        self.handle.shutdown()


def run_forever(environment: Environment) -> None:
    """Serve until SIGINT or SIGTERM."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    environment.start()
    freeze_startup_heap()
    print(
        f"tidemark: pgwire on 127.0.0.1:{environment.pgwire.port}, HTTP on {environment.http.url}",
        flush=True,
    )
    stop.wait()
    environment.stop()
