"""`ctxpipe api-edits`: the `context_management` request parameter built from a transcript.

Every object the command prints is checked three ways: against schemas/api-edits.report.schema.json,
against the anthropic SDK's own request types (strict, and round-tripped so no key is dropped or
coerced), and, for a few, by sending a real SDK request to a local stub server and comparing the
body it receives. The command is not registered in cli/app.py yet, so the tests build their own
Typer app around it.
"""

from __future__ import annotations

import functools
import json
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import typer
from builders import SONNET, Session, usage
from ctxpipe.cli.commands.api_edits import api_edits
from ctxpipe.core.api_edits import (
    API_DEFAULT_TRIGGER,
    COMPACT_BETA,
    CONTEXT_MANAGEMENT_BETA,
    ApiEditsOptions,
    build_api_edits,
    never_cleared,
    parse_thinking_keep,
    transcript_facts,
)
from ctxpipe.core.model import Message
from ctxpipe.jobs.schemas import errors
from helpers import CLEAN_ENV, FIXTURES
from pydantic import TypeAdapter, ValidationError
from typer.testing import CliRunner

SCHEMA = "api-edits.report.schema.json"
BASIC = FIXTURES / "claude-code" / "basic.jsonl"  # thinking; Bash, Read, Edit; claude-sonnet-4-5
SIDECHAIN = FIXTURES / "claude-code" / "sidechain.jsonl"  # Task in the main chain; no thinking
ANTHROPIC = FIXTURES / "anthropic" / "basic.jsonl"  # Messages API form; thinking; no model recorded
CODEX = FIXTURES / "codex" / "rollout.jsonl"

THINKING_ALL = {"type": "clear_thinking_20251015", "keep": "all"}


def tool_edit(trigger: int = 167_000, keep: int = 5, **extra: Any) -> dict[str, Any]:
    return {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": trigger}, "keep": {"type": "tool_uses", "value": keep}, **extra}


# --- running the command ---------------------------------------------------------------------------


def make_app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]})
    app.command("api-edits")(api_edits)
    app.command("unused", hidden=True)(lambda: None)  # two commands: the name must be given, as in ctxpipe
    return app


APP = make_app()
RUNNER = CliRunner()


@functools.cache
def sdk_adapters() -> tuple[TypeAdapter[Any], TypeAdapter[Any]]:
    """The SDK's context-management config and edit types as adapters, made on first use (the SDK's
    types take a second to import, and most workers never run these tests). Kept for the session: a
    lazily validated Iterable keeps pointing into its adapter, which must outlive it."""
    from anthropic.types.beta import BetaContextManagementConfigParam
    from anthropic.types.beta.beta_context_management_config_param import Edit

    return TypeAdapter(BetaContextManagementConfigParam), TypeAdapter(Edit)


def invoke(*args: str | Path, stdin: bytes | None = None, env: dict[str, str] | None = None):
    return RUNNER.invoke(APP, ["api-edits", *map(str, args)], input=stdin, env={**CLEAN_ENV, **(env or {})})


