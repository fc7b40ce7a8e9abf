"""How long `ctxpipe statusline` takes, as Claude Code runs it after every message.

    python bench/statusline.py [--runs 30] [--mb 50] [--variant NAME=PYTHONPATH ...]

A synthetic Claude Code transcript of about 50 MB (bench/synthetic.py's turns, each tool result
padded so the session ends near 150K tokens, as a real one would) is given to the `ctxpipe` console
script beside this interpreter (what Claude Code runs) as a child process, with Claude Code's JSON on
stdin, `--runs` times for each case:
- unchanged: the transcript is as at the last run, and the saving is known: the line's memo answers
  (one stat of the transcript, one small read). The target: a median at most 3x `python -c pass`;
- memo miss: the same, with the memo removed before each run: the whole line is worked out (count
  of the transcript's end, the model catalog, the thresholds) and memoised, as after every message,
  by the status line's server (cli/statusline_server.py, started by the first miss). The target: a
  median at most 3x `python -c pass` too;
- memo miss, --no-server: the same worked out in the run's own process (the count's imports);
- stale, refresh running: the saving is out of date and a refresh is at work (its lock is there),
  and no memo: what the runs right after a message cost (the refresh runs detached, not timed);
- no-savings (memo hit) and no-savings (memo miss): `--no-savings`.
Baselines in the same run: `python -c pass` (the interpreter's start-up) and `ctxpipe count --json`
on the same file; and the library's `ctxpipe.api.status_line` in this process (the line's work without
the start-up, for this process's ctxpipe). Prints the median, best and p90 of each in ms, the
median's ratio to `python -c pass`'s, and the same for the CPU time (user + system) each run took.

`--variant NAME=PYTHONPATH` (repeatable) runs every case under each PYTHONPATH, interleaved round by
round (an empty one is the installed ctxpipe), e.g. the code before and after a change:
`--variant old= --variant new=/tmp/pp`. With PYTHONDONTWRITEBYTECODE set, the runs keep their
bytecode under the bench's data folder (bench/bytecode.py), as an installed ctxpipe has its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from ctxpipe.core.statusline import SERVER_PREFIX

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bytecode import keep_bytecode
from corpus import data_dir
from synthetic import turns

PAD = "    return self.window.tokens  # keep the budget in view\n"
TARGET = 3.0  # the unchanged case's median, in `python -c pass` medians


def transcript(path: Path, megabytes: int) -> Path:
    """~`megabytes` MB: 300 turns, each tool result padded to fill its share."""
    count = 300
    share = megabytes * (1 << 20) // count
    with open(path, "wb") as out:
        for raw in turns(count):
            obj = orjson.loads(raw)
            content = obj.get("message", {}).get("content")
            if obj["type"] == "user" and isinstance(content, list) and content and content[0].get("type") == "tool_result":
                content[0]["content"] += "\n" + PAD * (share // len(PAD))
                raw = orjson.dumps(obj) + b"\n"
            out.write(raw)
    return path


def refreshing(entries: Path) -> bool:
    """Whether a background refresh is at work (its lock; not the lock of a server starting)."""
    return any(not lock.name.startswith(SERVER_PREFIX) for lock in entries.glob("*.lock"))


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_once(argv: list[str], stdin: bytes, env: dict[str, str], before: Callable[[], None] | None = None) -> tuple[float, float, bytes]:
    """Wall-clock ms, CPU ms (user + system: what a shared machine's load changes least) and stdout of one run."""
    if before is not None:
        before()
    cpu = _cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr.decode()}")
    return elapsed, (_cpu() - cpu) * 1000, done.stdout


def in_process(status: dict[str, object], environ: dict[str, str], runs: int) -> list[float]:
    """The library's status line, called `runs` times in this process (after one call that loads what it needs)."""
    from ctxpipe.api import StatusOptions, status_line

    status_line(status, StatusOptions(), environ)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        status_line(status, StatusOptions(), environ)
        times.append((time.perf_counter() - start) * 1000)
    return times


