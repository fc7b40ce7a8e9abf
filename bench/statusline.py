"""How long `ctxpipe statusline` takes, as Claude Code runs it after every message.

    python bench/statusline.py [--runs 30] [--mb 50]

A synthetic Claude Code transcript of about 50 MB (bench/synthetic.py's turns, each tool result
padded so the session ends near 150K tokens, as a real one would) is given to `python -m ctxpipe
statusline` as a child process, with Claude Code's JSON on stdin, `--runs` times for each case:
- warm: the savings cache is up to date for the file (the line shows the saving);
- stale: the cache is for another size of the file, so every run starts a background refresh
  (the time is the statusline's own; the refresh runs detached, and its lock keeps it to one);
- no-savings: `--no-savings`.
Baselines in the same run: `python -c pass` (the interpreter's start-up) and `ctxpipe count --json`
on the same file; and the library's `ctxpipe.api.status_line` in this process on the warm cache (the
line's work without the start-up). Prints the median and p90 of each, in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import turns

PAD = "    return self.window.tokens  # keep the budget in view\n"


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


def timed(argv: list[str], stdin: bytes, env: dict[str, str], runs: int, before: object = None) -> list[float]:
    times = []
    for _ in range(runs):
        if callable(before):
            before()
        start = time.perf_counter()
        done = subprocess.run(argv, input=stdin, capture_output=True, env=env)
        times.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"{argv} failed: {done.stderr.decode()}")
    return times


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


def summary(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return f"{name:<34} median {statistics.median(times):7.1f} ms   p90 {p90:7.1f} ms   (n={len(times)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ctxpipe-statusline-"))
    try:
        path = transcript(work / "session.jsonl", args.mb)
        cache = work / "cache"
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        env.pop("NO_COLOR", None)
        payload = json.dumps(
            {
                "hook_event_name": "Status",
                "session_id": "77777777-7777-4777-8777-777777777777",
                "transcript_path": str(path),
                "model": {"id": "claude-sonnet-4-5-20250929", "display_name": "Sonnet 4.5"},
                "context_window": {"context_window_size": 200_000},
            }
        ).encode()
        # What Claude Code runs: the console script beside this interpreter (python -m adds runpy's start-up).
        script = Path(sys.executable).with_name("ctxpipe")
        command = [str(script), "statusline"] if script.exists() else [sys.executable, "-m", "ctxpipe", "statusline"]
        print(f"transcript: {path.stat().st_size / (1 << 20):.1f} MB, {sum(1 for _ in open(path, 'rb')):,} lines")

        # Warm the cache: one run starts the refresh; wait for it.
        subprocess.run(command, input=payload, capture_output=True, env=env)
        entries = cache / "ctxpipe" / "statusline"
        start = time.perf_counter()
        while not list(entries.glob("*.json")) or list(entries.glob("*.lock")):
            time.sleep(0.05)
        print(f"background refresh (microcompact + collapse dry runs): {time.perf_counter() - start:.1f} s")
        line = subprocess.run(command + ["--no-color"], input=payload, capture_output=True, env=env).stdout.decode().strip()
        print(f"line: {line}")
        [entry_file] = entries.glob("*.json")
        warm_entry = entry_file.read_bytes()
        stale_entry = orjson.dumps({**orjson.loads(warm_entry), "size": 1})

        def stale() -> None:
            # An out-of-date entry, and a lock as a running refresh leaves it: each run starts none,
            # as after every message while a refresh is at work. (Without the lock each would spawn one.)
            entry_file.write_bytes(stale_entry)
            lock = entry_file.with_suffix(".lock")
            lock.touch()

        entry_file.write_bytes(warm_entry)
        results = [
            summary("api.status_line in-process (warm)", in_process(orjson.loads(payload), {"XDG_CACHE_HOME": str(cache)}, args.runs)),
            summary("python -c pass", timed([sys.executable, "-c", "pass"], b"", env, args.runs)),
            summary("ctxpipe count --json", timed([sys.executable, "-m", "ctxpipe", "count", "--json", str(path)], b"", env, args.runs)),
            summary("statusline (warm cache)", timed(command, payload, env, args.runs, lambda: entry_file.write_bytes(warm_entry))),
            summary("statusline (stale, refresh running)", timed(command, payload, env, args.runs, stale)),
            summary("statusline --no-savings", timed(command + ["--no-savings"], payload, env, args.runs)),
        ]
        for lock in entries.glob("*.lock"):
            lock.unlink()
        spawned = timed(command, payload, env, 1, lambda: entry_file.write_bytes(stale_entry))
        results.append(f"{'statusline (stale, starts a refresh)':<34} one run {spawned[0]:7.1f} ms")
        print("\n".join(results))
        # Let the refresh that last run started finish before the folder goes.
        while list(entries.glob("*.lock")):
            time.sleep(0.05)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
