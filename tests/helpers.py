"""Shared test helpers (import with `from helpers import ...`): run the CLI (in this process, or in a
child when the test is about the process), the contract checks on a run's result, fixtures and the corpus."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import importlib.util
import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ctxpipe.cli.budget_environment import ENVIRONMENT

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = Path(os.environ.get("CTXPIPE_CORPUS", ROOT.parent / "shared" / "corpus"))


# Claude Code's budget settings read from the environment (cli/budget_environment.ENVIRONMENT),
# cleared: the environment of the developer running the tests must not change any figure.
CLEAN_ENV = {name: "" for name in ENVIRONMENT.values()}


def corpus_files(kind: str = "claude-code") -> list[Path]:
    """Real transcripts from ../shared/corpus (empty when it is not there)."""
    if not CORPUS.is_dir():
        return []
    files = sorted(CORPUS.glob("*/*.jsonl"))
    codex = [f for f in files if "codex" in f.name]
    return codex if kind == "codex" else [f for f in files if f not in codex]


needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"the shared corpus is not beside this checkout ({CORPUS}); these tests read real transcripts from it"
)


# Commands that read no transcript, so the transcript readers' contracts (bad input, hostile lines,
# fuzzing) do not apply: `hooks` edits Claude Code's settings file (tests/test_hooks.py holds it to
# its own: a settings file that is not JSON is refused and left alone).
READS_NO_TRANSCRIPT = {"hooks"}


def skip_unless_installed(*modules: str, reason: str) -> None:
    """Skip the calling test, or the module at its import, when one of `modules` is not installed
    (`reason` may name it as {module}). Found without importing them, as pytest.importorskip would:
    the suite's every worker imports every test module to collect it, and the SDKs and peers these
    guard take up to a second each to import (anthropic's types alone 0.9 s)."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(reason.format(module=missing[0]), allow_module_level=True)


def registered_commands(readers_only: bool = False) -> list[str]:
    """The names of the commands the CLI declares (`ctxpipe.cli.app.command_names`), sorted: per-command
    contract lists are checked against it, so a new command cannot go uncovered. `readers_only`:
    those that read transcripts (all but READS_NO_TRANSCRIPT)."""
    from ctxpipe.cli.app import command_names

    names = sorted(command_names())
    return [name for name in names if not (readers_only and name in READS_NO_TRANSCRIPT)]


def aged(path: Path, seconds: int = 60) -> Path:
    """The file as if last written `seconds` ago, once a tick of its file system's clock has passed its
    change time, which that sets to now: a file changed less than a tick ago is not taken as
    unchanged (the status line's memo and saving, count's kept counts: core.statusline.settled)."""
    import time

    from ctxpipe.core.statusline import file_stamp, settled

    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - seconds * 10**9))
    while seconds > 0 and not settled(file_stamp(path.stat()), time.time()):
        time.sleep(0.01)
    return path


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a run gets: ours, no colour, 120 columns, no debug tracebacks, then `env`."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    full_env.pop("CTXPIPE_DEBUG", None)
    return full_env


