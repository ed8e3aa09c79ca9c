"""Where OAuth logins are kept: the operating system's keyring when one works, else a private file.

A login (tokens, the registered client, the authorization server's metadata) is a credential of
the *user*, not of a project: it never lives in the project folder, so it cannot be committed,
recorded into fixtures/ or generated into out/. One record per key (server URL + client,
client/oauth_records.py's `store_key`), so several projects using the same server share one login and
projects using different servers or clients never clash.

- Keyring (the optional `keyring` package, `pip install 'codemode-gen[keyring]'`): used when its
  backend is a real one (macOS Keychain, Windows Credential Locker, Secret Service/KWallet); a
  headless Linux box or a container has none (`keyring`'s fail/null backends) and gets the file.
  A keyring that fails at run time (locked, D-Bus gone) falls back to the file for that record;
  an empty marker file beside the file store says which keys have a keyring login, so servers
  that never had one do not touch (or unlock) the keyring.
- File: `$CODEMODE_AUTH_DIR`, else `$XDG_CONFIG_HOME/codemode-gen/auth` (`~/.config/...`), one
  `<sha256 of the key>.json` per record, mode 0600 in a 0700 folder, written atomically (temp
  file, fsync, rename), so a crash or a second process never leaves half a token file. A file or
  folder other users could read or replace is refused with the `chmod` that fixes it: tokens
  that others may have read are not used, and fail closed.

`CODEMODE_TOKEN_STORE` = `auto` (default) | `keyring` | `file` chooses explicitly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "AUTH_DIR_ENV",
    "STORE_ENV",
    "FileStore",
    "KeyringStore",
    "TokenStore",
    "TokenStoreError",
    "default_auth_dir",
    "open_store",
]

STORE_ENV = "CODEMODE_TOKEN_STORE"
AUTH_DIR_ENV = "CODEMODE_AUTH_DIR"
STORE_CHOICES = ("auto", "keyring", "file")
KEYRING_SERVICE = "codemode-gen"
# Bounds what is read from one token file or keyring entry: a record is a few KiB; a huge or
# endless file (a device, a mistake) must not be read whole into memory.
MAX_RECORD_BYTES = 1024 * 1024
RECORD_VERSION = 1


class TokenStoreError(Exception):
    """The store cannot be used as it is (unsafe permissions, unreadable, no keyring); `hint` says
    the exact fix."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class TokenStore(Protocol):
    """A place for login records (JSON objects), by key."""

    def describe(self, key: str) -> str:
        """Where the record of `key` is kept, for messages (never its content)."""
        ...

    def load(self, key: str) -> dict[str, Any] | None: ...

    def save(self, key: str, record: dict[str, Any]) -> None: ...

    def delete(self, key: str) -> bool: ...


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _decode(text: str | bytes, where: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise TokenStoreError(
            f"{where}: the stored login is not valid JSON (damaged)",
            hint="log in again with `codemode-gen auth login ID` (it replaces the record)",
        ) from None
    if not isinstance(record, dict):
        raise TokenStoreError(
            f"{where}: the stored login is not a JSON object",
            hint="log in again with `codemode-gen auth login ID`",
        )
    return record


def default_auth_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's config folder for logins: never inside a project."""
    env = os.environ if environ is None else environ
    if env.get(AUTH_DIR_ENV):
        return Path(env[AUTH_DIR_ENV])
    if sys.platform == "win32" and env.get("APPDATA"):
        return Path(env["APPDATA"]) / "codemode-gen" / "auth"
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "codemode-gen" / "auth"


class FileStore:
    """One private file per record (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, key: str) -> Path:
        return self.folder / f"{_digest(key)[:40]}.json"

    def describe(self, key: str) -> str:
        return f"file {self.path(key)}"

    def _check_private(self, path: Path, info: os.stat_result, *, folder: bool) -> None:
        if os.name != "posix":  # no POSIX modes: the folder is the user's profile
            return
        if info.st_uid != os.getuid():
            raise TokenStoreError(
                f"{path}: owned by another user (uid {info.st_uid}); refusing to use its tokens",
                hint=f"remove it (`rm -r {path}`) and log in again, or set {AUTH_DIR_ENV} to a folder of yours",
            )
        mode = stat.S_IMODE(info.st_mode)
        if folder and mode & 0o022:
            raise TokenStoreError(
                f"{path}: the login folder is writable by other users (mode {mode:04o}); refusing to use it",
                hint=f"chmod 700 {path}",
            )
        if not folder and mode & 0o077:
            raise TokenStoreError(
                f"{path}: token file is accessible by other users (mode {mode:04o}); refusing to use"
                " tokens others may have read",
                hint=f"chmod 600 {path}  (and if others could read it: `codemode-gen auth logout ID`, then log in again)",
            )

    def load(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        try:
            folder_info = os.stat(self.folder)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TokenStoreError(
                f"{self.folder}: cannot read the login folder: {exc.strerror}",
                hint=f"check {self.folder}",
            ) from None
        self._check_private(self.folder, folder_info, folder=True)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TokenStoreError(
                f"{path}: cannot read the token file: {exc.strerror}",
                hint=f"check its owner and mode (chmod 600 {path}), or remove it and log in again",
            ) from None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise TokenStoreError(
                    f"{path}: not a regular file", hint=f"remove it (rm {path}) and log in again"
                )
            self._check_private(path, info, folder=False)
            data = fh.read(MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            raise TokenStoreError(
                f"{path}: larger than {MAX_RECORD_BYTES} bytes: not a token file",
                hint=f"remove it (rm {path}) and log in again",
            )
        return _decode(data, str(path))

    def save(self, key: str, record: dict[str, Any]) -> None:
        path = self.path(key)
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._check_private(self.folder, os.stat(self.folder), folder=True)
            text = json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")
            tmp = self.folder / f".{path.name}.{os.getpid()}.{_digest(str(id(record)))[:8]}.tmp"
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600
            )
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise TokenStoreError(
                f"{path}: cannot write the token file: {exc.strerror}",
                hint=f"make {self.folder} writable by you (mode 700), or set {AUTH_DIR_ENV} to another folder",
            ) from None

    def delete(self, key: str) -> bool:
        try:
            os.unlink(self.path(key))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise TokenStoreError(
                f"{self.path(key)}: cannot remove the token file: {exc.strerror}",
                hint=f"remove it by hand: rm {self.path(key)}",
            ) from None
        return True


class KeyringStore:
    """Records as JSON text in the OS keyring (service "codemode-gen", one entry per key)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def _name(self, key: str) -> str:
        return f"oauth:{_digest(key)[:40]}"

    def describe(self, key: str) -> str:
        return (
            f"the OS keyring ({type(self.backend).__name__}, {KEYRING_SERVICE}/{self._name(key)})"
        )

    def _failed(self, action: str, exc: Exception) -> TokenStoreError:
        return TokenStoreError(
            f"the OS keyring failed to {action} a login: {type(exc).__name__}: {exc}",
            hint=f"unlock the keyring, or set {STORE_ENV}=file to keep logins in a private file instead",
        )

    def load(self, key: str) -> dict[str, Any] | None:
        try:
            text = self.backend.get_password(KEYRING_SERVICE, self._name(key))
        except Exception as exc:  # any backend failure (locked, D-Bus gone) is the store's
            raise self._failed("read", exc) from None
        if text is None:
            return None
        if len(text) > MAX_RECORD_BYTES:
            raise TokenStoreError(
                "the keyring entry is too large to be a login",
                hint="log in again with `codemode-gen auth login ID`",
            )
        return _decode(text, self.describe(key))

    def save(self, key: str, record: dict[str, Any]) -> None:
        try:
            self.backend.set_password(
                KEYRING_SERVICE,
                self._name(key),
                json.dumps(record, ensure_ascii=False, sort_keys=True),
            )
        except Exception as exc:
            raise self._failed("store", exc) from None

    def delete(self, key: str) -> bool:
        try:
            if self.backend.get_password(KEYRING_SERVICE, self._name(key)) is None:
                return False
            self.backend.delete_password(KEYRING_SERVICE, self._name(key))
        except Exception as exc:
            raise self._failed("remove", exc) from None
        return True


class FallbackStore:
    """The keyring first, the file when the keyring fails: a locked keyring costs nothing but a
    note (`fell_back`), and a login written to the file meanwhile is still found.

    The keyring is asked only for keys that have a login there, which an empty marker file in
    the login folder says (`<hash>.keyring`, no secret in it): every connection to an HTTP
    server looks for a login, and a locked desktop keyring must not ask to be unlocked for
    servers that never had one."""

    def __init__(self, keyring: KeyringStore, file: FileStore) -> None:
        self.keyring = keyring
        self.file = file
        self.fell_back: str | None = None  # why the last operation used the file

    def _marker(self, key: str) -> Path:
        return self.file.path(key).with_suffix(".keyring")

    def describe(self, key: str) -> str:
        return self.keyring.describe(key) if self.fell_back is None else self.file.describe(key)

    def load(self, key: str) -> dict[str, Any] | None:
        found = None
        if self._marker(key).exists():
            try:
                found = self.keyring.load(key)
            except TokenStoreError as exc:
                self.fell_back = exc.message
        return found if found is not None else self.file.load(key)

    def save(self, key: str, record: dict[str, Any]) -> None:
        try:
            self.keyring.save(key, record)
        except TokenStoreError as exc:
            self.fell_back = exc.message
            self.file.save(key, record)
            return
        self.fell_back = None
        try:
            self.file.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._marker(key).touch(mode=0o600)
        except OSError as exc:
            raise TokenStoreError(
                f"{self._marker(key)}: cannot write the login marker: {exc.strerror}",
                hint=f"make {self.file.folder} writable by you (mode 700), or set {STORE_ENV}=file",
            ) from None
        # One place per login: a copy left in the file from a keyring outage would be stale.
        with contextlib.suppress(TokenStoreError):
            self.file.delete(key)

    def delete(self, key: str) -> bool:
        gone = False
        if self._marker(key).exists():
            try:
                gone = self.keyring.delete(key)
            except TokenStoreError as exc:
                self.fell_back = exc.message
            with contextlib.suppress(OSError):
                self._marker(key).unlink()
        return self.file.delete(key) or gone


def usable_keyring() -> Any | None:
    """The `keyring` package's backend if it is a real one, else None (not installed, or only the
    fail/null backends a headless machine has)."""
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except (KeyringError, RuntimeError, ValueError):
        return None
    module = type(backend).__module__
    if getattr(backend, "priority", 0) <= 0 or module.startswith(
        ("keyring.backends.fail", "keyring.backends.null")
    ):
        return None
    return backend


def open_store(environ: Mapping[str, str] | None = None) -> TokenStore:
    """The store `CODEMODE_TOKEN_STORE` asks for (see the module docstring)."""
    env = os.environ if environ is None else environ
    choice = (env.get(STORE_ENV) or "auto").strip().lower()
    if choice not in STORE_CHOICES:
        raise TokenStoreError(
            f"{STORE_ENV}={env.get(STORE_ENV)!r} is not one of {', '.join(STORE_CHOICES)}",
            hint=f"unset {STORE_ENV} (auto: the OS keyring where one works, else a private file) or set it to file",
        )
    file = FileStore(default_auth_dir(env))
    if choice == "file":
        return file
    backend = usable_keyring()
    if backend is None:
        if choice == "keyring":
            raise TokenStoreError(
                f"{STORE_ENV}=keyring, but no OS keyring works here (the `keyring` package is missing"
                " or has no backend on this machine)",
                hint=f"pip install 'codemode-gen[keyring]' on a desktop, or unset {STORE_ENV} to use a private file",
            )
        return file
    return FallbackStore(KeyringStore(backend), file)
