"""Golden cases: fixtures/<command>/<case>.args run on <case>.in.jsonl must print <case>.out.jsonl.

Optional <case>.err holds the exact stderr, <case>.code the exit code (default 0). Every command
the CLI registers must have at least one case.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, registered_commands, run_cli

# Commands whose output is not a transcript or report worth freezing would be listed here.
COMMANDS_WITHOUT_GOLDEN: set[str] = set()


def _cases() -> list[Path]:
    return sorted(FIXTURES.glob("*/*.args"))


@pytest.mark.parametrize("args_file", _cases(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_case(args_file: Path) -> None:
    case = args_file.with_suffix("")
    command = args_file.parent.name
    stdin = case.with_suffix(".in.jsonl").read_bytes()
    result = run_cli(command, *shlex.split(args_file.read_text()), stdin=stdin, cwd=ROOT)
    expected_code = int(case.with_suffix(".code").read_text()) if case.with_suffix(".code").exists() else 0
    assert result.returncode == expected_code, result.stderr.decode()
    assert result.stdout == case.with_suffix(".out.jsonl").read_bytes()
    err_file = case.with_suffix(".err")
    if err_file.exists():
        assert result.stderr == err_file.read_bytes()
    else:
        assert b"Traceback" not in result.stderr


def test_every_command_has_a_golden_case() -> None:
    covered = {path.parent.name for path in _cases()}
    missing = [name for name in registered_commands() if name not in covered | COMMANDS_WITHOUT_GOLDEN]
    assert not missing, f"commands without a golden case in fixtures/: {missing}"


def test_identity_goldens_equal_their_input() -> None:
    """The identity cases were written as copies of their inputs: the frozen output must still be."""
    for name in ("identity-claude-code", "anthropic-identity"):
        case = FIXTURES / "convert" / name
        assert case.with_suffix(".out.jsonl").read_bytes() == case.with_suffix(".in.jsonl").read_bytes()


def test_golden_reports_match_the_report_schema() -> None:
    import orjson
    from ctxpipe.jobs import schemas

    reports = sorted((FIXTURES / "validate").glob("*.out.jsonl"))
    assert reports
    for path in reports:
        for line in path.read_bytes().splitlines():
            assert schemas.errors("validate.report.schema.json", orjson.loads(line)) == [], path


def test_golden_transcripts_match_their_format_schema() -> None:
    import orjson
    from ctxpipe.jobs import schemas

    for path in sorted((FIXTURES / "convert").glob("*.out.jsonl")):
        args = (path.parent / path.name.replace(".out.jsonl", ".args")).read_text()
        schema = "anthropic.message.schema.json" if "anthropic" in args.split("--to")[1].split()[0] else "claude-code.entry.schema.json"
        for line in path.read_bytes().splitlines():
            assert schemas.errors(schema, orjson.loads(line)) == [], (path, line[:80])
