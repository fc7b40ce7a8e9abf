"""core/records.py's NamedTuple makes, from a class body, the class typing.NamedTuple makes from it:
the same fields, defaults, methods and tuple behaviour, and the same refusals."""

from __future__ import annotations

import pickle
import typing
from typing import Any

import pytest
from ctxpipe.core import records


def made(base: Any) -> type:
    class Point(base):  # type: ignore[misc,valid-type]
        """A point on the line."""

        x: int
        y: int = 0
        label: str | None = None

        @property
        def norm(self) -> int:
            return abs(self.x) + abs(self.y)

        @classmethod
        def origin(cls) -> Any:
            return cls(0)

        def moved(self, by: int) -> Any:
            return self._replace(x=self.x + by)

    return Point


# Pickled by name, as a class of a module is: one of each at module level.
PlainPoint = made(typing.NamedTuple)
LightPoint = made(records.NamedTuple)
PlainPoint.__qualname__ = "PlainPoint"
LightPoint.__qualname__ = "LightPoint"


def behaviour(cls: Any) -> dict[str, Any]:
    point = cls(3, -4, "p")
    return {
        "fields": cls._fields,
        "defaults": cls._field_defaults,
        "annotated": list(cls.__annotations__),  # the values are the annotations as written (typing's: ForwardRefs of them)
        "doc": cls.__doc__,
        "repr": repr(point).replace(cls.__name__, "P"),
        "tuple": tuple(point),
        "default": tuple(cls(1)),
        "keywords": tuple(cls(y=2, x=1)),
        "norm": point.norm,
        "origin": tuple(cls.origin()),
        "moved": tuple(point.moved(2)),
        "asdict": point._asdict(),
        "equal": point == (3, -4, "p"),
        "hash": hash(point) == hash((3, -4, "p")),
        "is a tuple": isinstance(point, tuple),
        "pickled": tuple(pickle.loads(pickle.dumps(point))),
        "module": cls.__module__,
    }


def test_a_record_behaves_as_typings_namedtuple_makes_it() -> None:
    assert behaviour(LightPoint) == behaviour(PlainPoint)


@pytest.mark.parametrize("base", [typing.NamedTuple, records.NamedTuple])
def test_both_refuse_a_field_without_a_default_after_one_with(base: Any) -> None:
    with pytest.raises(TypeError, match="Non-default namedtuple field y cannot follow default field"):

        class Bad(base):  # type: ignore[misc,valid-type]
            x: int = 0
            y: int


@pytest.mark.parametrize("base", [typing.NamedTuple, records.NamedTuple])
def test_both_refuse_a_method_namedtuple_owns(base: Any) -> None:
    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _replace"):

        class Bad(base):  # type: ignore[misc,valid-type]
            x: int

            def _replace(self, **changes: Any) -> Any:
                return self


def test_type_checking_is_false_at_run_time() -> None:
    assert records.TYPE_CHECKING is False
