"""Load the JSON Schemas shipped in schemas/ and validate objects against them."""

from __future__ import annotations

import os
import threading
from functools import cache
from typing import Any, NamedTuple

import orjson

# The schema of every JSON report a command prints: (command, the flag that asks for it) -> file.
# tests/test_report_schemas.py fails for a command with --json or --report-json missing here.
REPORT_SCHEMAS: dict[tuple[str, str], str] = {
    ("count", "--json"): "count.report.schema.json",
    ("validate", "--json"): "validate.report.schema.json",
    ("warn", "--json"): "warn.report.schema.json",
    ("api-edits", "--json"): "api-edits.report.schema.json",
    ("compact", "--json"): "compact.report.schema.json",
    ("compact", "--report-json"): "compact.report.schema.json",
    ("report", "--json"): "report.report.schema.json",
    ("audit", "--json"): "audit.report.schema.json",
    ("restore", "--json"): "restore-plan.report.schema.json",  # with --plan, the only time restore prints JSON
    ("microcompact", "--report-json"): "microcompact.report.schema.json",
    ("collapse", "--report-json"): "collapse.report.schema.json",
    ("snip", "--report-json"): "snip.report.schema.json",
    ("summarize", "--report-json"): "summarize.report.schema.json",
    ("restore", "--report-json"): "restore.report.schema.json",
}


# A stage with no schema of its own (one just added) reports at least what every stage does.
STAGE_REPORT = "stage.report.schema.json"


def report_schema(command: str, flag: str) -> str | None:
    """The schema of what `command flag` prints or writes (None: it writes no JSON report)."""
    return REPORT_SCHEMAS.get((command, flag)) or (STAGE_REPORT if flag == "--report-json" else None)


# The package's schemas/ folder (package data beside the modules). Found from this file rather than
# through importlib.resources, whose import (tempfile, zipfile, …) cost validate 4 ms of its start.
FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas")


def schema_names() -> list[str]:
    return sorted(name for name in os.listdir(FOLDER) if name.endswith(".json"))


@cache
def load(name: str) -> dict[str, Any]:
    with open(os.path.join(FOLDER, name), "rb") as file:
        data = file.read()
    schema: dict[str, Any] = orjson.loads(data)
    return schema


def _by_id() -> list[tuple[str, dict[str, Any]]]:
    """Every schema file under its $id: `$ref`s between our files resolve through these, offline."""
    return [(schema.get("$id", file_name), schema) for file_name in schema_names() for schema in [load(file_name)]]


@cache
def _registry() -> Any:
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources((uri, Resource.from_contents(schema)) for uri, schema in _by_id())
    return registry


