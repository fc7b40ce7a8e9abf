"""Every JSON report matches its schema, every report has one, and the report types match the schemas.

The commands run for real (a subprocess, as a user runs them) on fixture files, in the modes that
shape a report differently: changed, unchanged, skipped and failing files, cache-aware microcompact,
summarize with the verifier, the model, its repair and its failure. Each case also asserts that it
reached the mode it is about, so a case cannot pass by validating a report it never produced.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from ctxpipe.core import audit, reports, wire
from ctxpipe.jobs import schemas
from helpers import CLEAN_ENV as BUDGET_ENV
from helpers import FIXTURES, ROOT, run_cli
from messages_server import MessagesServer, Reply

# No key and no base URL from the caller's environment either.
CLEAN_ENV = {**BUDGET_ENV, "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
REPORT_FLAGS = ("--json", "--report-json")


def ctxpipe(*args: Any, stdin: bytes = b"", env: dict[str, str] | None = None, code: int = 0, cwd: Path | None = None) -> Any:
    result = run_cli(*args, stdin=stdin, env={**CLEAN_ENV, **(env or {})}, cwd=cwd or ROOT)
    assert result.returncode == code, result.stderr.decode()
    assert b"Traceback" not in result.stderr
    return result


def json_lines(data: bytes) -> list[dict[str, Any]]:
    rows = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    assert rows, "no JSON printed"
    return rows


def assert_valid(schema: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        # Both validators: jsonschema (the reference) and the compiled check errors() tries first.
        assert schemas.reference_errors(schema, row) == [], row
        assert schemas.fast_validator(schema).is_valid(row), row


def fixture(command: str, case: str) -> tuple[bytes, list[str]]:
    """A golden case's input and arguments."""
    base = FIXTURES / command / case
    return base.with_suffix(".in.jsonl").read_bytes(), shlex.split(base.with_suffix(".args").read_text())


# --- every report has a schema, every schema a report ------------------------------------------------


def _report_flags() -> set[tuple[str, str]]:
    """(command, flag) for each registered command with --json or --report-json."""
    import typer
    from ctxpipe.cli.app import app

    group = typer.main.get_command(app)
    found = set()
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            found |= {(name, flag) for flag in param.opts if flag in REPORT_FLAGS}
    return found


def test_every_command_that_prints_json_has_a_schema() -> None:
    flags = _report_flags()
    assert ("compact", "--json") in flags and ("summarize", "--report-json") in flags  # the scan sees the commands
    missing = sorted(flag for flag in flags if schemas.report_schema(*flag) is None)
    assert not missing, f"commands whose JSON report has no schema in jobs/schemas.REPORT_SCHEMAS: {missing}"
    # Every stage of the registry has a schema of its own; a stage just added falls back to the generic one.
    from ctxpipe.jobs.pipeline import STAGES

    assert all(schemas.report_schema(stage.name, "--report-json") == f"{stage.name}.report.schema.json" for stage in STAGES)
    assert schemas.report_schema("a-new-stage", "--report-json") == schemas.STAGE_REPORT
    stale = sorted(set(schemas.REPORT_SCHEMAS) - flags)
    assert not stale, f"REPORT_SCHEMAS lists flags no command has: {stale}"
    for name in schemas.REPORT_SCHEMAS.values():
        assert name in schemas.schema_names(), name


def test_every_report_schema_describes_a_report_and_is_a_valid_schema() -> None:
    from jsonschema import Draft202012Validator

    files = [name for name in schemas.schema_names() if name.endswith(".report.schema.json")]
    assert sorted({*schemas.REPORT_SCHEMAS.values(), schemas.STAGE_REPORT}) == sorted(files)
    for name in [*files, "report-defs.schema.json"]:
        schema = schemas.load(name)
        Draft202012Validator.check_schema(schema)
        assert schema["$id"] == f"https://ctxpipe.dev/schemas/{name}" and schema.get("description"), name


