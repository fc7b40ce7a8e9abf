"""Text from a transcript never acts on the terminal.

A transcript is untrusted: its model, tool names, tool inputs (file paths), ids, cwd and
timestamps, and the names of the files found in a folder, can hold escape sequences (a window
title, a screen clear, an OSC 8 hyperlink), BEL, CR, C1 controls, bidi overrides, line separators,
lone surrogates, rich markup (`[/]`, `[link=…]`, `[bold red]`) and emoji codes (`:smile:`).

Every command that prints text about a transcript is run here on such a session: on a terminal
(stdout is a pseudo-terminal, colours on) and into a pipe (JSON). Wherever it reaches stdout or
stderr, the text must be shown as visible escapes (ESC as the four characters `\\x1b`) and as
literal text (markup not interpreted), never as the raw characters; the only escape sequences
allowed are ctxpipe's own colours (SGR). JSON keeps the true values.

The list of commands comes from the app's registry: a new command fails
test_every_command_is_run_here until it has a case below.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from builders import Session, usage
from ctxpipe.cli.terminal import UNSAFE_CLASS, UNSAFE_IN_JSON_CLASS, json_shown, json_shown_bytes, shown
from helpers import ROOT, registered_commands, run_cli
from hypothesis import given
from hypothesis import strategies as st

pty = pytest.importorskip("pty")
termios = pytest.importorskip("termios")

# --- hostile text ---------------------------------------------------------------------------------

# Each place of the transcript gets its own tag, so a test can tell which one reached the output.
# No "/" (it also names files) and no space (a table could wrap there).
TEMPLATE = (
    "{t}\x1b]0;pwned-{t}\x07\x1b[2J\r\x9b31m\x85\x7f\u202e{t}\u2066\u200f\u2028\t\n[/][link=mailto:pwned@example.com]{t}[/link][bold]{t}[/bold]:smile:{s}"
)
# What the terminal must show instead: written out by hand, not computed by the code under test.
ESCAPED = (
    r"{t}\x1b]0;pwned-{t}\x07\x1b[2J\r\x9b31m\x85\x7f\u202e{t}\u2066\u200f\u2028\t\n"
    r"[/][link=mailto:pwned@example.com]{t}[/link][bold]{t}[/bold]:smile:{s}"
)


def hostile(tag: str, surrogate: bool = True) -> str:
    """The hostile text for one place; a lone surrogate at the end where JSON can carry one (not in file names or argv)."""
    return TEMPLATE.format(t=tag, s="\ud800" if surrogate else "")


def escaped(tag: str, surrogate: bool = True) -> str:
    return ESCAPED.format(t=tag, s=r"\ud800" if surrogate else "")


def hostile_name(tag: str) -> str:
    """Hostile text that can name a file: no "/", no surrogate (markup without closing tags)."""
    return hostile(tag, surrogate=False).replace("/", "")


def escaped_name(tag: str) -> str:
    return escaped(tag, surrogate=False).replace("/", "")


# A lone surrogate only where no stage writes it into a new line (its own bug, not this file's).
MODEL = "claude-sonnet-4-5" + hostile("MODEL")
TOOL = hostile("TOOL", surrogate=False)  # also given on the command line (microcompact --tools)
MCP_TOOL = "mcp__" + hostile("MCP", surrogate=False)
PATH = "/home/dev/app/" + hostile("PATH", surrogate=False)
CWD = "/home/dev/" + hostile("CWD", surrogate=False)
TOOL_ID = "toolu_" + hostile("ID")
FILE_NAME = hostile_name("FILE") + ".jsonl"
ASK = hostile("ASK", surrogate=False)

# Anything a terminal would act on, left raw: C0 controls but newline, DEL, C1, bidi controls,
# line/paragraph separators, and (from undecodable bytes) surrogates.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
SGR = re.compile("\x1b\\[[0-9;]*m")  # ctxpipe's own colours: the only escapes allowed


def session_bytes(timestamp: str | None = None) -> bytes:
    """A Claude Code session with hostile text in every place that is printed somewhere.

    Before the compact boundary: a Read of PATH (for restore). After it, in the active context: the
    hostile tool called twice alike (for collapse and microcompact), an MCP tool (api-edits excludes
    it), a tool use whose id has no result (convert and validate warn), all under MODEL and CWD;
    `timestamp` replaces the first response's (count --timeline prints it).
    """
    session = Session(model=MODEL)
    session.user("Please read the file " + ASK)  # the compaction loses it: audit lists it
    read = session.tool_id()
    session.response([{"type": "tool_use", "id": read, "name": "Read", "input": {"file_path": PATH}}], usage(3_000))
    session.tool_result(read, "print('hello')\n" * 40)
    session.text("Read it.", usage(3_500))
    session.compact()
    session.user("Carry on.")
    for number in range(2):
        call = session.tool_id()
        session.response([{"type": "tool_use", "id": call, "name": TOOL, "input": {"q": "same"}}], usage(4_000 + 500 * number))
        session.tool_result(call, "the same result " * 60)
    mcp = session.tool_id()
    session.response([{"type": "tool_use", "id": mcp, "name": MCP_TOOL, "input": {"q": "x"}}], usage(5_500))
    session.tool_result(mcp, "found " * 50)
    session.text("Done.", usage(6_000))
    session.response([{"type": "tool_use", "id": TOOL_ID, "name": "Bash", "input": {"command": "ls"}}], usage(6_500))
    for line in session.lines:
        line["cwd"] = CWD
    if timestamp is not None:
        next(line for line in session.lines if line["type"] == "assistant")["timestamp"] = timestamp
    # ensure_ascii: every non-ASCII character as a \u escape, the lone surrogates included (legal JSON).
    return b"".join(json.dumps(line, ensure_ascii=True).encode() + b"\n" for line in session.lines)


@dataclass
class Files:
    projects: Path  # two project folders: the session, and a copy beside a file with a bad line
    session: Path  # the hostile session, under a hostile name
    bad: Path  # the file with a bad line (a hostile name too)
    timed: Path  # the session with a hostile timestamp
    ledger: Path  # a ledger written for another transcript


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    base = tmp_path_factory.mktemp("hostile-text")
    projects = base / "projects"
    session = projects / "app" / FILE_NAME
    session.parent.mkdir(parents=True)
    session.write_bytes(session_bytes())
    (projects / "other").mkdir()
    (projects / "other" / FILE_NAME).write_bytes(session.read_bytes())
    bad = projects / "other" / ("bad-" + FILE_NAME)
    bad.write_bytes(session.read_bytes() + b'{"type":"user", oops}\n')
    timed = base / "timed.jsonl"
    timed.write_bytes(session_bytes(timestamp=hostile("TIME")))
    # expand names both files in its error.
    ledger = base / ("ledger-" + FILE_NAME)
    other = base / "other.jsonl"
    other.write_bytes(_small_session())
    result = run_cli("microcompact", "--force", "--keep-recent", "1", "--ledger", ledger, other)
    assert result.returncode == 0 and ledger.exists(), result.stderr.decode()
    return Files(projects, session, bad, timed, ledger)


def _small_session() -> bytes:
    session = Session()
    session.user("Look.")
    for _ in range(3):
        call = session.tool_id()
        session.response([{"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": "/w/a.py"}}], usage(2_000))
        session.tool_result(call, "x = 1\n" * 100)
    session.text("Done.", usage(3_000))
    return session.to_bytes()


# --- running ctxpipe --------------------------------------------------------------------------------


@dataclass
class Run:
    returncode: int
    stdout: str  # decoded with surrogateescape: a byte that is not UTF-8 shows up as a surrogate
    stderr: str


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def on_terminal(args: list[Any], stdin_data: bytes | None = None) -> Run:
    """ctxpipe with stdout on a pseudo-terminal (so it prints tables, in colour) and stderr to a file;
    stdin is empty, or `stdin_data`."""
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST  # no newline translation: every CR read back is ctxpipe's own
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "1000", "ANTHROPIC_API_KEY": ""}
    for name in ("NO_COLOR", "CTXPIPE_DEBUG"):
        env.pop(name, None)
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stderr:
        stdin.write(stdin_data or b"")
        stdin.seek(0)
        proc = subprocess.Popen([sys.executable, "-m", "ctxpipe", *map(str, args)], stdin=stdin, stdout=slave, stderr=stderr, cwd=ROOT, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        returncode = proc.wait(timeout=120)
        os.close(master)
        stderr.seek(0)
        return Run(returncode, _decoded(b"".join(chunks)), _decoded(stderr.read()))


def in_a_pipe(args: list[Any], stdin_data: bytes | None = None) -> Run:
    result = run_cli(*args, stdin=stdin_data or b"", env={"ANTHROPIC_API_KEY": ""})
    return Run(result.returncode, _decoded(result.stdout), _decoded(result.stderr))


def assert_inert(text: str, where: str) -> None:
    """Nothing in `text` a terminal would act on, but ctxpipe's own colours."""
    rest = SGR.sub("", text)
    found = RAW.search(rest)
    assert found is None, f"raw {found.group()!r} in {where} at {found.start()}: {rest[max(0, found.start() - 80) : found.start() + 40]!r}"