def summary(name: str, times: list[float], base: float | None, cpu: list[float] | None = None, cpu_base: float | None = None) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    median = statistics.median(times)
    ratio = f"  {median / base:5.2f}x" if base else ""
    used = f"   cpu median {statistics.median(cpu):7.1f} ms  {statistics.median(cpu) / cpu_base:5.2f}x" if cpu and cpu_base else ""
    return f"{name:<46} median {median:7.1f} ms   best {ordered[0]:7.1f} ms   p90 {p90:7.1f} ms{ratio}{used}   (n={len(times)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=PYTHONPATH", help="run every case with this PYTHONPATH too (repeatable)")
    args = parser.parse_args()
    variants = dict(item.partition("=")[::2] for item in args.variant) or {"ctxpipe": os.environ.get("PYTHONPATH", "")}
    keep_bytecode(data_dir() / "pycache")
    work = Path(tempfile.mkdtemp(prefix="ctxpipe-statusline-"))
    try:
        path = transcript(work / "session.jsonl", args.mb)
        cache = work / "cache"
        base_env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        base_env.pop("NO_COLOR", None)
        envs = {name: {**base_env, "PYTHONPATH": pythonpath} for name, pythonpath in variants.items()}
        for env in envs.values():
            if not env["PYTHONPATH"]:
                del env["PYTHONPATH"]
        payload = json.dumps(
            {
                "hook_event_name": "Status",
                "session_id": "77777777-7777-4777-8777-777777777777",
                "transcript_path": str(path),
                "model": {"id": "claude-sonnet-4-5-20250929", "display_name": "Sonnet 4.5"},
                "context_window": {"context_window_size": 200_000},
                "cost": {"total_cost_usd": 0.42, "total_duration_ms": 123_456},  # changes on every run in Claude Code: not a key
            }
        ).encode()
        # What Claude Code runs: the console script beside this interpreter (python -m adds runpy's start-up).
        script = Path(sys.executable).with_name("ctxpipe")
        command = [str(script), "statusline"] if script.exists() else [sys.executable, "-m", "ctxpipe", "statusline"]
        print(f"transcript: {path.stat().st_size / (1 << 20):.1f} MB, {sum(1 for _ in open(path, 'rb')):,} lines; variants: {variants}")

        # Warm the saving: one run starts the refresh; wait for it.
        first_env = next(iter(envs.values()))
        subprocess.run(command, input=payload, capture_output=True, env=first_env)
        entries = cache / "ctxpipe" / "statusline"
        start = time.perf_counter()
        while not list(entries.glob("*.json")) or refreshing(entries):
            time.sleep(0.05)
        print(f"background refresh (microcompact + collapse dry runs): {time.perf_counter() - start:.1f} s")
        [entry_file] = entries.glob("*.json")
        warm_entry = entry_file.read_bytes()
        stale_entry = orjson.dumps({**orjson.loads(warm_entry), "size": 1})
        lock = entry_file.with_suffix(".lock")

        def forget() -> None:
            for memo in entries.glob("*.line"):
                memo.unlink()

        def warm() -> None:
            entry_file.write_bytes(warm_entry)
            lock.unlink(missing_ok=True)

        def stale() -> None:
            # An out-of-date entry, and a lock as a running refresh leaves it: each run starts none,
            # as after every message while a refresh is at work. (Without the lock each would spawn one.)
            forget()
            entry_file.write_bytes(stale_entry)
            lock.touch()

        def miss() -> None:
            warm()
            forget()

        # argv, stdin, what to do before each run, whether per variant. In this order: a memo hit case
        # runs right after its miss case, which leaves the memo for its key (one memo per transcript).
        cases: dict[str, tuple[list[str], bytes, Callable[[], None] | None, bool]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], b"", None, False),
            "ctxpipe count --json": ([sys.executable, "-m", "ctxpipe", "count", "--json", str(path)], b"", None, True),
            "statusline (memo miss, saving known)": (command, payload, miss, True),
            "statusline --no-server (memo miss)": ([*command, "--no-server"], payload, miss, True),
            "statusline (unchanged: memo hit)": (command, payload, warm, True),
            "statusline (stale, refresh running)": (command, payload, stale, True),
            "statusline --no-savings (memo miss)": ([*command, "--no-savings"], payload, miss, True),
            "statusline --no-savings (memo hit)": ([*command, "--no-savings"], payload, warm, True),
        }
        runs = [(case, name) for case, (_, _, _, each) in cases.items() for name in (envs if each else [next(iter(envs))])]
        times: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
        cpu: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
        lines: dict[tuple[str, str], set[bytes]] = {run: set() for run in runs}
        for round_number in range(args.runs + 1):  # round 0 warms up (bytecode caches, the memo)
            for case, name in runs:
                argv, stdin, before, _ = cases[case]
                elapsed, used, out = timed_once(argv, stdin, envs[name], before)
                if round_number:
                    times[(case, name)].append(elapsed)
                    cpu[(case, name)].append(used)
                    lines[(case, name)].add(out)
        warm()
        base = statistics.median(times[("python -c pass", next(iter(envs)))])
        cpu_base = statistics.median(cpu[("python -c pass", next(iter(envs)))])
        results = [summary("api.status_line in-process (warm)", in_process(orjson.loads(payload), {"XDG_CACHE_HOME": str(cache)}, args.runs), None)]
        for case, name in runs:
            label = case if len(envs) == 1 or not cases[case][3] else f"{case} [{name}]"
            results.append(summary(label, times[(case, name)], base, cpu[(case, name)], cpu_base))
        print("ratios: a median over python -c pass's median (wall clock, then CPU time)")
        print("\n".join(results))
        for name in envs:
            for case, what in (("statusline (unchanged: memo hit)", "unchanged"), ("statusline (memo miss, saving known)", "after a message (memo miss)")):
                ratio = statistics.median(times[(case, name)]) / base
                print(f"target [{name}]: {what} statusline {ratio:.2f}x python -c pass (at most {TARGET:g}x): {'PASS' if ratio <= TARGET else 'FAIL'}")
        for name in envs:
            said = lines[("statusline (unchanged: memo hit)", name)] | lines[("statusline (memo miss, saving known)", name)]
            print(f"line [{name}]: {' | '.join(sorted(out.decode().strip() for out in said))}")
        lock.unlink(missing_ok=True)
        # Let any refresh a run started finish before the folder goes (the server ends with its socket).
        while refreshing(entries):
            time.sleep(0.05)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
