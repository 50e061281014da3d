"""The key secrets are encrypted with at rest, and the encryption itself.

Why a key outside the data directory: whoever copies the data directory (a
backup, a stolen disk, another local user) must not get the secrets with
it. The key (32 random bytes, base64) comes from `Config.secrets_key`, a
key file (`Config.secrets_key_file`, `tidemark serve --secrets-key-file`;
refused inside the data directory) or the `TIDEMARK_SECRETS_KEY`
environment variable, in that order; `tidemark gen-secrets-key` prints a
new one. Values are sealed with AES-256-GCM, the secret's id as associated
data, so a stored value cannot be moved to another secret.
`tidemark rotate-secrets-key` re-encrypts every value under a new key in one
compare-and-set of the catalog record (`adapter/secrets.py`).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from coordinator_lib.adapter.errors import AdapterError

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Config

ENV_VAR = "TIDEMARK_SECRETS_KEY"
SEALED_PREFIX = "aes256gcm:"  # stored values without it are pre-encryption base64


class SecretsKeyError(AdapterError):
    """No usable key: secrets cannot be written or read (55000)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="55000")


def generate_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def parse_key(text: str, source: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise SecretsKeyError(f"the secrets key in {source} is not base64") from None
    if len(key) != 32:
        raise SecretsKeyError(
            f"the secrets key in {source} must be 32 bytes (base64), not {len(key)}"
        )
    return key


def read_key_file(path: str | os.PathLike[str], data_dir: str | None) -> bytes:
    """A key file's key; refused when it lies inside the data directory."""
    resolved = Path(path).resolve()
    if data_dir is not None and resolved.is_relative_to(Path(data_dir).resolve()):
        raise SecretsKeyError(
            f"the secrets key file {path} is inside the data directory {data_dir}: "
            "keep it elsewhere, or a copy of the data directory holds the key too"
        )
    try:
        return parse_key(resolved.read_text(), str(path))
    except OSError as error:
        raise SecretsKeyError(
            f"cannot read the secrets key file {path}: {error.strerror}"
        ) from None


def configured_key(config: Config) -> bytes | None:
    """The key `config` names, or None when none is configured."""
    if config.secrets_key:
        return parse_key(config.secrets_key, "the configuration")
    if config.secrets_key_file:
        return read_key_file(config.secrets_key_file, config.data_dir)
    if os.environ.get(ENV_VAR):
        return parse_key(os.environ[ENV_VAR], ENV_VAR)
    return None


def env_key() -> bytes | None:
    """The key in the environment (how a supervisor hands it to its workers)."""
    value = os.environ.get(ENV_VAR)
    return parse_key(value, ENV_VAR) if value else None


def worker_environment(config: Config) -> dict[str, str] | None:
    """The environment of this process's workers: ours, with the key it
    uses (a worker reads connections' passwords); None: ours as it is."""
    key = configured_key(config)
    if key is None:
        return None
    return {**os.environ, ENV_VAR: base64.b64encode(key).decode("ascii")}


def require_key(config: Config) -> bytes:
    key = configured_key(config)
    if key is None:
        raise SecretsKeyError(
            f"no secrets key configured: set {ENV_VAR} or start with --secrets-key-file "
            "(tidemark gen-secrets-key makes one)"
        )
    return key


def seal(key: bytes, secret_id: str, value: bytes) -> str:
    nonce = secrets.token_bytes(12)
    sealed = AESGCM(key).encrypt(nonce, value, secret_id.encode())
    return SEALED_PREFIX + base64.b64encode(nonce + sealed).decode("ascii")


def unseal(key: bytes | None, secret_id: str, stored: str) -> bytes:
    """The value of a stored secret (legacy unencrypted base64 too)."""
    if not stored.startswith(SEALED_PREFIX):
        return base64.b64decode(stored)
    if key is None:
        raise SecretsKeyError(
            f"no secrets key configured to read secret {secret_id}: set {ENV_VAR}"
        )
    raw = base64.b64decode(stored[len(SEALED_PREFIX) :])
    try:
        return AESGCM(key).decrypt(raw[:12], raw[12:], secret_id.encode())
    except InvalidTag:
        raise SecretsKeyError(
            f"secret {secret_id} does not decrypt with the configured secrets key"
        ) from None
