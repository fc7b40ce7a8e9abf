"""The bad-input contract, checked for every command that reads transcripts.

Bad input: exit 1 and exactly one `ctxpipe: error: FILE:LINE: what` line on stderr, never a
traceback (validate instead lists bad lines as `bad-line` findings and exits 1).
Odd but legal input (BOM, CRLF, empty file, unknown types and fields, huge lines, U+2028/U+2029
inside strings) is accepted and, for an identity conversion, written back byte for byte.

The commands come from the app's registry (helpers.registered_commands): a registered command
without an entry in COMMAND_READERS fails test_every_registered_command_is_covered.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest
from helpers import ERROR_PREFIX, error_line, no_traceback, registered_commands, run_cli, run_process

NOW = "2026-06-01T00:00:00Z"


def takes(command: str, option: str) -> bool:
    """Whether the registered `command` has `option` (read from the app, not written down twice)."""
    import typer
    from ctxpipe.cli.app import app

    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return any(option in parameter.opts for parameter in click_command.params)


# How each registered command reads one transcript, as (case name, argv prefix); a command may have
# more than one way worth checking (convert's two targets).
COMMAND_READERS: dict[str, list[tuple[str, list[str]]]] = {
    "api-edits": [("api-edits", ["api-edits"])],
    "audit": [("audit", ["audit", "--json"])],
    "collapse": [("collapse", ["collapse", "--now", NOW])],
    "compact": [("compact", ["compact", "--engine", "offline", "--source", "transcript", "--now", NOW])],
    "convert": [("convert", ["convert", "--to", "claude-code"]), ("convert-anthropic", ["convert", "--to", "anthropic"])],
    "count": [("count", ["count"])],
    "expand": [("expand", ["expand", "--ledger", os.devnull])],
    "microcompact": [("microcompact", ["microcompact", "--force", "--now", NOW])],
    "report": [("report", ["report", "--json", "--now", NOW]), ("report-html", ["report", "--now", NOW])],
    "restore": [("restore", ["restore", "--source", "transcript", "--now", NOW])],
    "snip": [("snip", ["snip", "--keep-last", "1", "--now", NOW])],
    # --no-savings: the saving is a detached background run (test_statusline.py covers it).
    "statusline": [("statusline", ["statusline", "--no-savings"])],
    "summarize": [("summarize", ["summarize", "--engine", "offline", "--keep-last", "1", "--now", NOW])],
    "validate": [("validate", ["validate"])],
    "warn": [("warn", ["warn"])],
}
READERS: list[tuple[str, list[str]]] = [case for command in registered_commands(readers_only=True) for case in COMMAND_READERS.get(command, [])]
CONVERT = COMMAND_READERS["convert"][0][1]

# Readers that report bad lines as findings on stdout (JSON) instead of failing with `ctxpipe: error:`.
REPORTS_BAD_LINES = {"validate"}
# Readers that parse a file from its end back to the start of the active context (count, warn, the
# stages): the first bad line they meet is the last one, so in a file of garbage they name its last
# line; a bad line before the start of the active context is never parsed.
READS_FROM_THE_END = {"count", "warn", "microcompact", "collapse", "snip", "summarize", "compact"}
# Readers that report the active context's tokens (JSON on stdout in a pipe).
REPORTS_TOKENS = {"count", "warn"}
# Readers that search a folder for session files instead of refusing it.
SEARCHES_FOLDERS = {"count", "report", "validate", "audit", "warn"}
# Readers that take a folder of sessions only with somewhere to write them (a usage error without).
FOLDERS_NEED_OUT_DIR = {"compact", "report-html"}
# statusline is given its transcript as Claude Code gives it, {"transcript_path": FILE} on stdin
# (run_on), never as an argument or as stdin's bytes, and its contract is not a reader's: it prints
# one line and exits 0 whatever the file holds (it skips bad lines itself: Claude Code may be
# writing the last one), says "transcript unreadable" for a file it cannot read (missing, a
# folder), and writes nothing on stderr. assert_status_line checks that instead of an error line.
STATUS_LINES = {"statusline"}
# Readers that write a Claude Code input back unchanged (an identity conversion).
IDENTITY = {"convert"}
# Stages that find nothing to do in the small conversations below (no tool results): they copy
# their input to stdout byte for byte (a BOM included: they pass the input through unparsed).
PASSES_THROUGH = {"microcompact", "collapse"}
# Stages that do change them (snip --keep-last 1 removes the middle of user, assistant, user).
CHANGES = {"snip"}
# Stages that replace the start of the conversation with a summary (summarize --keep-last 1).
SUMMARIZES = {"summarize"}
# Readers that take lines as opaque bytes (expand matches its ledger by the input's digest; an empty
# ledger has nothing to undo): any input, a bad line included, is copied to stdout unparsed.
OPAQUE = {"expand"}
# Commands that copy a small conversation without tool results (or without a compact boundary)
# byte for byte: nothing to clear, fold, restore or compact.
PASSES_THROUGH |= {"restore", "compact"} | OPAQUE
# Readers that write a transcript (empty input gives empty output).
WRITES_TRANSCRIPTS = {"convert", "convert-anthropic"} | PASSES_THROUGH | CHANGES | SUMMARIZES
# ... and take `-o FILE` (compact writes files with --out-dir or --in-place instead).
WRITERS = [(name, argv) for name, argv in READERS if name in WRITES_TRANSCRIPTS and takes(argv[0], "--output")]
# Readers with --on-error (skip bad lines).
SKIPPERS = [(name, argv) for name, argv in READERS if takes(argv[0], "--on-error")]

READER_IDS = [name for name, _ in READERS]


def test_every_registered_command_is_covered() -> None:
    missing = [command for command in registered_commands(readers_only=True) if not COMMAND_READERS.get(command)]
    assert not missing, f"registered commands without a case in COMMAND_READERS: {missing}"
    assert {name for name, _ in READERS} == {name for cases in COMMAND_READERS.values() for name, _ in cases}, "a case for a command the app does not register"


VIA = ["path", "stdin"]
SESSION = "44444444-4444-4444-8444-444444444444"


# --- building transcripts ----------------------------------------------------------------------


def _uuid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def dumps(obj: object) -> bytes:
    """Compact JSON like Claude Code writes it, non-ASCII kept raw (so U+2028 stays a raw character)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def user_line(n: int, content: object = "hello", **extra: object) -> bytes:
    obj = {
        "parentUuid": _uuid(n - 1) if n > 1 else None,
        "isSidechain": False,
        "type": "user",
        "message": {"role": "user", "content": content},
        "uuid": _uuid(n),
        "timestamp": f"2026-01-05T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
        "sessionId": SESSION,
        **extra,
    }
    return dumps(obj)


