"""`count --cost` against ccusage, per session, on the same files and the same list prices.

    python bench/ccusage.py [FOLDER ...]     # default: ../shared/corpus

Copies every Claude Code transcript under the folders into a temporary CLAUDE_CONFIG_DIR, runs the
pinned ccusage (npm ccusage@20.0.24, installed once by tests/npm_tools.py) as
`ccusage claude session --json --offline --mode calculate`, and `ctxpipe count --cost --json` on each
file, and prints both costs per session, the difference, and why they differ where they do (then
`count --by day` against `ccusage daily`, days in UTC, which must agree to the cent):
- a call whose prompt is over 200K tokens: Anthropic bills the whole request at the long-context
  rate; ccusage 20 bills only each part's tokens above 200K at it, and the output at the base rate;
- a response written in two files (a resumed or forked session copies lines): ccusage counts it once,
  in the first file it reads; ctxpipe counts each file's calls (a file is a session);
- a model without a list price: ctxpipe gives no total (give one with --prices), ccusage counts 0.
Exit status 1 when a session differs by more than 1 % with no such explanation.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent / "tests")]

import pytest  # noqa: E402  (npm_tools skips the way pytest does when node or npm is missing)
from ccusage import VERSION, report, session_costs  # noqa: E402  (tests/ is put on the path just above)

TOLERANCE = 0.01


def ctxpipe_cost(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "ctxpipe", "count", "--cost", "--json", str(path)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.splitlines()[0])["cost"]


def response_ids(path: Path) -> set[str]:
    found = set()
    for raw in path.read_bytes().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        message = line.get("message") if isinstance(line, dict) else None
        if isinstance(message, dict) and line.get("type") == "assistant" and isinstance(message.get("usage"), dict) and isinstance(message.get("id"), str):
            found.add(message["id"])
    return found


def main(argv: list[str]) -> int:
    folders = [Path(arg) for arg in argv] or [BENCH.parent.parent / "shared" / "corpus"]
    files = [path for folder in folders for path in sorted(folder.rglob("*.jsonl")) if "codex" not in path.name]
    with tempfile.TemporaryDirectory() as scratch:
        projects = Path(scratch) / "projects" / "bench"
        projects.mkdir(parents=True)
        copies = {}
        for path in files:
            copy = projects / path.name.rsplit("__", 1)[-1]  # ccusage names a session by its file
            shutil.copy(path, copy)
            copies[copy.stem] = copy
        try:
            theirs = session_costs(Path(scratch))
        except (Exception, pytest.skip.Exception) as exc:  # no node/npm, the install failed, or ccusage did
            print(f"ccusage {VERSION} could not run here: {exc}")
            return 1
        ids = {name: response_ids(copy) for name, copy in copies.items()}
        print(f"{'session':40} {'ccusage':>11} {'ctxpipe':>11} {'diff':>8}  explanation")
        unexplained = 0
        for name, copy in copies.items():
            cost = ctxpipe_cost(copy)
            ours, their = cost["usd"], theirs.get(name)
            why = []
            if cost["long_context_calls"]:
                why.append(f"{cost['long_context_calls']} call(s) over 200K tokens (ccusage bills only the part above 200K at the long-context rate)")
            shared = sum(len(ids[name] & other) for other_name, other in ids.items() if other_name != name)
            if shared:
                why.append(f"{shared} response(s) also in another file (ccusage counts each once, in one file)")
            if cost["unpriced_models"]:
                why.append(f"no list price for {', '.join(cost['unpriced_models'])}")
            if their is None or ours is None:
                diff = "—"
                unexplained += not why
            else:
                share = (ours - their) / their if their else 0.0
                diff = f"{100 * share:+.2f}%"
                unexplained += abs(share) > TOLERANCE and not why
            shown_ours = "—" if ours is None else f"${ours:,.4f}"
            shown_theirs = "—" if their is None else f"${their:,.4f}"
            print(f"{name[:40]:40} {shown_theirs:>11} {shown_ours:>11} {diff:>8}  {'; '.join(why) or 'the same'}")
        print(f"{len(copies)} sessions; {'every one within 1 % or explained' if not unexplained else f'{unexplained} over 1 % unexplained'}")
        unexplained += daily(Path(scratch), projects) if copies else 0
    return 1 if unexplained else 0


def daily(config: Path, projects: Path) -> int:
    """`count --by day` against `ccusage daily` on the same copies, days in UTC: how many days differ by a cent or more."""
    theirs = {row["date"]: row["totalCost"] for row in report(config, "daily", tz="UTC")["daily"]}
    proc = subprocess.run(
        [sys.executable, "-m", "ctxpipe", "count", "--by", "day", "--timezone", "UTC", "--json", str(projects)], capture_output=True, text=True, check=True
    )
    ours = {row["group"]: row["usd"] for row in map(json.loads, proc.stdout.splitlines()) if not row.get("total")}
    print(f"\n{'day (UTC)':12} {'ccusage':>11} {'ctxpipe':>11}")
    differ = 0
    for day in sorted(set(theirs) | set(ours)):
        mine, their = ours.get(day), theirs.get(day)
        differ += mine is None or their is None or round(mine, 2) != round(their, 2)
        print(f"{day:12} {'—' if their is None else f'${their:,.4f}':>11} {'—' if mine is None else f'${mine:,.4f}':>11}")
    print(f"{len(ours)} days; {'every one the same to the cent' if not differ else f'{differ} differ by a cent or more'}")
    return differ


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
