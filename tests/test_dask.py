"""`--executor dask` end to end (issue 14): count, validate, report and compact run as child
processes against a REAL Dask cluster (a `dask scheduler` and `dask worker --no-nanny` processes,
tests/cloud.py) give exactly what `--jobs 2` gives; DASK_SCHEDULER_ADDRESS is honoured; with no
address a local cluster is started; a worker SIGKILLed mid-task loses nothing; the summary circuit
breaker is shared by the cluster's workers; a scheduler that is not there is one line; and files
in a real S3 server (moto) count the same on the cluster as on local disk. Then: relative paths
given in the caller's folder are the caller's files (the workers run in another folder), a
scheduler SIGKILLed mid-batch or one without workers is one error line, Ctrl-C on a local cluster
leaves no process behind, and the breaker holds on workers of two threads.

Most paths are absolute; the workers' working folder (cluster.cwd) is their own, never ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud import DaskCluster, S3Server, dask_cluster, free_port, require_dask, s3_server
from helpers import child_env
from messages_server import MessagesServer, Reply
from project_sessions import NOW_ISO, bulky

require_dask()

SESSIONS = 18  # plus a subagent, a compaction side-call and a bad file: 21 files
BAD = "3f2a1b0c-9d8e-4f7a-8b6c-bad000000000.jsonl"
COMPACT = ("--engine", "offline", "--source", "transcript", "--now", NOW_ISO, "--force")
# The llm engine against tests/messages_server.py; the key is a placeholder the fake accepts.
LLM_ENV = {"ANTHROPIC_API_KEY": "test-key"}
# Dask's own connect timeout, as a user sets it: what a run waits for a scheduler and its workers.
CONNECT_TIMEOUT = 3
CONNECT_TIMEOUT_ENV = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": f"{CONNECT_TIMEOUT}s"}


def command_line(*args: object) -> list[str]:
    """ctxpipe's command line in a child process (for tests that signal or watch it while it runs)."""
    return [sys.executable, "-m", "ctxpipe", *map(str, args)]


def wait_while_running(run: subprocess.Popen[bytes], ready: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll until `ready()`, failing if the command ends first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert run.poll() is None and time.monotonic() < deadline, f"the batch ended before {what}"
        time.sleep(0.02)


def ctxpipe(*args: Any, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """`python -m ctxpipe ARGS` in a child process, as a user runs it (no DASK_SCHEDULER_ADDRESS
    of ours leaks in unless `env` sets it), in `cwd` if given."""
    full = child_env(env)
    if not env or "DASK_SCHEDULER_ADDRESS" not in env:
        full.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "ctxpipe", *map(str, args)], stdin=subprocess.DEVNULL, capture_output=True, env=full, timeout=timeout, cwd=cwd)


def write_tree(root: Path) -> Path:
    """Sessions in two project folders, a subagent, a compaction side-call and one file with
    invalid JSON on its 4th line; returns `root`."""
    for number in range(SESSIONS):
        folder = root / ("-home-dev-app" if number % 2 else "-home-dev-other")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"3f2a1b0c-9d8e-4f7a-8b6c-{number:012d}.jsonl").write_bytes(bulky("/home/dev/app", number, 30_000))
    subagents = root / "-home-dev-app" / "3f2a1b0c-9d8e-4f7a-8b6c-000000000001" / "subagents"
    subagents.mkdir(parents=True)
    (subagents / "agent-a1234.jsonl").write_bytes(bulky("/home/dev/app", 100, 20_000))
    (subagents / "agent-acompact-0a1b2c.jsonl").write_bytes(bulky("/home/dev/app", 101, 20_000))
    lines = bulky("/home/dev/app", 102, 20_000).split(b"\n")
    lines[3] = b'{"type": "user", broken'
    (root / "-home-dev-app" / BAD).write_bytes(b"\n".join(lines))
    return root


def files_under(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in names_under(folder)}


def names_under(folder: Path) -> list[str]:
    """The files' names, read while a run writes there: nothing is opened (a temporary file listed
    may be renamed before it could be read)."""
    return [p.relative_to(folder).as_posix() for p in sorted(folder.rglob("*")) if p.is_file()]


def tasks_since(cluster: DaskCluster, start: float) -> list[str]:
    """The keys of ctxpipe's tasks (dask_executor._task) the cluster's scheduler saw finish since
    `start` (a time.time()), from its task stream."""
    return [str(t["key"]) for t in cluster.client.get_task_stream(start=start) if str(t["key"]).startswith("_task-")]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server | None]:
    """A moto server for the S3 test, or None without the S3 extras (that test then skips)."""
    try:
        import moto  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError:
        yield None
        return
    with s3_server() as server:
        yield server


