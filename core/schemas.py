"""Load the JSON Schemas shipped in schemas/ and validate objects against them."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import orjson


def schema_names() -> list[str]:
    folder = resources.files("ctxpipe").joinpath("schemas")
    return sorted(item.name for item in folder.iterdir() if item.name.endswith(".json"))


@cache
def load(name: str) -> dict[str, Any]:
    data = resources.files("ctxpipe").joinpath("schemas", name).read_bytes()
    schema: dict[str, Any] = orjson.loads(data)
    return schema


@cache
def validator(name: str) -> Any:
    """A Draft 2020-12 validator; `$ref`s between our files resolve offline through a local registry."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources(
        (schema.get("$id", file_name), Resource.from_contents(schema))
        for file_name in schema_names()
        for schema in [load(file_name)]
    )
    return Draft202012Validator(load(name), registry=registry)


# The keywords our schemas use, all of which fastjsonschema (a draft-07 code generator) implements
# as jsonschema's Draft 2020-12 validator does. A schema using any other keyword gets no fast path.
FAST_KEYWORDS = frozenset({"$schema", "$id", "$ref", "$defs", "title", "description", "type", "properties", "required",
                           "allOf", "if", "then", "const", "enum", "items", "minimum"})


def _keywords(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            # Under properties and $defs the keys are names, not keywords.
            for child in value.values() if key in ("properties", "$defs") and isinstance(value, dict) else [value]:
                found |= _keywords(child)
    elif isinstance(schema, list):
        for child in schema:
            found |= _keywords(child)
    return found


@cache
def fast_validator(name: str) -> Any:
    """A compiled yes/no check for schema `name` (fastjsonschema), or None where it might not agree
    with jsonschema (a keyword outside FAST_KEYWORDS). It raises on the first problem it meets."""
    import fastjsonschema

    by_id = {schema.get("$id"): schema for schema in map(load, schema_names())}
    used = [load(name)]

    def local(uri: str) -> dict[str, Any]:  # a $ref to one of our own files: never the network
        schema = by_id.get(uri.split("#")[0])
        if schema is None:
            raise ValueError(f"schema {uri} is not one of ctxpipe's")
        used.append(schema)
        return schema

    # use_default would write defaults into the instance and use_formats checks "format", which
    # jsonschema does not: both off, so a line passes exactly when jsonschema finds no error.
    compiled = fastjsonschema.compile(used[0], handlers={"https": local}, use_default=False, use_formats=False)
    return None if any(_keywords(schema) - FAST_KEYWORDS for schema in used) else compiled


def errors(name: str, instance: Any) -> list[str]:
    """Every way `instance` breaks schema `name`, each as 'json.path: message'.

    jsonschema is the reference and writes the messages; it is slow (about 1k lines/s), so a line
    first goes through the compiled fast check and only one that fails it is validated again.
    """
    fast = fast_validator(name)
    try:
        if fast is not None:
            import fastjsonschema

            try:
                fast(instance)
                return []
            except fastjsonschema.JsonSchemaValueException:
                pass
        return reference_errors(name, instance)
    except RecursionError:  # both validators recurse once per nested level (orjson allows 1024)
        return ["(line): nested too deeply to check against the schema"]


def reference_errors(name: str, instance: Any) -> list[str]:
    """errors() by jsonschema alone."""
    found = []
    for error in sorted(validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(part) for part in error.absolute_path) or "(line)"
        found.append(f"{path}: {error.message}")
    return found