def strings(value: Any) -> list[str]:
    """Every string in a parsed JSON value (keys too)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in (key, *strings(item))]
    if isinstance(value, list):
        return [text for item in value for text in strings(item)]
    return []


# --- the cases: every command that prints text about a transcript ------------------------------------

OFFLINE = ("--engine", "offline", "--keep-last", "1", "--now", "2026-06-01T00:00:00Z")


@dataclass
class Case:
    id: str
    argv: Callable[[Files, Path], list[Any]]  # (the files, a fresh folder for outputs) -> argv
    exit: int = 0
    shows: Callable[[Files], list[str]] = lambda files: []  # escaped texts the terminal run must show
    data_on_stdout: bool = False  # stdout is a transcript (data, byte for byte), not text for a person
    json: Callable[[Files, list[Any]], None] | None = None  # when given, also run into a pipe: checks the JSON
    # stdin (statusline reads Claude Code's status JSON there, which names the transcript).
    stdin: Callable[[Files], bytes] | None = None
    text_in_a_pipe: bool = False  # stdout is text for a person in a pipe too (Claude Code shows statusline's)


def _count_json(files: Files, objects: list[Any]) -> None:
    [report] = objects
    assert report["model"] == MODEL  # the true value, lone surrogate and all
    assert report["file"] == str(files.session)


def _count_json_of_report(files: Files, objects: list[Any]) -> None:
    [report] = objects
    assert report["model"] == report["count"]["model"] == MODEL  # the true value, lone surrogate and all
    assert report["file"] == str(files.session)


def _file(files: Files) -> list[str]:
    return [escaped_name("FILE")]


def _status(transcript: Callable[[Files], Path], **fields: Any) -> Callable[[Files], bytes]:
    """Claude Code's status JSON for statusline's stdin: the transcript's path and `fields`."""
    return lambda files: json.dumps({"transcript_path": str(transcript(files)), **fields}).encode()


