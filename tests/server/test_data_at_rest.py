"""What another local user or a copy of the data directory gets (issue 18):
private files, and secrets only as ciphertext under a key kept elsewhere."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import requests

from coordinator_lib.cli import main
from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config

FIRST, SECOND = b"first-Secret-4711", b"second-Secret-0815"
ENV_VAR = "TIDEMARK_SECRETS_KEY"


def generate_key() -> str:
    """What `tidemark gen-secrets-key` prints: 32 random bytes, base64."""
    return base64.b64encode(os.urandom(32)).decode()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def start(data_dir: Path, **settings: object) -> Environment:
    env = Environment(fast_config(data_dir, **settings), pgwire_port=0, http_port=0)
    env.start()
    return env


def sql(env: Environment, *statements: str) -> None:
    dsn = f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def webhook_accepts(env: Environment, body: bytes) -> bool:
    """The webhook source `wh` checks its body against secret `s`."""
    url = f"http://127.0.0.1:{env.http.port}/api/webhook/materialize/public/wh"
    status = requests.post(url, data=body, timeout=30).status_code
    assert status in (200, 400), status
    return status == 200


CREATE_WEBHOOK = (
    "CREATE SOURCE wh FROM WEBHOOK BODY FORMAT BYTES "
    "CHECK (WITH (BODY, SECRET s BYTES) constant_time_eq(body, s))"
)


def raw_files(data_dir: Path) -> bytes:
    """Every byte of the consensus database and its WAL and shared memory."""
    return b"".join(p.read_bytes() for p in data_dir.iterdir() if p.name.startswith("consensus.db"))


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "env"


def test_data_directory_and_files_are_private(data_dir: Path) -> None:
    data_dir.mkdir(mode=0o755)
    (data_dir / "old-file").write_text("made by an older version")
    os.chmod(data_dir / "old-file", 0o644)
    env = start(data_dir)
    try:
        # Enough rows for a blob batch (a small one is carried in the state).
        insert = "INSERT INTO t VALUES " + ", ".join(f"({i})" for i in range(5000))
        sql(env, "CREATE TABLE t (x int)", insert, "CREATE SECRET s AS 'x'")
        assert mode(data_dir) == 0o700
        assert mode(data_dir / "old-file") == 0o600
        names = {p.name for p in data_dir.iterdir()}
        assert {"consensus.db", "consensus.db-wal", "consensus.db-shm"} <= names
        files = [p for p in data_dir.rglob("*") if p.is_file()]
        assert any(p.suffix == ".parquet" for p in files), "the INSERT wrote a batch"
        assert {str(p): mode(p) for p in files if mode(p) != 0o600} == {}
        dirs = [p for p in data_dir.rglob("*") if p.is_dir()]
        assert {str(p): mode(p) for p in dirs if mode(p) != 0o700} == {}
    finally:
        env.stop()


def test_secrets_are_encrypted_at_rest(data_dir: Path) -> None:
    env = start(data_dir)
    try:
        sql(env, f"CREATE SECRET s AS '{FIRST.decode()}'", CREATE_WEBHOOK)
        assert webhook_accepts(env, FIRST)
        sql(env, f"ALTER SECRET s AS '{SECOND.decode()}'")
        assert webhook_accepts(env, SECOND) and not webhook_accepts(env, FIRST)
        raw = raw_files(data_dir)
        sql(env, "DROP SOURCE wh", "DROP SECRET s")
        raw += raw_files(data_dir)
    finally:
        env.stop()
    raw += raw_files(data_dir)
    for value in (FIRST, SECOND):
        for form in (value, base64.b64encode(value), value.hex().encode()):
            assert form not in raw, form


def test_no_key_no_secrets(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    env = start(data_dir)
    try:
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match=ENV_VAR):
            sql(env, "CREATE SECRET s AS 'x'")
    finally:
        env.stop()
    key_file = data_dir / "secrets.key"
    key_file.write_text(generate_key())
    with pytest.raises(SystemExit, match="inside the data directory"):
        main(["serve", "--data-dir", str(data_dir), "--secrets-key-file", str(key_file)])


def test_rotate_secrets_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "env"
    old_key, new_key = tmp_path / "old.key", tmp_path / "new.key"
    old_key.write_text(generate_key())
    new_key.write_text(generate_key())
    monkeypatch.delenv(ENV_VAR, raising=False)
    env = start(data_dir, secrets_key_file=str(old_key))
    try:
        sql(env, f"CREATE SECRET s AS '{FIRST.decode()}'", CREATE_WEBHOOK)
        assert webhook_accepts(env, FIRST)
    finally:
        env.stop()
    before = raw_files(data_dir)
    main(
        [
            "rotate-secrets-key",
            "--data-dir",
            str(data_dir),
            "--old-key-file",
            str(old_key),
            "--new-key-file",
            str(new_key),
        ]
    )
    env = start(data_dir, secrets_key_file=str(new_key))
    try:
        assert webhook_accepts(env, FIRST)
    finally:
        env.stop()
    # The old key no longer opens it: requests are refused (503), not let through.
    env = start(data_dir, secrets_key_file=str(old_key))
    try:
        url = f"http://127.0.0.1:{env.http.port}/api/webhook/materialize/public/wh"
        response = requests.post(url, data=FIRST, timeout=30)
        assert response.status_code == 503, response.text
        assert FIRST.decode() not in response.text
    finally:
        env.stop()
    assert FIRST not in before + raw_files(data_dir)