@pytest.fixture(scope="module")
def cluster(s3: S3Server | None) -> Iterator[DaskCluster]:
    """The module's cluster: a scheduler and 2 single-threaded workers that reach the S3 server,
    in a working folder of their own (cluster.cwd, empty)."""
    with dask_cluster(workers=2, env=s3.env if s3 else None) as running:
        tasks_since(running, time.time())  # the first call starts the scheduler's task stream
        yield running


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("dask") / "projects")


# --- 1. the same results as --jobs ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["count", "validate", "report"])
def test_a_command_on_the_cluster_prints_what_jobs_prints(command: str, cluster: DaskCluster, tree: Path) -> None:
    local = ctxpipe(command, "--json", "--jobs", "2", tree)
    start = time.time()
    remote = ctxpipe(command, "--json", "--executor", "dask", "--scheduler", cluster.address, tree)
    assert len(tasks_since(cluster, start)) == 21, "one task per file, run by the cluster"
    assert local.returncode == remote.returncode == 1, remote.stderr.decode()
    assert remote.stdout == local.stdout
    assert remote.stderr == local.stderr
    rows = [json.loads(line) for line in remote.stdout.splitlines()]
    files = [row["file"] for row in rows if row["file"]]
    if command == "validate":  # validate's verdict on a bad file is its row, with the bad line among its findings
        assert len(files) == 21
        [bad] = [row for row in rows if row["file"].endswith(BAD)]
        assert not bad["valid"] and bad["findings"][0]["line"] == 4
    else:  # one error line on stderr, every other file a row (count: the bad one too, a row saying why)
        counted = [row["file"] for row in rows if row["file"] and "error" not in row]
        assert len(counted) == 20 and not any(name.endswith(BAD) for name in counted)
        [error] = [line for line in remote.stderr.decode().splitlines() if "error:" in line]
        assert error.endswith(f"{BAD}:4: invalid JSON: unexpected character, expected a string key (column 18)")
        if command == "count":
            [bad] = [row for row in rows if "error" in row]
            assert bad["file"].endswith(BAD) and error.endswith(bad["error"].removeprefix("line 4: "))
    if command == "count":
        assert rows[-1]["total"] and (rows[-1]["files"], rows[-1]["failed"]) == (20, 1)


def test_compact_on_the_cluster_writes_the_same_bytes_as_jobs(cluster: DaskCluster, tree: Path, tmp_path: Path) -> None:
    local = ctxpipe("compact", "--json", *COMPACT, "--jobs", "2", "--out-dir", tmp_path / "local", tree)
    remote = ctxpipe("compact", "--json", *COMPACT, "--executor", "dask", "--scheduler", cluster.address, "--out-dir", tmp_path / "dask", tree)
    assert local.returncode == remote.returncode == 1, remote.stderr.decode()
    assert remote.stdout.replace(b"/dask/", b"/local/") == local.stdout
    assert remote.stderr == local.stderr
    assert f"{BAD}:4: invalid JSON".encode() in remote.stderr and b"1 of 21 files failed" in remote.stderr
    written = files_under(tmp_path / "dask")
    assert written == files_under(tmp_path / "local")
    assert len(written) == 19, "every session and the subagent; not the side-call, not the bad file"
    assert not any("acompact" in name or name.endswith(BAD) for name in written)


# --- 2, 3. where the cluster comes from ----------------------------------------------------------


def test_dask_scheduler_address_is_used_without_scheduler(cluster: DaskCluster, tree: Path) -> None:
    local = ctxpipe("count", "--json", "--jobs", "2", tree)
    start = time.time()
    remote = ctxpipe("count", "--json", "--executor", "dask", tree, env={"DASK_SCHEDULER_ADDRESS": cluster.address})
    keys = tasks_since(cluster, start)
    assert (remote.returncode, remote.stdout) == (local.returncode, local.stdout), remote.stderr.decode()
    assert len(keys) == 21, f"the cluster at DASK_SCHEDULER_ADDRESS ran one task per file: {keys}"


