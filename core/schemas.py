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


def errors(name: str, instance: Any) -> list[str]:
    """Every way `instance` breaks schema `name`, each as 'json.path: message'."""
    found = []
    for error in sorted(validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(part) for part in error.absolute_path) or "(line)"
        found.append(f"{path}: {error.message}")
    return found
