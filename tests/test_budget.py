"""Budgets that stay true after compaction: the session baseline, what Claude Code re-injects,
markers that compose, a bounded calibration, and one accounting for every figure printed.

The accounting rule (core.count.count_context): with an anchor (the last response whose usage still
describes the context) the count is its usage, plus the estimate of what follows, minus the stage
markers written after it; without one it is the session baseline plus the estimate of every
message, plus what Claude Code re-injected after its own compaction.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import ctxpipe
import orjson
import pytest
from builders import Session, usage
from ctxpipe.core.count import DEFAULT_FITS, SLOPE_BOUNDS
from ctxpipe.core.tokens import PiecesCounter, estimate_blocks
from ctxpipe.jobs.count import DEFAULT_BASELINE, CountOptions, count_buffer
from helpers import CORPUS, needs_corpus, run_cli

PIECES = PiecesCounter()
SLOPE, OVERHEAD = DEFAULT_FITS["pieces"]
FIRST_TOTAL = 20_000  # the first response's recorded usage, output included
FIRST_OUTPUT = 50
FIRST_PROMPT = FIRST_TOTAL - FIRST_OUTPUT  # the prompt it was sent
CACHED = 15_000  # of which read from the cache (system prompt and tools)
NOW = ["--now", "2030-01-01T00:00:00Z"]


def count_json(data: bytes, *args: str) -> dict[str, Any]:
    result = run_cli("count", "--json", *args, "-", stdin=data)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def parts_add_up(report: dict[str, Any]) -> None:
    """The JSON says how its total is made, and the parts add up to it."""
    baseline = report["baseline_tokens"] if report["baseline_in_total"] else 0
    assert report["tokens"] == report["exact_tokens"] + report["estimated_tokens"] + baseline + report["reinjected_tokens"]


def listing(lines: int, word: str = "value") -> str:
    return "".join(f"{n:6d}\u2192def {word}_{n}(x):  # {word} number {n} of the module\n" for n in range(1, lines + 1))


def session_with_reads(files: int = 2, first_message: str = "Please add rate limiting to the API.") -> tuple[Session, list[str]]:
    """A session that reads `files` source files, with a recorded first prompt of FIRST_PROMPT."""
    session = Session()
    session.user(first_message)
    session.text("Let me look at the code.", usage(FIRST_TOTAL, cache_creation=FIRST_PROMPT - CACHED - 5, output=FIRST_OUTPUT))
    total = FIRST_TOTAL
    names = []
    for number in range(files):
        name = f"src/module_{number}.py"
        tool = session.tool_id()
        session.response([{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": f"/home/dev/app/{name}"}}], usage(total + 40, output=30))
        session.tool_result(tool, listing(40, f"m{number}"))
        total += 40 + 30 + 900
        names.append(name)
    session.text("I have read the modules.", usage(total, output=20))
    return session, names


def first_message_estimate(text: str) -> int:
    return round(SLOPE * estimate_blocks([{"type": "text", "text": text}], PIECES) + OVERHEAD)


# --- the session baseline ---------------------------------------------------------------------------


def test_the_baseline_is_the_first_prompt_less_the_messages_before_it() -> None:
    session, _ = session_with_reads()
    report = count_json(session.to_bytes())
    assert report["baseline"]["source"] == "measured"
    assert report["baseline_tokens"] == FIRST_PROMPT - first_message_estimate("Please add rate limiting to the API.")
    assert "line 2" in report["baseline"]["note"]
    # Anchored on recorded usage, the baseline is inside the exact part, not added again.
    assert report["baseline_in_total"] is False and report["exact_tokens"] > 0
    parts_add_up(report)


def test_the_baseline_is_never_below_what_the_first_call_read_from_the_cache() -> None:
    # A first message so long that its estimate exceeds prompt − cache read: the cache read wins.
    long_message = "Please review this paste carefully. " * 900
    session, _ = session_with_reads(first_message=long_message)
    assert FIRST_PROMPT - first_message_estimate(long_message) < CACHED
    report = count_json(session.to_bytes())
    assert report["baseline_tokens"] == CACHED
    assert "cache" in report["baseline"]["note"]


def test_a_transcript_without_usage_gets_the_documented_default_or_the_flag(tmp_path: Path) -> None:
    lines = [{"role": "user", "content": "Add a health endpoint."}, {"role": "assistant", "content": "Done: GET /health returns 200."}]
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    report = count_json(data)
    assert report["format"] == "anthropic"
    assert report["baseline"]["source"] == "default" and report["baseline_tokens"] == DEFAULT_BASELINE
    assert report["baseline_in_total"] is True and report["exact_tokens"] == 0
    assert report["tokens"] == DEFAULT_BASELINE + report["estimated_tokens"]
    given = count_json(data, "--baseline", "1234")
    assert given["baseline"]["source"] == "--baseline" and given["tokens"] == 1234 + report["estimated_tokens"]
    parts_add_up(given)


# --- just after Claude Code's own compaction -----------------------------------------------------------


def compacted_by_claude_code(files: int, **boundary: Any) -> tuple[Session, list[str]]:
    session, names = session_with_reads(files)
    session.compact("Summary: the user asked for rate limiting; the modules were read.")
    if boundary:
        session.lines[-2]["compactMetadata"].update(boundary)
    return session, names


def test_after_claude_codes_compaction_the_count_is_baseline_summary_and_what_came_back() -> None:
    session, names = compacted_by_claude_code(2)
    report = count_json(session.to_bytes())
    assert report["anchor_uuid"] is None and report["exact_tokens"] == 0
    assert report["baseline_in_total"] is True and report["baseline"]["source"] == "measured"
    items = report["reinjected"]["items"]
    assert sorted(item["name"] for item in items) == sorted(names)
    assert all(item["kind"] == "file" and item["tokens"] > 500 for item in items)
    assert report["reinjected_tokens"] == sum(item["tokens"] for item in items)
    assert "5 files" in report["reinjected"]["assumed"]
    # The messages are the summary alone: its calibrated estimate.
    summary = session.lines[-1]["message"]["content"]
    assert report["estimated_tokens"] == round(SLOPE * estimate_blocks([{"type": "text", "text": summary}], PIECES) + OVERHEAD)
    parts_add_up(report)


def test_only_the_five_newest_files_come_back() -> None:
    session, names = compacted_by_claude_code(7)
    report = count_json(session.to_bytes())
    assert sorted(item["name"] for item in report["reinjected"]["items"]) == sorted(names[-5:])


def test_a_2_1_332_compaction_that_kept_a_tail_brought_back_its_files() -> None:
    """2.1.332 has no session-memory compaction: its full compaction keeps a tail (preservedSegment,
    preservedMessages) and still re-injects the files it read."""
    session, names = compacted_by_claude_code(2, preservedSegment={"headUuid": "a", "anchorUuid": "b", "tailUuid": "c"})
    for line in session.lines:
        line["version"] = "2.1.332"
    report = count_json(session.to_bytes())
    assert sorted(item["name"] for item in report["reinjected"]["items"]) == sorted(names) and report["reinjected_tokens"] > 0


@pytest.mark.parametrize("link", ["00000000-dead-4000-8000-000000000000", None])
def test_a_boundary_whose_logical_parent_names_no_line_has_the_lines_above_it_for_history(link: str | None) -> None:
    """Issue 22, case 17: Claude Code 2.1.39 writes boundaries whose logicalParentUuid names no line
    (or none at all). The history before a boundary is the lines before it: the files read there
    are what it re-injected, as with an intact link."""
    intact, names = compacted_by_claude_code(2)
    broken, _ = compacted_by_claude_code(2)
    broken.lines[-2]["logicalParentUuid"] = link
    expected = count_json(intact.to_bytes())
    report = count_json(broken.to_bytes())
    assert sorted(item["name"] for item in report["reinjected"]["items"]) == sorted(names)
    assert report["reinjected_tokens"] == expected["reinjected_tokens"] > 0


def test_a_session_memory_compaction_brings_back_no_files() -> None:
    session, _ = compacted_by_claude_code(2, preservedSegment={"headUuid": "a", "anchorUuid": "b", "tailUuid": "c"})
    report = count_json(session.to_bytes())
    assert report["reinjected_tokens"] == 0 and report["reinjected"]["items"] == []
    assert report["baseline_in_total"] is True
    parts_add_up(report)


def test_the_first_response_after_the_boundary_anchors_the_count_again() -> None:
    session, _ = compacted_by_claude_code(2)
    session.text("Continuing with the rate limiter.", usage(31_000, output=40))
    report = count_json(session.to_bytes())
    assert report["exact_tokens"] == 31_000 and report["baseline_in_total"] is False and report["reinjected_tokens"] == 0
    parts_add_up(report)


def test_the_fast_reader_and_the_full_read_agree_after_a_boundary() -> None:
    session, _ = compacted_by_claude_code(3)
    padding = "history " * 20_000  # past 64 KiB, so the default count reads from the end
    session.lines.insert(1, {"type": "file-history-snapshot", "messageId": "x", "snapshot": {"note": padding}})
    data = session.to_bytes()
    assert len(data) > 64 << 10
    fast, full = count_json(data), count_json(data, "--full")
    assert fast["tokens"] == full["tokens"] and fast["reinjected_tokens"] == full["reinjected_tokens"] > 0


# --- a calibration that cannot run away ----------------------------------------------------------------


def test_a_fit_outside_the_bounds_falls_back_to_the_corpus_fit_and_says_so() -> None:
    # Every gap cost three times its estimate (hook output the file does not hold): a slope of 3.
    session = Session()
    session.user("Start.")
    total = 20_000
    session.text("Ready.", usage(total, output=10))
    for turn in range(8):
        text = f"Step {turn}: " + "please extend the parser with one more rule and its tests. " * (5 + 3 * turn)
        session.user(text)
        total += 3 * estimate_blocks([{"type": "text", "text": text}], PIECES) + 10
        session.text("Done.", usage(total, output=10))
    session.user("And now the last one, with the docs updated as well.")
    report = count_json(session.to_bytes())
    calibration = report["calibration"]
    assert calibration["source"] == "default" and calibration["slope"] == SLOPE
    assert "outside" in calibration["note"] and f"{SLOPE_BOUNDS[0]}" in calibration["note"]


# --- stages: what they print is what count finds -------------------------------------------------------

FIGURES = re.compile(rb"([\d,]+) \xe2\x86\x92 ([\d,]+) tokens")


def printed(stderr: bytes, stage: str) -> tuple[int, int]:
    line = next(line for line in stderr.splitlines() if line.startswith(f"ctxpipe: {stage}:".encode()))
    found = FIGURES.search(line)
    assert found, line
    return int(found[1].replace(b",", b"")), int(found[2].replace(b",", b""))


def big_session() -> bytes:
    session, _ = session_with_reads(6)
    total = FIRST_TOTAL + 6 * 970 + 20
    for turn in range(6):
        tool = session.tool_id()
        session.response([{"type": "tool_use", "id": tool, "name": "Bash", "input": {"command": "pytest -q"}}], usage(total + 30, output=30))
        session.tool_result(
            tool, "collected 40 items\n" + "tests/test_api.py ........\n" * 40 + f"{40 - turn // 2} passed\n"
        )  # runs 0 and 1 agree: collapse folds one
        total += 30 + 30 + 420
        session.text(f"Run {turn} done.", usage(total, output=15))
        session.user(f"Go on with step {turn + 1}.")
        total += 15 + 30
    return session.to_bytes()


STAGES = {
    "microcompact": ["microcompact", "--force", "--keep-recent", "2", *NOW],
    "collapse": ["collapse", *NOW],
    "snip": ["snip", "--keep-last", "6", *NOW],
    "summarize": ["summarize", "--engine", "offline", "--keep-last", "4", *NOW],
}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_stage_prints_count_of_its_input_and_of_its_output(stage: str) -> None:
    data = big_session()
    result = run_cli(*STAGES[stage], "-", stdin=data)
    assert result.returncode == 0, result.stderr
    assert result.stdout != data, f"{stage} changed nothing, so the test says nothing"
    before, after = printed(result.stderr, stage)
    assert before == count_json(data)["tokens"]
    assert after == count_json(result.stdout)["tokens"]
    assert after < before


def test_restore_prints_count_of_its_input_and_of_its_output() -> None:
    summarized = run_cli(*STAGES["summarize"], "-", stdin=big_session())
    result = run_cli("restore", "--source", "transcript", *NOW, "-", stdin=summarized.stdout)
    assert result.returncode == 0, result.stderr
    before, after = printed(result.stderr, "restore")
    assert before == count_json(summarized.stdout)["tokens"] and after == count_json(result.stdout)["tokens"]
    assert after > before  # it brought files back


def test_compact_prints_count_of_its_input_and_output_and_each_stage_hands_on_its_figure() -> None:
    data = big_session()
    result = run_cli("compact", "--force", "--engine", "offline", "--keep-last", "4", "--source", "transcript", "-", stdin=data)
    assert result.returncode == 0, result.stderr
    total = re.search(rb"compact: -: ([\d,]+) \xe2\x86\x92 ([\d,]+) tokens", result.stderr)
    assert total, result.stderr
    assert int(total[1].replace(b",", b"")) == count_json(data)["tokens"]
    assert int(total[2].replace(b",", b"")) == count_json(result.stdout)["tokens"]
    chain = [printed(result.stderr, stage) for stage in ("microcompact", "collapse", "summarize", "restore")]
    assert chain[0][0] == int(total[1].replace(b",", b"")) and chain[-1][1] == int(total[2].replace(b",", b""))
    for (_, after), (before, _) in zip(chain, chain[1:]):
        assert after == before


def test_compact_batch_reports_what_count_finds_in_each_output(tmp_path: Path) -> None:
    source = tmp_path / "in"
    for number in range(3):
        (source / f"s{number}.jsonl").parent.mkdir(exist_ok=True)
        (source / f"s{number}.jsonl").write_bytes(big_session())
    result = run_cli("compact", "--force", "--engine", "offline", "--keep-last", "4", "--json", "--jobs", "2", "--out-dir", tmp_path / "out", source)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 3
    for row in rows:
        counted = count_json(Path(row["output"]).read_bytes())
        assert row["tokens_after"] == counted["tokens"]
        assert row["stages"][-1]["tokens_after"] == counted["tokens"]


def test_piped_stages_hand_on_the_same_figures() -> None:
    data = big_session()
    first = run_cli(*STAGES["microcompact"], "-", stdin=data)
    second = run_cli(*STAGES["summarize"], "-", stdin=first.stdout)
    assert printed(first.stderr, "microcompact")[1] == printed(second.stderr, "summarize")[0]


# --- ctxpipe's own output ----------------------------------------------------------------------------


def fresh_estimate(data: bytes) -> tuple[int, dict[str, Any]]:
    """The active context estimated whole, plus the baseline: what count must say when no usage anchors it."""
    report = count_json(data)
    transcript = ctxpipe.read_transcript(data)
    messages = ctxpipe.formats.get(transcript.format).messages(transcript.entries)
    raw = sum(estimate_blocks(m.content, PIECES) for m in messages)
    calibration = report["calibration"]
    estimated = round(calibration["slope"] * raw + calibration["overhead"]) if raw else 0
    return report["baseline_tokens"] + estimated + report["reinjected_tokens"], report


def test_a_summarized_file_counts_as_its_messages_plus_the_baseline_not_its_stale_usage() -> None:
    data = big_session()
    summarized = run_cli(*STAGES["summarize"], "-", stdin=data).stdout
    fresh, report = fresh_estimate(summarized)
    assert report["anchor_uuid"] is None and report["baseline_in_total"] is True
    assert report["tokens"] == fresh
    # The kept tail carries usage measured on the old prompt; none of it anchors the count.
    assert report["tokens"] < count_json(data)["tokens"]


def test_the_baseline_survives_a_dropped_history() -> None:
    data = big_session()
    kept = run_cli(*STAGES["summarize"], "-", stdin=data).stdout
    dropped = run_cli(*STAGES["summarize"], "--drop-history", "-", stdin=data).stdout
    assert len(dropped) < len(kept)
    assert count_json(dropped)["baseline_tokens"] == count_json(kept)["baseline_tokens"] == count_json(data)["baseline_tokens"]
    assert count_json(dropped)["baseline"]["source"] == "measured"


def test_a_summary_and_then_more_stages_keep_the_count_true() -> None:
    data = big_session()
    out = run_cli(*STAGES["summarize"], "-", stdin=data).stdout
    for argv in (STAGES["microcompact"], STAGES["collapse"]):
        result = run_cli(*argv, "-", stdin=out)
        assert result.returncode == 0, result.stderr
        out = result.stdout
        fresh, report = fresh_estimate(out)
        assert report["tokens"] == fresh


@needs_corpus
def test_claude_codes_own_compaction_is_counted_within_a_quarter_of_the_next_prompt() -> None:
    path = next(CORPUS.glob("marot__spotter/*cb46.jsonl"))
    data = path.read_bytes()
    lines = data.split(b"\n")
    boundary = next(n for n, line in enumerate(lines) if b'"compact_boundary"' in line)
    response = next(n for n in range(boundary, len(lines)) if b'"type":"assistant"' in lines[n] and b'"usage"' in lines[n])
    truth = sum(
        int(orjson.loads(lines[response])["message"]["usage"][key]) for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    counted = count_buffer(b"\n".join(lines[:response]) + b"\n", path.name, CountOptions()).count
    assert counted.reinjected_tokens > 0 and counted.baseline_added > 0
    assert abs(counted.tokens - truth) / truth < 0.25, (counted.tokens, truth)


@pytest.mark.parametrize("value", ["12", -5_000_000, True, 10**18, [1], None], ids=["string", "negative", "bool", "huge", "list", "null"])
def test_a_usage_figure_that_is_not_a_count_counts_as_zero(value: Any) -> None:
    # A transcript is untrusted: usage figures of the wrong type or sign never crash or go negative.
    session, _ = session_with_reads()
    for line in session.lines:
        if line["type"] == "assistant":
            line["message"]["usage"]["cache_read_input_tokens"] = value
    data = session.to_bytes()
    report = count_json(data)
    assert report["tokens"] >= 0 and report["baseline_tokens"] >= 0
    parts_add_up(report)
    for argv in (STAGES["microcompact"], ["compact", "--force", "--engine", "offline", "--keep-last", "4"]):
        result = run_cli(*argv, "-", stdin=data)
        assert result.returncode == 0 and b"Traceback" not in result.stderr, result.stderr
