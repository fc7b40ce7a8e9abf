"""Fact recall of ctxpipe's offline summary against Claude Code's own, on the corpus's compacted session.

    python bench/summary_recall.py            # a Markdown table, then what each summary missed
    python bench/summary_recall.py --json     # the same figures as JSON on stdout

The corpus holds one session Claude Code compacted itself (marot__spotter, fa812bfe…): line 1584 is
its `compact_boundary` (auto, preTokens 167117) and line 1585 its LLM summary of lines 1..1583. This
report cuts the file before the boundary and measures, against the same hand-made fact list:

- Claude Code: the text of its summary (line 1585);
- ctxpipe summarize: `ctxpipe summarize --engine offline` on the cut, read as the model would read
  the result (the summary line plus the kept tail), and the summary line alone;
- ctxpipe compact: `ctxpipe compact --force --engine offline` on the cut, the whole new active
  context (summary, kept tail, restored files), and the summary line alone;
- what ctxpipe's own verifier says of those two outputs (summarize's --report-json; compact's
  report from an in-process run checked to write the same bytes as the CLI). A kind where the
  verifier says more than the independent measurement of the same output is flagged.

How the facts were chosen and checked (bench/facts/spotter-fa812bfe.json): not by ctxpipe's code.
A throwaway script listed the candidates in lines 1..1583 (user texts and queue-operation
enqueues, Edit/Write file_paths, is_error tool results, `bd` commands, the last assistant turns);
each was then read in the transcript and judged by hand, and its "why" gives the line numbers.
Kinds: instruction (every message the user typed: 2 — the queue-operation enqueue and the other
user line hold a <task-notification>, not typed input), last-request, file (every path a Write or
Edit tool input names), error (every failure a tool result reports, by its telling line, and
those only the assistant reports: the post-edit hooks' compiler and credo output is not written to
the file; each with whether it was resolved), task (the bd ids worked on with their last state),
current-work (what was being done at the cut). A fact is carried when its text, or one of its
alternatives (a relative path, a basename that names nothing else, a fair rewording), occurs in the
summary, case and runs of whitespace aside. Substring matching under-counts a paraphrase: the
alternatives are there so that a summary that plainly states the fact gets it.

Exit status: 0 when everything was measured; 1 when the corpus, the session or the fact file is
absent, or a ctxpipe run failed (one line on stderr says which; what could be measured is still
printed, the failed columns as "-").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("CTXPIPE_CORPUS", ROOT.parent / "shared" / "corpus"))
SESSION = "marot__spotter/test__fixtures__transcripts__fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
FACTS = ROOT / "bench" / "facts" / "spotter-fa812bfe.json"
KINDS = ("instruction", "last-request", "file", "error", "task", "current-work")
# The verifier's names for our kinds: it says "todo" for open tasks and splits errors into fixed and
# unresolved ones (summed here into one "error" row). Other names are shown as they are.
VERIFIER_KINDS = {
    "todo": "task",
    "todos": "task",
    "tasks": "task",
    "current_work": "current-work",
    "errors": "error",
    "files": "file",
    "fixed-error": "error",
    "resolved-error": "error",
    "unresolved-error": "error",
    "open-error": "error",
}


class Unavailable(Exception):
    """Something this report needs is not there; the message says what."""


def normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def carried(fact: dict[str, Any], haystack: str) -> bool:
    """`haystack` must already be normal()."""
    return any(normal(needle) in haystack for needle in [fact["text"], *fact.get("alternatives", [])])


def recall(facts: list[dict[str, Any]], text: str) -> dict[str, Any]:
    """Per kind and overall: facts, carried, recall, and the texts of the facts missed."""
    haystack = normal(text)
    kinds: dict[str, Any] = {}
    for kind in KINDS:
        chosen = [f for f in facts if f["kind"] == kind]
        missing = [f["text"] for f in chosen if not carried(f, haystack)]
        kinds[kind] = {
            "facts": len(chosen),
            "carried": len(chosen) - len(missing),
            "recall": round(1 - len(missing) / len(chosen), 4) if chosen else None,
            "missing": missing,
        }
    total = sum(k["facts"] for k in kinds.values())
    got = sum(k["carried"] for k in kinds.values())
    return {"kinds": kinds, "facts": total, "carried": got, "recall": round(got / total, 4) if total else None}


# --- reading Claude Code lines (our own reading, not ctxpipe's: the measurement stays independent) ---


def _strings(value: Any) -> list[str]:
    """Every string inside a tool input, e.g. a file_path or a command."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def message_text(obj: dict[str, Any]) -> str:
    """What a model reads of one user/assistant line: text, tool inputs, tool results (not thinking,
    which the API drops from earlier turns)."""
    content = (obj.get("message") or {}).get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.extend(_strings(block.get("input")))
        elif kind == "tool_result":
            inner = block.get("content")
            parts.append(
                inner if isinstance(inner, str) else "\n".join(str(b.get("text", "")) for b in inner or [] if isinstance(b, dict) and b.get("type") == "text")
            )
    return "\n".join(parts)


