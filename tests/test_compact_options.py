"""`compact` offers every option of the stages it runs, under the same name, help and limits.

The options are declared once (each stage's settings in its core module, expanded by cli/flags.py)
and used by each stage command and by compact; the first test reads the registered commands, so a stage option added, renamed or given
another default, range or help on one side only fails here. The others check that compact hands
each option to its stage: the output is what the option asks for.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from enum import Enum
from pathlib import Path
from typing import Any

import orjson
import pytest
from ctxpipe.jobs.pipeline import GIVEN_BY_COMPACT, PIPELINE
from helpers import FIXTURES, ROOT, run_cli

STAGES = tuple(stage.name for stage in PIPELINE)
# The stages' own input, output and reporting: compact has its own (--out-dir, --in-place, --json).
IO_OPTIONS = {"--output", "--report", "--report-json", "--ledger", "--unbuffered", "--plan", "--from", "--json"}
# Same name, wider meaning in compact (its help says so): --force also summarizes; --model also
# sets the window, the price table and the llm engine's model.
COMPACT_MEANING = {f"--{name}" for name in GIVEN_BY_COMPACT}
NOW = "2026-05-01T00:00:00Z"
DETERMINISTIC = ("--source", "transcript", "--now", NOW)


def commands() -> dict[str, Any]:
    import typer.main
    from ctxpipe.cli.app import app

    return typer.main.get_command(app).commands  # type: ignore[attr-defined,no-any-return]


def options(command: Any) -> dict[str, Any]:
    return {param.opts[0]: param for param in command.params if param.opts[0].startswith("-")}


def described(param: Any) -> dict[str, Any]:
    """What a user sees of an option and what limits it: names, help, default, range, kind, check."""
    info = param.type_descriptor.parameter_info
    default = param.default.value if isinstance(param.default, Enum) else param.default
    return {
        "names": sorted(param.opts),
        "negation": param.secondary_opts,
        "help": param.help,
        "default": default,
        "min": param.min,
        "max": param.max,
        "flag": param.is_flag,
        "type": param.type_descriptor.annotation,
        "show_default": param.show_default,
        "check": info.callback,
    }


def test_compact_offers_every_stage_option_with_the_same_name_help_default_and_limits() -> None:
    registered = commands()
    compact = options(registered["compact"])
    problems = []
    for stage in STAGES:
        for name, param in options(registered[stage]).items():
            if name in IO_OPTIONS:
                continue
            if name not in compact:
                problems.append(f"{stage} {name}: missing from compact")
                continue
            mine, theirs = described(param), described(compact[name])
            if name in COMPACT_MEANING:
                mine, theirs = mine["names"], theirs["names"]
            if mine != theirs:
                problems.append(f"{stage} {name}: {mine} != compact's {theirs}")
    assert not problems, "\n".join(problems)


def test_the_exceptions_name_real_options() -> None:
    """A stale entry in the lists above would hide a drift."""
    registered = commands()
    stage_names = {name for stage in STAGES for name in options(registered[stage])}
    assert IO_OPTIONS <= stage_names and COMPACT_MEANING <= stage_names
    assert COMPACT_MEANING <= set(options(registered["compact"]))


def test_no_long_flag_is_declared_inline_in_two_cli_modules() -> None:
    """A flag shared by commands is declared once (an alias or bundle in cli/options.py or cli/budget_options.py,
    or a stage's settings field): no command module spells out a flag another CLI module spells too."""
    spelled = re.compile(r'(?:typer|declare)\.(?:Option|Argument)\(\s*"(--[a-z0-9-]+)')
    where: dict[str, set[str]] = {}
    for module in sorted((ROOT / "cli").rglob("*.py")):
        for flag in set(spelled.findall(module.read_text())):
            where.setdefault(flag.split("/")[0], set()).add(module.relative_to(ROOT).as_posix())
    assert where, "the scan found no flags: the pattern no longer matches how options are declared"
    repeated = {flag: sorted(modules) for flag, modules in where.items() if len(modules) > 1}
    assert not repeated, repeated


def test_the_stage_options_are_declared_in_the_core_only() -> None:
    """No CLI module spells a stage setting's flag: the stage commands and compact expand the settings."""
    import dataclasses

    from ctxpipe.core.setting import flag_of
    from ctxpipe.jobs.pipeline import STAGES as REGISTRY

    flags = {flag.name for stage in REGISTRY for item in dataclasses.fields(stage.settings) if (flag := flag_of(item)) is not None}
    assert {"--keep-recent", "--engine", "--root", "--no-marker", "--keep-last"} <= flags
    for module in sorted((ROOT / "cli").rglob("*.py")):
        source = module.read_text()
        for flag in flags - COMPACT_MEANING:
            assert not re.search(rf'(?:typer|declare)\.Option\(\s*"{flag}"', source), f"{module.name} declares {flag} again"


# --- compact hands each option to its stage ---------------------------------------------------------


def compact(*args: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return run_cli("compact", *args, env={"ANTHROPIC_API_KEY": "", **(env or {})}, cwd=ROOT)


def compacted(tmp_path: Path, fixture: str, *args: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(report, output lines) of `compact --out-dir` on one fixture."""
    folder = tmp_path / f"in-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    shutil.copy(FIXTURES / "claude-code" / fixture, folder / fixture)
    out = tmp_path / f"out-{folder.name}"
    result = compact(*DETERMINISTIC, "--out-dir", out, *args, folder / fixture)
    assert result.returncode == 0, result.stderr.decode()
    [report] = [json.loads(line) for line in result.stdout.splitlines()]
    return report, [orjson.loads(line) for line in (out / fixture).read_bytes().splitlines()]


def stage(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in report["stages"] if s["stage"] == name)


def summary_stats(lines: list[dict[str, Any]]) -> tuple[int, str]:
    """(messages kept after the summary, the summary's text)."""
    boundary = max(i for i, o in enumerate(lines) if o.get("subtype") == "compact_boundary")
    summary = lines[boundary + 1]["message"]["content"]
    kept = [o for o in lines[boundary + 2 :] if o.get("type") in ("user", "assistant") and not o.get("isMeta")]
    return len(kept), summary if isinstance(summary, str) else json.dumps(summary)


def test_keep_fraction_and_keep_last_reach_the_summary(tmp_path: Path) -> None:
    _, all_but_two = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "offline", "--keep-last", "2")
    _, half = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "offline", "--keep-fraction", "0.5")
    _, none = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "offline", "--keep-fraction", "0")
    kept_two, kept_half, kept_none = (summary_stats(lines)[0] for lines in (all_but_two, half, none))
    assert kept_two >= 2 and kept_half > kept_none and kept_none <= 1, (kept_two, kept_half, kept_none)
    result = compact(*DETERMINISTIC, "--keep-fraction", "1.5", FIXTURES / "claude-code" / "basic.jsonl")
    assert result.returncode == 2 and b"--keep-fraction" in result.stderr


def test_no_verify_leaves_the_verifier_out(tmp_path: Path) -> None:
    checked, _ = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "offline", "--keep-last", "2")
    unchecked, _ = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "offline", "--keep-last", "2", "--no-verify")
    assert stage(checked, "summarize")["verification"] is not None
    assert stage(unchecked, "summarize")["verification"] is None
    assert "verifier recall" not in stage(unchecked, "summarize")["note"]