@cache
def validator(name: str) -> Any:
    """The reference Draft 2020-12 validator (jsonschema), which explains each problem."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load(name), registry=_registry())


@cache
def fast_validator(name: str) -> Any:
    """A compiled Draft 2020-12 check (jsonschema-rs, in Rust) of the same schemas."""
    return _compiled(load(name))


@cache
def _rs_registry() -> Any:
    import jsonschema_rs

    return jsonschema_rs.Registry(_by_id())


def _compiled(schema: dict[str, Any], keywords: dict[str, Any] | None = None) -> Any:
    import jsonschema_rs

    return jsonschema_rs.Draft202012Validator(schema, registry=_rs_registry(), offline=True, keywords=keywords)


def errors(name: str, instance: Any, raw: bytes | None = None) -> list[str]:
    """Every way `instance` breaks schema `name`, each as 'json.path: message', as jsonschema
    reports them (reference_errors) and in its order. `raw`: the bytes it was parsed from, if known.

    jsonschema alone is slow (it walks the whole line, about 1k lines/s), so a line first goes
    through the compiled check (some 100k lines/s), which passes a valid line; for one that fails,
    the compiled check says where (the instance and the schema keyword), and jsonschema's own
    keyword judges the value there and writes the message (_located_errors). A line that fails as
    an earlier one did is explained without asking the compiled check where (_known_errors). A
    line whose errors cannot be explained that way is validated by jsonschema whole.
    """
    try:
        known = _KNOWN.get(name)
        try:
            failed: list[int] | None = None  # the known places where it fails, when it fails at known places only
            if known is not None:  # the variant passes a valid line as the compiled check would
                failed = _FAILED.places = []
                if not known.relaxed.is_valid(instance):
                    failed = None  # it fails elsewhere too
                elif not failed:
                    return []
            elif fast_validator(name).is_valid(instance):
                return []
            if (raw is None or _openings(raw) > LOCATED_DEPTH) and _deeper_than(instance, None, LOCATED_DEPTH):
                located = None
            else:
                located = (_known_errors(name, known, instance, failed) if known is not None and failed else None) or _located_errors(
                    name, fast_validator(name), instance
                )
        except ValueError:  # a value JSON cannot hold (e.g. a non-string key): jsonschema decides
            located = None
        return reference_errors(name, instance) if located is None else located
    except RecursionError:  # jsonschema recurses a few frames per nested level (orjson allows 1024 levels)
        return ["(line): nested too deeply to check against the schema"]


def reference_errors(name: str, instance: Any) -> list[str]:
    """errors() by jsonschema alone."""
    found = []
    for error in sorted(validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(part) for part in error.absolute_path) or "(line)"
        found.append(f"{path}: {error.message}")
    return found


# Keywords that judge the value they apply to and descend nowhere: jsonschema reports a failure of
# one at that value, so where jsonschema-rs finds one failing, jsonschema's own keyword can judge
# it alone. (The other keywords of the line schemas only apply subschemas: properties, items,
# allOf, if/then, $ref.) An error at any other keyword sends its line to jsonschema whole.
LEAF_KEYWORDS = frozenset({"type", "required", "const", "enum", "minimum"})

# A line nested deeper than this goes to jsonschema whole, as before: jsonschema recurses about 7
# frames a level, so its recursion runs out past some 110 levels, and it then reports "nested too
# deeply", which the located errors would not. Real lines are about 10 levels deep at most.
LOCATED_DEPTH = 48


def _located_errors(name: str, fast: Any, instance: Any) -> list[str] | None:
    """errors() of a line that fails the compiled check, from where that check finds each error
    (None: jsonschema has to validate it whole).

    Each (value, keyword) jsonschema-rs reports is judged again by that keyword's jsonschema
    function, which writes the messages; it must find as many errors there as jsonschema-rs did.
    The order is jsonschema's: by path, and at one path in the order jsonschema walks the schema.
    """
    groups: list[list[Any]] = []  # [path, keyword location, errors there, first error], in jsonschema-rs's order
    for error in fast.iter_errors(instance):
        steps, location = error.instance_path, error.absolute_keyword_location
        if groups and groups[-1][0] == steps and groups[-1][1] == location:
            groups[-1][2] += 1  # a keyword that fails more than once there (required: each missing name)
        else:
            groups.append([steps, location, 1, error])
    if not groups:  # it failed the check yet has no error: jsonschema decides
        return None
    reference = validator(name)
    explained: list[tuple[list[Any], tuple[int, ...], list[str]]] = []  # (path, walk order, messages)
    for steps, location, count, _ in groups:
        keyword = _keyword_at(location)
        place = _place(instance, steps)
        if keyword is None or place is None:
            return None
        path, target = place
        messages = _judged(reference, location, keyword, target)
        if len(messages) != count:
            return None
        explained.append((path, (), messages))
    _learn(name, groups, explained)
    if len(explained) > 1:
        if len({tuple(path) for path, _, _ in explained}) < len(explained):  # errors at one path: in the order jsonschema meets them
            for index, group in enumerate(groups):
                order = _walk_order(name, group[3].evaluation_path)
                if order is None:
                    return None
                explained[index] = (explained[index][0], order, explained[index][2])
        explained.sort(key=_by_path_then_order)
    return [f"{'.'.join(map(str, path)) or '(line)'}: {message}" for path, _, messages in explained for message in messages]


# What jsonschema said at a keyword location, by what its messages there depend on: a scalar (the
# same type and value); for `required` on an object, which of the names it has (jsonschema names
# each missing one). A file where every line fails often fails on the same values.
_JUDGED: dict[tuple[Any, ...], list[str]] = {}
_JUDGED_MAX = 4096
_SCALARS = (str, int, bool, type(None))  # not float: -0.0 == 0.0, and jsonschema writes each as it is
# `type` at a keyword location: its message after the value's repr, by the value's Python type.
# jsonschema judges a str, int, bool or None by its type alone, so a value of a type that failed
# there fails again, written the same way (a timestamp written as a number fails each line anew).
_TAILS: dict[tuple[str, type], str] = {}


def _judged(reference: Any, location: str, keyword: _Keyword, target: Any) -> list[str]:
    """The messages of jsonschema's keyword at `location` on `target` (the errors it reports there)."""
    kind = type(target)
    if kind in _SCALARS:
        if (tail := _TAILS.get((location, kind))) is not None:
            return [f"{target!r}{tail}"]
        key: tuple[Any, ...] | None = (location, kind, target)
    elif kind is dict and keyword.name == "required" and type(keyword.value) is list:
        key = (location, *map(target.__contains__, keyword.value))
    else:
        key = None
    if key is not None and (known := _JUDGED.get(key)) is not None:
        return known
    messages = [error.message for error in keyword.judge(reference, keyword.value, target, keyword.schema) or () if not error.path]
    if kind in _SCALARS and keyword.name == "type" and len(messages) == 1 and messages[0].startswith(shown := repr(target)):
        _TAILS[location, kind] = messages[0][len(shown) :]  # at most a few types per location
    elif key is not None:
        if len(_JUDGED) >= _JUDGED_MAX:
            _JUDGED.clear()
        _JUDGED[key] = messages
    return messages


