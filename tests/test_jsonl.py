"""The line reader and writer: exact bytes in, exact bytes out, precise errors."""

from __future__ import annotations

import io

import orjson
import pytest
from ctxpipe.core.errors import InputError
from ctxpipe.core.jsonl import LEFT_OUT, SKIM_FROM, Entry, ReadStats, iter_entries, iter_entries_reversed, write_entries


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


# --- a count's skim: base64 data left out of a long line -------------------------------------------

IMAGE_DATA = "iVBORw0KGgo" + "A" * (SKIM_FROM + 1000)


def image_block(data: str = IMAGE_DATA) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def image_line(*blocks: dict, **fields: object) -> bytes:
    return orjson.dumps({"type": "user", "message": {"role": "user", "content": list(blocks or [image_block()])}, **fields})


def skimmed(line: bytes, found: int | None = None, keep_raw: bool = False) -> dict:
    """The line read back with a skim that finds `found` sources (None: as many as it was given)."""
    seen: list[int] = []

    def count(obj: dict) -> int:
        sources = [b["source"] for b in obj["message"]["content"] if isinstance(b, dict) and isinstance(b.get("source"), dict)]
        seen.append(sum(source["data"] == LEFT_OUT for source in sources))
        return seen[-1] if found is None else found

    [(_, entry)] = list(iter_entries_reversed(line + b"\n", "t.jsonl", keep_raw=keep_raw, skim=count))
    return entry.obj


def without_data(obj: dict) -> dict:
    copy = orjson.loads(orjson.dumps(obj))
    for block in copy["message"]["content"]:
        if isinstance(block, dict) and isinstance(block.get("source"), dict):
            block["source"]["data"] = LEFT_OUT
    return copy


def test_a_skim_leaves_out_the_data_of_every_base64_source_and_nothing_else() -> None:
    line = image_line({"type": "text", "text": "two screenshots"}, image_block(), image_block("R0lGOD" + "b" * 5000))
    obj = skimmed(line)
    assert obj == without_data(orjson.loads(line))
    assert [b.get("source", {}).get("data") for b in obj["message"]["content"]] == [None, LEFT_OUT, LEFT_OUT]


@pytest.mark.parametrize(
    "line",
    [
        image_line(image_block("A" * 1000)),  # a short line: parsed
        image_line(image_block(), {"type": "text", "text": "a \u0000 in the text"}),  # LEFT_OUT's own text after the data
        image_line({"type": "text", "text": "a \u0000 in the text"}, image_block()),  # and before it
        image_line(image_block(IMAGE_DATA + "/\\/")).replace(b"/\\\\/", b"\\/"),  # data with an escape in it
        image_line(image_block()).replace(b'"data":"', b'"data": "'),  # written with spaces
        image_line(image_block()).replace(b'"}}', b'","url":"x"}}', 1),  # a source with more after its data
        # A transcript quoted in a text: its source is inside a string, its quotes escaped.
        image_line({"type": "text", "text": image_line().decode()}),
    ],
    ids=["short", "holds-left-out-after", "holds-left-out-before", "escaped-data", "spaces", "more-keys", "quoted"],
)
def test_a_skim_parses_whole_what_it_cannot_prove_it_may_leave_out(line: bytes) -> None:
    assert skimmed(line) == orjson.loads(line)


def test_a_skim_parses_whole_a_line_whose_sources_are_not_all_where_the_reader_says() -> None:
    line = image_line(image_block(), image_block())
    assert skimmed(line, found=1) == orjson.loads(line)  # one of the two is somewhere the reader needs it
    assert skimmed(line, found=2) == without_data(orjson.loads(line))


def test_a_skim_never_applies_where_the_raw_bytes_are_kept() -> None:
    line = image_line()
    assert skimmed(line, keep_raw=True) == orjson.loads(line)
