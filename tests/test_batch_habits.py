"""The habits every command that reads many sessions shares (issue 27): a file that cannot be read is
a row of its own in --json ({"file", "error"}, the same error as stderr's) and a `failed` line or row
on a terminal, in the order found, the others still done; a progress bar on stderr for a run over
several files when stderr is a terminal (none in a pipe, none for one file); and a word on stderr
when a command waits on a terminal's stdin.
"""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from ctxpipe.jobs import schemas

from .helpers import FIXTURES, ROOT, child_env, drain_pty, run_cli

GOOD = FIXTURES / "claude-code" / "repeats.jsonl"
SCHEMAS = {
    "count": "count.report.schema.json",
    "warn": "warn.report.schema.json",
    "validate": "validate.report.schema.json",
    "audit": "audit.report.schema.json",
}


def _folder(tmp_path: Path) -> Path:
    """a.jsonl and c.jsonl good, b.jsonl another agent's file (a SQLite database), d.jsonl cut in its first line."""
    folder = tmp_path / "projects" / "app"
    folder.mkdir(parents=True)
    shutil.copy(GOOD, folder / "a.jsonl")
    (folder / "b.jsonl").write_bytes(b"SQLite format 3\x00" + bytes(200))
    shutil.copy(GOOD, folder / "c.jsonl")
    (folder / "d.jsonl").write_bytes(b'{"type":"user","message":{"role"')
    return folder


def _unreadable(command: str) -> set[str]:
    # validate reads a broken line as a finding of its file (a bad-line error), not as a file it cannot read
    return {"b.jsonl"} if command == "validate" else {"b.jsonl", "d.jsonl"}


