"""Recall and reduction of `summarize --engine offline` over the real transcripts in the corpus.

For every Claude Code file (main sessions and subagents) with something to summarize under the
default keep window: the verifier's recall before its own "Facts to keep" repair (how much the
offline summary carries by itself), after it, and the token reduction of the active context.

    python bench/summaries.py
"""

from __future__ import annotations

import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

import ctxpipe
from ctxpipe.core.reports import SummarizeExtras
from ctxpipe.core.stage import StageContext
from ctxpipe.core.summarize import SummarizeSettings
from ctxpipe.core.summarize_engines import Breaker
from ctxpipe.formats import get
from ctxpipe.jobs.summary import summarize_entries

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    corpus = ROOT.parent / "shared" / "corpus"
    if not corpus.is_dir():
        print(f"no corpus at {corpus}", file=sys.stderr)
        return 1
    rows = []
    for path in sorted(corpus.glob("*/*.jsonl")):
        transcript = ctxpipe.read_transcript(path)
        if transcript.format != "claude-code":
            continue
        for name, settings in (("default", SummarizeSettings("offline")), ("keep-last 4", SummarizeSettings("offline", keep_last=4))):
            outcome = summarize_entries(transcript.entries, get("claude-code"), settings, StageContext(datetime.now(timezone.utc)), Breaker())
            if not outcome.changed:
                continue
            report = outcome.report
            assert isinstance(report, SummarizeExtras) and report.verification_before_repair and report.verification
            rows.append(
                (
                    path.name[-44:],
                    name,
                    report.history_messages,
                    report.tail_messages,
                    report.verification_before_repair.recall,
                    report.verification.recall,
                    report.pre_tokens,
                    report.post_tokens,
                    report.reduction,
                )
            )
    print(f"{'file':44} {'split':12} {'hist':>5} {'tail':>5} {'recall':>7} {'+facts':>7} {'before':>8} {'after':>8} {'cut':>6}")
    for row in rows:
        print(f"{row[0]:44} {row[1]:12} {row[2]:>5} {row[3]:>5} {row[4]:>7.0%} {row[5]:>7.0%} {row[6]:>8,} {row[7]:>8,} {row[8]:>6.0%}")
    for name in ("default", "keep-last 4"):
        chosen = [row for row in rows if row[1] == name]
        if chosen:
            print(
                f"{name}: {len(chosen)} files; median recall {statistics.median(r[4] for r in chosen):.0%} "
                f"(min {min(r[4] for r in chosen):.0%}), with Facts to keep {statistics.median(r[5] for r in chosen):.0%}; "
                f"median reduction {statistics.median(r[8] for r in chosen):.0%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
