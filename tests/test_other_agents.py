"""Other agents' files (issue 22, case 16): every command, and the library's readers, refuse a file
another coding agent wrote in one line that names it, exit 1, with no traceback and no error a line;
in a folder batch it is one error line and the other files go on. The files are in
fixtures/other-agents/ (shaped from each agent's source, see its README); a few are made here.

The commands come from the app's registry through test_bad_input.READERS (a registered command
without a case there fails test_bad_input.test_every_registered_command_is_covered). statusline
keeps its own contract: exit 0 and one line, which names the file instead of "transcript unreadable".
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
from pathlib import Path

import ctxpipe
import pytest
from ctxpipe.core.errors import InputError
from ctxpipe.files.inputs import stream_entries
from ctxpipe.formats import NAMES
from ctxpipe.formats.other_agents import HEAD_BYTES
from ctxpipe.jobs.pipeline import CompactOptions
from helpers import ERROR_PREFIX, FIXTURES, error_line, no_traceback, run_cli
from test_bad_input import READER_IDS, READERS, STATUS_LINES, run_reader

OTHER = FIXTURES / "other-agents"
CLAUDE = FIXTURES / "claude-code" / "basic.jsonl"
KNOWN = f"not a transcript ctxpipe reads (known: {', '.join(NAMES)})"
JQ_ARRAY = "; `jq -c '.[]'` writes them one a line, the anthropic format"


def _sqlite(tmp_path: Path) -> bytes:
    path = tmp_path / "state.vscdb"
    with sqlite3.connect(path) as db:
        db.execute("create table ItemTable (key text, value blob)")
        db.execute("insert into ItemTable values ('chat', '{}')")
    db.close()
    return path.read_bytes()


def _pretty(*values: object) -> bytes:
    return b"".join(json.dumps(value, indent=2).encode() + b"\n" for value in values)


# file -> (how the message names it, what follows the known formats). None: made by the test.
CASES: dict[str, tuple[str, str]] = {
    "gemini-checkpoint.json": ("a Gemini CLI saved chat (/chat save: the Gemini API history as one JSON document)", ""),
    "gemini-checkpoint-array.json": ("a Gemini CLI saved chat (/chat save: the Gemini API history as one JSON document)", ""),
    "gemini-logs.json": ("a Gemini CLI prompt log (logs.json)", ""),
    "gemini-tool-checkpoint.json": ("a Gemini CLI checkpoint (saved before a tool edits a file)", ""),
    "pi-session.jsonl": ("a pi session (pi coding agent, JSONL)", ""),
    "pi-session-v1.jsonl": ("a pi session (pi coding agent, JSONL)", ""),
    "cline-ui-messages.json": ("a Cline task's UI messages (ui_messages.json)", ""),
    "cline-api-conversation-history.json": ("one JSON array of Messages-API messages (as Cline's api_conversation_history.json)", JQ_ARRAY),
    "aider-chat-history.md": ("an aider chat history (Markdown)", ""),
    # Made here: no fixture file.
    "state.vscdb": ("a SQLite database", ""),
    "request.json": ("one JSON document over several lines (not JSONL)", ""),
    "pretty.jsonl": ("JSON values written over several lines each (pretty-printed, not JSONL)", "; `jq -c .` writes them one a line"),
}
MADE = {
    "state.vscdb": _sqlite,
    # A request body saved pretty-printed: no agent's file, but no JSONL either.
    "request.json": lambda tmp_path: _pretty({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}]}),
    # A Claude Code transcript through `jq .` (without -c): one entry over several lines.
    "pretty.jsonl": lambda tmp_path: _pretty(*(json.loads(line) for line in CLAUDE.read_bytes().splitlines()[:3])),
}


def case_bytes(name: str, tmp_path: Path) -> bytes:
    return MADE[name](tmp_path) if name in MADE else (OTHER / name).read_bytes()


def expected(source: str, name: str) -> str:
    described, after = CASES[name]
    return f"{ERROR_PREFIX}{source}: {described}, {KNOWN}{after}"


def test_every_fixture_is_a_case() -> None:
    files = sorted(path.name for path in OTHER.iterdir() if path.name != "README.md")
    assert files == sorted(name for name in CASES if name not in MADE)


@pytest.mark.parametrize("via", ["path", "stdin"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("reader, argv", READERS, ids=READER_IDS)
def test_every_command_refuses_another_agents_file_in_one_line_naming_it(reader, argv, case, via, tmp_path) -> None:
    data = case_bytes(case, tmp_path)
    result, source = run_reader(argv, data, via, tmp_path, name=case)
    if reader in STATUS_LINES:
        # Its own contract: exit 0, one line, nothing on stderr; the line says what the file is.
        assert result.returncode == 0 and result.stderr == b"", (result.returncode, result.stderr)
        line = re.sub("\x1b\\[[0-9;]*m", "", result.stdout.decode())
        assert line.startswith(f"⛁ transcript is {CASES[case][0].split(' (')[0]} · ") and line.count("\n") == 1, line
        return
    message = error_line(result)  # exit 1, exactly one `ctxpipe: error:` line, nothing on stdout
    assert message == expected(source, case)


def test_the_library_refuses_another_agents_file(tmp_path) -> None:
    path = OTHER / "gemini-checkpoint.json"
    message = f"{path}: {CASES['gemini-checkpoint.json'][0]}, {KNOWN}"
    calls = {
        "read_transcript": lambda: ctxpipe.read_transcript(path),
        "read_transcript (bytes)": lambda: ctxpipe.read_transcript(path.read_bytes()),
        "count_transcript": lambda: ctxpipe.count_transcript(path),
        "run_stage": lambda: ctxpipe.run_stage("microcompact", path),
        "compact": lambda: ctxpipe.compact(path, CompactOptions()),
        "compact_file": lambda: ctxpipe.compact_file(path, tmp_path / "out.jsonl", CompactOptions()),
        "session_report": lambda: ctxpipe.session_report(path),
    }
    for call, run in calls.items():
        with pytest.raises(InputError) as raised:
            run()
        shown = message.replace(str(path), "<bytes>") if call.endswith("(bytes)") else message
        assert str(raised.value) == shown, call
    assert not (tmp_path / "out.jsonl").exists()


def test_restore_refuses_another_agents_file_as_its_history() -> None:
    result = run_cli("restore", "--from", OTHER / "pi-session.jsonl", CLAUDE)
    assert error_line(result) == expected(str(OTHER / "pi-session.jsonl"), "pi-session.jsonl")


@pytest.mark.parametrize(
    "argv",
    [["count"], ["validate"], ["report", "--json"], ["compact", "--engine", "offline", "--force", "--out-dir", "{out}"]],
    ids=["count", "validate", "report", "compact"],
)
def test_in_a_folder_each_other_agents_file_is_one_error_line_and_the_others_go_on(argv, tmp_path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("pi-session-v1.jsonl", "pi-session.jsonl"):  # a folder is searched for *.jsonl
        (folder / name).write_bytes((OTHER / name).read_bytes())
    (folder / "session.jsonl").write_bytes(CLAUDE.read_bytes())
    out = tmp_path / "out"
    result = run_cli(*[str(out) if arg == "{out}" else arg for arg in argv], folder)
    assert result.returncode == 1
    errors = no_traceback(result).splitlines()
    errors = [line for line in errors if line.startswith(ERROR_PREFIX)]
    assert errors == [expected(str(folder / name), name) for name in ("pi-session-v1.jsonl", "pi-session.jsonl")]
    if argv[0] == "compact":
        assert [path.name for path in out.iterdir()] == ["session.jsonl"]
    else:
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert [row["file"] for row in rows if row.get("file") and "error" not in row] == [str(folder / "session.jsonl")]
        if argv[0] == "count":  # a file of a batch that failed is a row too, saying what stderr says
            failed = {row["file"]: row["error"] for row in rows if "error" in row}
            assert sorted(failed) == [str(folder / "pi-session-v1.jsonl"), str(folder / "pi-session.jsonl")]
            assert all(line.endswith(failed[file]) for file, line in zip(sorted(failed), errors))


def test_a_named_format_reads_the_file_as_that_format() -> None:
    # The refusal is detection's: --format says how to read a file, whatever it looks like.
    result = run_cli("count", "--format", "claude-code", OTHER / "pi-session.jsonl")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tokens"] == 0


def test_lines_no_format_claims_are_refused_by_every_command_in_one_line(tmp_path) -> None:
    data = b'{"type":"message","id":"a1","message":{"role":"user","content":"hi"}}\n{"type":"note","text":"x"}\n'
    for reader, argv in READERS:
        if reader in STATUS_LINES or reader == "expand":  # expand copies bytes; statusline says "unreadable"
            continue
        result, source = run_reader(argv, data, "path", tmp_path)
        assert (
            error_line(result) == f"{ERROR_PREFIX}{source}:1: cannot tell the transcript format from the first lines (known: {', '.join(NAMES)}); use --format"
        ), reader


# --- what is not another agent's file ----------------------------------------------------------------


def test_a_jsonl_file_whose_first_line_is_bad_is_told_by_that_line(tmp_path) -> None:
    # `{` opens a JSON text, but the next line is no continuation of it: a JSONL line gone bad.
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    data = lines[0][:40] + b"\n" + b"".join(lines[1:])
    path = tmp_path / "cut.jsonl"
    path.write_bytes(data)
    assert error_line(run_cli("convert", "--to", "claude-code", path)).startswith(f"{ERROR_PREFIX}{path}:1: invalid JSON")


def test_lines_ending_in_cr_alone_are_no_document(tmp_path) -> None:
    path = tmp_path / "cr.jsonl"
    path.write_bytes(CLAUDE.read_bytes().replace(b"\n", b"\r"))
    message = error_line(run_cli("count", path))
    assert message.startswith(f"{ERROR_PREFIX}{path}:1:") and "JSON document" not in message


def test_a_claude_code_file_with_a_first_line_longer_than_the_head_is_read(tmp_path) -> None:
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    first = json.loads(lines[0])
    first["padding"] = "x" * (HEAD_BYTES + 1000)  # its first line does not fit in what is looked at
    data = json.dumps(first, separators=(",", ":")).encode() + b"\n" + b"".join(lines[1:])
    path = tmp_path / "long.jsonl"
    path.write_bytes(data)
    for argv in (["count"], ["validate"], ["convert", "--to", "claude-code"]):
        result = run_cli(*argv, path)
        assert result.returncode == 0, (argv, result.stderr)
    assert run_cli("convert", "--to", "claude-code", "-", stdin=data).stdout == data


def test_a_pretty_document_whose_telling_key_is_past_the_head_is_still_one_refused_document(tmp_path) -> None:
    # A Gemini CLI checkpoint whose UI history fills the head before `clientHistory`: no signature is
    # reached, but it is one JSON document over several lines all the same.
    document = {
        "history": [{"type": "user", "text": "x" * 1000, "id": n} for n in range(2000)],
        "clientHistory": [],
        "toolCall": {"name": "replace", "args": {}},
    }
    path = tmp_path / "checkpoint.json"
    path.write_bytes(json.dumps(document, indent=2).encode())
    assert path.stat().st_size > HEAD_BYTES
    message = f"{ERROR_PREFIX}{path}: one JSON document over several lines (not JSONL), {KNOWN}"
    assert error_line(run_cli("count", path)) == message
    assert error_line(run_cli("validate", "-", stdin=path.read_bytes())) == message.replace(str(path), "-")


def test_a_jsonl_stream_is_told_by_its_first_line(tmp_path) -> None:
    # `tail -f session.jsonl | ctxpipe …`: nothing beyond the line that gives the format away is read.
    first = CLAUDE.read_bytes().splitlines(keepends=True)[0]

    class Pipe(io.RawIOBase):
        given = False

        def readline(self, size: int | None = -1) -> bytes:
            if self.given:
                raise AssertionError("read past the first line")
            self.given = True
            return first

    read = stream_entries(Pipe(), "-", None, "fail")  # type: ignore[arg-type]
    assert read.format.name == "claude-code"
    assert next(read.entries).raw == first.rstrip(b"\n")