def sdk_accepts(context_management: Any) -> bool:
    """The SDK's request type accepts this object as it is: strict types, and nothing dropped or coerced.

    Pydantic validates a TypedDict's `Iterable` lazily and ignores unknown keys, so the edits are
    materialised and the result compared with the input.
    """
    config, edit_type = sdk_adapters()
    try:
        validated = config.validate_python(context_management, strict=True)
        edits = list(validated["edits"])  # the lazy part: each edit checked against the SDK's union
        for edit in context_management["edits"]:
            edit_type.validate_python(edit, strict=True)
    except (ValidationError, KeyError, TypeError):
        return False
    return {**validated, "edits": [_plain(edit) for edit in edits]} == context_management


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def run(*args: str | Path, stdin: bytes | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run with the report on one JSON line; check it against the schema and the SDK types."""
    result = invoke(*args, stdin=stdin, env=env)
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.exception)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    report = json.loads(lines[0])
    assert errors(SCHEMA, report) == [], report
    assert sdk_accepts(report["context_management"]), report
    return report


def usage_error(*args: str | Path, stdin: bytes | None = None) -> str:
    result = invoke(*args, stdin=stdin if stdin is not None else BASIC.read_bytes())
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    return result.stderr


# --- defaults from the fixtures --------------------------------------------------------------------


def test_basic_fixture_defaults() -> None:
    report = run(BASIC)
    assert report == {"betas": [CONTEXT_MANAGEMENT_BETA], "context_management": {"edits": [THINKING_ALL, tool_edit()]}}


def test_sidechain_fixture_excludes_task_and_has_no_thinking_edit() -> None:
    report = run(SIDECHAIN)
    assert report["context_management"]["edits"] == [tool_edit(exclude_tools=["Task"])]


def test_anthropic_fixture_has_thinking_and_the_unknown_model_threshold() -> None:
    report = run(ANTHROPIC)
    assert report["context_management"]["edits"] == [THINKING_ALL, tool_edit()]
    assert run("--format", "anthropic", ANTHROPIC) == report


def test_codex_rollout_gets_the_tool_edit_only() -> None:
    # At Codex's own threshold: 90% of the model's window (272,000, recorded as its 95 %: 258,400).
    assert run(CODEX)["context_management"]["edits"] == [tool_edit(244_800)]


def test_stdin_gives_what_the_path_gives() -> None:
    for fixture in (BASIC, SIDECHAIN, ANTHROPIC):
        assert run(stdin=fixture.read_bytes()) == run(fixture) == run("-", stdin=fixture.read_bytes())


def agent_session() -> Session:
    """A session using an MCP tool, an Agent subagent and Read, with thinking."""
    session = Session()
    session.user("Look into issue 12 and fix it.")
    first = session.tool_id()
    session.response([{"type": "tool_use", "id": first, "name": "mcp__github__get_issue", "input": {"number": 12}}], usage(5_000))
    session.tool_result(first, "Issue 12: the parser drops the last line.")
    second = session.tool_id()
    session.response(
        [
            {"type": "thinking", "thinking": "Let a subagent find the parser.", "signature": "c2ln"},
            {"type": "tool_use", "id": second, "name": "Agent", "input": {"prompt": "Find the parser"}},
        ],
        usage(6_000),
    )
    session.tool_result(second, "The parser is in src/parse.py.")
    third = session.tool_id()
    session.response([{"type": "tool_use", "id": third, "name": "Read", "input": {"file_path": "src/parse.py"}}], usage(7_000))
    session.tool_result(third, "def parse(text): ...")
    session.text("Fixed.", usage(8_000))
    return session


def test_agent_and_mcp_tools_are_excluded_by_default() -> None:
    report = run(stdin=agent_session().to_bytes())
    assert report["context_management"]["edits"] == [THINKING_ALL, tool_edit(exclude_tools=["Agent", "mcp__github__get_issue"])]


def test_only_the_active_context_counts() -> None:
    """An MCP tool and thinking before a compact boundary are gone from the context: no exclusion, no thinking edit."""
    session = agent_session()
    session.compact()
    tool = session.tool_id()
    session.response([{"type": "tool_use", "id": tool, "name": "Bash", "input": {"command": "pytest"}}], usage(9_000))
    session.tool_result(tool, "1 passed")
    session.text("All green.", usage(9_500))
    assert run(stdin=session.to_bytes())["context_management"]["edits"] == [tool_edit()]


def test_empty_input_still_gives_a_valid_request() -> None:
    assert run(stdin=b"")["context_management"]["edits"] == [tool_edit()]


@pytest.mark.parametrize("args_file", sorted((FIXTURES / "api-edits").glob("*.args")), ids=lambda p: p.stem)
def test_golden_cases_in_process(args_file: Path) -> None:
    """fixtures/api-edits holds the golden cases test_golden.py runs once the command is registered."""
    case = args_file.with_suffix("")
    result = invoke(*shlex.split(args_file.read_text()), stdin=case.with_suffix(".in.jsonl").read_bytes())
    assert result.exit_code == 0, result.stderr
    expected = case.with_suffix(".out.jsonl").read_bytes()
    assert result.stdout_bytes == expected
    report = json.loads(expected)
    assert errors(SCHEMA, report) == [] and sdk_accepts(report["context_management"])


def test_there_are_golden_cases() -> None:
    assert len(list((FIXTURES / "api-edits").glob("*.args"))) >= 3


# --- the trigger follows the budget ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, env, trigger",
    [
        ((), {}, 167_000),
        (("--model", "claude-sonnet-4-5[1m]"), {}, 967_000),
        (("--window", "500000"), {}, 467_000),
        (("--autocompact-pct", "50"), {}, 90_000),
        (("--max-output-tokens", "8000"), {}, 179_000),
        ((), {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "60"}, 108_000),
        (("--model", "claude-3-5-sonnet-20241022"), {}, 178_808),
        (("--no-auto-compact",), {}, API_DEFAULT_TRIGGER),
        ((), {"DISABLE_AUTO_COMPACT": "1"}, API_DEFAULT_TRIGGER),
        (("--trigger", "120000"), {}, 120_000),
        (("--trigger", "120000", "--model", "claude-sonnet-4-5[1m]"), {}, 120_000),
    ],
)
def test_token_trigger(args: tuple[str, ...], env: dict[str, str], trigger: int) -> None:
    edit = run(*args, BASIC, env=env)["context_management"]["edits"][1]
    assert edit["trigger"] == {"type": "input_tokens", "value": trigger}


def test_trigger_in_tool_uses() -> None:
    edit = run("--trigger-tool-uses", "30", BASIC)["context_management"]["edits"][1]
    assert edit == {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 30}, "keep": {"type": "tool_uses", "value": 5}}


def test_both_triggers_are_a_usage_error() -> None:
    assert "not both" in usage_error("--trigger", "1000", "--trigger-tool-uses", "3")


@pytest.mark.parametrize("flag", ["--trigger", "--trigger-tool-uses", "--keep", "--clear-at-least", "--compact-trigger"])
def test_counts_below_one_are_usage_errors(flag: str) -> None:
    extra = ["--compact"] if flag == "--compact-trigger" else []
    assert flag in usage_error(*extra, flag, "0")


# --- every flag of the tool edit ---------------------------------------------------------------------


def test_keep() -> None:
    assert run("--keep", "2", BASIC)["context_management"]["edits"][1]["keep"] == {"type": "tool_uses", "value": 2}
    assert run("--keep", "1", BASIC)["context_management"]["edits"][1]["keep"] == {"type": "tool_uses", "value": 1}


def test_clear_at_least() -> None:
    edit = run("--clear-at-least", "40000", BASIC)["context_management"]["edits"][1]
    assert edit == tool_edit(clear_at_least={"type": "input_tokens", "value": 40_000})


def test_exclude_tool_adds_to_the_derived_ones_once_each() -> None:
    edit = run("--exclude-tool", "Write", "--exclude-tool", "Task", "--exclude-tool", "Edit", SIDECHAIN)["context_management"]["edits"][0]
    assert edit["exclude_tools"] == ["Task", "Write", "Edit"]
    assert run("--exclude-tool", "Edit", BASIC)["context_management"]["edits"][1]["exclude_tools"] == ["Edit"]


def test_clear_tool_inputs_flag() -> None:
    assert run("--clear-tool-inputs", BASIC)["context_management"]["edits"][1] == tool_edit(clear_tool_inputs=True)


def test_clear_tool_inputs_for_names() -> None:
    edit = run("--clear-tool-inputs-for", "Bash", "--clear-tool-inputs-for", "Read", "--clear-tool-inputs-for", "Bash", BASIC)["context_management"]["edits"][1]
    assert edit == tool_edit(clear_tool_inputs=["Bash", "Read"])


def test_clear_tool_inputs_both_ways_is_a_usage_error() -> None:
    assert "clear_tool_inputs" in usage_error("--clear-tool-inputs", "--clear-tool-inputs-for", "Bash")


# --- the thinking edit -------------------------------------------------------------------------------


def test_thinking_flag_adds_the_edit_first() -> None:
    edits = run("--thinking", SIDECHAIN)["context_management"]["edits"]
    assert edits == [THINKING_ALL, tool_edit(exclude_tools=["Task"])]


def test_no_thinking_leaves_it_out() -> None:
    assert run("--no-thinking", BASIC)["context_management"]["edits"] == [tool_edit()]


@pytest.mark.parametrize(
    "given, keep", [("2", {"type": "thinking_turns", "value": 2}), ("1", {"type": "thinking_turns", "value": 1}), ("ALL", "all"), ("all", "all")]
)
def test_thinking_keep(given: str, keep: Any) -> None:
    assert run("--thinking-keep", given, BASIC)["context_management"]["edits"][0] == {"type": "clear_thinking_20251015", "keep": keep}


def test_thinking_keep_without_thinking_blocks_changes_nothing() -> None:
    assert run("--thinking-keep", "3", SIDECHAIN) == run(SIDECHAIN)


@pytest.mark.parametrize("bad", ["0", "-1", "some", "1.5"])
def test_bad_thinking_keep_is_a_usage_error(bad: str) -> None:
    assert "--thinking-keep" in usage_error("--thinking-keep", bad)


def test_thinking_keep_with_no_thinking_is_a_usage_error() -> None:
    assert "--no-thinking" in usage_error("--no-thinking", "--thinking-keep", "2")


# --- the compact edit --------------------------------------------------------------------------------


def test_compact_defaults() -> None:
    report = run("--compact", BASIC)
    assert report["betas"] == [CONTEXT_MANAGEMENT_BETA, COMPACT_BETA]
    assert report["context_management"]["edits"] == [
        THINKING_ALL,
        tool_edit(),
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150_000}},
    ]


def test_compact_options() -> None:
    report = run("--compact", "--compact-trigger", "90000", "--compact-instructions", "Keep every file path.", "--pause-after-compaction", SIDECHAIN)
    assert report["betas"] == [CONTEXT_MANAGEMENT_BETA, COMPACT_BETA]
    assert report["context_management"]["edits"][-1] == {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 90_000},
        "instructions": "Keep every file path.",
        "pause_after_compaction": True,
    }


def test_no_compact_no_compact_beta() -> None:
    report = run(BASIC)
    assert COMPACT_BETA not in report["betas"]
    assert all(edit["type"] != "compact_20260112" for edit in report["context_management"]["edits"])


@pytest.mark.parametrize("args", [("--compact-trigger", "90000"), ("--compact-instructions", "x"), ("--pause-after-compaction",)])
def test_compact_options_need_compact(args: tuple[str, ...]) -> None:
    assert "--compact" in usage_error(*args)


def test_the_flags_checks_come_before_the_librarys() -> None:
    """A flag given without the one it needs is named first, as the command always did, though the
    library would refuse the two triggers too."""
    assert "only apply with --compact" in usage_error("--trigger", "1000", "--trigger-tool-uses", "3", "--compact-trigger", "9")
    assert "cannot apply with --no-thinking" in usage_error("--trigger", "1000", "--trigger-tool-uses", "3", "--no-thinking", "--thinking-keep", "2")


# --- the options: declared once, on ApiEditsOptions' fields ----------------------------------------------


def test_each_option_is_an_options_field_as_declared() -> None:
    """The command offers one option per ApiEditsOptions field, spelled, described and limited as the field says."""
    import dataclasses

    import typer.main
    from ctxpipe.core.setting import flag_of

    command = typer.main.get_command(APP).commands["api-edits"]  # type: ignore[attr-defined]  # a click Group
    offered = {param.opts[0]: param for param in command.params if param.opts and param.opts[0].startswith("--")}
    for item in dataclasses.fields(ApiEditsOptions):
        flag = flag_of(item)
        assert flag is not None, item.name
        param = offered[flag.name]
        assert param.help == flag.help
        assert (getattr(param, "min", None), getattr(param, "max", None)) == (flag.min, flag.max)
        assert param.metavar == flag.metavar and param.multiple == flag.repeatable
        assert (flag.off in param.secondary_opts) if flag.off else not param.secondary_opts


def test_no_flags_give_the_library_defaults() -> None:
    """The command's defaults build exactly ApiEditsOptions(): the CLI and the library ask for the same edits."""
    import dataclasses

    from ctxpipe.cli.commands.api_edits import GivenEdits
    from ctxpipe.cli.flags import build, parameters

    built = build(GivenEdits, {parameter.name: parameter.default for parameter in parameters(GivenEdits)})
    assert isinstance(built, ApiEditsOptions) and dataclasses.asdict(built) == dataclasses.asdict(ApiEditsOptions())


def test_the_flags_reach_the_options_as_the_fields_hold_them() -> None:
    """A repeatable flag's values arrive as the field's tuple, in the order given; --thinking-keep as its number."""
    from ctxpipe.cli.commands.api_edits import GivenEdits
    from ctxpipe.cli.flags import with_options

    seen: list[ApiEditsOptions] = []

    @with_options(options=GivenEdits)
    def given(options: ApiEditsOptions) -> None:  # the command's own declaration, with nothing run after it
        seen.append(options)

    app = typer.Typer()
    app.command()(given)
    result = RUNNER.invoke(app, ["--exclude-tool", "Write", "--exclude-tool", "Edit", "--clear-tool-inputs-for", "Bash", "--thinking-keep", "2"])
    assert result.exit_code == 0, result.output
    assert (seen[0].exclude_tools, seen[0].clear_tool_inputs_for, seen[0].thinking_keep) == (("Write", "Edit"), ("Bash",), 2)


# --- output forms and --explain ------------------------------------------------------------------------


def test_terminal_gets_an_indented_object(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.cli import streams

    expected = run(BASIC)
    monkeypatch.setattr(streams, "stdout_is_terminal", lambda: True)
    result = invoke(BASIC)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith('{\n  "betas": [\n    "context-management-2025-06-27"\n  ],\n')
    assert result.stdout.count("\n") > 10
    assert json.loads(result.stdout) == expected
    jsonl = invoke("--json", BASIC)  # --json wins on a terminal
    assert jsonl.stdout.count("\n") == 1 and json.loads(jsonl.stdout) == expected


def test_explain_goes_to_stderr_and_leaves_stdout_alone() -> None:
    result = invoke("--explain", "--compact", BASIC)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == run("--compact", BASIC)
    err = result.stderr
    assert "clear_thinking_20251015: the active context holds 1 thinking block;" in err
    assert "trigger 167,000 input tokens: the autocompact threshold for claude-sonnet-4-5-20250929" in err
    assert "autocompact 167,000 = effective 180,000 − 13,000" in err  # where the threshold comes from
    assert "keep the 5 most recent tool uses: the default" in err
    assert "trigger 150,000 input tokens: the API's own default" in err
    assert "note: compaction at 150,000 comes before tool clearing at 167,000" in err


def test_explain_names_the_flags_that_chose_values() -> None:
    err = invoke("--explain", "--trigger", "3000", "--keep", "2", "--exclude-tool", "Write", "--thinking-keep", "1", SIDECHAIN).stderr
    assert "trigger 3,000 input tokens: --trigger" in err
    assert "already past the trigger" in err  # the sidechain fixture holds 3,329 tokens
    assert "keep the 2 most recent tool uses: --keep" in err
    assert "exclude_tools Task: used in the transcript" in err and "exclude_tools Write: --exclude-tool" in err
    assert "has no effect without the thinking edit" in err
    assert "where the autocompact threshold comes from" not in err  # --trigger replaced it


def test_help_has_an_example() -> None:
    result = RUNNER.invoke(APP, ["api-edits", "--help"])
    assert result.exit_code == 0
    assert "Example:  ctxpipe api-edits" in result.stdout
    assert api_edits.__doc__ and "Example:" in api_edits.__doc__


# --- bad input ---------------------------------------------------------------------------------------


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ctxpipe's real entry point (its error handling) with api-edits registered, in-process."""
    from ctxpipe.cli import app as app_module

    app = make_app()
    for command in app.registered_commands:
        command.callback = app_module.pipe_safe(command.callback)  # type: ignore[arg-type]
    monkeypatch.setattr(app_module, "app", app)
    monkeypatch.setattr(sys, "argv", ["ctxpipe", "api-edits", *args])
    for name in CLEAN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CTXPIPE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as stopped:
        app_module.main()
    out, err = capsys.readouterr()
    return int(stopped.value.code or 0), out, err


def test_missing_file_is_bad_input(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    code, out, err = run_main(monkeypatch, capsys, str(missing))
    assert (code, out) == (1, "")
    assert err == f"ctxpipe: error: {missing}: no such file\n"
    assert isinstance(invoke(missing).exception, Exception) and invoke(missing).exit_code == 1


def test_a_folder_is_bad_input(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_main(monkeypatch, capsys, str(tmp_path))
    assert (code, out) == (1, "")
    assert err.startswith("ctxpipe: error: ") and "is a directory" in err and "Traceback" not in err


def test_a_bad_line_fails_with_its_line_number(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = BASIC.read_bytes().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(lines[:2]) + b"{not json\n" + b"".join(lines[2:]))
    code, out, err = run_main(monkeypatch, capsys, str(broken))
    assert (code, out) == (1, "")
    assert err.startswith(f"ctxpipe: error: {broken}:3: ") and err.count("\n") == 1


def test_a_bad_line_is_skipped_with_on_error_skip(tmp_path: Path) -> None:
    lines = BASIC.read_bytes().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(lines[:2]) + b"[1, 2]\n" + b"".join(lines[2:]))
    result = invoke("--on-error", "skip", broken)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == run(BASIC)
    assert "skipped 1 bad line (line 3)" in result.stderr


def test_unknown_option_is_a_usage_error() -> None:
    assert "--bogus" in usage_error("--bogus")


# --- the schema ----------------------------------------------------------------------------------------


def test_schema_rejects_what_the_api_would() -> None:
    good = run("--compact", BASIC)
    assert errors(SCHEMA, good) == []
    swapped = json.loads(json.dumps(good))
    swapped["context_management"]["edits"][:2] = swapped["context_management"]["edits"][1::-1]
    assert errors(SCHEMA, swapped), "the thinking edit must come first"
    no_beta = json.loads(json.dumps(good))
    no_beta["betas"] = [CONTEXT_MANAGEMENT_BETA]
    assert errors(SCHEMA, no_beta), "compact_20260112 needs its beta"
    extra_beta = run(BASIC)
    extra_beta["betas"].append(COMPACT_BETA)
    assert errors(SCHEMA, extra_beta), "the compact beta without the compact edit"
    for broken_edit in (
        {**tool_edit(), "keep": {"type": "bogus", "value": 1}},
        {**tool_edit(), "keep": {"type": "tool_uses", "value": 0}},
        {**tool_edit(), "surprise": 1},
        {**tool_edit(), "exclude_tools": "Task"},
        {"type": "clear_thinking_20251015", "keep": "some"},
    ):
        assert errors(SCHEMA, {"betas": [CONTEXT_MANAGEMENT_BETA], "context_management": {"edits": [broken_edit]}}), broken_edit


# --- the SDK's own types, and a real request -----------------------------------------------------------


def test_sdk_types_reject_broken_edits() -> None:
    good = {"edits": [THINKING_ALL, tool_edit(exclude_tools=["Task"], clear_tool_inputs=["Bash"])]}
    assert sdk_accepts(good)
    assert not sdk_accepts({"edits": [{**tool_edit(), "keep": {"type": "bogus", "value": 1}}]})
    assert not sdk_accepts({"edits": [{**tool_edit(), "trigger": {"type": "input_tokens", "value": "167000"}}]})  # no coercion
    assert not sdk_accepts({"edits": [{**tool_edit(), "surprise": 1}]})  # an unknown key the SDK would drop silently
    assert not sdk_accepts({"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns"}}]})
    assert not sdk_accepts({"edits": [{"type": "clear_everything"}]})


