"""Secrets at rest: Fernet (from ``cryptography``) with one key per installation.

The key comes from ``UPWATCH_SECRET_KEY`` (or ``UPWATCH_SECRET_KEY_FILE``, a systemd
credential): a urlsafe-base64 32-byte Fernet key (``upwatch`` prints one with
``python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``).
Without it, the key is read from ``<data_dir>/secret.key``, generated there (mode 0600) the
first time it is needed: the embedded default needs no set-up. Every node that shares a
database must use the same key; a node that generated its own cannot read the others'
secrets, which the probe then reports (``request secrets cannot be decrypted``).

Encrypted values are Fernet tokens (ASCII); a database row or dump holds no usable secret.
A key file (``secret.key`` or ``UPWATCH_SECRET_KEY_FILE``) that its group or others may
read is refused (:class:`KeyFileExposed`): a key beside a dump decrypts it.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from engine.runtime.errors import ConfigError
from engine.runtime.settings import Settings

log = logging.getLogger(__name__)

KEY_FILE = "secret.key"


class SecretUnreadable(ValueError):
    """A stored secret that this key cannot decrypt (another key, or a damaged value)."""


class KeyFileExposed(ConfigError):
    """The key file's mode lets its group or others read it."""


def check_key_file(path: Path) -> None:
    """Raise :class:`KeyFileExposed` when ``path`` exists and grants its group or others
    any access; the message says how to fix it. A systemd credential (a file in
    ``$CREDENTIALS_DIRECTORY``, 0440 with an ACL by design) is private to the service and
    passes."""
    creds = os.environ.get("CREDENTIALS_DIRECTORY")
    if creds and Path(path).resolve().is_relative_to(Path(creds).resolve()):
        return
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except (FileNotFoundError, PermissionError):
        return  # none yet; or a directory this user cannot enter, which reading it will say
    if mode & 0o077:
        where = Path(path).absolute()
        raise KeyFileExposed(
            f"the secret key file {where} has mode {mode:04o}: others may read the key that "
            f"decrypts every stored secret; run: chmod 600 {where}"
        )


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
        """The installation's box; raises :class:`KeyFileExposed` for a key file others may
        read (``UPWATCH_SECRET_KEY_FILE``, or ``secret.key`` in the data directory)."""
        named = os.environ.get("UPWATCH_SECRET_KEY_FILE")
        if settings.secret_key is not None:
            if named and "UPWATCH_SECRET_KEY" not in os.environ:
                check_key_file(Path(named))
            return cls(settings.secret_key.get_secret_value().strip().encode("ascii"))
        check_key_file(settings.data_dir / KEY_FILE)
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
        key = path.read_bytes().strip()
    except FileNotFoundError:
        pass
    else:
        check_key_file(path)
        return key
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
