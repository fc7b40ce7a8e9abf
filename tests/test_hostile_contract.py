"""The hostile-input contract: every registered command, over every file in fixtures/adversarial/.

For each command (taken from the typer registry: a command with no entry in COMMANDS fails
test_every_registered_command_is_in_the_contract) and each adversarial transcript, by path and on
a stdin pipe:
- no traceback and no Python exception name on stderr, no hang, no signal;
- the documented exit code (0 or 1; warn adds its levels 3-5; validate exits 1 with findings);
- statusline (given the transcript as Claude Code does, in its status JSON on stdin) keeps its own
  contract instead of the readers': exit 0 and one escaped line, whatever the file holds;
- on exit 1, exactly one `ctxpipe: error: ` line naming the file, and FILE:LINE where a line is at
  fault (a bad line must be named; a line named must be one of the lines the case changed);
- a bad line (not JSON, not UTF-8, not an object) is rejected by every command that reads lines,
  and listed as a `bad-line` finding by validate;
- no raw control character on stderr (C0 but \\n and \\t, DEL, C1, bidi overrides, stray bytes),
  nor on a terminal (the pty runs); JSON on stdout is data, but must be strict JSON (no NaN), and
  no token figure in a report is negative or fractional;
- transcript output keeps untouched lines byte-identical (each command's rule in
  check_transcript) and every output line is an input line or a JSON object;
- no file outside the transcript's folder, the working folder, the interpreter and the package
  is opened for reading (an audit hook logs every open and directory listing);
- the original is unchanged after every run, recoverable after `compact --in-place --backup`
  (twice), and rebuilt byte for byte by `expand` from the ledger of a chain of stages.

Runs are real processes with real file descriptors and exit codes, but ~3,000 `python -m ctxpipe`
start-ups cost too long on a shared machine: a zygote process imports ctxpipe once and forks a
child, which runs `python -m ctxpipe`'s own `__main__` with the run's argv, environment, working
folder and standard streams and ends as the interpreter would (traceback and exit 1 on an
uncaught exception). A case's runs share one child per zygote (one process per adversarial file
for all commands, as a fresh child's first touches of the zygote's memory cost more than a small
run): one after another, each set up as above and undone after it (streams, folder, environment,
signal handlers); a run that does not end in time, ends the child or leaves a thread running is
run again in a child of its own, and so is every run after it. test_the_zygote_runs_are_python_dash_m
checks every variant run that way against real `python -m ctxpipe` runs, byte for byte.

Failures are left failing on purpose: each assertion lists every violation of its run.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import queue
import re
import shutil
import subprocess
import sys
import threading
import tty
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import FIXTURES, ROOT, bad_token_figures, finite_float, no_json_constant, registered_commands
from zygote import TIMEOUT, Run, Zygote, base_env

ADVERSARIAL = FIXTURES / "adversarial"
NOW = "2030-01-01T00:00:00Z"
ERROR_PREFIX = "ctxpipe: error: "
WORKERS = max(2, os.cpu_count() or 2)

# --- the commands: every registered command, with the argv that makes it read a transcript ---------
# "{ledger}" is replaced by an empty ledger file (an empty ledger is a valid ledger). summarize and
# compact run their default engine (auto) with no API key: the session-memory lookup runs, then the
# offline engine.

COMMANDS: dict[str, dict[str, list[str]]] = {
    "convert": {"convert-claude-code": ["convert", "--to", "claude-code"], "convert-anthropic": ["convert", "--to", "anthropic"]},
    "validate": {"validate": ["validate"]},
    "count": {"count": ["count"]},
    "warn": {"warn": ["warn"]},
    "api-edits": {"api-edits": ["api-edits"]},
    "audit": {"audit": ["audit", "--json"]},
    "microcompact": {"microcompact": ["microcompact", "--force", "--keep-recent", "1", "--now", NOW]},
    "collapse": {"collapse": ["collapse", "--now", NOW]},
    "snip": {"snip": ["snip", "--keep-last", "2", "--now", NOW]},
    "summarize": {"summarize": ["summarize", "--keep-last", "2", "--now", NOW]},
    "restore": {"restore": ["restore", "--now", NOW]},
    "compact": {"compact": ["compact", "--force", "--keep-last", "2", "--now", NOW]},
    "expand": {"expand": ["expand", "--ledger", "{ledger}"]},
    "report": {"report": ["report", "--json", "--now", NOW], "report-html": ["report", "--now", NOW]},
    # --no-savings: the saving comes from a detached background run, which no check here could
    # wait for (test_statusline_savings_on_every_hostile_file runs it in the foreground instead).
    "statusline": {"statusline": ["statusline", "--no-savings"]},
}
VARIANTS: dict[str, list[str]] = {variant: argv for variants in COMMANDS.values() for variant, argv in variants.items()}
COMMAND_OF: dict[str, str] = {variant: command for command, variants in COMMANDS.items() for variant in variants}
# The same commands with their human output on a terminal ("{out}": a file for the transcript, so
# only reports and diagnostics reach the terminal).
ON_A_TERMINAL: dict[str, list[list[str]]] = {
    "convert": [["convert", "--to", "anthropic", "-o", "{out}"], ["convert", "--to", "claude-code", "-o", "{out}"]],
    "validate": [["validate"]],
    "count": [["count"], ["count", "--by", "role"], ["count", "--by", "block"], ["count", "--by", "tool"], ["count", "--top", "3"], ["count", "--timeline"]],
    "warn": [["warn", "--explain"]],
    "api-edits": [["api-edits", "--explain"]],
    "audit": [["audit"]],
    "microcompact": [["microcompact", "--force", "--keep-recent", "1", "--report", "-o", "{out}"]],
    "collapse": [["collapse", "--report", "-o", "{out}"]],
    "snip": [["snip", "--keep-last", "2", "--report", "-o", "{out}"]],
    "summarize": [["summarize", "--keep-last", "2", "-o", "{out}"]],
    "restore": [["restore", "--plan"], ["restore", "-o", "{out}"]],
    "compact": [["compact", "--force", "--keep-last", "2", "--out-dir", "{outdir}"]],
    "expand": [["expand", "--ledger", "{ledger}", "-o", "{out}"]],
    # The page to a file (a page on a terminal is a usage error); the facts as JSON on the terminal.
    "report": [["report", "--now", NOW, "-o", "{out}"], ["report", "--json", "--now", NOW]],
    "statusline": [["statusline", "--no-savings"]],
}
REPORTS = {"validate", "count", "warn", "api-edits", "report", "audit"}  # JSON reports on a pipe; the rest write transcripts
# Variants that write an HTML page on stdout (not a transcript, not JSON): the whole page or nothing.
PAGES = {"report-html"}
# statusline is given its transcript as Claude Code gives it: {"transcript_path": FILE} on stdin,
# never as an argument or as stdin's bytes (see command_line). Its contract is not the readers':
# it prints one line for Claude Code and exits 0 whatever the transcript holds (it counts as
# `count --on-error skip` does: Claude Code may be writing the last line), says "transcript
# unreadable" when it cannot read it, writes no transcript and no JSON, and nothing on stderr.
# So a bad line is not an error for it (check_status_line asserts what it promises instead).
STATUS_LINES = {"statusline"}
# Readers that read every line front to back (report: the cost needs every line; audit: every
# compaction of the history), so the bad line
# they name is the file's first.
READS_FORWARD = {"report", "audit"}
NOT_PARSING = {"expand"}  # undoes ledger records on bytes; an empty ledger leaves the input as it is
# Stages that copy the lines before the active context (the last compact boundary) unparsed.
PASS_HISTORY = {"microcompact", "collapse", "snip", "summarize", "restore", "compact"}
EXIT_CODES = {"warn": {0, 1, 3, 4, 5}, "statusline": {0}}  # warn exits with the context's level; statusline 0; the others 0 or 1


def test_every_registered_command_is_in_the_contract() -> None:
    commands = registered_commands(readers_only=True)
    assert "api-edits" in commands and len(commands) >= 12
    assert sorted(COMMANDS) == commands, "a registered command has no entry in COMMANDS (or an entry names no command)"
    assert sorted(ON_A_TERMINAL) == commands, "a registered command has no entry in ON_A_TERMINAL"


# --- the cases -------------------------------------------------------------------------------------


def norm(line: bytes) -> bytes:
    """A line without a BOM or a CR before its newline (framing, not content)."""
    return line.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r")


def parse(line: bytes, finite: bool = False) -> Any:
    """The line's JSON value as any conforming reader gets it (lone surrogate escapes are legal JSON),
    or raise ValueError (not UTF-8, not JSON, NaN/Infinity; with finite, a number out of a double's
    range); a depth no reader takes raises RecursionError."""
    text = norm(line).decode("utf-8")
    return json.loads(text, parse_constant=no_json_constant, parse_float=finite_float if finite else float)


def is_bad_line(line: bytes) -> bool:
    if not norm(line).strip(b" \t\r\n\x0c"):
        return False  # blank lines are skipped by every reader
    try:
        return not isinstance(parse(line), dict)
    except RecursionError:
        return False  # legal JSON, deeper than a parser may take: a command may accept or reject it
    except ValueError:
        return True


def strict_object(line: bytes) -> dict[str, Any] | None:
    """The line as a JSON object with finite numbers, or None: what every reader must take and
    every writer may write."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            value = parse(line, finite=True)  # lone surrogates: legal, which orjson rejects
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def lines_of(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


BASELINE = (ADVERSARIAL / "baseline.jsonl").read_bytes()
BASE_INDEX = {line: index for index, line in enumerate(lines_of(BASELINE))}


def odd_lines(data: bytes) -> set[int]:
    """Line numbers (from 1) of lines that are not baseline lines, or not in the baseline's order."""
    lines = [norm(line) for line in lines_of(data)]
    at = [BASE_INDEX.get(line) for line in lines]
    odd = set()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if at[i] is None:
            odd.add(i + 1)
            continue
        here = at[i]
        before = at[i - 1] if i > 0 else -1
        after = at[i + 1] if i + 1 < len(at) else len(BASE_INDEX)
        # Out of order: neither neighbour is its baseline neighbour (a neighbour that is new says nothing).
        if here is not None and before is not None and after is not None and before != here - 1 and after != here + 1:
            odd.add(i + 1)
    return odd


@dataclass(frozen=True)
class Case:
    name: str
    path: Path

    @cached_property
    def data(self) -> bytes:
        return self.path.read_bytes()

    @cached_property
    def lines(self) -> list[bytes]:
        return lines_of(self.data)

    @cached_property
    def bad(self) -> set[int]:
        return {i + 1 for i, line in enumerate(self.lines) if is_bad_line(line)}

    @cached_property
    def odd(self) -> set[int]:
        return odd_lines(self.data) | self.bad

    @cached_property
    def claude_code(self) -> bool:
        return not self.name.startswith(("anthropic", "codex"))


def fixture_cases() -> list[Case]:
    return [Case(path.stem, path) for path in sorted(ADVERSARIAL.glob("*.jsonl"))]


def deep(depth: int, leaf: bytes = b"1") -> bytes:
    return b"[" * depth + leaf + b"]" * depth


def _with_last_line(transform: Callable[[dict[str, Any]], bytes]) -> bytes:
    lines = lines_of(BASELINE)
    return b"\n".join(lines[:-1] + [transform(json.loads(lines[-1]))]) + b"\n"


def _splice(obj: dict[str, Any], key_path: tuple[str, ...], raw: bytes) -> bytes:
    target = obj
    for key in key_path[:-1]:
        target = target[key]
    target[key_path[-1]] = "@@RAW@@"
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode().replace(b'"@@RAW@@"', raw)


# Cases too big to commit, written at run time.
GENERATED: dict[str, Callable[[], bytes]] = {
    "generated-huge-line-16mb": lambda: _with_last_line(lambda o: _splice(o, ("message", "content"), json.dumps("0123456789abcdef" * (1 << 20)).encode())),
    "generated-many-blocks-100k": lambda: _with_last_line(
        lambda o: _splice(o, ("message", "content"), b"[" + b",".join([b'{"type":"text","text":"x"}'] * 100_000) + b"]")
    ),
    "generated-deep-100000-unknown-field": lambda: _with_last_line(lambda o: _splice(o, ("x-future-field",), deep(100_000))),
    "generated-deep-100000-content": lambda: _with_last_line(lambda o: _splice(o, ("message", "content"), deep(100_000, b'{"type":"text","text":"deep"}'))),
}


@pytest.fixture(scope="session")
def generated_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("generated-cases")
    for name, make in GENERATED.items():
        (folder / f"{name}.jsonl").write_bytes(make())
    return folder


CASE_NAMES = [case.name for case in fixture_cases()] + list(GENERATED)


def test_the_readme_lists_every_fixture() -> None:
    readme = (ADVERSARIAL / "README.md").read_text()
    listed = set(re.findall(r"`([\w.-]+\.jsonl)`", readme))
    assert listed == {case.path.name for case in fixture_cases()}


def test_the_cases_are_what_the_readme_says() -> None:
    cases = {case.name: case for case in fixture_cases()}
    assert cases["baseline"].odd == set() and cases["baseline"].bad == set()
    for name in ("truncated-last-line", "invalid-utf8", "not-object-array", "raw-esc-in-string", "cr-line-endings", "lone-surrogate-raw-bytes"):
        assert len(cases[name].bad) == 1, name
    assert cases["usage-nan-literal"].bad == cases["usage-nan-string"].odd != set()
    assert not cases["lone-surrogate-escaped"].bad and not cases["usage-1e400"].bad and not cases["deep-1000-content"].bad
    assert cases["tool-result-before-use"].odd == {14, 15}


# --- the zygote (tests/zygote.py) ------------------------------------------------------------------


class Runner:
    """A pool of zygotes; run() takes a free one."""

    def __init__(self, workdir: Path, size: int = WORKERS) -> None:
        self.idle: queue.Queue[Zygote] = queue.Queue()
        self.all = [Zygote(workdir / f"zygote-{i}") for i in range(size)]
        self.warm_up(workdir / "warm-up")
        for zygote in self.all:
            self.idle.put(zygote)

    def warm_up(self, folder: Path) -> None:
        # Commands import much of what they use (typer's parameter code, pydantic, rich, schemas) on
        # first use: run each once on the baseline in a child, then import what it imported in every
        # zygote, so a run costs its own work only. Only imports cross over, no state of a run.
        folder.mkdir(parents=True, exist_ok=True)
        env = base_env(folder)
        transcript, ledger = folder / "baseline.jsonl", folder / "ledger.jsonl"
        transcript.write_bytes(BASELINE)
        ledger.write_bytes(b"")
        names: set[str] = set()
        for n, argv in enumerate([*VARIANTS.values(), *(a for variants in ON_A_TERMINAL.values() for a in variants)]):
            args, stdin = command_line(fill(argv, folder, ledger, n), transcript, folder)
            names |= self.all[0].imported_by(args, cwd=folder, env=env, stdin=stdin)
        for zygote in self.all:
            zygote.ask({"import": sorted(names)})

    @contextlib.contextmanager
    def zygote(self) -> Iterator[Zygote]:
        """A free zygote, for as long as the block runs."""
        zygote = self.idle.get()
        try:
            yield zygote
        finally:
            self.idle.put(zygote)

    def run(self, argv: Sequence[Any], **kwargs: Any) -> Run:
        with self.zygote() as zygote:
            return zygote.run(argv, **kwargs)

    def run_batch(self, jobs: Sequence[tuple[Sequence[Any], dict[str, Any]]], in_turn: bool = False) -> list[Run]:
        """The runs' outcomes in order, shared out in one batch per zygote (Zygote.run_batch); with
        `in_turn`, one batch: each run starts when the one before it has ended (a chain of stages)."""
        # Dealt out in turn (a variant's path and stdin runs go to different zygotes), so the
        # costly commands are shared too and the batches end about together.
        count = 1 if in_turn else min(len(self.all), len(jobs))
        parts = [list(jobs[first::count]) for first in range(count)]

        def batch(part: list[tuple[Sequence[Any], dict[str, Any]]]) -> list[Run]:
            with self.zygote() as zygote:
                return zygote.run_batch(part)

        with ThreadPoolExecutor(count) as pool:
            results = list(pool.map(batch, parts))
        runs: list[Run] = [None] * len(jobs)  # type: ignore[list-item]
        for first, part in enumerate(results):
            runs[first::count] = part
        return runs

    def close(self) -> None:
        for zygote in self.all:
            zygote.close()


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    pool = Runner(tmp_path_factory.mktemp("zygotes"))
    yield pool
    pool.close()


# --- the checks ------------------------------------------------------------------------------------

EXCEPTION = re.compile(r"Traceback \(most recent call last\)|\b[A-Z][A-Za-z]*(?:Error|Exception)\b|Exception ignored")
# C0 but \t and \n, DEL, C1, the bidi embeddings/overrides/isolates, and bytes that are not UTF-8
# (surrogateescape turns each into U+DC80-U+DCFF).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")


def control_characters(data: bytes) -> list[str]:
    return sorted({repr(char) for char in CONTROL.findall(data.decode("utf-8", "surrogateescape"))})


def allowed_roots(*extra: Path) -> list[str]:
    roots = {ROOT, Path(sys.prefix), Path(sys.base_prefix), *extra}
    return sorted({os.path.realpath(root) for root in roots}) + ["/dev/null", "/dev/pts/", "/dev/tty", "/dev/stdin", "/dev/fd/", "/proc/self/fd/"]


def outside_reads(run: Run, roots: list[str]) -> list[str]:
    """Paths opened for reading (or listed) outside the roots."""
    found = []
    for record in run.opens:
        path, flags, mode = record["path"], record["flags"], record["mode"]
        if record["event"] == "open":
            if flags != -1 and (flags & os.O_ACCMODE) == os.O_WRONLY:
                continue
            if flags != -1 and flags & os.O_CREAT and flags & os.O_EXCL:
                continue  # a new file cannot leak what it holds
            if mode and "r" not in mode and "+" not in mode:
                continue
        real = os.path.realpath(path)
        if not any(real == root or real.startswith(root.rstrip("/") + "/") or (root.endswith("/") and real.startswith(root)) for root in roots):
            found.append(f"{record['event']} {path}")
    return sorted(set(found))


def error_lines(run: Run) -> list[str]:
    return [line for line in run.err.splitlines() if line.startswith(ERROR_PREFIX)]


def named_lines(message: str, source: str) -> list[int]:
    return [int(n) for n in re.findall(re.escape(source) + r":(\d+):", message)]


def reports(run: Run) -> list[dict[str, Any]] | None:
    """stdout as strict JSON objects, one per line (None when a line is not one)."""
    found = []
    for line in run.stdout.splitlines():
        if not line.strip():
            continue
        obj = strict_object(line)
        if obj is None:
            return None
        found.append(obj)
    return found


def without_links(obj: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in ("parentUuid", "logicalParentUuid")}


def good_lines(case: Case) -> list[tuple[int, bytes, dict[str, Any]]]:
    """The lines every reader must take (bad ones, numbers out of range and depths past any parser
    left out), parsed as the output is, so the two compare."""
    found = []
    for number, line in enumerate(case.lines, 1):
        if number in case.bad or not norm(line).strip():
            continue
        obj = strict_object(norm(line))
        if obj is not None:
            found.append((number, norm(line), obj))
    return found


def has_tool_result(obj: dict[str, Any]) -> bool:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(isinstance(block, dict) and block.get("type") == "tool_result" for block in content)


def last_boundary(case: Case) -> int:
    """The line number of the last compact boundary before the last message (0 when there is none):
    where the active context starts (a boundary after the last message starts nothing)."""
    found = boundary = 0
    for number, _, obj in good_lines(case):
        if obj.get("type") == "system" and obj.get("subtype") == "compact_boundary":
            boundary = number
        elif obj.get("type") in ("user", "assistant"):
            found = boundary
    return found


def check_transcript(variant: str, case: Case, written: bytes) -> list[str]:
    """A transcript written: every line an input line or a JSON object, untouched lines byte-identical."""
    problems = []
    inputs = {norm(line) for line in case.lines}
    output = [norm(line) for line in lines_of(written)]
    out_set = set(output)
    for number, line in enumerate(output, 1):
        if line not in inputs and strict_object(line) is None:
            problems.append(f"output line {number} is neither an input line nor a JSON object: {line[:120]!r}")
    if variant == "expand":
        if written != case.data:
            problems.append("expand with an empty ledger did not give back its input byte for byte")
        return problems
    if variant == "convert-anthropic" or not case.claude_code:
        return problems
    out_objects = [obj for line in output if (obj := strict_object(line)) is not None]  # parsed as good_lines parses
    removed = {
        uuid
        for obj in out_objects
        if obj.get("subtype") == "snip_boundary" and isinstance(obj.get("snipMetadata"), dict) and isinstance(obj["snipMetadata"].get("removedUuids"), list)
        for uuid in obj["snipMetadata"]["removedUuids"]
        if isinstance(uuid, str)
    }
    relinked = [without_links(obj) for obj in out_objects]
    boundary = last_boundary(case)
    for number, line, obj in good_lines(case):
        if line in out_set:
            continue
        if variant == "convert-claude-code":
            must = True  # converting to the input's own format copies it
        elif variant in ("microcompact", "collapse"):
            must = not has_tool_result(obj)  # only tool results are cleared or folded
        elif variant == "summarize":
            must = True  # the original lines stay above the new boundary
        elif variant == "compact":
            must = not has_tool_result(obj)
        elif variant == "restore":
            must = without_links(obj) not in relinked  # restore inserts lines; it may re-link the next one
        elif variant == "snip":
            must = number < boundary or (obj.get("uuid") not in removed and without_links(obj) not in relinked)
        else:
            must = False
        if must:
            problems.append(f"input line {number} ({obj.get('type')!r}) is not in the output byte for byte")
    return problems


# statusline's line: "⛁ " and the figures (or what stopped them), then " · "-separated parts.
STATUS_LINE = re.compile(r"⛁ (?:[\d.]+[KM]?/[\d.]+[KM]? \d+% (?:normal|warning|autocompact|blocking)|no transcript|transcript unreadable)(?: · [^\n]+)?\n")


def check_status_line(run: Run) -> list[str]:
    """What statusline promises on any transcript: exit 0 (EXIT_CODES), exactly one line on stdout,
    of its shape, with the transcript's text escaped (no colour: NO_COLOR is set), nothing on stderr."""
    problems = []
    text = run.stdout.decode("utf-8", "surrogateescape")
    if not STATUS_LINE.fullmatch(text):
        problems.append(f"stdout is not one status line: {text[:300]!r}")
    if chars := control_characters(run.stdout.removesuffix(b"\n")):
        problems.append(f"raw control characters in the status line: {', '.join(chars)}")
    if run.stderr:
        problems.append(f"statusline wrote on stderr (Claude Code shows only stdout): {run.err[-600:]!r}")
    return problems


# Characters an HTML document may not hold raw (the page shows them as visible symbols or escapes):
# C0 but tab, newline and CR, DEL and the C1 controls, and the bidi marks, embeddings, overrides and
# isolates (they would reorder what the page shows). A lone surrogate cannot be UTF-8, which the page must be.
PAGE_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def check_page(run: Run) -> list[str]:
    """report's HTML page on stdout: the whole page, UTF-8, no raw control character; on failure, none."""
    if run.returncode != 0:
        return [f"a failed run left {len(run.stdout)} bytes of a page on stdout"] if run.stdout else []
    problems = []
    if not (run.stdout.startswith(b"<!DOCTYPE html>") and run.stdout.endswith(b"</html>\n")):
        problems.append(f"stdout is not a whole HTML page: {run.stdout[:80]!r} … {run.stdout[-80:]!r}")
    try:
        page = run.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [*problems, f"the page is not UTF-8: {exc}"]
    if found := sorted({repr(char) for char in PAGE_UNSAFE.findall(page)}):
        problems.append(f"raw control characters in the page: {found}")
    return problems


def check_run(variant: str, case: Case, run: Run, *, via: str, roots: list[str], written: bytes | None = None) -> list[str]:
    """Every violation of the contract by one run (`written`: the transcript it wrote, when not on
    stdout; b"" when it writes none)."""
    written = run.stdout if written is None else written
    command = COMMAND_OF.get(variant, variant)
    json_report = command in REPORTS and variant not in PAGES
    writes_transcript = not json_report and variant not in PAGES and command not in STATUS_LINES
    problems = []
    if run.timed_out:
        return [f"no result within {TIMEOUT:.0f} s (killed)"]
    if run.returncode < 0:
        problems.append(f"killed by signal {-run.returncode}")
    if EXCEPTION.search(run.err):
        problems.append(f"a traceback or exception name on stderr: {run.err[-1500:]!r}")
    allowed = EXIT_CODES.get(command, {0, 1})
    if run.returncode not in allowed:
        problems.append(f"exit {run.returncode}, not one of {sorted(allowed)}")
    if chars := control_characters(run.stderr):
        problems.append(f"raw control characters on stderr: {', '.join(chars)}")
    errors = error_lines(run)
    got = reports(run) if (json_report or variant == "convert-anthropic") else None
    validate_report = command == "validate" and got is not None and len(got) == 1 and "findings" in got[0]
    if run.returncode == 1 and not validate_report:
        if len(errors) != 1:
            problems.append(f"exit 1 with {len(errors)} `ctxpipe: error:` lines on stderr: {run.err[-1500:]!r}")
        for message in errors[:1]:
            if run.source not in message:
                problems.append(f"the error does not name the file {run.source!r}: {message!r}")
            named = named_lines(message, run.source)
            if case.bad and variant not in NOT_PARSING and not set(named) & case.bad:
                problems.append(f"a bad line ({sorted(case.bad)}) is at fault but the error names {named or 'no line'}: {message!r}")
            elif case.bad and command in READS_FORWARD and min(named) != min(case.bad):
                problems.append(f"{command} reads forward, so the bad line it names is the first ({min(case.bad)}), not {named}: {message!r}")
            elif named and not set(named) <= case.odd:
                problems.append(f"the error names line {named}, which holds nothing odd (odd: {sorted(case.odd)[:20]}): {message!r}")
            what = message.split(f"{run.source}:", 1)[-1]
            if not re.sub(r"^\d+:", "", what).strip():
                problems.append(f"the error does not say what is wrong: {message!r}")
    if errors and run.returncode == 0:
        problems.append(f"an error line with exit 0: {errors!r}")
    if command in STATUS_LINES:
        problems += check_status_line(run)
    elif case.bad and variant not in NOT_PARSING:
        if command == "validate":
            bad_found = {f.get("line") for r in got or [] for f in r.get("findings", []) if f.get("code") == "bad-line"}
            if run.returncode != 1 or not (bad_found & case.bad or any(set(named_lines(e, run.source)) & case.bad for e in errors)):
                problems.append(
                    f"validate did not list the bad line(s) {sorted(case.bad)} (exit {run.returncode}, bad-line findings {sorted(bad_found, key=str)})"
                )
        elif run.returncode != 1 and not (command in PASS_HISTORY and max(case.bad) < last_boundary(case)):
            problems.append(f"bad line(s) {sorted(case.bad)} accepted with exit {run.returncode}")
        elif run.returncode == 0:
            # A stage reads back from the end to the start of the active context; what lies before it
            # (here, the bad lines) it copies unparsed, byte for byte.
            out = {norm(line) for line in lines_of(written)}
            if missing := [n for n in sorted(case.bad) if norm(case.lines[n - 1]) not in out]:
                problems.append(f"bad line(s) {missing} before the active context accepted but not passed through")
    if json_report and run.returncode in allowed and run.stdout.strip():
        if got is None:
            problems.append(f"the report on stdout is not strict JSON lines: {run.stdout[:300]!r}")
        else:
            for report in got:
                if figures := bad_token_figures(report):
                    problems.append(f"token figures that are not whole non-negative numbers: {figures[:6]}")
    if variant in PAGES:
        problems += check_page(run)
    if writes_transcript and run.returncode == 0 and written:
        problems += check_transcript(variant, case, written)
    if run.returncode == 1 and writes_transcript and run.stdout:
        inputs = {norm(line) for line in case.lines}
        partial = [line for line in lines_of(run.stdout) if norm(line) not in inputs and strict_object(line) is None]
        if partial:
            problems.append(f"a failed run left {len(partial)} broken line(s) on stdout")
    if outside := outside_reads(run, roots):
        problems.append(f"read outside the root: {outside[:8]}")
    return problems


# --- the matrix ------------------------------------------------------------------------------------

VIA = ("path", "stdin")
# stdin is read as a stream, a file by path through a map: the two differ in framing (BOM, line
# ends, blank, cut and bad lines, size), not in what the lines hold. Those cases run both ways; of
# the generated ones, the 16 MB line (its size, past the stream reader's bounds on the way): a hundred
# thousand blocks or a value 100,000 levels deep are what a line holds, read alike either way.
FRAMING = {
    "baseline",
    "bom-crlf",
    "bom-only-first",
    "cr-line-endings",
    "blank-lines",
    "no-final-newline",
    "empty",
    "only-blank-lines",
    "only-empty-object",
    "lone-surrogate-escaped",
    "raw-c1-bidi-in-string",
    "generated-huge-line-16mb",
}


def vias(name: str, case: Case | None) -> tuple[str, ...]:
    """How a case is given to each command: `case` is None for a generated one (none has a bad line:
    it is not written to find out)."""
    return VIA if name in FRAMING or (case is not None and case.bad) else ("path",)


@dataclass
class CaseRuns:
    case: Case
    tmp: Path
    runs: dict[tuple[str, str], Run]
    input_dir_before: list[str]
    input_dir_after: list[str]
    unchanged: bool


_CACHE: dict[str, CaseRuns] = {}
_LOCK = threading.Lock()
_CASE_LOCKS: dict[str, threading.Lock] = {}


def case_by_name(name: str, generated: Path) -> Case:
    path = generated / f"{name}.jsonl" if name in GENERATED else ADVERSARIAL / f"{name}.jsonl"
    return Case(name, path)


def prepare(case: Case, tmp: Path) -> tuple[Path, Path, dict[str, str], Path]:
    """The case's transcript in tmp/in/, a separate working folder, an environment and an empty ledger."""
    folder, cwd = tmp / "in", tmp / "cwd"
    folder.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(exist_ok=True)
    path = folder / f"{case.name}.jsonl"
    path.write_bytes(case.data)
    ledger = tmp / "empty-ledger.jsonl"
    ledger.write_bytes(b"")
    return path, cwd, base_env(tmp), ledger


def fill(argv: list[str], tmp: Path, ledger: Path, n: int = 0) -> list[str]:
    return [arg.replace("{ledger}", str(ledger)).replace("{out}", str(tmp / f"out-{n}.jsonl")).replace("{outdir}", str(tmp / f"outdir-{n}")) for arg in argv]


def status_json(folder: Path, transcript: str | Path) -> Path:
    """A file holding Claude Code's status JSON for `transcript` (statusline's stdin), in `folder`
    (never beside the transcript: nothing may appear there)."""
    text = json.dumps({"transcript_path": str(transcript), "session_id": "hostile-contract", "cwd": str(folder)})
    target = folder / f"status-{zlib.crc32(text.encode()):08x}.json"
    target.write_text(text)
    return target


def command_line(argv: Sequence[Any], transcript: Path, folder: Path, via: str = "path", cwd: Path | None = None) -> tuple[list[Any], Path | None]:
    """The argv and stdin of a run on `transcript`, by path or on stdin (`-`). statusline is given
    it in the status JSON on stdin: by its path, and for the stdin run by a path relative to the
    working folder `cwd` (as a hand-written status JSON may); the transcript cannot be its stdin."""
    if argv[0] in STATUS_LINES:
        named = os.path.relpath(transcript, cwd) if via == "stdin" and cwd is not None else transcript
        return list(argv), status_json(folder, named)
    return ([*argv, transcript], None) if via == "path" else ([*argv, "-"], transcript)


def run_case(runner: Runner, case: Case, tmp: Path, jobs: list[tuple[str, str]]) -> CaseRuns:
    path, cwd, env, ledger = prepare(case, tmp)
    before = sorted(p.name for p in path.parent.iterdir())

    lines = [command_line(fill(VARIANTS[variant], tmp, ledger), path, tmp, via, cwd) for variant, via in jobs]
    batch = runner.run_batch([(args, {"cwd": cwd, "env": env, "stdin": stdin}) for args, stdin in lines])
    for (args, _), run in zip(lines, batch):
        run.source = "-" if args[-1] == "-" else str(path)
    runs = dict(zip(jobs, batch))
    return CaseRuns(case, tmp, runs, before, sorted(p.name for p in path.parent.iterdir()), path.read_bytes() == case.data)


def selected_jobs(session: pytest.Session, name: str) -> list[tuple[str, str]]:
    """The (variant, via) pairs of this case that the session will run (all of them, unless -k chose)."""
    jobs = []
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item, "originalname", "") == "test_every_command_on_every_hostile_file" and params.get("name") == name:
            jobs.append((params["variant"], params["via"]))
    return jobs


