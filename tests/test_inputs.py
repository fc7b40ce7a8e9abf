"""files/inputs.py, the one way in: the same bytes and the same bad-input messages whether an input is a
regular file (mapped), a FIFO or stdin (read whole), for the commands and the library alike; and
detect_format, the one place that tells a buffer's format from its first lines."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import ctxpipe
import pytest
from ctxpipe.core.errors import InputError
from ctxpipe.files.inputs import READ_NOT_MAPPED, detect_format, mapped, opened, source_name

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUDE = FIXTURES / "claude-code" / "basic.jsonl"
CODEX = next((FIXTURES / "codex").glob("*.jsonl"))
ANTHROPIC = next((FIXTURES / "anthropic").glob("*.jsonl"))


def _feed_fifo(path: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with open(path, "wb") as fifo:
            fifo.write(data)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_a_regular_file_is_mapped_and_a_fifo_read_whole_to_the_same_bytes(tmp_path: Path) -> None:
    data = CLAUDE.read_bytes()
    with mapped(CLAUDE) as buffer:  # small: read, not mapped (no guard against truncation to arm)
        assert isinstance(buffer, bytes) and len(data) <= READ_NOT_MAPPED
        assert buffer == data
    large = tmp_path / "large.jsonl"
    large.write_bytes(data * (READ_NOT_MAPPED // len(data) + 1))
    with mapped(large) as buffer:
        assert isinstance(buffer, mmap.mmap)
        assert bytes(buffer) == large.read_bytes()
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    writer = _feed_fifo(fifo, data)
    with mapped(fifo) as buffer:
        assert isinstance(buffer, bytes) and buffer == data
    writer.join()


MAPS_ONCE_ARMED = """
import mmap, sys
from ctxpipe import api
from ctxpipe.files.inputs import arm_truncation_guard, guard_truncation, mapped

middle, folder = sys.argv[1], sys.argv[2]

def kinds():
    with mapped(middle, ranged=True) as ends, mapped(middle) as whole:
        return [type(ends).__name__ == "MappedFile", type(whole).__name__ == "MappedFile"]

shown = kinds()  # a library that asks for no guard: copied (a map cut short would end it with SIGBUS)
if sys.argv[3] == "count":
    api.count_many([folder], jobs=1)  # no guard asked for: none armed
else:
    arm_truncation_guard()
shown += kinds()
guard_truncation(lambda name: name, 1)
shown += kinds()  # a guard asked for, not armed: copied, as a small command's one file is
if sys.argv[3] == "count":
    api.count_many([folder], jobs=1)  # the ends of several mid-sized files: armed first
else:
    arm_truncation_guard()
shown += kinds()
print(shown)
"""


@pytest.mark.parametrize("armed_by", ["count", "call"])
def test_a_mid_sized_file_is_mapped_for_a_reader_of_its_ends_once_the_guard_is_armed(tmp_path: Path, armed_by: str) -> None:
    """A reader of a file's ends (count) maps a file above ENDS_READ_NOT_MAPPED instead of copying it
    whole once the guard against a file cut short under its map is armed: not for one small command
    (arming it costs ctypes), nor where none was asked for (a library's process); a batch of counts arms
    it first. A reader of the whole file reads it, up to READ_NOT_MAPPED, as before."""
    from ctxpipe.files.inputs import ENDS_READ_NOT_MAPPED

    data = CLAUDE.read_bytes()
    folder = tmp_path / "project"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.jsonl").write_bytes(data * (ENDS_READ_NOT_MAPPED // len(data) + 1))
    middle = folder / "a.jsonl"
    assert ENDS_READ_NOT_MAPPED < middle.stat().st_size <= READ_NOT_MAPPED
    run = subprocess.run([sys.executable, "-c", MAPS_ONCE_ARMED, middle, folder, armed_by], capture_output=True, text=True, check=True)
    assert run.stdout.split("\n")[0] == "[False, False, False, False, False, False, True, False]", run.stderr


def test_the_stream_and_the_buffer_are_the_same_input() -> None:
    with opened(str(CLAUDE)) as stream:
        streamed = stream.read()
    with mapped(str(CLAUDE)) as buffer:
        assert streamed == bytes(buffer)


@pytest.mark.parametrize("reader", [mapped, opened])
def test_bad_paths_are_bad_input_with_one_message(tmp_path: Path, reader: Callable[[Path], AbstractContextManager[object]]) -> None:
    missing, folder = tmp_path / "missing.jsonl", tmp_path
    with pytest.raises(InputError, match="no such file"), reader(missing):
        pass
    with pytest.raises(InputError, match="is a directory"), reader(folder):
        pass


def test_the_library_says_what_the_commands_say(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(InputError) as raised:
        ctxpipe.read_transcript(missing)
    cli = subprocess.run([sys.executable, "-m", "ctxpipe", "validate", str(missing)], capture_output=True, env={**os.environ, "NO_COLOR": "1"})
    assert cli.returncode == 1
    assert str(raised.value) in cli.stderr.decode()


def test_the_library_reads_stdin_for_a_dash() -> None:
    code = "import ctxpipe; t = ctxpipe.read_transcript('-'); print(t.source, t.format, len(t.entries))"
    result = subprocess.run([sys.executable, "-c", code], input=CLAUDE.read_bytes(), capture_output=True, check=True)
    expected = ctxpipe.read_transcript(CLAUDE)
    assert result.stdout.decode().split() == ["-", expected.format, str(len(expected.entries))]


def test_source_name() -> None:
    assert [source_name(None), source_name("-"), source_name(Path("a.jsonl"))] == ["-", "-", "a.jsonl"]


@pytest.mark.parametrize("path", [CLAUDE, CODEX, ANTHROPIC], ids=lambda p: p.parent.name)
def test_detect_format_agrees_with_the_whole_file_detection(path: Path) -> None:
    whole = ctxpipe.read_transcript(path)
    with mapped(path) as buffer:
        assert detect_format(buffer, str(path)).name == whole.format


def test_detect_format_reads_only_the_head() -> None:
    # A first line that gives the format away decides, whatever follows (not even JSON).
    head = CLAUDE.read_bytes().split(b"\n", 1)[0] + b"\n"
    assert detect_format(head + b"not json at all\n" * 10, "x").name == "claude-code"


def test_a_named_format_wins_over_the_lines() -> None:
    with mapped(CLAUDE) as buffer:
        assert detect_format(buffer, "x", "anthropic").name == "anthropic"


def test_a_head_no_format_claims_is_bad_input_naming_the_file() -> None:
    with pytest.raises(InputError, match="cannot tell the transcript format") as raised:
        detect_format(b'{"what": 1}\n{"what": 2}\n', "odd.jsonl")
    assert "odd.jsonl" in str(raised.value)