def assistant_line(n: int, text: str = "ok") -> bytes:
    obj = {
        "parentUuid": _uuid(n - 1) if n > 1 else None,
        "isSidechain": False,
        "type": "assistant",
        "message": {
            "id": f"msg_{n:06d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 3},
        },
        "uuid": _uuid(n),
        "timestamp": f"2026-01-05T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
        "sessionId": SESSION,
    }
    return dumps(obj)


def good_lines(count: int = 3) -> list[bytes]:
    """A valid conversation: user, assistant, user, assistant, ..."""
    return [user_line(n, f"question {n}") if n % 2 else assistant_line(n, f"answer {n}") for n in range(1, count + 1)]


def jsonl(lines: list[bytes], eol: bytes = b"\n") -> bytes:
    return b"".join(line + eol for line in lines)


# --- running readers ---------------------------------------------------------------------------


def last_line_number(data: bytes) -> int:
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def status_json(transcript: str | Path) -> bytes:
    """Claude Code's status JSON naming `transcript` (statusline's stdin)."""
    return json.dumps({"transcript_path": str(transcript), "model": {"id": "claude-sonnet-4-5"}}).encode()


def run_on(argv: list[str], transcript: str | Path, *extra: str, stdin: bytes | None = b"", cwd: Path | None = None):
    """`ctxpipe ARGV EXTRA TRANSCRIPT`, or for statusline `ctxpipe ARGV EXTRA` with the transcript named on stdin."""
    if argv[0] in STATUS_LINES:
        return run_cli(*argv, *extra, stdin=status_json(transcript), cwd=cwd)
    return run_cli(*argv, *extra, transcript, stdin=stdin, cwd=cwd)


STATUS_LINE = re.compile(r"⛁ (?:[\d.]+[KM]?/[\d.]+[KM]? \d+% (?:normal|warning|autocompact|blocking)|no transcript|transcript unreadable)(?: · [^\n]+)?\n")