def read_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def boundary_index(lines: list[dict[str, Any]]) -> int:
    """Index of the last compact_boundary, or -1."""
    return max((i for i, o in enumerate(lines) if o.get("type") == "system" and o.get("subtype") == "compact_boundary"), default=-1)


def after_boundary(lines: list[dict[str, Any]]) -> tuple[str, str]:
    """(summary line's text, summary + every later message's text) of a compacted file."""
    start = boundary_index(lines)
    if start < 0:
        raise Unavailable("the output holds no compact_boundary")
    summary, context = None, []
    for obj in lines[start + 1 :]:
        if obj.get("type") not in ("user", "assistant"):
            continue
        text = message_text(obj)
        if obj.get("isCompactSummary") and summary is None:
            summary = text
        context.append(text)
    if summary is None:
        raise Unavailable("the output holds no isCompactSummary line after its boundary")
    return summary, "\n".join(context)


# --- running ctxpipe ---------------------------------------------------------------------------------


def _run(args: list[str], what: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(
        [sys.executable, "-m", "ctxpipe", *args], cwd=cwd, capture_output=True, env={k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    )
    if done.returncode != 0:
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["(no message)"])[-1]
        raise Unavailable(f"`ctxpipe {what}` exited {done.returncode}: {last}")
    return done


def _verifier(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verifier's figures, its kinds renamed to ours; None when the report has none."""
    if not report:
        return None
    out: dict[str, Any] = {"facts": report.get("facts"), "carried": report.get("carried"), "recall": report.get("recall"), "kinds": None}
    if isinstance(report.get("kinds"), dict):
        kinds: dict[str, Any] = {}
        for name, figures in report["kinds"].items():
            if not isinstance(figures, dict) or not isinstance(figures.get("facts"), int) or not isinstance(figures.get("carried"), int):
                continue
            merged = kinds.setdefault(VERIFIER_KINDS.get(name, name), {"facts": 0, "carried": 0, "from": []})
            merged["facts"] += figures["facts"]
            merged["carried"] += figures["carried"]
            merged["from"].append(name)
        for merged in kinds.values():
            merged["recall"] = round(merged["carried"] / merged["facts"], 4) if merged["facts"] else None
        out["kinds"] = kinds
    return out


def _compact_report(cut: Path, now: str, cli_bytes: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """compact's summarize-stage verification, from an in-process run with the CLI's options. The
    CLI writes no report for compact; the run counts only if it wrote the CLI's bytes."""
    try:
        from ctxpipe.cli.stages import parse_now
        from ctxpipe.core.microcompact import MicrocompactSettings
        from ctxpipe.core.summarize import SummarizeSettings
        from ctxpipe.core.summarize_engines import Breaker
        from ctxpipe.jobs.pipeline import CompactOptions, compact_buffer

        moment = parse_now(now)  # as the CLI reads --now
        settings = {"microcompact": MicrocompactSettings(force=True), "summarize": SummarizeSettings("offline")}
        options = CompactOptions(settings, force_summary=True, now=moment)
        pieces, report = compact_buffer(cut.read_bytes(), cut.name, options, Breaker(), str(cut))
    except Exception as error:  # the library is being reworked: no figure rather than no report
        return None, f"in-process compact failed ({type(error).__name__}: {error})"
    if b"".join(pieces) != cli_bytes:
        return None, "the in-process compact wrote other bytes than the CLI: its verifier figure is left out"
    wire = report.to_wire()  # the report as compact --report-json writes it
    stage: dict[str, Any] = next((s for s in wire.get("stages", []) if s.get("stage") == "summarize"), {})
    return stage.get("verification"), None


def measure() -> dict[str, Any]:
    """Every figure of the report. Raises Unavailable when the inputs are not there."""
    session = CORPUS / SESSION
    if not CORPUS.is_dir():
        raise Unavailable(f"no corpus at {CORPUS} (this report reads ../shared/corpus; CTXPIPE_CORPUS overrides)")
    if not session.is_file():
        raise Unavailable(f"{session}: the compacted session is not in the corpus")
    if not FACTS.is_file():
        raise Unavailable(f"{FACTS}: the fact list is missing")
    facts = json.loads(FACTS.read_text(encoding="utf-8"))
    raw = session.read_bytes().splitlines(keepends=True)
    lines = [json.loads(line) for line in raw]
    cut_at = next((i for i, o in enumerate(lines) if o.get("type") == "system" and o.get("subtype") == "compact_boundary"), -1)
    if cut_at < 0 or cut_at + 1 >= len(lines) or not lines[cut_at + 1].get("isCompactSummary"):
        raise Unavailable(f"{session}: no compact_boundary followed by Claude Code's summary")
    boundary = lines[cut_at]
    now = str(boundary.get("timestamp"))  # the moment Claude Code compacted: ctxpipe runs "then"
    result: dict[str, Any] = {
        "session": SESSION,
        "history_lines": cut_at,
        "boundary_line": cut_at + 1,
        "summary_line": cut_at + 2,
        "claude_code_trigger": (boundary.get("compactMetadata") or {}).get("trigger"),
        "claude_code_pre_tokens": (boundary.get("compactMetadata") or {}).get("preTokens"),
        "facts_by_kind": {k: sum(f["kind"] == k for f in facts) for k in KINDS},
        "notes": [],
        "failed": [],
    }
    result["claude_code"] = recall(facts, message_text(lines[cut_at + 1]))
    with tempfile.TemporaryDirectory(prefix="ctxpipe-recall-") as folder:
        work = Path(folder)
        cut = work / "history.jsonl"
        cut.write_bytes(b"".join(raw[:cut_at]))
        try:
            _run(
                [
                    "summarize",
                    "--engine",
                    "offline",
                    "--now",
                    now,
                    "--report-json",
                    str(work / "summarize.json"),
                    "-o",
                    str(work / "summarized.jsonl"),
                    str(cut),
                ],
                "summarize --engine offline",
                work,
            )
            summary, context = after_boundary(read_lines(work / "summarized.jsonl"))
            report = json.loads((work / "summarize.json").read_text(encoding="utf-8"))
            result["summarize"] = recall(facts, context)
            result["summarize_summary_only"] = recall(facts, summary)
            result["summarize_verifier"] = _verifier(report.get("verification"))
            result["summarize_verifier_before_repair"] = _verifier(report.get("verification_before_repair"))
        except Unavailable as error:
            result["failed"].append(f"summarize: {error}")
        try:
            compacted = _run(["compact", "--force", "--engine", "offline", "--now", now, str(cut)], "compact --force --engine offline", work).stdout
            (work / "compacted.jsonl").write_bytes(compacted)
            summary, context = after_boundary(read_lines(work / "compacted.jsonl"))
            result["compact"] = recall(facts, context)
            result["compact_summary_only"] = recall(facts, summary)
            verification, note = _compact_report(cut, now, compacted)
            result["compact_verifier"] = _verifier(verification)
            if note:
                result["notes"].append(f"compact verifier: {note}")
        except Unavailable as error:
            result["failed"].append(f"compact: {error}")
    result["over_claims"] = over_claims(result)
    return result


def over_claims(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Where the verifier says more than the independent measurement of the same output."""
    found = []
    for name in ("summarize", "compact"):
        said, measured = result.get(f"{name}_verifier"), result.get(name)
        if not said or not measured:
            continue
        if said.get("recall") is not None and measured["recall"] is not None and said["recall"] > measured["recall"]:
            found.append({"output": name, "kind": "all", "verifier": said["recall"], "independent": measured["recall"]})
        for kind, figures in (said.get("kinds") or {}).items():
            ours = measured["kinds"].get(kind, {}).get("recall")
            theirs = figures.get("recall") if isinstance(figures, dict) else None
            if ours is not None and theirs is not None and theirs > ours:
                found.append({"output": name, "kind": kind, "verifier": theirs, "independent": ours})
    return found


# --- the report ------------------------------------------------------------------------------------


def _cell(figures: dict[str, Any] | None) -> str:
    if not figures or figures.get("recall") is None:
        return "-"
    return f"{figures['recall']:.0%} ({figures['carried']}/{figures['facts']})"


def table(result: dict[str, Any]) -> str:
    from ctxpipe.cli.terminal import shown

    head = [
        "kind",
        "facts",
        "Claude Code",
        "ctxpipe summarize",
        "(summary only)",
        "ctxpipe compact",
        "(summary only)",
        "verifier says: summarize",
        "verifier says: compact",
    ]
    rows = []
    extra = sorted({k for key in ("summarize_verifier", "compact_verifier") for k in ((result.get(key) or {}).get("kinds") or {}) if k not in KINDS})
    for kind in (*KINDS, *extra, "all"):

        def pick(key: str, kind: str = kind) -> dict[str, Any] | None:
            figures = result.get(key)
            if figures is None:
                return None
            return figures if kind == "all" else (figures.get("kinds") or {}).get(kind)

        count = sum(result["facts_by_kind"].values()) if kind == "all" else result["facts_by_kind"].get(kind)
        rows.append(
            [
                shown(kind),
                "-" if count is None else str(count),
                *(
                    _cell(pick(k))
                    for k in ("claude_code", "summarize", "summarize_summary_only", "compact", "compact_summary_only", "summarize_verifier", "compact_verifier")
                ),
            ]
        )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(head, widths)) + " |", "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    out.append("")
    out.append(
        f"{result['session']}: lines 1..{result['history_lines']} cut before Claude Code's compact_boundary "
        f"(line {result['boundary_line']}, trigger {result['claude_code_trigger']}, preTokens {result['claude_code_pre_tokens']})."
    )
    out.append("ctxpipe summarize and compact: summary + kept tail (+ restored files for compact); (summary only): the summary line alone.")
    if not any(result.get(k) and result[k].get("kinds") for k in ("summarize_verifier", "compact_verifier")):
        out.append('The verifier reports no per-kind figures yet (no "kinds" in its report): only its overall recall is shown.')
    for claim in result["over_claims"]:
        out.append(
            f"verifier over-claims: {claim['output']}, {claim['kind']}: it says {claim['verifier']:.0%}, "
            f"the independent measurement of the same output {claim['independent']:.0%}"
        )
    for note in result["notes"]:
        out.append(shown(note))
    for failure in result["failed"]:
        out.append(f"FAILED: {shown(failure)}")
    for key, label in (("claude_code", "Claude Code"), ("summarize", "ctxpipe summarize"), ("compact", "ctxpipe compact")):
        if key not in result:
            continue
        missed = [(kind, text) for kind, figures in result[key]["kinds"].items() for text in figures["missing"]]
        out.append(f"missed by {label} ({len(missed)}):" + ("" if missed else " nothing"))
        out += [f"  - {kind}: {shown(text)}" for kind, text in missed]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of the table")
    args = parser.parse_args(argv)
    try:
        result = measure()
    except Unavailable as error:
        print(f"summary_recall: {error}", file=sys.stderr)
        return 1
    try:
        print(json.dumps(result, indent=1, ensure_ascii=True) if args.json else table(result), flush=True)
    except BrokenPipeError:  # `| head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    for failure in result["failed"]:
        print(f"summary_recall: {failure}", file=sys.stderr)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
