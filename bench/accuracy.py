"""How well each estimator predicts what the API charged, over the real transcripts in the corpus.

For every main-chain API response R_k that has an earlier response R_{k-1} (with no compact summary
in between), the transcript is cut just before R_k and counted the way `ctxpipe count` does: the
exact usage of R_{k-1} plus an estimate of the content after it. The truth is R_k's recorded prompt
(input + cache_creation + cache_read). Errors are relative; "estimated part" compares only the
estimate with the tokens the API really added (truth − exact part), which is what an estimator
actually decides. Calibrated estimators fit on the responses before the cut only; where there are
too few, they fall back to a fit over the *other* transcripts (leave one out).

    python bench/accuracy.py [--json FILE]
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
from ctxpipe.core.tokens import counter_named

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--json", type=Path)
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
        print(f"{name:32} {row['cuts']:>5} {row['total_median_pct']:>9.2f}% {row['total_p90_pct']:>9.2f}% {row['estimated_median_pct']:>8.1f}% {row['estimated_p90_pct']:>8.1f}%")
    print("default fits (slope, overhead) over all response pairs:", defaults)
    if args.json:
        args.json.write_text(json.dumps({"estimators": table, "default_fits": defaults}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
