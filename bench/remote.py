"""Sessions in S3 on a Dask cluster vs --jobs on local disk (issue 14).

    python bench/remote.py [--sessions 2000] [--size-kb 320] [--runs 3] [--json bench/results/remote.json]

A tree of `--sessions` Claude Code sessions in the three layouts (main `<cwd>/<id>.jsonl`, 2.0.x
`<cwd>/agent-<id>.jsonl`, 2.1.x `<cwd>/<id>/subagents/agent-<id>.jsonl`) is generated with
tests/project_sessions.py bulky() and cached under ~/.cache/ctxpipe-bench. Sizes: main sessions
log-uniform in [size/3.2, size×3.2] (100 KB–1 MB at the default 320 KB), 1.5% of them 5–10 MB
(scaled the same way); subagent files log-uniform in [size/10, size]. About 0.9 GB at the defaults.

The tree is uploaded to a real moto S3 server behind tests/cloud.py's byte-counting proxy, and a
real 2-worker Dask cluster (separate `dask scheduler` / `dask worker` processes, one thread each)
gets the server's environment. Then, in interleaved rounds (`--runs`, median reported):

    count-local      count --json LOCAL --jobs 2                               (the baseline)
    count-s3-dask    count --json s3://bkt/projects/ --executor dask --scheduler ADDR
    count-s3-jobs    count --json s3://bkt/projects/ --jobs 2   (remote files, local executor)
    compact-local    compact --json --engine offline --now T --out-dir DIR LOCAL --jobs 2
    compact-s3-dask  the same, s3:// in and --out-dir s3://bkt/out/<run>/, on the cluster
    big-…            count-local, count-s3-dask, compact-local, compact-s3-dask again on the
                     5–10 MB sessions alone (named one by one): per-file figures at the paper's size

Checked on the way: count gives the same tokens per session in every run, and compact writes the
same number of bytes to S3 from the cluster as to local disk.

Every figure is measured in this run on this machine: ratios are against the local runs. Bytes
are the proxy's (HTTP headers included); requests are counted from the moto server's own request
log (werkzeug writes one line per request: method, path, status), read between a run's start and
end, so GETs of objects, LISTs, HEADs and PUTs are told apart. Per-file times are the compute
time of each Dask task (from the scheduler's task stream: one task is one file, its ranged reads
and writes included). The moto server, the proxy and the cluster all share this machine's cores,
so the remote runs also pay for the store's CPU; a real S3 costs no CPU here but answers from
further away (AWS's guidance: 100–200 ms first-byte latency), so the paper adds that per request.

Last, "on paper": what a 1M-session, 5 TB bucket costs on a 64-worker cluster, computed from the
measured per-file times and bytes (assumptions printed with it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))
from cloud import DaskCluster, S3Server, dask_cluster, s3_server  # noqa: E402  (tests/ is not a package)
from project_sessions import NOW_ISO, bulky  # noqa: E402

MB = 1_000_000  # decimal, as stores bill and as "5 TB" is meant
CACHE = Path(os.environ.get("CTXPIPE_BENCH_CACHE") or Path.home() / ".cache" / "ctxpipe-bench")
TREE_VERSION = 1  # bump when the generator changes, so a cached tree is rebuilt
NAMESPACE = uuid.UUID("0b5e7a3c-41d2-4c8e-9f60-2d3c4b5a6e71")
BUCKET = "bkt"
WORKERS = 2

# On paper: the bucket, the cluster and the prices (S3 Standard, us-east-1).
PAPER_SESSIONS = 1_000_000
PAPER_BYTES = 5 * 10**12
PAPER_WORKERS = 64
GET_PRICE = 0.0004 / 1000  # $ per GET (and HEAD)
PUT_PRICE = 0.005 / 1000  # $ per PUT (and LIST)
LATENCY = 0.1  # s per request, the low end of AWS's 100-200 ms first-byte guidance (moto's is in the measured times)


# -- the tree --------------------------------------------------------------------------------------


def plan(sessions: int, size_kb: int, seed: int = 14) -> list[tuple[str, str, int, int]]:
    """(relative path, kind, number, target bytes) of every file of the tree, deterministic."""
    rng = random.Random(seed)
    size = size_kb * 1000
    projects = [f"-home-dev-work-project-{n:02d}" for n in range(max(1, sessions // 50))]
    mains: list[str] = []
    out: list[tuple[str, str, int, int]] = []
    for number in range(sessions):
        project = rng.choice(projects)
        roll = rng.random()
        if roll < 0.10 and mains:  # 2.1.x: beside a main session of the same project, in its folder
            parent = rng.choice([m for m in mains if m.startswith(project + "/")] or mains)
            agent = uuid.uuid5(NAMESPACE, f"agent-{number}").hex[:17]
            rel = f"{parent.removesuffix('.jsonl')}/subagents/agent-a{agent}.jsonl"
            out.append((rel, "subagent", number, int(math.exp(rng.uniform(math.log(size / 10), math.log(size))))))
        elif roll < 0.15:  # 2.0.x: agent-<8 hex>.jsonl in the project folder
            rel = f"{project}/agent-{uuid.uuid5(NAMESPACE, f'agent-{number}').hex[:8]}.jsonl"
            out.append((rel, "subagent", number, int(math.exp(rng.uniform(math.log(size / 10), math.log(size))))))
        else:
            rel = f"{project}/{uuid.uuid5(NAMESPACE, f'session-{number}')}.jsonl"
            mains.append(rel)
            big = rng.random() < 0.015
            target = rng.uniform(5 * MB, 10 * MB) * size_kb / 320 if big else math.exp(rng.uniform(math.log(size / 3.2), math.log(size * 3.2)))
            out.append((rel, "main", number, int(target)))
    return out


def _write(root: str, rel: str, kind: str, number: int, target: int) -> int:
    """One file of the tree: bulky() at the target size; a subagent's lines marked as Claude Code
    marks them (isSidechain, agentId)."""
    cwd = "/home/dev/work/" + rel.split("/")[0].removeprefix("-home-dev-work-")
    data = bulky(cwd, number, target)
    if kind == "subagent":
        agent = Path(rel).stem.removeprefix("agent-")
        data = b"".join(orjson.dumps(orjson.loads(line) | {"isSidechain": True, "agentId": agent}) + b"\n" for line in data.splitlines())
    path = Path(root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return len(data)


def ensure_tree(sessions: int, size_kb: int) -> Path:
    """The tree for these settings, generated once (in parallel) and reused while every file is there."""
    folder = CACHE / f"remote-v{TREE_VERSION}-{sessions}-{size_kb}kb"
    manifest = folder / "manifest.json"
    root = folder / "projects"
    files = plan(sessions, size_kb)
    if manifest.exists():
        sizes = orjson.loads(manifest.read_bytes())
        if len(sizes) == len(files) and all((root / rel).is_file() and (root / rel).stat().st_size == n for rel, n in sizes.items()):
            return root
    shutil.rmtree(folder, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"generating {len(files):,} sessions under {root} (once; cached) ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    # Largest first, so the slow ones do not trail at the end.
    order = sorted(files, key=lambda f: -f[3])
    with ProcessPoolExecutor(os.cpu_count() or 2) as pool:
        written = list(pool.map(_write, [str(root)] * len(order), *zip(*order, strict=True), chunksize=8))
    manifest.write_bytes(orjson.dumps({f[0]: n for f, n in zip(order, written, strict=True)}))
    print(f"  {sum(written) / MB:,.0f} MB in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return root


# -- measuring -------------------------------------------------------------------------------------

_REQUEST = re.compile(rb'"(?:\x1b\[[0-9;]*m)*(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/[0-9.]+(?:\x1b\[[0-9;]*m)*" (\d{3})')


class RequestLog:
    """The moto server's request log (its stdout, which tests/cloud.py sends to a file): the
    requests it answered since `mark()`, by kind. Found through /proc/<pid>/fd/1 (Linux)."""

    def __init__(self, pid: int) -> None:
        self.path = Path(os.readlink(f"/proc/{pid}/fd/1"))
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size

    def since_mark(self) -> Counter[str]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            text = f.read()
        kinds: Counter[str] = Counter()
        for method, target, status in _REQUEST.findall(text):
            if target.startswith(b"/moto-api"):
                continue
            path, _, query = target.partition(b"?")
            bucket_level = path.count(b"/") == 1  # /bkt (a listing) vs /bkt/key (an object)
            if method == b"GET":
                kind = "LIST" if bucket_level or b"list-type" in query else "GET"
            else:
                kind = method.decode()
            kinds[kind] += 1
            if not status.startswith((b"2", b"3")):
                kinds[f"{kind} {status.decode()}"] += 1
        return kinds


def task_times(cluster: DaskCluster, since: float) -> list[float]:
    """The compute seconds of every task the cluster finished after `since` (time.time())."""
    stream = cluster.client.get_task_stream(start=since)
    return [
        sum(part["stop"] - part["start"] for part in task["startstops"] if part["action"] == "compute")
        for task in stream
        if task.get("status") == "OK" and str(task.get("key", "")).startswith(("('_task", "_task"))
    ]


def identical(s3: S3Server, local_out: Path, url_out: str, written: dict[str, int], local_in: str, url_in: str) -> dict[str, int]:
    """How many of compact's outputs in the store are byte-identical to those written to local
    disk. A summarized session's cannot be: its summary names where the full transcript is (the
    local path or the URL), and the token figures written after it count that text. Those are
    told apart: they differ, and the local one names the local input (the store's the URL)."""
    local = {p.relative_to(local_out).as_posix(): p for p in local_out.rglob("*") if p.is_file()}

    def one(rel: str) -> str:
        mine, theirs = local[rel].read_bytes(), s3.get(url_out + rel)
        if mine == theirs:
            return "same"
        if local_in.encode() in mine and url_in.encode() in theirs and len(mine.splitlines()) == len(theirs.splitlines()):
            return "differ: a summary names the input's location"
        return "different"

    with ThreadPoolExecutor(8) as pool:
        verdicts = Counter(pool.map(one, sorted(local)))
    verdicts["only on one side"] = len(set(local) ^ set(written))
    return dict(verdicts)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def count_tokens(stdout: bytes) -> dict[str, Any]:
    """{session file relative to its tree: tokens} from count --json, to compare runs."""
    out: dict[str, Any] = {}
    for line in stdout.splitlines():
        row = orjson.loads(line)
        if row.get("total") or "file" not in row:
            continue
        name = str(row["file"])
        rel = name.split("/projects/", 1)[-1]
        out[rel] = row.get("tokens", row.get("context_tokens"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000, help="session files in the tree (default 2000)")
    parser.add_argument("--size-kb", type=int, default=320, help="median size of a main session in KB (default 320: most 100 KB-1 MB, ~0.9 GB in all)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command (median reported)")
    parser.add_argument("--json", default=str(BENCH_DIR / "results" / "remote.json"), help="where to write every figure")
    args = parser.parse_args()

    ctxpipe = str(Path(sys.executable).parent / "ctxpipe")
    tree = ensure_tree(args.sessions, args.size_kb)
    local_sizes = {p.relative_to(tree).as_posix(): p.stat().st_size for p in tree.rglob("*.jsonl")}
    files, total = len(local_sizes), sum(local_sizes.values())
    print(f"tree: {files:,} files, {total / MB:,.0f} MB ({tree})", flush=True)

    with contextlib.ExitStack() as stack:
        s3: S3Server = stack.enter_context(s3_server(counting=True))
        s3.make_bucket(BUCKET)
        started = time.perf_counter()
        listing = s3.upload_tree(tree, f"s3://{BUCKET}/projects/")
        print(f"uploaded to moto in {time.perf_counter() - started:.0f} s", flush=True)
        assert sum(listing.values()) == total and len(listing) == files
        cluster: DaskCluster = stack.enter_context(dask_cluster(workers=WORKERS, env=s3.env))
        cluster.client.get_task_stream()  # the first call starts the scheduler's task-stream recording
        log = RequestLog(s3.pid)
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxpipe-remote-bench-")))
        env = s3.child_env() | {"NO_COLOR": "1"}
        env.pop("ANTHROPIC_API_KEY", None)
        env.pop("DASK_SCHEDULER_ADDRESS", None)
        prefix = f"s3://{BUCKET}/projects/"
        dask = ["--executor", "dask", "--scheduler", cluster.address]
        compact = ["compact", "--json", "--engine", "offline", "--now", NOW_ISO]
        # The 5-10 MB sessions (at the default --size-kb) alone, named one by one: per-file figures at the paper's size.
        big = sorted(rel for rel, n in local_sizes.items() if n >= 5 * MB * args.size_kb / 320)
        if not big:
            print(f"no session of {5 * args.size_kb / 320:.1f} MB or more in the tree: give more --sessions", file=sys.stderr)
            return 2
        big_local, big_urls = [str(tree / rel) for rel in big], [prefix + rel for rel in big]
        commands = {
            "count-local": lambda run: [ctxpipe, "count", "--json", "--no-cache", str(tree), "--jobs", "2"],
            "count-s3-dask": lambda run: [ctxpipe, "count", "--json", prefix, *dask],
            "count-s3-jobs": lambda run: [ctxpipe, "count", "--json", prefix, "--jobs", "2"],
            "compact-local": lambda run: [ctxpipe, *compact, "--out-dir", str(work / f"out-{run}"), str(tree), "--jobs", "2"],
            "compact-s3-dask": lambda run: [ctxpipe, *compact, "--out-dir", f"s3://{BUCKET}/out/{run}/", prefix, *dask],
            "big-count-local": lambda run: [ctxpipe, "count", "--json", "--no-cache", *big_local, "--jobs", "2"],
            "big-count-s3-dask": lambda run: [ctxpipe, "count", "--json", *big_urls, *dask],
            "big-compact-local": lambda run: [ctxpipe, *compact, "--out-dir", str(work / f"out-big-{run}"), *big_local, "--jobs", "2"],
            "big-compact-s3-dask": lambda run: [ctxpipe, *compact, "--out-dir", f"s3://{BUCKET}/out-big/{run}/", *big_urls, *dask],
        }
        inputs = {name: (len(big), sum(local_sizes[rel] for rel in big)) if name.startswith("big-") else (files, total) for name in commands}
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in commands}
        tokens: dict[str, dict[str, Any]] = {}
        for run in range(args.runs):
            for name, argv in commands.items():
                s3.reset()
                log.mark()
                since = time.time()
                started = time.perf_counter()
                done = subprocess.run(argv(run), env=env, capture_output=True, check=False)
                seconds = time.perf_counter() - started
                if done.returncode != 0:
                    print(f"{name}: exit {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}", file=sys.stderr)
                    return 1
                time.sleep(0.5)  # the last requests' log lines
                record: dict[str, Any] = {
                    "seconds": seconds,
                    "fetched": s3.bytes_fetched,
                    "sent": s3.bytes_sent,
                    "requests": dict(log.since_mark()),
                    "rows": len(done.stdout.splitlines()),
                }
                if name.endswith("-dask"):
                    record["task_seconds"] = task_times(cluster, since)
                if "count-" in name and run == 0:
                    tokens[name] = count_tokens(done.stdout)
                if name.endswith("compact-local"):
                    out = work / f"out-big-{run}" if name.startswith("big-") else work / f"out-{run}"
                    record["written"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
                if name.endswith("compact-s3-dask"):
                    out = work / f"out-big-{run}" if name.startswith("big-") else work / f"out-{run}"
                    written = s3.listing(f"s3://{BUCKET}/{'out-big' if name.startswith('big-') else 'out'}/{run}/", relative=True)
                    record["written"] = sum(written.values())
                    record["outputs"] = len(written)
                    if run == 0:
                        where = (str(tree) + "/", prefix) if name.startswith("big-") else (str(tree), prefix.rstrip("/"))
                        record["identical"] = identical(s3, out, f"s3://{BUCKET}/{'out-big' if name.startswith('big-') else 'out'}/{run}/", written, *where)
                    shutil.rmtree(out)
                    written = {f"s3://{BUCKET}/{'out-big' if name.startswith('big-') else 'out'}/{run}/{rel}": n for rel, n in written.items()}
                    for url in written:  # moto keeps objects in memory
                        s3.client.delete_object(Bucket=BUCKET, Key=url.removeprefix(f"s3://{BUCKET}/"))
                results[name].append(record)
                print(f"  run {run + 1}/{args.runs} {name:<20} {seconds:7.2f} s  fetched {record['fetched'] / MB:8.1f} MB  {record['requests']}", flush=True)
    report = summarize(results, tokens, inputs, args)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nwritten: {args.json}")
    return 0


# -- the report ------------------------------------------------------------------------------------


def baseline(name: str) -> str:
    """The local run a remote run is compared with: count-s3-dask -> count-local."""
    return name if name.endswith("-local") else name.split("-s3-")[0] + "-local"


def summarize(
    results: dict[str, list[dict[str, Any]]], tokens: dict[str, dict[str, Any]], inputs: dict[str, tuple[int, int]], args: argparse.Namespace
) -> dict[str, Any]:
    med = {name: statistics.median(r["seconds"] for r in runs) for name, runs in results.items()}
    last = {name: runs[-1] for name, runs in results.items()}  # bytes and requests are the same every run
    files, total = inputs["count-local"]
    same = tokens["count-local"] == tokens["count-s3-dask"] == tokens["count-s3-jobs"] and len(tokens["count-local"]) == files
    same_big = tokens["big-count-local"] == tokens["big-count-s3-dask"] and len(tokens["big-count-local"]) == inputs["big-count-local"][0]
    same_written = {name: results[name][0]["identical"] for name in ("compact-s3-dask", "big-compact-s3-dask")}

    print(
        f"\n{files:,} session files, {total / MB:,.0f} MB ('big-': the {inputs['big-count-local'][0]} of them of 5 MB and more); {WORKERS} workers; median of {args.runs} runs"
    )
    print(f"{'run':<20}{'files':>6}{'MB':>6}{'median s':>9}{'x local':>8}{'fetched MB':>11}{'% of objects':>13}{'GET':>6}{'HEAD':>6}{'LIST':>6}{'PUT':>6}")
    for name in results:
        n, size = inputs[name]
        line = f"{name:<20}{n:>6}{size / MB:>6.0f}{med[name]:>9.2f}{med[name] / med[baseline(name)]:>8.2f}"
        if "-s3-" in name:
            req, fetched = last[name]["requests"], last[name]["fetched"]
            line += f"{fetched / MB:>11.1f}{100 * fetched / size:>12.1f}%" + "".join(f"{req.get(kind, 0):>6}" for kind in ("GET", "HEAD", "LIST", "PUT"))
        print(line)
    print(f"count: the same tokens per session on local disk, S3 + Dask and S3 + --jobs: {'yes' if same and same_big else 'NO'}")
    for name, verdicts in same_written.items():
        print(f"{name}: outputs against {baseline(name)}'s, byte for byte: {verdicts}")

    per_file: dict[str, Any] = {}
    for name in ("count-s3-dask", "compact-s3-dask", "big-count-s3-dask", "big-compact-s3-dask"):
        n, size = inputs[name]
        times = [t for r in results[name] for t in r["task_seconds"]]
        runs = len(results[name])
        req = last[name]["requests"]
        per_file[name] = {
            "tasks_per_run": len(times) / runs,
            "median_s": statistics.median(times),
            "p90_s": percentile(times, 0.9),
            "mean_s": statistics.fmean(times),
            "wall_x_workers_per_file_s": med[name] * WORKERS / n,
            "task_s_per_MB": sum(times) / runs / (size / MB),
            "fetched_MB_per_file": last[name]["fetched"] / MB / n,
            "fetched_fraction": last[name]["fetched"] / size,
            "written_fraction": last[name].get("written", 0) / size,
            "requests_per_file": {kind: req.get(kind, 0) / n for kind in ("GET", "HEAD", "LIST", "PUT", "POST")},
        }
        p = per_file[name]
        print(
            f"{name}: per file median {p['median_s'] * 1000:.0f} ms, p90 {p['p90_s'] * 1000:.0f} ms, mean {p['mean_s'] * 1000:.0f} ms"
            f" (wall x workers / files {p['wall_x_workers_per_file_s'] * 1000:.0f} ms), {p['task_s_per_MB'] * 1000:.0f} ms per MB of session;"
            f" fetched {p['fetched_MB_per_file']:.3f} MB ({100 * p['fetched_fraction']:.1f}%) and {p['requests_per_file']['GET']:.2f} GETs per file"
        )
    return {
        "sessions": files,
        "bytes": total,
        "big_sessions": inputs["big-count-local"][0],
        "big_bytes": inputs["big-count-local"][1],
        "workers": WORKERS,
        "runs": args.runs,
        "size_kb": args.size_kb,
        "median_seconds": med,
        "ratio_to_local": {name: med[name] / med[baseline(name)] for name in med},
        "count_same_tokens": same and same_big,
        "compact_outputs_identical": same_written,
        "count_fetched_fraction": per_file["count-s3-dask"]["fetched_fraction"],
        "per_file": per_file,
        "on_paper": on_paper(per_file),
        "runs_raw": results,
    }


def on_paper(per_file: dict[str, Any]) -> dict[str, Any]:
    """1M sessions, 5 TB, 64 workers: per-file time, bytes and GETs from the 5-10 MB sessions
    measured alone, scaled to 5 MB; the other requests per file and the cluster's overhead per
    task (wall x workers / files - mean task time) from the whole tree."""
    avg_mb = PAPER_BYTES / PAPER_SESSIONS / MB
    paper: dict[str, Any] = {
        "assumptions": {
            "sessions": PAPER_SESSIONS,
            "bytes": PAPER_BYTES,
            "average_session_MB": avg_mb,
            "workers": PAPER_WORKERS,
            "worker": "1 core, 1 thread, as the measured workers",
            "per_file_time": "scales with size: task seconds per MB measured on the 5-10 MB sessions x 5 MB; "
            "low = tasks' compute time only, high = plus the per-task overhead measured on the whole tree",
            "bytes_moved": "the fraction of the bytes fetched (and written) on the 5-10 MB sessions",
            "requests": "GETs per file as measured on the 5-10 MB sessions (7.5 MB on average: an upper bound for 5 MB); "
            "HEAD/LIST/PUT per file as on the whole tree; at least one LIST per 1,000 keys",
            "latency": f"hours_with_latency: high plus {LATENCY * 1000:.0f} ms per request, the requests of a task one after another",
            "prices": "S3 Standard: GET/HEAD $0.0004 per 1,000, PUT/LIST/POST $0.005 per 1,000, in-region transfer $0",
        }
    }
    for command in ("count", "compact"):
        tree, big = per_file[f"{command}-s3-dask"], per_file[f"big-{command}-s3-dask"]
        per_task = big["task_s_per_MB"] * avg_mb
        overhead = max(0.0, tree["wall_x_workers_per_file_s"] - tree["mean_s"])
        n = {kind: tree["requests_per_file"][kind] * PAPER_SESSIONS for kind in ("HEAD", "LIST", "PUT", "POST")}
        n["GET"] = big["requests_per_file"]["GET"] * PAPER_SESSIONS
        n["LIST"] = max(n["LIST"], PAPER_SESSIONS / 1000)
        paper[command] = {
            "seconds_per_file": per_task,
            "overhead_per_file": overhead,
            "hours_low": per_task * PAPER_SESSIONS / PAPER_WORKERS / 3600,
            "hours_high": (per_task + overhead) * PAPER_SESSIONS / PAPER_WORKERS / 3600,
            "hours_with_latency": (per_task + overhead) * PAPER_SESSIONS / PAPER_WORKERS / 3600 + sum(n.values()) * LATENCY / PAPER_WORKERS / 3600,
            "TB_fetched": big["fetched_fraction"] * PAPER_BYTES / 1e12,
            "TB_written": big["written_fraction"] * PAPER_BYTES / 1e12,
            "requests": n,
            "dollars": (n["GET"] + n["HEAD"]) * GET_PRICE + (n["PUT"] + n["LIST"] + n["POST"]) * PUT_PRICE,
        }
    count, compact = paper["count"], paper["compact"]
    print(
        f"\nOn paper: {PAPER_SESSIONS:,} sessions, {PAPER_BYTES / 1e12:.0f} TB ({avg_mb:.0f} MB each), {PAPER_WORKERS} workers of 1 core."
        f" Per 5 MB file (from the 5-10 MB sessions, scaled by size): count {count['seconds_per_file'] * 1000:.0f} ms,"
        f" compact {compact['seconds_per_file'] * 1000:.0f} ms; cluster overhead per task measured here: count {count['overhead_per_file'] * 1000:.0f} ms,"
        f" compact {compact['overhead_per_file'] * 1000:.0f} ms.\n"
        f"  count:   {count['hours_low']:.1f}-{count['hours_high']:.1f} h ({count['hours_with_latency']:.1f} h at {LATENCY * 1000:.0f} ms per request),"
        f" {count['TB_fetched']:.2f} TB fetched,"
        f" {count['requests']['GET'] / 1e6:.1f} M GETs + {count['requests']['HEAD'] / 1e6:.1f} M HEADs + {count['requests']['LIST']:,.0f} LISTs"
        f" = ${count['dollars']:,.2f}\n"
        f"  compact: {compact['hours_low']:.1f}-{compact['hours_high']:.1f} h ({compact['hours_with_latency']:.1f} h at {LATENCY * 1000:.0f} ms per request),"
        f" {compact['TB_fetched']:.2f} TB fetched, {compact['TB_written']:.2f} TB written,"
        f" {compact['requests']['GET'] / 1e6:.1f} M GETs + {compact['requests']['HEAD'] / 1e6:.1f} M HEADs + {compact['requests']['LIST']:,.0f} LISTs"
        f" + {compact['requests']['PUT'] / 1e6:.1f} M PUTs = ${compact['dollars']:,.2f}; in-region transfer $0"
    )
    return paper


if __name__ == "__main__":
    sys.exit(main())