def test_the_schemas_are_strict() -> None:
    """An unknown key, a missing key or a wrong type is an error, through every $ref."""
    row = {
        "file": "a.jsonl",
        "format": "claude-code",
        "tokens_before": 10,
        "tokens_after": 8,
        "changed": True,
        "skipped_lines": 0,
        "output": "out/a.jsonl",
        "stages": [
            {"stage": "microcompact", "changed": False, "note": "n", "tokens_before": 10, "tokens_after": 10, "tokens_freed": 0},
            {"stage": "collapse", "changed": False, "note": "n", "tokens_before": 10, "tokens_after": 10, "tokens_freed": 0},
            {"stage": "summarize", "changed": False, "note": "not needed"},
        ],
    }
    assert_valid("compact.report.schema.json", [row])
    broken = [
        {**row, "extra": 1},
        {k: v for k, v in row.items() if k != "skipped_lines"},
        {**row, "stages": [*row["stages"][:2], {**row["stages"][0], "stage": "collapse", "tokens_freed": "2"}]},
        {**row, "stages": [{k: v for k, v in row["stages"][0].items() if k != "tokens_after"}, *row["stages"][1:]]},
        {**row, "stages": [*row["stages"][:2], {**row["stages"][2], "why": "--force"}]},  # a summarize run without its figures
    ]
    for bad in broken:
        assert schemas.reference_errors("compact.report.schema.json", bad), bad
        assert not schemas.fast_validator("compact.report.schema.json").is_valid(bad), bad
    verification = {"facts": 1, "carried": 1, "recall": 1.0, "kinds": {"instruction": {"facts": 1, "carried": 1, "recall": 1.0}}, "missing": []}
    report = {"file": "-", "tokens_before": 5, "tokens_after": 4, "tokens_freed": 1, "stage": "summarize", "verification": verification}
    errors = schemas.reference_errors("summarize.report.schema.json", report)  # a changed stage without its keys
    assert any("'engine' is a dependency of 'stage'" in error for error in errors), errors
    odd_kind = {**verification, "kinds": {"instructions": {"facts": 1, "carried": 1, "recall": 1.0}}}
    assert schemas.reference_errors(
        "summarize.report.schema.json", {"file": "-", "tokens_before": 5, "tokens_after": 5, "tokens_freed": 0, "verification": odd_kind}
    )


# --- the types are the schemas --------------------------------------------------------------------

# Each report type and the schema object it types: (type, schema file, JSON pointer, keys the schema
# requires that the type may lack, because the code that builds it adds them later).
TYPES: list[tuple[Any, str, str, set[str]]] = [
    (reports.CompactReport, "compact.report.schema.json", "/$defs/file", set()),
    (reports.CompactSkipRow, "compact.report.schema.json", "/$defs/skipped", set()),
    (reports.StageRecord, "compact.report.schema.json", "/$defs/stage", set()),
    (reports.MicrocompactReport, "microcompact.report.schema.json", "", set()),
    (reports.CollapseReport, "collapse.report.schema.json", "", set()),
    (reports.Fold, "collapse.report.schema.json", "/properties/folds/items", set()),
    (reports.SnipReport, "snip.report.schema.json", "", set()),
    (reports.SummarizeReport, "summarize.report.schema.json", "", set()),
    (reports.LlmUsage, "summarize.report.schema.json", "/properties/llm_usage", set()),
    (reports.RestoreReport, "restore.report.schema.json", "", set()),
    (reports.PlanRow, "restore-plan.report.schema.json", "", set()),
    (reports.ToolFigures, "report-defs.schema.json", "/$defs/by_tool/additionalProperties", set()),
    (reports.PricesReport, "report-defs.schema.json", "/$defs/prices", set()),
    (reports.CostReport, "report-defs.schema.json", "/$defs/cost", set()),
    (reports.SessionReport, "report.report.schema.json", "/$defs/session", set()),
    (reports.CallRow, "report.report.schema.json", "/$defs/session/properties/calls/items", set()),
    (reports.TimelineEvent, "report.report.schema.json", "/$defs/session/properties/events/items", set()),
    (reports.ExcerptLine, "report.report.schema.json", "/$defs/session/properties/largest/items", set()),
    (reports.StageDryRun, "report.report.schema.json", "/$defs/session/properties/dry_runs/items", set()),
    (reports.WindowPart, "report.report.schema.json", "/$defs/session/properties/window/items", set()),
    (reports.Advice, "report.report.schema.json", "/$defs/session/properties/advice", set()),
    (reports.TokenParts, "report-defs.schema.json", "/$defs/token_parts", set()),
    (reports.DollarParts, "report-defs.schema.json", "/$defs/dollar_parts", set()),
    (reports.CacheDecisionReport, "report-defs.schema.json", "/$defs/cache_decision", set()),
    (reports.VerificationReport, "report-defs.schema.json", "/$defs/verification", set()),
    (reports.KindRecall, "report-defs.schema.json", "/$defs/verification/properties/kinds/additionalProperties", set()),
    (reports.MissingFact, "report-defs.schema.json", "/$defs/verification/properties/missing/items", set()),
    (reports.CountReport, "count.report.schema.json", "/$defs/file", set()),
    (reports.CountTotal, "count.report.schema.json", "/$defs/total", set()),
    (reports.FailedFile, "report-defs.schema.json", "/$defs/failed_file", set()),
    (reports.RollupRow, "count.report.schema.json", "/$defs/group", set()),
    (reports.RollupTotal, "count.report.schema.json", "/$defs/group_total", set()),
    (reports.BaselineReport, "count.report.schema.json", "/$defs/file/properties/baseline", set()),
    (reports.CalibrationReport, "count.report.schema.json", "/$defs/file/properties/calibration", set()),
    (reports.ReinjectedReport, "count.report.schema.json", "/$defs/file/properties/reinjected", set()),
    (reports.ReinjectedItem, "count.report.schema.json", "/$defs/file/properties/reinjected/properties/items/items", set()),
    (reports.Adjustment, "count.report.schema.json", "/$defs/file/properties/adjustments/items", set()),
    (reports.BreakdownRow, "count.report.schema.json", "/$defs/file/properties/breakdown/items", set()),
    (reports.TopLine, "count.report.schema.json", "/$defs/file/properties/top/items", set()),
    (reports.TimelinePoint, "count.report.schema.json", "/$defs/file/properties/timeline/items", set()),
    (reports.WarnReport, "warn.report.schema.json", "/$defs/file", set()),
    (reports.WarnThresholds, "warn.report.schema.json", "/$defs/file/properties/thresholds", set()),
    (reports.ValidateReport, "validate.report.schema.json", "/$defs/file", set()),
    (reports.FindingRow, "validate.report.schema.json", "/$defs/file/properties/findings/items", set()),
    (audit.CompactionAudit, "audit.report.schema.json", "/$defs/compaction", set()),
    (audit.SessionAudit, "audit.report.schema.json", "/$defs/total", set()),
]


