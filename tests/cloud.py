"""Real object storage and a real Dask cluster for tests, each run as separate processes.

    from cloud import dask_cluster, require_dask, require_s3, s3_server

    require_s3()
    with s3_server(counting=True) as s3:          # moto in server mode on 127.0.0.1
        s3.make_bucket("sessions")
        s3.upload_tree(local_projects, "s3://sessions/projects/")
        s3.reset()                                 # zero the proxy's byte counters
        subprocess.run([...ctxpipe count s3://sessions/projects/...], env=s3.child_env())
        assert s3.bytes_fetched < sum(s3.listing("s3://sessions/projects/").values()) / 10

    require_dask()
    with dask_cluster(workers=2, env=s3.env) as cluster:   # `dask scheduler` + 2 `dask worker`
        run ctxpipe with --executor dask --scheduler cluster.address
        cluster.kill_worker(cluster.worker_pids()[0])      # SIGKILL, for good (no nanny)

`s3.env` is what a child process needs to reach the server with s3fs or boto3 and no other
configuration (s3fs honours AWS_ENDPOINT_URL by itself in the versions we use);
`s3.child_env()` is os.environ without the caller's own AWS_* settings, plus `s3.env`.
The helpers (make_bucket, put, get, listing, upload_tree) talk to moto directly, never through
the counting proxy, so the counters hold only the traffic of the code under test.

Every process started here is stopped when its context ends (also on error), and on Linux it
is also killed if the process that started it dies (prctl PR_SET_PDEATHSIG), so a pytest
killed hard leaves no server behind. Note: the signal follows the THREAD that started the
process, so enter these contexts on a thread that outlives them (pytest's main thread does).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import skip_unless_installed

HOST = "127.0.0.1"
KEY_ID = SECRET = "testing"  # moto accepts any credentials unless told to reject them
REGION = "us-east-1"
_TESTS = Path(__file__).resolve().parent
_START_TIMEOUT = 60.0
_STOP_GRACE = 3.0  # seconds between SIGTERM and SIGKILL: a dask worker whose scheduler is gone ignores SIGTERM for a long time


def require_s3() -> None:
    """Skip the calling test (or module, at import) when the S3 extras are not installed."""
    skip_unless_installed(
        "s3fs", "moto", "boto3", reason="{module} is not installed: the S3 tests need s3fs and moto[server] (pip install 'ctxpipe[s3]' 'moto[server]')"
    )


def require_dask() -> None:
    """Skip the calling test (or module, at import) when Dask's distributed scheduler is not installed."""
    skip_unless_installed("distributed", reason="distributed is not installed: the Dask tests need dask[distributed]")


def free_port() -> int:
    """A port nothing listens on right now (another process may take it before we do; callers retry)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


# -- processes ------------------------------------------------------------------------------------

# Run as `python -c _LAUNCHER <parent pid> <program> <args...>`: asks Linux to SIGKILL this process
# when its parent dies, then execs the program (same pid; the setting survives exec). Done in a
# launcher, not in preexec_fn, because preexec_fn is unsafe in a process with threads (xdist has some).
_LAUNCHER = (
    "import ctypes, os, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, 9)\n"  # PR_SET_PDEATHSIG, SIGKILL
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"  # the parent died before prctl took effect
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _program(script: str, module: str) -> list[str]:
    """The console script beside this interpreter (same venv), else `python -m module`."""
    beside = Path(sys.executable).parent / script
    return [str(beside)] if beside.exists() else [sys.executable, "-m", module]


class _Process:
    """One child process in its own session, its output in a log file, stopped by pid."""

    def __init__(self, argv: list[str], log: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        self.argv = argv
        self.log = log
        if sys.platform == "linux":
            argv = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *argv]
        with open(log, "wb") as out:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        self.pid = self.popen.pid

    def alive(self) -> bool:
        return not self._exited()

    def _exited(self) -> bool:
        """Whether it has exited, WITHOUT reaping it: until we reap it, its pid and process group
        id cannot be reused, so signalling the group cannot reach anyone else's processes."""
        if self.popen.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        _stop_all([self])

    def signal_group(self, sig: signal.Signals) -> None:
        if self.popen.returncode is None:  # never after reaping (see _exited)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)


def _stop_all(procs: list[_Process]) -> None:
    """SIGTERM each process group we created, SIGKILL what is left after a grace period (also
    whatever an exited process left in its group: its session is ours alone), then reap them all."""
    for p in procs:
        if not p._exited():
            p.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE
    while time.monotonic() < deadline and not all(p._exited() for p in procs):
        time.sleep(0.02)
    for p in procs:
        p.signal_group(signal.SIGKILL)
        p.popen.wait()


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    return True


class _Exited(RuntimeError):
    """A process exited before it was ready (e.g. another process took its port first)."""