def test_drop_history_leaves_out_the_lines_before_the_summary(tmp_path: Path) -> None:
    _, kept = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "offline", "--keep-last", "2")
    _, dropped = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "offline", "--keep-last", "2", "--drop-history")
    assert kept[0].get("subtype") != "compact_boundary"
    assert dropped[0].get("subtype") == "compact_boundary" and dropped[1].get("isCompactSummary") is True
    assert summary_stats(kept)[0] == summary_stats(dropped)[0]


def test_no_marker_and_tools_reach_microcompact_and_collapse(tmp_path: Path) -> None:
    report, lines = compacted(tmp_path, "repeats.jsonl", "--keep-recent", "1", "--force", "--engine", "offline", "--keep-last", "2")
    assert stage(report, "microcompact")["changed"] and any(o.get("subtype") == "microcompact_boundary" for o in lines)
    report, lines = compacted(tmp_path, "repeats.jsonl", "--keep-recent", "1", "--force", "--engine", "offline", "--keep-last", "2", "--no-marker")
    assert stage(report, "microcompact")["changed"]
    assert not [o for o in lines if o.get("subtype") in ("microcompact_boundary", "ctxpipe_collapse")]
    # A tool the transcript never calls: nothing for microcompact to clear.
    report, _ = compacted(tmp_path, "repeats.jsonl", "--keep-recent", "1", "--force", "--engine", "offline", "--keep-last", "2", "--tools", "NoSuchTool")
    assert not stage(report, "microcompact")["changed"]


def test_cache_aware_replaces_the_time_trigger(tmp_path: Path) -> None:
    timed, _ = compacted(tmp_path, "repeats.jsonl", "--keep-recent", "1", "--gap-minutes", "0")
    aware, _ = compacted(tmp_path, "repeats.jsonl", "--keep-recent", "1", "--gap-minutes", "0", "--cache-aware", "--clear-at-least", "100000000")
    assert stage(timed, "microcompact")["changed"]
    assert not stage(aware, "microcompact")["changed"], stage(aware, "microcompact")["note"]
    prices = tmp_path / "prices.json"
    prices.write_text("not json")
    result = compact(*DETERMINISTIC, "--cache-aware", "--prices", prices, FIXTURES / "claude-code" / "repeats.jsonl")
    assert result.returncode == 1 and "not a price table" in result.stderr.decode() and b"Traceback" not in result.stderr