def _has(*values: str) -> Callable[[Files, list[Any]], None]:
    def check(files: Files, objects: list[Any]) -> None:
        found = strings(objects)
        for value in values:
            assert any(value in text for text in found), f"{value!r} is not a JSON value"

    return check


CASES = [
    Case("count", lambda f, out: ["count", f.session], shows=lambda f: [*_file(f), escaped("MODEL")], json=_count_json),
    Case(
        "count-by-tool",
        lambda f, out: ["count", "--by", "tool", f.session],
        shows=lambda f: [escaped("TOOL", False), escaped("MCP", False)],
        json=_has(TOOL, MCP_TOOL),
    ),
    Case("count-by-block", lambda f, out: ["count", "--by", "block", f.session], shows=_file),
    Case("count-top", lambda f, out: ["count", "--top", "20", f.session], shows=lambda f: [escaped("TOOL", False)], json=_has(TOOL)),
    Case("count-timeline", lambda f, out: ["count", "--timeline", f.session], shows=_file),
    # The chart shows the first 16 characters of the timestamp: of its escaped form.
    Case("count-timeline-timestamp", lambda f, out: ["count", "--timeline", f.timed], shows=lambda f: [r"TIME\x1b]0;pwned"]),
    Case("count-folders", lambda f, out: ["count", f.projects], exit=1, shows=lambda f: [*_file(f), "bad-" + escaped_name("FILE")], json=_has(FILE_NAME)),
    Case(
        "count-usage-error",
        lambda f, out: ["count", "--by", hostile("ARG", surrogate=False), f.session],
        exit=2,
        shows=lambda f: [escaped("ARG", surrogate=False)],
    ),
    Case("count-missing-file", lambda f, out: ["count", out / FILE_NAME], exit=1, shows=_file),
    Case("warn-explain", lambda f, out: ["warn", "--explain", f.session], shows=lambda f: [*_file(f), escaped("MODEL")], json=_has(MODEL)),
    Case(
        "warn-pass-through",
        lambda f, out: ["warn", "--pass-through", "--explain", f.session],
        data_on_stdout=True,
        shows=lambda f: [*_file(f), escaped("MODEL")],
    ),
    Case("validate", lambda f, out: ["validate", f.session], shows=lambda f: [*_file(f), escaped("ID")], json=_has(TOOL_ID)),
    Case("validate-bad-line", lambda f, out: ["validate", f.bad], exit=1, shows=lambda f: ["bad-" + escaped_name("FILE")]),
    Case(
        "api-edits-explain",
        lambda f, out: ["api-edits", "--explain", f.session],
        shows=lambda f: [*_file(f), escaped("MODEL"), escaped("MCP", False)],
        json=_has(MCP_TOOL),
    ),
    Case("restore-plan", lambda f, out: ["restore", "--plan", "--source", "transcript", f.session], shows=lambda f: [escaped("PATH", False)], json=_has(PATH)),
    Case("restore", lambda f, out: ["restore", "--source", "transcript", f.session], data_on_stdout=True),
    Case("convert", lambda f, out: ["convert", "--to", "anthropic", f.session], data_on_stdout=True, shows=lambda f: [*_file(f), escaped("ID")]),
    Case(
        "microcompact",
        lambda f, out: ["microcompact", "--force", "--keep-recent", "1", "--report", "--tools", f"{TOOL},mcp__{hostile('ARG', False)}", f.session],
        data_on_stdout=True,
        shows=lambda f: [escaped("TOOL", False), escaped("ARG", False)],
    ),
    Case(
        "collapse",
        lambda f, out: ["collapse", "--report", "--now", "2026-06-01T00:00:00Z", f.session],
        data_on_stdout=True,
        shows=lambda f: [escaped("TOOL", False)],
    ),
    Case("snip", lambda f, out: ["snip", "--keep-last", "1", "--report", "--now", "2026-06-01T00:00:00Z", f.session], data_on_stdout=True),
    Case("summarize", lambda f, out: ["summarize", *OFFLINE, f.session], data_on_stdout=True),
    Case("compact", lambda f, out: ["compact", *OFFLINE, "--force", "--source", "transcript", f.session], data_on_stdout=True, shows=_file),
    Case(
        "compact-folders",
        lambda f, out: ["compact", *OFFLINE, "--force", "--source", "transcript", "--out-dir", out, f.projects],
        exit=1,
        shows=lambda f: [*_file(f), "bad-" + escaped_name("FILE")],
        json=_has(FILE_NAME),
    ),
    Case("expand", lambda f, out: ["expand", "--ledger", f.ledger, f.session], exit=1, shows=lambda f: [*_file(f), "ledger-" + escaped_name("FILE")]),
    Case("report-json", lambda f, out: ["report", "--json", f.session], json=_count_json_of_report),
    Case("audit", lambda f, out: ["audit", f.session], shows=lambda f: [*_file(f), escaped("ASK", False)], json=_has(ASK, FILE_NAME)),
    Case("audit-folders", lambda f, out: ["audit", f.projects], exit=1, shows=lambda f: [*_file(f), "bad-" + escaped_name("FILE")], json=_has(FILE_NAME)),
    Case("hooks-dry-run", lambda f, out: ["hooks", "install", "--dry-run", "--settings", out / FILE_NAME], shows=_file),
    Case("report-page", lambda f, out: ["report", "-o", out / "page.html", f.session], shows=_file),  # the note names the page's source
    Case("report-page-on-a-terminal", lambda f, out: ["report", f.session], exit=2, shows=lambda f: ["-o FILE"]),  # HTML is no text for a terminal
    Case(
        "report-folders",
        lambda f, out: ["report", "--json", f.projects],
        exit=1,
        shows=lambda f: [*_file(f), "bad-" + escaped_name("FILE")],
        json=_has(FILE_NAME),
    ),
    Case("report-folders-pages", lambda f, out: ["report", "--out-dir", out, f.projects], exit=1, shows=lambda f: ["bad-" + escaped_name("FILE")]),
    # statusline's text comes from the transcript (its model) and from the status JSON (any field).
    Case("statusline", lambda f, out: ["statusline"], shows=lambda f: [escaped("MODEL")], stdin=_status(lambda f: f.session), text_in_a_pipe=True),
    Case(
        "statusline-status-json",
        lambda f, out: ["statusline", "--no-savings"],
        shows=lambda f: [escaped("STATUS")],
        stdin=_status(lambda f: f.bad, model={"id": hostile("ID"), "display_name": hostile("STATUS")}, context_window={"context_window_size": 200_000}),
        text_in_a_pipe=True,
    ),
    Case(
        "statusline-no-transcript",
        lambda f, out: ["statusline", "--no-savings"],
        shows=lambda f: [escaped("STATUS")],
        stdin=lambda f: json.dumps({"model": {"display_name": hostile("STATUS")}, "context_window": {"current_usage": {"input_tokens": 5}}}).encode(),
        text_in_a_pipe=True,
    ),
]


