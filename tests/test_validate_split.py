"""`validate` of one large local file shares the schema check with a forked process
(jobs.validate.SchemaSplit, jobs.batch.beside): the report is the one a single process makes, byte
for byte, wherever the split falls (on a line that cannot be read, a blank line, a line a byte order
mark starts, a CRLF line), and the other process's failure costs time, never a finding."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest
from ctxpipe.api import validate_one
from ctxpipe.formats import get
from ctxpipe.jobs import batch
from ctxpipe.jobs import validate as validate_job
from ctxpipe.jobs.validate import SchemaSplit, joined_problems, lines_before, schema_problems_from, schema_split
from helpers import FIXTURES, run_cli

BOM = b"\xef\xbb\xbf"


def lines_of_a_session() -> list[bytes]:
    """A real session's lines, every third one breaking the schema (a number where a string goes),
    with the lines a split may fall on: unreadable, blank, a BOM in front, CRLF."""
    base = (FIXTURES / "claude-code" / "repeats.jsonl").read_bytes().splitlines()
    out: list[bytes] = []
    for turn in range(12):
        for number, line in enumerate(base):
            obj = orjson.loads(line)
            if number % 3 == 1:
                obj["timestamp"] = 1000 + number
            out.append(orjson.dumps(obj))
        failing = orjson.dumps({**orjson.loads(base[1]), "timestamp": 7})
        out += [b"{not json", b"", BOM + failing, failing + b"\r", b"   "][turn % 5 : turn % 5 + 1]
    return out


def report(path: Path, cores: int, errors: str = "fail") -> bytes:
    validated = validate_one((str(path), path.name), None, errors, cores=cores)  # type: ignore[arg-type]
    return orjson.dumps(validated.report.to_wire())


@pytest.mark.parametrize("errors", ["fail", "skip"])
def test_the_report_is_a_single_processs_wherever_the_split_falls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errors: str) -> None:
    path = tmp_path / "session.jsonl"
    lines = lines_of_a_session()
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(data)
    alone = report(path, 1, errors)
    assert orjson.loads(alone)["errors"] > 50, "the file breaks the schema on many lines"
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    # The other process starting on each line that is not a plain one, the line before it and after it, and every tenth line.
    odd = {n for n, line in enumerate(lines) if not line.strip() or line.startswith((b"{not", BOM)) or line.endswith(b"\r")}
    chosen = sorted({n + d for n in odd for d in (-1, 0, 1)} | set(range(1, len(lines), 10)))
    monkeypatch.setattr(validate_job, "SPLIT_MIN_BYTES", 0)
    for n in chosen:
        if not 0 < n < len(lines):
            continue
        monkeypatch.setattr(validate_job, "OTHER_SHARE", 1 - (starts[n] + 0.5) / len(data))  # a point inside line n's first byte
        with schema_split(str(path)) as split:
            assert split is not None and (split.offset, lines_before(split)) == (starts[n], n), (n, split)
        assert report(path, 2, errors) == alone, (n, lines[n][:40])
    assert len(odd) >= 10


def test_a_split_is_only_for_a_large_regular_file_of_lines(tmp_path: Path) -> None:
    small = tmp_path / "small.jsonl"
    small.write_bytes((FIXTURES / "claude-code" / "repeats.jsonl").read_bytes())
    assert small.stat().st_size < validate_job.SPLIT_MIN_BYTES
    for path in (small, tmp_path / "missing.jsonl", tmp_path):
        with schema_split(str(path)) as split:
            assert split is None


def test_the_others_problems_are_kept_for_the_lines_this_process_read_only() -> None:
    mine = [(3, "a"), (10, "b")]
    theirs = [(1, "c"), (2, "d"), (4, "e"), (9, "f")]
    # Line 12 could not be read here (a BOM in front of it is dropped there); line 19 was added after this process ended.
    assert joined_problems(mine, theirs, 10, {12}, 14) == [(3, "a"), (10, "b"), (11, "c"), (14, "e")]


def test_the_other_process_reads_lines_as_validate_does(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    lines = lines_of_a_session()
    path.write_bytes(b"\n".join(lines) + b"\n")
    offset = len(b"\n".join(lines[:30])) + 1
    with path.open("rb") as file:
        problems, last = schema_problems_from(SchemaSplit(file, offset), get("claude-code").schema)
    alone = orjson.loads(report(path, 1))
    expected = [(f["line"] - 30, f["message"]) for f in alone["findings"] if f["code"] == "schema" and f["line"] > 30]
    assert problems == expected and last == len(lines) - 30 - (lines[-1].strip() == b"")


def test_beside_gives_the_answer_or_none_and_stops_a_process_left_behind(tmp_path: Path) -> None:
    with batch.beside(lambda: {"answer": [1, 2, 3]}) as answer:
        assert answer() == {"answer": [1, 2, 3]}

    def fails() -> None:
        raise ValueError("a bug")

    with batch.beside(fails) as answer:
        assert answer() is None
    with batch.beside(lambda: os._exit(3)) as answer:
        assert answer() is None
    marker = tmp_path / "finished"

    def slow() -> None:
        time.sleep(1.0)
        marker.write_text("finished")

    with pytest.raises(KeyboardInterrupt), batch.beside(slow):
        raise KeyboardInterrupt  # Ctrl-C in this process's own share: the other one is stopped
    time.sleep(1.5)
    assert not marker.exists()


def test_validate_of_a_large_file_is_the_same_on_one_process_and_on_two(tmp_path: Path) -> None:
    """The command, on a file over SPLIT_MIN_BYTES (as it runs: no threshold changed)."""
    lines = lines_of_a_session()
    block = b"\n".join(lines) + b"\n"
    path = tmp_path / "large.jsonl"
    path.write_bytes(block * (validate_job.SPLIT_MIN_BYTES // len(block) + 1))
    with schema_split(str(path)) as split:
        assert split is not None
    shared = run_cli("validate", "--json", path)
    alone = run_cli("validate", "--json", "--jobs", "1", path)
    assert shared.returncode == alone.returncode == 1 and shared.stderr == alone.stderr
    assert shared.stdout == alone.stdout and orjson.loads(shared.stdout)["errors"] > 10_000
