"""ctxpipe in real shell pipes: records on stdout, diagnostics on stderr, quiet on a closed pipe,
stages that compose, help with examples, and a start-up that does not import heavy libraries."""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, run_cli

CTXPIPE = f"{shlex.quote(sys.executable)} -m ctxpipe"
CLAUDE = FIXTURES / "claude-code"
CLAUDE_FIXTURES = sorted(CLAUDE.glob("*.jsonl"))
HEAVY = ("rich", "anthropic", "tiktoken", "jsonschema")
SESSION = "55555555-5555-4555-8555-555555555555"
START = "2026-02-03T04:05:06.000Z"


def sh(command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run a shell pipeline under `set -o pipefail`, capturing bytes."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    env.pop("CTXPIPE_DEBUG", None)
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, env=env, cwd=cwd or ROOT, timeout=120)


def q(path: Path | str) -> str:
    return shlex.quote(str(path))


def json_lines(data: bytes) -> list[dict]:
    assert data.endswith(b"\n"), data[-200:]
    objects = [json.loads(line) for line in data.split(b"\n")[:-1]]
    assert all(isinstance(obj, dict) for obj in objects)
    return objects


# --- stdout carries records, stderr diagnostics ------------------------------------------------


def test_records_on_stdout_warnings_on_stderr():
    result = sh(f"{CTXPIPE} convert --to anthropic {q(CLAUDE / 'interrupted.jsonl')} | cat")
    assert result.returncode == 0, result.stderr
    messages = json_lines(result.stdout)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert all(set(m) >= {"role", "content"} for m in messages)
    assert b"ctxpipe" not in result.stdout and b"warning" not in result.stdout
    err = result.stderr.decode().splitlines()
    assert err, "the unanswered tool_use must be reported on stderr"
    assert all(line.startswith("ctxpipe: warning: ") for line in err), err
    assert any("toolu_01E2E" in line for line in err), err


def test_warnings_stay_on_stderr_with_output_file(tmp_path):
    out = tmp_path / "messages.jsonl"
    result = run_cli("convert", "--to", "anthropic", "-o", out, CLAUDE / "interrupted.jsonl")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    assert b"ctxpipe: warning: " in result.stderr
    assert b"ctxpipe" not in out.read_bytes()
    assert [m["role"] for m in json_lines(out.read_bytes())] == ["user", "assistant"]


def test_validate_in_a_pipe_writes_json_reports_only():
    files = " ".join(q(path) for path in CLAUDE_FIXTURES)
    result = sh(f"{CTXPIPE} validate {files} | cat")
    assert result.returncode == 0, result.stderr
    reports = json_lines(result.stdout)
    assert [r["file"] for r in reports] == [str(path) for path in CLAUDE_FIXTURES]
    assert all(r["valid"] for r in reports)
    assert result.stderr == b""


# --- a closed pipe ends quietly ----------------------------------------------------------------

BIG_LINES = 20_000