def _wait_until(ready: Any, what: str, procs: list[_Process], timeout: float = _START_TIMEOUT) -> None:
    """Poll `ready()` until true; fail at once, with the log, if one of `procs` exits meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        for p in procs:
            if not p.alive():
                raise _Exited(f"{what}: {p.argv[0]} exited with {p.popen.returncode} before it was ready:\n{p.log_tail()}")
        if ready():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready after {timeout:.0f}s:\n" + "\n".join(p.log_tail() for p in procs))
        time.sleep(0.02)


# -- a proxy that counts bytes ----------------------------------------------------------------------


class CountingProxy:
    """A TCP proxy on 127.0.0.1 that counts the bytes it relays in each direction.

    `bytes_fetched` is server->client (what a client downloaded, HTTP headers included),
    `bytes_sent` client->server. Each count is taken before the bytes are passed on, so once a
    client has its answer the count already includes it.
    """

    def __init__(self, upstream_port: int, upstream_host: str = HOST) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._fetched = 0
        self._sent = 0
        self.connections = 0
        self._live: set[socket.socket] = set()
        self._listener = socket.create_server((HOST, 0))
        self.port = int(self._listener.getsockname()[1])
        self.endpoint = f"http://{HOST}:{self.port}"
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._accepter = threading.Thread(target=self._accept, name="counting-proxy", daemon=True)
        self._accepter.start()

    @property
    def bytes_fetched(self) -> int:
        with self._lock:
            return self._fetched

    @property
    def bytes_sent(self) -> int:
        with self._lock:
            return self._sent

    def reset(self) -> None:
        with self._lock:
            self._fetched = self._sent = 0
            self.connections = 0

    def close(self) -> None:
        self._closed = True
        # close() alone would not wake the thread blocked in accept() (which keeps the port listening).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            live = list(self._live)
        for s in live:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self._accepter.join(5)
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> CountingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()  # the client sees a reset, as it would with the server down
                continue
            with self._lock:
                self.connections += 1
                self._live.update((client, server))
            pair = [client, server]
            for src, dst, downstream in ((client, server, False), (server, client, True)):
                t = threading.Thread(target=self._pump, args=(src, dst, downstream, pair), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, downstream: bool, pair: list[socket.socket]) -> None:
        try:
            while data := src.recv(65536):
                with self._lock:
                    if downstream:
                        self._fetched += len(data)
                    else:
                        self._sent += len(data)
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with self._lock:
            pair.remove(src)  # the second pump to finish closes both sockets
            done = not pair
            if done:
                self._live.difference_update((src, dst))
        if done:
            src.close()
            dst.close()


# -- S3 (moto server) -----------------------------------------------------------------------------


def split_url(url: str) -> tuple[str, str]:
    """`s3://bucket/key` (or `bucket/key`) -> (bucket, key)."""
    rest = url.removeprefix("s3://")
    bucket, _, key = rest.partition("/")
    return bucket, key


@dataclass
class S3Server:
    """A running moto server. `endpoint` is what clients use (the proxy when counting), `direct` is moto itself."""

    endpoint: str
    direct: str
    env: dict[str, str]
    pid: int
    proxy: CountingProxy | None = None
    _client: Any = field(default=None, repr=False)

    def child_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (default os.environ) without its AWS_* settings (a profile or endpoint of the
        developer's would override ours), plus `env`: what a child process should run with."""
        base = os.environ if base is None else base
        return {k: v for k, v in base.items() if not k.startswith("AWS_")} | self.env

    @property
    def client(self) -> Any:
        """A boto3 S3 client talking to moto directly (never counted by the proxy)."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.session.Session(aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET, region_name=REGION).client(
                "s3", endpoint_url=self.direct, config=Config(retries={"max_attempts": 2}, max_pool_connections=16)
            )
        return self._client

    def make_bucket(self, name: str) -> None:
        self.client.create_bucket(Bucket=name)

    def put(self, url: str, data: bytes) -> None:
        bucket, key = split_url(url)
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, url: str) -> bytes:
        bucket, key = split_url(url)
        return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())

    def listing(self, prefix: str, *, relative: bool = False) -> dict[str, int]:
        """{url: size} of every object under `prefix` (`s3://bucket/some/prefix/`); with
        `relative`, keys are relative to the prefix (to compare with a local tree)."""
        bucket, key_prefix = split_url(prefix)
        out: dict[str, int] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key_prefix):
            for obj in page.get("Contents", ()):
                key = obj["Key"]
                out[key[len(key_prefix) :] if relative else f"s3://{bucket}/{key}"] = int(obj["Size"])
        return out

    def upload_tree(self, local_folder: str | os.PathLike[str], url_prefix: str) -> dict[str, int]:
        """Mirror every file under `local_folder` to `url_prefix` + its relative path; returns {url: size}."""
        root = Path(local_folder)
        prefix = url_prefix if url_prefix.endswith("/") else url_prefix + "/"
        files = sorted(p for p in root.rglob("*") if p.is_file())
        bucket, key_prefix = split_url(prefix)

        def one(path: Path) -> tuple[str, int]:
            data = path.read_bytes()
            key = key_prefix + path.relative_to(root).as_posix()
            self.client.put_object(Bucket=bucket, Key=key, Body=data)
            return f"s3://{bucket}/{key}", len(data)

        with ThreadPoolExecutor(8) as pool:
            return dict(pool.map(one, files))

    def reset_store(self) -> None:
        """Forget every bucket and object (moto's reset API), e.g. between tests sharing a server."""
        conn = http.client.HTTPConnection(*split_host(self.direct), timeout=10)
        try:
            conn.request("POST", "/moto-api/reset")
            conn.getresponse().read()
        finally:
            conn.close()

    # The proxy's counters, when the server was started with counting=True.
    @property
    def bytes_fetched(self) -> int:
        return self._proxy().bytes_fetched

    @property
    def bytes_sent(self) -> int:
        return self._proxy().bytes_sent

    def reset(self) -> None:
        self._proxy().reset()

    def _proxy(self) -> CountingProxy:
        if self.proxy is None:
            raise RuntimeError("byte counts need s3_server(counting=True)")
        return self.proxy


def split_host(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.removeprefix("http://").partition(":")
    return host, int(port)


def _answers(endpoint: str) -> bool:
    # http.client, not urllib: urllib would go through an HTTP_PROXY from the environment.
    # Any HTTP answer will do: a server that rejects credentials answers 500 to an unsigned S3 call.
    conn = http.client.HTTPConnection(*split_host(endpoint), timeout=1)
    try:
        conn.request("GET", "/moto-api/")
        conn.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def _no_proxy(extra: str = f"{HOST},localhost") -> str:
    current = os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or ""
    return f"{current},{extra}" if current else extra


def _start_moto(tmp: Path, env: Mapping[str, str]) -> tuple[_Process, int]:
    """A moto server answering on a free port; retried on another port if it exits at once
    (another process may take the free port before moto binds it)."""
    for attempt in range(3):
        port = free_port()
        proc = _Process([*_program("moto_server", "moto.server"), "-H", HOST, "-p", str(port)], tmp / f"moto-{attempt}.log", env)
        try:
            _wait_until(lambda url=f"http://{HOST}:{port}": _answers(url), "moto server", [proc])
            return proc, port
        except _Exited:
            proc.stop()
            if attempt == 2:
                raise
        except BaseException:
            proc.stop()
            raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def s3_server(*, counting: bool = False, reject_credentials: bool = False) -> Iterator[S3Server]:
    """Start `moto_server` on a free port of 127.0.0.1 and yield an S3Server; stop it at the end.

    counting: put a CountingProxy in front; `endpoint` and `env` then point at the proxy.
    reject_credentials: moto checks credentials (none are valid, so every request, the helpers'
    too, fails with InvalidAccessKeyId / 403): for testing how bad credentials are reported.
    """
    require_s3()
    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-s3-"))
    server_env = dict(os.environ)
    if reject_credentials:
        server_env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
    proc: _Process | None = None
    proxy: CountingProxy | None = None
    try:
        proc, port = _start_moto(tmp, server_env)
        direct = f"http://{HOST}:{port}"
        if counting:
            proxy = CountingProxy(port)
        endpoint = proxy.endpoint if proxy else direct
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ENDPOINT_URL_S3": endpoint,  # a service-specific endpoint outranks AWS_ENDPOINT_URL; set both
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            # The developer's ~/.aws must not change anything (a profile's endpoint, region, keys).
            "AWS_CONFIG_FILE": str(tmp / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",  # never wait on the instance metadata service
            "NO_PROXY": _no_proxy(),
            "no_proxy": _no_proxy(),
        }
        yield S3Server(endpoint=endpoint, direct=direct, env=env, pid=proc.pid, proxy=proxy)
    finally:
        if proxy is not None:
            proxy.close()
        if proc is not None:
            proc.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# -- Dask ------------------------------------------------------------------------------------------


@dataclass
class DaskCluster:
    """A running scheduler and its workers (each a separate process, no nanny)."""

    address: str
    scheduler_pid: int
    _workers: list[_Process]
    cwd: Path | None = None  # the scheduler's and the workers' working folder
    _client: Any = field(default=None, repr=False)

    @property
    def client(self) -> Any:
        """A distributed.Client connected to the cluster (closed when the cluster stops)."""
        if self._client is None:
            from distributed import Client

            self._client = Client(self.address, timeout=30, set_as_default=False)
        return self._client

    def started_pids(self) -> list[int]:
        """Every process this cluster started (scheduler first), alive or not."""
        return [self.scheduler_pid, *(w.pid for w in self._workers)]

    def worker_pids(self) -> list[int]:
        """The pid of each worker registered now, as the workers themselves report it."""
        return sorted(self.client.run(os.getpid).values())

    def running_worker_pids(self) -> list[int]:
        """The pid of each worker process started here that has not exited (registered or not)."""
        return [w.pid for w in self._workers if w.alive()]

    def registered_workers(self) -> int:
        return len(self.client.nthreads())

    def kill_worker(self, pid: int, *, wait: bool = True) -> None:
        """SIGKILL one of this cluster's workers (no nanny: it stays dead). With `wait`, return
        once the scheduler has dropped it."""
        proc = next((w for w in self._workers if w.pid == pid), None)
        if proc is None:
            raise ValueError(f"pid {pid} is not a worker of this cluster ({[w.pid for w in self._workers]})")
        before = self.registered_workers()
        os.kill(pid, signal.SIGKILL)
        proc.popen.wait()
        if wait:
            _wait_until(lambda: self.registered_workers() < before, "scheduler dropping the killed worker", [], timeout=30)


# The cluster's own diagnostics, off or slowed as an operator quietens a cluster (idle, a scheduler and
# two workers took 11 % of a core with Dask's defaults, 2 % with these): the workers' statistical
# profiler (a sample of their threads every 10 ms), the event loops' responsiveness tick (every 20 ms)
# and the system monitor (every 0.5 s). Nothing ctxpipe does or is checked for depends on them.
QUIET_CLUSTER = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
}


@contextlib.contextmanager
def dask_cluster(
    workers: int = 2, *, env: Mapping[str, str] | None = None, nthreads: int = 1, cwd: str | os.PathLike[str] | None = None
) -> Iterator[DaskCluster]:
    """Start `dask scheduler` and `workers` × `dask worker --no-nanny` on 127.0.0.1, wait until all
    workers are registered, yield a DaskCluster, stop every process at the end.

    env: added to os.environ for the scheduler and the workers (e.g. an S3Server's env). The
    workers also get tests/ on PYTHONPATH, so functions from test helper modules unpickle there.
    cwd: the working folder of the scheduler and the workers (default: a fresh empty folder, never
    the caller's, so a relative path a worker opens or writes names nothing of the caller's).
    """
    require_dask()
    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-dask-"))
    child_env = dict(os.environ) | QUIET_CLUSTER | dict(env or {})
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_TESTS), child_env.get("PYTHONPATH", "")) if p)
    child_env["NO_PROXY"] = child_env["no_proxy"] = _no_proxy()
    dask = _program("dask", "dask")
    folder = Path(cwd) if cwd is not None else tmp / "cwd"
    folder.mkdir(parents=True, exist_ok=True)
    procs: list[_Process] = []
    cluster: DaskCluster | None = None
    try:
        port = free_port()
        address = f"tcp://{HOST}:{port}"
        scheduler = _Process(
            [*dask, "scheduler", "--host", HOST, "--port", str(port), "--dashboard-address", f"{HOST}:0"], tmp / "scheduler.log", child_env, folder
        )
        procs.append(scheduler)
        _wait_until(lambda: _listening(port), "dask scheduler", [scheduler])
        worker_procs = [
            _Process(
                [*dask, "worker", address, "--nthreads", str(nthreads), "--no-nanny", "--no-dashboard", "--host", HOST,
                 "--name", f"worker-{i}", "--local-directory", str(tmp / f"worker-{i}"), "--death-timeout", "60"],
                tmp / f"worker-{i}.log",
                child_env,
                folder,
            )
            for i in range(workers)
        ]  # fmt: skip
        procs.extend(worker_procs)
        cluster = DaskCluster(address=address, scheduler_pid=scheduler.pid, _workers=worker_procs, cwd=folder)
        _wait_until(lambda: cluster.registered_workers() >= workers, f"dask cluster ({workers} workers)", procs)
        yield cluster
    finally:
        if cluster is not None and cluster._client is not None:
            with contextlib.suppress(Exception):
                cluster._client.close(timeout=5)
        # Workers first: one whose scheduler went away at the same moment ignores SIGTERM for long.
        _stop_all(procs[1:])
        _stop_all(procs[:1])
        shutil.rmtree(tmp, ignore_errors=True)


def _listening(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=1).close()
        return True
    except OSError:
        return False


def whoami() -> int:
    """The pid of the process running it (for tests that map a function over the workers)."""
    return os.getpid()


def read_url(url: str) -> bytes:
    """fsspec's read of `url` in whatever process runs it, configured by that process's
    environment only (to check that Dask workers reach the S3 server through `env`)."""
    import fsspec

    with fsspec.open(url, "rb") as f:
        return bytes(f.read())
