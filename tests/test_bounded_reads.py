"""Nothing is read without a bound (issue 22, case 5).

A stream has no size: `count /dev/zero` or `head -c 3G /dev/zero | validate` used to read until
memory ran out. Every stream goes through core.jsonl.bounded_lines: a line holding NUL bytes is
refused at its first megabyte, a line past MAX_LINE_BYTES is refused, and --on-error=skip drops
such a line without holding it. A stream read whole (count, the stages on stdin) beyond 64 MiB goes
to a temporary file, not memory. A small file an option names (--prices, --session-memory) is read
to at most 16 MiB; a ledger or a --from transcript is read like any transcript.

Memory is checked by running the child under an address-space limit well below what reading the
stream whole would take: an unbounded read dies with MemoryError (an internal error), a bounded
one gives the one-line refusal.
"""

from __future__ import annotations

import io
import os
import pickle
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from builders import Session, usage
from ctxpipe.core.jsonl import BINARY, MAX_LINE_BYTES, TOO_LONG, ReadStats, bounded_lines, iter_entries
from helpers import ROOT, child_env, error_line, ok, run_cli

FIXTURE = ROOT / "fixtures" / "claude-code" / "basic.jsonl"
ZERO = Path("/dev/zero")
pytestmark = pytest.mark.skipif(not ZERO.exists(), reason="needs /dev/zero")

# Enough for the interpreter and its libraries, far less than the 3 GiB an unbounded read would hold.
ADDRESS_SPACE = 1536 << 20


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_limited(*args: str | os.PathLike[str], stdin: int | None = None) -> subprocess.CompletedProcess[bytes]:
    """`python -m ctxpipe ARGS` under the address-space limit, stdin from a descriptor (e.g. /dev/zero)."""
    return subprocess.run(
        [sys.executable, "-m", "ctxpipe", *map(str, args)],
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        env=child_env(),
        timeout=120,
        preexec_fn=_limited,
    )


# --- the reader -------------------------------------------------------------------------------------


def test_bounded_lines_gives_the_lines_iteration_gives() -> None:
    data = FIXTURE.read_bytes() + b"\r\n\n" + b'{"type":"user"}'  # CRLF, blank and unterminated lines
    assert list(bounded_lines(io.BytesIO(data))) == list(io.BytesIO(data))


def test_a_long_line_is_read_whole_below_the_bound() -> None:
    line = orjson.dumps({"type": "user", "text": "a" * (5 << 20)}) + b"\n"
    assert list(bounded_lines(io.BytesIO(line + line))) == [line, line]


def test_a_binary_line_is_refused_at_its_first_piece_and_skipped_without_being_held() -> None:
    class Endless(io.RawIOBase):
        """/dev/zero in miniature, counting what was read: NULs for 64 MiB, then one good line."""

        def __init__(self) -> None:
            self.read_bytes = 0

        def readable(self) -> bool:
            return True

        def readinto(self, target: memoryview) -> int:  # type: ignore[override]
            if self.read_bytes >= 64 << 20:
                tail = b'\n{"type":"user","message":{"role":"user","content":"hi"}}\n'
                if self.read_bytes >= (64 << 20) + len(tail):
                    return 0
                target[: len(tail)] = tail
                self.read_bytes += len(tail)
                return len(tail)
            size = min(len(target), (64 << 20) - self.read_bytes)
            target[:size] = bytes(size)
            self.read_bytes += size
            return size

    raw = Endless()
    with pytest.raises(Exception, match="binary data") as refused:
        next(iter_entries(io.BufferedReader(raw), "z"))
    assert raw.read_bytes < 4 << 20, "refused at the first megabyte, not read on"
    assert "z:1:" in str(refused.value)
    stats = ReadStats()
    entries = list(iter_entries(io.BufferedReader(Endless()), "z", "skip", stats))
    assert [entry.obj["type"] for entry in entries] == ["user"] and entries[0].line == 2
    assert stats.skipped == 1 and stats.problems == [(1, BINARY)]


def test_the_bound_is_the_one_every_reader_applies() -> None:
    assert MAX_LINE_BYTES == 256 << 20 and "256 MiB" in TOO_LONG


