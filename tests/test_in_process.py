"""run_cli runs a command in this process; run_process in a child, as a user would. The contract
tests rely on both giving the same bytes and exit code: this checks it on a sample of every kind of
run (each command's golden cases, reports, tables of help, usage errors, bad input, files written,
the environment, the working folder) and on the per-process state that a run leaves behind (the
summary breaker, the environment, the folder, sys.std*, descriptors 0-2).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT, Result, registered_commands, run_cli, run_process
from messages_server import MessagesServer, Reply

BASIC = FIXTURES / "claude-code" / "basic.jsonl"
NOW = "2026-05-01T00:00:00Z"


def golden_sample() -> list[tuple[str, list[str], bytes]]:
    """The first golden case of each command, as (id, argv, stdin)."""
    cases = []
    for command in registered_commands():
        args_file = sorted((FIXTURES / command).glob("*.args"))[0]
        stdin = args_file.with_suffix("").with_suffix(".in.jsonl").read_bytes()
        cases.append((f"{command}/{args_file.stem}", [command, *shlex.split(args_file.read_text())], stdin))
    return cases


# (id, argv, stdin): success and failure of every kind; paths are relative to ROOT, where both run.
OTHER_RUNS: list[tuple[str, list[str], bytes]] = [
    ("help", ["--help"], b""),
    ("no-arguments", [], b""),
    ("command-help", ["compact", "--help"], b""),
    ("unknown-command", ["no-such-command"], b""),
    ("unknown-flag", ["count", "--no-such-flag"], b""),
    ("bad-choice", ["convert", "--to", "bogus"], b""),
    ("missing-file", ["count", "no-such-file.jsonl"], b""),
    ("folder-as-file", ["convert", "--to", "anthropic", "fixtures"], b""),
    ("bad-line-stdin", ["convert", "--to", "anthropic", "-"], b'{"type":"user"}\n[1,2]\n'),
    ("invalid-utf8-stdin", ["validate", "-"], b'{"type":"user","message":{"content":"caf\xff"}}\n'),
    ("skip-warning", ["convert", "--to", "anthropic", "--on-error", "skip", "-"], BASIC.read_bytes() + b"{oops\n"),
    ("count-json", ["count", "--json", str(BASIC.relative_to(ROOT))], b""),
    ("count-folder", ["count", "--json", "fixtures/claude-code"], b""),
    ("warn-stdin", ["warn", "-"], BASIC.read_bytes()),
    ("validate-path", ["validate", "fixtures/adversarial/invalid-utf8.jsonl"], b""),
    ("summarize-offline", ["summarize", "--engine", "offline", "--now", NOW, "--keep-last", "2", "-"], BASIC.read_bytes()),
    ("summarize-llm-without-key", ["summarize", "--engine", "llm", "-"], BASIC.read_bytes()),
    ("escapes-in-a-path", ["count", "bad\x1b[31mname\u202e.jsonl"], b""),
]


def both_ways(argv: list[str], stdin: bytes, env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[Result, Result]:
    here = run_cli(*argv, stdin=stdin, env=env, cwd=cwd)
    child = run_process(*argv, stdin=stdin, env=env, cwd=cwd)
    return here, child


def assert_same(here: Result, child: object) -> None:
    assert (here.returncode, here.stderr.decode("utf-8", "replace")) == (child.returncode, child.stderr.decode("utf-8", "replace"))  # type: ignore[attr-defined]
    assert here.stdout == child.stdout  # type: ignore[attr-defined]
    assert here.stderr == child.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize("argv, stdin", [(argv, stdin) for _, argv, stdin in golden_sample() + OTHER_RUNS], ids=[i for i, _, _ in golden_sample() + OTHER_RUNS])
def test_in_process_equals_a_child_process(argv: list[str], stdin: bytes) -> None:
    here, child = both_ways(argv, stdin)
    assert_same(here, child)


def test_the_environment_and_the_folder_are_the_runs_own(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(BASIC.read_bytes())
    argv = ["warn", "--json", "in.jsonl"]  # a relative path, and a budget from the environment
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "1000"}
    here, child = both_ways(argv, b"", env=env, cwd=tmp_path)
    assert_same(here, child)
    assert here.stdout.startswith(b'{"file":"in.jsonl"')  # the relative path was found in the run's folder
    without = run_cli(*argv, cwd=tmp_path)
    assert (without.returncode, without.stdout) != (here.returncode, here.stdout)  # the variable did reach the run
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in os.environ and Path.cwd() != tmp_path


def test_an_output_file_is_written_the_same(tmp_path: Path) -> None:
    argv = ["convert", "--to", "anthropic", "-o", "out.jsonl", str(BASIC)]
    for name in ("here", "child"):
        (tmp_path / name).mkdir()
    here = run_cli(*argv, cwd=tmp_path / "here")
    child = run_process(*argv, cwd=tmp_path / "child")
    assert_same(here, child)
    assert (tmp_path / "here" / "out.jsonl").read_bytes() == (tmp_path / "child" / "out.jsonl").read_bytes() != b""
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["out.jsonl"]  # no temporary file left


def test_stdin_is_a_pipe_and_stdout_a_descriptor_as_in_a_child() -> None:
    # /dev/stdin and /dev/stdout are opened by name (files/atomic.py duplicates descriptors 0-2 for them).
    here, child = both_ways(["convert", "--to", "claude-code", "-o", "/dev/stdout", "/dev/stdin"], BASIC.read_bytes())
    assert_same(here, child)
    assert here.returncode == 0 and here.stdout == BASIC.read_bytes()


def test_a_large_input_and_output_do_not_fill_a_pipe() -> None:
    # More than a pipe holds (64 KiB) in both directions, and an input the command never reads.
    data = BASIC.read_bytes() * 200
    here = run_cli("convert", "--to", "claude-code", "-", stdin=data)
    assert here.returncode == 0 and len(here.stdout) > 1 << 16
    unread = run_cli("count", "--json", str(BASIC), stdin=data)
    assert unread.returncode == 0 and unread.stdout


def test_a_run_leaves_the_process_as_it_found_it() -> None:
    streams = (sys.stdin, sys.stdout, sys.stderr)
    descriptors = [os.fstat(number).st_ino for number in (0, 1, 2)]
    environ, cwd = dict(os.environ), os.getcwd()
    for argv in (["count", "--json", str(BASIC)], ["count", "no-such-file"], ["--help"], ["count", "--bogus"]):
        run_cli(*argv, env={"SOME_VARIABLE": "1"}, cwd=FIXTURES)
    assert (sys.stdin, sys.stdout, sys.stderr) == streams
    assert [os.fstat(number).st_ino for number in (0, 1, 2)] == descriptors
    assert dict(os.environ) == environ and os.getcwd() == cwd


def test_each_run_starts_with_a_closed_summary_breaker() -> None:
    # The breaker stops asking the model after 3 failures in a row, once per process: without a
    # fresh one per run, a fourth in-process run would not ask the model where a new process does.
    argv = ["summarize", "--engine", "llm", "--keep-last", "2", "--now", NOW, "-"]
    data = (FIXTURES / "claude-code" / "repeats.jsonl").read_bytes()

    def failing_run(run: Callable[..., Any]) -> tuple[tuple[int, bytes, bytes], int]:
        with MessagesServer() as server:  # a new one each time: its request ids start again
            server.default_reply = lambda body: Reply.error(400, "invalid_request_error", "messages: this request is not valid")
            result = run(*argv, stdin=data, env={"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.url})
            # The failure names the server, whose port differs from run to run.
            shown = (result.returncode, result.stdout, result.stderr.replace(server.url.encode(), b"URL"))
            return shown, len(server.message_requests())

    child, asked = failing_run(run_process)
    assert asked >= 1, child[2].decode()
    assert b"the model at URL refused the request" in child[2]
    for _ in range(4):
        here, asked_here = failing_run(run_cli)
        assert here == child
        assert asked_here == asked


def test_registered_commands_are_the_apps() -> None:
    names = registered_commands()
    assert {"convert", "count", "summarize", "api-edits"} <= set(names)
    assert len(names) == len(set(names))
    for name in names:
        assert run_cli(name, "--help").returncode == 0, name
