"""The pinned TypeScript in the user's cache: type checking after `pip install` alone.

`pip install codemode-gen` brings no node and no TypeScript. When no compiler is found the usual
ways (runtime/host/typecheck.py's `find_compiler`), the type checker uses TypeScript TYPESCRIPT_VERSION
from `$CODEMODE_CACHE_DIR` (default `$XDG_CACHE_HOME/codemode-gen`, else `~/.cache/codemode-gen`),
folder `typescript-<version>/`, and downloads it there once: the npm registry's tarball, fetched
with urllib (no npm), verified against the sha512 `integrity` npm itself publishes for it (pinned
below, as package-lock.json has it) and refused if it differs, of which only lib/typescript.js,
lib/lib.*.d.ts, package.json and the licence files are kept. The folder appears whole or not at
all (written to a temporary folder beside it, then renamed), so concurrent first uses are safe:
one rename wins, the others use its result.

`CODEMODE_NPM_REGISTRY` names another registry (a mirror; the checksum is the same). The compiler
runs on QuickJS in a Python process (runtime/sandbox/typecheck_worker.py) unless node is on PATH.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from codemode_gen.errors import UserError

__all__ = [
    "CACHE_ENV",
    "REGISTRY_ENV",
    "TYPESCRIPT_INTEGRITY",
    "TYPESCRIPT_VERSION",
    "InstallFailed",
    "cache_dir",
    "cached_typescript",
    "install_typescript",
    "typescript_dir",
]

#: The TypeScript the type checker downloads: package-lock.json's version and its `integrity`
#: (the registry's sha512 of the tarball). Changing one means changing both (tests/runtime/host/test_tsinstall.py
#: checks them against package-lock.json).
TYPESCRIPT_VERSION = "5.9.3"
TYPESCRIPT_INTEGRITY = "sha512-jl1vZzPDinLr9eUt3J/t7V6FgNEw9QjvBPdysz9KfQDD41fQrC2Y4vKQdiaUpFT4bXlb1RHhLpp8wtm6M5TgSw=="
CACHE_ENV = "CODEMODE_CACHE_DIR"
REGISTRY_ENV = "CODEMODE_NPM_REGISTRY"
DEFAULT_REGISTRY = "https://registry.npmjs.org"
#: Bounds a connection or read that stalls (an offline machine, a black-holed proxy).
DOWNLOAD_TIMEOUT_S = 30.0
#: Bounds the download (TypeScript 5.9's tarball is 4.4 MB): a registry or proxy sending
#: without end is cut off here, before the checksum refuses it.
MAX_TARBALL_BYTES = 64 * 1024 * 1024
#: Bounds one kept file once unpacked (typescript.js is 9 MB), though the checksum already
#: guarantees the tarball's content.
MAX_FILE_BYTES = 64 * 1024 * 1024
CHUNK_BYTES = 256 * 1024
#: What is kept of the package: the compiler, its standard library, its licence and manifest.
_KEEP = re.compile(
    r"package/(lib/typescript\.js|lib/lib(\.[a-z0-9]+)*\.d\.ts|package\.json|LICENSE\.txt|ThirdPartyNoticeText\.txt)",
    re.IGNORECASE,
)

WAYS_OUT = (
    "retry where registry.npmjs.org is reachable (once: `codemode-gen check --install-typescript`), "
    f"or set {REGISTRY_ENV} to an npm mirror, or install TypeScript yourself (`npm i -g typescript`, "
    "or pass --tsc PATH to a `typescript` package folder or its lib/typescript.js)"
)

Progress = Callable[[str], None]


class InstallFailed(UserError):
    """The pinned TypeScript could not be downloaded or was refused; the message says why."""


def cache_dir() -> Path:
    """codemode-gen's cache folder: $CODEMODE_CACHE_DIR, else $XDG_CACHE_HOME/codemode-gen,
    else ~/.cache/codemode-gen."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = (
        Path(xdg).expanduser()
        if xdg and os.path.isabs(os.path.expanduser(xdg))
        else Path.home() / ".cache"
    )
    return base / "codemode-gen"


def typescript_dir() -> Path:
    """Where the pinned TypeScript is (or goes): <cache>/typescript-<version>/."""
    return cache_dir() / f"typescript-{TYPESCRIPT_VERSION}"


def cached_typescript() -> Path | None:
    """lib/typescript.js of the pinned TypeScript, if it is in the cache."""
    found = typescript_dir() / "lib" / "typescript.js"
    return found if found.is_file() else None


