"""Fuzz: real lines, mutated, through every command — no traceback, untouched lines byte-identical.

Each example takes a hand-written session from fixtures/claude-code/, mutates one to three of its
lines (cut a line short, flip or insert bytes, give a field a value of another type, nest a value
deeply, duplicate, swap or drop lines), and runs every registered command on it with --on-error
fail or skip. The commands run in-process (a process per run would cost minutes) through the
command line's own entry point, main(), with the standard streams on real file descriptors, as
in a shell (typer's CliRunner hands the command objects with no descriptor, which the writers
need). It asserts:
- nothing but a clean exit: SystemExit with 0 or 1 (warn: its levels 3-5), never an exception
  out of main() (that is a traceback); at most one `ctxpipe: error:` line on stderr, the only
  line there with exit 1 when it names a line, and no raw control character on stderr;
- a report is strict JSON (no NaN) with no negative or fractional token figure;
- report's page is whole or absent; statusline prints one escaped line and exits 0, whatever the file;
- every line of a transcript written is a line of the input, byte for byte, or a JSON object;
- the lines a command does not touch by its own definition stay byte-identical: every line for
  convert to the input's own format, summarize (the history stays above the new boundary) and
  expand (an empty ledger undoes nothing); every line without a tool result for microcompact,
  collapse and compact (they rewrite tool results only); every line restore did not re-link, and
  every line snip neither removed (its marker lists them) nor re-linked.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from ctxpipe.cli.app import main
from helpers import FIXTURES, bad_token_figures, finite_float, no_json_constant, registered_commands
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

NOW = "2030-01-01T00:00:00Z"
SOURCES = {path.name: path.read_bytes() for path in sorted((FIXTURES / "claude-code").glob("*.jsonl"))}

# Every command, as it reads a transcript on stdin (restore and compact from the transcript only:
# the fuzz never reads the disk). test_every_registered_command_is_fuzzed keeps this complete.
COMMANDS: dict[str, list[str]] = {
    "convert": ["convert", "--to", "claude-code"],
    "convert-anthropic": ["convert", "--to", "anthropic"],
    "validate": ["validate"],
    "count": ["count"],
    "warn": ["warn"],
    "api-edits": ["api-edits"],
    "audit": ["audit", "--json"],
    "microcompact": ["microcompact", "--force", "--keep-recent", "1", "--now", NOW],
    "collapse": ["collapse", "--now", NOW],
    "snip": ["snip", "--keep-last", "2", "--now", NOW],
    "summarize": ["summarize", "--engine", "offline", "--keep-last", "2", "--now", NOW],
    "restore": ["restore", "--source", "transcript", "--now", NOW],
    "compact": ["compact", "--force", "--engine", "offline", "--keep-last", "2", "--source", "transcript", "--now", NOW],
    "expand": ["expand", "--ledger", "{ledger}"],
    "report": ["report", "--json", "--now", NOW],
    "report-html": ["report", "--now", NOW],
    "statusline": ["statusline", "--no-savings"],  # the saving is a detached background run: none here
}
REPORTS = {"validate", "count", "warn", "api-edits", "report", "audit"}
# report without --json: an HTML page on stdout, the whole page or nothing (check_page).
PAGES = {"report-html"}
# statusline is given the transcript as Claude Code gives it, {"transcript_path": FILE} on stdin
# (never as an argument or stdin's bytes), and promises another contract: one line, exit 0, whatever
# the transcript holds (it skips bad lines itself: Claude Code may be writing the last one; it has
# no --on-error), nothing on stderr, transcript text escaped (check_status_line).
STATUS_LINES = {"statusline"}
TAKES_ON_ERROR = set(COMMANDS) - {"expand"} - STATUS_LINES
EXIT_CODES = {"warn": {0, 1, 3, 4, 5}, "statusline": {0}}


def test_every_registered_command_is_fuzzed() -> None:
    assert set(registered_commands(readers_only=True)) == {argv[0] for argv in COMMANDS.values()}


# --- mutations -------------------------------------------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    -13909,
    1e308,
    10**40,
    12.5,
    "NaN",
    "",
    "x" * 300,
    "\x1b]0;pwned\x07\x1b[2J",
    "[/]",
    "[link=https://evil.example]x[/link]",
    "\u202eevil",
    "a\x00b",
    "../../etc/passwd",
    {},
    [],
    [[]],
    {"a": {"b": None}},
    [None, 5, "s"],
    "2026-13-45T99:99:99Z",
]
RAW_VALUES = [b"NaN", b"-Infinity", b"1e400", b"1" + b"0" * 40, b"-0", b"1e-400"]
DEPTHS = [50, 300, 1000, 1030, 5000]


def paths(value: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every key path in a JSON value (the fields a mutation can retype)."""
    found: list[tuple[Any, ...]] = []
    if depth > 6:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*prefix, key))
            found += paths(item, (*prefix, key), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            found.append((*prefix, index))
            found += paths(item, (*prefix, index), depth + 1)
    return found


def splice(obj: dict[str, Any], path: tuple[Any, ...], raw: bytes) -> bytes:
    """obj with the value at path replaced by raw JSON text (which may be invalid or very deep)."""
    target: Any = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "\x00@@SPLICE@@\x00"
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass").replace(b'"\\u0000@@SPLICE@@\\u0000"', raw)


@st.composite
def mutated_sessions(draw: st.DrawFn) -> bytes:
    source = draw(st.sampled_from(sorted(SOURCES)))
    lines = SOURCES[source].split(b"\n")[:-1]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "retype", "retype", "retype", "raw", "nest", "duplicate", "swap", "drop"]))
        i = draw(st.integers(0, len(lines) - 1)) if lines else 0
        if not lines:
            break
        line = lines[i]
        if kind == "truncate" and len(line) > 1:
            lines[i] = line[: draw(st.integers(1, len(line) - 1))]
        elif kind == "flip" and line:
            at = draw(st.integers(0, len(line) - 1))
            lines[i] = line[:at] + bytes([line[at] ^ draw(st.integers(1, 255))]) + line[at + 1 :]
        elif kind == "insert":
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + draw(st.binary(min_size=1, max_size=4).filter(lambda b: b"\n" not in b)) + line[at:]
        elif kind in ("retype", "raw", "nest"):
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):  # a line an earlier step broke or nested too deep
                continue
            if not isinstance(obj, dict):
                continue
            choices = paths(obj) + [("x-fuzz-field",)]
            path = draw(st.sampled_from(choices))
            if kind == "retype":
                value = draw(st.sampled_from(HOSTILE_VALUES))
                raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
            elif kind == "raw":
                raw = draw(st.sampled_from(RAW_VALUES))
            else:
                depth = draw(st.sampled_from(DEPTHS))
                opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
                raw = opener * depth + b"1" + closer * depth
            lines[i] = splice(obj, path, raw)
        elif kind == "duplicate":
            lines.insert(draw(st.integers(0, len(lines))), line)
        elif kind == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "drop":
            del lines[i]
    return b"".join(line + b"\n" for line in lines)


