"""Benchmark harness: wall time and peak RSS of ctxpipe against baselines measured in the same run.

    python bench/run.py [--only NAME ...] [--repeat N] [--json FILE]

Every ratio is relative to `orjson-loop` (orjson loads+dumps of each line of the same file),
measured in the same run on the same machine, so ratios from different machines compare; a bench
that names another `baseline` (validate against convert of the same lines) is relative to that one.
This is a report, not a test: a FAIL target does not change the exit status; only a command
that cannot run or exits non-zero does (exit 1).

To add a benchmark, append one `Bench(...)` to BENCHES.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import corpus  # bench/corpus.py; importable because bench/ is sys.path[0] when run as a script
import schema_lines  # bench/schema_lines.py
from bytecode import keep_bytecode

MiB = 1024 * 1024
BASELINE = "orjson-loop"
PYTHON_START = "python-start"  # the cold starts' baseline: the interpreter starting and doing nothing
DEFAULT_REPEAT = 3
COLD_START_RUNS = 10

# The baseline: the least work a JSONL -> JSONL stage can do in Python (parse and serialise
# each line with the fastest library), run as its own process like every other command.
ORJSON_LOOP = """\
import sys, orjson
loads, dumps, nl = orjson.loads, orjson.dumps, orjson.OPT_APPEND_NEWLINE
out = sys.stdout.buffer
with open(sys.argv[1], "rb") as f:
    for line in f:
        out.write(dumps(loads(line), option=nl))
"""


CCUSAGE = "ccusage@20.0.24"
# What a whole-file reading or a stage may hold beyond its mapped input (issue 26): its own
# start-up and the active context's lines.
INPUT_ALLOWANCE_MIB = 100
HUGE_BASELINE = "orjson-loop-huge"
LONG_LINES_BASELINE = "orjson-loop-long-lines"


class Unavailable(Exception):
    """A command a benchmark needs is not installed."""


class Inputs:
    """What argv builders need; each part is built or located only if a selected bench uses it."""

    @functools.cached_property
    def _big_half(self) -> tuple[Path, Path]:
        return corpus.ensure_big()

    @property
    def big(self) -> str:
        return str(self._big_half[0])

    @property
    def half(self) -> str:
        return str(self._big_half[1])

    @functools.cached_property
    def huge(self) -> str:
        return str(corpus.ensure_huge())

    @functools.cached_property
    def schema_valid(self) -> str:
        return str(schema_lines.ensure_valid())

    @functools.cached_property
    def schema_failing(self) -> str:
        return str(schema_lines.ensure_failing())

    @functools.cached_property
    def tree(self) -> str:
        return str(corpus.ensure_tree())

    @functools.cached_property
    def long_lines(self) -> str:
        return str(corpus.ensure_long_lines())

    @property
    def small(self) -> str:
        """A small transcript (12 KiB, 20 messages): what a command costs before it does any work."""
        return self.fixture("claude-code", "repeats.jsonl")

    def fixture(self, *parts: str) -> str:
        """A file of fixtures/ (the small inputs of the commands that need their own: expand's ledger, hooks' settings)."""
        return str(Path(__file__).resolve().parent.parent.joinpath("fixtures", *parts))

    @functools.cached_property
    def short(self) -> str:
        return str(corpus.ensure_short_tree())

    @functools.cached_property
    def ctxpipe(self) -> str:
        # Prefer the script of the interpreter running us (the dev venv) over another
        # ctxpipe that happens to be on PATH.
        beside = Path(sys.executable).parent / "ctxpipe"
        found = str(beside) if beside.is_file() else shutil.which("ctxpipe")
        if not found:
            raise Unavailable(f"ctxpipe not found next to {sys.executable} or on PATH (pip install -e . first)")
        return found

    @functools.cached_property
    def ccusage_config(self) -> str:
        """A CLAUDE_CONFIG_DIR whose projects/ is the tree, for ccusage to read."""
        return _claude_config(Path(self.tree), "ccusage-config")

    @functools.cached_property
    def ccusage_short_config(self) -> str:
        """The same for the tree of short sessions."""
        return _claude_config(Path(self.short), "ccusage-short-config")

    @functools.cached_property
    def ccusage(self) -> str:
        """ccusage (npm ccusage@20.0.24 with its native package), installed into the data folder."""
        local = Path(self.tree).parent / "node_modules" / ".bin" / "ccusage"
        found = shutil.which("ccusage") or (str(local) if local.exists() else None)
        if found:
            return found
        npm = shutil.which("npm")
        if not npm:
            raise Unavailable("ccusage not installed and npm not found")
        subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(local.parents[2]), CCUSAGE], check=False, capture_output=True)
        if not local.exists():
            raise Unavailable(f"could not install {CCUSAGE} with npm")
        return str(local)

    def kept_counts(self, tree: str) -> str:
        """An XDG_CACHE_HOME holding the counts of `tree`'s files, kept by one run of count (not timed)."""
        folder = Path(self.scratch(f"kept-counts-{Path(tree).name}"))
        subprocess.run([self.ctxpipe, "count", "--json", tree], env={**os.environ, "XDG_CACHE_HOME": str(folder)}, stdout=subprocess.DEVNULL, check=True)
        return str(folder)

    def scratch(self, name: str) -> str:
        """An empty output folder in the data dir (emptied again before every run)."""
        folder = Path(self.tree).parent / "out" / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return str(folder)

    @functools.cached_property
    def jq(self) -> str:
        found = shutil.which("jq")
        if not found:
            raise Unavailable("jq not found on PATH")
        return found


