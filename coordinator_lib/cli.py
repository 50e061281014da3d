"""The `tidemark` command line.

Subcommands import their implementation lazily so that `tidemark --version`
and usage errors stay fast and do not pull in Spark or Dagster.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import metadata

DEFAULT_DEMO_DIR = "./data/demo"


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tidemark` console script; returns the exit code.

    Bad usage makes argparse print to stderr and exit with status 2.
    """
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
