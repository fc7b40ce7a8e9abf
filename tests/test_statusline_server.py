"""The status line's server (cli/statusline_server.py): a run whose memo misses asks it, and prints the
line its own process would have worked out, byte for byte, without loading the library; the first
such run starts it; it ends by itself (idle, its socket gone), answers only its user, and a run that
gets no answer (none there, a silent or a broken one) works the line out itself.

The suite runs with CTXPIPE_STATUSLINE_SERVER=0 (conftest.py): these tests turn it on for their runs,
each with a cache folder of its own, and remove the folder at the end, which ends the server."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import simple
from ctxpipe.cli.statusline import SERVER_DEADLINE, Options, ask_server, server_path
from ctxpipe.cli.statusline_server import CodeWatch
from ctxpipe.core.statusline import SERVER_FORMAT, SERVER_PREFIX, Saving, StatusFigures, answer_figures, server_answer
from helpers import CLEAN_ENV, aged, child_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the status line's server runs on Linux only (SO_PEERCRED)")

SERVED = {"CTXPIPE_STATUSLINE_SERVER": "1"}


def run_line(
    cache: Path, payload: dict[str, Any], *flags: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`ctxpipe statusline FLAGS` in a child, as Claude Code runs it, with the memo removed first (a
    miss, as after a message), `python -X importtime` (what the run loaded is on stderr)."""
    for memo in (cache / "ctxpipe" / "statusline").glob("*.line"):
        memo.unlink()
    full_env = child_env({**CLEAN_ENV, "XDG_CACHE_HOME": str(cache), **SERVED, **(env or {})})
    full_env.pop("NO_COLOR")  # the line's colours are part of what is compared
    command = [sys.executable, "-X", "importtime", "-m", "ctxpipe", "statusline", *flags]
    done = subprocess.run(command, input=json.dumps(payload).encode(), capture_output=True, env=full_env, cwd=cwd, timeout=60)
    assert done.returncode == 0 and done.stdout.count(b"\n") == 1, done
    return done


def loaded_the_library(done: subprocess.CompletedProcess[bytes]) -> bool:
    """Whether the run imported ctxpipe.api (the count's code): a run the server answered does not."""
    return any(line.rstrip().endswith("| ctxpipe.api") for line in done.stderr.decode().splitlines())