# --- checks --------------------------------------------------------------------------------------------


def strict_object(line: bytes) -> dict[str, Any] | None:
    """The line as a JSON object with finite numbers (lone surrogate escapes allowed, as JSON
    does), or None: what every reader must take, and what every writer may write."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            value = json.loads(line.decode("utf-8"), parse_constant=no_json_constant, parse_float=finite_float)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def good_objects(data: bytes) -> list[tuple[int, bytes, dict[str, Any]]]:
    found = []
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        obj = strict_object(line)
        if obj is not None:
            found.append((number, line, obj))
    return found


def has_tool_result(obj: dict[str, Any]) -> bool:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(isinstance(block, dict) and block.get("type") == "tool_result" for block in content)


def without_links(obj: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in ("parentUuid", "logicalParentUuid")}


def untouched_problems(name: str, data: bytes, output: bytes, skipped: int) -> list[str]:
    problems = []
    inputs = set(data.split(b"\n"))
    out_lines = output.split(b"\n")
    if out_lines and out_lines[-1] == b"":
        out_lines.pop()
    for number, line in enumerate(out_lines, 1):
        if line not in inputs and strict_object(line) is None:
            problems.append(f"output line {number} is neither an input line nor a JSON object: {line[:100]!r}")
    if name == "convert-anthropic":
        return problems
    out_set = set(out_lines)
    out_objects = [obj for line in out_lines if (obj := strict_object(line)) is not None]
    missing = []
    relinked = [without_links(obj) for obj in out_objects]
    removed = {
        uuid
        for obj in out_objects
        if obj.get("subtype") == "snip_boundary" and isinstance(obj.get("snipMetadata"), dict) and isinstance(obj["snipMetadata"].get("removedUuids"), list)
        for uuid in obj["snipMetadata"]["removedUuids"]
        if isinstance(uuid, str)
    }
    for number, line, obj in good_objects(data):
        if line in out_set:
            continue
        if name in ("convert", "summarize", "expand"):
            must = True
        elif name in ("microcompact", "collapse", "compact"):
            must = not has_tool_result(obj)
        elif name == "restore":
            must = without_links(obj) not in relinked
        elif name == "snip":
            must = obj.get("uuid") not in removed and without_links(obj) not in relinked
        else:
            must = False
        if must:
            missing.append(f"{name}: input line {number} ({str(obj.get('type'))[:40]!r}) is not in the output byte for byte")
    # With --on-error=skip a line the command could not take is left out (and counted on stderr).
    return problems + (missing if len(missing) > skipped else [])


@dataclass
class Result:
    exit_code: int
    stdout: bytes
    stderr: bytes
    exception: BaseException | None


@contextlib.contextmanager
def standard_streams(stdin: bytes) -> Iterator[tuple[Any, Any]]:
    """Descriptors 0-2 on temporary files (and fresh sys.std* over them) for the duration."""
    files = [tempfile.TemporaryFile() for _ in range(3)]
    files[0].write(stdin)
    files[0].seek(0)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    streams = sys.stdin, sys.stdout, sys.stderr
    try:
        for fd, file in enumerate(files):
            os.dup2(file.fileno(), fd)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "wb", closefd=False)), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "wb", closefd=False)), encoding="utf-8", errors="backslashreplace", line_buffering=True)
        yield files[1], files[2]
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdin, sys.stdout, sys.stderr = streams
        for fd, copy in enumerate(saved):
            os.dup2(copy, fd)
            os.close(copy)
        for file in files:
            file.close()


def invoke(argv: list[str], stdin: bytes) -> Result:
    """main() with argv and stdin, as `ctxpipe ARGV < stdin` runs it; an exception out of main() is
    what the interpreter would print as a traceback."""
    exception: BaseException | None = None
    code = 0
    saved_argv = sys.argv
    with standard_streams(stdin) as (out, err):
        sys.argv = ["ctxpipe", *argv]
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:
            exception, code = exc, 1
        finally:
            sys.argv = saved_argv
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        out.seek(0)
        err.seek(0)
        return Result(code, out.read(), err.read(), exception)


CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")
SGR = re.compile("\x1b\\[[0-9;]*m")  # statusline's own colours (on by default, even on a pipe)
STATUS_LINE = re.compile(r"⛁ (?:[\d.]+[KM]?/[\d.]+[KM]? \d+% (?:normal|warning|autocompact|blocking)|no transcript|transcript unreadable)(?: · [^\n]+)?\n")
PAGE_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # an HTML page shows these as visible symbols


def check_status_line(label: str, result: Result) -> list[str]:
    problems = []
    text = SGR.sub("", result.stdout.decode("utf-8", "surrogateescape"))
    if not STATUS_LINE.fullmatch(text):
        problems.append(f"{label}: stdout is not one status line: {text[:300]!r}")
    elif chars := sorted({repr(c) for c in CONTROL.findall(text[:-1])}):
        problems.append(f"{label}: raw control characters in the status line: {chars}")
    if result.stderr:
        problems.append(f"{label}: output on stderr (Claude Code shows stdout only): {result.stderr[-300:]!r}")
    return problems


def check_page(label: str, result: Result) -> list[str]:
    if result.exit_code != 0:
        return [f"{label}: a failed run left a partial page on stdout"] if result.stdout else []
    if not (result.stdout.startswith(b"<!DOCTYPE html>") and result.stdout.endswith(b"</html>\n")):
        return [f"{label}: stdout is not a whole HTML page: {result.stdout[:80]!r} … {result.stdout[-80:]!r}"]
    try:
        page = result.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [f"{label}: the page is not UTF-8: {exc}"]
    found = sorted({repr(c) for c in PAGE_UNSAFE.findall(page)})
    return [f"{label}: raw control characters in the page: {found}"] if found else []


def command_line(name: str, args: list[str], data: bytes, folder: Path) -> tuple[list[str], bytes]:
    """The argv and stdin of a run on `data`: on stdin as `-`, or for statusline in a file named by the status JSON on stdin."""
    if name not in STATUS_LINES:
        return [*args, "-"], data
    transcript = folder / "fuzzed.jsonl"
    transcript.write_bytes(data)
    return args, json.dumps({"transcript_path": str(transcript)}).encode()


def run_all(data: bytes, on_error: str, ledger: Path, codes: dict[str, int] | None = None) -> list[str]:
    problems = []
    for name, argv in COMMANDS.items():
        args = [arg.replace("{ledger}", str(ledger)) for arg in argv]
        if name in TAKES_ON_ERROR:
            args.append(f"--on-error={on_error}")
        argv, stdin = command_line(name, args, data, ledger.parent)
        result = invoke(argv, stdin)
        label = f"{name} --on-error={on_error}" if name in TAKES_ON_ERROR else name
        if codes is not None:
            codes[name] = result.exit_code
        err = result.stderr.decode("utf-8", "surrogateescape")
        if result.exception is not None:
            problems.append(f"{label}: {type(result.exception).__name__}: {str(result.exception)[:300]}")
            continue
        allowed = EXIT_CODES.get(name, {0, 1})
        if result.exit_code not in allowed:
            problems.append(f"{label}: exit {result.exit_code}: {err[-300:]!r}")
        if "Traceback" in err:
            problems.append(f"{label}: traceback on stderr: {err[-600:]!r}")
        errors = [line for line in err.splitlines() if line.startswith("ctxpipe: error: ")]
        if len(errors) > 1 or (result.exit_code == 1 and name != "validate" and len(errors) != 1):
            problems.append(f"{label}: exit {result.exit_code} with {len(errors)} error lines: {err[-400:]!r}")
        if chars := sorted({repr(c) for c in CONTROL.findall(err)}):
            problems.append(f"{label}: raw control characters on stderr: {chars}")
        if name in STATUS_LINES:
            problems += check_status_line(label, result)
            continue
        if name in PAGES:
            problems += check_page(label, result)
            continue
        if result.exit_code != 0 and name not in ("warn", "validate"):
            continue
        if name in REPORTS:
            for line in result.stdout.splitlines():
                report = strict_object(line) if line.strip() else {}
                if report is None:
                    problems.append(f"{label}: a report line is not strict JSON: {line[:200]!r}")
                elif figures := bad_token_figures(report):
                    problems.append(f"{label}: token figures that are not whole non-negative numbers: {figures[:5]}")
        elif result.exit_code == 0:
            skipped = sum(int(n) for n in re.findall(r"skipped (\d+) bad line", err))
            problems += untouched_problems(name, data, result.stdout, skipped)
    return problems


@pytest.fixture(scope="module")
def empty_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "empty-ledger.jsonl"
    path.write_bytes(b"")
    return path


def test_the_sources_pass_clean(empty_ledger: Path) -> None:
    for source, data in SOURCES.items():
        for on_error in ("fail", "skip"):
            assert run_all(data, on_error, empty_ledger) == [], source


# An example runs thirteen commands (about a second); 60 of them take about a minute. No shrinking:
# a shrink re-runs them all per step and can take many minutes; the failing example is printed whole.
# The suite's run is reproducible (the same 60 examples each time, so CI judges the code, not the
# draw); CTXPIPE_FUZZ_RANDOM=1 explores new ones, and CTXPIPE_FUZZ_EXAMPLES=N runs more.
@settings(
    max_examples=int(os.environ.get("CTXPIPE_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=not os.environ.get("CTXPIPE_FUZZ_RANDOM"),
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(data=mutated_sessions(), on_error=st.sampled_from(["fail", "skip"]))
def test_mutated_real_lines_through_every_command(data: bytes, on_error: str, empty_ledger: Path) -> None:
    codes: dict[str, int] = {}
    problems = run_all(data, on_error, empty_ledger, codes)
    # `pytest --hypothesis-show-statistics` shows how often the mutations made a file bad.
    event(f"convert exit {codes.get('convert')}, validate exit {codes.get('validate')}")
    assert not problems, "\n".join(problems)
