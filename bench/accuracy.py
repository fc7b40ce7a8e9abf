"""How well each estimator predicts what the API charged, over the real transcripts in the corpus.

For every main-chain API response R_k that has an earlier response R_{k-1} (with no compact summary
in between), the transcript is cut just before R_k and counted the way `ctxpipe count` does: the
exact usage of R_{k-1} plus an estimate of the content after it. The truth is R_k's recorded prompt
(input + cache_creation + cache_read). Errors are relative; "estimated part" compares only the
estimate with the tokens the API really added (truth − exact part), which is what an estimator
actually decides. Calibrated estimators fit on the responses before the cut only; where there are
too few, they fall back to a fit over the *other* transcripts (leave one out).

Two more rows judge the whole count, baseline included, where no usage anchors it:
- **just after a boundary**: every session that Claude Code compacted itself is cut just before the
  first response after each compact boundary; `count` of the cut (baseline + summary + what Claude
  Code re-injected) against that response's recorded prompt.
- **ctxpipe output**: every main session, run through `compact --force --engine offline --keep-last 4`; `count` of
  the output against a fresh estimate of the same active context plus the baseline (they must agree
  within 2 %), and, with --claude-code, the size of the request Claude Code 2.1.88 sends when it
  resumes the output (the tests' harness against the local fake Messages API; estimated with the
  same calibrated estimator, its own system prompt and tools included).

    python bench/accuracy.py [--json FILE] [--claude-code]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import ctxpipe
from ctxpipe.core.count import Estimates, calibrate, calibration_pairs, count_context, fit, response_indices, usage_prompt, usage_total
from ctxpipe.core.microcompact import MicrocompactSettings
from ctxpipe.core.summarize import SummarizeSettings
from ctxpipe.core.summarize_engines import Breaker
from ctxpipe.core.tokens import PiecesCounter, estimate_blocks
from ctxpipe.formats.claude_code import is_compact_boundary
from ctxpipe.jobs.count import CountOptions, count_buffer
from ctxpipe.jobs.pipeline import CompactOptions, compact_buffer
from ctxpipe.jobs.tokenizers import counter_named

ROOT = Path(__file__).resolve().parent.parent
BASES = ("pieces", "rough", "tiktoken:cl100k_base", "tiktoken:o200k_base")


def corpus_files(corpus: Path) -> list[Path]:
    return [p for p in sorted(corpus.glob("*/*.jsonl")) if "codex" not in p.name]


@dataclass
class Errors:
    total: list[float] = field(default_factory=list)
    estimated: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        def pct(values: list[float], q: float) -> float:
            ordered = sorted(values)
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 100

        return {
            "cuts": len(self.total),
            "total_median_pct": round(statistics.median(self.total) * 100, 2),
            "total_p90_pct": round(pct(self.total, 0.9), 2),
            "estimated_median_pct": round(statistics.median(self.estimated) * 100, 1),
            "estimated_p90_pct": round(pct(self.estimated, 0.9), 1),
        }


def measure(files: list[Path]) -> tuple[dict[str, Errors], dict[str, tuple[float, float]]]:
    counters = {base: counter_named(base) for base in BASES}
    loaded = []
    pairs_by_file: dict[str, list[list[tuple[int, int]]]] = {base: [] for base in BASES}
    for path in files:
        transcript = ctxpipe.read_transcript(path)
        messages = ctxpipe.formats.get(transcript.format).messages(transcript.entries, history=True)
        caches: dict[str, dict[int, int]] = {base: {} for base in BASES}
        for base in BASES:
            pairs_by_file[base].append(calibration_pairs(Estimates(messages, counters[base], caches[base]), window=10**9))
        loaded.append((messages, caches))
    results: dict[str, Errors] = {}
    for number, (messages, caches) in enumerate(loaded):
        # The fallback fit comes from the other transcripts only, so no file is judged by a fit it shaped.
        others = {base: fit([p for k, ps in enumerate(pairs_by_file[base]) if k != number for p in ps]) for base in BASES}
        anchors = response_indices(messages)
        for before, cut in zip(anchors, anchors[1:]):
            if any(m.compact_summary for m in messages[before + 1 : cut]):
                continue
            truth = usage_prompt(messages[cut].usage or {})
            exact = usage_total(messages[before].usage or {})
            added = truth - exact
            prefix = messages[:cut]
            for base in BASES:
                estimates = Estimates(prefix, counters[base], caches[base])
                variants = {
                    base: count_context(estimates),
                    f"{base} calibrated": count_context(estimates, calibrate(estimates, others[base])),
                }
                if base == "rough":
                    variants["rough as Claude Code"] = count_context(estimates, as_claude_code=True)
                for name, counted in variants.items():
                    errors = results.setdefault(name, Errors())
                    errors.total.append(abs(counted.tokens - truth) / truth)
                    if added > 0:
                        errors.estimated.append(abs(counted.estimated_tokens - added) / added)
    defaults = {}
    for base in BASES:
        fitted = fit([p for ps in pairs_by_file[base] for p in ps])
        if fitted:
            defaults[base] = (round(fitted[0], 3), round(fitted[1], 1))
    return results, defaults


def after_boundaries(files: list[Path]) -> list[dict[str, object]]:
    """Each Claude Code compaction, cut just before the first response after its boundary."""
    rows = []
    for path in files:
        data = path.read_bytes()
        entries = ctxpipe.read_transcript(data).entries
        starts = [0]
        for line in data.split(b"\n"):
            starts.append(starts[-1] + len(line) + 1)
        for number, entry in enumerate(entries):
            if not is_compact_boundary(entry.obj) or entry.obj.get("isSidechain"):
                continue
            response = next((e for e in entries[number + 1 :] if _is_response(e.obj)), None)
            if response is None:
                continue
            counted = count_buffer(data[: starts[response.line - 1]], path.name, CountOptions()).count
            truth = usage_prompt(response.obj["message"]["usage"])
            baseline = counted.baseline.tokens if counted.baseline else 0
            rows.append(
                {
                    "file": path.name,
                    "boundary_line": entry.line,
                    "truth": truth,
                    "count": counted.tokens,
                    "error_pct": round(100 * (counted.tokens - truth) / truth, 1),
                    "baseline": baseline,
                    "messages": counted.estimated_tokens,
                    "reinjected": counted.reinjected_tokens,
                    "cache_read": int(response.obj["message"]["usage"].get("cache_read_input_tokens") or 0),
                }
            )
    return rows


def _is_response(obj: dict) -> bool:
    message = obj.get("message")
    return (
        obj.get("type") == "assistant"
        and not obj.get("isSidechain")
        and isinstance(message, dict)
        and isinstance(message.get("usage"), dict)
        and message.get("model") != "<synthetic>"
    )


def ctxpipe_outputs(files: list[Path], claude_code: bool) -> list[dict[str, object]]:
    """compact --force --engine offline on each main session: count of the output against a fresh
    estimate of its active context plus the baseline (and what Claude Code 2.1.88 sends on resume)."""
    # A 4-message tail, so that every session with a history is summarized (no usage anchors the output).
    settings = {"microcompact": MicrocompactSettings(force=True), "summarize": SummarizeSettings(engine="offline", keep_last=4)}
    options = CompactOptions(settings, force_summary=True)
    counter = PiecesCounter()
    rows = []
    for path in files:
        if "subagents" in path.name or "agent-" in path.name:
            continue
        data = path.read_bytes()
        pieces, report = compact_buffer(data, path.name, options, Breaker())
        if not any(stage.stage == "summarize" and stage.changed for stage in report.stages):
            continue
        output = b"".join(pieces)
        counted = count_buffer(output, path.name, CountOptions()).count
        transcript = ctxpipe.read_transcript(output)
        messages = ctxpipe.formats.get(transcript.format).messages(transcript.entries)
        raw = sum(estimate_blocks(m.content, counter) for m in messages)
        baseline = counted.baseline.tokens if counted.baseline else 0
        fresh = baseline + counted.calibration.apply(raw) + counted.reinjected_tokens
        row: dict[str, object] = {
            "file": path.name,
            "count": counted.tokens,
            "printed_after": report.tokens_after,
            "fresh": fresh,
            "agreement_pct": round(100 * abs(counted.tokens - fresh) / fresh, 2),
            "baseline": baseline,
        }
        if claude_code:
            row["claude_code_request"] = _resumed_request(output, transcript.entries, counted.calibration)
        rows.append(row)
    return rows


def _resumed_request(output: bytes, entries: list, calibration: object) -> dict[str, int] | None:
    """The estimated size of the request Claude Code 2.1.88 sends when it resumes `output`, and
    of its own system prompt and tools in it."""
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from claude_code import resume
    from messages_server import MessagesServer

    session = next((e.obj.get("sessionId") for e in reversed(entries) if isinstance(e.obj.get("sessionId"), str)), None)
    if session is None:
        return None
    with MessagesServer() as server, tempfile.TemporaryDirectory() as folder:
        server.enqueue("ok")
        result = resume(output, session, Path(folder) / "project", "go on", server)
    body = result.body
    counter = PiecesCounter()
    fixed = counter.count(json.dumps(body.get("system"))) + counter.count(json.dumps(body.get("tools")))
    raw = sum(
        estimate_blocks(m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}], counter) for m in body.get("messages", [])
    )
    return {"tokens": fixed + calibration.apply(raw), "system_and_tools": fixed}  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--claude-code", action="store_true", help="also resume each ctxpipe output with Claude Code 2.1.88 (node, npm)")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        print(f"no corpus at {args.corpus}", file=sys.stderr)
        return 1
    results, defaults = measure(corpus_files(args.corpus))
    print(f"{'estimator':32} {'cuts':>5} {'total med':>10} {'total p90':>10} {'est. med':>9} {'est. p90':>9}")
    table = {}
    for name, errors in results.items():
        row = errors.summary()
        table[name] = row
        print(
            f"{name:32} {row['cuts']:>5} {row['total_median_pct']:>9.2f}% {row['total_p90_pct']:>9.2f}% {row['estimated_median_pct']:>8.1f}% {row['estimated_p90_pct']:>8.1f}%"
        )
    print("default fits (slope, overhead) over all response pairs:", defaults)
    files = corpus_files(args.corpus)
    boundaries = after_boundaries(files)
    print("\njust after a boundary (count of the cut vs the next recorded prompt):")
    for row in boundaries:
        print(
            f"  {row['file'][-40:]}:{row['boundary_line']}: count {row['count']:,} vs {row['truth']:,} ({row['error_pct']:+}%) = "
            f"baseline {row['baseline']:,} + messages {row['messages']:,} + re-injected {row['reinjected']:,} (that call read {row['cache_read']:,} from the cache)"
        )
    outputs = ctxpipe_outputs(files, args.claude_code)
    print("\nctxpipe output (compact --force --engine offline --keep-last 4; count vs a fresh estimate of its active context + baseline):")
    for row in outputs:
        resumed = row.get("claude_code_request")
        extra = (
            f"; Claude Code 2.1.88 resumes it with ≈{resumed['tokens']:,} (its own system prompt and tools ≈{resumed['system_and_tools']:,})" if resumed else ""
        )
        print(
            f"  {row['file'][-40:]}: count {row['count']:,} (compact printed {row['printed_after']:,}; baseline {row['baseline']:,}) "
            f"vs fresh {row['fresh']:,} ({row['agreement_pct']}%){extra}"
        )
    if args.json:
        args.json.write_text(json.dumps({"estimators": table, "default_fits": defaults, "after_boundary": boundaries, "ctxpipe_output": outputs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
