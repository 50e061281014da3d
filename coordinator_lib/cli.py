"""The `tidemark` command line.

Subcommands import their implementation lazily so that `tidemark --version`
and usage errors stay fast and do not pull in Spark or Dagster.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import metadata

DEFAULT_DEMO_DIR = "./data/demo"
DEFAULT_SERVE_DIR = "./data/tidemark"


def _version() -> str:
    """The installed distribution's version, so it never drifts from pyproject."""
    try:
        return metadata.version("tidemark")
    except metadata.PackageNotFoundError:
        return "unknown"


def _cmd_demo(args: argparse.Namespace) -> int:
    """Run the storage demo; imported here because it starts the engine."""
    from coordinator_lib.demo import run_storage_demo

    run_storage_demo(args.data_dir)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    """Run the coordinator, pgwire and HTTP until SIGINT/SIGTERM."""
    import logging

    from coordinator_lib.server.allocator import use_server_allocators

    use_server_allocators()  # before anything loads pyarrow

    from coordinator_lib.adapter.coordinator import Config
    from coordinator_lib.server.environment import Environment, run_forever

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = Config(
        data_dir=args.data_dir,
        consensus_url=args.consensus_url,
        blob_root=args.blob_root,
        spark_master=args.spark_master,
        workers=args.workers,
        scheduler=True,
        scheduler_lease_ttl_ms=args.lease_ttl_ms,
        webhook_max_body_bytes=args.webhook_max_body_bytes,
        webhook_max_concurrency=args.webhook_max_concurrency,
        secrets_key_file=args.secrets_key_file,
        users=_superusers(args),
        **({} if args.local_max_rows is None else {"local_max_rows": args.local_max_rows}),
    )
    if args.secrets_key_file:  # a bad or misplaced key file stops serve before it starts
        from coordinator_lib.adapter.secrets_key import SecretsKeyError, configured_key

        try:
            configured_key(config)
        except SecretsKeyError as error:
            raise SystemExit(f"tidemark serve: {error.message}") from None
    if (args.tls_cert is None) != (args.tls_key is None):
        raise SystemExit("tidemark serve: --tls-cert and --tls-key go together")
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    run_forever(Environment(config, args.pgwire_port, args.http_port, tls=tls))
    return 0


SUPERUSER_PASSWORD_ENV = "TIDEMARK_SUPERUSER_PASSWORD"


def _superusers(args: argparse.Namespace) -> dict[str, str]:
    """`--superuser NAME`: a superuser configured outside the catalog, its
    password from the environment (never on the command line, where `ps` shows it)."""
    if args.superuser is None:
        return {}
    import os

    password = os.environ.get(SUPERUSER_PASSWORD_ENV)
    if not password:
        raise SystemExit(f"tidemark serve: --superuser needs {SUPERUSER_PASSWORD_ENV} set")
    return {args.superuser: password}


def _cmd_gen_secrets_key(args: argparse.Namespace) -> int:
    """Print a new secrets key (base64 of 32 random bytes)."""
    from coordinator_lib.adapter.secrets_key import generate_key

    print(generate_key())
    return 0


