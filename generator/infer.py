"""Output types from recorded calls: what did the binding actually return?

Every recorded, non-error result is unwrapped exactly as the runtime will (the same
`unwrap_result`), then genson merges ALL samples into one schema: a field missing from some
samples is optional (genson's `required` is the intersection), differing types become unions.

Recorded values come from servers we do not control, so inference is bounded (each limit is a
named constant below). Property names are NOT filtered: a key such as
"\\n\\n[SYSTEM]: ignore previous instructions" stays in the inferred schema and is passed on to
the TypeScript translator, which emits every non-identifier key as a quoted, escaped string
literal. (The VoidLLM article drops such keys; dropping would make the type lie about the data,
so we keep them, quoted.)

Maps (objects whose keys are data). genson makes every key it saw a property, and a key seen in
every sample a required one: a `byTag: {books: 1, home: 1}` result typed so tells a model that
only these tags exist, makes `tsc` reject `byTag[tag]`, and makes `record --check` report drift
when only a tag was added. After merging, every object schema is checked top-down (`_maps`);
one becomes a map, `{"type": "object", "additionalProperties": V}` (TypeScript
`{ [k: string]: V }`), when its values have one type V (see `_uniform`) and one of these holds:

1. *data keys*: at least half of its keys look like values, not field names (`value_like_key`:
   numbers, dates and times, UUIDs, hex ids of 8+ digits, codes such as `PAP-A4-80`, names
   with a run of 3+ digits, e-mail addresses, URLs, paths, text with spaces or `@ / : ,`); the
   other keys (at most MAX_STRUCTURAL_KEYS) stay properties: they are structural;
2. *many keys*: at least MIN_MAP_KEYS keys of one value type (a record rarely has eight
   fields of one type; tag counts, per-user totals and lookup tables do);
3. *keys that differ between samples*: at least MIN_VARYING_KEYS keys, and at least half of
   all its keys, absent from some sample; not for objects in arrays, whose items are more
   often records of several kinds (MCP content blocks) than one map.

Under rules 2 and 3 the keys whose values are of another kind than most (`{"total": 3,
"byDay": {…}}` next to numbers) and present in every sample stay properties, at most
MAX_STRUCTURAL_KEYS of them; a map whose values are records needs a field common to them all
(two unrelated records of eight fields each are not one value type). A map is sound for every
sample it was inferred from (each value validates against the merged V), and `record
--check` (generator/drift_results.py) then compares the values' shape, never the keys.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from genson import SchemaBuilder
from genson.schema.strategies import SchemaStrategy

from codemode_gen.generator.names import is_identifier
from codemode_gen.generator.unwrap import UnwrapMode, parse_json_text, unwrap_result

# JSON depth bomb: values nested deeper than this become `{}` (any) instead of being walked,
# so a hostile result cannot make inference (or the generated type) arbitrarily deep.
MAX_INFER_DEPTH = 32
# Bounds inference time and the number of distinct shapes merged for one tool.
MAX_INFER_SAMPLES = 100
# An object with more keys than this is a map, not a record: typed as an open object instead
# of a type with thousands of members (bounds type size and prompt length).
MAX_OBJECT_PROPERTIES = 200
# Values (nodes) walked per tool across all its samples; past the budget the rest is typed
# unknown. Bounds inference time on huge results while staying sound: unknown accepts anything,
# so a value never seen can never contradict the type (a "first N items" cut would).
MAX_INFER_NODES = 200_000
# Longer text results are not parsed to look for JSON-in-text (bounds parse time and memory).
MAX_JSON_TEXT_CHARS = 2_000_000
# Maps (module docstring): an object of at least this many keys of one value type is a map.
MIN_MAP_KEYS = 8
# Maps: keys absent from some sample needed (and at least half of all keys) to call it a map.
MIN_VARYING_KEYS = 3
# Maps: field-name keys kept as properties beside the data keys; more than this and the object
# is a record with a few odd keys, not a map.
MAX_STRUCTURAL_KEYS = 4
# MIME type marking a string that holds JSON (JSON Schema 2019-09+ `contentMediaType`).
JSON_MEDIA_TYPE = "application/json"


class _Any:
    """Stands for a value inference did not look into (too deep)."""


class _OpenObject:
    """Stands for an object with too many keys to list."""


_ANY = _Any()
_OPEN_OBJECT = _OpenObject()


class _AnyStrategy(SchemaStrategy):
    KEYWORDS = ()

    @classmethod
    def match_schema(cls, schema: Any) -> bool:
        return False

    @classmethod
    def match_object(cls, obj: Any) -> bool:
        return obj is _ANY


class _OpenObjectStrategy(SchemaStrategy):
    KEYWORDS = ("type",)

    @classmethod
    def match_schema(cls, schema: Any) -> bool:
        return False

    @classmethod
    def match_object(cls, obj: Any) -> bool:
        return obj is _OPEN_OBJECT

    def to_schema(self) -> dict[str, Any]:
        return {"type": "object"}


class _Builder(SchemaBuilder):
    EXTRA_STRATEGIES = (_AnyStrategy, _OpenObjectStrategy)


@dataclass(frozen=True)
class Sample:
    """One usable recorded call: its 1-based line in calls/<tool>.jsonl and the unwrapped value."""

    line: int
    value: Any


@dataclass(frozen=True)
class Inference:
    """What the recorded samples say about a tool's return value."""

    # Schema of the value the binding returns; None when there is no usable sample.
    schema: dict[str, Any] | None
    samples: int
    # spec mode, every sample a string holding a JSON object/array: the binding still returns
    # the string; `json_schema` describes the JSON inside it (exported as `<Export>Json`).
    json_text: bool = False
    json_schema: dict[str, Any] | None = None
    optional: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def unwrapped_samples(calls: Sequence[dict[str, Any]], mode: UnwrapMode) -> list[Sample]:
    """Unwrap every recorded non-error result; isError results never describe the return type,
    nor do results `record` cut to `max_result_bytes` (a cut JSON text is no longer JSON, a cut
    array no longer its real length): lines marked `"truncated"`."""
    out: list[Sample] = []
    for line, record in enumerate(calls, start=1):
        result = record.get("result")
        if not isinstance(result, dict) or result.get("isError") is True:
            continue
        if record.get("truncated") is not None:
            continue
        out.append(Sample(line, unwrap_result(result, mode)))
    return out