def run_process(
    *args: str | os.PathLike[str], stdin: bytes | None = b"", env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run `python -m ctxpipe ARGS` in a child process, as a user would, capturing bytes. For tests
    about the process itself (its start-up, descriptors, signals, environment); the rest use run_cli."""
    return subprocess.run([sys.executable, "-m", "ctxpipe", *map(str, args)], input=stdin, capture_output=True, env=child_env(env), cwd=cwd, timeout=120)


@dataclass
class Result:
    """What run_cli returns: the fields of subprocess.CompletedProcess that the tests read."""

    args: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes


def run_cli(*args: str | os.PathLike[str], stdin: bytes | None = b"", env: dict[str, str] | None = None, cwd: Path | None = None) -> Result:
    """Run `ctxpipe ARGS` in this process, with what a child would have (test_in_process.py checks
    that both give the same bytes and exit code): descriptors 0-2 are real pipes (stdout's
    descriptor is written directly, stdin may be mapped), sys.std* are new text streams over them,
    the environment and folder are the child's, and the per-process state is fresh. stdin=None
    reads /dev/null (a child would inherit ours). Saves a Python start-up (~0.4 s) per call."""
    from ctxpipe.cli import app as cli

    argv = [str(arg) for arg in args]
    with _child_state(child_env(env), cwd), _standard_pipes(stdin) as captured:
        try:
            cli.main(argv)
            code: Any = 0
        except SystemExit as exc:
            code = exc.code
        if code is not None and not isinstance(code, int):  # sys.exit("message"): Python prints it and exits 1
            print(code, file=sys.stderr)
            code = 1
    return Result(argv, int(code or 0), captured["stdout"], captured["stderr"])


def invoke(*args: str | os.PathLike[str], input: bytes | None = b"", env: dict[str, str] | None = None, cwd: Path | None = None) -> Result:
    """run_cli with `input=` for stdin, the name click's CliRunner uses."""
    return run_cli(*args, stdin=input, env=env, cwd=cwd)


# Module state a new process starts with, as (module, attribute, value): put back before each run
# in this process (and restored after), so one run cannot see another's. An entry whose module or
# attribute is gone is skipped; test_in_process.py fails if the summary breaker is not among them.
FRESH_PROCESS_STATE = [
    ("ctxpipe.jobs.breaker", "_PROCESS", None),  # the process's own summary breaker, made on first use
    # a batch's shared breaker count (a context variable: a new one holds no batch's count)
    ("ctxpipe.jobs.breaker", "_SHARED_FAILURES", contextvars.ContextVar("ctxpipe_shared_failures", default=None)),
    ("ctxpipe.cli.breaker", "_PROCESS", None),  # where the breaker lived before breaker.py
    ("ctxpipe.cli.breaker", "_SHARED_FAILURES", None),
    ("ctxpipe.cli.commands.summarize", "_BREAKER", None),  # where the breaker lived before cli/breaker.py
    ("ctxpipe.jobs.batch", "_SHARED_FAILURES", None),
    ("ctxpipe.jobs.batch", "_BUSY", False),
]


def _fresh_state() -> list[tuple[Any, str, Any]]:
    found = []
    for module_name, name, value in FRESH_PROCESS_STATE:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            found.append((module, name, value))
    return found


@contextlib.contextmanager
def _child_state(env: dict[str, str], cwd: Path | None) -> Iterator[None]:
    """The environment, working folder and module state of a new process, put back afterwards."""
    modules = _fresh_state()
    saved_state = [(module, name, getattr(module, name)) for module, name, _ in modules]
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    for module, name, value in modules:
        setattr(module, name, value)
    os.environ.clear()
    os.environ.update(env)
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for module, name, value in saved_state:
            setattr(module, name, value)


@contextlib.contextmanager
def _standard_pipes(stdin: bytes | None) -> Iterator[dict[str, bytes]]:
    """Descriptors 0, 1 and 2 on pipes (fed and drained by threads, as subprocess.run does) and
    sys.stdin/stdout/stderr built over them the way Python builds them at start-up."""
    captured: dict[str, bytes] = {}
    threads = []
    saved_descriptors = [os.dup(number) for number in (0, 1, 2)]
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    try:
        if stdin is None:
            reading = os.open(os.devnull, os.O_RDONLY)
        else:
            reading, feeding = os.pipe()
            threads.append(threading.Thread(target=_feed, args=(feeding, stdin), daemon=True))
        os.dup2(reading, 0)
        os.close(reading)
        for number, name in ((1, "stdout"), (2, "stderr")):
            draining, writing = os.pipe()
            os.dup2(writing, number)
            os.close(writing)
            threads.append(threading.Thread(target=_drain, args=(draining, captured, name), daemon=True))
        for thread in threads:
            thread.start()
        settings = _stdio_settings(*(os.environ.get(name, "") for name in _STDIO_VARIABLES))
        sys.stdin, sys.stdout, sys.stderr = (_text_stream(number, *settings[number]) for number in (0, 1, 2))
        try:
            yield captured
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a child's exit flush: a failure there is the command's to report
                    if stream is not None:
                        stream.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        for number, saved in zip((0, 1, 2), saved_descriptors):
            os.dup2(saved, number)  # closes the pipes' ends at 0-2: the drains see the end
            os.close(saved)
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), "a copy of the command's stdout or stderr is still open (a descriptor leaked)"


# What decides the encoding and error handler of a new interpreter's sys.std* (surrogateescape under
# C.UTF-8, say). Asked of a child once per combination: this process's own streams may have been
# replaced (pytest-xdist's workers, pytest's capture), so they are no model.
_STDIO_VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE")


