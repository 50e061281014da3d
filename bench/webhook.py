"""Webhook benchmark: requests per second and time to a 200 on loopback.

Starts `tidemark serve` as its own process on a fresh data directory,
creates two webhook sources and posts to them from `bench/http_load.py`
(keep-alive connections on one asyncio loop in this process: a lean load
generator, whose own CPU is reported beside the server's):

- one JSON event per request with 1, 16 and 64 concurrent clients:
  requests/s, p50 and p99 time from sending a request to its 200 (the rows
  are durable then: group commit answers after the append);
- JSON ARRAY bodies of 100 events with 16 clients: events/s.

Every request carries its sequence number, and each phase checks that the
source holds exactly the events of the requests that got a 200, each once.
Writes bench/results/webhook.json and webhook.md; `--seconds` and
`--concurrency` shrink it (the test suite runs it tiny to keep it from rotting).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import requests

from bench import http_load

RESULTS = Path(__file__).parent / "results"
ARRAY_EVENTS = 100


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Every query the benchmarks send runs in-process, however many rows the
# load stored: over `--local-max-rows` stored updates a peek goes to Spark,
# and starting a JVM on a loaded machine outlasted the landed check's
# 120 s read timeout (bench.write ran with 10 * BENCH_WRITE_COPY_ROWS, so
# 10,000 at 1,000 COPY rows, and 64 webhook clients store more in 10 s).
IN_PROCESS = ("--local-max-rows", str(10**12))


class Server:
    """`tidemark serve` on `data_dir` (with extra command-line `options`)
    until `stop()`; queries run in-process (`IN_PROCESS`)."""

    def __init__(self, data_dir: Path, *options: str) -> None:
        self.port = _free_port()
        self.pgwire_port = _free_port()
        self.log = (data_dir.parent / "serve.log").open("wb")
        command = [
            sys.executable,
            "-m",
            "coordinator_lib.cli",
            "serve",
            "--data-dir",
            str(data_dir),
            "--pgwire-port",
            str(self.pgwire_port),
            "--http-port",
            str(self.port),
            *IN_PROCESS,
            *options,
        ]
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{self.url}/api/health", timeout=5).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("tidemark serve did not start")
            time.sleep(0.2)

    def sql(self, query: str) -> list[list[object]]:
        answer = requests.post(f"{self.url}/api/sql", json={"query": query}, timeout=120).json()
        result = answer["results"][-1]
        if "error" in result:
            raise RuntimeError(result["error"])
        return result.get("rows", [])

    def cpu_seconds(self) -> float | None:
        """User + system CPU the server process has used (Linux), so a
        phase's cost per request does not depend on what else runs."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()


@dataclass
class Phase:
    name: str
    concurrency: int
    events_per_request: int
    requests: int
    seconds: float
    requests_per_s: float
    events_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    server_cpu_ms_per_request: float | None
    client_cpu_ms_per_request: float


EVENT = b'{"seq": SEQ, "kind": "click", "user": "u-123", "amount": 9.5}'


def event_body(seq: int) -> bytes:
    """One JSON event carrying its request's sequence number."""
    return EVENT.replace(b"SEQ", b"%d" % seq)


_ARRAY = b"[" + b", ".join([EVENT] * ARRAY_EVENTS) + b"]"


def array_body(seq: int) -> bytes:
    """A JSON ARRAY of ARRAY_EVENTS events, each carrying the request's number."""
    return _ARRAY.replace(b"SEQ", b"%d" % seq)


def _phase(
    server: Server,
    name: str,
    source: str,
    body_of: Callable[[int], bytes],
    events: int,
    clients: int,
    seconds: float,
) -> Phase:
    """One phase of POSTs to `source`; raises unless the source then holds
    exactly `events` events of each request that got a 200 (and none of
    any other request)."""
    path = f"/api/webhook/materialize/public/{source}"
    cpu_before = server.cpu_seconds()
    load = http_load.run(server.port, path, body_of, clients, seconds)
    cpu_after = server.cpu_seconds()
    check_landed(server, source, [a.seq for a in load.answers if a.status == 200], events)
    times = sorted(a.seconds for a in load.answers if a.status == 200 and a.in_window)
    count = len(times)
    return Phase(
        name=name,
        concurrency=clients,
        events_per_request=events,
        requests=count,
        seconds=round(load.seconds, 3),
        requests_per_s=round(count / load.seconds, 1),
        events_per_s=round(count * events / load.seconds, 1),
        p50_ms=round(statistics.median(times) * 1000, 2) if times else 0.0,
        p99_ms=round(times[min(count - 1, int(count * 0.99))] * 1000, 2) if times else 0.0,
        errors=sum(1 for a in load.answers if a.status != 200),
        server_cpu_ms_per_request=(
            round((cpu_after - cpu_before) * 1000 / len(load.answers), 3)
            if load.answers and cpu_before is not None and cpu_after is not None
            else None
        ),
        client_cpu_ms_per_request=(
            round(load.cpu_seconds * 1000 / len(load.answers), 3) if load.answers else 0.0
        ),
    )


