"""TLS on pgwire and HTTP when the server has a certificate (issue 18):
libpq (psycopg) with sslmode=require and verify-full against a test CA,
HTTPS with the CA; without a certificate SSLRequest is answered 'N'."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import requests

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config
from tests.server.certificates import make_certificates


@pytest.fixture
def certificates(tmp_path: Path) -> tuple[Path, Path, Path]:
    return make_certificates(tmp_path)


@pytest.fixture
def tls_environment(tmp_path: Path, certificates: tuple[Path, Path, Path]) -> Iterator[Environment]:
    _, cert, key = certificates
    config = fast_config(tmp_path / "env", users={"admin": "pw"})
    env = Environment(config, pgwire_port=0, http_port=0, tls=(str(cert), str(key)))
    env.start()
    try:
        yield env
    finally:
        env.stop()


def dsn(env: Environment, **settings: str) -> str:
    base = f"host=127.0.0.1 port={env.pgwire.port} dbname=materialize connect_timeout=10"
    return " ".join([base, *(f"{k}={v}" for k, v in settings.items())])


def test_pgwire_tls(tls_environment: Environment, certificates: tuple[Path, Path, Path]) -> None:
    ca = certificates[0]
    for mode in ({"sslmode": "require"}, {"sslmode": "verify-full", "sslrootcert": str(ca)}):
        with psycopg.connect(
            dsn(tls_environment, user="admin", password="pw", **mode), autocommit=True
        ) as conn:
            assert conn.pgconn.ssl_in_use, mode
            conn.execute("CREATE TABLE IF NOT EXISTS t (x int)")
            values = ", ".join(f"({i})" for i in range(3000))
            conn.execute(f"INSERT INTO t VALUES {values}")
            # Many rows stream out while the connection's reader thread waits
            # for the next message on the same TLS connection.
            rows = conn.execute("SELECT x FROM t").fetchall()
            assert len(rows) % 3000 == 0 and max(rows) == (2999,)
            # A cancel request comes over its own (TLS) connection.
            far = int(time.time() * 1000) + 3_600_000
            failures: list[Exception] = []

            def cancel(conn: psycopg.Connection = conn, failures: list = failures) -> None:
                try:
                    conn.cancel_safe()
                except Exception as error:  # e.g. "SSL error: unexpected eof"
                    failures.append(error)

            timer = threading.Timer(0.5, cancel)
            timer.start()
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute(f"SELECT * FROM t AS OF {far}")
            timer.join()
            assert failures == []
            assert conn.execute("SELECT 1").fetchone() == (1,)
    # A client that trusts another CA refuses the server's certificate.
    other = certificates[0].parent / "other"
    other.mkdir()
    other_ca = make_certificates(other)[0]
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        psycopg.connect(
            dsn(
                tls_environment,
                user="admin",
                password="pw",
                sslmode="verify-full",
                sslrootcert=str(other_ca),
            )
        )


def test_https(tls_environment: Environment, certificates: tuple[Path, Path, Path]) -> None:
    url = f"https://127.0.0.1:{tls_environment.http.port}/api/sql"
    assert tls_environment.http.url.startswith("https://")
    response = requests.post(
        url,
        json={"query": "SELECT 1"},
        auth=("admin", "pw"),
        verify=str(certificates[0]),
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json()["results"][0]["rows"] == [[1]]
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(url.replace("https", "http"), json={"query": "SELECT 1"}, timeout=30)


def test_no_certificate_answers_n(tmp_path: Path) -> None:
    env = Environment(fast_config(tmp_path / "env"), pgwire_port=0, http_port=0)
    env.start()
    try:
        with pytest.raises(psycopg.OperationalError, match="SSL"):
            psycopg.connect(dsn(env, user="materialize", sslmode="require"))
        with psycopg.connect(dsn(env, user="materialize", sslmode="prefer")) as conn:
            assert not conn.pgconn.ssl_in_use
    finally:
        env.stop()


def test_serve_wants_certificate_and_key_together(tmp_path: Path) -> None:
    from coordinator_lib.cli import main

    with pytest.raises(SystemExit, match="--tls-cert and --tls-key go together"):
        main(["serve", "--data-dir", str(tmp_path / "env"), "--tls-cert", str(tmp_path / "c")])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_tidemark_serve_secured(tmp_path: Path, certificates: tuple[Path, Path, Path]) -> None:
    """`tidemark serve --superuser --tls-cert --tls-key --secrets-key-file` as
    an operator starts it: only TLS + SCRAM for the superuser get in, secrets
    work with the key file, the data directory is private."""
    ca, cert, key = certificates
    key_file = tmp_path / "secrets.key"
    key_file.write_text(
        subprocess.run(
            [sys.executable, "-m", "coordinator_lib.cli", "gen-secrets-key"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    data_dir, pg_port, http_port = tmp_path / "d", _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if k != "TIDEMARK_SECRETS_KEY"}
    env["TIDEMARK_SUPERUSER_PASSWORD"] = "s3cret-admin"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator_lib.cli",
            "serve",
            "--data-dir",
            str(data_dir),
            "--pgwire-port",
            str(pg_port),
            "--http-port",
            str(http_port),
            "--superuser",
            "admin",
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(key),
            "--secrets-key-file",
            str(key_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    base = f"host=127.0.0.1 port={pg_port} dbname=materialize connect_timeout=5"
    secure = f"{base} user=admin password=s3cret-admin sslmode=verify-full sslrootcert={ca}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                conn = psycopg.connect(secure, autocommit=True)
                break
            except psycopg.OperationalError:
                if time.time() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.5)
        with conn:
            assert conn.pgconn.ssl_in_use
            conn.execute("CREATE SECRET s AS 'from-the-key-file'")
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(f"{base} user=admin password=wrong sslmode=require")
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(f"{base} user=materialize password=x sslmode=require")
        response = requests.post(
            f"https://127.0.0.1:{http_port}/api/sql",
            json={"query": "SELECT name FROM mz_secrets"},
            auth=("admin", "s3cret-admin"),
            verify=str(ca),
            timeout=30,
        )
        assert response.json()["results"][0]["rows"] == [["s"]]
        assert stat.S_IMODE(os.stat(data_dir).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(data_dir / "consensus.db").st_mode) == 0o600
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert b"from-the-key-file" not in b"".join(
        p.read_bytes() for p in data_dir.iterdir() if p.name.startswith("consensus.db")
    )


def test_serve_superuser_needs_its_password(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from coordinator_lib.cli import main

    monkeypatch.delenv("TIDEMARK_SUPERUSER_PASSWORD", raising=False)
    with pytest.raises(SystemExit, match="TIDEMARK_SUPERUSER_PASSWORD"):
        main(["serve", "--data-dir", str(tmp_path / "env"), "--superuser", "admin"])