def _by_path_then_order(item: tuple[list[Any], tuple[int, ...], list[str]]) -> tuple[list[Any], tuple[int, ...]]:
    return item[0], item[1]


def _deeper_than(instance: Any, raw: bytes | None, limit: int) -> bool:
    """Whether `instance` nests more than `limit` levels of objects and arrays."""
    if raw is not None and _openings(raw) <= limit:
        return False  # each level opens with one of these
    level = [instance] if type(instance) in _CONTAINERS else []
    for _ in range(limit):
        level = [child for value in level for child in (value.values() if type(value) is dict else value) if type(child) in _CONTAINERS]
        if not level:
            return False
    return True


_CONTAINERS = (dict, list, tuple)


def _openings(raw: bytes) -> int:
    """How many `{` and `[` the bytes hold: what deleting them takes away. (bytes.replace finds a
    byte with memchr; bytes.count and translate look at every byte, at half the speed, and a failing
    line's depth is bounded so on every line.)"""
    return len(raw) - len(raw.replace(b"{", b"").replace(b"[", b""))


class _Keyword(NamedTuple):
    name: str
    judge: Any  # jsonschema's function for it
    value: Any
    schema: dict[str, Any]  # the schema holding it


@cache
def _keyword_at(location: str | None) -> _Keyword | None:
    """The keyword at an absolute keyword location ('https://…/x.schema.json#/$defs/a/type');
    None unless a LEAF_KEYWORDS one."""
    from urllib.parse import unquote

    from jsonschema import Draft202012Validator

    if location is None:
        return None
    uri, _, pointer = location.partition("#")
    try:
        node: Any = _registry().contents(uri)
        *parents, keyword = [unquote(part).replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]] or [""]
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
    except (LookupError, ValueError, TypeError):
        return None
    if keyword not in LEAF_KEYWORDS or not isinstance(node, dict) or keyword not in node:
        return None
    return _Keyword(keyword, Draft202012Validator.VALIDATORS[keyword], node[keyword], node)


def _place(instance: Any, steps: tuple[Any, ...]) -> tuple[list[Any], Any] | None:
    """(the path as jsonschema writes it, the value there) of a jsonschema-rs instance path, or None.
    (jsonschema-rs gives an object key that looks like a number as a number.)"""
    path: list[Any] = []
    for step in steps:
        if type(instance) is dict:
            step = str(step)
            if step not in instance:
                return None
        elif type(instance) is not list or type(step) is not int or not 0 <= step < len(instance):
            return None
        path.append(step)
        instance = instance[step]
    return path, instance