def _cmd_rotate_secrets_key(args: argparse.Namespace) -> int:
    """Re-encrypt every secret under the new key in one compare-and-set."""
    from coordinator_lib.adapter.secrets import rotate_secrets_key
    from coordinator_lib.adapter.secrets_key import SecretsKeyError, read_key_file
    from coordinator_lib.persist.client import PersistClient

    try:
        old = read_key_file(args.old_key_file, args.data_dir) if args.old_key_file else None
        new = read_key_file(args.new_key_file, args.data_dir)
        persist = PersistClient.open(args.data_dir, args.consensus_url, args.blob_root)
        try:
            count = rotate_secrets_key(persist.consensus, old, new)
        finally:
            persist.close()
    except SecretsKeyError as error:
        raise SystemExit(f"tidemark rotate-secrets-key: {error.message}") from None
    print(f"re-encrypted {count} secrets; start tidemark with the new key")
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    """Run one worker until SIGINT/SIGTERM (or its parent's death)."""
    import logging

    from coordinator_lib.adapter.worker import WorkerConfig, run_worker
    from coordinator_lib.compute.dataflow import LOCAL_MAX_ROWS

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = WorkerConfig(
        capture_id=args.id,
        cluster=args.cluster,
        data_dir=args.data_dir,
        consensus_url=args.consensus_url,
        blob_root=args.blob_root,
        spark_master=args.spark_master,
        lease_ttl_ms=args.lease_ttl_ms,
        local_max_rows=LOCAL_MAX_ROWS if args.local_max_rows is None else args.local_max_rows,
        parent_pid=args.parent_pid,
    )
    return run_worker(config)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; separate from `main` so tests can inspect it."""
    parser = argparse.ArgumentParser(
        prog="tidemark",
        description="Incrementally maintained SQL views with Materialize's timestamp discipline.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = subcommands.add_parser("demo", help="run the storage demo")
    demo.add_argument(
        "--data-dir",
        default=DEFAULT_DEMO_DIR,
        metavar="DIR",
        help=f"environment directory for the demo (default: {DEFAULT_DEMO_DIR})",
    )
    demo.set_defaults(func=_cmd_demo)

    serve = subcommands.add_parser("serve", help="run the coordinator, pgwire and HTTP servers")
    serve.add_argument(
        "--data-dir",
        default=DEFAULT_SERVE_DIR,
        metavar="DIR",
        help=f"environment directory (default: {DEFAULT_SERVE_DIR})",
    )
    serve.add_argument(
        "--consensus-url",
        default=None,
        metavar="URL",
        help="consensus (sqlite:///path or postgresql://...); default under DIR",
    )
    serve.add_argument(
        "--blob-root",
        default=None,
        metavar="PATH",
        help="Parquet blob directory; default under DIR",
    )
    serve.add_argument("--pgwire-port", type=int, default=6875, metavar="N")
    serve.add_argument("--http-port", type=int, default=6876, metavar="N")
    serve.add_argument(
        "--spark-master",
        default=None,
        metavar="URL",
        help="Spark master (local[N], spark://..., sc://...); default local[2]",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="run the default cluster's materialized views on N `tidemark worker` processes",
    )
    serve.add_argument(
        "--lease-ttl-ms",
        type=int,
        default=10_000,
        metavar="MS",
        help="scheduler owner and worker lease TTL: how soon a dead one is replaced",
    )
    serve.add_argument(
        "--webhook-max-body-bytes",
        type=int,
        default=2 * 1024 * 1024,
        metavar="N",
        help="webhook requests with larger bodies get 413 (default 2 MiB)",
    )
    serve.add_argument(
        "--webhook-max-concurrency",
        type=int,
        default=500,
        metavar="N",
        help="webhook requests handled at once; more get 429 (default 500)",
    )
    serve.add_argument(
        "--secrets-key-file",
        default=None,
        metavar="FILE",
        help="key secrets are encrypted with (outside DIR; default: $TIDEMARK_SECRETS_KEY)",
    )
    serve.add_argument(
        "--tls-cert", default=None, metavar="FILE", help="PEM certificate: TLS on pgwire and HTTP"
    )
    serve.add_argument("--tls-key", default=None, metavar="FILE", help="its PEM private key")
    serve.add_argument(
        "--superuser",
        default=None,
        metavar="NAME",
        help="a superuser with the password in $TIDEMARK_SUPERUSER_PASSWORD; "
        "turns on password authentication for everybody",
    )
    serve.add_argument(
        "--local-max-rows",
        type=int,
        default=None,
        metavar="N",
        help="queries and steps over inputs storing more updates run on Spark (0: always)",
    )
    serve.set_defaults(func=_cmd_serve)

    gen_key = subcommands.add_parser("gen-secrets-key", help="print a new secrets key")
    gen_key.set_defaults(func=_cmd_gen_secrets_key)

    rotate = subcommands.add_parser(
        "rotate-secrets-key", help="re-encrypt every secret under a new key (README)"
    )
    rotate.add_argument("--data-dir", default=DEFAULT_SERVE_DIR, metavar="DIR")
    rotate.add_argument("--consensus-url", default=None, metavar="URL")
    rotate.add_argument("--blob-root", default=None, metavar="PATH")
    rotate.add_argument(
        "--old-key-file",
        default=None,
        metavar="FILE",
        help="the current key (omit for secrets stored before encryption)",
    )
    rotate.add_argument("--new-key-file", required=True, metavar="FILE")
    rotate.set_defaults(func=_cmd_rotate_secrets_key)

    worker = subcommands.add_parser(
        "worker", help="run a worker (a capture the scheduler assigns views to)"
    )
    worker.add_argument("--data-dir", default=DEFAULT_SERVE_DIR, metavar="DIR")
    worker.add_argument("--id", required=True, metavar="NAME", help="the capture id")
    worker.add_argument("--cluster", default="quickstart", metavar="NAME")
    worker.add_argument("--consensus-url", default=None, metavar="URL")
    worker.add_argument("--blob-root", default=None, metavar="PATH")
    worker.add_argument("--spark-master", default=None, metavar="URL")
    worker.add_argument("--lease-ttl-ms", type=int, default=10_000, metavar="MS")
    worker.add_argument(
        "--local-max-rows",
        type=int,
        default=None,
        metavar="N",
        help="steps over inputs storing more updates run on Spark (0: always)",
    )
    worker.add_argument(
        "--parent-pid", type=int, default=None, metavar="PID", help="exit when PID is gone"
    )
    worker.set_defaults(func=_cmd_worker)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tidemark` console script; returns the exit code.

    Bad usage makes argparse print to stderr and exit with status 2.
    """
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
