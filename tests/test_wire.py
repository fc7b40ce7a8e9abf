"""A report's wire form: fields in order, keys present only sometimes left out while unset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import orjson
from ctxpipe.core.wire import ABSENT, Absent, Wire, sometimes, sometimes_null, spread, to_wire, wire_keys


@dataclass(kw_only=True, slots=True)
class Row(Wire):
    name: str
    note: str | None = sometimes()


@dataclass(kw_only=True, slots=True)
class Table(Row):
    rows: list[Row]
    by_name: dict[str, Row]
    usd: float | None | Absent = sometimes_null()


def test_the_wire_form_keeps_field_order_and_leaves_out_unset_keys() -> None:
    table = Table(name="t", rows=[Row(name="a", note="n"), Row(name="b")], by_name={"a": Row(name="a")})
    assert orjson.dumps(table.to_wire()) == b'{"name":"t","rows":[{"name":"a","note":"n"},{"name":"b"}],"by_name":{"a":{"name":"a"}}}'


def test_a_nullable_key_present_only_sometimes_is_written_as_null_once_set() -> None:
    assert Table(name="t", rows=[], by_name={}, usd=None).to_wire()["usd"] is None
    assert "usd" not in Table(name="t", rows=[], by_name={}, usd=ABSENT).to_wire()
    assert Table(name="t", rows=[], by_name={}, usd=1.5).to_wire()["usd"] == 1.5


def test_a_required_key_is_written_even_when_null() -> None:
    @dataclass(kw_only=True, slots=True)
    class Page(Wire):
        page: str | None

    assert Page(page=None).to_wire() == {"page": None}


def test_wire_keys_tell_the_always_present_from_the_sometimes() -> None:
    assert wire_keys(Table) == (frozenset({"name", "rows", "by_name"}), frozenset({"note", "usd"}))


def test_plain_values_pass_through() -> None:
    assert to_wire({"a": (1, 2.5, True, None, "s")}) == {"a": [1, 2.5, True, None, "s"]}


Spread = TypeVar("Spread", bound=Wire)


@dataclass(kw_only=True, slots=True)
class Framed(Wire, Generic[Spread]):
    file: str
    inner: Spread | None = spread()
    tokens: int


def test_a_spread_report_s_keys_stand_in_its_place() -> None:
    assert orjson.dumps(Framed(file="f", inner=Row(name="a", note="n"), tokens=3).to_wire()) == b'{"file":"f","name":"a","note":"n","tokens":3}'
    assert orjson.dumps(Framed[Row](file="f", tokens=3).to_wire()) == b'{"file":"f","tokens":3}'
    assert wire_keys(Framed[Row]) == (frozenset({"file", "tokens"}), frozenset({"name", "note"}))


def test_a_report_whose_keys_are_always_present_is_written_like_any_other() -> None:
    # Such a report (a finding's row) gets a writer of its own: the same keys in the same order,
    # scalars as they are, and whatever else it holds in wire form.
    @dataclass(kw_only=True, slots=True)
    class Flat(Wire):
        line: int | None
        message: str
        rows: list[Row]
        by_name: dict[str, Row]
        pair: tuple[int, float]

    flat = Flat(line=None, message="m", rows=[Row(name="a"), Row(name="b", note="n")], by_name={"x": Row(name="x")}, pair=(1, 2.5))
    assert (
        orjson.dumps(flat.to_wire()) == b'{"line":null,"message":"m","rows":[{"name":"a"},{"name":"b","note":"n"}],"by_name":{"x":{"name":"x"}},"pair":[1,2.5]}'
    )
    assert to_wire([flat, flat]) == [flat.to_wire(), flat.to_wire()]
