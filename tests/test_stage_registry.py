"""A stage is declared once: its settings and run in its core module, its name in pipeline.STAGE_NAMES.

These tests hold the registry to the seed's order, check that each registered stage's command and
`compact` are built from its declaration, and show that a new stage needs nothing else: a toy stage
declared here becomes a working command (reading, writing, reporting, ledger and expand included)
and its options join compact's, with a clash between two stages caught when the CLI is built.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from ctxpipe.cli.flags import Merged, parameters, with_options
from ctxpipe.cli.stages import stage_command
from ctxpipe.core.jsonl import Entry
from ctxpipe.core.setting import flag_of, no_marker, setting
from ctxpipe.core.stage import Outcome, Stage, StageContext
from ctxpipe.core.wire import Wire, sometimes
from ctxpipe.jobs.pipeline import BY_NAME, GIVEN_BY_COMPACT, PIPELINE, STAGES
from helpers import FIXTURES, ok, run_cli
from typer.testing import CliRunner

BASIC = FIXTURES / "claude-code" / "basic.jsonl"


def test_the_registry_is_the_seeds_pipeline_order() -> None:
    assert [stage.name for stage in STAGES] == ["snip", "microcompact", "collapse", "summarize", "restore"]
    assert [stage.name for stage in PIPELINE] == ["microcompact", "collapse", "summarize", "restore"]  # snip needs a range a person chooses
    assert [stage.runs for stage in PIPELINE] == ["always", "always", "over threshold", "after a summary"]
    assert all(BY_NAME[stage.name] is stage for stage in STAGES)


def test_every_setting_is_a_frozen_field_with_a_flag_or_a_library_default() -> None:
    for stage in STAGES:
        assert dataclasses.is_dataclass(stage.settings) and stage.settings.__dataclass_params__.frozen  # type: ignore[attr-defined]  # dataclass internals
        defaults = stage.settings()  # every field has a default: the command with no flags runs
        for item in dataclasses.fields(stage.settings):
            flag = flag_of(item)
            if flag is None:
                assert not item.name.startswith("_") and getattr(defaults, item.name) == item.default
                continue
            assert flag.name.startswith("--") and flag.help.strip(), (stage.name, item.name)


@pytest.mark.parametrize("stage", STAGES, ids=lambda stage: stage.name)
def test_each_stage_command_offers_exactly_its_settings(stage: Stage) -> None:
    """The command's options are the shared ones plus one per flagged field, spelled as declared."""
    import typer.main
    from ctxpipe.cli.app import app

    command = typer.main.get_command(app).commands[stage.name]  # type: ignore[attr-defined]  # a click Group
    offered = {param.opts[0]: param for param in command.params if param.opts and param.opts[0].startswith("--")}
    for item in dataclasses.fields(stage.settings):
        flag = flag_of(item)
        if flag is None:
            continue
        param = offered[flag.name]
        assert param.help == flag.help
        assert (getattr(param, "min", None), getattr(param, "max", None)) == (flag.min, flag.max)
        assert (flag.off in param.secondary_opts) if flag.off else not param.secondary_opts
        if flag.short:
            assert flag.short in param.opts


def test_the_defaults_a_command_passes_are_the_settings_defaults() -> None:
    """With no flags, build() gives exactly Settings(): the CLI and the library run the same stage."""
    from ctxpipe.cli.flags import build

    for stage in STAGES:
        values = {p.name: p.default for p in parameters(stage.settings)}
        built = build(stage.settings, values)
        assert built == stage.settings(), stage.name


# --- a stage declared in a test module: one declaration, one line, and it runs ----------------------


@dataclass(frozen=True)
class TrimSettings:
    max_chars: int = setting(20, "--max-chars", "Cut tool results longer than this many characters.", min=1)
    no_marker: bool = no_marker()


@dataclass(kw_only=True, slots=True)
class TrimExtras(Wire):
    trimmed: int | None = sometimes()


def _run_trim(entries: list[Entry], transcript_format: Any, settings: TrimSettings, context: StageContext) -> Outcome:
    messages = transcript_format.messages(entries)
    changed: dict[int, dict[int, dict[str, Any]]] = {}
    removed = []
    for message in messages:
        for index, block in enumerate(message.content):
            content = block.get("content")
            if block.get("type") == "tool_result" and isinstance(content, str) and len(content) > settings.max_chars:
                changed.setdefault(message.entries[0], {})[index] = {**block, "content": content[: settings.max_chars]}
                removed.append({"tool_use_id": block.get("tool_use_id")})
    if not changed:
        return Outcome(entries, False, "nothing to trim")
    result = [transcript_format.replace_blocks(entry, changed[i]) if i in changed else entry for i, entry in enumerate(entries)]
    return Outcome(result, True, f"trimmed {len(removed)} tool results", TrimExtras(trimmed=len(removed)), removed)


TRIM = Stage("trim", TrimSettings, _run_trim, "Cut long tool results (a stage declared by a test).")