def test_every_command_is_run_here() -> None:
    registered = set(registered_commands())
    covered = {case.argv(Files(*(Path(name) for name in "psbtl")), Path("o"))[0] for case in CASES}
    assert registered == covered, f"commands without a case: {sorted(registered - covered)}"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_on_a_terminal(case: Case, files: Files, tmp_path: Path) -> None:
    run = on_terminal(case.argv(files, tmp_path), case.stdin(files) if case.stdin else None)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == case.exit, (run.returncode, run.stderr)
    assert_inert(run.stderr, "stderr")
    if case.data_on_stdout:  # the transcript, as JSON lines and nothing else
        assert all(json.loads(line) is not None for line in run.stdout.split("\n") if line)
    else:
        assert_inert(run.stdout, "stdout")
    visible = SGR.sub("", (run.stdout if not case.data_on_stdout else "") + run.stderr)
    for text in case.shows(files):
        assert text in visible, f"{text!r} is not shown in:\n{visible}"


@pytest.mark.parametrize("case", [case for case in CASES if case.json], ids=[case.id for case in CASES if case.json])
def test_in_a_pipe(case: Case, files: Files, tmp_path: Path) -> None:
    run = in_a_pipe(case.argv(files, tmp_path), case.stdin(files) if case.stdin else None)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == case.exit, (run.returncode, run.stderr)
    assert_inert(run.stderr, "stderr")
    assert_inert(run.stdout, "stdout")  # JSON: the raw characters as \\u escapes, the same values
    objects = [json.loads(line) for line in run.stdout.splitlines()]
    assert objects
    assert case.json is not None
    case.json(files, objects)