_NOWHERE = object()


def _value_at(instance: Any, steps: tuple[Any, ...]) -> Any:
    """The value _place finds (_NOWHERE where it finds none), without the path it writes."""
    for step in steps:
        if type(instance) is dict:
            if type(step) is not str:
                step = str(step)
            if step not in instance:
                return _NOWHERE
        elif type(instance) is not list or type(step) is not int or not 0 <= step < len(instance):
            return _NOWHERE
        instance = instance[step]
    return instance


def _walk_order(name: str, evaluation_path: Any) -> tuple[int, ...] | None:
    """Where jsonschema meets a keyword when it walks schema `name` (each step's position in its
    object or array, following $refs), from jsonschema-rs's evaluation path to that keyword.

    jsonschema takes a schema's keywords in their order, `if` leading to `then`/`else`, and
    `properties` in theirs: at one value, errors come out in the order of these positions.
    """
    from referencing.exceptions import Unresolvable

    node: Any = load(name)
    resolver = _registry().resolver(base_uri=node.get("$id", ""))
    order: list[int] = []
    named = False  # node maps names to schemas (properties, $defs), not keywords to values
    try:
        for step in evaluation_path:
            if isinstance(node, list):
                order.append(int(step))
                node = node[int(step)]
            elif named:
                order.append(list(node).index(str(step)))
                node = node[str(step)]
            elif step == "$ref":
                order.append(list(node).index("$ref"))
                resolved = resolver.lookup(node["$ref"])
                node, resolver = resolved.contents, resolved.resolver
            else:
                order.append(list(node).index("if" if step in ("then", "else") else step))
                node = node[step]
            named = step in ("properties", "$defs", "patternProperties", "dependentSchemas") and not named
    except (LookupError, ValueError, TypeError, Unresolvable):
        return None
    return tuple(order)


# --- known places: a line that fails where earlier ones did -----------------------------------------
#
# jsonschema-rs's errors cost some 10-15 µs each (is_valid: 1-2 µs a line), more than parsing the
# line, and the lines that fail in a file mostly fail in the same few places. A place is where an
# error was: its evaluation (the chain of allOf, then/else, $ref, properties and items steps from
# the schema's root to a keyword that judges a value) and the instance path it reached. Once a
# place has been seen twice, the schema is compiled again with the keyword of each known place
# turned, there alone, into `if: {keyword}, else: {a keyword of ours that notes the place}` (so
# it never fails; _variant copies the chains and references everything else). A failing line that
# is valid under this variant fails at known places only, and jsonschema-rs has noted which;
# there jsonschema's keyword judges the value, as in _located_errors. Every decision is
# jsonschema-rs's or jsonschema's.

PLACES_KEPT = 32  # known places per schema (the variant is compiled again, about 1 ms, as one is added)
PLACE_SEEN_TO_KEEP = 2
_FAILED_KEYWORD = "x-ctxpipe-failed"
_VARIANT_ID = "https://ctxpipe.dev/schemas/variant-{}.schema.json"


class _Known:
    __slots__ = ("places", "chains", "relaxed")

    def __init__(self) -> None:
        # (instance path, how errors() writes it, keyword location, its keyword, walk order) of each
        self.places: list[tuple[tuple[Any, ...], str, str, _Keyword, tuple[int, ...]]] = []
        self.chains: list[list[tuple[Any, ...]]] = []
        self.relaxed: Any = None  # the variant


_LEARNING: dict[str, _Known] = {}
_KNOWN: dict[str, _Known] = {}  # those of _LEARNING with a compiled variant
_SEEN: dict[tuple[str, tuple[Any, ...], tuple[Any, ...]], int] = {}
_VARIANTS = [0]  # variants compiled so far (each gets an $id of its own)
_FAILED = threading.local()  # the places the variant noted, in the thread that validates


class _Failed:
    """The keyword of the variant's `else`: notes that the keyword of a known place failed there."""

    def __init__(self, parent_schema: Any, value: list[int], schema_path: Any) -> None:
        self.places = value

    def validate(self, instance: Any) -> None:
        _FAILED.places.extend(self.places)