def errors_of(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [line for line in done.stderr.decode().splitlines() if not line.startswith("import time:")]


def socket_of(cache: Path) -> Path:
    found = server_path({"XDG_CACHE_HOME": str(cache)})
    assert found is not None
    return Path(found)


def listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def wait_for(predicate: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"waited {seconds} s"
        time.sleep(0.05)


def servers_at(path: Path) -> list[int]:
    """The process ids of servers started for the socket at `path` (from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            words = cmdline.read_bytes().split(b"\0")
            if b"ctxpipe.cli.statusline_server" in words and os.fsencode(path) in words:
                found.append(int(cmdline.parent.name))
    return found


@contextlib.contextmanager
def cache_folder() -> Iterator[Path]:
    """A cache folder of the test's; at the end it goes, and with it any server there (asserted).
    Short, in /tmp: a socket's path must fit in 108 bytes (pytest's own folders are too deep)."""
    cache = Path(tempfile.mkdtemp(prefix="ctxpipe-sl-"))
    try:
        yield cache
    finally:
        path = socket_of(cache)
        shutil.rmtree(cache, ignore_errors=True)
        wait_for(lambda: not servers_at(path), 10)  # its socket gone, the server ends within a second or two


def session_file(folder: Path, tokens: int = 120_000, follow_up: bool = False) -> Path:
    """A transcript last written a minute ago (the memo keeps its figures); with `follow_up`, a prompt
    after the last response (its tokens are estimated, calibrated: the count's longer path)."""
    session = simple(tokens)
    if follow_up:
        session.user("Now refactor the header parser so that it handles folded lines, and add tests for the edge cases. " * 20)
    return aged(session.write(folder / f"session-{tokens}-{follow_up}.jsonl"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache folder with a server answering in it, started as Claude Code's first run starts it."""
    folder = tmp_path_factory.mktemp("served")
    with cache_folder() as cache:
        path = session_file(folder)
        first = run_line(cache, {"transcript_path": str(path)}, "--no-savings")
        assert loaded_the_library(first)  # no server yet: it worked the line out itself, and started one
        wait_for(lambda: listening(socket_of(cache)))
        yield cache


@pytest.fixture
def folder(served: Path, tmp_path: Path) -> Path:
    """Where a test of the served cache folder writes its transcripts."""
    return tmp_path


def test_the_first_miss_starts_a_server_and_the_next_ones_are_its(served: Path, folder: Path) -> None:
    path = socket_of(served)
    info = path.stat()
    assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.getuid()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(servers_at(path)) == 1
    transcript = session_file(folder, 130_000)
    answered = run_line(served, {"transcript_path": str(transcript)}, "--no-savings")
    own = run_line(served, {"transcript_path": str(transcript)}, "--no-savings", "--no-server")
    assert answered.stdout == own.stdout and b"130K/200K" in own.stdout
    assert not loaded_the_library(answered) and loaded_the_library(own)
    assert errors_of(answered) == errors_of(own) == []
    # The server kept the memo, as the run would have: the next run on the unchanged file reads it.
    [memo] = (served / "ctxpipe" / "statusline").glob("*.line")
    assert json.loads(memo.read_bytes())["figures"][1] == 130_000
    assert len(servers_at(path)) == 1  # the runs it answered started no other


CASES: dict[str, tuple[dict[str, Any], list[str], dict[str, str]]] = {
    # name: (payload beside transcript_path, flags, environment)
    "normal": ({}, [], {}),
    "warning": ({"tokens": 150_000}, [], {}),
    "blocking": ({"tokens": 178_000}, [], {}),
    "estimated-tail": ({"follow_up": True}, [], {}),
    "environment": ({}, [], {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}),
    "flags": ({}, ["--window", "500000", "--autocompact-pct", "60"], {}),
    "no-auto-compact": ({}, ["--no-auto-compact", "--no-color"], {}),
    "rules-2.1.88": ({}, ["--rules", "2.1.88"], {}),
    "claude-code-fields": (
        {"status": {"version": "2.1.332", "model": {"id": "claude-opus-4-8"}, "context_window": {"context_window_size": 1_000_000}}},
        [],
        {},
    ),
    "escaped-model": ({"status": {"model": {"display_name": "Opus\x1b[31m \u202e\ud83d"}}}, [], {}),
    "cache-cold": ({"status": {"prompt_cache": {"warm": False}}}, [], {}),
    "relative-path": ({"relative": True}, [], {}),
    "no-such-transcript": ({"missing": True}, [], {}),
    "no-transcript": ({"status": {"context_window": {"current_usage": {"input_tokens": 5000, "output_tokens": 10}}}, "none": True}, [], {}),
}


@pytest.mark.parametrize("case", CASES)
def test_the_servers_line_is_the_runs_own(served: Path, folder: Path, case: str) -> None:
    """Whatever the JSON, flags, environment and working folder: the same bytes, whoever worked them out."""
    given, flags, env = CASES[case]
    transcript = session_file(folder, given.get("tokens", 120_000), given.get("follow_up", False))
    payload: dict[str, Any] = dict(given.get("status", {}))
    if given.get("relative"):
        payload["transcript_path"] = transcript.name  # relative to the run's working folder
    elif given.get("missing"):
        payload["transcript_path"] = str(folder / "gone.jsonl")
    elif not given.get("none"):
        payload["transcript_path"] = str(transcript)
    answered = run_line(served, payload, "--no-savings", *flags, env=env, cwd=folder)
    own = run_line(served, payload, "--no-savings", "--no-server", *flags, env=env, cwd=folder)
    assert answered.stdout == own.stdout, (answered.stdout, own.stdout)
    assert errors_of(answered) == errors_of(own) == []
    assert not loaded_the_library(answered), "the server did not answer: the run worked the line out itself"


def test_the_saving_is_the_same_when_the_server_works_the_line_out(served: Path, folder: Path) -> None:
    """With the saving (the background refresh the server starts, as a run would): the same line."""
    transcript = session_file(folder, 140_000)
    payload = {"transcript_path": str(transcript)}
    run_line(served, payload)  # starts the refresh of the saving
    entries = served / "ctxpipe" / "statusline"
    wait_for(lambda: list(entries.glob("*.json")) and not [lock for lock in entries.glob("*.lock") if not lock.name.startswith(SERVER_PREFIX)], 60)
    answered = run_line(served, payload)
    own = run_line(served, payload, "--no-server")
    assert answered.stdout == own.stdout and not loaded_the_library(answered)


@pytest.mark.parametrize("off", [["--no-server"], ["env"]])
def test_no_server_and_the_variable_start_none(tmp_path: Path, off: list[str]) -> None:
    with cache_folder() as cache:
        transcript = session_file(tmp_path)
        flags, env = (off, {}) if off != ["env"] else ([], {"CTXPIPE_STATUSLINE_SERVER": "0"})
        done = run_line(cache, {"transcript_path": str(transcript)}, "--no-savings", *flags, env=env)
        assert loaded_the_library(done)
        # A run that starts a server makes its lock before it ends: none here, and no socket.
        assert sorted(p.name for p in (cache / "ctxpipe" / "statusline").iterdir()) == [p.name for p in (cache / "ctxpipe" / "statusline").glob("*.line")]
        assert not servers_at(socket_of(cache))


def serve_in_child(path: Path, idle: float) -> subprocess.Popen[bytes]:
    code = f"import sys; from ctxpipe.cli.statusline_server import serve; sys.exit(serve({str(path)!r}, idle={idle}))"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())


def test_the_server_ends_after_its_idle_time_and_when_its_socket_goes(tmp_path: Path) -> None:
    idle_path, removed_path = tmp_path / "idle.sock", tmp_path / "removed.sock"
    idle, removed = serve_in_child(idle_path, 1.0), serve_in_child(removed_path, 600.0)
    try:
        wait_for(lambda: listening(idle_path) and listening(removed_path))
        removed_path.unlink()
        assert removed.wait(timeout=10) == 0 and idle.wait(timeout=15) == 0
        assert not idle_path.exists()  # it takes its socket with it
        assert (removed.stderr.read(), idle.stderr.read()) == (b"", b"")  # type: ignore[union-attr]
    finally:
        for child in (idle, removed):
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            child.wait()


def test_a_second_server_leaves_the_first_one_be(tmp_path: Path) -> None:
    path = tmp_path / "one.sock"
    first = serve_in_child(path, 600.0)
    try:
        wait_for(lambda: listening(path))
        second = serve_in_child(path, 600.0)
        assert second.wait(timeout=30) == 0  # another one answers there: it ends at once
        assert listening(path) and first.poll() is None
    finally:
        first.kill()
        first.wait()


@contextlib.contextmanager
def stand_in(path: Path, reply: bytes | None, every: float = 0.0) -> Iterator[None]:
    """A listener at the server's socket that reads each request, then sends `reply` and closes (with
    `every`, a byte at a time, one every `every` seconds), or (None) keeps the connection open without
    a word."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    held: list[socket.socket] = []

    import threading

    stop = threading.Event()

    def loop() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            if reply is None:
                held.append(conn)
                continue
            with conn:
                with contextlib.suppress(OSError):
                    while conn.recv(1 << 16):
                        pass
                    for piece in [reply[n : n + 1] for n in range(len(reply))] if every else [reply]:
                        if every and stop.wait(every):
                            break
                        conn.sendall(piece)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


@pytest.mark.parametrize("reply", [None, b"not json", b'{"format": 1, "figures": [1, 2], "saving_stale": false}'], ids=["silent", "garbage", "wrong-shape"])
def test_a_run_the_server_does_not_answer_works_the_line_out_itself(tmp_path: Path, reply: bytes | None) -> None:
    with cache_folder() as cache:
        transcript = session_file(tmp_path)
        payload = {"transcript_path": str(transcript)}
        own = run_line(cache, payload, "--no-savings", "--no-server")
        path = socket_of(cache)
        with stand_in(path, reply):
            started = time.monotonic()
            done = run_line(cache, payload, "--no-savings")
            took = time.monotonic() - started
            assert done.stdout == own.stdout and errors_of(done) == [] and loaded_the_library(done)
            assert not Path(str(path) + ".lock").exists()  # a server is there: the run started no other
        assert took >= SERVER_DEADLINE if reply is None else took < SERVER_DEADLINE


def test_a_socket_left_by_a_server_that_died_is_taken_over(tmp_path: Path) -> None:
    with cache_folder() as cache:
        path = socket_of(cache)
        path.parent.mkdir(parents=True, mode=0o700)
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dead.bind(str(path))  # a socket file no process listens on (a server killed with SIGKILL leaves one)
        dead.close()
        transcript = session_file(tmp_path)
        own = run_line(cache, {"transcript_path": str(transcript)}, "--no-savings")
        wait_for(lambda: listening(path))
        answered = run_line(cache, {"transcript_path": str(transcript)}, "--no-savings")
        assert answered.stdout == own.stdout and not loaded_the_library(answered)


def raw_request(path: Path, request: bytes, user: int | None = None) -> bytes:
    """What the server at `path` answers `request` (b"" when it closes the connection without one),
    asked from a forked child running as `user`."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no exec (another user may not reach this interpreter), no return
        try:
            os.close(read)
            if user is not None:
                os.setgroups([])
                os.setgid(user)
                os.setuid(user)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(10)
                conn.connect(str(path))
                try:
                    conn.sendall(request)
                    conn.shutdown(socket.SHUT_WR)
                    answer = b"".join(iter(lambda: conn.recv(1 << 16), b""))
                except (ConnectionResetError, BrokenPipeError):  # closed unread, before or while it was sent: no answer
                    answer = b""
            os.write(write, b"ok:" + answer)
        except BaseException as exc:
            os.write(write, f"error: {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as got:
        said = got.read()
    os.waitpid(pid, 0)
    assert said.startswith(b"ok:"), said
    return said[3:]


@pytest.mark.skipif(os.getuid() != 0, reason="connects as another user (nobody): needs root")
def test_the_server_answers_only_its_user(served: Path, folder: Path) -> None:
    """A request another user sends (the socket opened to anyone here) gets no answer; the same
    request from the server's user gets the figures."""

    path = socket_of(served)
    transcript = session_file(folder, 125_000)
    os.chmod(transcript.parent, 0o755)
    os.chmod(transcript, 0o644)
    request = json.dumps(
        {
            "format": SERVER_FORMAT,
            "status": {"transcript_path": str(transcript)},
            "options": list(Options(savings=False)),
            "environ": {},
            "now": time.time(),
            "cwd": "/",
            "keep": None,
        }
    ).encode()
    opened = [(p, stat.S_IMODE(p.stat().st_mode)) for p in (served, path.parent.parent, path.parent, path)]
    try:
        for folder_or_socket, _ in opened:
            os.chmod(folder_or_socket, 0o777)  # anyone may connect now: the server itself must refuse
        other = raw_request(path, request, user=65534)
        own = raw_request(path, request)
    finally:
        for folder_or_socket, mode in opened:
            os.chmod(folder_or_socket, mode)
    assert other == b""
    found = answer_figures(own, None, time.time())
    assert found is not None and found.tokens == 125_000


# --- the wire, and the code's age ---------------------------------------------------------------


@pytest.mark.parametrize(
    "found",
    [
        StatusFigures("Opus 4.8", 106_100, 1_000_000, "normal", 860_900, False, Saving("collapse", 12_000), "cache 3m left", None, saving_stale=True),
        StatusFigures("\ud83d\x1b[31m", None, None, None, None, True, None, None, "transcript unreadable"),
        StatusFigures(None, 0, 200_000, "blocking", -3_000, False, None, None, None),
    ],
)
def test_an_answer_gives_back_the_figures(found: StatusFigures) -> None:
    back = answer_figures(server_answer(found), {"warm": False}, time.time())
    assert back == found._replace(cache="cache cold")  # the prompt cache is the run's clock's, never the server's


def answer_of(figures: list[Any], format: int = SERVER_FORMAT, **extra: Any) -> bytes:
    return json.dumps({"format": format, "figures": figures, "saving_stale": False, **extra}).encode()


GOOD = [None, 1, 2, "normal", 1, False, None, None]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"null",
        b"\xff\xfe",
        answer_of(GOOD, format=SERVER_FORMAT + 1),  # another version's
        json.dumps({"format": SERVER_FORMAT, "figures": GOOD}).encode(),  # no saving_stale
        answer_of([None, 1.5, 2, "normal", 1, False, None, None]),
        answer_of([None, 1, 2, "loud", 1, False, None, None]),
        # A figure no float holds (the line would stop on it), and one past what a count can be.
        answer_of([None, 10**400, 200_000, "normal", 1, False, None, None]),
        answer_of([None, 1, 200_000, "normal", -(10**16), False, None, None]),
        # A saving of a stage the line does not offer: its name would be printed as it is.
        answer_of([None, 1, 200_000, "normal", 1, False, ["\x1b]52;c;cHduZWQ=\x07", 5_000], None]),
        answer_of([None, 1, 200_000, "normal", 1, False, ["collapse", 10**20], None]),
    ],
    ids=["empty", "list", "null", "not-utf8", "other-format", "no-saving-stale", "float", "level", "huge", "past-max", "stage", "huge-saving"],
)
def test_an_answer_of_another_shape_is_none(data: bytes) -> None:
    assert answer_figures(data, None, time.time()) is None


def test_the_line_escapes_a_note_and_a_stage_read_back() -> None:
    """A memo or an answer is read back from a file or a socket: the note it carries reaches the
    terminal escaped, as the model's name does (a stage is one of SAVING_STAGES by then)."""
    from ctxpipe.cli.statusline import line

    printed = line(StatusFigures(None, note="\x1b]52;c;cHduZWQ=\x07\x1b[2J"), color=False)
    assert "\x1b" not in printed and "\x07" not in printed and "52;c;cHduZWQ=" in printed


def test_a_module_changed_since_the_server_started_is_seen(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("")
    name = "ctxpipe._statusline_server_probe"
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__file__ = str(module)
    try:
        now = time.time()
        os.utime(module, (now - 10, now - 10))
        watch = CodeWatch(now - 5)  # started after the probe was written
        assert not watch.changed() and not watch.changed()
        os.utime(module, (now - 1, now - 1))  # modified since
        assert watch.changed()
        # First seen already modified after the start (a module the first run loaded, after an upgrade).
        assert CodeWatch(now - 5).changed()
        # Dated ahead (a clock set back): not a change while it stays as it is, a change when it moves.
        os.utime(module, (now + 3600, now + 3600))
        ahead = CodeWatch(now)
        assert not ahead.changed() and not ahead.changed()
        module.write_text("x = 1\n")
        assert ahead.changed()
        # Replaced after a first look by a copy with its old time kept (cp -p): another file.
        then = now - 3600
        os.utime(module, (then, then))
        kept = CodeWatch(now)
        assert not kept.changed()
        copy = tmp_path / "copy.py"
        copy.write_text("x = 2\n")
        os.utime(copy, (then, then))
        copy.replace(module)
        assert kept.changed()
        module.unlink()
        assert ahead.changed()  # gone (uninstalled): as changed
    finally:
        del sys.modules[name]


def test_a_run_asks_no_socket_that_is_not_its_users(tmp_path: Path) -> None:
    """A socket file of another owner, or a plain file at the socket's place: not asked, not replaced."""
    path = tmp_path / "server.sock"
    path.write_bytes(b"")
    assert ask_server(str(path), {}, Options(), {}, time.time(), None) == (None, True)
    assert ask_server(str(tmp_path / "none.sock"), {}, Options(), {}, time.time(), None) == (None, False)


# --- what the review of the server found (session 54) ---------------------------------------------


def test_a_run_whose_working_folder_was_removed_prints_its_line(served: Path, folder: Path) -> None:
    """The run cannot say its working folder to the server: it works the line out itself, exit 0."""
    transcript = session_file(folder, 135_000)
    payload = json.dumps({"transcript_path": str(transcript)}).encode()
    env = child_env({**CLEAN_ENV, "XDG_CACHE_HOME": str(served), **SERVED})
    gone = folder / "gone"
    script = f'mkdir {gone} && cd {gone} && rmdir {gone} && exec "$0" -m ctxpipe statusline --no-savings --no-color'
    done = subprocess.run(["sh", "-c", script, sys.executable], input=payload, capture_output=True, env=env, timeout=60)
    own = run_line(served, {"transcript_path": str(transcript)}, "--no-savings", "--no-color", "--no-server")
    assert (done.returncode, done.stderr, done.stdout) == (0, b"", own.stdout), done


def test_a_server_that_drips_its_answer_is_given_up_on_at_the_deadline(tmp_path: Path) -> None:
    """SERVER_DEADLINE bounds the whole exchange, not each read: a byte every 0.3 s does not hold the run."""
    with cache_folder() as cache:
        transcript = session_file(tmp_path)
        payload = {"transcript_path": str(transcript)}
        own = run_line(cache, payload, "--no-savings", "--no-server")
        with stand_in(socket_of(cache), server_answer(StatusFigures("Dripped")), every=0.3):
            started = time.monotonic()
            done = run_line(cache, payload, "--no-savings")
            took = time.monotonic() - started
        assert done.stdout == own.stdout and loaded_the_library(done)
        assert SERVER_DEADLINE <= took < SERVER_DEADLINE + 2.5, took


def test_a_run_that_drips_its_request_holds_the_server_no_longer_than_its_deadline(served: Path, folder: Path) -> None:
    """One connection sending a byte every 0.3 s is closed by READ_DEADLINE; the next run is answered."""
    from ctxpipe.cli.statusline_server import READ_DEADLINE

    path = socket_of(served)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.connect(str(path))
        started = time.monotonic()
        closed = None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while time.monotonic() - started < READ_DEADLINE + 5:
                slow.sendall(b" ")
                time.sleep(0.3)
        closed = time.monotonic() - started
    assert closed is not None and closed < READ_DEADLINE + 2, closed
    transcript = session_file(folder, 131_000)
    answered = run_line(served, {"transcript_path": str(transcript)}, "--no-savings")
    assert b"131K" in answered.stdout and not loaded_the_library(answered)


@pytest.mark.skipif(os.getuid() != 0, reason="listens as another user (nobody): needs root")
def test_a_run_asks_no_server_of_another_user(tmp_path: Path) -> None:
    """A socket file of the run's user, but the process listening on it runs as another (a socket
    swapped in): the run sends it nothing and works the line out itself, and starts no server."""
    with cache_folder() as cache:
        transcript = session_file(tmp_path)
        payload = {"transcript_path": str(transcript)}
        own = run_line(cache, payload, "--no-savings", "--no-server")
        path = socket_of(cache)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        heard, said = os.pipe()
        bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bound.bind(str(path))  # the file is root's: only the peer's credentials tell
        pid = os.fork()
        if pid == 0:  # the other user: listens (its credentials are taken then), says what it was sent
            try:
                os.close(heard)
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                bound.listen(4)
                bound.settimeout(20)
                os.write(said, b"l")
                conn, _ = bound.accept()
                conn.settimeout(5)
                got = b"".join(iter(lambda: conn.recv(1 << 16), b""))
                os.write(said, b"r" if got else b"n")
            finally:
                os._exit(0)
        os.close(said)
        bound.close()
        try:
            assert os.read(heard, 1) == b"l"
            done = run_line(cache, payload, "--no-savings")
            assert done.stdout == own.stdout and loaded_the_library(done) and errors_of(done) == []
            assert not Path(str(path) + ".lock").exists()  # one listens there: not replaced
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert os.read(heard, 1) == b"n"  # the run connected, and hung up without a word of its request
        os.close(heard)


@pytest.mark.skipif(os.getuid() != 0, reason="gives the cache folder to another user (nobody): needs root")
def test_a_cache_folder_of_another_user_is_not_used(tmp_path: Path) -> None:
    """A shared XDG_CACHE_HOME whose statusline folder another user made: no memo is read or written
    there and no server is asked or started; the line is the run's own."""
    with cache_folder() as cache:
        transcript = session_file(tmp_path)
        payload = {"transcript_path": str(transcript)}
        own = run_line(cache, payload, "--no-savings", "--no-server")
        entries = cache / "ctxpipe" / "statusline"
        for memo in entries.glob("*"):
            memo.unlink()
        os.chown(entries, 65534, 65534)
        os.chmod(entries, 0o777)
        done = run_line(cache, payload, "--no-savings")
        again = run_line(cache, payload, "--no-savings")
        assert done.stdout == again.stdout == own.stdout and loaded_the_library(again)
        assert list(entries.iterdir()) == [] and not servers_at(socket_of(cache))


def test_a_cache_folder_open_to_others_is_closed(tmp_path: Path) -> None:
    with cache_folder() as cache:
        entries = cache / "ctxpipe" / "statusline"
        entries.mkdir(parents=True, mode=0o755)
        os.chmod(entries, 0o755)
        run_line(cache, {"transcript_path": str(session_file(tmp_path))}, "--no-savings", "--no-server")
        assert stat.S_IMODE(entries.stat().st_mode) == 0o700 and list(entries.glob("*.line"))


def test_a_server_of_another_ctxpipe_ends_at_once(tmp_path: Path) -> None:
    """Started for a run of ctxpipe in another folder (found through that run's working folder, not
    the one `-m` finds from /), the server answers nothing: it ends without listening."""
    path = tmp_path / "other.sock"
    done = subprocess.run([sys.executable, "-m", "ctxpipe.cli.statusline_server", str(path), str(tmp_path)], capture_output=True, env=child_env(), timeout=60)
    assert (done.returncode, done.stderr) == (0, b"") and not path.exists()


def test_a_server_that_finds_another_holding_the_socket_leaves_it(tmp_path: Path) -> None:
    """The hold (an flock beside the socket) is the server's for its life: another started meanwhile,
    even on a socket file no process listens on, neither takes it over nor removes it."""
    import fcntl

    from ctxpipe.core.statusline import SERVER_HELD_SUFFIX

    path = tmp_path / "held.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    inode = path.stat().st_ino
    with open(str(path) + SERVER_HELD_SUFFIX, "wb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        second = serve_in_child(path, 600.0)
        assert second.wait(timeout=30) == 0
        assert path.stat().st_ino == inode and not listening(path)
    third = serve_in_child(path, 600.0)  # let go: the next one takes the dead socket over
    try:
        wait_for(lambda: listening(path))
    finally:
        third.kill()
        third.wait()


def test_a_server_too_busy_to_take_the_run_is_not_replaced(tmp_path: Path) -> None:
    """A server whose queue of connections is full listens all the same: the run gives up on it
    within its deadline (it works the line out itself) and does not start another beside it."""
    path = tmp_path / "busy.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(0)  # never accepted: one connection fills the queue
    queued: list[socket.socket] = []
    try:
        for _ in range(4):
            waiting = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            waiting.setblocking(False)
            try:
                waiting.connect(str(path))
            except BlockingIOError:
                waiting.close()
                break
            queued.append(waiting)
        started = time.monotonic()
        assert ask_server(str(path), {}, Options(), {}, time.time(), None) == (None, True)
        assert time.monotonic() - started < SERVER_DEADLINE + 1
    finally:
        for waiting in queued:
            waiting.close()
        listener.close()
