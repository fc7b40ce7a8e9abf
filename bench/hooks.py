"""How long ctxpipe's hooks keep Claude Code waiting, against the interpreter's own start-up.

    python bench/hooks.py [--runs 15] [--mb 10]

A synthetic Claude Code transcript of about `--mb` MB (bench/statusline.py's) is the session; each
hook runs as Claude Code runs it, `python -m ctxpipe hook NAME` in a child process with the hook's
JSON on stdin, `--runs` times: pre-compact (reads the whole session and gathers its facts),
post-compact (checks a summary against them), prompt with nothing pending (what every prompt pays),
and session-start on a resume with nothing pending. The baseline in the same run is `python -c pass`.
Prints the median of each in ms and its ratio to the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bytecode import keep_bytecode
from corpus import data_dir
from statusline import transcript


def timed(argv: list[str], stdin: bytes, env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, input=stdin, capture_output=True, env=env)
        times.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0 or done.stderr:
            raise SystemExit(f"{argv}: exit {done.returncode}: {done.stderr.decode(errors='replace')}")
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--mb", type=int, default=10)
    args = parser.parse_args()
    keep_bytecode(data_dir() / "pycache")
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        session = transcript(home / "session.jsonl", args.mb)
        env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": ""}
        hook = [sys.executable, "-m", "ctxpipe", "hook"]
        base = {"session_id": "bench", "transcript_path": str(session), "cwd": str(home)}
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], b""),
            "hook pre-compact": ([*hook, "pre-compact"], json.dumps({**base, "trigger": "auto"}).encode()),
            "hook post-compact": ([*hook, "post-compact"], json.dumps({**base, "trigger": "auto", "compact_summary": "The session so far."}).encode()),
            "hook prompt (nothing pending)": ([*hook, "prompt"], json.dumps({**base, "prompt": "next"}).encode()),
            "hook session-start (resume)": ([*hook, "session-start"], json.dumps({**base, "source": "resume"}).encode()),
        }
        subprocess.run(cases["hook pre-compact"][0], input=cases["hook pre-compact"][1], env=env, capture_output=True, check=True)  # warm the caches
        medians = {name: timed(argv, stdin, env, args.runs) for name, (argv, stdin) in cases.items()}
    baseline = medians["python -c pass"]
    print(f"session: {args.mb} MB, {args.runs} runs each")
    for name, median in medians.items():
        print(f"{name:32} {median:8.1f} ms  {median / baseline:5.1f}x python -c pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
