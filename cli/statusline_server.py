"""The status line's server: `python -m ctxpipe.cli.statusline_server SOCKET PACKAGE`, started detached by
`ctxpipe statusline` (cli/statusline.py) when a run had to work its figures out and found no server.

Claude Code runs the status line after every message, and after a message the memo misses (the
transcript grew): a new process would pay the count's imports again (orjson alone loads dataclasses,
uuid and datetime, about twice Python's own start). This process has them loaded. It listens on a
Unix socket in the status line's cache folder (core.statusline.server_name: one per install,
interpreter and home folder) and answers each run with the figures `cli.statusline.figures` works out
for the run's status JSON, flags, environment, clock and working folder, as the run itself would.

It answers only its own user (SO_PEERCRED; a run checks the server's the same way), one run at a
time, each given READ_DEADLINE to send its request; it keeps a run's memo where the run would (worked
out here, never a path a request names). It runs only as the ctxpipe at PACKAGE (the starting run's),
holds an flock beside its socket for its life (two never take over one socket), and ends on its own:
after IDLE seconds without a run, as soon as its socket file is removed or replaced, and when
ctxpipe's code changed under it (an upgrade: it answers nothing more). Any failure is an answer the
run does not take: the run then works the figures out itself. Nothing is printed: its standard
streams are /dev/null.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import sys
import time
from collections.abc import Mapping
from typing import Any

from .statusline import NOT_LISTENING, package_folder, peer_is_this_user, received_whole

IDLE = 600.0  # seconds without a run: then the server ends (the next miss starts another)
TICK = 1.0  # seconds between looks at the socket file and the clock while no run comes
MAX_REQUEST = 4 << 20  # bytes: a status JSON (at most 1 MiB: cli.statusline.MAX_STDIN) and an environment
# Seconds a run has to send its whole request (it sends it at once): one that drips holds the others no longer.
READ_DEADLINE = 2.0
PROBE_TIMEOUT = 1.0  # seconds to learn whether a server listens at a socket file


class CodeWatch:
    """Whether a module of ctxpipe's this process loaded changed after the server started: a server
    whose code changed under it (an upgrade, an edit in a development checkout) must not answer with
    the old code's figures. Each module's file is stamped when first seen and compared with `!=` from
    then on, so a module dated ahead (a clock set back) is not taken for a change at every look; one
    first seen already modified after the start (loaded at a run, after an upgrade) is a change."""

    def __init__(self, started: float) -> None:
        self.started = started  # epoch seconds, taken before the imports
        self.seen: dict[str, tuple[int, int, int, int]] = {}

    def changed(self) -> bool:
        now = time.time()
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None) if name == "ctxpipe" or name.startswith("ctxpipe.") else None
            if not isinstance(path, str):
                continue
            try:
                info = os.stat(path)
            except OSError:
                return True  # gone: uninstalled, or replaced
            stamp = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_dev)
            before = self.seen.get(path)
            if before is None:
                self.seen[path] = stamp
                if self.started < info.st_mtime <= now:
                    return True
            elif before != stamp:
                return True
        return False


def _listen(path: str) -> socket.socket | None:
    """A listening socket at `path`, or None when another server listens there (or none can)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)  # the socket file: its owner only
        try:
            listener.bind(path)
        except OSError:
            if _answers(path):
                listener.close()
                return None  # another server is there
            os.unlink(path)  # left by a server that died
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(16)
    except OSError:
        listener.close()
        return None
    return listener


