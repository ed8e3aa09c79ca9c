"""A `keyring` backend for tests: entries in a JSON file named by TEST_KEYRING_FILE.

Selected with `PYTHON_KEYRING_BACKEND=_keyring_backend.FileKeyring` (tests/servers on
PYTHONPATH), so a `codemode-gen` process a test starts keeps its OAuth login "in the OS
keyring" without touching the user's real one. Not secure: for tests only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class FileKeyring(KeyringBackend):
    priority = 1  # keyring reads a class attribute too

    def _path(self) -> Path:
        return Path(os.environ["TEST_KEYRING_FILE"])

    def _entries(self) -> dict[str, str]:
        try:
            loaded: dict[str, str] = json.loads(self._path().read_text())
        except FileNotFoundError:
            return {}
        return loaded

    def get_password(self, service: str, username: str) -> str | None:
        return self._entries().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        entries = self._entries()
        entries[f"{service}/{username}"] = password
        self._path().write_text(json.dumps(entries))

    def delete_password(self, service: str, username: str) -> None:
        entries = self._entries()
        if entries.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError(username)
        self._path().write_text(json.dumps(entries))