@pytest.mark.parametrize("case", [case for case in CASES if case.text_in_a_pipe], ids=[case.id for case in CASES if case.text_in_a_pipe])
def test_text_in_a_pipe(case: Case, files: Files, tmp_path: Path) -> None:
    # Claude Code runs statusline with stdout on a pipe and renders what it prints: escaped there too.
    run = in_a_pipe(case.argv(files, tmp_path), case.stdin(files) if case.stdin else None)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == case.exit, (run.returncode, run.stderr)
    assert_inert(run.stderr, "stderr")
    assert_inert(run.stdout, "stdout")
    for text in case.shows(files):
        assert text in SGR.sub("", run.stdout), f"{text!r} is not shown in:\n{run.stdout}"


# --- the escaping function itself -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "seen"),
    [
        ("\x1b", r"\x1b"),
        ("\x07", r"\x07"),
        ("\x00", r"\x00"),
        ("\r", r"\r"),
        ("\n", r"\n"),
        ("\t", r"\t"),
        ("\x7f", r"\x7f"),
        ("\x9b", r"\x9b"),
        ("\x85", r"\x85"),
        ("\u202e", r"\u202e"),
        ("\u2066", r"\u2066"),
        ("\u200f", r"\u200f"),
        ("\u061c", r"\u061c"),
        ("\u2028", r"\u2028"),
        ("\u2029", r"\u2029"),
        ("\udc80", r"\udc80"),
    ],
)
def test_each_unsafe_character_is_shown_as_its_escape(raw: str, seen: str) -> None:
    assert shown(f"a{raw}b") == f"a{seen}b"