def assert_status_line(result, unreadable: bool = False) -> str:
    """statusline's promise: exit 0, nothing on stderr, one line on stdout; the figures for a file it
    can read (a bad line left out), "transcript unreadable" for one it cannot."""
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stderr == b"", result.stderr
    line = re.sub("\x1b\\[[0-9;]*m", "", result.stdout.decode("utf-8"))  # its colours: on by default, even on a pipe
    assert STATUS_LINE.fullmatch(line), line
    assert ("⛁ transcript unreadable" in line) is unreadable, line
    return line


def run_reader(argv: list[str], data: bytes, via: str, tmp_path: Path, *extra: str, name: str = "in.jsonl"):
    """Run a reader on `data`, given as a file path or on stdin as `-`; returns (result, source name).
    statusline is given the file by its path, or for `stdin` by a path relative to the working folder."""
    if argv[0] in STATUS_LINES:
        path = tmp_path / name
        path.write_bytes(data)
        return run_on(argv, path if via == "path" else name, *extra, cwd=tmp_path), str(path)
    if via == "path":
        path = tmp_path / name
        path.write_bytes(data)
        return run_cli(*argv, *extra, path), str(path)
    return run_cli(*argv, *extra, "-", stdin=data), "-"


def assert_line_error(result, source: str, line: int, *keywords: str) -> str:
    """Exit 1, one error line naming `source:line:` followed by what is wrong."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    message = error_line(result, partial_output=True)  # see test_failure_on_stdout_exits_non_zero
    where = f"{source}:{line}:"
    assert where in message, f"{where!r} not in {message!r}"
    what = message.split(where, 1)[1].strip()
    assert what, f"the message does not say what is wrong: {message!r}"
    if keywords:
        assert any(word.lower() in what.lower() for word in keywords), f"none of {keywords} in {what!r}"
    return what


def assert_copied(result, data: bytes) -> None:
    """An opaque reader's run: exit 0, the input on stdout byte for byte."""
    assert result.returncode == 0, (result.returncode, result.stderr)
    no_traceback(result)
    assert result.stdout == data


MADE_ID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")


def comparable(output: bytes) -> bytes:
    """An output minus what differs between run_twice's two runs of a summary: its new lines' uuid5
    ids, derived from the input's bytes (a BOM or CRLF changes them), and the transcript path it names."""
    return MADE_ID.sub(b"<made uuid>", output).replace(b"/odd/in.jsonl", b"/plain/in.jsonl")