# --- every command, on devices and endless streams ---------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["count", ZERO],
        ["count", "--full", ZERO],
        ["warn", ZERO],
        ["validate", ZERO],
        ["convert", "--to", "anthropic", ZERO],
        ["microcompact", "--force", ZERO],
        ["report", "--json", ZERO],
        ["restore", "--from", ZERO, FIXTURE],
        ["expand", "--ledger", ZERO, FIXTURE],
    ],
    ids=lambda args: " ".join(map(str, args)),
)
def test_dev_zero_is_refused_in_one_line_within_the_memory_limit(args: list[str]) -> None:
    result = run_limited(*args)
    line = error_line(result, "/dev/zero:1:")
    assert "binary data" in line or "not yet ended" in line, line
    assert "internal error" not in line


@pytest.mark.parametrize("command", [["count"], ["validate"], ["microcompact", "--force"], ["collapse"], ["compact", "--force"], ["statusline"]])
def test_an_endless_binary_stdin_is_refused_within_the_memory_limit(command: list[str]) -> None:
    with ZERO.open("rb") as zeros:
        result = run_limited(*command, stdin=zeros.fileno())
    if command == ["statusline"]:  # it promises Claude Code a line and exit 0, whatever it is given
        assert result.returncode == 0 and result.stdout.strip() and b"Traceback" not in result.stderr
        return
    line = error_line(result, "-:1:")
    assert "binary data" in line or "not yet ended" in line, line


def test_a_line_past_the_bound_is_refused_even_without_nul_bytes(tmp_path: Path) -> None:
    # Written through a pipe, so nothing maps it: the stream reader must stop at the bound.
    with subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", "count"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), preexec_fn=_limited
    ) as child:
        assert child.stdin is not None
        piece = b'{"type":"user","text":"' + b"a" * (8 << 20)
        try:
            for _ in range((MAX_LINE_BYTES >> 23) + 4):
                child.stdin.write(piece)
        except BrokenPipeError:  # refused before all was written: what a bound does
            pass
        with_stdin_closed = child.communicate(timeout=120)
    result = subprocess.CompletedProcess(child.args, child.returncode, *with_stdin_closed)
    error_line(result, "-:1:", "longer than 256 MiB")


def test_skip_drops_a_binary_run_inside_a_stream_and_counts_the_rest(tmp_path: Path) -> None:
    damaged = FIXTURE.read_bytes().replace(b"\n", b"\n" + bytes(5 << 20) + b"\n", 1)
    plain = ok(run_cli("count", "--on-error", "skip", FIXTURE))
    streamed = ok(run_cli("count", "--on-error", "skip", "-", stdin=damaged))
    assert orjson.loads(streamed.stdout)["tokens"] == orjson.loads(plain.stdout)["tokens"]
    assert orjson.loads(streamed.stdout)["skipped_lines"] == 1
    refused = run_cli("count", "-", stdin=damaged)
    error_line(refused, "-:2:", "binary data")


def test_a_stream_longer_than_memory_holds_is_spooled_and_counts_as_the_file(tmp_path: Path) -> None:
    built = Session()
    built.user("Start.")
    for number in range(40):
        built.text("x" * (2 << 20) + str(number), usage(10_000 + number))  # 80 MiB in all: past the 64 MiB held in memory
    path = tmp_path / "long.jsonl"
    path.write_bytes(built.to_bytes())
    with path.open("rb") as handle:
        streamed = run_limited("count", stdin=handle.fileno())
    from_file = run_limited("count", path)
    assert orjson.loads(ok(streamed).stdout)["tokens"] == orjson.loads(ok(from_file).stdout)["tokens"]
    with path.open("rb") as handle:
        passed = subprocess.run(
            [sys.executable, "-m", "ctxpipe", "collapse"], stdin=handle, capture_output=True, env=child_env(), timeout=120, preexec_fn=_limited
        )
    assert ok(passed).stdout == path.read_bytes()


# --- small files an option names ---------------------------------------------------------------


def test_a_price_table_on_a_device_is_refused_at_its_bound() -> None:
    error_line(run_limited("count", "--cost", "--prices", ZERO, FIXTURE), "/dev/zero", "larger than 16 MiB", "price table")