def _answers(path: str) -> bool:
    """Whether a server listens at `path`: one that is busy (its queue full) or slow listens too."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT)
        try:
            probe.connect(path)
        except NOT_LISTENING:
            return False
        except OSError:
            return True
    return True


def _held(path: str) -> int | None:
    """The server's hold on `path` (an flock on a file beside it, kept while the server runs, let go when
    it ends, however it ends), or None when another server holds it: two servers taking over a socket
    left by a dead one at once would each remove the other's."""
    import fcntl

    from ..core.statusline import SERVER_HELD_SUFFIX

    try:
        holder = os.open(path + SERVER_HELD_SUFFIX, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(holder)
        return None
    return holder


def _reap() -> None:
    """Collect the background refreshes this server started (jobs.statusline) that have ended."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _inode(path: str) -> int | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino if stat.S_ISSOCK(info.st_mode) else None


def _request(conn: socket.socket) -> dict[str, Any] | None:
    """The run's request, whole (it shuts its side when sent) within READ_DEADLINE, or None."""
    data = received_whole(conn, time.monotonic() + READ_DEADLINE, MAX_REQUEST)
    if data is None:
        return None
    try:
        request = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return request if isinstance(request, dict) else None


def answer(request: Mapping[str, Any]) -> bytes | None:
    """The answer to one run's request: the figures its own run would work out, or None."""
    from ..core.statusline import SERVER_FORMAT, StatusInputs, server_answer
    from .statusline import Keep, Options, figures, keep, memo_for

    status, options, environ, now, cwd, kept = (request.get(name) for name in ("status", "options", "environ", "now", "cwd", "keep"))
    if not (
        request.get("format") == SERVER_FORMAT
        and isinstance(status, dict)
        and isinstance(options, list)
        and len(options) == len(Options._fields)
        and isinstance(environ, dict)
        and all(isinstance(name, str) and isinstance(value, str) for name, value in environ.items())
        and isinstance(now, float)
        and isinstance(cwd, str)
        and (kept is None or _keep_shaped(kept))
    ):
        return None
    os.chdir(cwd)  # a relative transcript_path is the run's
    try:
        given = Options(*options)
        found = figures(status, given, environ, now)
        # As the run would: kept where the run keeps it (worked out here, never a path the request
        # names), when the transcript did not change meanwhile.
        memo = memo_for(StatusInputs.of(status), given, environ) if kept is not None else None
        if memo is not None and kept is not None:
            keep(Keep(memo, kept[0]), found, now)
    finally:
        os.chdir("/")  # holds no run's folder between runs
    return server_answer(found)


def _keep_shaped(kept: Any) -> bool:
    """Whether a request's "keep" is [the transcript's state before (its stamp) or null]."""
    return isinstance(kept, list) and len(kept) == 1 and (kept[0] is None or (isinstance(kept[0], list) and all(type(value) is int for value in kept[0])))


def serve(path: str, idle: float = IDLE, package: str | None = None) -> int:
    """Answer runs on the socket at `path` until IDLE seconds pass without one, the socket file goes,
    or the code changes; 0 also when another server is there already, or (`package` given: the folder
    of the ctxpipe the starting run ran) when this is another ctxpipe, which would answer with its figures."""
    watch = CodeWatch(time.time())  # before the imports: a change while they load is seen at the first run
    if package is not None and os.path.realpath(package) != os.path.realpath(package_folder()):
        return 0  # its lock stays: the runs work the figures out themselves, and try again when it is stale
    from .. import api  # what a miss loads, before the first run comes (the count's own modules load at the first)
    from ..core import budget, catalog  # noqa: F401
    from ..core.errors import CHANGED
    from ..core.statusline import SERVER_LOCK_SUFFIX
    from .status import ExitStatus

    if watch.changed():  # stamped now, before any run: code replaced after the start with its old times kept (cp -p) is seen
        with contextlib.suppress(OSError):
            os.unlink(path + SERVER_LOCK_SUFFIX)  # the next run starts the new code's server
        return 0
    # A file cut short under its map ends this process (the run then works its figures out itself).
    api.guard_truncation(lambda name: f"ctxpipe: error: {name}: {CHANGED}", ExitStatus.ERROR)
    holder = _held(path)
    listener = _listen(path) if holder is not None else None
    with contextlib.suppress(OSError):
        os.unlink(path + SERVER_LOCK_SUFFIX)  # the lock of the run that started this one: a server is there now
    if holder is None or listener is None:
        if holder is not None:
            os.close(holder)
        return 0
    bound = _inode(path)
    listener.settimeout(TICK)
    last = time.monotonic()
    try:
        while _inode(path) == bound and time.monotonic() - last < idle:
            _reap()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            last = time.monotonic()
            with conn:
                if watch.changed():
                    return 0  # upgraded under it: no answer (the run works the figures out and starts the new code's server)
                try:
                    request = _request(conn) if peer_is_this_user(conn) else None
                    reply = answer(request) if request is not None else None
                    if reply is not None:
                        conn.sendall(reply)
                except Exception:  # any failure is no answer: the run works the figures out itself
                    pass
    finally:
        listener.close()
        if _inode(path) == bound:
            os.unlink(path)
        os.close(holder)  # last: a server started now finds no socket of this one's to take over
    return 0


def main(argv: list[str]) -> int:
    """`SOCKET PACKAGE`, as cli.statusline.start_server starts it."""
    if len(argv) != 2:
        return 2
    return serve(argv[0], package=argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