def _claude_config(tree: Path, name: str) -> str:
    """A CLAUDE_CONFIG_DIR beside `tree` whose projects/ is `tree`."""
    config = tree.parent / name
    config.mkdir(exist_ok=True)
    link = config / "projects"
    if not link.exists():
        link.symlink_to(tree.resolve(), target_is_directory=True)
    return str(config)


@dataclass
class Result:
    name: str
    argv: list[str]
    seconds: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def peak_rss_mib(self) -> float:
        return max(self.rss_kib) / 1024

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.seconds)


Results = Mapping[str, Result]


@dataclass(frozen=True)
class Target:
    text: str
    # None when it cannot be judged, e.g. a bench it compares with was not run.
    check: Callable[[Result, Results], bool | None]


@dataclass(frozen=True)
class Bench:
    name: str
    argv: Callable[[Inputs], list[str]]
    targets: tuple[Target, ...] = ()
    runs: int | None = None  # fixed number of runs; None means --repeat
    ratio: bool = True  # False when the input differs from the baseline's, so a ratio means nothing
    baseline: str = BASELINE  # the bench its ratio is to (one run on the same input)
    exit_codes: tuple[int, ...] = (0,)  # what a successful run exits with (validate: 1 when it finds errors)


# --- target helpers -------------------------------------------------------------------------


def _other(results: Results, name: str) -> Result | None:
    r = results.get(name)
    return r if r is not None and r.ok else None


def time_ratio_at_most(factor: float, name: str = BASELINE) -> Target:
    def check(me: Result, results: Results) -> bool | None:
        base = _other(results, name)
        return None if base is None else me.best <= factor * base.best

    return Target(f"<= {factor:g}x {name}", check)


def faster_than(name: str) -> Target:
    def check(me: Result, results: Results) -> bool | None:
        other = _other(results, name)
        return None if other is None else me.best < other.best

    return Target(f"faster than {name}", check)


def rss_at_most(name: str, factor: float) -> Target:
    def check(me: Result, results: Results) -> bool | None:
        other = _other(results, name)
        return None if other is None else me.peak_rss_mib <= factor * other.peak_rss_mib

    return Target(f"RSS <= {factor:g}x {name}", check)


def rss_within_input(extra_mib: float = INPUT_ALLOWANCE_MIB) -> Target:
    """Peak RSS at most the size of the transcript the bench reads plus `extra_mib`: a stage may have
    its mapped input resident, and no more than a bounded amount besides."""

    def check(me: Result, results: Results) -> bool | None:
        inputs = [arg for arg in me.argv if arg.endswith(".jsonl") and os.path.isfile(arg)]
        return me.peak_rss_mib <= os.path.getsize(inputs[-1]) / MiB + extra_mib if inputs else None

    return Target(f"RSS <= input + {extra_mib:g} MiB", check)


