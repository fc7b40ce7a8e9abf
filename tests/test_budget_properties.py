"""Markers compose: any order of stages, piped one into the next, leaves a file whose count is true.

Each stage runs through the real command line (in-process, input on stdin as in a pipe). After every
step:
- what the stage printed as before → after is `count` of its input and of its output;
- `count` reading from the file's end agrees with a read of every line, and its parts add up;
- without an anchor, the count is a fresh estimate of the active context plus the baseline;
- with one, its exact part is the anchor's usage less the calibrated estimate of everything the
  stages removed from what that usage counted, computed here from the original and the output
  (within 2 %: each stage rounds per item, and priced its removals with its own input's fit).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import ctxpipe
from ctxpipe.cli.app import app
from ctxpipe.core.count import DEFAULT_FITS, usage_total
from ctxpipe.core.model import Message
from ctxpipe.core.tokens import PiecesCounter, block_texts, estimate_each
from ctxpipe.jobs.count import CountOptions, count_buffer
from helpers import FIXTURES
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from strategies import stage_sessions
from typer.testing import CliRunner

NOW = "2030-01-02T03:04:05Z"
ARGV = {
    "microcompact": ["microcompact", "--force", "--keep-recent", "1", "--now", NOW],
    "collapse": ["collapse", "--now", NOW],
    "snip": ["snip", "--keep-last", "3", "--now", NOW],
    "summarize": ["summarize", "--engine", "offline", "--keep-last", "2", "--now", NOW],
    "restore": ["restore", "--source", "transcript", "--now", NOW],
}
RUNNER = CliRunner()
FIGURES = re.compile(r"([\d,]+) → ([\d,]+) tokens")
FMT = ctxpipe.formats.get("claude-code")
PIECES = PiecesCounter()


def counted(data: bytes, whole: bool = False) -> Any:
    return count_buffer(data, "-", CountOptions(on_error="skip", every_line=whole)).count


def priced_blocks(messages: Sequence[Message], entries: Sequence[Any], slope: float) -> dict[tuple[str, int], int]:
    """Calibrated tokens of each block, keyed by (line uuid, index in the line), images at their flat
    price (as the stages price them)."""
    blocks = [(entries[ref[0]].obj.get("uuid"), ref[1], block) for m in messages for ref, block in zip(m.refs, m.content)]
    tokens = estimate_each([block for _, _, block in blocks], PIECES)
    return {(uuid, index): round(slope * (raw - block_texts(block)[1])) + block_texts(block)[1] for (uuid, index, block), raw in zip(blocks, tokens)}


def removed_tokens(before: dict[tuple[str, int], int], after: dict[tuple[str, int], int]) -> int:
    """What left the blocks the original held: a block snipped away entirely, a changed one by the
    difference (never below zero: a marker does not claim that a clearing grew the context)."""
    return sum(tokens if key not in after else max(0, tokens - after[key]) for key, tokens in before.items())


def up_to(messages: Sequence[Message], entries: Sequence[Any], uuid: str) -> list[Message] | None:
    """The messages of the active context up to and including the response whose last line is `uuid`."""
    for index, message in enumerate(messages):
        if message.entries and entries[message.entries[-1]].obj.get("uuid") == uuid:
            return list(messages[: index + 1])
    return None


def check_truth(original: bytes, output: bytes) -> None:
    fast, full = counted(output), counted(output, whole=True)
    assert fast.tokens == full.tokens
    assert fast.tokens == fast.exact_tokens + fast.estimated_tokens + fast.baseline_added + fast.reinjected_tokens
    transcript = ctxpipe.read_transcript(output, on_error="skip")
    messages = FMT.messages(transcript.entries)
    if full.anchor is None:
        # Every message of the active context estimated afresh, no usage and no marker involved.
        assert full.raw_estimate == sum(estimate_each([b for m in messages for b in m.content], PIECES))
        assert full.estimated_tokens == full.calibration.apply(full.raw_estimate)
        assert full.tokens == (full.baseline.tokens if full.baseline else 0) + full.estimated_tokens + full.reinjected_tokens
        return
    anchor = messages[full.anchor]
    uuid = transcript.entries[anchor.entries[-1]].obj["uuid"]
    source = ctxpipe.read_transcript(original, on_error="skip")
    before = up_to(FMT.messages(source.entries), source.entries, uuid)
    if before is None:
        return  # the anchor is a response the original's active context did not hold
    slope = full.calibration.slope if full.calibration.source != "none" else DEFAULT_FITS["pieces"][0]
    removed = removed_tokens(priced_blocks(before, source.entries, slope), priced_blocks(messages[: full.anchor + 1], transcript.entries, slope))
    expected = max(0, usage_total(anchor.usage or {}) - removed)  # a marker never takes the usage below zero
    # The 2 % is of what the stages removed as well as of what is left: a removal priced with another
    # fit is off by a share of itself, and the stages may remove all of the usage (the count then 0).
    assert abs(full.exact_tokens - expected) <= max(0.02 * max(full.tokens, removed, 1), 5), (full.exact_tokens, expected, removed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(stage_sessions(), st.lists(st.sampled_from(sorted(ARGV)), min_size=1, max_size=4))
# Found by the search: microcompact clears an image and snip the rest, 2,098 tokens of usage in all,
# which the stages priced 6 tokens above this test's own pricing (the count is 0 either way).
@example(data=(FIXTURES / "properties" / "stages-remove-all-the-usage.jsonl").read_bytes(), order=["microcompact", "snip"])
def test_any_order_of_stages_keeps_every_figure_true(data: bytes, order: list[str]) -> None:
    original = data
    for name in order:
        result = RUNNER.invoke(app, [*ARGV[name], "-"], input=data)
        assert result.exit_code == 0, (name, result.stderr, result.exception)
        output = result.stdout_bytes
        figures = FIGURES.search(result.stderr)
        if figures:
            assert (int(figures[1].replace(",", "")), int(figures[2].replace(",", ""))) == (counted(data).tokens, counted(output).tokens)
        else:
            assert output == data, f"{name} changed the file but printed no figures"
        check_truth(original, output)
        data = output