def schema_object(name: str, pointer: str) -> dict[str, Any]:
    """The object at `pointer` in schema `name`, following a $ref that stands for the whole object."""
    node: Any = schemas.load(name)
    for part in [p for p in pointer.split("/") if p]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    while "properties" not in node and "$ref" in node:
        target, _, inner = node["$ref"].partition("#")
        node = schema_object(target or name, inner)
    return dict(node)


def type_keys(typed: Any) -> tuple[frozenset[str], frozenset[str]]:
    """(keys always present, keys present only sometimes) of a report dataclass (a generic one with
    the report it spreads: StageReport[MicrocompactExtras]) or a TypedDict."""
    if dataclasses.is_dataclass(typing.get_origin(typed) or typed):
        return wire.wire_keys(typed)
    return frozenset(typed.__required_keys__), frozenset(typed.__optional_keys__)


def type_name(typed: Any) -> str:
    """MicrocompactExtras, or StageReport[MicrocompactExtras]."""
    arguments = typing.get_args(typed)
    return typed.__name__ + (f"[{', '.join(type_name(argument) for argument in arguments)}]" if arguments else "")


@pytest.mark.parametrize(("typed", "name", "pointer", "added_later"), TYPES, ids=[type_name(t[0]) for t in TYPES])
def test_a_report_type_has_exactly_its_schema_keys(typed: Any, name: str, pointer: str, added_later: set[str]) -> None:
    node = schema_object(name, pointer)
    always, sometimes = type_keys(typed)
    assert always | sometimes == set(node["properties"]), f"{type_name(typed)} vs {name}#{pointer}"
    # A key the type promises is one the schema requires, and the other way round (but for what is added later).
    required = set(node.get("required", []))
    assert always <= required, sorted(always - required)
    assert required - always == added_later


def test_every_report_object_has_a_type() -> None:
    """Each report schema is typed in core/reports/ (api-edits' is the SDK's BetaContextManagementConfigParam)."""
    typed = {name for _, name, _, _ in TYPES}
    assert set(schemas.REPORT_SCHEMAS.values()) - {"api-edits.report.schema.json"} <= typed


# --- the reports as the commands print them ------------------------------------------------------------