def check_landed(server: Server, source: str, acknowledged: list[int], events: int) -> None:
    """The source's events by request number are exactly `events` for each
    acknowledged request (all phases of a source are checked together: the
    numbers restart per phase, so each phase uses a fresh source)."""
    query = f"SELECT (body->>'seq')::bigint, count(*) FROM {source} GROUP BY 1"
    try:
        rows = server.sql(query)
    except Exception as error:  # not a verdict on the events: the check could not run
        raise RuntimeError(f"{source}: the landed check's query failed: {error!r}") from error
    landed = {int(str(seq)): int(str(n)) for seq, n in rows}
    expected = dict.fromkeys(acknowledged, events)
    if landed != expected:
        missing = sorted(set(expected) - set(landed))[:5]
        extra = sorted(set(landed) - set(expected))[:5]
        wrong = sorted(s for s in expected if s in landed and landed[s] != events)[:5]
        raise AssertionError(
            f"{source}: {len(landed)} requests' events stored, {len(expected)} acknowledged; "
            f"missing {missing}, unacknowledged {extra}, not exactly once {wrong}"
        )


def run_bench(args: argparse.Namespace, work: Path) -> dict:
    load_before = os.getloadavg()[0]
    server = Server(work / "env")
    try:
        phases: list[Phase] = []
        for clients in args.concurrency:
            source = f"events_{clients}"
            server.sql(f"CREATE SOURCE {source} FROM WEBHOOK BODY FORMAT JSON")
            phase = _phase(server, "1 event", source, event_body, 1, clients, args.seconds)
            phases.append(phase)
            print(_line(phase), flush=True)
        clients = args.array_concurrency
        server.sql("CREATE SOURCE batches FROM WEBHOOK BODY FORMAT JSON ARRAY")
        phase = _phase(
            server, "ARRAY of 100", "batches", array_body, ARRAY_EVENTS, clients, args.seconds
        )
        phases.append(phase)
        print(_line(phase), flush=True)
    finally:
        server.stop()
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.machine(),
            "python": platform.python_version(),
            "load_average_before": round(load_before, 2),
        },
        "seconds_per_phase": args.seconds,
        "phases": [asdict(p) for p in phases],
        "checked": (
            "each source holds exactly the events of the requests that got a 200, "
            "each once (by request number)"
        ),
    }


def _line(phase: Phase) -> str:
    return (
        f"{phase.name:>12} x{phase.concurrency:<3} {phase.requests_per_s:>9,.1f} req/s "
        f"{phase.events_per_s:>10,.1f} events/s  p50 {phase.p50_ms:.1f} ms  "
        f"p99 {phase.p99_ms:.1f} ms  cpu/req {_ms(phase.server_cpu_ms_per_request)} server "
        f"{_ms(phase.client_cpu_ms_per_request)} client  errors {phase.errors}"
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


def markdown(document: dict) -> str:
    machine = document["machine"]
    lines = [
        f"Webhook benchmark ({document['seconds_per_phase']:g} s per phase; "
        f"{machine['cpus']} cores, {machine['platform']}, Python {machine['python']}; "
        "server and clients share the machine, loopback; load average "
        f"{machine['load_average_before']:g} before the run; `make bench-webhook`)",
        "",
        "| body | concurrent clients | requests/s | events/s | p50 to 200 | p99 to 200 "
        "| server CPU per request | load generator CPU per request | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in document["phases"]:
        lines.append(
            f"| {p['name']} | {p['concurrency']} | {p['requests_per_s']:,.0f} | "
            f"{p['events_per_s']:,.0f} | {p['p50_ms']:.1f} ms | {p['p99_ms']:.1f} ms | "
            f"{_ms(p['server_cpu_ms_per_request'])} | {_ms(p['client_cpu_ms_per_request'])} | "
            f"{p['errors']} |"
        )
    lines += ["", f"Checked: {document['checked']}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time per phase")
    parser.add_argument(
        "--concurrency",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 16, 64],
        help="client counts for the single-event phases (comma-separated)",
    )
    parser.add_argument("--array-concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as work:
        document = run_bench(args, Path(work))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "webhook.json").write_text(json.dumps(document, indent=2) + "\n")
    (args.out / "webhook.md").write_text(markdown(document))
    print(markdown(document))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