@pytest.mark.parametrize("command", ["count", "warn", "validate", "audit", "compact"])
def test_a_file_that_fails_is_a_json_row_of_its_own_in_the_order_found(command: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    extra = ["--out-dir", str(tmp_path / "out")] if command == "compact" else []
    result = run_cli(command, "--json", *extra, folder)
    assert result.returncode == 1, result.stderr
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    failed = [row for row in rows if set(row) == {"file", "error"}]
    assert {Path(row["file"]).name for row in failed} == _unreadable(command)
    for row in failed:  # the error stderr gives for that file, without its name
        assert f"{row['file']}: " in result.stderr.decode() or f"{row['file']}:1: " in result.stderr.decode()
        assert row["error"].replace("line 1: ", "") in result.stderr.decode()
    # In the order found: every file's rows (audit's: its compactions, then its total) stand in name order.
    named = [Path(row["file"]).name for row in rows if row.get("file")]
    assert named == sorted(named)
    assert {"a.jsonl", "c.jsonl"} <= set(named)  # the others were still done
    if command in SCHEMAS:
        for row in rows:
            assert schemas.errors(SCHEMAS[command], row) == [], row
    else:
        for row in rows:
            assert schemas.errors("compact.report.schema.json", row) == [], row


@pytest.mark.parametrize("command", ["validate", "count", "warn", "audit"])
def test_a_path_that_names_nothing_is_a_failed_row_in_its_place(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "gone.jsonl"
    result = run_cli(command, "--json", GOOD, missing)
    assert result.returncode == 1 and b"gone.jsonl: no such file" in result.stderr
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert rows[0]["file"] == str(GOOD) and "error" not in rows[0]
    assert rows[1] == {"file": str(missing), "error": rows[1]["error"]} and "no such file" in rows[1]["error"]


def test_count_totals_count_a_failed_file_once(tmp_path: Path) -> None:
    rows = [orjson.loads(line) for line in run_cli("count", "--json", _folder(tmp_path)).stdout.splitlines()]
    total = rows[-1]
    assert total["total"] is True and total["files"] == 2 and total["failed"] == 2
    assert total["tokens"] == sum(row["tokens"] for row in rows[:-1] if "tokens" in row)


def _on_a_terminal(argv: list[str], cwd: Path, columns: int = 120) -> tuple[int, bytes, bytes]:
    """Run ctxpipe with stderr on a pseudo-terminal (stdout a pipe): (exit status, stdout, what the terminal showed)."""
    leader, follower = pty.openpty()
    env = child_env({"TERM": "xterm", "COLUMNS": str(columns), "NO_COLOR": "1"})
    process = subprocess.Popen([sys.executable, "-m", "ctxpipe", *argv], stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(follower)
    shown = drain_pty(leader)
    stdout = process.stdout.read() if process.stdout else b""
    return process.wait(timeout=120), stdout, shown


@pytest.mark.parametrize("command, label", [("count", b"counting"), ("validate", b"validating"), ("audit", b"auditing"), ("warn", b"checking")])
def test_a_run_over_a_folder_shows_its_progress_on_a_terminal_only(command: str, label: bytes, tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in "abc":
        shutil.copy(GOOD, folder / f"{name}.jsonl")
    (folder / "z.jsonl").write_bytes(b"SQLite format 3\x00" + bytes(200))
    status, stdout, shown = _on_a_terminal([command, "--json", str(folder)], ROOT)
    assert status == 1
    assert label in shown and b"4/4" in shown and b"1 errors" in shown
    assert len(stdout.splitlines()) >= 4  # the rows still go to the pipe
    piped = run_cli(command, "--json", folder)
    assert label not in piped.stderr and b"4/4" not in piped.stderr
    status, _, shown = _on_a_terminal([command, "--json", str(GOOD)], ROOT)  # one file: no bar
    assert label not in shown and b"1/1" not in shown


@pytest.mark.parametrize("command", ["count", "warn", "validate", "audit", "compact"])
def test_a_failed_file_is_marked_on_a_terminal_too(command: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    extra = ["--out-dir", str(tmp_path / "out")] if command == "compact" else []
    leader, follower = pty.openpty()
    env = child_env({"TERM": "xterm", "COLUMNS": "140", "NO_COLOR": "1"})
    # Relative to the folder run in: the test's own folder name holds the word "failed".
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", command, *extra, str(folder.relative_to(tmp_path))],
        stdout=follower,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )
    os.close(follower)
    shown = drain_pty(leader).decode()
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert process.wait(timeout=120) == 1
    failed_lines = [line for line in shown.splitlines() if "failed" in line]
    assert {name for name in ("a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl") if any(name in line for line in failed_lines)} == _unreadable(command)
    assert all(f"{name}" in stderr for name in _unreadable(command))  # why, on stderr


def test_a_command_waiting_on_a_terminal_says_so(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", "count", "--json"], stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=child_env()
    )
    os.close(follower)
    os.write(leader, b"\x04")  # Ctrl-D: the end of the input
    stdout, stderr = process.communicate(timeout=60)
    os.close(leader)
    assert process.returncode == 0
    assert b"reading a transcript from the terminal" in stderr and b"Ctrl-D" in stderr and b"(ctxpipe count PATH)" in stderr
    assert orjson.loads(stdout)["tokens"] >= 0  # the empty input counted
    piped = run_cli("count", "--json", stdin=GOOD.read_bytes())
    assert b"reading a transcript" not in piped.stderr


FILTERS = {  # a filter's options, and the batch command its refusal of a folder names
    "microcompact": ([], "compact --out-dir DIR"),
    "collapse": ([], "compact --out-dir DIR"),
    "summarize": (["--engine", "offline"], "compact --out-dir DIR"),
    "restore": ([], "compact --out-dir DIR"),
    "snip": (["--keep-last", "2"], "count"),
    "convert": (["--to", "anthropic"], "count"),
    "expand": (["--ledger", "LEDGER"], "count"),
    "api-edits": ([], "count"),
}


@pytest.mark.parametrize("command", sorted(FILTERS))
@pytest.mark.parametrize("as_url", [False, True])
def test_a_filter_given_a_folder_refuses_in_one_line_naming_the_batch_command(command: str, as_url: bool, tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    shutil.copy(GOOD, folder / "a.jsonl")
    given = folder.as_uri() if as_url else str(folder)
    options, batch = FILTERS[command]
    (tmp_path / "ledger.jsonl").write_bytes(b"")  # expand's, with no record: the input is read next
    result = run_cli(command, *[str(tmp_path / "ledger.jsonl") if option == "LEDGER" else option for option in options], given)
    assert (result.returncode, result.stdout) == (1, b""), result.stderr
    assert result.stderr.decode() == f"ctxpipe: error: {given}: is a directory; {command} reads one transcript file (ctxpipe {batch} {given}" + (
        " compacts every session below it)\n" if batch.startswith("compact") else " lists the sessions below it)\n"
    )


@pytest.mark.parametrize("command", ["compact", "report"])
def test_a_folder_without_somewhere_to_write_names_the_argument_as_the_help_does(command: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    result = run_cli(command, folder)
    assert (result.returncode, result.stdout) == (2, b"")
    err = result.stderr.decode()
    assert err.startswith("ctxpipe: error: Invalid value for PATH…: several files or a folder need --out-dir DIR") and err.count("\n") == 1, err
    assert f"Usage: ctxpipe {command} [OPTIONS] [PATH…]" in run_cli(command, "--help").stdout.decode()


@pytest.mark.parametrize("command", [["count"], ["validate"], ["compact", "--force", "--out-dir", "OUT"], ["report", "--out-dir", "OUT"]])
def test_stdin_among_files_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    # "-" is stdin, one transcript on its own: among files it once became a file named "-" (DIR/-, -.html).
    session = tmp_path / "s.jsonl"
    session.write_bytes((FIXTURES / "claude-code" / "repeats.jsonl").read_bytes())
    argv = [str(tmp_path / "out") if word == "OUT" else word for word in command]
    result = run_cli(*argv, "-", str(session), stdin=session.read_bytes())
    assert result.returncode == 2 and b"- (stdin) is one transcript on its own" in result.stderr
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
