"""TLS on pgwire and HTTP when the server has a certificate (issue 18):
libpq (psycopg) with sslmode=require and verify-full against a test CA,
HTTPS with the CA; without a certificate SSLRequest is answered 'N'."""

from __future__ import annotations

import datetime as dt
import ipaddress
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate it signed for 127.0.0.1 / localhost:
    (ca.pem, server.pem, server.key)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("tidemark test CA"))
        .issuer_name(_name("tidemark test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    paths[2].chmod(0o600)
    return paths


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