def test_a_new_stage_is_a_working_command(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("trim")(stage_command(TRIM))
    app.command("other")(lambda: None)  # two commands: typer keeps the command name on the command line
    out, report, ledger = tmp_path / "out.jsonl", tmp_path / "report.json", tmp_path / "undo.jsonl"
    result = CliRunner().invoke(
        app, ["trim", "--max-chars", "5", "-o", str(out), "--report-json", str(report), "--ledger", str(ledger), str(BASIC)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    results = [b for line in written for b in (line.get("message") or {}).get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert results and all(len(b["content"]) <= 5 for b in results if isinstance(b["content"], str))
    figures = json.loads(report.read_text())
    # What it says it freed is what `count` finds (here nothing: the recorded usage still anchors the count, and no marker says otherwise).
    assert figures["trimmed"] >= 1 and figures["tokens_freed"] == figures["tokens_before"] - figures["tokens_after"] >= 0
    assert figures["tokens_after"] == json.loads(ok(run_cli("count", "--json", out)).stdout)["tokens"]
    # The ledger the stage kept undoes it, as for a stage of the registry.
    ok(run_cli("expand", "--ledger", ledger, "-o", tmp_path / "back.jsonl", out))
    assert (tmp_path / "back.jsonl").read_bytes() == BASIC.read_bytes()
    # The shared options are there, and the stage's own limits hold.
    bad = CliRunner().invoke(app, ["trim", "--max-chars", "0", str(BASIC)])
    assert bad.exit_code == 2 and "--max-chars" in bad.output


def test_a_new_stages_options_join_compacts_and_a_clash_is_caught() -> None:
    merged = Merged((*[stage.settings for stage in PIPELINE], TrimSettings), GIVEN_BY_COMPACT)
    names = {p.name for p in merged.parameters(["force", "model"])}
    assert "max_chars" in names and "keep_recent" in names and "no_marker" in names  # --no-marker: one option for every stage

    @dataclass(frozen=True)
    class Clashing:
        keep_recent: int = setting(1, "--keep-recent", "Another meaning.")

    with pytest.raises(TypeError, match="keep_recent"):
        Merged((*[stage.settings for stage in PIPELINE], Clashing), GIVEN_BY_COMPACT).parameters(["force", "model"])


@dataclass(frozen=True)
class Depth:
    depth: int = setting(1, "--depth", "How deep.")


@dataclass(frozen=True)
class DepthAgain:
    depth: int = setting(2, "--depth", "How deep, again.")


def _both(a: Depth, b: DepthAgain) -> None:
    pass


def _one(a: Depth, verbose: bool = False) -> tuple[Depth, bool]:
    return a, verbose


def test_with_options_expands_a_bundle_and_refuses_a_name_declared_twice() -> None:
    with pytest.raises(TypeError, match="declared twice"):
        with_options(a=Depth, b=DepthAgain)(_both)
    expanded = with_options(a=Depth)(_one)
    assert [p.name for p in inspect.signature(expanded).parameters.values()] == ["depth", "verbose"]
    assert expanded(depth=3, verbose=True) == (Depth(3), True)


# --- what every stage command prints with --report ----------------------------------------------------


def test_report_details_only_what_a_stage_did() -> None:
    basic = FIXTURES / "claude-code" / "basic.jsonl"
    quiet = ok(run_cli("collapse", "--report", "--now", "2026-05-01T00:00:00Z", basic))
    lines = [line for line in quiet.stderr.decode().splitlines() if line.startswith("ctxpipe: collapse:")]
    assert len(lines) == 1 and "{" not in quiet.stderr.decode()  # its one line; nothing done, nothing detailed
    snipped = ok(run_cli("snip", "--keep-last", "2", "--report", "--now", "2026-05-01T00:00:00Z", basic))
    (detail,) = [line for line in snipped.stderr.decode().splitlines() if line.startswith("ctxpipe: snip: {")]
    report = json.loads(detail.removeprefix("ctxpipe: snip: "))  # one JSON object, nothing after it
    assert report["stage"] == "snip" and report["tokens_freed"] == report["tokens_before"] - report["tokens_after"]


def test_tools_naming_no_tool_clears_nothing() -> None:
    repeats = FIXTURES / "claude-code" / "repeats.jsonl"
    result = ok(run_cli("microcompact", "--force", "--tools", ",", "--now", "2026-05-01T00:00:00Z", repeats))
    assert result.stdout == repeats.read_bytes() and b"nothing to clear" in result.stderr


# A stage's command, looked up as the command line does, and the stage modules loaded by then.
LOOKED_UP = """\
import sys
from ctxpipe.cli.commands import command_function
command_function(sys.argv[1])
print(sorted(name for name in sys.modules if name in {"ctxpipe.core." + stage for stage in ("snip", "microcompact", "collapse", "summarize", "restore")}))
"""


@pytest.mark.parametrize("name", ["snip", "microcompact", "collapse", "restore"])
def test_a_stage_command_loads_its_own_stage_only(name: str) -> None:
    """The registry is made on first use: a stage's command pays for its own module, not for every
    stage's (collapse builds on microcompact's tool calls, so it loads both)."""
    loaded = subprocess.run([sys.executable, "-c", LOOKED_UP, name], capture_output=True, text=True, check=True).stdout
    expected = ["ctxpipe.core.collapse", "ctxpipe.core.microcompact"] if name == "collapse" else [f"ctxpipe.core.{name}"]
    assert loaded.strip() == repr(expected)
    assert [stage.name for stage in STAGES] == ["snip", "microcompact", "collapse", "summarize", "restore"]  # the whole registry, when asked