def test_session_memory_notes_on_a_device_are_refused_at_their_bound(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    shutil.copy(FIXTURE, transcript)
    result = run_limited("summarize", "--engine", "session-memory", "--session-memory", ZERO, "--keep-last", "2", transcript)
    error_line(result, "/dev/zero", "larger than 16 MiB", "notes file")


# --- the status line's worst files (issue 22, case 6) --------------------------------------------


# Runs ctxpipe as `python -m ctxpipe` does and records its own peak resident memory as it exits:
# VmHWM, the high-water mark of this process's memory (getrusage's ru_maxrss would also count the
# memory of the test process it was forked from: Linux keeps that figure across exec).
MEASURED = """
import atexit, re, runpy, sys
where = sys.argv.pop(1)
def peak():
    status = open("/proc/self/status").read()
    open(where, "w").write(re.search(r"VmHWM:\\s*(\\d+) kB", status).group(1))
atexit.register(peak)
sys.argv[0] = "ctxpipe"
runpy.run_module("ctxpipe", run_name="__main__", alter_sys=True)
"""


def peak_rss_of(tmp_path: Path, *args: str | os.PathLike[str], stdin: bytes = b"") -> tuple[subprocess.CompletedProcess[bytes], int]:
    """The run and its peak resident memory in bytes."""
    where = tmp_path / "peak-rss"
    result = subprocess.run([sys.executable, "-c", MEASURED, str(where), *map(str, args)], input=stdin, capture_output=True, env=child_env(), timeout=120)
    return result, int(where.read_text()) * 1024


def with_status(path: Path) -> bytes:
    return orjson.dumps({"transcript_path": str(path), "model": {"id": "claude-sonnet-4-5"}})


HAS_PROC_STATUS = Path("/proc/self/status").exists()


@pytest.mark.skipif(not HAS_PROC_STATUS, reason="reads a run's peak memory from /proc/self/status (Linux)")
def test_a_zero_filled_tail_is_skipped_without_reading_it(tmp_path: Path) -> None:
    from ctxpipe.files.inputs import trailing_hole

    path = tmp_path / "crashed.jsonl"
    shutil.copy(FIXTURE, path)
    with path.open("ab") as handle:
        handle.truncate(path.stat().st_size + (1 << 30))  # a gigabyte the crash never wrote: a hole
    descriptor = os.open(path, os.O_RDONLY)
    try:
        if trailing_hole(descriptor, path.stat().st_size) == path.stat().st_size:
            pytest.skip("this file system does not report holes (SEEK_DATA), so the zeros would be read")
    finally:
        os.close(descriptor)
    plain = orjson.loads(ok(run_cli("count", FIXTURE)).stdout)
    counted, peak = peak_rss_of(tmp_path, "count", "--on-error", "skip", path)
    assert orjson.loads(ok(counted).stdout)["tokens"] == plain["tokens"]
    assert b"skipped 1 bad line" in counted.stderr
    assert peak < 200 << 20, f"{peak >> 20} MiB: the zeros were read (a gigabyte of them)"
    refused = run_cli("count", path)
    error_line(refused, "binary data")
    line, peak = peak_rss_of(tmp_path, "statusline", stdin=with_status(path))
    assert line.returncode == 0 and f"{plain['tokens'] / 1000:.1f}K".encode() in line.stdout, line.stdout
    assert peak < 200 << 20, f"{peak >> 20} MiB"


@pytest.mark.skipif(not HAS_PROC_STATUS, reason="reads a run's peak memory from /proc/self/status (Linux)")
def test_a_long_run_of_progress_lines_costs_a_count_no_memory(tmp_path: Path) -> None:
    """300,000 `progress` lines (a long Bash, a busy hook) before the last response: off the chain, as
    most are in real files, they are read past, not kept."""
    lines = FIXTURE.read_bytes().splitlines()
    objects = [orjson.loads(line) for line in lines]
    last = max(i for i, obj in enumerate(objects) if obj.get("type") == "assistant")
    progress = [
        orjson.dumps(
            {
                "type": "progress",
                "uuid": f"p{n}",
                "parentUuid": next(obj["uuid"] for obj in objects if "uuid" in obj),
                "data": {"type": "bash_progress", "output": "x" * 400},
            }
        )
        for n in range(300_000)
    ]
    path = tmp_path / "busy.jsonl"
    path.write_bytes(b"\n".join(lines[:last] + progress + lines[last:]) + b"\n")
    size = path.stat().st_size
    plain = orjson.loads(ok(run_cli("count", FIXTURE)).stdout)
    counted, peak = peak_rss_of(tmp_path, "count", path)
    assert orjson.loads(ok(counted).stdout)["tokens"] == plain["tokens"]
    # The map of the file may be resident; the 300,000 parsed lines (about 3x its size) may not.
    assert peak < size + (100 << 20), f"{peak >> 20} MiB for a {size >> 20} MiB file"
    line, peak = peak_rss_of(tmp_path, "statusline", stdin=with_status(path))
    assert line.returncode == 0 and f"{plain['tokens'] / 1000:.1f}K".encode() in line.stdout
    assert peak < size + (100 << 20), f"{peak >> 20} MiB for a {size >> 20} MiB file"


def busy_and_small(tmp_path: Path) -> tuple[Path, Path]:
    """A session with 150,000 progress lines (400 bytes of output each, about 70 MB) before its last
    response, and the same session without them."""
    lines = FIXTURE.read_bytes().splitlines()
    objects = [orjson.loads(line) for line in lines]
    last = max(i for i, obj in enumerate(objects) if obj.get("type") == "assistant")
    root = next(obj["uuid"] for obj in objects if "uuid" in obj)
    progress = [orjson.dumps({"type": "progress", "uuid": f"p{n}", "parentUuid": root, "data": {"output": "x" * 400}}) for n in range(150_000)]
    path = tmp_path / "busy.jsonl"
    path.write_bytes(b"\n".join(lines[:last] + progress + lines[last:]) + b"\n")
    small = tmp_path / "small.jsonl"
    small.write_bytes(b"\n".join(lines) + b"\n")
    return path, small


@pytest.mark.skipif(not HAS_PROC_STATUS, reason="reads a run's peak memory from /proc/self/status (Linux)")
def test_a_full_count_holds_no_parsed_line_it_is_not_reading(tmp_path: Path) -> None:
    """`count --full` (and the views over every line) read a LineIndex: the 150,000 progress lines are
    parsed as they are read, then dropped, so the peak stays the file's map plus a bound. (Held, the
    parsed lines take several times the file's 70 MB, far over the bound's 170.)"""
    path, small = busy_and_small(tmp_path)
    size = path.stat().st_size
    args = ("count", "--json", "--full", "--by", "tool", "--top", "5", "--timeline", "--cost")
    expected = orjson.loads(ok(run_cli(*args, small)).stdout)
    counted, peak = peak_rss_of(tmp_path, *args, path)
    found = orjson.loads(ok(counted).stdout)
    for key in ("tokens", "messages", "breakdown", "timeline", "cost"):
        if key == "timeline":  # the same calls, 150,000 lines further down
            assert [point["tokens"] for point in found[key]] == [point["tokens"] for point in expected[key]]
        else:
            assert found[key] == expected[key], key
    assert peak < size + (100 << 20), f"{peak >> 20} MiB for a {size >> 20} MiB file"


@pytest.mark.skipif(not HAS_PROC_STATUS, reason="reads a run's peak memory from /proc/self/status (Linux)")
def test_a_conversion_of_a_large_file_holds_no_parsed_line_it_is_not_reading(tmp_path: Path) -> None:
    """`convert` to another format reads a large file in place (files.inputs.held_entries): the
    150,000 progress lines are parsed and dropped, the peak stays the file's map plus a bound (held
    in a list they took about 3.5 times the file), and the result is the small file's, whatever the
    target."""
    path, small = busy_and_small(tmp_path)
    size = path.stat().st_size
    for to in (["--to", "anthropic", "--history"], ["--to", "codex"]):
        expected = ok(run_cli("convert", *to, small))
        converted, peak = peak_rss_of(tmp_path, "convert", *to, path)
        assert ok(converted).stdout == expected.stdout and converted.stderr == expected.stderr, to
        assert peak < size + (100 << 20), f"{to}: {peak >> 20} MiB for a {size >> 20} MiB file"


def test_a_line_index_reads_what_the_whole_read_reads(tmp_path: Path) -> None:
    """BOM, CRLF, blank and bad lines, an unterminated last line: the same entries, numbered alike, and
    a slice is the same run of them."""
    from ctxpipe.core.jsonl import LineIndex, iter_buffer_entries

    data = b'\xef\xbb\xbf{"a": 1}\r\n\n  \n{"b": 2}\nnot json\n{"c": "\\ud83d"}\n{"d": 4}'
    stats, expected_stats = ReadStats(), ReadStats()
    index = LineIndex(data, "t.jsonl", "skip", stats)
    expected = list(iter_buffer_entries(data, "t.jsonl", "skip", expected_stats))
    assert [(e.obj, e.line, e.eol) for e in index] == [(e.obj, e.line, e.eol) for e in expected]
    assert len(index) == 4 and index[-1].obj == {"d": 4} and stats.skipped == expected_stats.skipped == 1
    assert [e.line for e in index[1:3]] == [e.line for e in expected[1:3]] == [4, 6]
    assert [e.obj for e in reversed(index)] == [e.obj for e in reversed(expected)]


def test_a_line_index_folds_the_facts_of_every_line_while_it_is_built() -> None:
    """restore reads the history above the active context once: the session's last permission mode
    and its latest time are folded over the lines the LineIndex parses to check them, not by walks
    that parse every line again. Shown by changing the bytes under the index after it was built: the
    folds keep what the lines said when they were read; a walk over its entries reads them anew.
    Folded on over lines below it (Joined), the index's own state is left as it was."""
    from ctxpipe.core.jsonl import LATEST_TIME, Entry, Joined, LineIndex, folded
    from ctxpipe.core.permission_mode import PERMISSION_MODE

    def user(n: int, mode: str, **extra: object) -> bytes:
        return orjson.dumps({"type": "user", "uuid": f"u{n}", "timestamp": f"2026-01-0{n}T00:00:00Z", "permissionMode": mode, **extra})

    enter = {"message": {"content": [{"type": "tool_use", "id": "t1", "name": "EnterPlanMode", "input": {}}]}}
    approved = {"message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}
    lines = [user(1, "default"), user(3, "acceptEdits", **enter), user(2, "acceptEdits", **approved)]
    buffer = bytearray(b"\n".join(lines) + b"\n")
    read = [Entry(orjson.loads(line)) for line in lines]
    said = (folded(read, PERMISSION_MODE), folded(read, LATEST_TIME))
    assert said[0] == ("plan", {"t1": "EnterPlanMode"}), "the approved EnterPlanMode after the last recorded mode"
    assert said[1] is not None and said[1].day == 3, "the latest time, not the last line's"
    index = LineIndex(buffer, "t.jsonl", folds=(PERMISSION_MODE, LATEST_TIME))
    assert (folded(list(index), PERMISSION_MODE), folded(list(index), LATEST_TIME)) == said, "a walk over its lines agrees"

    buffer[:] = buffer.replace(b"2026-01-03", b"2026-01-01").replace(b"EnterPlanMode", b"ExitPlanMode!")
    assert folded(list(index), LATEST_TIME).day == 2 and folded(list(index), PERMISSION_MODE)[0] == "acceptEdits", "the walk parsed the new bytes"
    built = (folded(index, PERMISSION_MODE), folded(index, LATEST_TIME))
    assert built == said, "asked first after the bytes changed, the folds still say what the lines said when the index was built"

    below = [Entry({"type": "permission-mode", "permissionMode": "bypassPermissions", "timestamp": "2026-01-09T00:00:00Z"})]
    assert folded(Joined(index, below), PERMISSION_MODE)[0] == "bypassPermissions" and folded(Joined(index, below), LATEST_TIME).day == 9
    exit_plan = [Entry({"type": "user", "message": {"content": [{"type": "tool_use", "id": "t2", "name": "ExitPlanMode"}]}})]
    assert folded(Joined(index, exit_plan), PERMISSION_MODE)[1] == {"t1": "EnterPlanMode", "t2": "ExitPlanMode"}
    assert (folded(index, PERMISSION_MODE), folded(index, LATEST_TIME)) == built and built[0][1] == {"t1": "EnterPlanMode"}, (
        "a step changes no state it is given"
    )

    unfolded = LineIndex(bytes(buffer), "t.jsonl")  # built without folds: folded once, at the first ask, then kept
    assert folded(unfolded, LATEST_TIME).day == 2 and folded(unfolded, LATEST_TIME) is folded(unfolded, LATEST_TIME)
    for fold in (PERMISSION_MODE, LATEST_TIME):  # named functions, no lambdas: a fold can be handed to a worker process
        assert folded(read, pickle.loads(pickle.dumps(fold))) == folded(read, fold)


def test_a_fold_over_prefixes_answers_for_the_first_lines_from_the_states_kept_at_each_change() -> None:
    """The mode a compaction ran in is the permission mode of the lines up to the history's last one:
    a LineIndex built with PERMISSION_MODE (a fold over prefixes) keeps the state at each change and
    answers for index[:n] without parsing a line, as a walk over the first n lines would (shown, as
    above, by changing the bytes after the build). Every n, on lines that set modes, call and answer
    the plan tools, repeat a mode and fail a call."""
    from ctxpipe.core.jsonl import Entry, LineIndex, folded
    from ctxpipe.core.permission_mode import PERMISSION_MODE

    def content(*blocks: dict[str, object]) -> dict[str, object]:
        return {"type": "user", "message": {"content": list(blocks)}}

    objs: list[dict[str, object]] = [
        {"type": "assistant", "message": {"content": "hello"}},
        {"type": "user", "permissionMode": "default"},
        {"type": "user", "permissionMode": "default"},  # the same mode again: no change kept
        content({"type": "tool_use", "id": "a", "name": "EnterPlanMode"}),
        content({"type": "tool_result", "tool_use_id": "a", "is_error": True}),  # refused: no change of mode
        content({"type": "tool_result", "tool_use_id": "a"}),
        {"type": "permission-mode", "permissionMode": "acceptEdits"},
        content({"type": "tool_use", "id": "b", "name": "ExitPlanMode"}, {"type": "tool_use", "id": "c", "name": "Bash"}),
        content({"type": "tool_result", "tool_use_id": "c"}),  # not a plan tool
        {"type": "user", "permissionMode": "plan"},
        content({"type": "tool_result", "tool_use_id": "b"}),
        {"type": "system", "permissionMode": "bypassPermissions"},  # not a line that records the mode
    ]
    lines = [orjson.dumps(obj) for obj in objs]
    buffer = bytearray(b"\n".join(lines) + b"\n")
    index = LineIndex(buffer, "t.jsonl", folds=(PERMISSION_MODE,))
    walked = [folded([Entry(orjson.loads(line)) for line in lines[:n]], PERMISSION_MODE) for n in range(len(lines) + 1)]
    assert [state[0] for state in walked] == [None, None, "default", "default", "default", "default", "plan", "acceptEdits", "acceptEdits"] + [
        "acceptEdits",
        "plan",
        "default",
        "default",
    ]
    buffer[:] = buffer.replace(b"plan", b"PLAN").replace(b"default", b"DEFAULT")  # a walk now would read other modes
    assert [folded(index[:n], PERMISSION_MODE) for n in range(len(lines) + 1)] == walked
    assert folded(index, PERMISSION_MODE) == walked[-1] and folded(index[:], PERMISSION_MODE) == walked[-1]
    assert list(index._changes[PERMISSION_MODE.key][0]) == [1, 3, 5, 6, 7, 9, 10], "a state kept per change, none per line"
    assert folded(list(index[:7]), PERMISSION_MODE)[0] == "acceptEdits" and folded(list(index[:3]), PERMISSION_MODE)[0] == "DEFAULT"
    # A part that does not start at the first line is walked (a fold is not undone): it reads the bytes as they are now.
    assert folded(index[3:7], PERMISSION_MODE)[0] == "acceptEdits" and folded(index[1:3], PERMISSION_MODE)[0] == "DEFAULT"


def test_a_full_count_of_a_large_session_just_compacted_takes_the_mode_the_compaction_ran_in() -> None:
    """count of a session Claude Code has just compacted rebuilds what the compaction re-injected; a
    plan-mode reminder comes back when the mode was plan when it ran, whatever the lines after the
    boundary record. On a file read in place, that mode is what the build kept (above)."""
    from ctxpipe.jobs.count import SMALL_FILE
    from project_sessions import Project

    def session(mode_then: str, mode_after: str) -> bytes:
        p = Project("/w/proj")
        p.ask("Plan the endpoint.")
        p.write("/home/dev/.claude/plans/linked-soaring-matsumoto.md", "# Plan\n1. Add the endpoint")
        for n in range(12):
            p.read(f"src/m{n}.py", f"# module {n}\n" + "x = 1\n" * 1200)
        p.user("Plan it well.", permissionMode=mode_then)
        p.say("Work so far is done.")
        p.compact_here()
        p.raw({"type": "permission-mode", "permissionMode": mode_after, "sessionId": p.session_id})
        return p.to_bytes()

    for mode_then, mode_after, reminded in (("plan", "default", True), ("default", "plan", False)):
        data = session(mode_then, mode_after)
        assert len(data) > SMALL_FILE
        for full in ((), ("--full",)):
            result = run_cli("count", "--json", *full, "-", stdin=data)
            report = orjson.loads(ok(result).stdout)
            kinds = [item["kind"] for item in report["reinjected"]["items"]]
            assert ("plan-mode" in kinds) is reminded and "plan" in kinds, (mode_then, full, kinds)


def test_a_full_count_folds_the_markers_and_the_version_while_the_file_is_checked() -> None:
    """`count --full` of a file read in place asks every line for the session's version and for the
    markers (a stage's record, a thinking_stripped): folded while the LineIndex is built, as above.
    Gone on from over lines below the index, the markers' positions go on and the index's own state
    stays as it was kept."""
    from ctxpipe.core.count import Marker
    from ctxpipe.core.jsonl import Entry, Joined, LineIndex
    from ctxpipe.core.rules import VERSION, session_version
    from ctxpipe.formats.claude_code import ClaudeCodeFormat

    claude_code = ClaudeCodeFormat()
    objs = [
        {"type": "assistant", "version": "2.1.88", "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": "x" * 400}]}},
        {"type": "attachment", "version": "2.1.332", "attachment": {"type": "thinking_stripped", "scope": "all"}},
        {"type": "system", "version": "2.1.114", "subtype": "microcompact_boundary", "microcompactMetadata": {"tokensSaved": 1234}},
    ]
    expected = [Marker(1, 2, "thinking_stripped", 100), Marker(2, 3, "microcompact_boundary", 1234)]
    buffer = bytearray(b"\n".join(orjson.dumps(obj) for obj in objs) + b"\n")
    listed = [Entry(obj, None, number) for number, obj in enumerate(objs, 1)]
    assert claude_code.markers(listed) == expected and session_version(listed) == "2.1.332"
    index = LineIndex(buffer, "t.jsonl", folds=(VERSION, *claude_code.line_folds))
    buffer[:] = buffer.replace(b"2.1.332", b"2.1.001").replace(b"1234", b"4321")
    assert claude_code.markers(list(index))[-1].tokens_saved == 4321 and session_version(list(index)) == "2.1.114", "a walk parses the new bytes"
    assert claude_code.markers(index) == expected and session_version(index) == "2.1.332", "the folds parsed no line again"

    below = [Entry({"type": "system", "subtype": "snip_boundary", "snipMetadata": {"tokensSaved": 7}}, None, 4)]
    assert claude_code.markers(Joined(index, below)) == [*expected, Marker(3, 4, "snip_boundary", 7)]
    assert claude_code.markers(index) == expected, "going on from the index's markers left them as they were"


