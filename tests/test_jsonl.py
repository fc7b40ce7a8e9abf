"""The line reader and writer: exact bytes in, exact bytes out, precise errors."""

from __future__ import annotations

import io

import orjson
import pytest
from ctxpipe.core.errors import InputError
from ctxpipe.core.jsonl import Entry, ReadStats, iter_entries, write_entries


def read(data: bytes, on_error: str = "fail", stats: ReadStats | None = None) -> list[Entry]:
    return list(iter_entries(io.BytesIO(data), "t.jsonl", on_error, stats))  # type: ignore[arg-type]


def roundtrip(data: bytes) -> bytes:
    out = io.BytesIO()
    write_entries(read(data), out)
    return out.getvalue()


def test_untouched_lines_are_written_back_byte_identical() -> None:
    data = b'{"b":1,"a":"\xc3\xa9\\u001b[1m"}\n{"type":"x","n":1.50}\r\n{"z":[]}'
    assert roundtrip(data) == data


def test_bom_is_dropped_and_blank_lines_skipped() -> None:
    entries = read(b'\xef\xbb\xbf{"a":1}\n\n   \n{"b":2}\n')
    assert [e.obj for e in entries] == [{"a": 1}, {"b": 2}]
    assert [e.line for e in entries] == [1, 4]


def test_line_separators_inside_strings_do_not_split_lines() -> None:
    data = '{"text":"a\u2028b\u2029c\x85d"}\n'.encode()
    entries = read(data)
    assert len(entries) == 1 and entries[0].obj["text"] == "a\u2028b\u2029c\x85d"
    assert roundtrip(data) == data


def test_a_twelve_megabyte_line_is_fine() -> None:
    data = orjson.dumps({"type": "user", "content": "x" * 12_000_000}) + b"\n"
    assert roundtrip(data) == data


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b'{"a":1}\n{oops}\n{"b":2}\n', 2, "invalid JSON"),
        (b'{"a":1}\n{"a":"\xff\xfe"}\n', 2, "invalid UTF-8"),
        (b"[1,2]\n", 1, "found an array"),
        (b'"text"\n', 1, "found a string"),
        (b"\x00\x01\x02garbage\n", 1, "binary data"),
        (b'{"a":1}\n{"type":"assist', 2, "truncated last line"),
    ],
)
def test_bad_lines_are_located_and_explained(data: bytes, line: int, words: str) -> None:
    with pytest.raises(InputError) as caught:
        read(data)
    assert caught.value.line == line
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"t.jsonl:{line}: ")


def test_an_unterminated_but_complete_last_line_is_accepted() -> None:
    assert [e.obj for e in read(b'{"a":1}\n{"b":2}')] == [{"a": 1}, {"b": 2}]


def test_skip_policy_counts_and_locates_what_it_left_out() -> None:
    stats = ReadStats()
    entries = read(b'{"a":1}\nnope\n[1]\n{"b":2}\n', "skip", stats)
    assert [e.obj for e in entries] == [{"a": 1}, {"b": 2}]
    assert stats.skipped == 2
    assert [line for line, _ in stats.problems] == [2, 3]


def test_an_entry_appended_after_an_unterminated_line_starts_on_a_new_line() -> None:
    entries = read(b'{"a":1}')
    entries.append(Entry({"b": 2}))
    out = io.BytesIO()
    write_entries(entries, out)
    assert out.getvalue() == b'{"a":1}\n{"b":2}\n'


def test_a_replaced_entry_is_reencoded_compactly() -> None:
    entry = read(b'{"a":1, "b":2}\n')[0]
    changed = entry.replace({**entry.obj, "b": 3})
    assert changed.changed and not entry.changed
    assert changed.encode() == b'{"a":1,"b":3}'
