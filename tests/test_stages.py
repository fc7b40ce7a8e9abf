"""The transforming stages — microcompact, collapse, snip — and the ledger that `expand` undoes.

The invariants every stage keeps (stage_checks.py) are checked on every fixture, on the real
corpus and, in test_stage_properties.py, on generated sessions; the stages run in-process through
their core functions on the region `read_region` gives them, exactly as `cli/stages.run_stage`
does, and a few cases through the CLI and real shell pipes to show both give the same bytes.
Then each stage's own rules: what microcompact clears and when, the cache-aware cost model,
what collapse folds, how snip widens and re-parents.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import ctxpipe
import orjson
import pytest
from builders import SONNET, Session, usage
from ctxpipe.core.cache import CachePolicy, costs, decide
from ctxpipe.core.catalog import Prices
from ctxpipe.core.convert import RECORDED
from ctxpipe.core.jsonl import iter_entries
from ctxpipe.core.microcompact import COMPACTABLE_TOOLS, PLACEHOLDER
from ctxpipe.core.placeholders import STUB_PREFIX, UNCHANGED_STUB
from ctxpipe.core.prices import prices_from
from ctxpipe.core.reports import CountReport
from ctxpipe.core.stage import expand, read_ledger, split_lines
from ctxpipe.jobs.count import CountOptions, count_buffer
from helpers import FIXTURES, ROOT, corpus_files, error_line, needs_corpus, ok, run_cli, usage_error
from stage_checks import (
    FMT,
    NOW_ISO,
    PIPELINES,
    STAGES,
    Stage,
    apply,
    check_idempotent,
    check_keep_last,
    check_pipeline,
    check_step,
    co,
    mc,
    message_uuids,
    objects,
    result_blocks,
    sn,
    tool_problems,
)

CLAUDE = FIXTURES / "claude-code"
CLAUDE_FIXTURES = sorted(CLAUDE.glob("*.jsonl"))
REPEATS = CLAUDE / "repeats.jsonl"
BASIC = CLAUDE / "basic.jsonl"
CTXPIPE = f"{shlex.quote(sys.executable)} -m ctxpipe"


def uid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def q(path: Path | str) -> str:
    return shlex.quote(str(path))


def sh(command: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("CTXPIPE_DEBUG", None)
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, env=env, cwd=ROOT, timeout=120)


def stderr(result: subprocess.CompletedProcess[bytes]) -> str:
    return result.stderr.decode()


def line_objects(data: bytes) -> list[dict]:
    return [orjson.loads(line) for line in split_lines(data)]


def results_by_id(data: bytes) -> dict[str, dict]:
    return {tool_id: block for obj in objects(data) for tool_id, block in result_blocks(obj).items()}


def count_of(data: bytes) -> CountReport:
    return count_buffer(data, "-", CountOptions()).count_report()


def body(n: int, label: str = "line") -> str:
    """A tool result clearly longer than the placeholder."""
    return "".join(f"{i:6d}\t{label} {i} of the file under test\n" for i in range(1, n + 1))


def read_call(session: Session, name: str, content, tool_input: dict | None = None, sidechain: bool = False, parent=None) -> str:
    """One tool call and its result on the main chain (or on an inline sidechain after `parent`)."""
    tool_id = session.tool_id()
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input or {"file_path": f"/src/{tool_id}.py"}}
    if sidechain:
        [line] = session.response([block], usage(2000), sidechain=True, parent=parent)
        session.tool_result(tool_id, content, parent=line, sidechain=True)
    else:
        session.response([block], usage(2000 + 100 * session._tools))
        session.tool_result(tool_id, content)
    return tool_id


def tool_session(calls: list[tuple[str, object]]) -> tuple[Session, list[str]]:
    """A task, one call and result per (tool, content), and a closing answer."""
    session = Session()
    session.user("Please look into the failing build.")
    ids = [read_call(session, name, content) for name, content in calls]
    session.text("Done.", usage(9000))
    return session, ids


# --- the invariants, on every fixture -------------------------------------------------------


@pytest.mark.parametrize("stage", STAGES, ids=[stage.label for stage in STAGES])
@pytest.mark.parametrize("fixture", CLAUDE_FIXTURES, ids=[path.stem for path in CLAUDE_FIXTURES])
def test_every_stage_keeps_the_invariants_on_every_fixture(fixture: Path, stage: Stage) -> None:
    data = fixture.read_bytes()
    run = apply(stage, data)
    check_step(run)
    check_idempotent(stage, data)
    if stage.name == "snip":
        check_keep_last(run, stage.settings.keep_last)


def test_the_fixtures_give_every_stage_something_to_do() -> None:
    # Otherwise the test above would check pass-throughs only.
    changed = {stage.label: [f.stem for f in CLAUDE_FIXTURES if apply(stage, f.read_bytes()).outcome.changed] for stage in STAGES}
    assert all(changed.values()), changed
    assert "repeats" in changed[co().label]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[" | ".join(s.name for s in p) for p in PIPELINES])
@pytest.mark.parametrize("fixture", CLAUDE_FIXTURES, ids=[path.stem for path in CLAUDE_FIXTURES])
def test_pipelines_keep_the_invariants_on_every_fixture(fixture: Path, pipeline: tuple[Stage, ...]) -> None:
    data = fixture.read_bytes()
    runs = check_pipeline(pipeline, data)
    assert check_pipeline(pipeline, runs[-1].after)[-1].after == runs[-1].after  # idempotent as a whole


CLI_FIXTURES = [REPEATS, BASIC, CLAUDE / "parallel.jsonl", CLAUDE / "compacted.jsonl", CLAUDE / "sidechain.jsonl"]


@pytest.mark.parametrize("stage", STAGES, ids=[stage.label for stage in STAGES])
@pytest.mark.parametrize("fixture", CLI_FIXTURES, ids=[path.stem for path in CLI_FIXTURES])
def test_the_cli_writes_what_the_core_computes(fixture: Path, stage: Stage) -> None:
    data = fixture.read_bytes()
    result = ok(run_cli(*stage.argv, fixture))
    run = apply(stage, data)
    assert result.stdout == run.after
    assert stderr(result).startswith(f"ctxpipe: {stage.name}: {fixture}: {run.outcome.note}")  # the file it read, named


VALIDATE_CASES = [
    (REPEATS, mc(keep_recent=1)),
    (BASIC, mc(keep_recent=1)),
    (CLAUDE / "parallel.jsonl", mc(keep_recent=1)),
    (REPEATS, co()),
    (REPEATS, sn(keep_last=3)),
    (BASIC, sn(keep_last=3)),
    (CLAUDE / "parallel.jsonl", sn(keep_last=1)),
    (CLAUDE / "compacted.jsonl", sn(keep_last=1)),
    (CLAUDE / "sidechain.jsonl", sn(keep_last=1)),
]


@pytest.mark.parametrize("stage", [mc(keep_recent=1), co(), sn(keep_last=3)], ids=["microcompact", "collapse", "snip"])
def test_running_a_stage_on_its_own_output_changes_nothing(stage: Stage) -> None:
    once = ok(run_cli(*stage.argv, REPEATS)).stdout
    assert once != REPEATS.read_bytes()
    twice = ok(run_cli(*stage.argv, stdin=once))
    assert twice.stdout == once
    assert "nothing to" in stderr(twice)


@pytest.mark.parametrize("fixture, stage", VALIDATE_CASES, ids=[f"{f.stem}-{s.name}" for f, s in VALIDATE_CASES])
def test_validate_finds_no_error_in_stage_output(fixture: Path, stage: Stage, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    ok(run_cli(*stage.argv, "-o", out, fixture))
    assert out.read_bytes() != fixture.read_bytes()
    [report] = [json.loads(line) for line in ok(run_cli("validate", "--json", out)).stdout.splitlines()]
    assert report["valid"] is True and report["errors"] == 0, report["findings"]
    assert not [f for f in report["findings"] if f["code"] == "dangling-parent"]


# --- the invariants, on the real corpus -------------------------------------------------------


CORPUS = corpus_files()
CORPUS_STAGES = [mc(keep_recent=1), mc(), co(), sn(keep_last=3), sn(keep_last=20)]


@needs_corpus
@pytest.mark.parametrize("path", CORPUS, ids=[p.name[-24:] for p in CORPUS])
def test_every_stage_keeps_the_invariants_on_the_corpus(path: Path) -> None:
    data = path.read_bytes()
    for stage in CORPUS_STAGES:
        check_step(apply(stage, data))
        check_idempotent(stage, data)
    runs = check_pipeline((mc(keep_recent=2), co(), sn(keep_last=4)), data)
    assert runs[-1].after != data or not any(run.outcome.changed for run in runs)


@needs_corpus
def test_the_corpus_gives_the_stages_something_to_do() -> None:
    cleared = [p.name for p in CORPUS if apply(mc(keep_recent=1), p.read_bytes()).outcome.changed]
    snipped = [p.name for p in CORPUS if apply(sn(keep_last=3), p.read_bytes()).outcome.changed]
    assert len(cleared) >= 5 and len(snipped) >= 5, (cleared, snipped)


@needs_corpus
def test_a_real_session_through_a_shell_pipe_and_back(tmp_path: Path) -> None:
    source = max(CORPUS, key=lambda p: p.stat().st_size)
    ledger, out, back = tmp_path / "undo.jsonl", tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    ok(
        sh(
            f"{CTXPIPE} microcompact --force --ledger {q(ledger)} {q(source)} | {CTXPIPE} collapse --ledger {q(ledger)} "
            f"| {CTXPIPE} snip --keep-last 4 --ledger {q(ledger)} > {q(out)}"
        )
    )
    assert out.stat().st_size < source.stat().st_size
    ok(sh(f"{CTXPIPE} expand --ledger {q(ledger)} {q(out)} > {q(back)}"))
    assert back.read_bytes() == source.read_bytes()


# --- the ledger and expand ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [("microcompact", "--force"), ("collapse",), ("snip", "--keep-last", "4"), ("snip", "--range", "5..8"), ("snip", "--before", uid(11))],
    ids=["microcompact", "collapse", "snip-keep-last", "snip-range-lines", "snip-before"],
)
def test_ledger_round_trip_for_each_stage(argv: tuple[str, ...], tmp_path: Path) -> None:
    ledger, out, back = tmp_path / "undo.jsonl", tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    ok(run_cli(*argv, "--ledger", ledger, "-o", out, REPEATS))
    assert out.read_bytes() != REPEATS.read_bytes()
    [record] = read_ledger(ledger.read_bytes(), str(ledger))
    assert record["stage"] == argv[0] and record["removed"]
    result = ok(run_cli("expand", "--ledger", ledger, "-o", back, out))
    assert back.read_bytes() == REPEATS.read_bytes()
    assert "undid 1 stage run" in stderr(result)
    # On stdin too.
    assert ok(run_cli("expand", "--ledger", ledger, stdin=out.read_bytes())).stdout == REPEATS.read_bytes()


def test_three_stage_shell_pipe_shares_one_ledger(tmp_path: Path) -> None:
    ledger, out = tmp_path / "undo.jsonl", tmp_path / "out.jsonl"
    # keep 7: the first git status stays for collapse to fold into the second.
    result = ok(
        sh(
            f"{CTXPIPE} microcompact --force --keep-recent 7 --ledger {q(ledger)} {q(REPEATS)} "
            f"| {CTXPIPE} collapse --ledger {q(ledger)} | {CTXPIPE} snip --keep-last 4 --ledger {q(ledger)} > {q(out)}"
        )
    )
    records = read_ledger(ledger.read_bytes(), str(ledger))
    assert [r["stage"] for r in records] == ["microcompact", "collapse", "snip"]
    assert len(split_lines(out.read_bytes())) < len(split_lines(REPEATS.read_bytes()))
    assert stderr(result).count("ctxpipe: ") == 3
    back = ok(sh(f"{CTXPIPE} expand --ledger {q(ledger)} {q(out)}"))
    assert back.stdout == REPEATS.read_bytes()
    assert "undid 3 stage runs" in stderr(back)
    # The same chain in-process gives the same output.
    runs = check_pipeline((mc(keep_recent=7), co(), sn(keep_last=4)), REPEATS.read_bytes())
    assert all(run.outcome.changed for run in runs)
    assert len(split_lines(runs[-1].after)) == len(split_lines(out.read_bytes()))


def test_one_ledger_serves_several_files(tmp_path: Path) -> None:
    ledger = tmp_path / "undo.jsonl"
    outputs = {}
    for source in (REPEATS, BASIC):
        outputs[source] = ok(run_cli("microcompact", "--force", "--keep-recent", "1", "--ledger", ledger, source)).stdout
    assert len(read_ledger(ledger.read_bytes(), str(ledger))) == 2
    for source, out in outputs.items():
        result = ok(run_cli("expand", "--ledger", ledger, stdin=out))
        assert result.stdout == source.read_bytes()
        assert "undid 1 stage run" in stderr(result)


def test_expand_on_bytes_no_record_was_written_for_is_an_error(tmp_path: Path) -> None:
    ledger = tmp_path / "undo.jsonl"
    out = ok(run_cli("collapse", "--ledger", ledger, REPEATS)).stdout
    changed = out.replace(b"git status", b"git  status", 1)
    message = error_line(run_cli("expand", "--ledger", ledger, stdin=changed))
    assert "no record" in message and str(ledger) in message
    # The input itself is not the output the record was made for either.
    assert "no record" in error_line(run_cli("expand", "--ledger", ledger, REPEATS))


def test_expand_refuses_a_file_that_is_not_a_ledger(tmp_path: Path) -> None:
    not_ledger = tmp_path / "undo.jsonl"
    not_ledger.write_bytes(REPEATS.read_bytes())
    message = error_line(run_cli("expand", "--ledger", not_ledger, stdin=REPEATS.read_bytes()))
    assert f"{not_ledger}:1:" in message and "ledger" in message


def test_expand_needs_a_ledger() -> None:
    assert "--ledger" in usage_error(run_cli("expand", stdin=REPEATS.read_bytes()))


def test_a_stage_that_changes_nothing_writes_no_ledger_record(tmp_path: Path) -> None:
    ledger = tmp_path / "undo.jsonl"
    result = ok(run_cli("collapse", "--ledger", ledger, BASIC))
    assert result.stdout == BASIC.read_bytes()
    assert not ledger.exists() or ledger.read_bytes() == b""


def test_ledger_record_and_expand_in_process() -> None:
    data = REPEATS.read_bytes()
    run = apply(co(), data)
    record = run.record
    assert record is not None and record["stage"] == "collapse"
    # Only the two changed lines are stored whole; the rest are ranges of output lines.
    stored = [item for item in record["recipe"] if isinstance(item, dict)]
    assert len(stored) == 2 and all("toolu_01R00" in item["raw"] for item in stored)
    assert expand(run.after, [record]) == (data, 1)
    assert expand(data, [record]) == (data, 0)
    assert expand(run.after, []) == (run.after, 0)
    # Records of other outputs in the same ledger are skipped.
    other = apply(mc(keep_recent=1), BASIC.read_bytes()).record
    assert expand(run.after, [record, other]) == (data, 1)
    assert expand(run.after, [other, record]) == (data, 1)


def test_ledger_keeps_an_unterminated_last_line(tmp_path: Path) -> None:
    data = REPEATS.read_bytes().rstrip(b"\n")
    source = tmp_path / "in.jsonl"
    source.write_bytes(data)
    ledger = tmp_path / "undo.jsonl"
    for argv in (("microcompact", "--force"), ("snip", "--keep-last", "2")):
        out = ok(run_cli(*argv, "--ledger", ledger, source)).stdout
        assert out.endswith(b"\n")
        assert ok(run_cli("expand", "--ledger", ledger, stdin=out)).stdout == data
    run = apply(sn(keep_last=2), data)
    check_step(run)


def test_ledger_keeps_crlf_line_endings(tmp_path: Path) -> None:
    data = REPEATS.read_bytes().replace(b"\n", b"\r\n")
    source = tmp_path / "in.jsonl"
    source.write_bytes(data)
    ledger = tmp_path / "undo.jsonl"
    out = ok(run_cli("microcompact", "--force", "--no-marker", "--ledger", ledger, source)).stdout
    assert out.count(b"\r\n") == data.count(b"\r\n")  # changed lines keep their CRLF
    assert ok(run_cli("expand", "--ledger", ledger, stdin=out)).stdout == data


def test_ledger_round_trip_with_a_blank_line(tmp_path: Path) -> None:
    lines = split_lines(REPEATS.read_bytes())
    data = b"".join(lines[:5]) + b"\n" + b"".join(lines[5:])
    source, ledger = tmp_path / "in.jsonl", tmp_path / "undo.jsonl"
    source.write_bytes(data)
    out = ok(run_cli("microcompact", "--force", "--ledger", ledger, source)).stdout
    assert ok(run_cli("expand", "--ledger", ledger, stdin=out)).stdout == data


def test_ledger_round_trip_with_a_bom(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + REPEATS.read_bytes()
    source, ledger = tmp_path / "in.jsonl", tmp_path / "undo.jsonl"
    source.write_bytes(data)
    out = ok(run_cli("snip", "--keep-last", "4", "--ledger", ledger, source)).stdout
    assert ok(run_cli("expand", "--ledger", ledger, stdin=out)).stdout == data


# --- Messages API input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [("microcompact", "--force", "--keep-recent", "1"), ("collapse",), ("snip", "--keep-last", "3")], ids=["microcompact", "collapse", "snip"]
)
def test_stages_edit_a_messages_api_transcript(argv: tuple[str, ...], tmp_path: Path) -> None:
    import ctxpipe

    messages = ok(run_cli("convert", "--to", "anthropic", REPEATS)).stdout
    ledger = tmp_path / "undo.jsonl"
    out = ok(run_cli(*argv, "--ledger", ledger, stdin=messages)).stdout
    assert out != messages
    rows = line_objects(out)
    # No marker line in this format: each line a message, with what convert kept of its source.
    assert all({"role", "content"} <= set(row) <= {"role", "content", *RECORDED} for row in rows)
    assert all(a["role"] != b["role"] for a, b in zip(rows, rows[1:]))
    _, report = ctxpipe.convert_with_report(ctxpipe.convert(ctxpipe.read_transcript(out), "claude-code"), "anthropic")
    assert report.unanswered == [] and report.orphans == []
    if argv[0] == "collapse":
        changed = [a for a, b in zip(split_lines(messages), split_lines(out)) if a != b]
        assert len(changed) == 2 and b"toolu_01R001" in changed[0] and b"toolu_01R003" in changed[1]
    assert ok(run_cli(*argv, stdin=out)).stdout == out  # idempotent
    assert ok(run_cli("expand", "--ledger", ledger, stdin=out)).stdout == messages


# --- codex input ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [("microcompact", "--force"), ("collapse",), ("snip", "--keep-last", "2")], ids=["microcompact", "collapse", "snip"])
def test_a_codex_rollout_is_edited_as_a_rollout(argv: tuple[str, ...]) -> None:
    """Codex rollouts are written (tests/test_codex_write.py holds what is written): no conversion first."""
    rollout = FIXTURES / "codex" / "rollout.jsonl"
    by_path, by_pipe = (
        ok(run_cli(*argv, "--now", "2030-01-01T00:00:00Z", rollout)),
        ok(run_cli(*argv, "--now", "2030-01-01T00:00:00Z", stdin=rollout.read_bytes())),
    )
    assert by_path.stdout == by_pipe.stdout and by_path.stdout.startswith(rollout.read_bytes().split(b"\n", 1)[0])
    assert ctxpipe.read_transcript(by_path.stdout).format == "codex"


# --- microcompact -------------------------------------------------------------------------------


def test_microcompact_writes_the_exact_placeholder_and_touches_nothing_else() -> None:
    data = REPEATS.read_bytes()
    result = ok(run_cli("microcompact", "--force", "--keep-recent", "3", "--now", NOW_ISO, REPEATS))
    before, after = results_by_id(data), results_by_id(result.stdout)
    cleared = [tool_id for tool_id in before if after[tool_id] != before[tool_id]]
    assert cleared == ["toolu_01R001", "toolu_01R002", "toolu_01R003", "toolu_01R004", "toolu_01R005", "toolu_01R006"]
    for tool_id in cleared:
        assert after[tool_id] == {**before[tool_id], "content": "[Old tool result content cleared]"}
    assert PLACEHOLDER == "[Old tool result content cleared]"
    check_step(apply(mc(keep_recent=3), data))


def test_microcompact_keeps_the_last_keep_recent_compactable_results() -> None:
    session, ids = tool_session([("Read", body(20, f"file {n}")) for n in range(8)])
    data = session.to_bytes()
    for keep, expected in ((3, ids[:5]), (5, ids[:3]), (1, ids[:7]), (0, ids[:7]), (8, []), (20, [])):
        run = apply(mc(keep_recent=keep), data)
        assert [item["tool_use_id"] for item in run.outcome.removed] == expected, keep
        check_step(run)
    # --keep-recent 0 still keeps the last one, through the CLI too.
    out = ok(run_cli("microcompact", "--force", "--keep-recent", "0", stdin=data)).stdout
    after = results_by_id(out)
    assert after[ids[-1]]["content"] == body(20, "file 7")
    assert all(after[tool_id]["content"] == PLACEHOLDER for tool_id in ids[:-1])


def test_short_results_are_never_cleared_but_count_among_the_recent() -> None:
    short = "ok"  # shorter than the placeholder
    exactly = "x" * len(PLACEHOLDER)
    session, ids = tool_session([("Read", body(10)), ("Bash", short), ("Read", body(10, "b")), ("Bash", exactly), ("Read", body(10, "c")), ("Bash", short)])
    data = session.to_bytes()
    # keep 2: the last two compactable calls are ids[4] and ids[5] (short, yet it takes a place).
    run = apply(mc(keep_recent=2), data)
    assert [item["tool_use_id"] for item in run.outcome.removed] == [ids[0], ids[2]]
    after = results_by_id(run.after)
    assert after[ids[1]]["content"] == short and after[ids[3]]["content"] == exactly
    assert after[ids[4]]["content"] == body(10, "c")
    check_step(run)
    # keep 1: ids[4] is no longer recent and goes; the short ones still stay.
    run = apply(mc(keep_recent=1), data)
    assert [item["tool_use_id"] for item in run.outcome.removed] == [ids[0], ids[2], ids[4]]


def test_only_compactable_tools_are_cleared_by_default() -> None:
    names = [
        "Read",
        "Bash",
        "Grep",
        "Glob",
        "Edit",
        "Write",
        "WebFetch",
        "WebSearch",
        "PowerShell",
        "NotebookRead",
        "TodoWrite",
        "Task",
        "Agent",
        "mcp__github__get_issue",
    ]
    session, ids = tool_session([(name, body(10, name)) for name in names] + [("Read", body(3, "last"))])
    run = apply(mc(keep_recent=1), session.to_bytes())
    cleared = {item["tool"] for item in run.outcome.removed}
    assert cleared == {"Read", "Bash", "Grep", "Glob", "Edit", "Write", "WebFetch", "WebSearch", "PowerShell"}
    assert cleared <= COMPACTABLE_TOOLS
    check_step(run)


def test_task_agent_and_mcp_results_are_never_cleared_even_when_asked() -> None:
    session, ids = tool_session(
        [("Task", body(10, "t")), ("Agent", body(10, "a")), ("mcp__x__y", body(10, "m")), ("Read", body(10, "r")), ("Read", body(10, "r2"))]
    )
    data = session.to_bytes()
    result = ok(run_cli("microcompact", "--force", "--keep-recent", "1", "--tools", "Task,Agent,mcp__x__y,Read", stdin=data))
    after = results_by_id(result.stdout)
    assert [tool_id for tool_id in ids if after[tool_id]["content"] == PLACEHOLDER] == [ids[3]]
    err = stderr(result)
    for name in ("Task", "Agent", "mcp__x__y"):
        assert f"ctxpipe: warning: --tools: {name} results are never cleared" in err
    # Task and MCP alone: nothing can be cleared; the input passes through.
    result = ok(run_cli("microcompact", "--force", "--keep-recent", "1", "--tools", "Task,mcp__x__y", stdin=data))
    assert result.stdout == data
    assert "nothing to clear" in stderr(result)


def test_tools_option_limits_what_is_cleared() -> None:
    session, ids = tool_session([("Read", body(10)), ("Bash", body(10, "b")), ("Grep", body(10, "g")), ("Read", body(10, "r"))])
    run = apply(mc(keep_recent=1, tools=("Bash",)), session.to_bytes())
    assert [item["tool_use_id"] for item in run.outcome.removed] == []  # the only Bash call is the most recent Bash call
    run = apply(mc(keep_recent=1, tools=("Read", "Grep")), session.to_bytes())
    assert [item["tool_use_id"] for item in run.outcome.removed] == [ids[0], ids[2]]


def test_images_inside_a_cleared_result_go_too() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 50}}
    session, ids = tool_session([("Read", [{"type": "text", "text": "Screenshot of the login page"}, image]), ("Read", body(5))])
    run = apply(mc(keep_recent=1), session.to_bytes())
    assert [item["tool_use_id"] for item in run.outcome.removed] == [ids[0]]
    assert results_by_id(run.after)[ids[0]]["content"] == PLACEHOLDER
    assert b"iVBORw0KGgo" not in run.after
    assert run.outcome.report.removed_estimate > 1900  # the image's flat cost (2,000) is counted
    check_step(run)


def test_an_image_only_result_is_cleared() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 50}}
    session, ids = tool_session([("Read", [image]), ("Read", body(5))])
    run = apply(mc(keep_recent=1), session.to_bytes())
    assert [item["tool_use_id"] for item in run.outcome.removed] == [ids[0]]


def test_sidechain_lines_and_tool_use_result_are_untouched() -> None:
    session = Session()
    session.user("Find and fix the flaky test.")
    task = session.tool_id()
    [task_line] = session.response([{"type": "tool_use", "id": task, "name": "Task", "input": {"prompt": "find it"}}], usage(3000))
    side = session.user("find it", parent=None, sidechain=True)
    side_read = read_call(session, "Read", body(15, "side"), sidechain=True, parent=side)
    session.tool_result(task, [{"type": "text", "text": "It is tests/test_io.py"}], parent=task_line)
    main = [read_call(session, "Read", body(15, f"main {n}")) for n in range(3)]
    session.lines[-3]["toolUseResult"] = {"type": "text", "file": {"filePath": "/src/x.py", "content": body(15, "main 1"), "numLines": 15}}
    session.text("Fixed.", usage(9000))
    data = session.to_bytes()
    run = apply(mc(keep_recent=1), data)
    assert [item["tool_use_id"] for item in run.outcome.removed] == main[:2]
    before, after = split_lines(data), split_lines(run.after)
    for old, new in zip(before, after):
        obj = orjson.loads(old)
        if obj.get("isSidechain"):
            assert new == old
    assert results_by_id(run.after)[side_read]["content"] == body(15, "side")
    changed = [orjson.loads(new) for old, new in zip(before, after) if old != new]
    [with_field] = [obj for obj in changed if obj["toolUseResult"].get("file")]
    assert with_field["toolUseResult"]["file"]["content"] == body(15, "main 1")  # the field stays as it was
    check_step(run)


def test_history_above_a_compact_boundary_is_untouched() -> None:
    session = Session()
    session.user("Start.")
    old = [read_call(session, "Read", body(20, f"old {n}")) for n in range(3)]
    session.text("Working.", usage(50000))
    session.compact()
    new = [read_call(session, "Read", body(20, f"new {n}")) for n in range(3)]
    session.text("Done.", usage(9000))
    data = session.to_bytes()
    boundary = data.index(b'"compact_boundary"')
    prefix = data[: data.rindex(b"\n", 0, boundary) + 1]
    run = apply(mc(keep_recent=1), data)
    assert [item["tool_use_id"] for item in run.outcome.removed] == new[:2]
    assert run.after.startswith(prefix)
    assert all(results_by_id(run.after)[tool_id]["content"].startswith("     1\told") for tool_id in old)
    check_step(run)


def test_microcompact_marker() -> None:
    data = BASIC.read_bytes()
    result = ok(run_cli("microcompact", "--force", "--keep-recent", "1", "--now", "2026-03-02T00:00:00Z", BASIC))
    lines = split_lines(result.stdout)
    assert len(lines) == len(split_lines(data)) + 1
    marker = orjson.loads(lines[-1])
    last = line_objects(data)[-1]
    assert marker["type"] == "system" and marker["subtype"] == "microcompact_boundary"
    assert marker["parentUuid"] == last["uuid"]
    assert marker["timestamp"] == "2026-03-02T00:00:00.000Z"
    assert marker["sessionId"] == last["sessionId"] and marker["isSidechain"] is False
    metadata = marker["microcompactMetadata"]
    assert set(metadata) >= {"trigger", "preTokens", "tokensSaved", "compactedToolIds"}
    assert metadata["trigger"] == "manual"
    assert metadata["compactedToolIds"] == ["toolu_01BASH", "toolu_01READ"]
    assert metadata["tokensSaved"] > 0 and metadata["preTokens"] == count_of(data).tokens
    # The same run gives the same marker (its uuid comes from its content).
    again = ok(run_cli("microcompact", "--force", "--keep-recent", "1", "--now", "2026-03-02T00:00:00Z", BASIC))
    assert again.stdout == result.stdout


def test_no_marker_leaves_the_marker_out() -> None:
    data = REPEATS.read_bytes()
    result = ok(run_cli("microcompact", "--force", "--no-marker", REPEATS))
    assert len(split_lines(result.stdout)) == len(split_lines(data))
    assert b"microcompact_boundary" not in result.stdout
    assert result.stdout != data


def test_count_sees_the_microcompact_marker() -> None:
    data = REPEATS.read_bytes()
    out = apply(mc(keep_recent=2), data).after
    before, after = count_of(data), count_of(out)
    saved = orjson.loads(split_lines(out)[-1])["microcompactMetadata"]["tokensSaved"]
    assert after.tokens == before.tokens - saved < before.tokens
    assert [(a.kind, a.tokens) for a in after.adjustments] == [("microcompact_boundary", -saved)]
    # And through the CLI.
    cli = json.loads(ok(run_cli("count", "--json", stdin=out)).stdout)
    assert cli["tokens"] == after.tokens and cli["adjustments"][0]["kind"] == "microcompact_boundary"


LAST_BASIC_RESPONSE = datetime(2026, 3, 1, 10, 0, 12, tzinfo=timezone.utc)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    "gap, minutes_later, fires",
    [
        (None, 59, False),
        (None, 60, True),
        (None, 61 * 24, True),
        ("10", 9, False),
        ("10", 10, True),
        ("0", 0, True),
    ],
)
def test_time_trigger(gap: str | None, minutes_later: float, fires: bool) -> None:
    data = BASIC.read_bytes()
    args = ["microcompact", "--keep-recent", "1", "--now", iso(LAST_BASIC_RESPONSE + timedelta(minutes=minutes_later))]
    if gap is not None:
        args += ["--gap-minutes", gap]
    result = ok(run_cli(*args, BASIC))
    if fires:
        assert result.stdout != data
        marker = orjson.loads(split_lines(result.stdout)[-1])
        assert marker["microcompactMetadata"]["trigger"] == "auto"
        assert marker["microcompactMetadata"]["compactedToolIds"] == ["toolu_01BASH", "toolu_01READ"]
    else:
        assert result.stdout == data
        assert "not triggered" in stderr(result)
        assert f"{int(minutes_later)} min since the last response" in stderr(result)


def test_force_clears_whatever_the_time() -> None:
    data = BASIC.read_bytes()
    now = iso(LAST_BASIC_RESPONSE + timedelta(minutes=1))
    assert ok(run_cli("microcompact", "--keep-recent", "1", "--now", now, BASIC)).stdout == data
    forced = ok(run_cli("microcompact", "--force", "--keep-recent", "1", "--now", now, BASIC)).stdout
    assert forced != data and b"[Old tool result content cleared]" in forced


def test_no_timestamp_needs_force() -> None:
    session, _ = tool_session([("Read", body(10)), ("Read", body(10, "b"))])
    for line in session.lines:
        line.pop("timestamp")
    data = session.to_bytes()
    result = ok(run_cli("microcompact", "--keep-recent", "1", stdin=data))
    assert result.stdout == data and "--force" in stderr(result)
    assert ok(run_cli("microcompact", "--keep-recent", "1", "--force", stdin=data)).stdout != data


def test_bad_now_is_a_usage_error() -> None:
    assert "--now" in usage_error(run_cli("microcompact", "--now", "yesterday", REPEATS))


def test_report_table_and_json(tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    result = ok(run_cli("microcompact", "--force", "--keep-recent", "2", "--report", "--report-json", report_file, REPEATS))
    report = json.loads(report_file.read_text())
    assert report["file"] == str(REPEATS) and report["stage"] == "microcompact"
    # keep 2: R008 and R009 stay; R001..R007 are 5 Reads, a Bash and an Edit.
    assert {tool: v["results"] for tool, v in report["by_tool"].items()} == {"Read": 5, "Bash": 1, "Edit": 1}
    assert report["cleared"] == 7 == sum(v["results"] for v in report["by_tool"].values())
    assert report["removed_estimate"] == sum(v["tokens"] for v in report["by_tool"].values()) > 0
    marker = orjson.loads(split_lines(result.stdout)[-1])
    assert marker["microcompactMetadata"]["tokensSaved"] == report["tokens_saved"] == report["removed_estimate"]
    # The figures the stage prints are count's, on its input and its output.
    assert report["tokens_before"] == count_of(REPEATS.read_bytes()).tokens
    assert report["tokens_after"] == count_of(result.stdout).tokens
    assert report["tokens_freed"] == report["tokens_before"] - report["tokens_after"] == report["tokens_saved"]
    err = stderr(result)
    assert re.search(r"tool\s.*results\s.*tokens freed", err), err
    for tool in ("Read", "Bash", "Edit"):
        assert re.search(rf"{tool}\s+│\s+{report['by_tool'][tool]['results']}\s+│\s+{report['by_tool'][tool]['tokens']:,}", err), err
    assert b"Read" not in result.stdout.split(b"\n")[-1]  # the table is not on stdout


# --- cache-aware microcompact -----------------------------------------------------------------


SONNET_PRICES = Prices(3.0, 3.75, 6.0, 0.30, 15.0, Prices(6.0, 7.5, 12.0, 0.60, 22.5))  # with its rate over 200K


def test_costs_by_hand() -> None:
    million = 1_000_000
    # Warm cache: the cleared prompt must be written again; keeping it is a cheap read.
    keep, clear = costs(100_000, 15_000, 20_000, True, 3.75, 0.30, 5)
    assert keep == pytest.approx([0.03 * n for n in range(1, 6)])
    first = (20_000 * 0.30 + 65_000 * 3.75) / million
    assert clear == pytest.approx([first + 85_000 * 0.30 / million * n for n in range(5)])
    assert all(c > k for c, k in zip(clear, keep))  # a 15% share does not pay within 5 turns
    # Expired cache: both courses write the prompt again; the smaller one wins at once.
    keep, clear = costs(100_000, 15_000, 20_000, False, 3.75, 0.30, 5)
    assert keep[0] == pytest.approx(100_000 * 3.75 / million)
    assert clear[0] == pytest.approx(85_000 * 3.75 / million)
    assert clear[0] < keep[0]
    # The kept prefix never exceeds what is left of the prompt.
    keep, clear = costs(10_000, 4_000, 50_000, False, 3.75, 0.30, 1)
    assert clear == pytest.approx([6_000 * 3.75 / million])


def cache_session(minutes_idle: float, one_hour: bool = False) -> tuple[list, list, datetime]:
    session = Session()
    session.user("Refactor the parser.")
    final = usage(100_000, output=0)
    if one_hour:
        final["cache_creation"] = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": final["cache_creation_input_tokens"]}
    else:
        final["cache_creation"] = {"ephemeral_5m_input_tokens": final["cache_creation_input_tokens"], "ephemeral_1h_input_tokens": 0}
    session.text("Done.", final)
    entries = list(iter_entries(io.BytesIO(session.to_bytes()), "x"))
    last = datetime.fromisoformat(session.lines[-1]["timestamp"].replace("Z", "+00:00"))
    return FMT.messages(entries), entries, last + timedelta(minutes=minutes_idle)


@pytest.mark.parametrize(
    "idle, one_hour, warm, clears, write",
    [
        (2, False, True, False, 3.75),  # warm 5-minute cache: a cache break does not pay
        (5 + 1 / 60, False, False, True, 3.75),  # just past the 5-minute TTL: it pays at turn 1
        (30, False, False, True, 3.75),
        (30, True, True, False, 6.0),  # the 1-hour TTL the last usage shows: still warm at 30 minutes
        (61, True, False, True, 6.0),
    ],
)
def test_decide_by_hand(idle: float, one_hour: bool, warm: bool, clears: bool, write: float) -> None:
    messages, entries, now = cache_session(idle, one_hour)
    decision = decide(messages, entries, 15_000, 20_000, CachePolicy(), now)
    assert decision.prompt_tokens == 100_000
    assert decision.ttl_minutes == (60 if one_hour else 5)
    assert decision.warm is warm and decision.clear is clears
    assert decision.prices == SONNET_PRICES
    keep, clear = costs(100_000, 15_000, 20_000, warm, write, 0.30, 5)
    assert decision.cost_keep == pytest.approx(keep[-1]) and decision.cost_clear == pytest.approx(clear[-1])
    if clears:
        assert decision.break_even_turn == 1 and "pays for itself by turn 1" in decision.reason
    else:
        assert decision.break_even_turn is None and "would not pay" in decision.reason


def test_decide_clear_at_least_and_horizon() -> None:
    messages, entries, now = cache_session(30)
    decision = decide(messages, entries, 15_000, 20_000, CachePolicy(clear_at_least=20_000), now)
    assert decision.clear is False and "--clear-at-least 20,000" in decision.reason
    # Warm, a large share freed, a long horizon: the break pays back later, at a turn computed by hand.
    messages, entries, now = cache_session(1)
    decision = decide(messages, entries, 60_000, 0, CachePolicy(horizon=50), now)
    keep, clear = costs(100_000, 60_000, 0, True, 3.75, 0.30, 50)
    turn = next(n + 1 for n in range(50) if clear[n] <= keep[n])
    assert decision.clear is True and decision.break_even_turn == turn > 1


def test_custom_prices_come_first() -> None:
    own = Prices(1.0, 0.30, 0.30, 0.30, 1.0)  # writing the cache costs no more than reading it
    policy = CachePolicy(prices=prices_from({"sonnet": own.as_dict()}))
    assert policy.prices_for(SONNET) == own
    assert CachePolicy().prices_for(SONNET) == SONNET_PRICES
    assert policy.prices == (("sonnet", own),)  # the catalog comes after a user's table, not inside it
    messages, entries, now = cache_session(1)
    assert decide(messages, entries, 15_000, 20_000, CachePolicy(), now).clear is False
    assert decide(messages, entries, 15_000, 20_000, policy, now).clear is True


CACHE_INPUT = FIXTURES / "microcompact" / "cache-aware-warm.in.jsonl"


def test_cache_aware_cli_prints_the_comparison(tmp_path: Path) -> None:
    data = CACHE_INPUT.read_bytes()
    report = tmp_path / "r.json"
    warm = ok(run_cli("microcompact", "--cache-aware", "--clear-at-least", "10", "--now", "2026-04-02T09:00:40Z", "--report-json", report, CACHE_INPUT))
    assert warm.stdout == data
    assert re.search(
        r"microcompact: \S+cache-aware-warm\.in\.jsonl: not clearing: the cache break would not pay for itself within 5 turns \(\$[\d.]+ vs \$[\d.]+\)",
        stderr(warm),
    )
    assert re.search(r"microcompact: cache warm \(TTL 5 min\); over 5 turns keeping costs \$[\d.]+, clearing \$[\d.]+", stderr(warm))
    cache = json.loads(report.read_text())["cache"]
    assert cache["clear"] is False and cache["cache_warm"] is True
    assert f"keeping costs ${cache['cost_keep_usd']:.4f}, clearing ${cache['cost_clear_usd']:.4f}" in stderr(warm)
    expired = ok(run_cli("microcompact", "--cache-aware", "--clear-at-least", "10", "--now", "2026-04-02T12:00:00Z", CACHE_INPUT))
    assert expired.stdout != data
    assert "cache expired (TTL 5 min)" in stderr(expired) and "break-even at turn 1" in stderr(expired)
    assert orjson.loads(split_lines(expired.stdout)[-1])["microcompactMetadata"]["trigger"] == "cache-aware"
    # The default --clear-at-least (10,000) blocks this small clear even with the cache expired.
    small = ok(run_cli("microcompact", "--cache-aware", "--now", "2026-04-02T12:00:00Z", CACHE_INPUT))
    assert small.stdout == data and "under --clear-at-least 10,000" in stderr(small)
    # --force overrides the cost model.
    assert ok(run_cli("microcompact", "--cache-aware", "--force", "--now", "2026-04-02T09:00:40Z", CACHE_INPUT)).stdout != data


def test_cache_aware_cli_uses_a_prices_file(tmp_path: Path) -> None:
    data = CACHE_INPUT.read_bytes()
    model = next(obj["message"]["model"] for obj in line_objects(data) if obj.get("type") == "assistant")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({model: {"input": 1, "cache_write_5m": 0.1, "cache_write_1h": 0.1, "cache_read": 0.1, "output": 1}}))
    report = tmp_path / "r.json"
    result = ok(
        run_cli(
            "microcompact", "--cache-aware", "--clear-at-least", "10", "--prices", prices, "--report-json", report, "--now", "2026-04-02T09:00:40Z", CACHE_INPUT
        )
    )
    assert result.stdout != data, stderr(result)  # with writes as cheap as reads, even a warm cache pays
    cache = json.loads(report.read_text())["cache"]
    assert cache["prices_per_mtok"] == {"input": 1.0, "cache_write_5m": 0.1, "cache_write_1h": 0.1, "cache_read": 0.1, "output": 1.0}
    assert cache["clear"] is True and cache["break_even_turn"] == 1


@pytest.mark.parametrize(
    "content",
    ["not json", '{"sonnet": {"input": 1}}', '{"sonnet": {"input": "cheap", "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1, "output": 1}}'],
    ids=["not-json", "missing-keys", "not-a-number"],
)
def test_a_bad_prices_file_is_an_error(content: str, tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(content)
    message = error_line(run_cli("microcompact", "--cache-aware", "--prices", prices, REPEATS))
    assert str(prices) in message and "price table" in message
    missing = tmp_path / "missing.json"
    assert str(missing) in error_line(run_cli("microcompact", "--cache-aware", "--prices", missing, REPEATS))


@pytest.mark.parametrize("content", ["[1, 2]", '{"sonnet": 5}'], ids=["array", "row-not-object"])
def test_a_prices_file_of_the_wrong_shape_is_an_error(content: str, tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(content)
    message = error_line(run_cli("microcompact", "--cache-aware", "--prices", prices, REPEATS))
    assert str(prices) in message and "price table" in message


# --- collapse -----------------------------------------------------------------------------------


def test_collapse_on_repeats_folds_exactly_the_earlier_identical_results() -> None:
    data = REPEATS.read_bytes()
    result = ok(run_cli("collapse", "--now", NOW_ISO, REPEATS))
    before, after = split_lines(data), split_lines(result.stdout)
    assert len(after) == len(before) + 1
    changed = [number for number, (old, new) in enumerate(zip(before, after), 1) if old != new]
    assert changed == [3, 7]  # the first config.py Read, the first `git status`
    results = results_by_id(result.stdout)
    config, status = results["toolu_01R001"]["content"], results["toolu_01R003"]["content"]
    assert config.startswith(STUB_PREFIX) and status.startswith(STUB_PREFIX)
    assert "Read" in config and "/home/dev/svc/config.py" in config and "toolu_01R006" in config
    assert "Bash" in status and "git status" in status and "toolu_01R009" in status
    # The app.py reads differ (the file was edited in between); util.py's full read is what the
    # later "File unchanged" stub points back to: none of them is folded.
    original = results_by_id(data)
    for tool_id in ("toolu_01R002", "toolu_01R005", "toolu_01R006", "toolu_01R007", "toolu_01R008", "toolu_01R009"):
        assert results[tool_id] == original[tool_id]
    assert original["toolu_01R008"]["content"].startswith(UNCHANGED_STUB)
    marker = orjson.loads(after[-1])
    assert marker["type"] == "system" and marker["subtype"] == "ctxpipe_collapse"
    assert marker["parentUuid"] == uid(20)
    metadata = marker["ctxpipeMetadata"]
    assert metadata["foldedToolIds"] == ["toolu_01R001", "toolu_01R003"]
    assert metadata["tokensSaved"] > 0
    assert "folded 2 repeated results" in stderr(result)


def test_count_sees_the_collapse_marker() -> None:
    data = REPEATS.read_bytes()
    out = apply(co(), data).after
    saved = orjson.loads(split_lines(out)[-1])["ctxpipeMetadata"]["tokensSaved"]
    before, after = count_of(data), count_of(out)
    assert after.tokens == before.tokens - saved < before.tokens
    assert [(a.kind, a.tokens) for a in after.adjustments] == [("ctxpipe_collapse", -saved)]


def test_collapse_keeps_the_latest_of_three_copies() -> None:
    listing = body(30)
    session, ids = tool_session([("Read", listing), ("Read", listing), ("Bash", listing), ("Read", listing)])
    for line in session.lines:  # the same input for every Read
        for block in (line.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and block["name"] == "Read":
                block["input"] = {"file_path": "/src/same.py"}
    run = apply(co(), session.to_bytes())
    folds = run.outcome.report.folds
    assert [(f.tool_use_id, f.survivor) for f in folds] == [(ids[0], ids[3]), (ids[1], ids[3])]  # the Bash call differs in tool
    check_step(run)
    check_idempotent(co(), session.to_bytes())


def test_collapse_never_folds_into_a_stub_or_a_cleared_result() -> None:
    listing = body(30)
    stub = UNCHANGED_STUB + " The content from the earlier Read tool_result in this conversation is still current."
    session, ids = tool_session([("Read", listing), ("Read", stub), ("Read", stub), ("Read", PLACEHOLDER), ("Read", PLACEHOLDER)])
    for line in session.lines:
        for block in (line.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                block["input"] = {"file_path": "/src/same.py"}
    data = session.to_bytes()
    run = apply(co(), data)
    assert not run.outcome.changed and run.after == data


def test_collapse_after_microcompact_and_the_reverse() -> None:
    data = REPEATS.read_bytes()
    # Cleared results are not copies: after microcompact there is nothing left to fold.
    cleared = apply(mc(keep_recent=1), data).after
    assert not apply(co(), cleared).outcome.changed
    folded = apply(co(), data).after
    run = apply(mc(keep_recent=1), folded)
    assert run.outcome.changed
    check_step(run)


# --- snip ---------------------------------------------------------------------------------------


def test_snip_keep_last_keeps_the_opening_message_and_the_last_n() -> None:
    data = REPEATS.read_bytes()
    for keep in (1, 3, 4, 10, 18):
        result = ok(run_cli("snip", "--keep-last", str(keep), "--now", NOW_ISO, REPEATS))
        run = apply(sn(keep_last=keep), data)
        assert result.stdout == run.after
        messages = message_uuids(result.stdout)
        assert messages[0] == (uid(1),)
        # Every message of repeats.jsonl is one line; a tool pair is never split, so an odd
        # split point keeps one more.
        assert len(messages) - 1 in (keep, keep + 1)
        assert messages[-keep:] == message_uuids(data)[-keep:]
        check_step(run)
    # Nothing between the opening message and the tail: a pass-through.
    result = ok(run_cli("snip", "--keep-last", "19", REPEATS))
    assert result.stdout == data and "nothing to snip" in stderr(result)


def test_snip_keep_last_widens_so_no_pair_is_split() -> None:
    data = BASIC.read_bytes()
    # basic: task, [thinking, text, Bash], result, [Read], result, [text, Edit], result, [text]
    run = apply(sn(keep_last=2), data)
    messages = message_uuids(run.after)
    assert messages == [(uid(1),), (uid(9), uid(10)), (uid(11),), (uid(13),)]  # the Edit pair kept whole: 3 messages
    check_step(run)
    run = apply(sn(keep_last=3), data)
    assert message_uuids(run.after) == messages
    # parallel: one response with two calls, then two results; the tail cannot start between them.
    parallel = (CLAUDE / "parallel.jsonl").read_bytes()
    run = apply(sn(keep_last=2), parallel)
    assert not run.outcome.changed and "nothing to snip" in run.outcome.note
    run = apply(sn(keep_last=1), parallel)
    assert message_uuids(run.after) == [(uid(1),), (uid(9),)]
    check_step(run)


def test_snip_keep_last_never_parts_the_opening_response_from_its_results() -> None:
    # The tail of a session (or a file whose first line was skipped) opens with a response: the
    # opening message stays, so the results of its calls stay with it.
    session = Session()
    session.user("Look at the parser.")
    for number in range(6):
        tool = session.tool_id()
        session.response([{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": f"/p/m{number}.py"}}], usage(10_000 + 1000 * number))
        session.tool_result(tool, f"module {number}")
    session.text("Read them.", usage(20_000))
    tail = b"".join(session.to_bytes().splitlines(keepends=True)[1:])  # without the opening prompt
    for args in (sn(keep_last=2), sn(keep_last=3)):
        run = apply(args, tail)
        assert run.outcome.changed, run.outcome.note
        assert tool_problems(run.after) == (set(), set())
        check_step(run)


def test_snip_never_removes_the_one_copy_a_collapse_pointer_stays_on(tmp_path: Path) -> None:
    # collapse keeps the latest copy and points the earlier ones at it: a cut that takes the latest
    # and leaves a pointer would leave no copy at all.
    session = Session()
    session.user("Look at a.py.")
    body = "\n".join(f"line of text {n}" for n in range(200))
    for number in range(3):
        tool = session.tool_id()
        session.response([{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": "/p/a.py"}}], usage(10_000 + 1000 * number))
        session.tool_result(tool, body)
        session.user(f"And again {number}.")
    session.text("Done.", usage(20_000))
    folded = run_cli("collapse", "-", stdin=session.to_bytes())
    assert folded.returncode == 0 and folded.stdout.count(b"[ctxpipe collapse:") == 2
    path = tmp_path / "folded.jsonl"
    path.write_bytes(folded.stdout)
    refused = run_cli("snip", "--range", "7..9", path)
    assert refused.returncode == 1 and b"the one copy a collapse pointer that stays refers to" in refused.stderr and refused.stdout == b""
    kept = run_cli("snip", "--range", "2..6", path)  # the pointers go, the copy stays
    assert kept.returncode == 0 and b"line of text 199" in kept.stdout and b"[ctxpipe collapse:" not in kept.stdout


def test_collapse_never_folds_the_copy_a_file_unchanged_stub_points_back_to() -> None:
    # Claude Code answered the second read with its stub ("refer to the earlier Read"): that earlier
    # full copy stays whole even though the same file was read again, unchanged, later.
    from project_sessions import Project

    p = Project("/w/proj")
    p.ask("Look at a.py.")
    body = "\n".join(f"line of text {n}" for n in range(200))
    p.read("a.py", body)
    p.unchanged("a.py")
    p.ask("Once more, after the tests.")
    p.read("a.py", body)
    p.read("b.py", body + "\nb")
    p.read("b.py", body + "\nb")  # the same read twice with no stub between: folded as ever
    p.say("Same.")
    run = apply(co(), p.to_bytes())
    folded = {fold.tool_use_id for fold in run.outcome.report.folds}
    reads = [
        block["id"] for obj in objects(p.to_bytes()) if obj["type"] == "assistant" for block in obj["message"]["content"] if block.get("type") == "tool_use"
    ]
    assert folded == {reads[3]}, (folded, reads)  # b.py's first copy only; a.py's first copy stays
    check_step(run)


def test_snip_before_a_uuid() -> None:
    data = BASIC.read_bytes()
    result = ok(run_cli("snip", "--before", uid(9), "--now", NOW_ISO, BASIC))
    run = apply(sn(before=uid(9)), data)
    assert result.stdout == run.after
    assert message_uuids(result.stdout) == [(uid(1),), (uid(9), uid(10)), (uid(11),), (uid(13),)]
    marker = orjson.loads(split_lines(result.stdout)[-1])
    assert marker["subtype"] == "snip_boundary"
    # The removed responses, their results and the progress line between them.
    assert marker["snipMetadata"]["removedUuids"] == [uid(n) for n in (2, 3, 4, 5, 6, 7, 8)]
    assert marker["parentUuid"] == uid(13)
    # The first kept line now hangs off the opening message.
    kept = {obj.get("uuid"): obj for obj in line_objects(result.stdout)}
    assert kept[uid(9)]["parentUuid"] == uid(1)
    check_step(run)


@pytest.mark.parametrize(
    "span",
    [(uid(4), uid(7)), (uid(5), uid(6)), ("4", "7"), ("5", "6"), (uid(6), uid(5)), ("6", uid(5))],
    ids=["uuids", "uuids-widened", "lines", "lines-widened", "reversed", "mixed"],
)
def test_snip_range_widens_to_whole_pairs(span: tuple[str, str]) -> None:
    data = REPEATS.read_bytes()
    result = ok(run_cli("snip", "--range", f"{span[0]}..{span[1]}", "--now", NOW_ISO, REPEATS))
    lines = line_objects(result.stdout)
    marker = lines[-1]
    assert marker["snipMetadata"]["removedUuids"] == [uid(4), uid(5), uid(6), uid(7)]
    assert marker["snipMetadata"]["removedMessages"] == 4
    assert [obj["uuid"] for obj in lines[:-1]] == [uid(n) for n in range(1, 21) if n not in (4, 5, 6, 7)]
    by_uuid = {obj["uuid"]: obj for obj in lines}
    assert by_uuid[uid(8)]["parentUuid"] == uid(3)  # re-parented past the removed lines
    run = apply(sn(span=span), data)
    assert result.stdout == run.after
    check_step(run)


def test_snip_reparents_so_validate_finds_no_dangling_parent(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    ok(run_cli("snip", "--range", f"{uid(2)}..{uid(9)}", "-o", out, REPEATS))
    [report] = [json.loads(line) for line in ok(run_cli("validate", "--json", out)).stdout.splitlines()]
    assert report["valid"] is True
    assert [f for f in report["findings"] if f["code"] == "dangling-parent"] == []
    assert len(split_lines(out.read_bytes())) == 20 - 8 + 1


@pytest.mark.parametrize("args", [("--keep-last", "3"), ("--before", uid(11)), ("--range", f"{uid(4)}..{uid(7)}")], ids=["keep-last", "before", "range"])
def test_repeating_a_snip_is_a_no_op(args: tuple[str, ...]) -> None:
    once = ok(run_cli("snip", *args, REPEATS)).stdout
    assert once != REPEATS.read_bytes()
    twice = ok(run_cli("snip", *args, stdin=once))
    assert twice.stdout == once
    assert "nothing to snip" in stderr(twice)
    if args[0] == "--range":
        assert "snipped already" in stderr(twice)


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--keep-last", "3", "--before", uid(5)),
        ("--keep-last", "3", "--range", "1..2"),
        ("--before", uid(5), "--range", "1..2"),
        ("--keep-last", "3", "--before", uid(5), "--range", "1..2"),
    ],
    ids=["none", "keep-last+before", "keep-last+range", "before+range", "all-three"],
)
def test_snip_takes_exactly_one_of_its_options(args: tuple[str, ...]) -> None:
    message = usage_error(run_cli("snip", *args, REPEATS))
    assert "exactly one of --before, --range, --keep-last" in message


def test_a_range_bound_off_the_messages_names_the_lines_that_are_on_them() -> None:
    """basic.jsonl: line 1 and lines 3, 7, 14, 15 are not messages of the active context."""
    result = run_cli("snip", "--range", "3..9", BASIC)
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode() == (
        "ctxpipe: error: --range: 3 is not a line or uuid of a message in the active context; its 8 messages are on lines 2, 4-6, 8-13, 16\n"
    )


def test_many_runs_of_message_lines_are_cut_in_the_middle() -> None:
    from ctxpipe.core.jsonl import Entry
    from ctxpipe.core.model import Message
    from ctxpipe.core.snip import message_lines

    entries = [Entry({"n": n}, line=n + 1) for n in range(40)]
    messages = [Message("user", [], [2 * n]) for n in range(20)]  # lines 1, 3, …, 39
    assert message_lines(messages, entries) == "its 20 messages are on lines 1, 3, 5, 7, …, 33, 35, 37, 39"


@pytest.mark.parametrize("args", [("--range", "5"), ("--keep-last", "0")], ids=["range-without-dots", "keep-last-0"])
def test_snip_bad_values_are_usage_errors(args: tuple[str, ...]) -> None:
    usage_error(run_cli("snip", *args, REPEATS))


@pytest.mark.parametrize(
    "args, named",
    [
        (("--before", "00000000-dead-beef-0000-000000000000"), "00000000-dead-beef-0000-000000000000"),
        (("--range", f"{uid(4)}..no-such-uuid"), "no-such-uuid"),
        (("--range", "4..999"), "999"),
    ],
    ids=["before", "range-uuid", "range-line"],
)
def test_snip_unknown_uuid_or_line_is_an_error(args: tuple[str, ...], named: str) -> None:
    message = error_line(run_cli("snip", *args, REPEATS))
    assert named in message


def test_snip_marker_and_count(tmp_path: Path) -> None:
    data = REPEATS.read_bytes()
    run = apply(sn(keep_last=4), data)
    marker = orjson.loads(split_lines(run.after)[-1])
    assert marker["type"] == "system" and marker["subtype"] == "snip_boundary"
    metadata = marker["snipMetadata"]
    assert metadata["removedUuids"] == [item["uuid"] for item in run.outcome.removed]
    assert metadata["tokensSaved"] == run.outcome.report.tokens_saved == run.outcome.report.removed_estimate > 0
    # The tokens snipped come off the stale usage.
    after = count_of(run.after)
    assert [(a.kind, a.tokens) for a in after.adjustments] == [("snip_boundary", -metadata["tokensSaved"])]
    assert after.tokens < count_of(data).tokens
    no_marker = apply(sn(keep_last=4, marker=False), data).after
    assert no_marker == b"".join(split_lines(run.after)[:-1])


def resumed_after_compact() -> bytes:
    """History, a compact boundary and its summary, then the kept tail written again with the same
    uuids (its first line re-parented to the summary), as a compaction that keeps a tail writes it."""
    session = Session()
    session.user("Start the refactor.")
    session.text("Reading first.", usage(3000))
    session.user("Go on.")
    session.text("Working on it.", usage(4000))
    session.user("Now the tests.")
    last = session.text("Tests pass.", usage(5000))[0]
    history = list(session.lines)
    session.line(
        "system",
        None,
        subtype="compact_boundary",
        content="Conversation compacted",
        isMeta=False,
        level="info",
        logicalParentUuid=last,
        compactMetadata={"trigger": "manual", "preTokens": 5000},
    )
    summary = session.user(
        "This session is being continued from a previous conversation. Summary: the refactor.", isCompactSummary=True, isVisibleInTranscriptOnly=True
    )
    for n, line in enumerate(history[2:]):
        session.raw({**line, "parentUuid": summary if n == 0 else line["parentUuid"]})
    session.last = last
    session.user("And the docs?")
    session.text("Docs updated.", usage(6000))
    return session.to_bytes()


def test_snip_by_uuid_in_a_resumed_compacted_session_leaves_the_history_alone() -> None:
    data = resumed_after_compact()
    run = apply(sn(span=(uid(3), uid(4))), data)  # the tail's copies of lines 3 and 4 (file lines 9, 10)
    assert [item["uuid"] for item in run.outcome.removed] == [uid(3), uid(4)]
    assert run.after.startswith(b"".join(split_lines(data)[:8]))
    assert message_uuids(run.after)[:2] == [(uid(8),), (uid(5),)]
    check_step(run)


@pytest.mark.parametrize("stage", STAGES, ids=[stage.label for stage in STAGES])
def test_every_stage_keeps_the_invariants_on_a_resumed_compacted_session(stage: Stage) -> None:
    data = resumed_after_compact()
    run = apply(stage, data)
    check_step(run)
    check_idempotent(stage, data)
    assert run.after.startswith(b"".join(split_lines(data)[:8]))  # the history, byte for byte


def test_snip_by_line_numbers_in_a_resumed_compacted_session_leaves_the_history_alone() -> None:
    data = resumed_after_compact()
    by_line = ok(run_cli("snip", "--range", "11..12", "--now", NOW_ISO, stdin=data)).stdout
    by_uuid = ok(run_cli("snip", "--range", f"{uid(5)}..{uid(6)}", "--now", NOW_ISO, stdin=data)).stdout
    assert by_line.startswith(b"".join(split_lines(data)[:8]))
    assert by_line == by_uuid


def test_snip_in_a_compacted_session_keeps_the_summary_and_the_history() -> None:
    data = (CLAUDE / "compacted.jsonl").read_bytes()
    run = apply(sn(keep_last=1), data)
    assert run.outcome.changed
    assert run.after.startswith(b"".join(split_lines(data)[:5]))  # history above the boundary, byte for byte
    messages = message_uuids(run.after)
    assert messages[0] == (uid(6),)  # the compact summary opens the context
    assert messages[-1] == (uid(10),)
    check_step(run)