def faster_by(name: str, factor: float) -> Target:
    def check(result: Result, results: Results) -> bool | None:
        other = _other(results, name)
        return None if other is None else other.best >= factor * result.best

    return Target(f">= {factor:g}x faster than {name}", check)


def median_ms_over_at_most(name: str, ms: float) -> Target:
    """At most `ms` more than `name`'s median: a start-up against a bare interpreter's in the same run."""

    def check(me: Result, results: Results) -> bool | None:
        other = _other(results, name)
        return None if other is None else (me.median - other.median) * 1000 <= ms

    return Target(f"median <= {name} + {ms:g} ms", check)


def count_over(name: str, tree: Callable[[Inputs], str]) -> list[Bench]:
    """`count` over a tree, against ccusage over the same (`ccusage-<name>`): every file counted
    (--no-cache: a first run, or every file changed), and again with the counts an untimed run before
    kept (a repeated count of unchanged files)."""
    target = (time_ratio_at_most(0.5, f"ccusage-{name}"),)
    return [
        Bench(f"count-{name}", lambda i: [i.ctxpipe, "count", "--json", "--no-cache", tree(i)], targets=target, ratio=False),
        Bench(
            f"count-{name}-kept",
            lambda i: ["env", f"XDG_CACHE_HOME={i.kept_counts(tree(i))}", i.ctxpipe, "count", "--json", tree(i)],
            targets=target,
            ratio=False,
        ),
    ]


def cold_start(name: str, argv: Callable[[Inputs], list[str]]) -> Bench:
    """A command on a small input (or help), against `python -c pass` run as often in the same rounds."""
    return Bench(name, argv, targets=(median_ms_over_at_most(PYTHON_START, 100),), runs=COLD_START_RUNS, baseline=PYTHON_START)


# --- the registry ---------------------------------------------------------------------------