def _known_errors(name: str, known: _Known, instance: Any, failed: list[int]) -> list[str] | None:
    """errors() of a line that fails at these known places only (None: not understood there)."""
    if len(failed) == 1:  # most lines that fail, fail once
        steps, shown, location, keyword, _ = known.places[failed[0]]
        target = _value_at(instance, steps)
        if target is _NOWHERE:
            return None
        if (tail := _TAILS.get((location, type(target)))) is not None:  # _judged's first answer, without the calls
            return [f"{shown}: {target!r}{tail}"]
        messages = _judged(validator(name), location, keyword, target)
        return [f"{shown}: {message}" for message in messages] if messages else None
    reference = validator(name)
    explained = []
    for number in sorted(set(failed)):
        steps, shown, location, keyword, order = known.places[number]
        place = _place(instance, steps)
        if place is None:
            return None
        messages = _judged(reference, location, keyword, place[1])
        if not messages:  # jsonschema-rs and jsonschema disagree there: ask jsonschema-rs
            return None
        explained.append((place[0], order, [f"{shown}: {message}" for message in messages]))
    if len(explained) > 1:
        explained.sort(key=_by_path_then_order)
    return [line for _, _, lines in explained for line in lines]


def _learn(name: str, groups: list[list[Any]], explained: list[tuple[list[Any], tuple[int, ...], list[str]]]) -> None:
    """Count the places of a line _located_errors explained; keep a place the second time it is seen."""
    known = _LEARNING.setdefault(name, _Known())
    if len(known.places) >= PLACES_KEPT:
        return
    before = len(known.places)
    for group, (path, _, _) in zip(groups, explained):
        key = (name, tuple(group[3].evaluation_path), tuple(path))
        seen = _SEEN.get(key, 0) + 1
        if len(_SEEN) >= 4096:
            _SEEN.clear()
        _SEEN[key] = seen
        if seen != PLACE_SEEN_TO_KEEP or len(known.places) >= PLACES_KEPT:
            continue
        chain = _chain(key[1], path)
        order = _walk_order(name, key[1])
        keyword = _keyword_at(group[1])
        if chain is not None and order is not None and keyword is not None:
            known.places.append((tuple(path), ".".join(map(str, path)) or "(line)", group[1], keyword, order))
            known.chains.append(chain)
    if len(known.places) > before:
        try:
            known.relaxed = _compiled(_variant(name, known.chains), keywords={_FAILED_KEYWORD: _Failed})
        except (LookupError, ValueError, TypeError):  # a chain it cannot copy: that place stays unknown
            del known.places[before:], known.chains[before:]
            return
        _KNOWN[name] = known


def _chain(evaluation: tuple[Any, ...], path: list[Any]) -> list[tuple[Any, ...]] | None:
    """An evaluation path as steps through the schemas, each instance step taken from `path`:
    ("allOf", n), ("then",), ("else",), ("$ref",), ("properties", name), ("items", index), and
    last ("keyword", name). None: a step of another kind (such a place is not kept)."""
    steps = iter(evaluation)
    instance = iter(path)
    chain: list[tuple[Any, ...]] = []
    try:
        for step in steps:
            if step == "allOf":
                chain.append(("allOf", int(next(steps))))
            elif step in ("then", "else", "$ref"):
                chain.append((step,))
            elif step == "properties":
                name = str(next(steps))
                if next(instance) != name:
                    return None
                chain.append(("properties", name))
            elif step == "items":
                index = next(instance)
                if type(index) is not int:
                    return None
                chain.append(("items", index))
            elif step in LEAF_KEYWORDS:
                chain.append(("keyword", step))
                break
            else:
                return None
    except StopIteration:
        return None
    if next(steps, None) is not None or next(instance, None) is not None or not chain or chain[-1][0] != "keyword":
        return None
    return chain


