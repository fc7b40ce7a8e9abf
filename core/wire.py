"""Reports as dataclasses, and their wire form: the JSON object a command prints.

A report is a dataclass (a `Wire`); `to_wire()` gives the plain dict the command writes, its keys in
the fields' order. A key the schema requires is a field without a default. A key present only
sometimes (a stage that changed nothing has no `stage`, `cleared`, …) is a field declared with
`sometimes()`: absent from the wire form while it is None. The few keys that are present only
sometimes *and* may be null when present use `sometimes_null()`: absent while they are `ABSENT`.
A field declared `spread()` holds another report whose keys stand in this one's, in the field's
place (a stage's own keys between `file` and the figures): a report generic in the report it spreads
(`StageReport[MicrocompactExtras]`) has the keys of its type argument too.
tests/test_report_schemas.py holds each report's fields to its schema's properties, `wire_keys` telling
the two kinds apart.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args, get_origin


class _Absent(enum.Enum):
    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent.ABSENT
Absent = Literal[_Absent.ABSENT]

# Field metadata: the value for which the key is left out of the wire form.
_ABSENT_WHEN = "ctxpipe.wire.absent_when"
_NO_OMISSION = object()
# Field metadata: the field's value is a report whose keys go in the wire form in its place.
_SPREAD = "ctxpipe.wire.spread"


def sometimes() -> Any:
    """A key present only sometimes: left out of the wire form while the field is None."""
    return dataclasses.field(default=None, metadata={_ABSENT_WHEN: None})


def sometimes_null() -> Any:
    """A key present only sometimes whose value may be null: left out while the field is ABSENT."""
    return dataclasses.field(default=ABSENT, metadata={_ABSENT_WHEN: ABSENT})


def spread() -> Any:
    """A report whose keys stand in the wire form in the field's place (none while it is None)."""
    return dataclasses.field(default=None, metadata={_ABSENT_WHEN: None, _SPREAD: True})


# Per class, once: (field name, the value that leaves it out, or _NO_OMISSION; whether it is spread).
_PLANS: dict[type, tuple[tuple[str, object, bool], ...]] = {}


def _plan(cls: type) -> tuple[tuple[str, object, bool], ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = tuple((f.name, f.metadata.get(_ABSENT_WHEN, _NO_OMISSION), _SPREAD in f.metadata) for f in dataclasses.fields(cls))
        _PLANS[cls] = plan
    return plan


_SCALARS = frozenset({str, int, float, bool, type(None)})


def to_wire(value: Any) -> Any:
    """The JSON-ready form of a report or of any value inside one (dataclasses, lists, dicts, scalars)."""
    cls = type(value)
    if cls in _SCALARS:
        return value
    write = _WRITERS.get(cls)
    if write is not None:
        return write(value)
    if dataclasses.is_dataclass(value):
        write = _WRITERS[cls] = _writer(cls)
        return write(value)
    if isinstance(value, Mapping):
        return {key: to_wire(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(item) for item in value]
    return value


# Per class, once: the function that writes its wire form.
_WRITERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _writer(cls: type) -> Callable[[Any], dict[str, Any]]:
    """to_wire of a report of class `cls`: a function written for it, as dataclasses writes
    __init__, with no loop over its fields (a report may hold 100,000 rows, and a batch's rows are
    most of what its parent does after the workers). The keys always present up to the first one
    that may be left out are one dict display; each later key is a statement. A scalar is kept
    without a call."""
    plan = _plan(cls)
    namespace: dict[str, Any] = {"scalars": _SCALARS, "to_wire": to_wire}
    body = [f"    v{number} = value.{name}" for number, (name, _, _) in enumerate(plan)]  # field names: identifiers, from the class
    leading = next((number for number, (_, absent_when, spread_) in enumerate(plan) if absent_when is not _NO_OMISSION or spread_), len(plan))
    first_keys = ", ".join(f"{name!r}: {_wire_value(number)}" for number, (name, _, _) in enumerate(plan[:leading]))
    body.append(f"    out = {{{first_keys}}}")
    for number, (name, absent_when, spread_) in enumerate(plan[leading:], leading):
        put = f"out.update(to_wire(v{number}))" if spread_ else f"out[{name!r}] = {_wire_value(number)}"
        if absent_when is _NO_OMISSION:  # always present, after one that may be left out
            body.append(f"    {put}")
        else:
            namespace[f"absent{number}"] = absent_when
            body.append(f"    if v{number} is not absent{number}:\n        {put}")
    exec("def write(value):\n" + "\n".join(body) + "\n    return out\n", namespace)
    written: Callable[[Any], dict[str, Any]] = namespace["write"]
    return written


def _wire_value(number: int) -> str:
    """The written writer's expression for field `number`'s wire value: a scalar as it is, without a call."""
    return f"v{number} if type(v{number}) in scalars else to_wire(v{number})"


def wire_keys(cls: type) -> tuple[frozenset[str], frozenset[str]]:
    """A report class's keys: (always present, present only sometimes); of a generic report
    (`StageReport[MicrocompactExtras]`), with those of the report it spreads (present only
    sometimes: a spread field may be None)."""
    always: set[str] = set()
    sometimes_: set[str] = set()
    for name, absent_when, spread_ in _plan(get_origin(cls) or cls):
        if not spread_:
            (always if absent_when is _NO_OMISSION else sometimes_).add(name)
    for spread_cls in get_args(cls):
        sometimes_.update(*wire_keys(spread_cls))
    return frozenset(always), frozenset(sometimes_)


class Wire:
    """A report: a dataclass whose wire form is `to_wire()`."""

    __slots__ = ()

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = to_wire(self)
        return wire