def test_without_an_address_a_local_cluster_is_started(tree: Path) -> None:
    local = ctxpipe("count", "--json", "--jobs", "2", tree)
    # Dask's default dashboard port taken (as by any other cluster on the machine): the local
    # cluster must not warn about it on stderr (it once did: a raw UserWarning with a source path).
    with socket.socket() as held:
        with contextlib.suppress(OSError):  # already taken by someone else: the same situation
            held.bind(("127.0.0.1", 8787))
            held.listen()
        remote = ctxpipe("count", "--json", "--executor", "dask", "--jobs", "2", tree)
    assert (remote.returncode, remote.stdout, remote.stderr) == (local.returncode, local.stdout, local.stderr)
    assert len(remote.stdout.splitlines()) == 22  # 20 counted, the bad file's row, the total


# --- 4. a worker killed mid-task ------------------------------------------------------------------


def llm_sessions(root: Path, number: int) -> Path:
    root.mkdir(parents=True)
    for n in range(number):
        (root / f"3f2a1b0c-9d8e-4f7a-8b6c-{n:012d}.jsonl").write_bytes(bulky("/home/dev/app", n, 12_000))
    return root


def llm_compact(server: MessagesServer, *args: Any) -> list[Any]:
    return ["compact", "--json", "--engine", "llm", "--base-url", server.url, "--source", "transcript", "--now", NOW_ISO, "--force", "--keep-last", "2", *args]


def test_a_worker_killed_mid_task_loses_nothing(tmp_path: Path) -> None:
    sessions = llm_sessions(tmp_path / "projects", 6)
    with MessagesServer(max_sleep=10) as server, dask_cluster(workers=2) as own:
        expected = ctxpipe(*llm_compact(server, "--jobs", "2", "--out-dir", tmp_path / "local", sessions), env=LLM_ENV)
        assert expected.returncode == 0, expected.stderr.decode()
        asked = len(server.message_requests())  # a summary, then a repair asking for the facts the fake's summary left out
        assert asked == 2 * 6
        server.clear()
        server.default_reply = lambda body: Reply.timeout(0.4)  # every answer takes 0.4 s: time to kill a worker in one
        victim = own.worker_pids()[0]
        argv = command_line(*llm_compact(server, "--executor", "dask", "--scheduler", own.address, "--out-dir", tmp_path / "dask", sessions))
        with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(LLM_ENV)) as run:
            # both workers are waiting on the model
            wait_while_running(run, lambda: sum(r.status is None for r in server.message_requests()) >= 2, "both workers were busy", 60)
            own.kill_worker(victim)
            stdout, stderr = run.communicate(timeout=90)
        assert run.returncode == 0, stderr.decode()
        again = len(server.message_requests()) - asked
        assert again in (1, 2), f"{again} requests more than --jobs: the killed worker's file ran again from its start, once"
    assert stdout.replace(b"/dask/", b"/local/") == expected.stdout
    assert stderr == expected.stderr, "the lost worker is Dask's business: nothing more on stderr"
    assert files_under(tmp_path / "dask") == files_under(tmp_path / "local"), "every output present, whole, and nothing else (no temporary file)"
    assert len(files_under(tmp_path / "dask")) == 6


# --- 5. the breaker is the cluster's -------------------------------------------------------------


def test_the_breaker_is_shared_by_the_clusters_workers(cluster: DaskCluster, tmp_path: Path) -> None:
    sessions = llm_sessions(tmp_path / "projects", 10)
    with MessagesServer() as server:
        # Always 503; retry-after-ms keeps the client's four retries of each summary quick.
        server.default_reply = lambda body: Reply.error(503, "overloaded_error", "Service unavailable", {"retry-after-ms": "10"})
        local = ctxpipe(*llm_compact(server, "--jobs", "2", "--out-dir", tmp_path / "local", sessions), env=LLM_ENV)
        asked_locally = {json.dumps(r.body, sort_keys=True) for r in server.message_requests()}
        server.clear()
        remote = ctxpipe(*llm_compact(server, "--executor", "dask", "--scheduler", cluster.address, "--out-dir", tmp_path / "dask", sessions), env=LLM_ENV)
        requests = server.message_requests()
    assert local.returncode == remote.returncode == 0, remote.stderr.decode()
    assert len(asked_locally) == 3
    # A summary is one request body, sent again on each retry; count the summaries asked for.
    asked = {json.dumps(r.body, sort_keys=True) for r in requests}
    assert requests and all(r.status == 503 for r in requests)
    assert 3 <= len(asked) <= 4, f"{len(asked)} summaries asked: the breaker opens after 3 failures (the other worker may have one in flight)"
    rows = [json.loads(line) for line in remote.stdout.splitlines()]
    summaries = [next(s for s in row["stages"] if s["stage"] == "summarize") for row in rows]
    assert len(rows) == 10 and all(s["changed"] and s["engine"] == "offline" for s in summaries)
    assert sum("not asked again" in s["note"] for s in summaries) == 10 - len(asked)
    assert len(files_under(tmp_path / "dask")) == 10