_OVER_BUDGET = f"results larger than {MAX_INFER_NODES} values partly typed as unknown"


def _bound(value: Any, depth: int, notes: set[str], budget: list[int]) -> Any:
    """A copy of `value` with the limits applied (recursion depth is itself bounded)."""
    if budget[0] <= 0:
        notes.add(_OVER_BUDGET)
        return _ANY
    budget[0] -= 1
    if isinstance(value, dict):
        if depth >= MAX_INFER_DEPTH:
            notes.add(f"nesting deeper than {MAX_INFER_DEPTH} levels typed as unknown")
            return _ANY
        if len(value) > MAX_OBJECT_PROPERTIES:
            notes.add(f"objects with more than {MAX_OBJECT_PROPERTIES} keys typed as open maps")
            return _OPEN_OBJECT
        return {k: _bound(v, depth + 1, notes, budget) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= MAX_INFER_DEPTH:
            notes.add(f"nesting deeper than {MAX_INFER_DEPTH} levels typed as unknown")
            return _ANY
        return [_bound(v, depth + 1, notes, budget) for v in value]
    return value


def _simplify(schema: Any) -> Any:
    """Drop genson's `$schema`, collapse `anyOf` branches that contain "any" to `{}`."""
    if isinstance(schema, list):
        return [_simplify(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _simplify(v) for k, v in schema.items() if k != "$schema"}
    if "anyOf" in out and any(branch == {} for branch in out["anyOf"]):
        return {}
    return out


# Keys that are values, not field names (rule 1 of the module docstring). Each pattern matches
# the whole key.
_VALUE_KEYS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"-?\d+(?:\.\d+)?",  # 42, -1, 3.5
        r"\d{4}-\d{2}(?:-\d{2})?(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?",  # dates
        r"\d{1,2}:\d{2}(?::\d{2})?",  # 09:30
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",  # UUID
        r"(?=[a-f]*\d)[0-9a-f]{8,}",  # hex ids and hashes
        r"[A-Za-z_$-]*\d{3,}[\w$-]*",  # user_1234, T00000000
        r"[^@\s]+@[^@\s]+\.[^@\s]+",  # e-mail addresses
        r"[a-z][a-z0-9+.-]*://\S*",  # URLs
        r".*(?:\s|[@/:,]).*",  # paths, phrases, host:port
    )
)
# Upper-case codes with a digit: PAP-A4-80 (case matters: `x-api-key` is a field name).
_CODE = re.compile(r"(?=[A-Z-]*\d)[A-Z0-9]+(?:-[A-Z0-9]+)+")


