"""Secrets at rest: Fernet (from ``cryptography``) with one key per installation.

The key comes from ``UPWATCH_SECRET_KEY`` (or ``UPWATCH_SECRET_KEY_FILE``, a systemd
credential): a urlsafe-base64 32-byte Fernet key (``upwatch`` prints one with
``python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``).
Without it, the key is read from ``<data_dir>/secret.key``, generated there (mode 0600) the
first time it is needed: the embedded default needs no set-up. Every node that shares a
database must use the same key; a node that generated its own cannot read the others'
secrets, which the probe then reports (``request secrets cannot be decrypted``).

Encrypted values are Fernet tokens (ASCII); a database row or dump holds no usable secret.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from engine.runtime.settings import Settings

log = logging.getLogger(__name__)

KEY_FILE = "secret.key"


class SecretUnreadable(ValueError):
    """A stored secret that this key cannot decrypt (another key, or a damaged value)."""


class SecretBox:
    """Encrypts and decrypts short strings; the key is loaded on first use."""

    def __init__(self, key: bytes | None = None, *, key_file: Path | None = None) -> None:
        if key is None and key_file is None:
            raise ValueError("a key or a key file is needed")
        self._key = key
        self._key_file = key_file
        self._fernet: Fernet | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretBox:
        if settings.secret_key is not None:
            return cls(settings.secret_key.get_secret_value().strip().encode("ascii"))
        return cls(key_file=settings.data_dir / KEY_FILE)

    def _box(self) -> Fernet:
        f = self._fernet
        if f is None:
            key = self._key if self._key is not None else _file_key(self._key_file)
            f = self._fernet = Fernet(key)
        return f

    def encrypt(self, plain: str) -> str:
        return self._box().encrypt(plain.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        try:
            return self._box().decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError, ValueError) as exc:
            raise SecretUnreadable("stored secret cannot be decrypted with this key") from exc


# Plain values written before secrets were encrypted (migration 0003): an API token and an
# http(s) URL never look like a Fernet token ("gAAAAA..."), so both read unambiguously.
_PLAIN_PREFIXES = ("uw_", "http://", "https://")


def reveal(box: SecretBox, value: str | None) -> str | None:
    """A stored account secret in clear: decrypted, or as it is when written in clear
    before encryption (until :meth:`Store.encrypt_account_secrets` has run)."""
    if value is None or value.startswith(_PLAIN_PREFIXES):
        return value
    return box.decrypt(value)


def is_plain(value: str | None) -> bool:
    return value is not None and value.startswith(_PLAIN_PREFIXES)


_DEFAULT: SecretBox | None = None


def default_box() -> SecretBox:
    """The box of a store opened without one (tools, tests): the settings of the
    environment (``UPWATCH_SECRET_KEY``/``_FILE``, else ``<UPWATCH_DATA_DIR>/secret.key``),
    one per process."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = SecretBox.from_settings(Settings())
    return _DEFAULT


def _file_key(path: Path | None) -> bytes:
    """The key in ``path``, created there (0600, atomically) when missing."""
    assert path is not None
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, key + b"\n")
    finally:
        os.close(fd)
    try:
        # Another process may have won the race: the first link stands, both read it.
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    log.warning(
        "generated a secret key in %s; set UPWATCH_SECRET_KEY on every node sharing "
        "this database", path,
    )
    return path.read_bytes().strip()
