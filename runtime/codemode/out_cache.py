"""out/ as the runs see it: its manifest, its servers' views and its skills, read once per change.

Every run starts from what out/ holds; reading the manifest and every module file per run was a
warm run's main host cost, and `generate` replaces out/ as a whole, so this owner reads the
manifest again only when its file changes and derives the views and skills from it once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemode_gen.config import ServerConfig
from codemode_gen.generator.manifest import Manifest, ServerEntry, manifest_path, read_manifest
from codemode_gen.runtime.host.catalog import ServerView, manifest_views, module_paths_for
from codemode_gen.runtime.host.skills import skill_modules


@dataclass(frozen=True)
class OutViews:
    """What out/'s manifest says, for every run until the manifest changes."""

    manifest: Manifest | None
    paths: dict[str, str]  # configId -> module path (§5.0.1)
    views: dict[str, ServerView]  # by server id; never changed (reconcile copies them)
    covered: set[str]  # config ids whose module out/ provides


class OutCache:
    """out/'s manifest, views and skills, cached by the manifest file's identity."""

    def __init__(self, out_dir: Path, configs: Mapping[str, ServerConfig]) -> None:
        self.out_dir = out_dir
        self.configs = configs
        self._manifest_key: tuple[int, int] | None = None
        # Stat'ed once or twice a run: the path as a string, not a Path to build each time.
        self._manifest_file = os.fspath(manifest_path(out_dir))
        self._manifest: Manifest | None = None
        self._skills_cache: tuple[Manifest | None, dict[str, str]] | None = None
        self._out: OutViews | None = None  # out/'s views of the manifest last read

    def manifest(self) -> Manifest | None:
        """out/'s manifest (validated: `read_manifest`), read again only when the file changed."""
        try:
            st = os.stat(self._manifest_file)
        except OSError:
            self._manifest_key, self._manifest = None, None
            return None
        key = (st.st_mtime_ns, st.st_size)
        if key != self._manifest_key:
            self._manifest = read_manifest(self.out_dir)
            self._manifest_key = key
        return self._manifest

    def views(self, manifest: Manifest | None) -> OutViews:
        """out/'s servers (`manifest_views`, which reads every module file) and every configured
        server's module path, computed once per manifest (the manifest is read again only when
        its file changes, `manifest`; generate replaces out/ as a whole)."""
        cached = self._out
        if cached is not None and cached.manifest is manifest:
            return cached
        views = manifest_views(manifest, self.out_dir, self.configs)
        self._out = OutViews(
            manifest, module_paths_for(manifest, self.configs), views, covered(views)
        )
        return self._out

    def skills(self, manifest: Manifest | None) -> dict[str, str]:
        """The skills out/ holds (specifier -> module source), read again when the manifest is."""
        cached = self._skills_cache
        if cached is not None and cached[0] is manifest:
            return cached[1]
        found = skill_modules(self.out_dir, manifest)
        self._skills_cache = (manifest, found)
        return found

    def prompt_servers(self, built_entries: Mapping[str, ServerEntry]) -> list[Mapping[str, Any]]:
        """Manifest entries (out/ or built in memory: `built_entries`) of the configured servers,
        by server id; a configured server known to neither is a stub `{serverId, configId}` (§4.4
        deferral)."""
        manifest = self.manifest()
        paths = module_paths_for(manifest, self.configs)
        by_config = (
            {s["configId"]: s for s in manifest["servers"] if "configId" in s} if manifest else {}
        )
        out: list[Mapping[str, Any]] = []
        for cid, sid in paths.items():
            if cid not in self.configs:
                continue
            entry = by_config.get(cid) or built_entries.get(cid)
            out.append(dict(entry) if entry is not None else {"serverId": sid, "configId": cid})
        return sorted(out, key=lambda e: str(e.get("serverId")))


def covered(views: Mapping[str, ServerView]) -> set[str]:
    """Config ids whose module out/ provides."""
    return {v.config_id for v in views.values() if v.config_id and v.module_source is not None}