class _Stub(BaseHTTPRequestHandler):
    captured: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.captured.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": json.loads(body)})
        reply = json.dumps(
            {
                "id": "msg_01STUB",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-4-7",
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 1},
                "context_management": {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_input_tokens": 0, "cleared_tool_uses": 0}]},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    captured: list[dict[str, Any]] = []
    handler = type("Stub", (_Stub,), {"captured": captured})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", captured
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "args",
    [
        (BASIC,),
        ("--compact", "--compact-instructions", "Keep paths.", "--pause-after-compaction", "--clear-tool-inputs", SIDECHAIN),
        ("--thinking-keep", "2", "--trigger-tool-uses", "20", "--clear-at-least", "1000", "--clear-tool-inputs-for", "Bash", BASIC),
    ],
)
def test_the_sdk_sends_exactly_our_parameter(stub_api: tuple[str, list[dict[str, Any]]], args: tuple[Any, ...]) -> None:
    import anthropic

    url, captured = stub_api
    report = run(*args)
    client = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0, http_client=anthropic.DefaultHttpxClient(trust_env=False))
    response = client.beta.messages.create(
        model="claude-opus-4-7",
        max_tokens=16,
        messages=[{"role": "user", "content": "Continue."}],
        context_management=report["context_management"],
        betas=report["betas"],
    )
    assert len(captured) == 1
    request = captured[0]
    assert request["path"].startswith("/v1/messages")
    assert request["body"]["context_management"] == report["context_management"]
    assert request["headers"]["anthropic-beta"].split(",") == report["betas"]
    assert response.context_management is not None and response.context_management.applied_edits[0].type == "clear_tool_uses_20250919"


