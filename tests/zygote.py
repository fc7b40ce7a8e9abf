"""Runs of `python -m ctxpipe` forked from a warm interpreter (a zygote), for the tests that make many.

    zygote = Zygote(tmp / "zygote")          # a process that imported ctxpipe (and what it is asked to)
    zygote.ask({"import": ["s3fs"]})         # more modules imported once, in the zygote
    run = zygote.run(["count", path], cwd=tmp, env=base_env(tmp))
    run.returncode, run.stdout, run.stderr

Each run is a child forked from the zygote and set up as a fresh `python -m ctxpipe` is (its own
standard streams, working folder, environment and argv; what `python -m` runs is not imported
before it runs), so it costs its own work, not an interpreter's start and ctxpipe's imports (0.1-0.5 s
a run). Only imports cross over from the zygote, never a run's state: a module that reads the
environment when it is imported would read the zygote's, which is why the tests that use it compare
runs with real `python -m ctxpipe` processes (test_hostile_contract.py, test_remote.py).
`run_batch` runs several in one child, one after another, each undone after it.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIMEOUT = 60.0  # a run's default limit (killed after it, with its process group)


ZYGOTE = r"""
import fcntl, gc, importlib, io, json, os, pkgutil, runpy, signal, sys, threading, time, traceback

requests = os.fdopen(os.dup(0), "rb")
replies = os.fdopen(os.dup(1), "wb", buffering=0)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)

import ctxpipe, ctxpipe.cli.app
for info in pkgutil.walk_packages(ctxpipe.__path__, "ctxpipe."):
    if not info.name.startswith(("ctxpipe.tests", "ctxpipe.bench")) and not info.name.endswith("__main__"):
        try:
            importlib.import_module(info.name)
        except Exception:
            pass
for name in ("rich.console", "rich.table", "rich.text", "rich.markup", "rich.progress", "rich.live", "rich.panel",
             "orjson", "fastjsonschema", "jsonschema", "tiktoken", "tiktoken_ext", "concurrent.futures", "multiprocessing"):
    try:
        importlib.import_module(name)
    except Exception:
        pass

TEMPLATES = {0: sys.__stdin__, 1: sys.__stdout__, 2: sys.__stderr__}


def stream(fd):
    raw = io.FileIO(fd, "wb" if fd else "rb", closefd=False)
    buffered = io.BufferedWriter(raw) if fd else io.BufferedReader(raw)
    template = TEMPLATES[fd]
    # As the interpreter sets them up: stderr line-buffered, stdout too on a terminal.
    return io.TextIOWrapper(buffered, encoding=template.encoding, errors=template.errors, line_buffering=fd == 2 or raw.isatty())


PIPE_BYTES = 1 << 20  # a pipe's buffer asked for (Linux's pipe-max-size by default); a bigger stdin has a feeder process
AUDIT_LOG = [None]  # the descriptor the audit hook writes to during a run (None: between runs, or no log asked)


def install_audit():
    # Once per process (an audit hook cannot be removed): it logs to the current run's log.
    write, fspath, abspath = os.write, os.fsencode, os.path.abspath

    def hook(event, args):
        log = AUDIT_LOG[0]
        if log is not None and event in ("open", "os.listdir", "os.scandir", "glob.glob"):
            path = args[0] if args else None
            if isinstance(path, (str, bytes, os.PathLike)):
                flags = args[2] if event == "open" and len(args) > 2 and isinstance(args[2], int) else -1
                mode = args[1] if event == "open" and len(args) > 1 and isinstance(args[1], str) else ""
                record = {"event": event, "path": os.fsdecode(abspath(fspath(path))), "mode": mode, "flags": flags}
                write(log, (json.dumps(record) + "\n").encode())

    sys.addaudithook(hook)


def pour(path, pipe):
    with open(path, "rb") as source:
        data = source.read()
    while data:
        data = data[os.write(pipe, data):]


def start_run(req):
    # The run's standard streams, working folder, environment, audit log and argv, as a fresh
    # `python -m` has them; returns the descriptors to close after it and the stdin feeder's pid.
    stdin = req["stdin"]
    feeder = None
    if stdin is None:
        fd = os.open(os.devnull, os.O_RDONLY)
    elif req["stdin_pipe"]:
        fd, w = os.pipe()
        try:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            pass
        if os.path.getsize(stdin) <= fcntl.fcntl(w, fcntl.F_GETPIPE_SZ):
            # The whole file fits in the pipe's buffer: written before the run (no feeder process);
            # the run reads the same: the bytes, then the end of the file.
            pour(stdin, w)
        else:
            feeder = os.fork()
            if feeder == 0:
                os.close(fd)
                try:
                    pour(stdin, w)
                except OSError:  # the run closed its stdin early
                    pass
                os._exit(0)
        os.close(w)
    else:
        fd = os.open(stdin, os.O_RDONLY)
    os.dup2(fd, 0)
    opened = {}
    for target in (1, 2):
        name = req["stdout" if target == 1 else "stderr"]
        if name not in opened:
            flags = os.O_RDWR | os.O_NOCTTY if name.startswith("/dev/pts/") else os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            opened[name] = os.open(name, flags, 0o644)
        os.dup2(opened[name], target)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = stream(0), stream(1), stream(2)
    if req["log"]:
        AUDIT_LOG[0] = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    sys.argv = ["ctxpipe", *req["argv"]]
    return [fd, *opened.values()], feeder