def tarball_url() -> str:
    registry = (os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY).rstrip("/")
    return f"{registry}/typescript/-/typescript-{TYPESCRIPT_VERSION}.tgz"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def install_typescript(progress: Progress = _stderr) -> Path:
    """lib/typescript.js of the pinned TypeScript, downloaded into the cache first if it is not
    there (one `progress` line before, one after). Raises InstallFailed saying why and what to do."""
    found = cached_typescript()
    if found is not None:
        return found
    url = tarball_url()
    data = _download(url, progress)
    _verify(data, url)
    target = typescript_dir()
    _unpack(data, target)
    found = cached_typescript()
    if found is None:  # pragma: no cover - the checksum guarantees typescript.js is in the tarball
        raise InstallFailed(f"{url}: no lib/typescript.js in the package", hint=WAYS_OUT)
    progress(f"codemode-gen: TypeScript {TYPESCRIPT_VERSION} is in {target}")
    return found


def _download(url: str, progress: Progress) -> bytes:
    what = f"TypeScript {TYPESCRIPT_VERSION}"
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            size = int(length) if length and length.isdigit() else None
            if size is not None and size > MAX_TARBALL_BYTES:
                raise InstallFailed(
                    f"cannot download {what}: {url} is {size} bytes, over {MAX_TARBALL_BYTES}",
                    hint=WAYS_OUT,
                )
            shown = f" ({size / 1e6:.1f} MB)" if size is not None else ""
            progress(
                f"codemode-gen: downloading {what}{shown} for type checking, once, from {url} …"
            )
            buffer = bytearray()
            while chunk := response.read(CHUNK_BYTES):
                buffer += chunk
                if len(buffer) > MAX_TARBALL_BYTES:
                    raise InstallFailed(
                        f"cannot download {what}: {url} sent over {MAX_TARBALL_BYTES} bytes",
                        hint=WAYS_OUT,
                    )
            return bytes(buffer)
    except urllib.error.HTTPError as exc:
        raise InstallFailed(
            f"cannot download {what} from {url}: HTTP {exc.code} {exc.reason}", hint=WAYS_OUT
        ) from None
    except urllib.error.URLError as exc:
        reason = (
            exc.reason.strerror
            if isinstance(exc.reason, OSError) and exc.reason.strerror
            else exc.reason
        )
        raise InstallFailed(f"cannot download {what} from {url}: {reason}", hint=WAYS_OUT) from None
    except (OSError, ValueError) as exc:  # a timeout, a reset connection, a malformed URL
        raise InstallFailed(f"cannot download {what} from {url}: {exc}", hint=WAYS_OUT) from None


def integrity_of(data: bytes) -> str:
    """npm's `integrity` string of `data`: sha512, base64."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def _verify(data: bytes, url: str) -> None:
    got = integrity_of(data)
    if got != TYPESCRIPT_INTEGRITY:
        raise InstallFailed(
            f"refused the download from {url}: its sha512 ({got[:27]}…) is not TypeScript {TYPESCRIPT_VERSION}'s "
            f"published integrity ({TYPESCRIPT_INTEGRITY[:27]}…); nothing was installed",
            hint=f"check {REGISTRY_ENV} (a mirror must serve npm's own tarball) or a proxy rewriting downloads; "
            + WAYS_OUT,
        )


def _unpack(data: bytes, target: Path) -> None:
    """The kept files into `target`, which appears complete or not at all."""
    import tarfile  # here: only an install unpacks, and a running host need not hold it

    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=parent))
    except OSError as exc:
        raise InstallFailed(
            f"cannot write TypeScript into {parent}: {exc.strerror or exc}",
            hint=f"set {CACHE_ENV} to a writable folder; " + WAYS_OUT,
        ) from None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                if (
                    not member.isfile()
                    or not _KEEP.fullmatch(member.name)
                    or member.size > MAX_FILE_BYTES
                ):
                    continue
                source = tar.extractfile(member)
                if source is None:
                    continue
                dest = staging / member.name.removeprefix("package/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(source.read())
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / "lib" / "typescript.js").is_file():
                raise
            # Another process installed it first: theirs is the same verified package.
    except (OSError, tarfile.TarError) as exc:
        raise InstallFailed(
            f"cannot unpack TypeScript into {target}: {exc}",
            hint=f"set {CACHE_ENV} to a writable folder; " + WAYS_OUT,
        ) from None
    finally:
        with contextlib.suppress(OSError):
            if staging.exists():
                shutil.rmtree(staging)