BENCHES: list[Bench] = [
    Bench(BASELINE, lambda i: [sys.executable, "-c", ORJSON_LOOP, i.big]),
    Bench("jq", lambda i: [i.jq, "-c", ".", i.big]),
    Bench(
        "convert-identity",
        lambda i: [i.ctxpipe, "convert", "--to", "claude-code", i.big],
        targets=(
            time_ratio_at_most(2.0),
            faster_than("jq"),
            # Same command on half the input: a streaming stage's peak RSS must not grow.
            rss_at_most("convert-identity-half", 1.25),
        ),
    ),
    Bench(
        "convert-identity-half",
        lambda i: [i.ctxpipe, "convert", "--to", "claude-code", i.half],
        ratio=False,
    ),
    Bench(
        # Another format: every line is read, the active context rebuilt; a large file is read in place.
        "convert-anthropic",
        lambda i: [i.ctxpipe, "convert", "--to", "anthropic", i.big],
        targets=(rss_within_input(),),
    ),
    Bench(
        "count-big",
        lambda i: [i.ctxpipe, "count", "--json", i.big],
        targets=(time_ratio_at_most(1.5),),
    ),
    Bench(
        # Every line parsed (what --by/--top/--timeline cost): shows what reading only the end saves.
        "count-big-full",
        lambda i: [i.ctxpipe, "count", "--json", "--no-cache", "--full", i.big],
        targets=(rss_within_input(),),
    ),
    Bench(
        # The same on about 1 GiB: memory must not follow the input's length.
        "count-huge-full",
        lambda i: [i.ctxpipe, "count", "--json", "--no-cache", "--full", i.huge],
        targets=(rss_within_input(),),
        ratio=False,
    ),
    Bench(
        "ccusage-tree",
        lambda i: ["env", f"CLAUDE_CONFIG_DIR={i.ccusage_config}", i.ccusage, "claude", "session", "--json", "--offline"],
        ratio=False,
    ),
    *count_over("tree", lambda i: i.tree),
    Bench(
        "count-tree-1-job",
        lambda i: [i.ctxpipe, "count", "--json", "--no-cache", "--jobs", "1", i.tree],
        ratio=False,
    ),
    Bench(
        "microcompact",
        lambda i: [i.ctxpipe, "microcompact", "--force", i.big],
        targets=(time_ratio_at_most(2.0), rss_within_input(INPUT_ALLOWANCE_MIB)),
    ),
    Bench(
        "collapse",
        lambda i: [i.ctxpipe, "collapse", i.big],
        targets=(time_ratio_at_most(2.0), rss_within_input(INPUT_ALLOWANCE_MIB)),
    ),
    Bench(
        "snip",
        lambda i: [i.ctxpipe, "snip", "--keep-last", "40", i.big],
        targets=(time_ratio_at_most(2.0), rss_within_input(INPUT_ALLOWANCE_MIB)),
    ),
    Bench(
        # Through pipes on both sides, as a stage inside a pipe runs: the bytes are really copied
        # (read from a file and written into /dev/null, the untouched head of the file is not).
        "microcompact-piped",
        lambda i: ["bash", "-o", "pipefail", "-c", f"cat {i.big} | {i.ctxpipe} microcompact --force 2>/dev/null | cat"],
        targets=(time_ratio_at_most(2.0),),
    ),
    Bench(
        # Six stages in one shell pipe, against microcompact alone: what composing costs.
        "six-stage-pipe",
        lambda i: [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"cat {i.big} | {i.ctxpipe} microcompact --force 2>/dev/null | {i.ctxpipe} collapse 2>/dev/null"
            f" | {i.ctxpipe} snip --keep-last 40 2>/dev/null | {i.ctxpipe} microcompact --force 2>/dev/null"
            f" | {i.ctxpipe} collapse 2>/dev/null | {i.ctxpipe} convert --to claude-code | cat",
        ],
        # No target: whole-transcript stages cannot stream (the active context is found from the
        # end), so each waits for the one before it; the figure shows the price, about one stage each.
    ),
    Bench(
        # The main job over one 213 MB transcript (its active context is the last session in it).
        "compact-big",
        lambda i: [i.ctxpipe, "compact", "--force", "--engine", "offline", i.big],
        targets=(time_ratio_at_most(2.0), rss_within_input(INPUT_ALLOWANCE_MIB)),
    ),
    Bench("summarize-big", lambda i: [i.ctxpipe, "summarize", "--engine", "offline", i.big], targets=(rss_within_input(INPUT_ALLOWANCE_MIB),)),
    Bench("restore-big", lambda i: [i.ctxpipe, "restore", i.big], targets=(rss_within_input(INPUT_ALLOWANCE_MIB),)),
    # Every view over a session whose readers come back to two long lines (a 16 MiB tool result, a
    # message of 100,000 blocks): as a ratio to one parse and write of each of its lines.
    Bench(LONG_LINES_BASELINE, lambda i: [sys.executable, "-c", ORJSON_LOOP, i.long_lines], ratio=False),
    Bench(
        "count-long-lines-views",
        lambda i: [i.ctxpipe, "count", "--json", "--no-cache", "--by", "block", "--top", "3", "--timeline", i.long_lines],
        baseline=LONG_LINES_BASELINE,
    ),
    # The same stages on about 1 GiB (big.jsonl five times; its active context is the same last
    # session): memory must not grow with the history above the active context.
    Bench(HUGE_BASELINE, lambda i: [sys.executable, "-c", ORJSON_LOOP, i.huge], ratio=False),
    *(
        Bench(f"{name}-huge", lambda i, argv=argv: [i.ctxpipe, *argv, i.huge], targets=(rss_within_input(INPUT_ALLOWANCE_MIB),), baseline=HUGE_BASELINE)
        for name, argv in (
            ("microcompact", ["microcompact", "--force"]),
            ("snip", ["snip", "--keep-last", "40"]),
            ("collapse", ["collapse"]),
            ("summarize", ["summarize", "--engine", "offline"]),
            ("restore", ["restore"]),
            ("compact", ["compact", "--force", "--engine", "offline"]),
        )
    ),
    Bench(
        "compact-tree-2-jobs",
        lambda i: [i.ctxpipe, "compact", "--force", "--engine", "offline", "--jobs", "2", "--json", "--out-dir", i.scratch("compact-2"), i.tree],
        targets=(faster_by("compact-tree-1-job", 1.7),),
        ratio=False,
    ),
    Bench(
        "compact-tree-1-job",
        lambda i: [i.ctxpipe, "compact", "--force", "--engine", "offline", "--jobs", "1", "--json", "--out-dir", i.scratch("compact-1"), i.tree],
        ratio=False,
    ),
    # 800 short sessions (bench/corpus.py short/): per-file costs and the parent's work weigh most here.
    Bench(
        "ccusage-short",
        lambda i: ["env", f"CLAUDE_CONFIG_DIR={i.ccusage_short_config}", i.ccusage, "claude", "session", "--json", "--offline"],
        ratio=False,
    ),
    *count_over("short", lambda i: i.short),
    Bench(
        "compact-short-2-jobs",
        lambda i: [i.ctxpipe, "compact", "--force", "--engine", "offline", "--jobs", "2", "--json", "--out-dir", i.scratch("short-2"), i.short],
        targets=(faster_by("compact-short-1-job", 1.7),),
        ratio=False,
    ),
    Bench(
        "compact-short-1-job",
        lambda i: [i.ctxpipe, "compact", "--force", "--engine", "offline", "--jobs", "1", "--json", "--out-dir", i.scratch("short-1"), i.short],
        ratio=False,
    ),
    # validate against convert of the same lines (bench/schema_lines.py): real corpus lines as they
    # are, and the same lines each broken so that every one fails the schema.
    Bench("convert-schema-valid", lambda i: [i.ctxpipe, "convert", "--to", "claude-code", i.schema_valid], ratio=False),
    Bench(
        "validate-schema-valid",
        lambda i: [i.ctxpipe, "validate", "--json", i.schema_valid],
        targets=(time_ratio_at_most(3.0, "convert-schema-valid"),),
        baseline="convert-schema-valid",
    ),
    Bench("convert-schema-failing", lambda i: [i.ctxpipe, "convert", "--to", "claude-code", i.schema_failing], ratio=False),
    Bench(
        "validate-schema-failing",
        lambda i: [i.ctxpipe, "validate", "--json", i.schema_failing],
        targets=(time_ratio_at_most(3.0, "convert-schema-failing"),),
        baseline="convert-schema-failing",
        exit_codes=(1,),  # every line is an error
    ),
    # Start-up: within 100 ms of a bare Python start, for help and for a command's whole run on a small file.
    Bench(PYTHON_START, lambda i: [sys.executable, "-c", "pass"], runs=COLD_START_RUNS, ratio=False),
    cold_start("help-cold-start", lambda i: [i.ctxpipe, "--help"]),
    cold_start("command-help-cold-start", lambda i: [i.ctxpipe, "compact", "--help"]),
    cold_start("count-cold-start", lambda i: [i.ctxpipe, "count", "--json", i.small]),
    cold_start("warn-cold-start", lambda i: [i.ctxpipe, "warn", "--json", i.small]),
    cold_start("microcompact-cold-start", lambda i: [i.ctxpipe, "microcompact", "--force", i.small]),
    # Every other command on a small input: the same target (issue 26). statusline, which reads Claude
    # Code's JSON on stdin, has its own light path and is not here (the runs' stdin is /dev/null).
    *(
        cold_start(f"{name}-cold-start", lambda i, argv=argv: [i.ctxpipe, *argv, i.small])
        for name, argv in (
            ("collapse", ["collapse"]),
            ("snip", ["snip", "--keep-last", "4"]),
            ("summarize", ["summarize", "--engine", "offline"]),
            ("restore", ["restore"]),
            ("compact", ["compact", "--force", "--engine", "offline"]),
            ("convert", ["convert", "--to", "anthropic"]),
            ("validate", ["validate"]),
            ("audit", ["audit"]),
            ("report", ["report"]),
            ("api-edits", ["api-edits"]),
        )
    ),
    cold_start(
        "expand-cold-start",
        lambda i: [i.ctxpipe, "expand", "--ledger", i.fixture("expand", "pipe.ledger.jsonl"), i.fixture("expand", "three-stages.in.jsonl")],
    ),
    cold_start(
        "hooks-cold-start",
        lambda i: [i.ctxpipe, "hooks", "install", "--dry-run", "--settings", i.fixture("hooks", "user-settings.json"), "--program", "ctxpipe"],
    ),
]