def case_runs(name: str, runner: Runner, generated: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> CaseRuns:
    """Every selected run of one case, in parallel, the first time one of its tests asks."""
    with _LOCK:
        lock = _CASE_LOCKS.setdefault(name, threading.Lock())
    with lock:
        if name not in _CACHE:
            _CACHE[name] = run_case(runner, case_by_name(name, generated), tmp_path_factory.mktemp(f"case-{name[:40]}"), selected_jobs(request.session, name))
        return _CACHE[name]


def _matrix() -> list[tuple[str, str, str]]:
    fixtures = {case.name: case for case in fixture_cases()}
    return [(name, variant, via) for name in CASE_NAMES for variant in VARIANTS for via in vias(name, fixtures.get(name))]


@pytest.mark.parametrize("name, variant, via", _matrix(), ids=["-".join(job) for job in _matrix()])
def test_every_command_on_every_hostile_file(
    name: str, variant: str, via: str, runner: Runner, generated_dir: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    runs = case_runs(name, runner, generated_dir, request, tmp_path_factory)
    run = runs.runs[(variant, via)]
    problems = check_run(variant, runs.case, run, via=via, roots=allowed_roots(runs.tmp))
    if not runs.unchanged:
        problems.append("the original file changed")
    if runs.input_dir_after != runs.input_dir_before:
        problems.append(f"files appeared beside the input: {sorted(set(runs.input_dir_after) - set(runs.input_dir_before))}")
    assert not problems, f"{' '.join(run.argv)} [{via}] exit {run.returncode}:\n  " + "\n  ".join(problems)


# --- security: files the transcript names, outside any root the user chose -------------------------


def passwd_lines() -> list[str]:
    try:
        text = Path("/etc/passwd").read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if len(line) >= 12]


@pytest.mark.parametrize(
    "argv",
    [
        ["restore", "--now", NOW],
        ["restore", "--source", "disk", "--now", NOW],
        ["restore", "--plan"],
        ["compact", "--force", "--keep-last", "2", "--now", NOW],
        ["compact", "--force", "--source", "disk", "--keep-last", "2", "--now", NOW],
    ],
    ids=["restore", "restore-source-disk", "restore-plan", "compact", "compact-source-disk"],
)
def test_a_transcript_cwd_of_etc_does_not_read_etc_passwd(argv: list[str], runner: Runner, tmp_path: Path) -> None:
    case = Case("cwd-etc-read-passwd", ADVERSARIAL / "cwd-etc-read-passwd.jsonl")
    path, cwd, env, _ = prepare(case, tmp_path)
    run = runner.run([*argv, path], cwd=cwd, env=env)
    run.source = str(path)
    shown = run.stdout.decode("utf-8", "replace") + run.err
    leaked = [line for line in passwd_lines() if line in shown]
    assert not leaked, f"/etc/passwd content in the output: {leaked[:3]}"
    opened = {os.path.realpath(record["path"]) for record in run.opens}
    assert not opened & {"/etc/passwd", "/etc/shadow", "/etc/hostname"}, sorted(opened & {"/etc/passwd", "/etc/shadow", "/etc/hostname"})
    problems = check_run(argv[0], case, run, via="path", roots=allowed_roots(tmp_path), written=b"" if "--plan" in argv else None)
    assert not problems, problems
    if run.returncode == 0 and "--plan" not in argv:
        # What was not read is said on stderr.
        assert "passwd" in run.err or "root" in run.err.lower(), f"nothing on stderr says /etc/passwd was skipped: {run.err!r}"


def test_the_audit_sees_a_read_outside_the_root(runner: Runner, tmp_path: Path) -> None:
    # The reads-outside-the-root checks are only as good as the open log: a read the user allowed
    # (--root / --allow-outside-root) must show up in it.
    path = tmp_path / "in" / "session.jsonl"
    path.parent.mkdir()
    path.write_bytes((ADVERSARIAL / "cwd-etc-read-passwd.jsonl").read_bytes())
    run = runner.run(["restore", "--root", "/", "--allow-outside-root", "--source", "disk", "--now", NOW, path], cwd=tmp_path, env=base_env(tmp_path))
    assert run.returncode == 0, run.err
    assert "open /etc/passwd" in outside_reads(run, allowed_roots(tmp_path))


@pytest.mark.parametrize("command", ["restore", "compact"])
def test_a_link_under_the_root_to_etc_passwd_is_not_followed_out(command: str, runner: Runner, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "notes.py").symlink_to("/etc/passwd")
    (project / "src" / "ok.py").write_text("PORT = 8000\n")
    text = (ADVERSARIAL / "baseline.jsonl").read_text().replace("/home/dev/proj", str(project)).replace(f"{project}/src/parser.py", f"{project}/src/notes.py")
    path = tmp_path / "session.jsonl"
    path.write_text(text)
    env = base_env(tmp_path)
    argv = (
        ["restore", "--root", project, "--source", "disk", "--now", NOW]
        if command == "restore"
        else ["compact", "--force", "--keep-last", "1", "--root", project, "--source", "disk", "--now", NOW]
    )
    run = runner.run([*argv, path], cwd=project, env=env)
    assert not EXCEPTION.search(run.err), run.err
    shown = run.stdout.decode("utf-8", "replace") + run.err
    assert not [line for line in passwd_lines() if line in shown], "a link under --root read /etc/passwd"
    assert "/etc/passwd" not in {os.path.realpath(record["path"]) for record in run.opens}


@pytest.mark.parametrize(
    "argv",
    [
        ["summarize", "--now", NOW],
        ["summarize", "--engine", "session-memory", "--now", NOW],
        ["compact", "--force", "--now", NOW],
        ["compact", "--force", "--engine", "session-memory", "--now", NOW],
    ],
    ids=["summarize-auto", "summarize-session-memory", "compact-auto", "compact-session-memory"],
)
@pytest.mark.parametrize("name", ["session-id-traversal", "session-id-absolute"])
def test_the_session_id_does_not_choose_the_notes_file(name: str, argv: list[str], runner: Runner, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    outside = tmp_path / "outside-notes" / "session-memory"
    outside.mkdir(parents=True)
    secret = "SECRET-NOTES-4f1c9: these notes belong to another session"
    (outside / "summary.md").write_text(f"# Session notes\n\n{secret}\n")
    data = (ADVERSARIAL / f"{name}.jsonl").read_bytes().replace(b"/nonexistent-ctxpipe-test/outside-notes", str(tmp_path / "outside-notes").encode())
    path = folder / "session.jsonl"
    path.write_bytes(data)
    run = runner.run([*argv, path], cwd=tmp_path, env=base_env(tmp_path))
    assert not EXCEPTION.search(run.err), run.err
    assert run.returncode in (0, 1), run.err
    assert secret.encode() not in run.stdout, "another folder's session notes became the summary"
    opened = {os.path.realpath(record["path"]) for record in run.opens}
    assert str(outside / "summary.md") not in opened, "the notes outside the transcript's folder were opened"


# --- batches: one hostile file among good ones -----------------------------------------------------

GOOD = ["basic", "parallel", "restore"]
BATCH_CASES = [name for name in CASE_NAMES if name != "baseline" and not name.startswith("generated-huge")]


def batch_folder(tmp: Path, case: Case) -> tuple[Path, list[Path], Path]:
    folder = tmp / "sessions"
    folder.mkdir(parents=True)
    goods = []
    for name in GOOD:
        target = folder / f"{name}.jsonl"
        shutil.copy(FIXTURES / "claude-code" / f"{name}.jsonl", target)
        goods.append(target)
    hostile = folder / f"zz-{case.name}.jsonl"
    hostile.write_bytes(case.data)
    return folder, goods, hostile


@pytest.mark.parametrize("name", BATCH_CASES)
def test_a_hostile_file_in_a_batch_is_one_error_line_and_the_others_are_processed(name: str, runner: Runner, generated_dir: Path, tmp_path: Path) -> None:
    case = case_by_name(name, generated_dir)
    folder, goods, hostile = batch_folder(tmp_path, case)
    env = base_env(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    commands = {
        "count": ["count", folder],
        "validate": ["validate", *goods, hostile],
        "compact": ["compact", "--force", "--keep-last", "2", "--now", NOW, "--out-dir", tmp_path / "out", folder],
        "report": ["report", "--json", "--now", NOW, folder],
        "report-pages": ["report", "--now", NOW, "--out-dir", tmp_path / "pages", folder],
    }
    runs = dict(zip(commands, runner.run_batch([(argv, {"cwd": cwd, "env": env}) for argv in commands.values()])))
    problems = []
    for label, run in runs.items():
        if run.timed_out:
            problems.append(f"{label}: no result within {TIMEOUT:.0f} s")
            continue
        if EXCEPTION.search(run.err):
            problems.append(f"{label}: traceback: {run.err[-1200:]!r}")
        if run.returncode not in (0, 1):
            problems.append(f"{label}: exit {run.returncode}")
        errors = error_lines(run)
        if len(errors) > 1 or any(str(hostile) not in e for e in errors):
            problems.append(f"{label}: error lines are not one line naming the hostile file: {errors!r}")
        passed_through = label == "compact" and case.bad and max(case.bad) < last_boundary(case)  # before the active context
        if case.bad and label != "validate" and len(errors) != 1 and not passed_through:
            problems.append(f"{label}: the bad file is not reported: {run.err[-600:]!r}")
        got = reports(run)
        files = {r.get("file") for r in got or []}
        if label in ("count", "validate", "report") and not {str(g) for g in goods} <= files:
            problems.append(f"{label}: good files without a result: {sorted({str(g) for g in goods} - files)}")
        if label == "compact":
            missing = [g.name for g in goods if not (tmp_path / "out" / g.name).is_file()]
            if missing:
                problems.append(f"compact: good files not written: {missing}")
        if label == "report-pages":
            # A page per good file, and the index (which lists the hostile file too, with its error).
            missing = [g.name for g in goods if not (tmp_path / "pages" / g.name).with_suffix(".html").is_file()]
            if missing or not (tmp_path / "pages" / "index.html").is_file():
                problems.append(f"report --out-dir: pages not written: {missing or ['index.html']}")
        if chars := control_characters(run.stderr):
            problems.append(f"{label}: raw control characters on stderr: {chars}")
    assert hostile.read_bytes() == case.data
    assert not problems, "\n".join(problems)


def test_a_fifo_in_a_folder_is_skipped_not_waited_on(runner: Runner, tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copy(FIXTURES / "claude-code" / "basic.jsonl", folder / "basic.jsonl")
    os.mkfifo(folder / "pipe.jsonl")
    env = base_env(tmp_path)
    for argv in (["count", folder], ["compact", "--force", "--now", NOW, "--out-dir", tmp_path / "out", folder], ["report", "--json", "--now", NOW, folder]):
        run = runner.run(argv, cwd=tmp_path, env=env, timeout=30)
        assert not run.timed_out, f"{argv[0]} waited on a FIFO in the folder"
        assert not EXCEPTION.search(run.err), run.err
        assert "pipe.jsonl" in run.err, f"{argv[0]} does not say it skipped the FIFO: {run.err!r}"
        if argv[0] in ("count", "report"):
            assert str(folder / "basic.jsonl") in {r.get("file") for r in reports(run) or []}
        else:
            assert (tmp_path / "out" / "basic.jsonl").is_file()


# --- non-regular inputs: pipes are streams, not empty files ----------------------------------------


# statusline's stdin is Claude Code's JSON, never a transcript: a transcript_path that is not a
# regular file (/dev/stdin, a FIFO, a device) is not read, which would block or never end.
NAMES_ITS_TRANSCRIPT = {variant for variant in VARIANTS if COMMAND_OF[variant] in STATUS_LINES}


@pytest.mark.parametrize("variant", sorted(NAMES_ITS_TRANSCRIPT))
def test_statusline_does_not_read_a_transcript_path_that_is_no_file(variant: str, runner: Runner, tmp_path: Path) -> None:
    case = Case("baseline", ADVERSARIAL / "baseline.jsonl")
    _, cwd, env, _ = prepare(case, tmp_path)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)  # nobody writes it: a read would wait for ever
    for named in ("/dev/stdin", fifo, "/dev/zero", tmp_path):
        run = runner.run(VARIANTS[variant], cwd=cwd, env=env, stdin=status_json(tmp_path, named), timeout=30)
        assert not run.timed_out, f"statusline waited on {named}"
        assert run.returncode == 0 and run.stdout == b"\xe2\x9b\x81 transcript unreadable\n", (named, run.returncode, run.stdout, run.err)
        assert not check_status_line(run), check_status_line(run)


@pytest.mark.parametrize("variant", [variant for variant in VARIANTS if variant not in NAMES_ITS_TRANSCRIPT])
def test_dev_stdin_on_a_pipe_reads_like_the_file(variant: str, runner: Runner, tmp_path: Path) -> None:
    case = Case("baseline", ADVERSARIAL / "baseline.jsonl")
    path, cwd, env, ledger = prepare(case, tmp_path)
    argv = fill(VARIANTS[variant], tmp_path, ledger)
    by_path = runner.run([*argv, path], cwd=cwd, env=env)
    by_pipe = runner.run([*argv, "/dev/stdin"], cwd=cwd, env=env, stdin=path)
    assert not EXCEPTION.search(by_pipe.err), by_pipe.err
    assert by_pipe.returncode == by_path.returncode, (by_pipe.err, by_path.err)
    assert by_path.stdout, "nothing to compare"
    # The source's name differs, and with it the uuids derived from it and the tokens of a summary
    # that quotes it.
    derived = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<=[tT]okens\":)\d+")
    expected = derived.sub(b"#", by_path.stdout.replace(str(path).encode(), b"/dev/stdin"))
    assert derived.sub(b"#", by_pipe.stdout) == expected, "/dev/stdin on a pipe read differently from the file"


# --- the original is always recoverable -------------------------------------------------------------


@pytest.mark.parametrize("name", [name for name in CASE_NAMES if not name.startswith("generated-huge")])
def test_in_place_with_backup_keeps_the_original(name: str, runner: Runner, generated_dir: Path, tmp_path: Path) -> None:
    case = case_by_name(name, generated_dir)
    folder = tmp_path / "sessions"
    folder.mkdir()
    path = folder / "s.jsonl"
    path.write_bytes(case.data)
    env = base_env(tmp_path)
    argv = ["compact", "--in-place", "--backup", ".bak", "--force", "--keep-last", "2", "--now", NOW, path]
    first = runner.run(argv, cwd=tmp_path, env=env)
    first.source = str(path)
    problems = check_run("compact", case, first, via="path", roots=allowed_roots(tmp_path), written=path.read_bytes())
    backup = folder / "s.jsonl.bak"
    if first.returncode == 0:
        if path.read_bytes() != case.data and not (backup.is_file() and backup.read_bytes() == case.data):
            problems.append("in place with --backup: the original is neither unchanged nor in the backup")
    else:
        if path.read_bytes() != case.data:
            problems.append(f"a failed in-place run (exit {first.returncode}) changed the file")
        if backup.exists() and backup.read_bytes() != case.data:
            problems.append("a failed in-place run left a backup that is not the original")
    leftovers = sorted(p.name for p in folder.iterdir() if p.name not in ("s.jsonl", "s.jsonl.bak"))
    if first.returncode == 0:
        # A second run with the same backup suffix must not replace the original's backup with the first output.
        second = runner.run(argv, cwd=tmp_path, env=env)
        if EXCEPTION.search(second.err):
            problems.append(f"second run: traceback: {second.err[-1000:]!r}")
        if path.read_bytes() != case.data and not any(p.read_bytes() == case.data for p in folder.iterdir() if p.is_file()):
            problems.append("after a second --in-place --backup run the original is nowhere in the folder")
        leftovers = sorted(p.name for p in folder.iterdir() if p.name != "s.jsonl" and not p.name.startswith("s.jsonl.bak"))
    if leftovers:
        problems.append(f"files left beside the transcript: {leftovers}")
    assert not problems, "\n".join(problems)


LEDGER_CHAIN = [
    ["microcompact", "--force", "--keep-recent", "1", "--now", NOW],
    ["collapse", "--now", NOW],
    ["snip", "--keep-last", "4", "--now", NOW],
    ["summarize", "--keep-last", "2", "--now", NOW],
    ["restore", "--now", NOW],
]


@pytest.mark.parametrize("name", [name for name in CASE_NAMES if not name.startswith("generated-huge")])
def test_expand_rebuilds_the_original_from_the_ledger_of_a_chain(name: str, runner: Runner, generated_dir: Path, tmp_path: Path) -> None:
    case = case_by_name(name, generated_dir)
    path, cwd, env, _ = prepare(case, tmp_path)
    ledger = tmp_path / "undo.jsonl"
    current = path
    problems = []
    stages_run = 0
    # The whole chain in one batch, each stage on the output of the one before (one that failed
    # wrote none: the stages after it fail too, and are not looked at).
    outs = [tmp_path / f"step-{n}.jsonl" for n in range(len(LEDGER_CHAIN))]
    chain = [([*stage, "--ledger", ledger, "-o", out, given], {"cwd": cwd, "env": env}) for stage, out, given in zip(LEDGER_CHAIN, outs, [path, *outs])]
    back = tmp_path / "back.jsonl"
    expand = ["expand", "--ledger", ledger, "-o", back]
    # The expand of the whole chain's output in the same batch: looked at only when every stage ran
    # (else it found no input and wrote nothing, and expand runs on what the chain got to).
    runs = runner.run_batch([*chain, ([*expand, outs[-1]], {"cwd": cwd, "env": env})], in_turn=True)
    for stage, out, run in zip(LEDGER_CHAIN, outs, runs):
        if run.timed_out or EXCEPTION.search(run.err) or run.returncode not in (0, 1):
            problems.append(f"{stage[0]}: exit {run.returncode}, {run.err[-800:]!r}")
            break
        if run.returncode == 1:
            if out.exists():
                problems.append(f"{stage[0]} failed but wrote {out.name}")
            break
        stages_run += 1
        if not ledger.exists():
            problems.append(f"{stage[0]} ran with --ledger but wrote no ledger (an empty ledger is a valid ledger)")
            break
        current = out
    if stages_run and ledger.exists():
        run = runs[-1] if stages_run == len(LEDGER_CHAIN) else runner.run([*expand, current], cwd=cwd, env=env)
        if run.returncode != 0 or EXCEPTION.search(run.err):
            problems.append(f"expand: exit {run.returncode}: {run.err[-800:]!r}")
        elif back.read_bytes() != case.data:
            problems.append(f"expand after {stages_run} stage(s) did not rebuild the original byte for byte")
    if path.read_bytes() != case.data:
        problems.append("the original changed")
    assert not problems, "\n".join(problems)


# --- on a terminal ------------------------------------------------------------------------------------

# Cases whose text reaches a terminal (with colours too), and a few more (plain terminal only).
ESCAPE_CASES = [
    "escapes-model",
    "escapes-tools-paths-ids",
    "escapes-text",
    "bidi-c1-model",
    "rich-markup",
    "rich-markup-link-model",
    "raw-c1-bidi-in-string",
    "raw-esc-in-string",
    "anthropic-odd",
]
TERMINAL_CASES = [
    *ESCAPE_CASES,
    "baseline",
    "model-odd",
    "tool-name-long",
    "session-id-nul",
    "cwd-odd",
    "unknown-types",
    "usage-1e308",
    "timestamp-garbage",
    "invalid-utf8",
    "read-path-nul",
]
TERMINAL_ARGV = [(command, argv) for command, variants in ON_A_TERMINAL.items() for argv in variants]
TERMS = {"dumb": {"TERM": "dumb", "NO_COLOR": "1"}, "xterm": {"TERM": "xterm-256color", "COLORTERM": "truecolor"}}
# With colours on, rich writes its own CSI sequences; what must never appear is what only the
# transcript can bring: OSC (titles, hyperlinks), a screen clear, BEL, C1 and bidi controls.
SGR = re.compile("\x1b\\[[0-9;]*m")  # colours (statusline's line is coloured with TERM=xterm)
INJECTED = re.compile("\x1b\\]|\x1b\\[2J|\x07|[\x80-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff]|[\x00-\x06\x08\x0e-\x1a\x1c-\x1f\x7f]")


def run_on_terminals(runner: Runner, jobs: Sequence[tuple[Sequence[Any], Path | None]], *, cwd: Path, env: dict[str, str]) -> list[Run]:
    """Each run (argv, stdin) with stdout and stderr on a terminal of its own (a pty, raw: what the
    program wrote, byte for byte); a run's stdout and stderr are what its terminal showed."""
    terminals = [pty.openpty() for _ in jobs]
    shown = [bytearray() for _ in jobs]

    def read(master: int, into: bytearray) -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            into.extend(chunk)

    readers = []
    for (master, slave), into in zip(terminals, shown):
        tty.setraw(slave)  # no \n -> \r\n translation
        readers.append(threading.Thread(target=read, args=(master, into), daemon=True))
        readers[-1].start()
    try:
        runs = runner.run_batch(
            [(argv, {"cwd": cwd, "env": env, "stdin": stdin, "terminal": os.ttyname(slave)}) for (argv, stdin), (_, slave) in zip(jobs, terminals)]
        )
    finally:
        for (master, slave), reader in zip(terminals, readers):
            os.close(slave)
            reader.join(timeout=10)
            os.close(master)
    for run, into in zip(runs, shown):
        run.stdout = run.stderr = bytes(into)
    return runs


@pytest.mark.parametrize("name, term", [(name, term) for name in TERMINAL_CASES for term in TERMS if term == "dumb" or name in ESCAPE_CASES])
def test_no_raw_control_character_reaches_a_terminal(name: str, term: str, runner: Runner, tmp_path: Path) -> None:
    case = Case(name, ADVERSARIAL / f"{name}.jsonl")
    path, cwd, env, ledger = prepare(case, tmp_path)
    env = {**{k: v for k, v in env.items() if k != "NO_COLOR"}, **TERMS[term]}
    jobs = [(command, command_line(fill(argv, tmp_path, ledger, n), path, tmp_path)) for n, (command, argv) in enumerate(TERMINAL_ARGV)]
    runs = zip([command for command, _ in jobs], run_on_terminals(runner, [line for _, line in jobs], cwd=cwd, env=env))
    problems = []
    for command, run in runs:
        label = " ".join(run.argv[:-1] if command not in STATUS_LINES else run.argv)
        text = run.stdout.decode("utf-8", "surrogateescape")
        if run.timed_out:
            problems.append(f"{label}: no result within {TIMEOUT:.0f} s")
        if EXCEPTION.search(text):
            problems.append(f"{label}: traceback on the terminal: {text[-800:]!r}")
        if run.returncode not in EXIT_CODES.get(command, {0, 1}):
            problems.append(f"{label}: exit {run.returncode}")
        if command in REPORTS and not text.strip():
            problems.append(f"{label}: nothing on the terminal")
        if command in STATUS_LINES and not STATUS_LINE.fullmatch(SGR.sub("", text)):
            problems.append(f"{label}: not one status line on the terminal: {text[:300]!r}")
        found = CONTROL.findall(text) if term == "dumb" else INJECTED.findall(text)
        if found:
            problems.append(f"{label}: raw control characters on the terminal: {sorted({repr(c) for c in found})}")
    assert path.read_bytes() == case.data
    assert not problems, "\n".join(problems)


# --- statusline's saving: its background refresh, run in the foreground ----------------------------------

SAVINGS_CASES = [name for name in CASE_NAMES if not name.startswith("generated-huge")]
REFRESH = "ctxpipe.jobs.statusline"  # the module statusline starts detached, with refresh_argv


def refresh_argv(path: Path, cache: Path) -> list[str]:
    return ["--refresh", os.path.abspath(path), str(cache)]


@pytest.mark.parametrize("name", SAVINGS_CASES)
def test_statusline_savings_on_every_hostile_file(name: str, runner: Runner, generated_dir: Path, tmp_path: Path) -> None:
    # What `statusline` starts detached (`python -m ctxpipe.jobs.statusline --refresh PATH DIR`), run
    # here as a real process (forked by the zygote: test_the_zygote_runs_are_python_dash_m holds it to
    # a real start-up) and waited for; then statusline with its saving on reads the cache it left.
    case = case_by_name(name, generated_dir)
    path, cwd, env, _ = prepare(case, tmp_path)
    env = {**env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cache = tmp_path / "cache" / "ctxpipe" / "statusline"
    cache.mkdir(parents=True)
    refresh = runner.run(refresh_argv(path, cache), module=REFRESH, cwd=cwd, env=env, timeout=300, audit=False)
    assert not refresh.timed_out, "the refresh gave no result within 300 s"
    assert (refresh.returncode, refresh.stdout, refresh.stderr) == (0, b"", b""), refresh.stderr[-1500:]
    [entry_file] = cache.glob("*.json")  # the lock is gone, the entry is there
    entry = json.loads(entry_file.read_text())
    assert entry["path"] == str(path) and entry["stamp"][0] == len(case.data)
    # A stage skips bad lines (as statusline counts): the only failure it may record is the input's
    # (a file no format fits), named as the stage would name it; anything else is a bug.
    if "error" in entry:
        assert entry["error"].startswith(f"InputError: {path}:"), entry["error"]
        entry["savings"] = {}
    else:
        assert set(entry["savings"]) == {"microcompact", "collapse"} and not bad_token_figures(entry["savings"]), entry
    argv, stdin = command_line(["statusline"], path, tmp_path)
    run = runner.run(argv, cwd=cwd, env=env, stdin=stdin)
    problems = check_status_line(run)
    if run.returncode != 0:
        problems.append(f"exit {run.returncode}")
    best = max(entry["savings"].items(), key=lambda item: item[1], default=("", 0))
    named = " · ".join(run.stdout.decode("utf-8", "replace").split(" · ")[1:])
    if best[1] >= 1_000 and f"{best[0]} −" not in named:
        problems.append(f"the cached saving {best} is not on the line: {run.stdout!r}")
    if sorted(p.name for p in cache.iterdir() if p.suffix != ".line") != [entry_file.name]:  # .line: the line's memo
        problems.append(f"statusline started another refresh of a fresh entry: {sorted(p.name for p in cache.iterdir())}")
    again = runner.run(argv, cwd=cwd, env=env, stdin=stdin)  # the memo answers it (the file is as it was): the same line
    if (again.returncode, again.stdout, again.stderr) != (run.returncode, run.stdout, run.stderr):
        problems.append(f"a second run printed {again.stdout!r}, not {run.stdout!r}")
    assert path.read_bytes() == case.data
    assert not problems, "\n".join(problems)


# --- the zygote is python -m ctxpipe ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["baseline", "truncated-last-line", "escapes-text"])
def test_the_zygote_runs_are_python_dash_m(name: str, runner: Runner, tmp_path: Path) -> None:
    case = Case(name, ADVERSARIAL / f"{name}.jsonl")
    path, cwd, env, ledger = prepare(case, tmp_path)

    # As the matrix runs them (every variant, by path and on a stdin pipe, in batches), against
    # real `python -m ctxpipe` processes given the same stdin on a pipe.
    jobs = [(variant, via) for variant in VARIANTS for via in VIA]
    lines = [command_line(fill(VARIANTS[variant], tmp_path, ledger), path, tmp_path, via, cwd) for variant, via in jobs]
    forked = runner.run_batch([(argv, {"cwd": cwd, "env": env, "stdin": stdin}) for argv, stdin in lines])

    def real(line: tuple[list[Any], Path | None]) -> subprocess.CompletedProcess[bytes]:
        argv, stdin = line
        command = [sys.executable, "-m", "ctxpipe", *map(str, argv)]
        if stdin is None:  # as the zygote's runs: /dev/null
            return subprocess.run(command, capture_output=True, cwd=cwd, env=env, timeout=300, stdin=subprocess.DEVNULL)
        return subprocess.run(command, capture_output=True, cwd=cwd, env=env, timeout=300, input=stdin.read_bytes())

    with ThreadPoolExecutor(2) as pool:
        reals = list(pool.map(real, lines))
    for job, run, expected in zip(jobs, forked, reals):
        assert (run.returncode, run.stdout, run.stderr) == (expected.returncode, expected.stdout, expected.stderr), job
    # statusline's background refresh (test_statusline_savings_on_every_hostile_file forks it too):
    # the same result, and the same cache entry, as `python -m ctxpipe.jobs.statusline`.
    entries = []
    for how in ("forked", "real"):
        cache = tmp_path / f"cache-{how}"
        cache.mkdir()
        if how == "forked":
            run = runner.run(refresh_argv(path, cache), module=REFRESH, cwd=cwd, env=env, timeout=300, audit=False)
            result = (run.returncode, run.stdout, run.stderr)
        else:
            real = subprocess.run(
                [sys.executable, "-m", REFRESH, *refresh_argv(path, cache)], capture_output=True, cwd=cwd, env=env, timeout=300, stdin=subprocess.DEVNULL
            )
            result = (real.returncode, real.stdout, real.stderr)
        assert result == (0, b"", b""), (how, result)
        # Each entry as written, but for the moment its stamp was taken (each run's own).
        entries.append(
            sorted((p.name, {**json.loads(p.read_bytes()), "taken": int}) for p in cache.iterdir() if type(json.loads(p.read_bytes())["taken"]) is int)
        )
    assert entries[0] == entries[1] != [], "the forked refresh left another cache entry than python -m"