def run_module(req):
    # `python -m MODULE` in this process; the exit status the interpreter would give.
    module = req.get("module") or "ctxpipe"
    # What `python -m` runs is not imported before it runs (runpy warns when it is): a module the
    # zygote imported is dropped first (a package's __main__ never was).
    if not hasattr(sys.modules.get(module), "__path__"):
        sys.modules.pop(module, None)
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
    except BaseException as exc:
        print(f"Exception ignored on flushing sys.stdout:\n{exc!r}", file=sys.stderr)
        code = 120
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    if req.get("modules"):  # a warm-up run: what it imported, for the zygote to import once
        with open(req["modules"], "w") as listing:
            listing.write("\n".join(sorted(sys.modules)))
    return code & 0xFF


def end_run(closing, feeder, signals):
    # Back to the state before the run, for the next run of a batch: no log, the run's descriptors
    # closed (its stdin's feeder ends on the closed pipe), the signal handlers and collector as they were.
    if AUDIT_LOG[0] is not None:
        os.close(AUDIT_LOG[0])
        AUDIT_LOG[0] = None
    for target in (0, 1, 2):
        os.dup2(null, target)
    for fd in closing:
        os.close(fd)
    if feeder:
        os.waitpid(feeder, 0)
    for number, handler in signals.items():
        signal.signal(number, handler)
    gc.enable()


def saved_signals():
    handlers = {}
    for number in signal.valid_signals():
        try:
            handler = signal.getsignal(number)
        except (OSError, ValueError):
            continue
        if handler is not None and number not in (signal.SIGKILL, signal.SIGSTOP):
            handlers[number] = handler
    return handlers


def become_a_run():
    # A forked child's first steps: its own process group (a timeout kills the group), none of the
    # zygote's pipes, the audit hook.
    os.setpgid(0, 0)
    requests.close()
    replies.close()
    install_audit()


def child(req):
    become_a_run()
    start_run(req)
    os._exit(run_module(req))