# --- measuring ------------------------------------------------------------------------------


# Runs the command and reports "exit-code seconds maxrss" on the fd named in argv[1].
# Why a separate small process: on Linux a child's ru_maxrss starts from the peak RSS of the
# process it was forked (or vforked) from, carried over at exec, so os.wait4 straight from
# this harness reports at least the harness's own peak (~30 MiB after reading the inputs) for
# every command, even /bin/true. Forking from a bare `python -S` lowers that floor to ~5 MiB.
# Timing is taken in the wrapper too, so its own start-up is not counted.
WRAPPER = """\
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as e:
        os.write(2, ("bench: %s: %s\\n" % (sys.argv[2], e.strerror)).encode())
    os._exit(127)
_, status, usage = os.wait4(pid, 0)
elapsed = time.perf_counter() - start
os.write(int(sys.argv[1]), b"%d %r %d" % (os.waitstatus_to_exitcode(status), elapsed, usage.ru_maxrss))
"""


def measure(argv: Sequence[str], exit_codes: Sequence[int] = (0,)) -> tuple[float, int]:
    """Run argv once with stdout to /dev/null; return (wall seconds, peak RSS in KiB)."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb") as wrapper_report:
        try:
            wrapper = subprocess.run(
                [sys.executable, "-S", "-c", WRAPPER, str(write_fd), *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(write_fd,)
            )
        finally:
            os.close(write_fd)
        figures = wrapper_report.read().split()
    if len(figures) != 3:  # the wrapper itself failed; its traceback is on stderr
        raise subprocess.CalledProcessError(wrapper.returncode, "measuring wrapper")
    code, seconds, rss = figures
    if int(code) not in exit_codes:
        raise subprocess.CalledProcessError(int(code), list(argv))
    # ru_maxrss is KiB on Linux, bytes on macOS.
    return float(seconds), int(rss) // 1024 if sys.platform == "darwin" else int(rss)


def warm_page_cache(paths: Sequence[str]) -> None:
    # The first timed run must not be the only one that reads from disk.
    for p in paths:
        with open(p, "rb") as f:
            while f.read(16 * MiB):
                pass


def run(benches: Sequence[Bench], repeat: int, inputs: Inputs) -> dict[str, Result]:
    results: dict[str, Result] = {}
    for b in benches:
        try:
            results[b.name] = Result(b.name, b.argv(inputs))
        except Unavailable as e:
            results[b.name] = Result(b.name, [], error=str(e))
    warm_page_cache(sorted({a for r in results.values() for a in r.argv if a.endswith(".jsonl")}))
    # Interleave: round k runs every bench once, so slow drift (thermal, other load) spreads
    # over all benches instead of penalising whichever ran last.
    runs = {b.name: b.runs or repeat for b in benches}
    for k in range(max(runs.values())):
        for b in benches:
            r = results[b.name]
            if r.error is None and k < runs[b.name]:
                print(f"bench: {b.name} run {k + 1}/{runs[b.name]}", file=sys.stderr)
                try:
                    seconds, rss = measure(r.argv, b.exit_codes)
                except (OSError, subprocess.CalledProcessError) as e:
                    r.error = str(e)
                    continue
                r.seconds.append(seconds)
                r.rss_kib.append(rss)
    return results


# --- reporting ------------------------------------------------------------------------------


def report(benches: Sequence[Bench], results: Results) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for b in benches:
        r = results[b.name]
        base = results.get(b.baseline)
        row: dict[str, object] = {"name": b.name, "argv": r.argv, "error": r.error, "baseline": b.baseline}
        if r.ok:
            row |= {
                "runs": len(r.seconds),
                "seconds": r.seconds,
                "best_s": r.best,
                "median_s": r.median,
                "peak_rss_mib": r.peak_rss_mib,
                "ratio": r.best / base.best if b.ratio and base and base.ok else None,
            }
        row["targets"] = [{"target": t.text, "pass": t.check(r, results) if r.ok else None} for t in b.targets]
        rows.append(row)
    return rows


def print_table(rows: Sequence[Mapping[str, object]]) -> None:
    head = ("name", "best s", "median s", "x base", "peak RSS MiB", "target", "result")
    lines: list[tuple[str, ...]] = [head]
    for row in rows:
        targets = row["targets"]
        assert isinstance(targets, list)
        if row["error"] is not None:
            lines.append((str(row["name"]), "-", "-", "-", "-", "", f"ERROR: {row['error']}"))
            continue
        ratio = row["ratio"]
        figures = (
            f"{row['best_s']:.3f}",
            f"{row['median_s']:.3f}",
            "-" if ratio is None else f"{ratio:.2f}",
            f"{row['peak_rss_mib']:.1f}",
        )
        verdicts = [(t["target"], {True: "PASS", False: "FAIL", None: "n/a"}[t["pass"]]) for t in targets] or [
            ("baseline" if row["name"] == BASELINE else "", "")
        ]
        for i, (text, verdict) in enumerate(verdicts):
            # Extra targets of the same bench go on continuation lines.
            left = (str(row["name"]), *figures) if i == 0 else ("",) * 5
            lines.append((*left, text, verdict))
    widths = [max(len(line[c]) for line in lines) for c in range(len(head))]
    right = {1, 2, 3, 4}  # numbers right-aligned
    for line in lines:
        cells = (cell.rjust(w) if c in right else cell.ljust(w) for c, (cell, w) in enumerate(zip(line, widths)))
        print("  ".join(cells).rstrip())


def main(argv: Sequence[str] | None = None) -> int:
    names = [b.name for b in BENCHES]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", nargs="+", action="extend", choices=names, metavar="NAME", help=f"run only these ({', '.join(names)}); {BASELINE} always runs"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=DEFAULT_REPEAT,
        metavar="N",
        help=f"runs per bench, best is reported (default {DEFAULT_REPEAT}; the cold starts always run {COLD_START_RUNS})",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write all figures here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    wanted = set(args.only or names) | {BASELINE}  # every ratio needs the baseline
    wanted |= {b.baseline for b in BENCHES if b.name in wanted}
    benches = [b for b in BENCHES if b.name in wanted]
    keep_bytecode(corpus.data_dir() / "pycache")
    inputs = Inputs()
    results = run(benches, args.repeat, inputs)
    rows = report(benches, results)

    built = inputs.__dict__  # only the inputs a selected bench used (orjson-loop always reads big)
    shapes: list[tuple[str, str, Callable[[], str]]] = [("big", "_big_half", lambda: inputs.big), ("half", "_big_half", lambda: inputs.half)]
    shapes += [("huge", "huge", lambda: inputs.huge), ("long-lines", "long_lines", lambda: inputs.long_lines)]
    shapes += [("schema-valid", "schema_valid", lambda: inputs.schema_valid), ("schema-failing", "schema_failing", lambda: inputs.schema_failing)]
    paths = {name: get() for name, key, get in shapes if key in built}
    sizes = {name: {"path": path, "bytes": os.path.getsize(path)} for name, path in paths.items()}
    meta = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "inputs": sizes,
        "ctxpipe": inputs.__dict__.get("ctxpipe"),  # set only if a bench resolved it
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    print(
        ", ".join(f"{name} {path} ({os.path.getsize(path) / MiB:.1f} MiB)" for name, path in paths.items())
        + f"; best of {args.repeat}; ratios are to {BASELINE} in this run"
        + "".join(f"; {b.name}'s to {b.baseline}" for b in benches if b.baseline != BASELINE)
    )
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    return 1 if any(row["error"] is not None for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