def _variant(name: str, chains: list[list[tuple[Any, ...]]]) -> dict[str, Any]:
    """The schema `name` with the keyword at the end of each chain, there alone, replaced by
    `allOf: [{if: {keyword}, else: {_FAILED_KEYWORD: [the chain's number]}}]` (copies along the
    chains; everything else is referenced, every $ref absolute)."""
    trie: dict[Any, Any] = {}
    for number, chain in enumerate(chains):
        node = trie
        for step in chain[:-1]:
            node = node.setdefault(step, {})
        node.setdefault(None, []).append((chain[-1][1], number))
    _VARIANTS[0] += 1
    uri = _VARIANT_ID.format(_VARIANTS[0])
    defs: dict[str, Any] = {}
    variant = _edited(_absolute(name), trie, defs, uri)
    variant["$id"] = uri
    variant["$defs"] = {**variant.get("$defs", {}), **defs}
    return variant


def _edited(schema: dict[str, Any], trie: dict[Any, Any], defs: dict[str, Any], uri: str) -> dict[str, Any]:
    if not isinstance(schema, dict):
        raise TypeError("a chain through a schema that is not an object")
    copy = dict(schema)
    items: dict[int, Any] = {}
    noted = []
    for step, below in trie.items():
        if step is None:
            for keyword, number in below:
                noted.append({"if": {keyword: copy.pop(keyword)}, "else": {_FAILED_KEYWORD: [number]}})
        elif step[0] == "allOf":
            parts = list(copy["allOf"])
            parts[step[1]] = _edited(parts[step[1]], below, defs, uri)
            copy["allOf"] = parts
        elif step[0] in ("then", "else"):
            if "if" not in copy:
                raise LookupError("then without if")
            copy[step[0]] = _edited(copy[step[0]], below, defs, uri)
        elif step[0] == "properties":
            properties = dict(copy["properties"])
            properties[step[1]] = _edited(properties[step[1]], below, defs, uri)
            copy["properties"] = properties
        elif step[0] == "$ref":
            target = {key: value for key, value in _resolved(copy["$ref"]).items() if key not in ("$id", "$schema")}
            label = f"ctxpipe-edit-{len(defs)}"
            defs[label] = None  # the label is taken before the chain below fills it
            defs[label] = _edited(target, below, defs, uri)
            copy["$ref"] = f"{uri}#/$defs/{label}"
        else:  # ("items", index): the item at that index gets a copy, through prefixItems
            items[step[1]] = below
    if items:
        if "prefixItems" in copy or not isinstance(copy.get("items"), dict):
            raise ValueError("items that are not one schema for every item")
        prefix = [copy["items"]] * (max(items) + 1)
        for index, below in items.items():
            prefix[index] = _edited(copy["items"], below, defs, uri)
        copy["prefixItems"] = prefix
    if noted:  # after the allOf of the chains, whose places they keep
        copy["allOf"] = [*copy.get("allOf", ()), *noted]
    return copy


@cache
def _absolute_documents() -> dict[str, dict[str, Any]]:
    """Every schema file by its $id, each $ref in it made absolute (so a copy of any part of it
    means the same wherever it is put)."""
    from urllib.parse import urljoin

    def absolute(node: Any, base: str, named: bool = False) -> Any:
        if isinstance(node, list):
            return [absolute(item, base) for item in node]
        if not isinstance(node, dict):
            return node
        copy = {}
        for key, value in node.items():
            if not named and key == "$ref" and isinstance(value, str):
                copy[key] = urljoin(base, value)
            elif not named and key in ("const", "enum", "default", "examples"):
                copy[key] = value  # values, not schemas
            else:
                copy[key] = absolute(value, base, named=not named and key in ("properties", "$defs", "patternProperties", "dependentSchemas"))
        return copy

    return {uri: absolute(schema, uri) for uri, schema in _by_id()}


def _absolute(name: str) -> dict[str, Any]:
    return _absolute_documents()[load(name).get("$id", name)]


def _resolved(reference: str) -> dict[str, Any]:
    """The schema an absolute $ref names, in _absolute_documents."""
    from urllib.parse import unquote

    uri, _, pointer = reference.partition("#")
    node: Any = _absolute_documents()[uri]
    for part in [unquote(part).replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if not isinstance(node, dict):
        raise TypeError("a $ref to a schema that is not an object")
    return node
