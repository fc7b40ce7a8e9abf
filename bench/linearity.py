"""Linearity: does the time of summarize, validate and the chain walk grow with the input, not its square?

    python bench/linearity.py [--repeat N] [--quick] [--json FILE]

Each command runs on generated transcripts (bench/synthetic.py) of size n, 2n and 4n, as its own
process like in run.py, and the report gives t(2n)/t(n) and t(4n)/t(2n): about 2 when the work is
linear, about 4 when it is quadratic (process start-up, the same at every size, pulls a ratio below
2). Times are the best of N runs of the child's CPU time (user + system), which other load on the
machine disturbs less than wall time; wall time is shown beside it.

- verify: the summary verifier alone, in this process (key_facts + verify over an offline summary)
- summarize: `ctxpipe summarize --engine offline` on n user/assistant turns with tool calls
- validate: `ctxpipe validate --json`, in lines per second against a baseline that only parses
  every line with orjson (run as its own process on the same file), and the schema check alone,
  the compiled fast path against jsonschema (in this process, on the same lines)
- chain: count, summarize and compact on one parentUuid chain 25k, 50k and 100k lines deep
  (and 10k, so the 10x step from 1e4 to 1e5 shows too)

A report, never a timed test; exit 1 only when a command fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import synthetic  # bench/synthetic.py

DATA = Path(os.environ.get("CTXPIPE_BENCH_DATA", Path(__file__).resolve().parent / ".data")) / "linear"
PARSE_ONLY = "import sys, orjson\nloads = orjson.loads\nwith open(sys.argv[1], 'rb') as f:\n    for line in f:\n        loads(line)\n"


def ctxpipe() -> str:
    beside = Path(sys.executable).parent / "ctxpipe"
    found = str(beside) if beside.is_file() else shutil.which("ctxpipe")
    if not found:
        sys.exit("ctxpipe not found next to the interpreter or on PATH (pip install -e . first)")
    return found


def data(kind: str, n: int) -> Path:
    path = DATA / f"{kind}-{n}.jsonl"
    if not path.exists():
        synthetic.write(path, synthetic.turns(n) if kind == "turns" else synthetic.chain(n))
    return path


def run_child(argv: Sequence[str]) -> tuple[float, float]:
    """(CPU seconds of the child, wall seconds), stdout to /dev/null; a failure raises."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    # validate exits 1 on findings; anything else that is not 0 failed.
    if process.returncode not in (0, 1) or "Traceback" in stderr:
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}: {stderr[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall


def best(repeat: int, once: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    runs = [once() for _ in range(repeat)]
    return min(cpu for cpu, _ in runs), min(wall for _, wall in runs)


def in_process(work: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def verifier_work(path: Path) -> Callable[[], object]:
    from ctxpipe.core.jsonl import iter_entries
    from ctxpipe.core.summarize import SummarizeSettings, context_text, key_facts, offline_summary, tail_start, verify
    from ctxpipe.formats import get

    with open(path, "rb") as handle:
        entries = list(iter_entries(handle, str(path)))
    messages = get("claude-code").messages(entries)
    start = tail_start(messages, SummarizeSettings())
    history, tail = messages[:start], messages[start:]
    summary = offline_summary(history)

    def work() -> object:
        return verify(key_facts(history, tail), summary + "\n" + context_text(tail))

    return work


def schema_rates(path: Path, sample: int) -> tuple[float, float]:
    """Lines per CPU second of the schema check: the fast path (as validate runs it) and jsonschema alone."""
    from ctxpipe.jobs import schemas

    name = "claude-code.entry.schema.json"
    with open(path, "rb") as handle:
        objs = [orjson.loads(line) for _, line in zip(range(sample), handle)]
    schemas.errors(name, objs[0]), schemas.reference_errors(name, objs[0])  # compile both first
    fast, _ = in_process(lambda: [schemas.errors(name, obj) for obj in objs])
    reference, _ = in_process(lambda: [schemas.reference_errors(name, obj) for obj in objs])
    return len(objs) / fast, len(objs) / reference


def lines_in(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per point, the best is kept (default 3)")
    parser.add_argument("--quick", action="store_true", help="sizes a quarter as large, one run each")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every figure here")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    scale = 4 if args.quick else 1
    tool = ctxpipe()
    rows: list[dict[str, object]] = []
    failed = False

    def series(name: str, sizes: Sequence[int], unit: str, measure: Callable[[int], tuple[float, float]]) -> list[tuple[float, float]]:
        nonlocal failed
        points: list[tuple[float, float]] = []
        for n in sizes:
            print(f"bench: {name} n={n:,}", file=sys.stderr)
            try:
                points.append(measure(n))
            except RuntimeError as exc:
                print(f"bench: {name}: {exc}", file=sys.stderr)
                failed = True
                return points
        ratios = [b[0] / a[0] if a[0] else float("nan") for a, b in zip(points, points[1:])]
        rows.append({"name": name, "unit": unit, "sizes": list(sizes), "cpu_s": [p[0] for p in points], "wall_s": [p[1] for p in points], "ratios": ratios})
        return points

    turns = [t * 1250 // scale for t in (1, 2, 4)]  # 4 messages and 5 lines per turn

    def verify_point(n: int) -> tuple[float, float]:
        work = verifier_work(data("turns", n // 4))  # reading and splitting are not timed
        return best(repeat, lambda: in_process(work))

    series("verify (in process)", [4 * t for t in turns], "messages", verify_point)
    series(
        "summarize --engine offline",
        [4 * t for t in turns],
        "messages",
        lambda n: best(repeat, lambda: run_child([tool, "summarize", "--engine", "offline", str(data("turns", n // 4))])),
    )
    validate_turns = [4 * t for t in turns]  # larger, so that start-up weighs less in lines/s
    validate_points = series(
        "validate",
        [5 * t for t in validate_turns],
        "lines",
        lambda n: best(repeat, lambda: run_child([tool, "validate", "--json", str(data("turns", n // 5))])),
    )
    depths = [d // scale for d in (10_000, 25_000, 50_000, 100_000)]
    for command in (["count", "--json"], ["summarize", "--engine", "offline"], ["compact", "--force", "--engine", "offline"]):
        series(
            f"chain: {' '.join(command[:1])}",
            depths,
            "lines deep",
            lambda n, command=command: best(repeat, lambda: run_child([tool, *command, str(data("chain", n))])),
        )

    print(f"best of {repeat}; CPU seconds of the process (wall in brackets); ratio = t(next size) / t(this size), 2.0 is linear")
    for row in rows:
        sizes, cpu, wall, ratios = row["sizes"], row["cpu_s"], row["wall_s"], row["ratios"]
        assert isinstance(sizes, list) and isinstance(cpu, list) and isinstance(wall, list) and isinstance(ratios, list)
        figures = "  ".join(f"{n:>7,}: {c:6.2f} s ({w:6.2f})" for n, c, w in zip(sizes, cpu, wall))
        steps = "  ".join(f"x{b / a:g}: {r:.2f}" for a, b, r in zip(sizes, sizes[1:], ratios))
        print(f"{row['name']:<28} {row['unit']:<10} {figures}\n{'':<28} ratios {steps}")

    largest = data("turns", validate_turns[-1])
    if validate_points and len(validate_points) == len(validate_turns):
        baseline = best(repeat, lambda: run_child([sys.executable, "-c", PARSE_ONLY, str(largest)]))
        lines = lines_in(largest)
        validate_cpu, validate_wall = validate_points[-1]
        fast_rate, reference_rate = schema_rates(largest, 5000 // scale)
        print(
            f"validate on {lines:,} lines: {lines / validate_cpu:,.0f} lines/s (wall {lines / validate_wall:,.0f}); "
            f"orjson parse-only baseline {lines / baseline[0]:,.0f} lines/s (wall {lines / baseline[1]:,.0f}): "
            f"validate takes {validate_cpu / baseline[0]:.1f}x the baseline's time"
        )
        print(f"schema check alone: fast path {fast_rate:,.0f} lines/s, jsonschema {reference_rate:,.0f} lines/s ({fast_rate / reference_rate:.1f}x)")
        rows.append(
            {
                "name": "validate-rate",
                "lines": lines,
                "validate_cpu_s": validate_cpu,
                "baseline_cpu_s": baseline[0],
                "schema_fast_lines_per_s": fast_rate,
                "schema_jsonschema_lines_per_s": reference_rate,
            }
        )
    if args.json:
        meta = {
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "repeat": repeat,
            "quick": args.quick,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        }
        args.json.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