# --- 6. errors -----------------------------------------------------------------------------------


def test_a_scheduler_that_is_not_there_is_one_line(tree: Path) -> None:
    """Given by --scheduler or by DASK_SCHEDULER_ADDRESS (both runs at once), each gives up after
    Dask's own connect timeout, set here as a user sets it (Dask's default is 30 s)."""
    given, from_env = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "ctxpipe", "count", "--json", "--executor", "dask"]
    runs = {
        f"--scheduler {given}": subprocess.Popen(
            [*command, "--scheduler", given, str(tree)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(CONNECT_TIMEOUT_ENV)
        ),
        f"DASK_SCHEDULER_ADDRESS={from_env}": subprocess.Popen(
            [*command, str(tree)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env({"DASK_SCHEDULER_ADDRESS": from_env, **CONNECT_TIMEOUT_ENV})
        ),
    }
    started = time.monotonic()
    for named, run in runs.items():
        stdout, stderr = run.communicate(timeout=60)
        assert run.returncode == 1 and stdout == b""
        [line] = stderr.decode().splitlines()
        assert line.startswith(f"ctxpipe: error: {named}: cannot connect to the Dask scheduler"), line
        assert line.endswith(f"after {CONNECT_TIMEOUT} s)"), line
    took = time.monotonic() - started
    assert took < CONNECT_TIMEOUT + 15, f"{took:.1f} s to give up on a scheduler that is not there, with a {CONNECT_TIMEOUT} s timeout"


def test_scheduler_without_the_dask_executor_is_a_usage_error(cluster: DaskCluster, tree: Path) -> None:
    result = ctxpipe("count", "--json", "--scheduler", cluster.address, tree)
    assert result.returncode == 2 and result.stdout == b""
    assert b"--scheduler goes with --executor dask" in result.stderr and b"Traceback" not in result.stderr


# --- 7. files in object storage ------------------------------------------------------------------


def test_files_in_s3_count_on_the_cluster_as_on_disk(s3: S3Server | None, cluster: DaskCluster, tree: Path) -> None:
    if s3 is None:
        pytest.skip("the S3 extras (s3fs, moto[server]) are not installed")
    s3.make_bucket("sessions")
    uploaded = s3.upload_tree(tree, "s3://sessions/projects/")
    assert len(uploaded) == 21
    local = ctxpipe("count", "--json", "--jobs", "2", tree)
    start = time.time()
    env = s3.child_env(child_env())
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    remote = subprocess.run(
        [sys.executable, "-m", "ctxpipe", "count", "--json", "--executor", "dask", "--scheduler", cluster.address, "s3://sessions/projects/"],
        stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    assert len(tasks_since(cluster, start)) == 21
    on_jobs = subprocess.run(
        [sys.executable, "-m", "ctxpipe", "count", "--json", "--jobs", "2", "s3://sessions/projects/"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert (remote.returncode, remote.stdout, remote.stderr) == (on_jobs.returncode, on_jobs.stdout, on_jobs.stderr)
    # The same tree on local disk: the same row for every file and the same total. (Not in the same
    # order: a store lists a prefix in key order, os.walk a folder's files before its subfolders.)
    assert remote.returncode == local.returncode == 1, remote.stderr.decode()
    on_disk = remote.stdout.replace(b"s3://sessions/projects/", str(tree).encode() + b"/")
    assert sorted(on_disk.splitlines()) == sorted(local.stdout.splitlines())
    assert on_disk.splitlines()[-1] == local.stdout.splitlines()[-1] and b'"total":true' in on_disk.splitlines()[-1]
    assert remote.stderr.replace(b"s3://sessions/projects/", str(tree).encode() + b"/") == local.stderr


# --- 8. relative paths, a lost scheduler, no workers, Ctrl-C, threaded workers --------------------


@pytest.mark.parametrize("command", ["count", "validate", "report", "compact"])
def test_relative_paths_name_the_callers_files_not_the_workers(command: str, cluster: DaskCluster, tree: Path, tmp_path: Path) -> None:
    """Run from folder X with `rel/projects/` (and `--out-dir out`): the workers, whose working
    folder is another one (cluster.cwd), read X's files and write X/out; rows name the paths as
    given, exactly as a --jobs run in X prints them."""
    shutil.copytree(tree, tmp_path / "rel" / "projects")
    writes = {"report": ["--out-dir", "out"], "compact": ["--json", *COMPACT, "--out-dir", "out"]}.get(command, ["--json"])
    local = ctxpipe(command, *writes, "--jobs", "2", "rel/projects/", cwd=tmp_path)
    if writes[-1] == "out":
        (tmp_path / "out").rename(tmp_path / "jobs-out")
    start = time.time()
    remote = ctxpipe(command, *writes, "--executor", "dask", "--scheduler", cluster.address, "rel/projects/", cwd=tmp_path)
    assert len(tasks_since(cluster, start)) == 21, "one task per file, run by the cluster"
    assert local.returncode == remote.returncode == 1, remote.stderr.decode()
    assert (remote.stdout, remote.stderr) == (local.stdout, local.stderr)
    assert cluster.cwd is not None and list(cluster.cwd.iterdir()) == [], "nothing written in the workers' own folder"
    if command == "compact":
        rows = [json.loads(line) for line in remote.stdout.splitlines()]
        outputs = [row["output"] for row in rows if row.get("output")]
        assert len(rows) == 21 and all(row["file"].startswith("rel/projects/-home-dev-") for row in rows)
        assert len([row for row in rows if set(row) == {"file", "error"}]) == 1  # the broken file, a row of its own
        assert len(outputs) == 19 and all(output.startswith("out/-home-dev-") for output in outputs), outputs
    if writes[-1] == "out":
        written = files_under(tmp_path / "out")
        assert written == files_under(tmp_path / "jobs-out")
        assert len(written) == (19 if command == "compact" else 21), "a page per session read (and the index), or an output per session compacted"
    else:
        assert b"rel/projects/-home-dev-app/" in remote.stdout and str(tmp_path).encode() not in remote.stdout


def test_a_scheduler_killed_mid_batch_is_one_line(tmp_path: Path) -> None:
    sessions = llm_sessions(tmp_path / "projects", 8)
    with MessagesServer(max_sleep=10) as server, dask_cluster(workers=2) as own:
        expected = ctxpipe(*llm_compact(server, "--jobs", "2", "--out-dir", tmp_path / "local", sessions), env=LLM_ENV)
        assert expected.returncode == 0, expected.stderr.decode()
        server.default_reply = lambda body: Reply.timeout(0.3)  # a file takes two answers: about 0.6 s
        argv = command_line(*llm_compact(server, "--executor", "dask", "--scheduler", own.address, "--out-dir", tmp_path / "dask", sessions))
        with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(LLM_ENV)) as run:
            wait_while_running(run, lambda: len([name for name in names_under(tmp_path / "dask") if name.endswith(".jsonl")]) >= 2, "2 files were written", 60)
            os.kill(own.scheduler_pid, signal.SIGKILL)
            killed = time.monotonic()
            stdout, stderr = run.communicate(timeout=90)
        took = time.monotonic() - killed
        # The workers finish the file they are on (a whole output, or none), then end.
        deadline = time.monotonic() + 60
        while own.running_worker_pids():
            assert time.monotonic() < deadline, "the workers outlived their scheduler by a minute"
            time.sleep(0.1)
    assert run.returncode == 1 and took < 30, (run.returncode, took, stderr.decode())
    [line] = stderr.decode().splitlines()
    match = re.fullmatch(
        rf"ctxpipe: error: --scheduler {re.escape(own.address)}: lost the Dask scheduler after (\d+) of 8 files came back; "
        r"the others may or may not have been written \(every output present is complete\)",
        line,
    )
    assert match, line
    written, wanted = files_under(tmp_path / "dask"), files_under(tmp_path / "local")
    assert set(written) <= set(wanted), "no temporary file, nothing that a --jobs run does not write"
    assert 2 <= len(written) < 8 and int(match[1]) <= len(written), "every file the batch heard of was written"
    for name, data in written.items():
        assert [json.loads(line) for line in data.splitlines()] == [json.loads(line) for line in wanted[name].splitlines()], name
    assert stdout == b"", "no rows: the batch did not finish"


def test_a_scheduler_without_workers_is_one_line(tree: Path) -> None:
    with dask_cluster(workers=0) as empty:
        started = time.monotonic()
        result = ctxpipe("count", "--json", "--executor", "dask", "--scheduler", empty.address, tree, env=CONNECT_TIMEOUT_ENV, timeout=60)
        took = time.monotonic() - started
    assert result.returncode == 1 and result.stdout == b"" and CONNECT_TIMEOUT <= took < CONNECT_TIMEOUT + 15, (result.returncode, took)
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(f"ctxpipe: error: --scheduler {empty.address}: the Dask scheduler has no workers ("), line


def group_members(group: int) -> list[str]:
    """`pid command` of each live process (not a zombie) whose process group is `group`, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(") ", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                members.append(f"{stat.parent.name} {command[:200]}")
    return members


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the process group is read from /proc")
def test_ctrl_c_on_a_local_cluster_ends_the_group(tmp_path: Path) -> None:
    """Ctrl-C as a terminal sends it (SIGINT to the whole foreground process group) while the local
    cluster's workers wait on the model: exit 130, nothing but ctxpipe's own words on stderr, no
    process of the group left, no temporary file in --out-dir."""
    sessions = llm_sessions(tmp_path / "projects", 12)
    with MessagesServer(max_sleep=10) as server:
        server.default_reply = lambda body: Reply.timeout(0.5)  # a file takes two answers: about 1 s
        argv = command_line(*llm_compact(server, "--executor", "dask", "--jobs", "2", "--out-dir", tmp_path / "out", sessions))
        env = child_env(LLM_ENV)
        env.pop("DASK_SCHEDULER_ADDRESS", None)
        with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True) as run:
            try:
                # Mid-batch: files written, and the workers waiting on the model for others.
                wait_while_running(
                    run,
                    lambda: len(names_under(tmp_path / "out")) >= 2 and sum(r.status is None for r in server.message_requests()) >= 2,
                    "it could be interrupted",
                    90,
                )
                os.killpg(run.pid, signal.SIGINT)
                interrupted = time.monotonic()
                stdout, stderr = run.communicate(timeout=60)
                took = time.monotonic() - interrupted
                deadline = time.monotonic() + 10
                while (left := group_members(run.pid)) and time.monotonic() < deadline:
                    time.sleep(0.1)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.pid, signal.SIGKILL)  # whatever is left (the test then fails)
    assert run.returncode == 130 and took < 15, (run.returncode, took, stderr.decode())
    assert b"Traceback" not in stderr and all(line.startswith("ctxpipe: ") for line in stderr.decode().splitlines()), stderr.decode()
    assert left == [], f"processes of the run's group still alive 10 s after it exited: {left}"
    written = files_under(tmp_path / "out")
    assert [name for name in written if not name.endswith(".jsonl") or "/." in f"/{name}"] == [], "a temporary file left"
    assert 2 <= len(written) < 12 and all(data.endswith(b"\n") and [json.loads(line) for line in data.splitlines()] for data in written.values())
    assert stdout == b"", "no rows: the batch did not finish"


def test_the_breaker_holds_on_multi_threaded_workers(tmp_path: Path) -> None:
    """Two workers of two threads each: four files in flight at once, each a thread of a worker;
    the failure count is still the cluster's (jobs/breaker.py keeps it per task, not per process)."""
    from ctxpipe.core.summarize_engines import BREAKER_LIMIT

    sessions = llm_sessions(tmp_path / "projects", 10)
    with MessagesServer() as server, dask_cluster(workers=2, nthreads=2) as threaded:
        server.default_reply = lambda body: Reply.error(503, "overloaded_error", "Service unavailable", {"retry-after-ms": "10"})
        start = time.time()
        tasks_since(threaded, start)  # starts the scheduler's task stream
        remote = ctxpipe(*llm_compact(server, "--executor", "dask", "--scheduler", threaded.address, "--out-dir", tmp_path / "dask", sessions), env=LLM_ENV)
        requests = server.message_requests()
        assert len(tasks_since(threaded, start)) == 10
    assert remote.returncode == 0, remote.stderr.decode()
    asked = {json.dumps(r.body, sort_keys=True) for r in requests}
    assert requests and all(r.status == 503 for r in requests)
    in_flight = 2 * 2
    assert BREAKER_LIMIT <= len(asked) <= BREAKER_LIMIT + in_flight, f"{len(asked)} summaries asked of a model that is down"
    rows = [json.loads(line) for line in remote.stdout.splitlines()]
    summaries = [next(s for s in row["stages"] if s["stage"] == "summarize") for row in rows]
    assert len(rows) == 10 and all(s["changed"] and s["engine"] == "offline" for s in summaries)
    assert sum("not asked again" in s["note"] for s in summaries) == 10 - len(asked)
    assert len(files_under(tmp_path / "dask")) == 10