# --- the core, on plain values -------------------------------------------------------------------------


def test_core_uses_the_threshold_it_is_given() -> None:
    built = build_api_edits(tool_names=("Read", "mcp__db__query", "Task"), thinking_blocks=0, tokens=50_000, model="m", autocompact_threshold=42_000)
    assert built.request == {
        "betas": [CONTEXT_MANAGEMENT_BETA],
        "context_management": {"edits": [tool_edit(trigger=42_000, exclude_tools=["Task", "mcp__db__query"])]},
    }
    assert built.betas == [CONTEXT_MANAGEMENT_BETA] and len(built.edits) == 1
    assert any("already past the trigger" in line for line in built.explanations)
    below = build_api_edits(tokens=10_000, autocompact_threshold=42_000)
    assert any("32,000 tokens below the trigger" in line for line in below.explanations)


def test_core_without_autocompact_uses_the_api_default() -> None:
    built = build_api_edits(autocompact_threshold=None)
    assert built.edits == [tool_edit(trigger=API_DEFAULT_TRIGGER)]
    assert any("autocompact is off" in line for line in built.explanations)


def test_core_notes_settings_that_cannot_fire() -> None:
    built = build_api_edits(ApiEditsOptions(trigger_tool_uses=3, keep=5, clear_at_least=10), autocompact_threshold=1)
    assert any("leaves nothing to clear" in line for line in built.explanations)
    never = build_api_edits(ApiEditsOptions(trigger_tokens=1_000, clear_at_least=1_000))
    assert any("can never happen" in line for line in never.explanations)


