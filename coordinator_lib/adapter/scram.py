"""SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it: the stored
verifier, a password check against it, and the server side of the exchange.

Why a verifier: the catalog keeps `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`
(PostgreSQL's `pg_authid.rolpassword` format), never the password, so neither
the catalog record nor a copy of it lets anyone log in. Passwords are used as
UTF-8 bytes without SASLprep normalization (PostgreSQL falls back to the same
for passwords that SASLprep rejects); channel binding is not offered.

    exchange = ScramExchange(verifier)          # None: unknown user (mock exchange)
    server_first = exchange.first(client_first)  # AuthenticationSASLContinue
    server_final = exchange.final(client_final)  # AuthenticationSASLFinal, or ScramFailure
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096  # PostgreSQL's scram_iterations default


class ScramFailure(Exception):
    """Authentication failed (wrong password, unknown user or a bad message)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return hashlib.sha256(client_key).digest(), server_key


def make_verifier(password: str, iterations: int = ITERATIONS) -> str:
    """The verifier to store for `password` (a fresh random salt)."""
    salt = secrets.token_bytes(16)
    stored_key, server_key = _keys(password, salt, iterations)
    return f"{MECHANISM}${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def _parse(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    mechanism, params, keys = verifier.split("$")
    if mechanism != MECHANISM:
        raise ValueError(f"not a {MECHANISM} verifier")
    iterations, salt = params.split(":")
    stored_key, server_key = keys.split(":")
    return (
        int(iterations),
        base64.b64decode(salt),
        base64.b64decode(stored_key),
        base64.b64decode(server_key),
    )


def verify_password(verifier: str, password: str) -> bool:
    """Whether `password` is the one `verifier` was made from (HTTP basic auth)."""
    iterations, salt, stored_key, _ = _parse(verifier)
    return hmac.compare_digest(_keys(password, salt, iterations)[0], stored_key)


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ScramFailure(f"malformed SCRAM message attribute {part!r}")
        out[name] = value
    return out


class ScramExchange:
    """The server's half of one SCRAM-SHA-256 exchange.

    With `verifier=None` (an unknown user, or one without a password) the
    exchange runs on made-up keys and always fails at the end, as
    PostgreSQL's mock authentication does, so a client cannot tell unknown
    users from wrong passwords."""

    def __init__(self, verifier: str | None) -> None:
        self.known = verifier is not None
        if verifier is None:
            verifier = make_verifier(secrets.token_hex(16), ITERATIONS)
        self.iterations, self.salt, self.stored_key, self.server_key = _parse(verifier)
        self.client_first_bare = ""
        self.server_first = ""
        self.nonce = ""

    def first(self, client_first: str) -> str:
        """Take the client-first-message, return the server-first-message."""
        gs2, sep, bare = client_first.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not (sep and sep2) or gs2 not in ("n", "y"):
            raise ScramFailure("channel binding is not supported; use a client that skips it")
        attributes = _attributes(bare)
        client_nonce = attributes.get("r")
        if not client_nonce:
            raise ScramFailure("SCRAM client-first-message without a nonce")
        self.client_first_bare = bare
        self.gs2_header = f"{gs2},{authzid},"
        self.nonce = client_nonce + _b64(secrets.token_bytes(18))
        self.server_first = f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}"
        return self.server_first

    def final(self, client_final: str) -> str:
        """Check the client-final-message's proof; the server-final-message."""
        without_proof, sep, proof_part = client_final.rpartition(",p=")
        if not sep:
            raise ScramFailure("SCRAM client-final-message without a proof")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self.nonce:
            raise ScramFailure("SCRAM nonce mismatch")
        if attributes.get("c") != _b64(self.gs2_header.encode("ascii")):
            raise ScramFailure("SCRAM channel binding mismatch")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramFailure("malformed SCRAM proof") from None
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(self.stored_key, auth_message, hashlib.sha256).digest()
        if len(proof) != len(signature):
            raise ScramFailure("malformed SCRAM proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not (
            self.known and hmac.compare_digest(hashlib.sha256(client_key).digest(), self.stored_key)
        ):
            raise ScramFailure("wrong password")
        server_signature = hmac.new(self.server_key, auth_message, hashlib.sha256).digest()
        return f"v={_b64(server_signature)}"