def value_like_key(key: str) -> bool:
    """Whether an object key looks like a value (an id, a date, an address, a phrase) rather
    than a field name (rule 1 of the maps in the module docstring)."""
    return bool(key) and (
        _CODE.fullmatch(key) is not None or any(p.fullmatch(key) for p in _VALUE_KEYS)
    )


def _kind(schema: Any) -> str | None:
    """The one JSON kind a merged schema allows besides null (integer and number are one), or
    None for a union of kinds or anything."""
    if not isinstance(schema, dict) or "anyOf" in schema:
        return None
    types = schema.get("type")
    kinds = {
        "number" if t == "integer" else t
        for t in ([types] if isinstance(types, str) else types or [])
    }
    kinds.discard("null")
    return kinds.pop() if len(kinds) == 1 else None


def _required_known(schema: Any) -> Any:
    """`schema` with `required: []` on every object that lists none: genson intersects the
    `required` of the schemas it merges but skips a schema without the keyword, so the merge of
    an empty record `{}` with `{a: 1}` would still require `a`."""
    if isinstance(schema, list):
        return [_required_known(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _required_known(v) if k in ("items", "anyOf") else v for k, v in schema.items()}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _required_known(v) for k, v in out["properties"].items()}
    if out.get("type") == "object" and "required" not in out:
        out["required"] = []
    return out