def test_session_memory_is_one_sessions_notes(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Current State\nFixing parse_date; the code word is PERIWINKLE.\n")
    report, lines = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "session-memory", "--session-memory", notes, "--keep-last", "2")
    assert stage(report, "summarize")["engine"] == "session-memory"
    assert "PERIWINKLE" in summary_stats(lines)[1]
    # A folder holds many sessions: one notes file cannot be theirs all.
    result = compact(*DETERMINISTIC, "--force", "--session-memory", notes, "--out-dir", tmp_path / "o", FIXTURES / "claude-code")
    assert result.returncode == 2 and "--session-memory" in result.stderr.decode()
    missing = compact(*DETERMINISTIC, "--force", "--session-memory", tmp_path / "absent.md", FIXTURES / "claude-code" / "basic.jsonl")
    assert missing.returncode != 0 and "absent.md" in missing.stderr.decode() and b"Traceback" not in missing.stderr


def test_source_is_checked_like_restores(tmp_path: Path) -> None:
    for command in ("compact", "restore"):
        result = run_cli(command, "--source", "web", FIXTURES / "claude-code" / "basic.jsonl", cwd=ROOT)
        assert result.returncode == 2 and "--source" in result.stderr.decode()


@pytest.mark.parametrize("flag", ["--allow-outside-root", "--describe-images"])
def test_flags_without_a_visible_effect_here_are_accepted(flag: str, tmp_path: Path) -> None:
    """--describe-images acts on the llm engine's request and --allow-outside-root on files outside
    the root (tests/test_summarize.py, tests/test_restore.py cover them); compact takes both."""
    report, _ = compacted(tmp_path, "basic.jsonl", "--force", "--engine", "offline", "--keep-last", "2", flag)
    assert stage(report, "summarize")["changed"]


# --- -o and --ledger: compact writes one transcript as every stage does -----------------------------


@pytest.mark.parametrize("drop_history", [False, True], ids=["history-kept", "history-dropped"])
@pytest.mark.parametrize("name", sorted(path.name for path in (FIXTURES / "claude-code").glob("*.jsonl")))
def test_compact_ledger_and_expand_give_back_the_input_byte_for_byte(name: str, drop_history: bool, tmp_path: Path) -> None:
    source = FIXTURES / "claude-code" / name
    ledger, output = tmp_path / "undo.jsonl", tmp_path / "out.jsonl"
    args = ["compact", "--force", "--engine", "offline", "--keep-last", "2", *DETERMINISTIC, *(["--drop-history"] if drop_history else [])]
    to_stdout = run_cli(*args, source)
    written = run_cli(*args, "--ledger", ledger, "-o", output, source)
    assert written.returncode == to_stdout.returncode == 0, written.stderr.decode()
    assert written.stdout == b"" and output.read_bytes() == to_stdout.stdout  # -o: the same bytes, in a file
    changed = output.read_bytes() != source.read_bytes()
    assert len(ledger.read_bytes().splitlines()) == (1 if changed else 0)  # one record for the whole run, none for no change
    expanded = run_cli("expand", "--ledger", ledger, output)
    assert expanded.returncode == 0, expanded.stderr.decode()
    assert expanded.stdout == source.read_bytes()


def test_a_ledger_shared_by_a_stage_and_compact_in_a_pipe_undoes_both(tmp_path: Path) -> None:
    source = FIXTURES / "claude-code" / "repeats.jsonl"
    ledger = tmp_path / "undo.jsonl"
    first = run_cli("microcompact", "--force", "--keep-recent", "1", "--ledger", ledger, *DETERMINISTIC[2:], source)
    second = run_cli("compact", "--force", "--engine", "offline", "--keep-last", "2", "--ledger", ledger, *DETERMINISTIC, "-", stdin=first.stdout)
    assert first.returncode == second.returncode == 0, second.stderr.decode()
    expanded = run_cli("expand", "--ledger", ledger, "-", stdin=second.stdout)
    assert expanded.stdout == source.read_bytes()
    assert b"undid 2 stage runs" in expanded.stderr


@pytest.mark.parametrize("flag", [["-o", "out.jsonl"], ["--ledger", "undo.jsonl"]], ids=["output", "ledger"])
def test_o_and_ledger_take_one_transcript_and_not_with_out_dir(flag: list[str], tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    shutil.copy(FIXTURES / "claude-code" / "basic.jsonl", folder / "a.jsonl")
    for extra in ([], ["--out-dir", str(tmp_path / "out")]):
        result = run_cli("compact", *flag, *extra, folder, cwd=tmp_path)
        assert result.returncode == 2 and result.stdout == b"", result.stderr
        assert flag[0].lstrip("-") in result.stderr.decode() or "--output" in result.stderr.decode()
    assert not (tmp_path / flag[1]).exists()