@functools.cache
def _stdio_settings(*variables: str) -> list[tuple[str, str]]:
    env = {**os.environ, **dict(zip(_STDIO_VARIABLES, variables))}
    env = {name: value for name, value in env.items() if value or name not in _STDIO_VARIABLES}
    probe = "import sys; print(*(f'{s.encoding} {s.errors}' for s in (sys.stdin, sys.stdout, sys.stderr)), sep=chr(10))"
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True, stdin=subprocess.PIPE).stdout
    return [tuple(line.split()) for line in answer.splitlines()]  # type: ignore[misc]


def _text_stream(number: int, encoding: str, errors: str) -> io.TextIOWrapper:
    # As Python's start-up (create_stdio) does: PYTHONUNBUFFERED: stdout and stderr unbuffered
    # (.buffer is the raw file) and written through; otherwise stderr line-buffered.
    raw = io.FileIO(number, "r" if number == 0 else "w", closefd=False)
    if number == 0:
        return io.TextIOWrapper(io.BufferedReader(raw), encoding=encoding, errors=errors)
    if os.environ.get("PYTHONUNBUFFERED"):
        return io.TextIOWrapper(raw, encoding=encoding, errors=errors, write_through=True)  # type: ignore[arg-type]  # as CPython does
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors=errors, line_buffering=number == 2)


def _feed(descriptor: int, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError), open(descriptor, "wb") as pipe:
        pipe.write(data)


def _drain(descriptor: int, captured: dict[str, bytes], name: str) -> None:
    with open(descriptor, "rb") as pipe:
        captured[name] = pipe.read()


# --- the contract a run keeps (docs: README "Exit codes"): checks shared by the test modules ---------

ERROR_PREFIX = "ctxpipe: error: "


def no_traceback(result: Any) -> str:
    """stderr, decoded, after checking it holds no Python traceback."""
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    return err


def ok(result: Any) -> Any:
    """Exit 0 and no traceback; returns the result."""
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
    no_traceback(result)
    return result


def error_line(result: Any, *words: str, partial_output: bool = False) -> str:
    """Exit 1 and exactly one `ctxpipe: error:` line on stderr, holding every word; nothing on stdout
    (unless `partial_output`: a transcript written to stdout before the bad line). Returns the line."""
    err = no_traceback(result)
    assert result.returncode == 1, (result.returncode, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), f"expected exactly one {ERROR_PREFIX!r} line on stderr, got: {lines!r}"
    for word in words:
        assert word in lines[0], (word, lines[0])
    if not partial_output:
        assert result.stdout == b"", result.stdout[:2000]
    return lines[0]


def usage_error(result: Any, *words: str) -> str:
    """Exit 2 (a bad flag or value), saying what is wrong (every word) on stderr, nothing on stdout. Returns stderr."""
    err = no_traceback(result)
    assert result.returncode == 2, (result.returncode, err)
    assert err.strip(), "a usage error must say what is wrong"
    assert result.stdout == b"", result.stdout[:2000]
    for word in words:
        assert word in err, (word, err)
    return err


# Strict JSON, as a conforming reader takes it (json.loads hooks): no NaN/Infinity, finite numbers.
def no_json_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is out of range")
    return value


DELTAS = {"adjustments"}  # count's adjustments are signed changes, not figures


def _whole(figure: object) -> bool:
    return isinstance(figure, int) and not isinstance(figure, bool) and figure >= 0


def bad_token_figures(value: object, where: str = "") -> list[str]:
    """Token figures (keys ending in 'tokens') that are not whole, non-negative numbers."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in DELTAS:
                continue
            if key.endswith("tokens") and isinstance(item, dict):
                # Token figures by part (report's cost: {"input": …, "cache_read": …}): each one a figure.
                found += [f"{where}{key}.{part}={figure!r}" for part, figure in item.items() if not _whole(figure)]
            elif key.endswith("tokens") and item is not None and not _whole(item):
                found.append(f"{where}{key}={item!r}")
            found += bad_token_figures(item, f"{where}{key}.")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += bad_token_figures(item, f"{where}{index}.")
    return found


def drain_pty(leader: int) -> bytes:
    """Everything a child wrote to a pseudo-terminal whose follower is closed; the leader is closed."""
    out = b""
    try:
        while chunk := os.read(leader, 1 << 16):
            out += chunk
    except OSError:  # the follower is closed: everything is read
        pass
    os.close(leader)
    return out


# A child's script that runs the console entry on its own argv and then says what it loaded (the
# start-up tests append what to report, on stderr).
RUN_THE_ENTRY = """\
import sys
from ctxpipe.cli.entry import main
sys.argv = ["ctxpipe", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
"""