@pytest.fixture(scope="module")
def big_transcript(tmp_path_factory) -> Path:
    """20,000 lines alternating user and assistant, every uuid distinct (about 6 MB)."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    user = (
        '{"parentUuid":%s,"isSidechain":false,"type":"user","message":{"role":"user","content":"question %d, '
        'padded so that the output is far bigger than a pipe buffer"},"uuid":"%s",'
        '"timestamp":"2026-01-05T10:00:00.000Z","sessionId":"' + SESSION + '"}\n'
    )
    assistant = (
        '{"parentUuid":%s,"isSidechain":false,"type":"assistant","message":{"id":"msg_%06d","type":"message",'
        '"role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"answer"}],'
        '"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":3}},"uuid":"%s",'
        '"timestamp":"2026-01-05T10:00:01.000Z","sessionId":"' + SESSION + '"}\n'
    )
    lines = []
    for n in range(1, BIG_LINES + 1):
        parent = f'"00000000-0000-4000-8000-{n - 1:012d}"' if n > 1 else "null"
        uuid = f"00000000-0000-4000-8000-{n:012d}"
        lines.append((user if n % 2 else assistant) % (parent, n, uuid))
    path.write_text("".join(lines), encoding="utf-8")
    assert path.stat().st_size > 4 * 1024 * 1024
    return path


READERS_OF_A_PIPE = ["head -1", "head -c 10", "true"]


# A pipeline's run is shared by the test of its stderr and the test of its status (the same command).
@functools.cache
def _closed_pipe(big_transcript: Path, target: str, via: str, reader: str) -> subprocess.CompletedProcess[bytes]:
    source = q(big_transcript) if via == "path" else f"< {q(big_transcript)}"
    return sh(f"{CTXPIPE} convert --to {target} {source} | {reader}")


@pytest.mark.parametrize("reader", READERS_OF_A_PIPE)
@pytest.mark.parametrize("target", ["claude-code", "anthropic"])
@pytest.mark.parametrize("via", ["path", "stdin"])
def test_closed_pipe_is_quiet(big_transcript, target, via, reader):
    result = _closed_pipe(big_transcript, target, via, reader)
    assert result.stderr == b"", result.stderr.decode("utf-8", "replace")
    if reader == "head -1":
        [line] = result.stdout.splitlines()
        assert json.loads(line)["message" if target == "claude-code" else "content"]


@pytest.mark.parametrize("reader", READERS_OF_A_PIPE)
@pytest.mark.parametrize("target", ["claude-code", "anthropic"])
@pytest.mark.parametrize("via", ["path", "stdin"])
def test_closed_pipe_exits_0(big_transcript, target, via, reader):
    result = _closed_pipe(big_transcript, target, via, reader)
    assert result.returncode == 0, result.stderr  # under pipefail: ctxpipe's own status
    assert result.stderr == b""


@functools.cache
def _mid_pipeline(big_transcript: Path) -> subprocess.CompletedProcess[bytes]:
    return sh(f"{CTXPIPE} convert --to claude-code {q(big_transcript)} | {CTXPIPE} convert --to anthropic | head -2")


def test_closed_pipe_in_the_middle_of_a_pipeline_is_quiet(big_transcript):
    result = _mid_pipeline(big_transcript)
    assert result.stderr == b""
    assert [m["role"] for m in json_lines(result.stdout)] == ["user", "assistant"]


def test_closed_pipe_in_the_middle_of_a_pipeline_exits_0(big_transcript):
    result = _mid_pipeline(big_transcript)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""


# --- stages compose ----------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", CLAUDE_FIXTURES, ids=lambda p: p.stem)
def test_identity_stages_compose_into_validate(fixture):
    result = sh(f"{CTXPIPE} convert --to claude-code {q(fixture)} | {CTXPIPE} convert --to claude-code | {CTXPIPE} validate --json")
    assert result.returncode == 0, result.stderr
    [report] = json_lines(result.stdout)
    assert report["file"] == "-"
    assert report["format"] == "claude-code"
    assert report["valid"] is True
    assert report["entries"] == len(fixture.read_bytes().splitlines())


@pytest.mark.parametrize("fixture", CLAUDE_FIXTURES, ids=lambda p: p.stem)
def test_identity_stages_are_byte_identical(fixture):
    result = sh(f"{CTXPIPE} convert --to claude-code {q(fixture)} | {CTXPIPE} convert --to claude-code -")
    assert result.returncode == 0, result.stderr
    assert result.stdout == fixture.read_bytes()


@pytest.mark.parametrize("name", ["basic", "parallel"])
def test_anthropic_round_trip_is_stable(name):
    fixture = CLAUDE / f"{name}.jsonl"
    first = sh(f"{CTXPIPE} convert --to anthropic {q(fixture)}")
    assert first.returncode == 0, first.stderr
    assert json_lines(first.stdout), "the first conversion produced no messages"
    back = f"{CTXPIPE} convert --to claude-code --session-id {SESSION} --start-time {START}"
    again = sh(f"{CTXPIPE} convert --to anthropic {q(fixture)} | {back} | {CTXPIPE} convert --to anthropic")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout


@pytest.mark.parametrize("name", ["basic", "parallel"])
def test_rebuilt_claude_code_is_valid_and_deterministic(name):
    fixture = CLAUDE / f"{name}.jsonl"
    back = f"{CTXPIPE} convert --to anthropic {q(fixture)} | {CTXPIPE} convert --to claude-code --session-id {SESSION} --start-time {START}"
    one, two = sh(back), sh(back)
    assert one.returncode == two.returncode == 0, (one.stderr, two.stderr)
    assert one.stdout == two.stdout  # fixed session id and start time: same bytes every run
    lines = json_lines(one.stdout)
    assert {line["sessionId"] for line in lines} == {SESSION}
    checked = sh(f"{back} | {CTXPIPE} validate --json")
    assert checked.returncode == 0, checked.stderr
    [report] = json_lines(checked.stdout)
    assert report["valid"] is True and report["format"] == "claude-code"


# --- -o FILE -----------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["claude-code", "anthropic"])
@pytest.mark.parametrize("flag", ["-o", "--output"])
def test_output_file_gets_the_records_and_stdout_nothing(target, flag, tmp_path):
    fixture = CLAUDE / "basic.jsonl"
    out = tmp_path / "out.jsonl"
    written = sh(f"{CTXPIPE} convert --to {target} {flag} {q(out)} {q(fixture)}")
    printed = sh(f"{CTXPIPE} convert --to {target} {q(fixture)}")
    assert written.returncode == printed.returncode == 0, (written.stderr, printed.stderr)
    assert written.stdout == b""
    assert written.stderr == b""
    assert out.read_bytes() == printed.stdout != b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temporary file left


def test_output_file_from_stdin_in_a_pipe(tmp_path):
    out = tmp_path / "out.jsonl"
    fixture = CLAUDE / "parallel.jsonl"
    result = sh(f"cat {q(fixture)} | {CTXPIPE} convert --to claude-code -o {q(out)}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    assert out.read_bytes() == fixture.read_bytes()


# --- help --------------------------------------------------------------------------------------


def _registered_commands() -> list[str]:
    from ctxpipe.cli.app import command_names

    return sorted(command_names())


def test_known_commands_are_registered():
    assert {"convert", "validate"} <= set(_registered_commands())


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("command", [[], *([name] for name in _registered_commands())], ids=lambda c: " ".join(c) or "ctxpipe")
def test_help_exits_0_with_an_example(command, flag):
    result = run_cli(*command, flag)
    assert result.returncode == 0, result.stderr
    assert b"Example" in result.stdout
    assert b"Traceback" not in result.stderr
    assert b"Usage" in result.stdout


# --- start-up stays light ----------------------------------------------------------------------

IMPORT_ONLY = f"""
import json, sys
import ctxpipe.cli.app
print(json.dumps(sorted(name for name in {HEAVY!r} if name in sys.modules)))
"""

IN_PROCESS = f"""
import json, sys
sys.argv = ["ctxpipe", *sys.argv[1:]]
from ctxpipe.cli.app import main
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code or 0
sys.stdout.flush()
heavy = sorted(name for name in {HEAVY!r} if name in sys.modules)
print("HEAVY " + json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def _python(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("CTXPIPE_DEBUG", None)
    return subprocess.run([sys.executable, *args], capture_output=True, env=env, cwd=ROOT, timeout=120)


def test_importing_the_cli_imports_no_heavy_library():
    result = _python("-c", IMPORT_ONLY)
    assert result.returncode == 0, result.stderr
    heavy = json.loads(result.stdout)
    print("heavy modules after importing ctxpipe.cli.app:", heavy)
    assert heavy == []


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "--to", "claude-code", str(CLAUDE / "basic.jsonl")],
        ["convert", "--to", "anthropic", str(CLAUDE / "basic.jsonl")],
        ["--help"],
        ["convert", "--help"],
    ],
    ids=["convert-claude-code", "convert-anthropic", "help", "convert-help"],
)
def test_running_a_command_imports_no_heavy_library(args):
    result = _python("-c", IN_PROCESS, *args)
    report_lines = [line for line in result.stderr.decode().splitlines() if line.startswith("HEAVY ")]
    assert len(report_lines) == 1, result.stderr
    report = json.loads(report_lines[0][len("HEAVY ") :])
    print(" ".join(args), "->", report)
    assert report["code"] == 0, result.stderr
    assert result.stdout, "the command printed nothing"
    if args[:3] == ["convert", "--to", "claude-code"]:
        assert result.stdout == (CLAUDE / "basic.jsonl").read_bytes()
    assert report["heavy"] == []


@pytest.mark.parametrize("argv", [["--version"], ["-V"], ["hook", "--help"], ["--help"]])
def test_what_answers_before_anything_loads_never_ends_in_a_traceback(argv: list[str]) -> None:
    # A full disk behind stdout: one line and exit 1; a closed stdout: exit 1, quietly.
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    command = [sys.executable, "-m", "ctxpipe", *argv]
    with open("/dev/full", "wb") as full:
        result = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, cwd=ROOT, timeout=60)
    assert result.returncode == 1 and result.stderr.decode().splitlines() == ["ctxpipe: error: No space left on device"]
    closed = subprocess.run([*command], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, timeout=60, close_fds=True)
    assert closed.returncode == 0 and closed.stderr == b""
    shut = subprocess.run(["sh", "-c", '"$@" >&-', "sh", *command], stderr=subprocess.PIPE, cwd=ROOT, timeout=60)
    assert shut.returncode in (0, 1) and b"Traceback" not in shut.stderr, shut.stderr.decode()
