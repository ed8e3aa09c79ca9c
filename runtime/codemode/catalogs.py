"""The run catalog: what one run sees (servers, tools, modules), built once per distinct input.

A catalog is a pure function of out/'s manifest, the servers the run names and the snapshot
(tool-list version) of every connection (runtime/host/reconcile.py decides it from those values
alone). This owner does the I/O around that decision (reading out/ through the cache, connecting
through the connection manager, building in memory) and keeps the last MAX_CATALOG_CACHE
catalogs, so a warm run rebuilds neither the catalog nor the discovery module.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from codemode_gen.config import ServerConfig
from codemode_gen.generator.manifest import Manifest
from codemode_gen.runtime.codemode.builds import Builder
from codemode_gen.runtime.codemode.connections import ConnectionManager
from codemode_gen.runtime.codemode.learning import LearningSink
from codemode_gen.runtime.codemode.out_cache import OutCache, OutViews
from codemode_gen.runtime.host.approval import ApprovalGate
from codemode_gen.runtime.host.catalog import Catalog
from codemode_gen.runtime.host.discovery import MODULE_NAME as DISCOVERY_MODULE
from codemode_gen.runtime.host.discovery import discovery_module
from codemode_gen.runtime.host.reconcile import Selection, reconcile, select_servers
from codemode_gen.runtime.host.skills import (
    SKILLS_MODULE,
    SKILLS_MODULE_SOURCE,
    imported_skill_code,
    skill_entries,
)

# Bounds the run catalogs kept for reuse (one per distinct manifest, named servers and tool-list
# versions; `RunCatalogs.prepare`): scripts naming ever new sets of servers cannot grow host memory.
MAX_CATALOG_CACHE = 16


@dataclass(frozen=True)
class Prepared:
    """One built run catalog and the modules the sandbox gets with it."""

    keep: tuple[Any, ...]  # the objects whose ids key this entry
    catalog: Catalog  # pristine: runs get copies (`for_run`)
    modules: dict[str, str]  # specifier -> source: server modules and @codemode/discovery

    def for_run(self) -> Catalog:
        """A catalog this run may change: the bridge rebinds fields of a server view when the
        server connects during the run; the tool views themselves are never changed."""
        return Catalog(
            servers={sid: replace(view) for sid, view in self.catalog.servers.items()},
            diagnostics=[d.copy() for d in self.catalog.diagnostics],
        )


class Selected(NamedTuple):
    """What one run's script asks for, as out/ and the connections stand when it is asked
    (`RunCatalogs.select`): made once per run, for `nothing_to_connect` and `prepare` both."""

    manifest: Manifest | None
    out: OutViews
    skills: dict[str, str]  # out/'s skills (specifier -> source): modules of every run
    selection: Selection


class RunCatalogs:
    """Prepares (and caches) each run's catalog from out/, the connections and learned types."""

    def __init__(
        self,
        configs: dict[str, ServerConfig],
        out_dir: Path,
        *,
        out: OutCache,
        builder: Builder,
        connections: ConnectionManager,
        learning: LearningSink,
        approval: ApprovalGate,
        skills_writable: bool,
    ) -> None:
        self.configs = configs
        self.out_dir = out_dir
        self._out = out
        self._builder = builder
        self._connections = connections
        self._learning = learning
        self._approval = approval
        self._skills_writable = skills_writable
        self._catalogs: OrderedDict[tuple[Any, ...], Prepared] = (
            OrderedDict()
        )  # by what decides them

    def select(self, code: str, requested: list[str]) -> Selected:
        """The servers a run of `code` waits for (`select_servers`), from out/ as it is now."""
        manifest = self._out.manifest()
        out = self._out.views(manifest)
        connections = self._connections
        refresh = [cid for cid in connections.connected if connections.needs_refresh(cid)]
        # Skills are modules of out/ too: the servers a skill the script imports imports are
        # the script's own (README "Skills"); read again whenever out/'s manifest is (a skill is source, §1.4).
        skills = self._out.skills(manifest)
        used = imported_skill_code(code, skills) if skills else ""
        selection = select_servers(
            code + "\n" + used if used else code, requested, self.configs, out.paths, refresh
        )
        return Selected(manifest, out, skills, selection)

    async def prepare(
        self,
        code: str,
        requested: list[str],
        budget_s: float | None,
        *,
        lazy_budget_s: float | None = None,
        selected: Selected | None = None,
    ) -> Prepared:
        """This run's catalog, reusing the last one built from the same inputs. Servers out/ has
        a module for are waited for at most `lazy_budget_s` (they can connect at their first
        call); the others, which need their tool list before the run can import them, `budget_s`.
        `selected`: `select(code, requested)`, made in this same turn of the event loop (so
        that out/ and the connections are as it saw them).

        Each run gets its own copies of the server views (`Prepared.for_run`: the bridge rebinds
        their fields, §8.2). Rebuilding the catalog, and the discovery module with it, was most
        of a warm run's host time."""
        if selected is None:
            selected = self.select(code, requested)
        manifest, out, skills, selection = selected
        connections = self._connections
        found = await connections.connect(selection.wanted, out.covered, budget_s, lazy_budget_s)
        key = (
            id(manifest),
            tuple(requested),
            tuple(sorted(selection.wanted.items())),
            tuple(sorted((cid, id(live)) for cid, live in found.lives.items())),
            tuple(
                sorted((cid, f.reason, f.auth, f.hint or "") for cid, f in found.failures.items())
            ),
            tuple(sorted(found.pending.items())),
            self._learning.learner.version,
        )
        prepared = self._catalogs.get(key)
        if prepared is not None:
            self._catalogs.move_to_end(key)
            return prepared
        plan = reconcile(self.configs, out.paths, out.views, selection, found, out_dir=self.out_dir)
        lives = found.lives
        build = self._builder.build
        built = build({cid: lives[cid] for cid in plan.build}, plan.build) if plan.build else {}
        rebuilt = build({cid: lives[cid] for cid in plan.redeclare}, {}) if plan.redeclare else {}
        catalog = plan.catalog(built, rebuilt)
        self._learning.apply(catalog)
        if self._approval.approve_all:
            drop_asks(catalog)
        modules = catalog.modules()
        modules[DISCOVERY_MODULE] = discovery_module(catalog, skill_entries(manifest))
        modules.update(skills)
        if self._skills_writable:
            modules[SKILLS_MODULE] = SKILLS_MODULE_SOURCE
        # The key holds ids: the entry keeps those objects alive so that no id is reused.
        prepared = Prepared((manifest, dict(lives)), catalog, modules)
        self._catalogs[key] = prepared
        while len(self._catalogs) > MAX_CATALOG_CACHE:
            self._catalogs.popitem(last=False)
        return prepared

    def nothing_to_connect(self, selected: Selected) -> bool:
        """Whether preparing the run `selected` is for would connect or re-list nothing: every
        server it names has a current session (none to refresh, §8.1), and so has every server
        out/ lacks (those are connected in the background by any run)."""
        connections = self._connections
        selection = selected.selection
        if selection.diagnostics:
            return False
        return all(connections.current_live(cid) is not None for cid in selection.wanted) and all(
            connections.current_live(cid) is not None
            for cid in self.configs
            if cid not in selected.out.covered
        )


def drop_asks(catalog: Catalog) -> None:
    """With `approve_all` nothing waits for a person: discovery shows no "ask" (copies: the tool
    views may be shared with out/'s cached views)."""
    for view in catalog.servers.values():
        if any(t.approval in ("ask", "ask-once") for t in view.tools.values()):
            view.tools = {
                name: replace(tool, approval=None) if tool.approval in ("ask", "ask-once") else tool
                for name, tool in view.tools.items()
            }
