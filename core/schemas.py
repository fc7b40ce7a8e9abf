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
def validator(name: str) -> Any:
    """The reference Draft 2020-12 validator (jsonschema), which explains each problem."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources((uri, Resource.from_contents(schema)) for uri, schema in _by_id())
    return Draft202012Validator(load(name), registry=registry)


@cache
def fast_validator(name: str) -> Any:
    """A compiled Draft 2020-12 yes/no check (jsonschema-rs, in Rust) of the same schemas."""
    import jsonschema_rs

    return jsonschema_rs.Draft202012Validator(load(name), registry=jsonschema_rs.Registry(_by_id()), offline=True)


def errors(name: str, instance: Any) -> list[str]:
    """Every way `instance` breaks schema `name`, each as 'json.path: message'.

    jsonschema is the reference and writes the messages; it is slow (about 1k lines/s), so a line
    first goes through the compiled check (some 100k lines/s) and only one that fails it is
    validated again.
    """
    try:
        try:
            if fast_validator(name).is_valid(instance):
                return []
        except ValueError:  # a value JSON cannot hold (e.g. a non-string key): jsonschema decides
            pass
        return reference_errors(name, instance)
    except RecursionError:  # jsonschema recurses a few frames per nested level (orjson allows 1024 levels)
        return ["(line): nested too deeply to check against the schema"]


def reference_errors(name: str, instance: Any) -> list[str]:
    """errors() by jsonschema alone."""
    found = []
    for error in sorted(validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(part) for part in error.absolute_path) or "(line)"
        found.append(f"{path}: {error.message}")
    return found