def reports(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def assert_bad_line_finding(result, source: str, line: int, *keywords: str, only: bool = True) -> dict:
    """validate: exit 1, a JSON report (not `ctxpipe: error:`) whose first bad-line finding is at `line`
    (and the only one, unless `only` is False)."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    no_traceback(result)
    assert ERROR_PREFIX not in result.stderr.decode("utf-8", "replace")
    [report] = reports(result)
    assert report["file"] == source
    assert report["valid"] is False
    bad = [finding for finding in report["findings"] if finding["code"] == "bad-line"]
    bad_lines = [finding["line"] for finding in bad]
    assert bad_lines[:1] == [line], report["findings"]
    if only:
        assert bad_lines == [line], report["findings"]
    assert bad[0]["severity"] == "error"
    if keywords:
        assert any(word.lower() in bad[0]["message"].lower() for word in keywords), bad[0]
    return bad[0]


# --- errors ------------------------------------------------------------------------------------

GOOD = good_lines(3)
INVALID_UTF8_LINE = b'{"type":"user","message":{"role":"user","content":"caf\xff\xfe"},"uuid":"' + _uuid(2).encode() + b'"}'


def _garbage() -> bytes:
    rng = random.Random(20260105)
    # Starts with NUL so the first line is certainly garbage (a leading newline would be a blank line).
    return b"\x00\x89PNG" + bytes(rng.randrange(256) for _ in range(8192)) + b"\x00\x00"


# (case id, file content, bad line number, words one of which the message must contain)
BAD_LINE_CASES = [
    ("invalid-json-middle", jsonl([GOOD[0], b'{"type":"user","message":{"role":"user","content":"hi"},,}', GOOD[2]]), 2, ("json",)),
    ("invalid-utf8", jsonl([GOOD[0], INVALID_UTF8_LINE, GOOD[2]]), 2, ("utf-8", "utf8")),
    ("array-not-object", jsonl([GOOD[0], b"[1,2]", GOOD[2]]), 2, ("object",)),
    ("string-not-object", jsonl([GOOD[0], b'"str"', GOOD[2]]), 2, ("object",)),
    ("number-not-object", jsonl([GOOD[0], b"3", GOOD[2]]), 2, ("object",)),
    ("binary-garbage", _garbage(), 1, ("binary", "nul", "utf-8", "json")),
    ("truncated-last-line", jsonl(GOOD[:2]) + b'{"type":"assist', 3, ("truncated last line",)),
    # A number no double holds would be read as infinity and written back as `Infinity` (not JSON):
    # refused alone (orjson) and beside a lone surrogate, which sends the line to the standard library.
    ("number-beyond-a-double", jsonl([GOOD[0], b'{"type":"user","message":{"role":"user","content":"hi"},"n":1e400}', GOOD[2]]), 2, ("infinity",)),
    (
        "number-beyond-a-double-beside-a-lone-surrogate",
        jsonl([GOOD[0], b'{"type":"user","message":{"role":"user","content":"cut \\ud83d"},"n":-1e400}', GOOD[2]]),
        2,
        ("infinity",),
    ),
]


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("case, data, line, keywords", BAD_LINE_CASES, ids=[case[0] for case in BAD_LINE_CASES])
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_bad_line_is_reported_with_file_and_line(reader, argv, case, data, line, keywords, via, tmp_path, request):
    result, source = run_reader(argv, data, via, tmp_path)
    if reader in OPAQUE:
        assert_copied(result, data)
        return
    if reader in STATUS_LINES:
        assert_status_line(result)
        return
    # count and warn read a small file whole (jobs/count.SMALL_FILE), front to back, like the others.
    if reader in READS_FROM_THE_END - {"count", "warn"} and case == "binary-garbage":
        line = last_line_number(data)  # every line is garbage; the last is read first
    if reader in REPORTS_BAD_LINES:
        # Every line of binary garbage is a bad line; the other cases have exactly one.
        assert_bad_line_finding(result, source, line, *keywords, only=case != "binary-garbage")
    else:
        assert_line_error(result, source, line, *keywords)


@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_missing_file(reader, argv, tmp_path):
    missing = tmp_path / "no-such-dir" / "missing.jsonl"
    result = run_on(argv, missing)
    if reader in STATUS_LINES:
        assert_status_line(result, unreadable=True)
        return
    assert result.returncode == 1, result.stderr
    message = error_line(result)
    assert str(missing) in message
    assert result.stdout == b""


STAGE_READERS = [(name, argv) for name, argv in READERS if name in READS_FROM_THE_END & WRITES_TRANSCRIPTS]
# A bad line, then a conversation whose chain starts after it (its first line has no parent).
BAD_BEFORE_THE_CONTEXT = jsonl([b'{"type":"user","message":{broken', *good_lines(3)])


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", STAGE_READERS, ids=[name for name, _ in STAGE_READERS])
def test_a_stage_passes_a_bad_line_before_the_active_context_through(reader, argv, via, tmp_path):
    # Stages read from the end back to the start of the active context; what lies before it is
    # copied unparsed, so a bad line there is neither reported nor lost (validate checks every line).
    result, _ = run_reader(argv, BAD_BEFORE_THE_CONTEXT, via, tmp_path)
    assert result.returncode == 0, result.stderr
    no_traceback(result)
    assert result.stdout.startswith(b'{"type":"user","message":{broken\n')
    if reader in PASSES_THROUGH:
        assert result.stdout == BAD_BEFORE_THE_CONTEXT
    # A snip by line numbers reads every line, and so finds it.
    if reader == "snip":
        numbered, source = run_reader(["snip", "--range", "3..3"], BAD_BEFORE_THE_CONTEXT, via, tmp_path, name="numbered.jsonl")
        assert_line_error(numbered, source, 1, "json")


@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_directory_instead_of_file(reader, argv, tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    (folder / "x.jsonl").write_bytes(jsonl(GOOD))
    result = run_on(argv, folder)
    if reader in STATUS_LINES:  # a status line is about one session: a folder is not one it can read
        assert_status_line(result, unreadable=True)
        return
    if reader in SEARCHES_FOLDERS:
        # count, report and validate take folders of sessions: the folder is searched, not refused.
        assert result.returncode == 0, result.stderr
        no_traceback(result)
        [report] = reports(result)
        assert report["file"] == str(folder / "x.jsonl")
        return
    if reader in FOLDERS_NEED_OUT_DIR:
        assert result.returncode == 2, result.stderr
        assert b"--out-dir" in result.stderr and result.stdout == b""
        no_traceback(result)
        return
    assert result.returncode == 1, result.stderr
    message = error_line(result)
    assert str(folder) in message
    assert "director" in message.lower() or "folder" in message.lower(), message
    assert result.stdout == b""


TRUNCATED_MID_CHARACTER = jsonl(GOOD[:2]) + b'{"type":"user","message":{"role":"user","content":"caf\xc3'


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_truncated_inside_a_utf8_character_is_a_truncated_last_line(reader, argv, via, tmp_path, request):
    # A file cut at an arbitrary byte (crash, full disk) often ends inside a non-ASCII character.
    result, source = run_reader(argv, TRUNCATED_MID_CHARACTER, via, tmp_path)
    if reader in OPAQUE:
        assert_copied(result, TRUNCATED_MID_CHARACTER)
    elif reader in STATUS_LINES:  # the line Claude Code is writing: left out
        assert_status_line(result)
    elif reader in REPORTS_BAD_LINES:
        assert_bad_line_finding(result, source, 3, "truncated last line")
    else:
        assert_line_error(result, source, 3, "truncated last line")


@pytest.mark.parametrize("writer, argv", WRITERS, ids=[name for name, _ in WRITERS])
def test_output_into_a_missing_folder_is_an_error(writer, argv, tmp_path):
    out = tmp_path / "no-such-folder" / "out.jsonl"
    result = run_cli(*argv, "-o", out, stdin=jsonl(GOOD))
    assert result.returncode == 1, result.stderr
    assert str(out) in error_line(result)
    assert not out.parent.exists()
    assert result.stdout == b""


@pytest.mark.parametrize("writer, argv", WRITERS, ids=[name for name, _ in WRITERS])
def test_output_to_a_folder_is_an_error(writer, argv, tmp_path):
    result = run_cli(*argv, "-o", tmp_path, stdin=jsonl(GOOD))
    assert result.returncode == 1, result.stderr
    assert str(tmp_path) in error_line(result)
    assert list(tmp_path.iterdir()) == []


# --- accepted input ----------------------------------------------------------------------------


def run_twice(argv: list[str], data: bytes, reference: bytes, via: str, tmp_path: Path):
    """Run a reader on `data` and on `reference` under the same source name, to compare outputs."""
    results = []
    for label, content in (("odd", data), ("plain", reference)):
        folder = tmp_path / label
        folder.mkdir()
        if via == "path" or argv[0] in STATUS_LINES:
            (folder / "in.jsonl").write_bytes(content)
            results.append(run_on(argv, "in.jsonl", cwd=folder))
        else:
            results.append(run_cli(*argv, "-", stdin=content, cwd=folder))
    for result in results:
        assert result.returncode == 0, result.stderr
        no_traceback(result)
        if argv[0] in STATUS_LINES:
            assert_status_line(result)
    return results


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_utf8_bom_is_accepted(reader, argv, via, tmp_path):
    plain = jsonl(GOOD)
    odd, reference = run_twice(argv, b"\xef\xbb\xbf" + plain, plain, via, tmp_path)
    if reader in IDENTITY:
        assert odd.stdout == plain  # the input minus the BOM
    if reader in PASSES_THROUGH:
        assert odd.stdout == b"\xef\xbb\xbf" + plain and reference.stdout == plain  # copied unparsed
    else:
        assert comparable(odd.stdout) == comparable(reference.stdout)
    assert odd.stderr == reference.stderr


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_crlf_line_endings_are_accepted(reader, argv, via, tmp_path):
    crlf, plain = jsonl(GOOD, b"\r\n"), jsonl(GOOD)
    odd, reference = run_twice(argv, crlf, plain, via, tmp_path)
    if reader in IDENTITY | PASSES_THROUGH:
        assert odd.stdout == crlf  # written back byte for byte, CRLF included
    else:
        assert comparable(odd.stdout.replace(b"\r\n", b"\n")) == comparable(reference.stdout)
    if reader in REPORTS_BAD_LINES:
        [report] = reports(odd)
        assert report["valid"] is True and report["entries"] == len(GOOD)


def test_crlf_bom_together_identity(tmp_path):
    data = b"\xef\xbb\xbf" + jsonl(GOOD, b"\r\n")
    result, _ = run_reader(CONVERT, data, "path", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == data[3:]


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_empty_file_is_accepted(reader, argv, via, tmp_path):
    result, source = run_reader(argv, b"", via, tmp_path)
    assert result.returncode == 0, result.stderr
    no_traceback(result)
    if reader in STATUS_LINES:
        assert assert_status_line(result).startswith("⛁ 0/200K 0% normal")
    if reader in WRITES_TRANSCRIPTS:
        assert result.stdout == b""
    if reader in REPORTS_BAD_LINES:
        [report] = reports(result)
        assert report["file"] == source
        assert report["valid"] is True and report["entries"] == 0
    if reader in REPORTS_TOKENS:
        [report] = reports(result)
        assert report["file"] == source
        assert report["tokens"] == report["exact_tokens"] == 0


UNKNOWN = jsonl(
    [
        b'{"type":"some-future-entry","payload2":{"nested":[1,2,{"x":null}]},"uuid":"' + _uuid(900).encode() + b'"}',
        user_line(1, "first question", brandNewField={"a": [1, 2.5, True]}, anotherOne="z"),
        assistant_line(2, "first answer"),
        b'{"type":"x-unknown","value":12345678901234567890,"note":"caf\xc3\xa9"}',
        user_line(3, "second question"),
    ]
)


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_unknown_types_and_fields_are_accepted(reader, argv, via, tmp_path):
    result, _ = run_reader(argv, UNKNOWN, via, tmp_path)
    assert result.returncode == 0, result.stderr
    no_traceback(result)
    if reader in STATUS_LINES:
        assert_status_line(result)
    if reader in IDENTITY | PASSES_THROUGH:
        assert result.stdout == UNKNOWN  # byte-identical, unknown lines and fields included
    if reader in CHANGES:
        # The unknown lines and the opening message pass through byte for byte.
        lines = UNKNOWN.splitlines(keepends=True)
        assert result.stdout.startswith(lines[0] + lines[1]) and lines[3] in result.stdout
    if reader == "convert-anthropic":
        messages = reports(result)
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert "first question" in json.dumps(messages[0]["content"])
    if reader in REPORTS_BAD_LINES:
        [report] = reports(result)
        assert report["entries"] == 5
        assert not [f for f in report["findings"] if f["code"] == "bad-line"]


BIG_CONTENT = "0123456789abcdef" * (12 * 1024 * 1024 // 16)  # a 12 MB string


@pytest.fixture(scope="module")
def big_line_file() -> bytes:
    return jsonl([user_line(1, BIG_CONTENT), assistant_line(2, "done")])


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_12mb_line_is_accepted(reader, argv, via, big_line_file, tmp_path):
    assert len(big_line_file) > 12 * 1024 * 1024
    result, _ = run_reader(argv, big_line_file, via, tmp_path)
    assert result.returncode == 0, result.stderr[:2000]
    no_traceback(result)
    if reader in STATUS_LINES:
        assert_status_line(result)
    if reader in IDENTITY | PASSES_THROUGH | CHANGES:  # two messages: nothing between them to snip
        assert result.stdout == big_line_file
    if reader == "convert-anthropic":
        messages = reports(result)
        assert messages[0]["role"] == "user"
        content = messages[0]["content"]
        text = content if isinstance(content, str) else "".join(block.get("text", "") for block in content)
        assert text == BIG_CONTENT
    if reader in REPORTS_BAD_LINES:
        [report] = reports(result)
        assert report["valid"] is True and report["entries"] == 2


SEPARATORS = "line\u2028separator and paragraph\u2029separator"
U2028 = jsonl([user_line(1, SEPARATORS), assistant_line(2, "para\u2029graph"), user_line(3, "end")])


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_u2028_u2029_inside_strings_do_not_split_lines(reader, argv, via, tmp_path):
    assert "\u2028".encode() in U2028 and "\u2029".encode() in U2028  # raw, not escaped
    result, _ = run_reader(argv, U2028, via, tmp_path)
    assert result.returncode == 0, result.stderr
    no_traceback(result)
    if reader in STATUS_LINES:
        assert_status_line(result)
    if reader in IDENTITY | PASSES_THROUGH:
        assert result.stdout == U2028
    if reader in CHANGES:
        assert result.stdout.startswith(U2028.split(b"\n")[0] + b"\n")  # the opening message, byte for byte
    if reader == "convert-anthropic":
        messages = reports(result)
        assert len(messages) == 3
        assert SEPARATORS in json.dumps(messages[0]["content"], ensure_ascii=False)
    if reader in REPORTS_BAD_LINES:
        [report] = reports(result)
        assert report["valid"] is True and report["entries"] == 3


@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_no_path_reads_stdin_like_dash(reader, argv, tmp_path):
    data = jsonl(GOOD)
    if reader in STATUS_LINES:
        # statusline's stdin is Claude Code's status JSON: a transcript argument is a usage error,
        # and a transcript's lines on stdin are no status JSON (one line says so; exit 0).
        _assert_usage_error(run_cli(*argv, "-", stdin=data, cwd=tmp_path))
        given = run_cli(*argv, stdin=data, cwd=tmp_path)
        assert (given.returncode, given.stdout, given.stderr) == (0, b"ctxpipe: no status JSON on stdin\n", b"")
        return
    implicit = run_cli(*argv, stdin=data, cwd=tmp_path)
    dash = run_cli(*argv, "-", stdin=data, cwd=tmp_path)
    assert implicit.returncode == dash.returncode == 0, (implicit.stderr, dash.stderr)
    assert implicit.stdout == dash.stdout != b""
    bad = jsonl([GOOD[0], b"[1,2]", GOOD[2]])
    implicit = run_cli(*argv, stdin=bad, cwd=tmp_path)
    if reader in OPAQUE:
        assert_copied(implicit, bad)
    elif reader in REPORTS_BAD_LINES:
        assert_bad_line_finding(implicit, "-", 2)
    else:
        assert_line_error(implicit, "-", 2)


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_complete_last_line_without_newline_is_accepted(reader, argv, via, tmp_path):
    # Only an unfinished JSON object is a truncated line; a complete one merely lacks its newline.
    data = jsonl(GOOD[:2]) + GOOD[2]
    result, _ = run_reader(argv, data, via, tmp_path)
    assert result.returncode == 0, result.stderr
    no_traceback(result)
    if reader in STATUS_LINES:
        assert_status_line(result)
    if reader in IDENTITY | PASSES_THROUGH:
        assert result.stdout == data
    if reader in REPORTS_BAD_LINES:
        [report] = reports(result)
        assert report["valid"] is True and report["entries"] == 3


LONE_SURROGATE = (
    jsonl([user_line(1, "q"), assistant_line(2, "a")]) + user_line(3, "output cut inside an emoji: X").replace(b"emoji: X", b"emoji: \\ud83d") + b"\n"
)


@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_lone_surrogate_escape_is_accepted(reader, argv, tmp_path):
    assert b'\\ud83d"' in LONE_SURROGATE
    json.loads(LONE_SURROGATE.splitlines()[2])  # legal JSON (RFC 8259 grammar; Python reads it)
    result, _ = run_reader(argv, LONE_SURROGATE, "path", tmp_path)
    assert result.returncode == 0, result.stderr
    if reader in STATUS_LINES:
        assert_status_line(result)
    if reader in IDENTITY | PASSES_THROUGH:
        assert result.stdout == LONE_SURROGATE


# --- --on-error=skip ---------------------------------------------------------------------------


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("reader, argv", SKIPPERS, ids=[name for name, _ in SKIPPERS])
def test_on_error_skip_leaves_the_bad_line_out(reader, argv, via, tmp_path, request):
    lines = good_lines(5)
    bad = b'{"type":"user","message":{oops'
    data = jsonl([lines[0], lines[1], bad, lines[2], lines[3], lines[4]])
    result, source = run_reader(argv, data, via, tmp_path, "--on-error=skip")
    clean, _ = run_reader(argv, jsonl(lines), via, tmp_path, name="clean.jsonl")
    assert result.returncode == 0, result.stderr
    no_traceback(result)
    err = result.stderr.decode()
    assert "skipped 1 bad line" in err, err
    assert source in err
    assert bad not in result.stdout
    if reader in IDENTITY | PASSES_THROUGH:
        assert result.stdout == jsonl(lines)
    if reader == "convert-anthropic" or reader in CHANGES:
        assert result.stdout == clean.stdout
    if reader in REPORTS_BAD_LINES:
        [report] = reports(result)
        assert report["valid"] is True and report["entries"] == 5
        assert not [f for f in report["findings"] if f["code"] == "bad-line"]


# --- output is never partial -------------------------------------------------------------------


# Writers that fail on a bad line (an opaque one copies it: test_bad_line_is_reported_with_file_and_line).
FAILING_WRITERS = [(name, argv) for name, argv in WRITERS if name not in OPAQUE]


def _bad_at_200() -> bytes:
    lines = good_lines(250)
    lines[199] = b'{"type":"user","message":{"role":"user","content":"broken'  # line 200
    return jsonl(lines)


def _leftovers(folder: Path, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{name}.") and p.name.endswith(".tmp"))


@pytest.mark.parametrize("writer, argv", FAILING_WRITERS, ids=[name for name, _ in FAILING_WRITERS])
def test_failed_run_leaves_no_output_file(writer, argv, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(_bad_at_200())
    out = tmp_path / "out.jsonl"
    result = run_cli(*argv, "-o", out, source)
    assert_line_error(result, str(source), 200)
    assert not out.exists()
    assert _leftovers(tmp_path, "out.jsonl") == []
    assert result.stdout == b""


@pytest.mark.parametrize("writer, argv", FAILING_WRITERS, ids=[name for name, _ in FAILING_WRITERS])
def test_failed_run_keeps_the_old_output(writer, argv, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(_bad_at_200())
    out = tmp_path / "out.jsonl"
    old = b"old content, not JSON at all\n"
    out.write_bytes(old)
    result = run_cli(*argv, "--output", out, source)
    assert_line_error(result, str(source), 200)
    assert out.read_bytes() == old
    assert _leftovers(tmp_path, "out.jsonl") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("writer, argv", FAILING_WRITERS, ids=[name for name, _ in FAILING_WRITERS])
def test_failure_on_stdout_exits_non_zero(writer, argv, via, tmp_path):
    data = _bad_at_200()
    result, source = run_reader(argv, data, via, tmp_path)
    assert_line_error(result, source, 200)
    if writer in IDENTITY:
        # Whatever reached stdout is a prefix of the good lines, never the bad one.
        assert data.startswith(result.stdout)
        assert result.stdout.count(b"\n") < 200


def test_successful_output_file_is_complete(tmp_path):
    data = jsonl(good_lines(250))
    source = tmp_path / "in.jsonl"
    source.write_bytes(data)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old\n")
    result = run_cli(*CONVERT, "-o", out, source)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == data
    assert _leftovers(tmp_path, "out.jsonl") == []


# --- usage errors ------------------------------------------------------------------------------


def _assert_usage_error(result) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    no_traceback(result)
    assert result.stderr.strip(), "a usage error must say what is wrong"
    assert result.stdout == b""


@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_unknown_flag_is_a_usage_error(reader, argv):
    result = run_cli(*argv, "--no-such-flag", stdin=jsonl(GOOD))
    _assert_usage_error(result)
    assert b"--no-such-flag" in result.stderr


@pytest.mark.parametrize("reader, argv", SKIPPERS, ids=[name for name, _ in SKIPPERS])
def test_bogus_on_error_is_a_usage_error(reader, argv):
    result = run_cli(*argv, "--on-error=bogus", stdin=jsonl(GOOD))
    _assert_usage_error(result)
    assert b"bogus" in result.stderr


@pytest.mark.parametrize("value", ["bogus", "", "CLAUDE-CODE"])
def test_bad_to_value_is_a_usage_error(value):
    result = run_cli("convert", "--to", value, stdin=jsonl(GOOD))
    _assert_usage_error(result)
    assert re.search(rb"--to|-t", result.stderr), result.stderr


@pytest.mark.parametrize("command", ["count", "validate", "report", "compact"])
def test_executor_dask_without_the_dask_extra_names_the_extra(command: str, tmp_path: Path) -> None:
    """As a user without ctxpipe[dask] has it: `import distributed` fails (a module on the path that
    raises ImportError stands for the package that is not installed); one line, exit 1."""
    missing = tmp_path / "site"
    missing.mkdir()
    (missing / "distributed.py").write_text("raise ImportError(\"No module named 'distributed'\")\n")
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "a.jsonl").write_bytes(jsonl(good_lines(3)))
    extra = ["--out-dir", str(tmp_path / "out")] if command in ("compact", "report") else []
    result = run_process(command, "--executor", "dask", *extra, sessions, env={"PYTHONPATH": str(missing)})
    assert result.returncode == 1, result.stderr
    assert error_line(result) == "ctxpipe: error: --executor dask needs the dask extra: pip install 'ctxpipe[dask]'"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.jsonl"))