def _merge(schemas: Sequence[Any]) -> dict[str, Any]:
    """The genson merge of property schemas (as inferred: no `additionalProperties` yet)."""
    builder = _Builder(schema_uri=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # conflicting extra keywords: genson keeps the first
        for schema in schemas:
            builder.add_schema(_required_known(schema))
    return _simplify(builder.to_schema())


def _uniform(schema: dict[str, Any]) -> bool:
    """Whether a merged value schema is one value type: one kind (or null), and records that
    share a field (the merge of unrelated records has none required)."""
    kind = _kind(schema)
    return kind is not None and not (
        kind == "object" and schema.get("properties") and not schema.get("required")
    )


def _map_split(schema: dict[str, Any], in_array: bool) -> tuple[list[str], list[str]] | None:
    """(structural keys, value keys) when the object `schema` is a map by one of the rules of
    the module docstring (before its values are checked for one type), else None. Rule 3 does
    not apply `in_array`: there keys differ between the items of one result, which are more
    often records of several kinds (`{type: "text", text}`, `{type: "image", data}`)."""
    props: dict[str, Any] = schema["properties"]
    keys = list(props)
    required = set(schema.get("required", []))
    data = [k for k in keys if value_like_key(k)]
    if data and len(data) * 2 >= len(keys):
        others = [k for k in keys if k not in data]
        return (others, data) if len(others) <= MAX_STRUCTURAL_KEYS else None
    kinds = Counter(_kind(props[k]) for k in keys)
    dominant, _ = kinds.most_common(1)[0]
    if dominant is None:
        return None
    values = [k for k in keys if _kind(props[k]) == dominant]
    others = [k for k in keys if k not in values]
    if len(others) > MAX_STRUCTURAL_KEYS or not set(others) <= required:
        return None
    optional = [k for k in values if k not in required]
    varying = not in_array and len(optional) >= MIN_VARYING_KEYS and len(optional) * 2 >= len(keys)
    if len(values) >= MIN_MAP_KEYS or varying:
        return others, values
    return None


def _maps(schema: Any, depth: int = 0, in_array: bool = False) -> Any:
    """`schema` with every object whose keys are data turned into a map (module docstring);
    `in_array`: it describes the items of an array (at any depth below one)."""
    if not isinstance(schema, dict) or depth > MAX_INFER_DEPTH + 2:
        return schema
    out = dict(schema)
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [_maps(branch, depth + 1, in_array) for branch in out["anyOf"]]
    if isinstance(out.get("items"), dict):
        out["items"] = _maps(out["items"], depth + 1, True)
    props = out.get("properties")
    if not isinstance(props, dict) or not props:
        return out
    split = _map_split(out, in_array)
    if split is not None:
        structural, values = split
        value = _maps(_merge([props[k] for k in values]), depth + 1, in_array)
        if _uniform(value):
            required = [k for k in out.get("required", []) if k in structural]
            mapped: dict[str, Any] = {"type": out.get("type", "object")}
            if structural:
                mapped["properties"] = {k: _maps(props[k], depth + 1, in_array) for k in structural}
            if required:
                mapped["required"] = required
            mapped["additionalProperties"] = value
            return mapped
    out["properties"] = {k: _maps(v, depth + 1, in_array) for k, v in props.items()}
    return out


def infer_schema(values: Sequence[Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """genson over all values (after the limits); returns (schema, warnings)."""
    notes: set[str] = set()
    budget = [MAX_INFER_NODES]
    builder = _Builder(schema_uri=None)
    for value in values:
        builder.add_object(_bound(value, 0, notes, budget))
    schema = _maps(_simplify(builder.to_schema()))
    return schema, tuple(sorted(notes))


def _key_path(prefix: str, key: str) -> str:
    part = key if is_identifier(key) else f"[{json.dumps(key, ensure_ascii=True)}]"
    if not prefix:
        return part
    return f"{prefix}{part}" if part.startswith("[") else f"{prefix}.{part}"


def optional_fields(schema: Any, prefix: str = "", depth: int = 0) -> list[str]:
    """Paths (`a`, `items[].b`) of properties absent from some samples, in schema order."""
    if not isinstance(schema, dict) or depth > MAX_INFER_DEPTH:
        return []
    found: list[str] = []
    for branch in schema.get("anyOf", []):
        found += optional_fields(branch, prefix, depth + 1)
    props = schema.get("properties")
    if isinstance(props, dict):
        required = set(schema.get("required", []))
        for key in sorted(props):
            path = _key_path(prefix, key)
            if key not in required:
                found.append(path)
            found += optional_fields(props[key], path, depth + 1)
    if isinstance(schema.get("items"), dict):
        found += optional_fields(schema["items"], f"{prefix}[]", depth + 1)
    return list(dict.fromkeys(found))


def _json_text_values(values: Sequence[Any]) -> list[Any] | None:
    """The parsed values when every sample is a string holding a JSON object or array."""
    parsed: list[Any] = []
    for value in values:
        if not isinstance(value, str) or len(value) > MAX_JSON_TEXT_CHARS:
            return None
        ok, data = parse_json_text(value)
        if not ok or not isinstance(data, dict | list):
            return None  # "42" or "true" is far more likely an id or flag than a JSON document
        parsed.append(data)
    return parsed


class MergedSamples:
    """What `infer_output` says about a tool's samples, kept as genson's merged state instead of
    the samples: results are added one at a time (`add`) and dropped, so a host learning from
    live calls holds memory in proportion to the type, not to the results it has seen.

    Each sample gets its own MAX_INFER_NODES budget (generate's is shared by at most
    `max_samples` lines); otherwise `inference()` equals `infer_output` over the same results."""

    def __init__(self, mode: UnwrapMode = "spec") -> None:
        self.mode = mode
        self.samples = 0
        self._values = _Builder(schema_uri=None)
        # spec mode, while every sample is a string holding a JSON object/array: the JSON inside
        self._json: _Builder | None = _Builder(schema_uri=None) if mode == "spec" else None
        self._notes: set[str] = set()

    def add(self, result: Any, *, whole: bool = False) -> bool:
        """Merge one call's wire result; False (nothing merged) for one that never describes the
        return type (not an object, isError). `whole`: a result of more than MAX_INFER_NODES
        values is not merged at all (False) instead of typed partly as unknown; the bound is
        checked by the same walk that copies the sample, so refusing one costs no walk more."""
        if not isinstance(result, dict) or result.get("isError") is True:
            return False
        value = unwrap_result(result, self.mode)
        notes: set[str] = set()
        json_value: Any = None
        if self._json is not None:
            parsed = _json_text_values([value])
            if parsed is not None:
                json_value = _bound(parsed[0], 0, notes, [MAX_INFER_NODES])
        bounded = _bound(value, 0, notes, [MAX_INFER_NODES])
        if whole and _OVER_BUDGET in notes:
            return False
        if self._json is not None:
            if json_value is None:
                self._json = None
            else:
                self._json.add_object(json_value)
        self._values.add_object(bounded)
        self._notes |= notes
        self.samples += 1
        return True

    def state_bytes(self) -> int:
        """JSON bytes of the merged state before maps are recognised: what the merge holds
        (a map of ever new keys keeps a small type while genson keeps every key it saw)."""
        values = len(
            json.dumps(_simplify(self._values.to_schema()), separators=(",", ":"), default=str)
        )
        inner = (
            len(json.dumps(_simplify(self._json.to_schema()), separators=(",", ":"), default=str))
            if self._json
            else 0
        )
        return values + inner

    def inference(self) -> Inference:
        notes = tuple(sorted(self._notes))
        if not self.samples:
            return Inference(schema=None, samples=0)
        if self._json is not None:
            inner = _maps(_simplify(self._json.to_schema()))
            schema = {"type": "string", "contentMediaType": JSON_MEDIA_TYPE, "contentSchema": inner}
            return Inference(
                schema=schema,
                samples=self.samples,
                json_text=True,
                json_schema=inner,
                optional=tuple(optional_fields(inner)),
                warnings=notes,
            )
        schema = _maps(_simplify(self._values.to_schema()))
        return Inference(
            schema=schema,
            samples=self.samples,
            optional=tuple(optional_fields(schema)),
            warnings=notes,
        )


def infer_output(calls: Sequence[dict[str, Any]], mode: UnwrapMode = "spec") -> Inference:
    """Infer the return type of one tool from its recorded calls (unwrapped like the runtime)."""
    samples = unwrapped_samples(calls, mode)
    warnings: list[str] = []
    if len(samples) > MAX_INFER_SAMPLES:
        warnings.append(f"only the first {MAX_INFER_SAMPLES} of {len(samples)} samples inferred")
        samples = samples[:MAX_INFER_SAMPLES]
    if not samples:
        return Inference(schema=None, samples=0, warnings=tuple(warnings))
    values = [s.value for s in samples]
    parsed = _json_text_values(values) if mode == "spec" else None
    if parsed is not None:
        inner, notes = infer_schema(parsed)
        schema = {"type": "string", "contentMediaType": JSON_MEDIA_TYPE, "contentSchema": inner}
        return Inference(
            schema=schema,
            samples=len(samples),
            json_text=True,
            json_schema=inner,
            optional=tuple(optional_fields(inner)),
            warnings=tuple(warnings) + notes,
        )
    schema, notes = infer_schema(values)
    return Inference(
        schema=schema,
        samples=len(samples),
        optional=tuple(optional_fields(schema)),
        warnings=tuple(warnings) + notes,
    )