def test_ordinary_text_is_shown_as_it_is() -> None:
    # Accents, CJK, an emoji joined with ZWJ (U+200D is no control), backslashes and markup-like text.
    text = r"café 東京 👩‍💻 C:\x1b [bold]x[/] :smile: é"
    assert shown(text) == text


# Every code point, lone surrogates included (a transcript can hold them as JSON escapes).
ANY_TEXT = st.text(st.characters(exclude_categories=()))


@given(ANY_TEXT)
def test_shown_text_is_one_inert_line(text: str) -> None:
    assert RAW.search(shown(text)) is None and "\n" not in shown(text)


@given(st.recursive(ANY_TEXT | st.integers(), lambda inner: st.lists(inner) | st.dictionaries(ANY_TEXT, inner)))
def test_json_shown_keeps_the_values_and_is_inert(value: Any) -> None:
    text = json_shown(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert RAW.search(text) is None


def test_every_character_escaped_is_one_isprintable_refuses() -> None:
    # shown and json_shown give printable text back as it is, without the patterns: that holds only
    # while no character of the classes is printable. Every code point, through the patterns themselves.
    unsafe, in_json = re.compile(UNSAFE_CLASS), re.compile(UNSAFE_IN_JSON_CLASS)
    every = "".join(map(chr, range(0x110000)))
    matched = set(unsafe.findall(every))
    assert set(in_json.findall(every)) <= matched and len(matched) > 2000
    assert [char for char in matched if char.isprintable()] == []


@given(ANY_TEXT)
def test_shown_is_the_pattern_applied_whatever_the_text(text: str) -> None:
    # The printable shortcut gives what the pattern's substitution gives.
    escape = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
    by_pattern = re.sub(
        UNSAFE_CLASS, lambda m: escape.get(m.group()) or (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"), text
    )
    assert shown(text) == by_pattern
    assert json_shown(text) == re.sub(UNSAFE_IN_JSON_CLASS, lambda m: f"\\u{ord(m.group()):04x}", text)


# What orjson writes (no lone surrogate: it refuses one) as a report's JSON.
WRITABLE_TEXT = st.text(st.characters(exclude_categories=("Cs",)))


@given(st.recursive(WRITABLE_TEXT | st.integers(), lambda inner: st.lists(inner) | st.dictionaries(WRITABLE_TEXT, inner)))
def test_json_shown_bytes_is_json_shown_of_the_text(value: Any) -> None:
    # The bytes path gives back what it was given when it holds nothing to escape; the same as json_shown always.
    written = json.dumps(value, ensure_ascii=False).encode()
    assert json_shown_bytes(written) == json_shown(written.decode()).encode()


@pytest.mark.parametrize("char", ["\x7f", "\x85", "\u202e", "\u2028"])
def test_json_shown_bytes_escapes_del_and_above(char: str) -> None:
    written = json.dumps({"a": f"x{char}y"}, ensure_ascii=False).encode()
    assert json_shown_bytes(written) == f'{{"a": "x\\u{ord(char):04x}y"}}'.encode()


def test_the_svg_chart_is_well_formed_xml_with_the_name_escaped(files: Files, tmp_path: Path) -> None:
    from xml.etree import ElementTree

    svg = tmp_path / "chart.svg"
    result = in_a_pipe(["count", "--svg", svg, files.session])
    assert result.returncode == 0, result.stderr
    title = ElementTree.parse(svg).getroot().find("{http://www.w3.org/2000/svg}text")  # XML 1.0 forbids most controls
    assert title is not None and escaped_name("FILE") in (title.text or "")
