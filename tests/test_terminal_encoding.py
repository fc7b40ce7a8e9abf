"""A terminal that cannot encode what ctxpipe prints (issue 22, case 9): LC_ALL=C, PYTHONIOENCODING=ascii
or latin-1. The commands write ASCII stand-ins instead of stopping with UnicodeEncodeError; the
status line promises a line and exit 0 whatever happens."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from ctxpipe.cli.encoding import STAND_IN
from helpers import FIXTURES, ROOT, child_env, drain_pty, run_process

BASIC = FIXTURES / "claude-code" / "basic.jsonl"
ENCODINGS = ["ascii", "latin-1"]


def test_what_an_encoding_cannot_hold_becomes_an_ascii_stand_in() -> None:
    assert "⛁ 1K/200K · −12K — a…b ✓ é 漢".encode("ascii", STAND_IN) == b"ctx 1K/200K - -12K - a...b ok ? ?"
    assert "· é ⛁".encode("latin-1", STAND_IN) == "· é ctx".encode("latin-1")  # what latin-1 holds stays


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_status_line_prints_its_line_on_a_narrow_encoding(encoding: str) -> None:
    status = json.dumps({"model": {"id": "claude-opus-4-8"}, "transcript_path": str(BASIC), "version": "2.1.332"}).encode()
    done = run_process("statusline", "--no-savings", "--no-color", stdin=status, env={"PYTHONIOENCODING": encoding})
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    line = done.stdout.decode(encoding)
    assert line.startswith("ctx ") and "/200K" in line and line.endswith("Opus 4.8\n")


def on_a_terminal(args: list[str], encoding: str) -> tuple[int, bytes]:
    """`python -m ctxpipe ARGS` with a pseudo-terminal as stdout and stderr (the human-facing output)."""
    leader, follower = pty.openpty()
    try:
        env = child_env({"PYTHONIOENCODING": encoding, "COLUMNS": "160"})
        done = subprocess.run(
            [sys.executable, "-m", "ctxpipe", *args], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env, cwd=ROOT, timeout=120
        )
    finally:
        os.close(follower)
    out = drain_pty(leader)
    return done.returncode, out


@pytest.mark.skipif(not hasattr(pty, "openpty") or sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "args", [["warn", str(BASIC)], ["count", "--timeline", str(BASIC)], ["count", "--cost", "--by", "tool", str(BASIC)], ["warn", "--explain", str(BASIC)]]
)
def test_a_terminal_that_cannot_encode_gets_stand_ins_not_an_error(encoding: str, args: list[str]) -> None:
    code, out = on_a_terminal(args, encoding)
    text = out.decode(encoding)
    assert code == 0 and "internal error" not in text and "Traceback" not in text, text[-500:]
    assert "18,109" in text  # the figure is all there
    if args[0] == "count":
        assert "|" in text and "━" not in text  # the table's lines drawn in ASCII


def test_a_utf_8_terminal_keeps_its_characters(tmp_path: Path) -> None:
    code, out = on_a_terminal(["warn", str(BASIC)], "utf-8")
    assert code == 0 and "—" in out.decode()