@pytest.mark.parametrize(
    "options",
    [
        dict(trigger_tokens=0),
        dict(trigger_tool_uses=-1),
        dict(keep=0),
        dict(clear_at_least=0),
        dict(compact_trigger=0),
        dict(trigger_tokens=10, trigger_tool_uses=10),
        dict(clear_tool_inputs=True, clear_tool_inputs_for=("Bash",)),
        dict(thinking_keep=0),
        dict(thinking_keep="some"),
        dict(thinking_keep=True),
    ],
)
def test_options_refuse_impossible_values(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ApiEditsOptions(**options)


def test_options_are_frozen() -> None:
    options = ApiEditsOptions()
    with pytest.raises(AttributeError):
        options.keep = 3  # type: ignore[misc]


def test_parse_thinking_keep() -> None:
    assert (parse_thinking_keep("all"), parse_thinking_keep(" All "), parse_thinking_keep("3")) == ("all", "all", 3)
    for bad in ("0", "-2", "", "two"):
        with pytest.raises(ValueError):
            parse_thinking_keep(bad)


def test_never_cleared_and_transcript_facts() -> None:
    assert never_cleared(["Read", "Task", "mcp__a__b", "Agent", "Task", "TaskOutput", "mcp_single"]) == ["Agent", "Task", "mcp__a__b"]
    messages = [
        Message("user", [{"type": "tool_result", "tool_use_id": "x", "content": "Task"}]),
        Message("assistant", [{"type": "thinking", "thinking": "…"}, {"type": "tool_use", "id": "1", "name": "Read", "input": {}}]),
        Message(
            "assistant",
            [
                {"type": "redacted_thinking", "data": "…"},
                {"type": "tool_use", "id": "2", "name": "Bash", "input": {}},
                {"type": "tool_use", "id": "3", "name": "Read", "input": {}},
            ],
        ),
    ]
    assert transcript_facts(messages) == (("Read", "Bash"), 2)
    assert transcript_facts([]) == ((), 0)


def test_sonnet_constant_is_the_basic_fixture_model() -> None:
    """The expected 167,000 above rests on the fixture's model being a 200K Sonnet 4.5."""
    assert SONNET in BASIC.read_text()
