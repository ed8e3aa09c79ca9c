"""Modules built in memory, with the generator's own code, for what out/ does not describe.

A configured server out/ lacks (or whose live tools no longer match out/) still gets a typed
module: the same build `generate` would make from its live tool list, without any call. Output
types learned from live calls (runtime/host/learn.py) are built the same way. Both are cached by
what decides them, bounded, so a server that keeps changing its tools cannot grow host memory.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from codemode_gen.config import ServerConfig, ServerSettings, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.manifest import ServerEntry, module_file_of
from codemode_gen.runtime.host.catalog import LiveServer
from codemode_gen.runtime.host.learn import Learned
from codemode_gen.runtime.host.reconcile import BuiltModule

if TYPE_CHECKING:
    from codemode_gen.generator.fixtures import FixtureSet

log = logging.getLogger(__name__)

# Bounds the in-memory module cache (one entry per distinct live tool list) so a server that
# keeps changing its tools cannot grow host memory without end.
MAX_BUILD_CACHE = 64


class Builder:
    """In-memory builds of server modules and of learned output types, cached."""

    def __init__(self, configs: Mapping[str, ServerConfig], settings: Settings) -> None:
        self.configs = configs
        self.settings = settings
        self._builds: dict[str, BuiltModule] = {}  # by build key (config id, live server and tools)
        self.entries: dict[str, ServerEntry] = {}  # configId -> its in-memory manifest entry
        self._learned_builds: dict[
            tuple[str, int, int], dict[str, Any]
        ] = {}  # (cid, id(live), version)

    def build_settings(self) -> Settings:
        """The settings an in-memory build uses: each configured server's own unwrap mode and
        unbox choice (a CodeMode may be given ServerConfigs that no codemode.toml produced), so
        a module built in memory types exactly what the bridge returns."""
        servers = dict(self.settings.servers)
        for cid, config in self.configs.items():
            servers[cid] = replace(
                servers.get(cid, ServerSettings()), unwrap=config.unwrap, unbox=config.unbox
            )
        return replace(self.settings, servers=MappingProxyType(servers))

    def listed_tools(self, config_id: str, live: LiveServer) -> list[dict[str, Any]]:
        """The live tools an in-memory build covers: all but the config's blocklist."""
        blocked = set(self.configs[config_id].blocklist)
        return [dict(t) for t in live.tools if t.get("name") not in blocked]

    def build(
        self, lives: Mapping[str, LiveServer], ghosts: Mapping[str, list[dict[str, Any]]]
    ) -> dict[str, BuiltModule]:
        """Generate modules for servers out/ lacks, with the generator's own code (no calls)."""
        from codemode_gen.generator.build import build_outputs

        result: dict[str, BuiltModule] = {}
        pending: dict[
            str, tuple[str, list[dict[str, Any]]]
        ] = {}  # config id -> (build key, its tools)
        for cid, live in lives.items():
            tools = self.listed_tools(cid, live) + list(ghosts.get(cid, []))
            key = json.dumps([cid, live.server_json, tools], sort_keys=True, default=str)
            if key in self._builds:
                result[cid] = self._builds[key]
            else:
                pending[cid] = (key, tools)
        if pending:
            sets = [fixture_set(cid, lives[cid], tools, {}) for cid, (_, tools) in pending.items()]
            outputs = build_outputs(sets, self.build_settings())
            for entry in outputs.manifest["servers"]:
                cid = entry.get("configId", "")
                if cid not in pending:
                    continue
                module_rel = module_file_of(entry)
                source = outputs.files.get(module_rel)
                if source is None:
                    raise UserError(f"in-memory build of '{cid}' produced no module {module_rel}")
                self.entries[cid] = entry
                built = BuiltModule(entry["serverId"], entry, source)
                if len(self._builds) >= MAX_BUILD_CACHE:
                    self._builds.clear()
                self._builds[pending[cid][0]] = built
                result[cid] = built
        return result

    def learned_entry(
        self,
        config_id: str,
        server_id: str,
        live: LiveServer,
        learned: Mapping[str, Learned],
        version: int,
    ) -> dict[str, Any] | None:
        """The manifest entry `generate` would write for this server with the learned calls
        recorded: its inferred output types and declarations (built in memory, once per learned
        state `version`, from the merged types: no call is kept)."""
        key = (config_id, id(live), version)
        entry = self._learned_builds.get(key)
        if entry is not None:
            return entry
        from codemode_gen.generator.build import build_outputs

        examples = {
            name: [got.example_call()] for name, got in learned.items() if got.example is not None
        }
        fixtures = fixture_set(
            config_id, live, self.listed_tools(config_id, live), copy.deepcopy(examples)
        )
        inferences = {name: got.inference for name, got in learned.items()}
        try:
            outputs = build_outputs(
                [fixtures],
                self.build_settings(),
                module_paths={config_id: server_id},
                inferences={config_id: inferences},
            )
        except UserError as exc:
            log.info("learning %s: in-memory build failed: %s", config_id, exc.message)
            return None
        found = next(
            (dict(e) for e in outputs.manifest["servers"] if e.get("configId") == config_id), None
        )
        if len(self._learned_builds) >= MAX_BUILD_CACHE:
            self._learned_builds.clear()
        if found is not None:
            self._learned_builds[key] = found
        return found


def fixture_set(
    config_id: str,
    live: LiveServer,
    tools: list[dict[str, Any]],
    calls: dict[str, list[dict[str, Any]]],
) -> FixtureSet:
    """The generator's input for an in-memory build of one server. The live tools and server
    info are the session's shared snapshot: the generator gets copies."""
    from codemode_gen.generator.fixtures import FixtureSet

    return FixtureSet(
        config_id=config_id,
        server_json=copy.deepcopy(dict(live.server_json)),
        tools=sorted(copy.deepcopy(tools), key=lambda t: str(t.get("name"))),
        calls=calls,
    )