def batch_child(req):
    # The runs of one batch, one after another in this process (each set up as a fresh `python -m`
    # is, then undone); each run's status is a line in the statuses file as soon as it ends. A run
    # that leaves a thread running ends the batch: the runs after it are run on their own.
    become_a_run()
    statuses = os.open(req["statuses"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for index, one in enumerate(req["batch"]):
        signals = saved_signals()
        start = time.monotonic()
        closing, feeder = start_run(one)
        code = run_module(one)
        end_run(closing, feeder, signals)
        os.write(statuses, (json.dumps({"index": index, "returncode": code, "seconds": time.monotonic() - start}) + "\n").encode())
        if threading.active_count() > 1:
            break
    os._exit(0)


def wait(pid, timeout, progress=None):
    # Wait for the child; kill its process group when `timeout` passes without progress (a run
    # ending: the statuses file growing). Returns (status, timed out).
    start = time.monotonic()
    seen = 0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if progress is not None:
            size = os.stat(progress).st_size if os.path.exists(progress) else 0
            if size != seen:
                seen, start = size, time.monotonic()
        if time.monotonic() - start > timeout:
            try:
                os.killpg(pid, signal.SIGKILL)  # the run's own process group (it set it up)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
            return status, True
        time.sleep(0.002)


for line in iter(requests.readline, b""):
    req = json.loads(line)
    if "import" in req:
        for name in req["import"]:
            # A private module (a package's C part: _asyncio) is left to the package that imports it,
            # in the order it needs: _asyncio imported before asyncio keeps a second registry of
            # tasks, and aiohttp then finds no current task ("Timeout should be used inside a task").
            if name.startswith("_"):
                continue
            try:
                importlib.import_module(name)
            except BaseException:
                pass
        replies.write(b"{}\n")
        continue
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            batch_child(req) if "batch" in req else child(req)
        finally:
            os._exit(99)
    status, timed_out = wait(pid, req["timeout"], req.get("statuses"))
    replies.write((json.dumps({"returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
                               "seconds": time.monotonic() - start}) + "\n").encode())
"""


@dataclass
class Run:
    argv: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    seconds: float
    opens: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""  # the transcript's name as the command sees it (its path, or "-")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def base_env(tmp: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANTHROPIC_", "CLAUDE_", "CTXPIPE_", "PYTEST_", "DISABLE_")) and key not in ("COLUMNS", "LINES", "XDG_CACHE_HOME")
    }
    for name in ("home", "tmp"):
        (tmp / name).mkdir(exist_ok=True)
    env.update(
        {
            "NO_COLOR": "1",
            "TERM": "dumb",
            "COLUMNS": "120",
            "HOME": str(tmp / "home"),
            "TMPDIR": str(tmp / "tmp"),
            "TIKTOKEN_CACHE_DIR": str(tmp / "tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


class Zygote:
    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = open(workdir / "zygote.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, cwd=workdir, env=base_env(workdir)
        )
        self.counter = itertools.count()
        self.workdir = workdir

    def run(self, argv: Sequence[Any], **options: Any) -> Run:
        """`python -m MODULE ARGV` (ctxpipe's own __main__ by default) in a child forked from the zygote."""
        request = self.request(argv, **options)
        status = self.ask(request)
        return self.collect(request, status["returncode"], status["timed_out"], status["seconds"])

    def imported_by(self, argv: Sequence[Any], **options: Any) -> set[str]:
        """The modules a run of `argv` had imported when it ended (run()'s options, no audit log): what
        to `ask` the zygote to import, so that later runs cost their own work only."""
        listing = self.workdir / f"{next(self.counter)}.modules"
        self.run(argv, audit=False, modules=listing, **options)
        names = set(listing.read_text().split()) if listing.exists() else set()
        listing.unlink(missing_ok=True)
        return names

    def run_batch(self, jobs: Sequence[tuple[Sequence[Any], dict[str, Any]]]) -> list[Run]:
        """The runs (argv and run()'s options each) one after another in one child forked from the
        zygote, each as a fresh `python -m` (see batch_child): the child's first touches of the
        zygote's memory are paid once, not once a run. A run the batch did not end (a timeout, a
        crash, a thread left running) is run again on its own."""
        requests = [self.request(argv, **options) for argv, options in jobs]
        statuses = self.workdir / f"{next(self.counter)}.statuses"
        self.ask({"batch": requests, "statuses": str(statuses), "timeout": max(request["timeout"] for request in requests)})
        ended = {status["index"]: status for status in map(json.loads, statuses.read_text().splitlines())} if statuses.exists() else {}
        statuses.unlink(missing_ok=True)
        return [
            self.collect(request, ended[n]["returncode"], False, ended[n]["seconds"]) if n in ended else self.run(argv, **options)
            for n, (request, (argv, options)) in enumerate(zip(requests, jobs))
        ]

    def request(
        self,
        argv: Sequence[Any],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: Path | None = None,
        stdin_pipe: bool = True,
        terminal: str | None = None,
        timeout: float = TIMEOUT,
        audit: bool = True,
        modules: Path | None = None,
        module: str = "ctxpipe",
    ) -> dict[str, Any]:
        n = next(self.counter)
        out, err, log = (self.workdir / f"{n}.{kind}" for kind in ("out", "err", "log"))
        return {
            "argv": [str(arg) for arg in argv],
            "cwd": str(cwd),
            "env": env,
            "stdin": str(stdin) if stdin else None,
            "stdin_pipe": stdin_pipe,
            "stdout": terminal or str(out),
            "stderr": terminal or str(err),
            "timeout": timeout,
            "log": str(log) if audit else None,
            "modules": str(modules) if modules else None,
            "module": module,
        }

    def collect(self, request: dict[str, Any], returncode: int, timed_out: bool, seconds: float) -> Run:
        """The run's outcome from the files it wrote (removed once read)."""
        terminal = request["stdout"].startswith("/dev/pts/")
        out, err = Path(request["stdout"]), Path(request["stderr"])
        log = Path(request["log"]) if request["log"] else None
        stdout = b"" if terminal else out.read_bytes()
        stderr = b"" if terminal else err.read_bytes()
        opens = [json.loads(line) for line in log.read_text().splitlines()] if log and log.exists() else []
        for path in ([] if terminal else [out, err]) + ([log] if log else []):
            path.unlink(missing_ok=True)
        return Run(request["argv"], returncode, stdout, stderr, timed_out, seconds, opens)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"the zygote died: {(self.workdir / 'zygote.log').read_text()[-3000:]}")
        return json.loads(reply)

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.log.close()