def test_a_line_index_parses_its_last_long_lines_once_and_keeps_no_more() -> None:
    """The last LONG_KEPT long lines read (a line of a hundred thousand blocks, a 16 MB tool result)
    come back as the same entries however they are asked for again, by position or in a walk over
    every line; short lines are parsed again at every read, and one more long line read drops the
    one read longest ago."""
    from ctxpipe.core.jsonl import LineIndex

    many_blocks = orjson.dumps({"type": "user", "message": {"content": [{"type": "text", "text": "x"}] * 60_000}})
    assert len(many_blocks) >= LineIndex.LONG_LINE
    longs = [many_blocks] + [orjson.dumps({"type": "user", "n": n, "text": "y" * LineIndex.LONG_LINE}) for n in range(LineIndex.LONG_KEPT)]
    lines = [b'{"a": 1}', *longs[:-1], b'{"b": 2}']
    index = LineIndex(b"\n".join(lines) + b"\n", "t.jsonl")
    kept = [index[position] for position in range(1, len(lines) - 1)]
    for _ in range(2):
        assert all(a is b for a, b in zip([index[position] for position in range(1, len(lines) - 1)], kept))
        assert all(a is b for a, b in zip(list(index)[1:-1], kept)) and all(a is b for a, b in zip(list(reversed(index))[1:-1], reversed(kept)))
    assert index[0] is not index[0], "a short line is parsed again"
    assert [entry.obj for entry in kept] == [orjson.loads(line) for line in longs[:-1]] and kept[0].line == 2
    index = LineIndex(b"\n".join([*lines, longs[-1]]) + b"\n", "t.jsonl")
    first = index[1]
    for position in range(2, len(lines) + 1):
        index[position]
    assert index[len(lines)].obj == orjson.loads(longs[-1]) and index[len(lines)] is index[len(lines)]
    assert index[1] is not first and index[1].obj == first.obj, "the long line read longest ago is still held"
    assert index[1:2][0].obj == first.obj
