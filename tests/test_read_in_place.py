"""Reading in place what used to be copied: the output counted as head + new lines (files.inputs.Spliced),
the history restore reads parsed line by line when asked for (core.jsonl.LineIndex, Joined). Each
must read exactly what the copy it replaces would have held."""

from __future__ import annotations

import io
import mmap
from datetime import datetime, timezone
from pathlib import Path

import pytest
from ctxpipe.core.jsonl import Entry, Joined, LineIndex, ReadStats, iter_entries
from ctxpipe.core.restore import RestoreSettings, restore
from ctxpipe.core.summarize import SummarizeSettings
from ctxpipe.files.inputs import Spliced
from ctxpipe.formats.claude_code import FORMAT, context_positions
from helpers import FIXTURES, corpus_files, needs_corpus
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import claude_sessions, stage_sessions

FIXTURE_FILES = sorted(FIXTURES.rglob("*.jsonl"))
NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)

some_bytes = st.binary(max_size=40).map(lambda data: data.replace(b"c", b"\n"))
patterns = st.sampled_from([b"\n", b"\x00", b"ab", b"a\nb", b'"agentId"', b"\r\n", b"aaa"])


@given(some_bytes, st.data())
def test_spliced_reads_as_the_joined_bytes(data: bytes, draw: st.DataObject) -> None:
    head = draw.draw(st.integers(0, len(data)))
    # The base holds more than the head: nothing past it may be read.
    spliced = Spliced(data[:head] + b"ab\n\x00", head, data[head:])
    assert len(spliced) == len(data)
    sub = draw.draw(patterns)
    bounds = draw.draw(st.lists(st.integers(-3, len(data) + 3), max_size=2))
    assert spliced.find(sub, *bounds) == data.find(sub, *bounds)
    assert spliced.rfind(sub, *bounds) == data.rfind(sub, *bounds)
    start, stop = draw.draw(st.tuples(st.integers(-3, len(data) + 3), st.integers(-3, len(data) + 3)))
    assert spliced[start:stop] == data[start:stop]
    if data:
        index = draw.draw(st.integers(-len(data), len(data) - 1))
        assert spliced[index] == data[index]


def _same(left: Entry, right: Entry) -> bool:
    # The bytes, not the objects parsed from them the same way (a line nested 1,000 deep compares past the recursion limit).
    return (left.raw, left.line, left.eol, left.obj.keys()) == (right.raw, right.line, right.eol, right.obj.keys())


@pytest.mark.parametrize("path", FIXTURE_FILES + corpus_files() + corpus_files("codex"), ids=lambda path: path.name)
def test_buffer_entries_are_the_entries_iter_entries_reads(path: Path) -> None:
    data = path.read_bytes()
    expected_stats, stats = ReadStats(), ReadStats()
    expected = list(iter_entries(io.BytesIO(data), path.name, "skip", expected_stats))
    with path.open("rb") as handle:
        buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if data else data
        read = LineIndex(buffer, path.name, "skip", stats, stop=len(data), raw=True, cached=LineIndex.CACHED)
        assert len(read) == len(expected)
        assert all(_same(left, right) for left, right in zip(read, expected))  # streamed
        assert all(_same(read[position], expected[position]) for position in reversed(range(len(read))))  # by position
        assert (stats.skipped, stats.problems) == (expected_stats.skipped, expected_stats.problems)
        assert [entry.line for entry in read[1:-1]] == [entry.line for entry in expected[1:-1]]
        del read
        if isinstance(buffer, mmap.mmap):
            buffer.close()


def _split(data: bytes, at: int) -> tuple[LineIndex, list[Entry]]:
    """The lines before line `at` read in place, and the rest as a list (compact's head and region)."""
    cut = sum(len(line) for line in data.splitlines(keepends=True)[:at])
    below = list(iter_entries(io.BytesIO(data[cut:]), "t"))
    return LineIndex(data, "t", stop=cut, raw=True, cached=LineIndex.CACHED), below


@settings(max_examples=60, deadline=None)
@given(claude_sessions(), st.integers(1, 3), st.data())
def test_the_chain_through_lines_read_in_place_is_the_chain_of_the_list(session: bytes, copies: int, draw: st.DataObject) -> None:
    # Byte copies of a session one after another, as bench's big.jsonl is: every uuid repeats, and
    # the latest line of a uuid is what the walk must find.
    data = session * copies
    everything = list(iter_entries(io.BytesIO(data), "t"))
    at = draw.draw(st.integers(0, len(everything)))
    above, below = _split(data, at)
    joined = Joined(above, below)
    for history in (False, True):
        assert context_positions(joined, history) == context_positions(everything, history)
        assert [(m.entries, m.usage_stale) for m in FORMAT.messages(joined, history)] == [
            (m.entries, m.usage_stale) for m in FORMAT.messages(everything, history)
        ]


def _summarized(session: bytes) -> bytes:
    """The session after the summarize stage (offline): a history above a boundary, for restore."""
    from ctxpipe.api import run_stage

    output, _ = run_stage("summarize", session, SummarizeSettings(engine="offline", keep_last=2), now=NOW)
    return output


def _restores_alike(session: bytes, at: int, when: str) -> str:
    """restore given the lines before line `at` read in place does what it does given them parsed."""
    everything = list(iter_entries(io.BytesIO(session), "t"))
    above, below = _split(session, at)
    whole, _ = restore(everything, FORMAT, RestoreSettings(source="transcript"), when)
    split, _ = restore(below, FORMAT, RestoreSettings(source="transcript"), when, above=above)
    assert (split.changed, split.note, split.report) == (whole.changed, whole.note, whole.report)
    if whole.changed:
        assert [entry.encode() for entry in split.entries] == [entry.encode() for entry in whole.entries[at:]]
    return whole.note


@settings(max_examples=30, deadline=None)
@given(st.one_of(claude_sessions(), stage_sessions()), st.data())
def test_restore_reading_the_history_in_place_adds_what_it_adds_reading_it_parsed(session: bytes, draw: st.DataObject) -> None:
    summarized = _summarized(session)
    at = draw.draw(st.integers(0, len(summarized.splitlines())))
    _restores_alike(summarized, at, draw.draw(st.sampled_from(["2020-01-01T00:00:00.000Z", "2030-01-01T00:00:00.000Z"])))


@needs_corpus
def test_restore_of_real_sessions_reads_their_history_in_place_alike() -> None:
    notes = []
    for path in corpus_files():
        summarized = _summarized(path.read_bytes())
        region = FORMAT.read_region(summarized, path.name, "fail", ReadStats())[1]
        lines = len(list(iter_entries(io.BytesIO(summarized), "t")))
        notes.append(_restores_alike(summarized, lines - len(region), "2020-01-01T00:00:00.000Z"))
    assert sum(note.startswith("restored") for note in notes) >= len(notes) // 2, notes


@given(claude_sessions(), st.lists(st.integers(0, 10_000), max_size=60))
def test_lines_parsed_again_once_out_of_the_cache_are_the_same_lines(session: bytes, order: list[int]) -> None:
    """A cache of a few lines (4 KiB): most are parsed again when asked for, and are the same lines."""
    expected = list(iter_entries(io.BytesIO(session), "t"))
    read = LineIndex(session, "t", stop=len(session), raw=True, cached=4 << 10)
    for index in order:
        position = index % len(expected)
        assert _same(read[position], expected[position])
    assert read._cached_bytes <= 4 << 10 or len(read._cache) == 1