def stage_report(tmp_path: Path, command: str, data: bytes, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    path = tmp_path / f"{command}.report.json"
    ctxpipe(command, *args, "--report-json", path, stdin=data, env=env)
    report: dict[str, Any] = orjson.loads(path.read_bytes())
    assert_valid(schemas.REPORT_SCHEMAS[(command, "--report-json")], [report])
    return report


# (command, golden case, what the report must then show)
STAGE_CASES: list[tuple[str, str, Callable[[dict[str, Any]], bool]]] = [
    ("microcompact", "force-keep-1", lambda r: r["stage"] == "microcompact" and r["cleared"] >= 1 and r["by_tool"]),
    ("microcompact", "gap-not-reached", lambda r: "stage" not in r and r["tokens_freed"] == 0),
    ("microcompact", "cache-aware-warm", lambda r: "stage" not in r and r["cache"]["clear"] is False),
    ("microcompact", "cache-aware-expired", lambda r: r["stage"] == "microcompact" and r["cache"]["clear"] is True),
    ("collapse", "repeats", lambda r: r["stage"] == "collapse" and r["folds"]),
    ("collapse", "nothing-to-fold", lambda r: "stage" not in r),
    ("snip", "keep-last-3", lambda r: r["stage"] == "snip" and r["removed_messages"] >= 1),
    ("snip", "before-uuid", lambda r: r["stage"] == "snip"),
    ("summarize", "basic-keep-window", lambda r: r["engine"] == "offline" and r["verification"]["facts"] >= 1 and "verification_before_repair" in r),
    ("summarize", "repeats-drop-history", lambda r: r["stage"] == "summarize"),
    ("summarize", "nothing-to-summarize", lambda r: "stage" not in r),
    ("restore", "transcript", lambda r: r["stage"] == "restore" and r["restored"] and r["skipped"]),
    ("restore", "no-boundary", lambda r: "stage" not in r),
]


@pytest.mark.parametrize(("command", "case", "shows"), STAGE_CASES, ids=[f"{c}/{k}" for c, k, _ in STAGE_CASES])
def test_stage_report_matches_its_schema(tmp_path: Path, command: str, case: str, shows: Callable[[dict[str, Any]], bool]) -> None:
    data, args = fixture(command, case)
    report = stage_report(tmp_path, command, data, args)
    assert shows(report), report


@pytest.fixture
def server() -> Any:
    with MessagesServer() as s:
        yield s


def summary_reply(text: str) -> Reply:
    return Reply.text(f"<analysis>\nthinking\n</analysis>\n\n<summary>\n{text}\n</summary>")


def test_summarize_report_with_the_model_its_repair_and_facts_to_keep(tmp_path: Path, server: MessagesServer) -> None:
    """The model's summary misses the key facts, so does its repair (not taken: no better): every
    model key is in the report."""
    server.enqueue(summary_reply("1. Primary Request and Intent: something."), summary_reply("1. Primary Request and Intent: still vague."))
    data, _ = fixture("summarize", "basic-keep-window")
    env = {"ANTHROPIC_API_KEY": "test-key"}
    report = stage_report(tmp_path, "summarize", data, ["--engine", "llm", "--keep-last", "2", "--base-url", server.url, "--now", "2026-05-01T00:00:00Z"], env)
    assert report["engine"] == "llm" and report["llm_attempts"] == 1 and report["llm_usage"]
    assert "repaired" not in report and "carried no more of the facts" in report["repair_error"]
    assert report["facts_to_keep"] >= 1 and report["verification_before_repair"]["missing"]
    assert len(server.message_requests()) == 2


def test_summarize_report_when_the_model_fails(tmp_path: Path, server: MessagesServer) -> None:
    server.enqueue(Reply.error(401, "authentication_error", "invalid x-api-key"))
    data, _ = fixture("summarize", "basic-keep-window")
    env = {"ANTHROPIC_API_KEY": "test-key"}
    report = stage_report(tmp_path, "summarize", data, ["--engine", "llm", "--keep-last", "2", "--base-url", server.url, "--now", "2026-05-01T00:00:00Z"], env)
    assert report["engine"] == "offline" and "401" in report["fallback_reason"]


def test_restore_plan_rows_match_their_schema() -> None:
    data, args = fixture("restore", "plan")
    rows = json_lines(ctxpipe("restore", *args, "--json", stdin=data).stdout)
    assert_valid("restore-plan.report.schema.json", rows)
    assert {row["chosen"] for row in rows} == {True, False}


# --- compact over a folder: changed, unchanged, skipped, failed and in-place rows ----------------------


def compact_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copy(FIXTURES / "compact" / "force-keep-last.in.jsonl", folder / "a.jsonl")
    shutil.copy(FIXTURES / "compact" / "below-threshold.in.jsonl", folder / "b.jsonl")
    shutil.copy(FIXTURES / "compact" / "below-threshold.in.jsonl", folder / "agent-acompact-0a1b2c.jsonl")  # a compaction side-call, by its name
    good = (FIXTURES / "compact" / "below-threshold.in.jsonl").read_bytes()
    (folder / "c.jsonl").write_bytes(good + b"{not json\n")  # one bad line: skipped with --on-error skip
    shutil.copy(FIXTURES / "other-agents" / "pi-session.jsonl", folder / "d.jsonl")  # another agent's session: refused, an error on stderr, no row
    shutil.copy(FIXTURES / "summarize" / "basic-keep-window.out.jsonl", folder / "e.jsonl")  # summarized already: nothing new to summarize
    return folder


def test_compact_rows_match_their_schema(tmp_path: Path) -> None:
    folder = compact_folder(tmp_path)
    common = ["--engine", "offline", "--source", "transcript", "--now", "2026-05-01T00:00:00Z", "--on-error", "skip", "--json"]
    # Below the threshold: nothing is summarized, microcompact and collapse find nothing.
    quiet = json_lines(ctxpipe("compact", *common, "--out-dir", tmp_path / "out", folder, code=1).stdout)
    # Forced, in place, with backups: a summary and restore in each session that has a history.
    forced = json_lines(ctxpipe("compact", *common, "--force", "--keep-last", "3", "--in-place", "--backup", ".bak", folder, code=1).stdout)
    for rows in (quiet, forced):
        assert_valid("compact.report.schema.json", rows)
        assert [row["file"].rsplit("/", 1)[-1] for row in rows] == ["a.jsonl", "agent-acompact-0a1b2c.jsonl", "b.jsonl", "c.jsonl", "d.jsonl", "e.jsonl"]
        (failed,) = [row for row in rows if "error" in row]  # d, in its place
        assert failed["file"].endswith("d.jsonl") and set(failed) == {"file", "error"}
        assert sum("skipped" in row for row in rows) == 1
        assert any(row.get("skipped_lines") == 1 for row in rows)
    assert all(stage["note"].startswith("not needed") for row in quiet if "stages" in row for stage in row["stages"] if stage["stage"] == "summarize")
    changed = [row for row in forced if row.get("changed")]
    assert changed and all(row["backup"].endswith(".bak") for row in changed)
    assert any(stage["stage"] == "restore" and stage["tokens_freed"] < 0 for row in changed for stage in row["stages"])
    assert any(stage["stage"] == "summarize" and stage["verification"] for row in changed for stage in row["stages"])
    (found_nothing,) = [stage for stage in forced[-1]["stages"] if stage["stage"] == "summarize"]
    assert found_nothing["engine"] is None and found_nothing["verification"] is None and found_nothing["why"] == "--force"


def test_compact_of_one_transcript_reports_in_report_json(tmp_path: Path) -> None:
    """One transcript compacted to stdout: the transcript on stdout, its report in --report-json FILE
    (the same object a batch row holds, without `output`); --json, which would mix them, is refused."""
    case = FIXTURES / "compact" / "force-keep-last"
    args = shlex.split(case.with_suffix(".args").read_text())
    report_file = tmp_path / "report.json"
    result = ctxpipe("compact", *args, "--report-json", report_file, stdin=case.with_suffix(".in.jsonl").read_bytes())
    assert result.stdout == case.with_suffix(".out.jsonl").read_bytes()  # the golden output, untouched by the report
    report = orjson.loads(report_file.read_bytes())
    assert_valid(schemas.report_schema("compact", "--report-json"), [report])
    assert "output" not in report and [stage["stage"] for stage in report["stages"]] == ["microcompact", "collapse", "summarize", "restore"]
    assert report["tokens_after"] == orjson.loads(ctxpipe("count", "--json", stdin=result.stdout).stdout)["tokens"]
    refused = ctxpipe("compact", *args, "--json", stdin=case.with_suffix(".in.jsonl").read_bytes(), code=2)
    assert refused.stdout == b"" and b"--report-json" in refused.stderr


# --- the older reports, in their modes ------------------------------------------------------------------


def test_count_rows_match_their_schema(tmp_path: Path) -> None:
    data, _ = fixture("count", "timeline")
    (tmp_path / "a.jsonl").write_bytes(data)
    (tmp_path / "b.jsonl").write_bytes(fixture("count", "compacted")[0])
    (tmp_path / "agent-acompact-0a1b2c.jsonl").write_bytes(data)
    (tmp_path / "bad.jsonl").write_bytes(b"{not json\n")  # fails: its own row, and counted in the total row
    rows = json_lines(ctxpipe("count", "--json", "--by", "tool", "--top", "3", "--timeline", tmp_path, code=1).stdout)
    assert_valid("count.report.schema.json", rows)
    assert rows[-1]["total"] is True and rows[-1]["failed"] == 1
    failed = [row for row in rows if "error" in row]
    assert [row["file"] for row in failed] == [str(tmp_path / "bad.jsonl")] and failed[0]["error"].startswith("line 1: ")
    counted = [row for row in rows[:-1] if "error" not in row]
    assert any(row.get("kind") == "compaction" for row in rows) and all("breakdown" in row and "title" in row for row in counted)
    for by in ("day", "project", "session"):
        assert_valid("count.report.schema.json", json_lines(ctxpipe("count", "--json", "--by", by, tmp_path, code=1).stdout))
    for case in ("codex", "anthropic-no-usage", "as-claude-code"):
        data, args = fixture("count", case)
        assert_valid("count.report.schema.json", json_lines(ctxpipe("count", *args, "--json", stdin=data).stdout))


@pytest.mark.parametrize("case", ["normal", "warning", "blocking", "no-auto-compact"])
def test_warn_report_matches_its_schema(case: str) -> None:
    data, args = fixture("warn", case)
    code_file = FIXTURES / "warn" / f"{case}.code"
    code = int(code_file.read_text()) if code_file.exists() else 0
    assert_valid("warn.report.schema.json", json_lines(ctxpipe("warn", *args, "--json", stdin=data, code=code).stdout))


def test_warn_report_of_a_compaction_side_call(tmp_path: Path) -> None:
    path = tmp_path / "agent-acompact-0a1b2c.jsonl"
    path.write_bytes(fixture("warn", "blocking")[0])
    (row,) = json_lines(ctxpipe("warn", "--json", path).stdout)
    assert_valid("warn.report.schema.json", [row])
    assert row["kind"] == "compaction" and row["note"]


def test_validate_and_api_edits_reports_match_their_schemas() -> None:
    for case in ("broken", "claude-code-basic", "codex"):
        data, args = fixture("validate", case)
        code = 1 if case == "broken" else 0
        assert_valid("validate.report.schema.json", json_lines(ctxpipe("validate", *args, "--json", stdin=data, code=code).stdout))
    for case in ("defaults", "messages-api", "task-compact"):
        data, args = fixture("api-edits", case)
        assert_valid("api-edits.report.schema.json", json_lines(ctxpipe("api-edits", *args, "--json", stdin=data).stdout))


def test_a_reinjected_item_s_kinds_are_the_schema_s() -> None:
    """count names what Claude Code re-injected after its compaction, plan mode's reminder included."""
    import typing

    node = schema_object("count.report.schema.json", "/$defs/file/properties/reinjected/properties/items/items")
    assert set(node["properties"]["kind"]["enum"]) == set(typing.get_args(reports.ReinjectedKind)) >= {"plan-mode"}


def test_every_report_type_is_found_where_the_package_says() -> None:
    # core/reports loads a module per family on first use: a type missing from WHERE could not be imported.
    import ast
    import importlib
    from pathlib import Path

    from ctxpipe.core import reports as package

    defined = {}
    for path in sorted(Path(package.__file__).parent.glob("*.py")):
        if path.stem == "__init__":
            continue
        for node in ast.parse(path.read_text()).body:
            names = [node.name] if isinstance(node, ast.ClassDef) else [target.id for target in getattr(node, "targets", []) if isinstance(target, ast.Name)]
            defined.update({name: path.stem for name in names})
    assert defined == package.WHERE
    assert all(getattr(package, name) is getattr(importlib.import_module(f"{package.__name__}.{where}"), name) for name, where in package.WHERE.items())
