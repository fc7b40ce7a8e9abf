"""typing's names that the status line's light path needs, without importing typing.

Claude Code runs `ctxpipe statusline` after every message, and a run its memo answers is mostly
Python's own start and the modules it loads: `typing` alone is about 4 ms of it, a seventh of the
run. The modules on that path take these two names from here:

    from ..core.records import TYPE_CHECKING

    if TYPE_CHECKING:
        from typing import Any, NamedTuple
    else:
        from ..core.records import NamedTuple

A type checker reads any name TYPE_CHECKING as true, so it sees typing's NamedTuple and checks the
fields' types (the modules `--help` loads, which load nothing of core, take TYPE_CHECKING from
their own package: cli/__init__.py, files/dataclass_code.py); at run time the class is the one `collections.namedtuple` makes, as typing's
NamedTuple makes it (tests/test_records.py holds the two to the same behaviour). Its
`__annotations__` are kept as written (strings, under `from __future__ import annotations`), not
made ForwardRefs: nothing here reads them at run time.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False

# Names typing.NamedTuple does not copy from the class body, or refuses there.
_SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})
_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults", "_make", "_replace", "_asdict", "_source"})


class _RecordMeta(type):
    def __new__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, object]) -> type:
        if not bases:  # NamedTuple itself
            return super().__new__(cls, name, bases, namespace)
        annotations = dict(namespace.get("__annotations__", {}))  # type: ignore[call-overload]
        with_defaults: list[str] = []
        for field in annotations:
            if field in namespace:
                with_defaults.append(field)
            elif with_defaults:
                raise TypeError(f"Non-default namedtuple field {field} cannot follow default field {with_defaults[0]}")
        make = namedtuple  # called as a function: its class is made from the annotations here
        record: type = make(name, list(annotations), defaults=[namespace[field] for field in with_defaults], module=str(namespace["__module__"]))
        record.__annotations__ = annotations
        for key, value in namespace.items():
            if key in _PROHIBITED:
                raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
            if key not in _SPECIAL and key not in annotations:
                setattr(record, key, value)
        return record


class NamedTuple(metaclass=_RecordMeta):
    """A class of typed fields made a tuple, as `class Point(NamedTuple): x: int; y: int = 0` makes one."""
