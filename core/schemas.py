"""Load the JSON Schemas shipped in schemas/ and validate objects against them."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

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


def schema_names() -> list[str]:
    folder = resources.files("ctxpipe").joinpath("schemas")
    return sorted(item.name for item in folder.iterdir() if item.name.endswith(".json"))


@cache
def load(name: str) -> dict[str, Any]:
    data = resources.files("ctxpipe").joinpath("schemas").joinpath(name).read_bytes()
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
    import jsonschema_rs

    return jsonschema_rs.Draft202012Validator(load(name), registry=jsonschema_rs.Registry(_by_id()), offline=True)


def errors(name: str, instance: Any, raw: bytes | None = None) -> list[str]:
    """Every way `instance` breaks schema `name`, each as 'json.path: message', as jsonschema
    reports them (reference_errors) and in its order. `raw`: the bytes it was parsed from, if known.

    jsonschema alone is slow (it walks the whole line, about 1k lines/s), so a line first goes
    through the compiled check (some 100k lines/s), which passes a valid line; for one that fails,
    the compiled check says where (the instance and the schema keyword), and jsonschema's own
    keyword judges the value there and writes the message (_located_errors). A line whose errors
    cannot be explained that way is validated by jsonschema whole.
    """
    try:
        fast = fast_validator(name)
        try:
            if fast.is_valid(instance):
                return []
            located = _located_errors(name, fast, instance, raw)
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


def _located_errors(name: str, fast: Any, instance: Any, raw: bytes | None) -> list[str] | None:
    """errors() of a line that fails the compiled check, from where that check finds each error
    (None: jsonschema has to validate it whole).

    Each (value, keyword) jsonschema-rs reports is judged again by that keyword's jsonschema
    function, which writes the messages; it must find as many errors there as jsonschema-rs did.
    The order is jsonschema's: by path, and at one path in the order jsonschema walks the schema.
    """
    if _deeper_than(instance, raw, LOCATED_DEPTH):
        return None
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
    if len(explained) > 1:
        if len({tuple(path) for path, _, _ in explained}) < len(explained):  # errors at one path: in the order jsonschema meets them
            for index, group in enumerate(groups):
                order = _walk_order(name, group[3].evaluation_path)
                if order is None:
                    return None
                explained[index] = (explained[index][0], order, explained[index][2])
        explained.sort(key=_by_path_then_order)
    return [f"{'.'.join(map(str, path)) or '(line)'}: {message}" for path, _, messages in explained for message in messages]


# What jsonschema said of a scalar at a keyword location: the same scalar there (the same type and
# value) gets the same messages, and a file where every line fails often fails on the same values.
_JUDGED: dict[tuple[str, type, Any], list[str]] = {}
_JUDGED_MAX = 4096
_SCALARS = (str, int, bool, type(None))  # not float: -0.0 == 0.0, and jsonschema writes each as it is


def _judged(reference: Any, location: str, keyword: tuple[Any, Any, dict[str, Any]], target: Any) -> list[str]:
    """The messages of jsonschema's keyword at `location` on `target` (the errors it reports there)."""
    key = (location, type(target), target) if type(target) in _SCALARS else None
    if key is not None and (known := _JUDGED.get(key)) is not None:
        return known
    judge, value, schema = keyword
    messages = [error.message for error in judge(reference, value, target, schema) or () if not error.path]
    if key is not None:
        if len(_JUDGED) >= _JUDGED_MAX:
            _JUDGED.clear()
        _JUDGED[key] = messages
    return messages


def _by_path_then_order(item: tuple[list[Any], tuple[int, ...], list[str]]) -> tuple[list[Any], tuple[int, ...]]:
    return item[0], item[1]


def _deeper_than(instance: Any, raw: bytes | None, limit: int) -> bool:
    """Whether `instance` nests more than `limit` levels of objects and arrays."""
    if raw is not None and raw.count(b"{") + raw.count(b"[") <= limit:
        return False  # each level opens with one of these
    level = [instance] if type(instance) in _CONTAINERS else []
    for _ in range(limit):
        level = [child for value in level for child in (value.values() if type(value) is dict else value) if type(child) in _CONTAINERS]
        if not level:
            return False
    return True


_CONTAINERS = (dict, list, tuple)


@cache
def _keyword_at(location: str | None) -> tuple[Any, Any, dict[str, Any]] | None:
    """(jsonschema's function for the keyword, its value, the schema holding it) at an absolute
    keyword location ('https://…/x.schema.json#/$defs/a/type'); None unless a LEAF_KEYWORDS one."""
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
    return Draft202012Validator.VALIDATORS[keyword], node[keyword], node


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
