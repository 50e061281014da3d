"""Who may connect and who may do what (issue 18), through the front doors:
psycopg (libpq) and pg8000 over pgwire on 127.0.0.1, HTTP /api/sql.

The environments here run without a Spark session (statements stay in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg8000.exceptions
import pg8000.native
import psycopg
import pytest
import requests

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config

ADMIN, ADMIN_PASSWORD = "admin", "adm1n-pw"


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Environment]:
    """An environment with one configured superuser: passwords for everyone."""
    env = Environment(
        fast_config(tmp_path / "env", users={ADMIN: ADMIN_PASSWORD}), pgwire_port=0, http_port=0
    )
    env.start()
    try:
        yield env
    finally:
        env.stop()


def connect(env: Environment, user: str, password: str | None = None) -> psycopg.Connection:
    dsn = f"host=127.0.0.1 port={env.pgwire.port} user={user} dbname=materialize"
    dsn += f" password={password}" if password is not None else ""
    return psycopg.connect(dsn + " connect_timeout=10", autocommit=True)


def pg8000_failure(env: Environment, user: str, password: str) -> dict[str, Any]:
    with pytest.raises(pg8000.exceptions.DatabaseError) as refused:
        pg8000.native.Connection(
            user, host="127.0.0.1", port=env.pgwire.port, password=password, database="materialize"
        )
    return refused.value.args[0]


def test_scram_with_libpq_and_pg8000(secured: Environment) -> None:
    # libpq refuses to send a password over anything but SCRAM when told so:
    # a server asking for cleartext fails this connection.
    admin_scram_only = (
        f"host=127.0.0.1 port={secured.pgwire.port} user={ADMIN} password={ADMIN_PASSWORD} "
        "dbname=materialize require_auth=scram-sha-256 connect_timeout=10"
    )
    with psycopg.connect(admin_scram_only, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (ADMIN,)
        conn.execute("CREATE ROLE bob LOGIN PASSWORD 'b0b-pw'")
    scram_only = (
        f"host=127.0.0.1 port={secured.pgwire.port} user=bob password=b0b-pw "
        "dbname=materialize require_auth=scram-sha-256 connect_timeout=10"
    )
    with psycopg.connect(scram_only) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("bob",)
    pg = pg8000.native.Connection(
        "bob", host="127.0.0.1", port=secured.pgwire.port, password="b0b-pw", database="materialize"
    )
    assert pg.run("SELECT 1 + 1") == [[2]]
    pg.close()

    # Wrong password, unknown user, no password at all: 28P01 alike.
    for user, password in (("bob", "wrong"), ("nobody", "x"), (ADMIN, "wrong")):
        fields = pg8000_failure(secured, user, password)
        assert (fields["C"], fields["S"]) == ("28P01", "FATAL"), (user, fields)
        assert f'password authentication failed for user "{user}"' == fields["M"]
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            connect(secured, user, password)
    with pytest.raises(psycopg.OperationalError, match="password"):
        connect(secured, "materialize")  # the trusted default user is gone too

    # NOLOGIN, then a changed password.
    with connect(secured, ADMIN, ADMIN_PASSWORD) as conn:
        conn.execute("ALTER ROLE bob NOLOGIN")
    assert pg8000_failure(secured, "bob", "b0b-pw")["C"] == "28P01"
    with connect(secured, ADMIN, ADMIN_PASSWORD) as conn:
        conn.execute("ALTER ROLE bob LOGIN PASSWORD 'new-pw'")
        log = conn.execute("SELECT sql FROM mz_internal.mz_statement_log").fetchall()
    assert not any("b0b-pw" in sql or "new-pw" in sql for (sql,) in log)
    assert any("PASSWORD '********'" in sql for (sql,) in log)
    assert pg8000_failure(secured, "bob", "b0b-pw")["C"] == "28P01"
    with connect(secured, "bob", "new-pw") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_http_requires_basic_auth_once_users_exist(secured: Environment) -> None:
    url = f"http://127.0.0.1:{secured.http.port}/api/sql"
    body = {"query": "SELECT current_user"}
    anonymous = requests.post(url, json=body, timeout=30)
    assert anonymous.status_code == 401, anonymous.text
    wrong = requests.post(url, json=body, auth=(ADMIN, "nope"), timeout=30)
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "28P01"
    right = requests.post(url, json=body, auth=(ADMIN, ADMIN_PASSWORD), timeout=30)
    assert right.status_code == 200, right.text
    assert right.json()["results"][0]["rows"] == [[ADMIN]]


def test_trust_until_a_role_has_a_password(tmp_path: Path) -> None:
    """No users configured: loopback connections are trusted (as today). The
    first role with a password turns authentication on for everybody."""
    env = Environment(fast_config(tmp_path / "env"), pgwire_port=0, http_port=0)
    env.start()
    try:
        url = f"http://127.0.0.1:{env.http.port}/api/sql"
        with connect(env, "materialize") as conn:
            conn.execute("CREATE ROLE carol LOGIN")  # no password: still trusted
        with connect(env, "anyone") as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert requests.post(url, json={"query": "SELECT 1"}, timeout=30).status_code == 200
        with connect(env, "materialize") as conn:
            conn.execute("CREATE ROLE root LOGIN SUPERUSER PASSWORD 'r00t'")
        assert pg8000_failure(env, "materialize", "")["C"] == "28P01"
        assert pg8000_failure(env, "carol", "x")["C"] == "28P01"
        assert requests.post(url, json={"query": "SELECT 1"}, timeout=30).status_code == 401
        with connect(env, "root", "r00t") as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        env.stop()


def denied(conn: psycopg.Connection, sql: str) -> str:
    """Run `sql`, expect 42501; the error message."""
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as error:
        conn.execute(sql)
    assert error.value.diag.sqlstate == "42501"
    return str(error.value.diag.message_primary)


WEBHOOK = (
    "CREATE SOURCE {name} FROM WEBHOOK BODY FORMAT TEXT "
    "CHECK (WITH (BODY, SECRET s) constant_time_eq(body, s))"
)


def test_grant_and_revoke(tmp_path: Path) -> None:
    config = fast_config(tmp_path / "env", users={ADMIN: ADMIN_PASSWORD})
    env = Environment(config, pgwire_port=0, http_port=0)
    env.start()
    try:
        with connect(env, ADMIN, ADMIN_PASSWORD) as admin:
            admin.execute("CREATE ROLE alice LOGIN PASSWORD 'a'")
            admin.execute("CREATE ROLE bob LOGIN PASSWORD 'b'")
        with connect(env, "alice", "a") as alice:
            # Nobody but the owner (and superusers) creates in public by default.
            assert denied(alice, "CREATE TABLE t (x int)") == "permission denied for schema public"
            with connect(env, ADMIN, ADMIN_PASSWORD) as admin:
                admin.execute("GRANT CREATE ON SCHEMA public TO alice, bob")
            alice.execute("CREATE TABLE t (x int)")
            alice.execute("INSERT INTO t VALUES (1)")
            alice.execute("CREATE VIEW v AS SELECT x FROM t")
            alice.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
            alice.execute("CREATE SECRET s AS 'shh'")
            assert alice.execute("SELECT x FROM v").fetchall() == [(1,)]
            with connect(env, "bob", "b") as bob:
                assert denied(bob, "SELECT * FROM t") == "permission denied for table t"
                assert denied(bob, "INSERT INTO t VALUES (2)") == "permission denied for table t"
                assert denied(bob, "DELETE FROM t") == "permission denied for table t"
                assert denied(bob, "UPDATE t SET x = 0") == "permission denied for table t"
                assert denied(bob, "SELECT * FROM v") == "permission denied for view v"
                assert (
                    denied(bob, "SELECT * FROM mv") == "permission denied for materialized view mv"
                )
                assert denied(bob, "COPY (SELECT * FROM t) TO STDOUT") == (
                    "permission denied for table t"
                )
                assert denied(bob, "DROP TABLE t") == "must be owner of table t"
                assert denied(bob, "DROP VIEW v") == "must be owner of view v"
                assert denied(bob, "DROP SECRET s") == "must be owner of secret s"
                assert denied(bob, "ALTER SECRET s AS 'mine'") == "must be owner of secret s"
                assert denied(bob, WEBHOOK.format(name="wh")) == "permission denied for secret s"
                assert denied(bob, "GRANT SELECT ON t TO bob") == "must be owner of table t"

                alice.execute("GRANT SELECT, INSERT ON TABLE t TO bob")
                alice.execute("GRANT SELECT ON v TO bob")
                alice.execute("GRANT USAGE ON SECRET s TO bob")
                bob.execute("INSERT INTO t VALUES (2)")
                assert bob.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]
                assert bob.execute("SELECT x FROM v ORDER BY x").fetchall() == [(1,), (2,)]
                bob.execute(WEBHOOK.format(name="wh"))  # bob owns wh
                # CASCADE does not take along what others own.
                bob.execute("CREATE TABLE b (x int)")
                bob.execute("GRANT SELECT ON b TO alice")
                alice.execute("CREATE VIEW av AS SELECT x FROM b")
                assert denied(bob, "DROP TABLE b CASCADE") == "must be owner of view av"
                alice.execute("DROP VIEW av")
                bob.execute("DROP TABLE b CASCADE")
                assert denied(bob, "DELETE FROM t") == "permission denied for table t"
                assert denied(bob, "DROP TABLE t") == "must be owner of table t"
                alice.execute("GRANT UPDATE ON t TO bob")
                alice.execute("GRANT SELECT ON mv TO bob")
                bob.execute("UPDATE t SET x = 2 WHERE x = 2")
                assert bob.execute("SELECT n FROM mv").fetchone() == (2,)

                # A schema of alice's: bob needs USAGE on it as well.
                with connect(env, ADMIN, ADMIN_PASSWORD) as admin:
                    admin.execute("GRANT CREATE ON DATABASE materialize TO alice")
                alice.execute("CREATE SCHEMA private")
                alice.execute("CREATE TABLE private.p (x int)")
                alice.execute("GRANT SELECT ON private.p TO bob")
                assert (
                    denied(bob, "SELECT * FROM private.p") == "permission denied for schema private"
                )
                assert denied(bob, "CREATE TABLE private.q (x int)") == (
                    "permission denied for schema private"
                )
                alice.execute("GRANT USAGE ON SCHEMA private TO bob")
                assert bob.execute("SELECT count(*) FROM private.p").fetchone() == (0,)
                assert denied(bob, "CREATE TABLE private.q (x int)") == (
                    "permission denied for schema private"
                )
                alice.execute("GRANT CREATE ON SCHEMA private TO bob")
                bob.execute("CREATE TABLE private.q (x int)")
                bob.execute("DROP TABLE private.q")
                alice.execute("REVOKE USAGE ON SCHEMA private FROM bob")
                assert (
                    denied(bob, "SELECT * FROM private.p") == "permission denied for schema private"
                )
                alice.execute("DROP TABLE private.p")

                alice.execute("REVOKE SELECT ON t FROM bob")
                assert denied(bob, "SELECT * FROM t") == "permission denied for table t"
                bob.execute("INSERT INTO t VALUES (3)")  # INSERT stays granted
                assert bob.execute("SELECT count(*) FROM v").fetchone() == (3,)

        # Roles and privileges as system relations.
        with connect(env, ADMIN, ADMIN_PASSWORD) as admin:
            roles = admin.execute(
                "SELECT rolname, rolsuper, rolcanlogin, rolpassword FROM pg_roles ORDER BY rolname"
            ).fetchall()
            assert roles == [
                (ADMIN, True, True, "********"),
                ("alice", False, True, "********"),
                ("bob", False, True, "********"),
            ]
            assert admin.execute(
                "SELECT name FROM mz_roles WHERE NOT rolsuper ORDER BY name"
            ).fetchall() == [("alice",), ("bob",)]
            grants = admin.execute(
                "SELECT grantee, name, object_type, privilege_type "
                "FROM mz_internal.mz_show_all_privileges WHERE name IN ('t', 's', 'wh') "
                "ORDER BY name, grantee, privilege_type"
            ).fetchall()
            assert grants == [
                ("alice", "s", "secret", "OWNER"),
                ("bob", "s", "secret", "USAGE"),
                ("alice", "t", "table", "OWNER"),
                ("bob", "t", "table", "INSERT"),
                ("bob", "t", "table", "UPDATE"),
                ("bob", "wh", "source", "OWNER"),
            ]
    finally:
        env.stop()

    # The grants are in the durable catalog: a new process enforces them.
    env = Environment(config, pgwire_port=0, http_port=0)
    env.start()
    try:
        with connect(env, "bob", "b") as bob:
            assert denied(bob, "SELECT * FROM t") == "permission denied for table t"
            assert bob.execute("SELECT count(*) FROM v").fetchone() == (3,)
            bob.execute("INSERT INTO t VALUES (4)")
        with connect(env, ADMIN, ADMIN_PASSWORD) as admin:  # superusers bypass every check
            assert admin.execute("SELECT count(*) FROM t").fetchone() == (4,)
            with pytest.raises(psycopg.errors.DependentObjectsStillExist):
                admin.execute("DROP ROLE alice")  # she owns objects
            admin.execute("DROP SOURCE wh")
            admin.execute("DROP VIEW v")
            admin.execute("DROP MATERIALIZED VIEW mv")
            admin.execute("DROP TABLE t")
            admin.execute("DROP SECRET s")
            with pytest.raises(psycopg.errors.DependentObjectsStillExist) as owner:
                admin.execute("DROP ROLE alice")
            assert owner.value.diag.message_detail == "owner of schema materialize.private"
            admin.execute("DROP SCHEMA private")
            admin.execute("DROP ROLE alice")
            assert [r for (r,) in admin.execute("SELECT name FROM mz_roles").fetchall()] == [
                ADMIN,
                "bob",
            ]
    finally:
        env.stop()
