"""`ctxpipe statusline`: the command Claude Code's `statusLine` setting runs after every message.

It reads the JSON Claude Code writes on stdin and prints one line: tokens / window, percent, the
level (warn's names), tokens left before autocompact, and the biggest saving microcompact or
collapse would make now. This module is the command line's side: its flags, stdin, the line's
words and colours, exit codes. What the line says comes from `ctxpipe.api.status_line` (the
library's status line, jobs/statusline.py). It starts on a light path (cli/entry.py sends it here
before typer, rich or any stage module loads, and api.py loads none of them at its top): the library
counts only the transcript's end, and the savings come from a cache that a detached background run
brings up to date. Lighter still when the transcript has not changed since the last run: the line's
figures come from a memo (core/statusline.py keys it), and neither the library nor orjson loads.

The stdin JSON is untrusted: any field may be missing, null or of another type. What cannot be
known is left out, never a traceback; the line always ends the run with exit 0, but for bad flags
(2, as every command) or stdin on a terminal (2: nothing to read).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence

from ..core.errors import CHANGED
from ..core.records import TYPE_CHECKING
from ..core.statusline import (
    MAX_MEMO,
    MEMO_SUFFIX,
    SERVER_FORMAT,
    SERVER_LOCK_STALE,
    SERVER_LOCK_SUFFIX,
    StatusFigures,
    StatusInputs,
    answer_figures,
    cache_folder,
    cache_name,
    file_stamp,
    memo_bytes,
    memo_figures,
    memo_key,
    server_name,
    text,
)
from .status import ExitStatus

if TYPE_CHECKING:  # typing is not loaded on this light path (core/records.py)
    from typing import IO, Any, NamedTuple, NoReturn
else:
    from ..core.records import NamedTuple

PROG = "ctxpipe statusline"
MAX_STDIN = 1 << 20  # Claude Code's JSON is a few hundred bytes; more is not it
LEVEL_COLOUR = {"normal": "32", "warning": "33", "autocompact": "35", "blocking": "1;31"}  # as warn's green/yellow/magenta/bold red
DIM, RESET = "\x1b[2m", "\x1b[0m"
NO_STATUS = "ctxpipe: no status JSON on stdin"

HELP = """Usage: ctxpipe statusline [OPTIONS]

  Print one status line for Claude Code from the JSON it writes on stdin.

  Made for Claude Code's statusLine setting (~/.claude/settings.json):
  {"statusLine": {"type": "command", "command": "ctxpipe statusline"}}. The line
  shows the active context's tokens / window, the percent used, the level
  (normal, warning, autocompact, blocking: as warn), the tokens left before
  autocompact, and the biggest saving microcompact or collapse would make now:

    ⛁ 106.1K/1M 11% normal · 860.9K to autocompact · collapse −12K · cache 3m left · Opus 4.8

  Tokens are count's figure for transcript_path (its end only: fast); the window
  is context_window.context_window_size when Claude Code gives it, else the
  model catalog's (1M for a native-1M model). Without a readable transcript the
  line uses context_window.current_usage, then context_window.used_percentage
  of the window, or says "no transcript". The rules of the running Claude Code
  (version) apply, else those of the version that wrote the transcript; --rules
  picks others. "cache 3m left" or "cache cold" says when the prompt cache
  expires (prompt_cache; left out when Claude Code gives none). The model is
  model.display_name, else the catalog's name for model.id, else the id.

  The saving needs the whole file: it is computed by a detached background run
  and cached under $XDG_CACHE_HOME/ctxpipe/statusline (default
  ~/.cache/ctxpipe/statusline); until then the last known saving is shown.
  The line's figures are kept there too, one memo per transcript: a run on a
  transcript whose size, times and inode have not changed since, with the same
  JSON fields, flags and environment, reads them back instead of counting
  again. Nothing is written beside the transcript.

  After a message the transcript has changed: the figures are worked out by the
  status line's server, a process that keeps the counting code loaded (started
  detached by the first run that finds none; it listens on a socket in that
  folder, answers only its user, and ends after 10 minutes without a run, when
  its socket goes, or when ctxpipe is upgraded). --no-server, or
  CTXPIPE_STATUSLINE_SERVER=0, works them out in the run's own process instead.

  Colour (ANSI) is on by default, even on a pipe, as Claude Code renders it;
  NO_COLOR (set to any value) or --no-color turns it off, --color forces it.
  The environment variables warn reads apply (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE…);
  flags win. Stdin that is empty or not a JSON object prints "ctxpipe: no
  status JSON on stdin" and exits 0; stdin on a terminal exits 2.

  Example:  echo '{"transcript_path": "session.jsonl"}' | ctxpipe statusline

Options:
  --window N                  Context window in tokens (default: the model catalog's; 1M for [1m] names).  [1<=x<=999999999999999]
  --autocompact-pct PERCENT   Autocompact at this percentage (above 0, at most 100) of the effective window (can only lower the threshold).
  --max-output-tokens N
                              The model's max output tokens (sets the reserve: min(this, 20,000)).  [1<=x<=999999999999999]
  --no-auto-compact           As DISABLE_AUTO_COMPACT: no autocompact level.
  --rules VERSION             Apply the rules of this Claude Code release (2.1.88, 2.1.332 or latest) instead of those of the version that wrote the session.
  --color / --no-color        Colour the line with ANSI codes (default: on, unless NO_COLOR is set).
  --no-savings                Leave out the saving (no background run).
  --no-server                 Work the figures out in this process, not in the status line's server.
  -h, --help                  Show this message and exit.
"""


class UsageError(Exception):
    """A bad flag or value: exit 2 with one line, as every command."""


class Options(NamedTuple):  # a NamedTuple, not a dataclass: a dataclass costs ~1 ms of start-up to make
    window: int | None = None
    autocompact_pct: float | None = None
    max_output_tokens: int | None = None
    no_auto_compact: bool = False
    color: bool | None = None  # None: on unless NO_COLOR is set
    savings: bool = True
    rules: str | None = None  # --rules: a Claude Code release (or latest) over the running one's version
    server: bool = True  # --no-server: work the figures out in this process, never in the status line's server


# --- flags -----------------------------------------------------------------------------------------
# A hand-made parser, not argparse: these few flags do not pay argparse's import, and the usage line,
# help and error messages keep the other commands' shape.


def _positive_int(flag: str, given: str) -> int:
    from ..core.limits import MAX_COUNT

    try:
        value = int(given)
    except ValueError:
        raise UsageError(f"Invalid value for '{flag}': {given!r} is not a valid integer.") from None
    if not 1 <= value < MAX_COUNT:
        raise UsageError(f"Invalid value for '{flag}': {value} is not in the range 1<=x<={MAX_COUNT - 1}.")
    return value


def _percentage(flag: str, given: str) -> float:
    try:
        value = float(given)
    except ValueError:
        raise UsageError(f"Invalid value for '{flag}': {given!r} is not a valid float.") from None
    if not 0 < value <= 100:  # NaN fails this too
        raise UsageError(f"Invalid value for '{flag}': {value:g} is not a percentage above 0 and at most 100")
    return value


def _release(flag: str, given: str) -> str:
    """--rules: a Claude Code release whose rules ctxpipe knows, or latest (as cli/options.claude_code_rules)."""
    from ..core.rules import known_rules

    try:
        known_rules(given)
    except ValueError as exc:
        raise UsageError(f"Invalid value for '{flag}': {exc}") from None
    return given


VALUED = {"--window": _positive_int, "--max-output-tokens": _positive_int, "--autocompact-pct": _percentage, "--rules": _release}
SWITCHES = {
    "--no-auto-compact": ("no_auto_compact", True),
    "--color": ("color", True),
    "--no-color": ("color", False),
    "--no-savings": ("savings", False),
    "--no-server": ("server", False),
}


def parse_flags(argv: Sequence[str]) -> Options | None:
    """The options, or None when help was asked for. Raises UsageError."""
    values: dict[str, Any] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            return None
        name, equals, given = arg.partition("=")
        if name in VALUED:
            if not equals:
                if not args:
                    raise UsageError(f"Option '{name}' requires an argument.")
                given = args.pop(0)
            values[name[2:].replace("-", "_")] = VALUED[name](name, given)
        elif arg in SWITCHES:
            field, value = SWITCHES[arg]
            values[field] = value
        elif arg.startswith("-") and arg != "-":
            raise UsageError(f"No such option: {arg}")
        else:
            raise UsageError(f"Got unexpected extra argument ({arg})")
    return Options(**values)


# --- the stdin JSON --------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Python's json reads them, JSON has none


def read_status(stream: IO[bytes]) -> dict[str, Any] | None:
    """Claude Code's JSON object from stdin, or None when stdin holds no JSON object. Python's own
    json, not orjson: importing orjson costs the light path a third of its start-up (it loads
    dataclasses, uuid, platform); the object is a few hundred bytes. A lone surrogate escape
    ("\\ud83d": JavaScript writes one for a string cut inside an emoji) is legal JSON and reads as one."""
    data = stream.read(MAX_STDIN + 1)
    if len(data) > MAX_STDIN:
        return None
    import json

    try:
        status = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError):  # not UTF-8 (or a BOM), not JSON, nested too deep, or nothing at all
        return None
    return status if isinstance(status, dict) else None


# --- the figures -----------------------------------------------------------------------------------


def figures(status: Mapping[str, Any], options: Options, environ: Mapping[str, str], now: float | None = None) -> StatusFigures:
    """What the line says for Claude Code's `status` under the command's flags and environment (the
    budget settings warn reads there, flags over them); `now` (epoch seconds, default the clock)
    dates the prompt cache's expiry."""
    from ..api import StatusOptions, guard_truncation, status_line
    from .budget_environment import budget_settings

    if _OWN_PROCESS:  # armed here, not at the start: a run the memo answers loads no api
        from .terminal import shown

        guard_truncation(lambda name: f"ctxpipe: error: {shown(name)}: {CHANGED}", ExitStatus.ERROR)
    budget = budget_settings(environ, options.autocompact_pct, options.max_output_tokens, None, options.no_auto_compact, options.rules)
    return status_line(status, StatusOptions(options.window, budget, options.savings), environ, now)


# --- the memo --------------------------------------------------------------------------------------
# Claude Code runs the line after every message, and again on other events with the transcript as it
# was: the figures are kept per transcript (core/statusline.py says what keys them), so such a run
# costs one stat of the transcript and one small read, and loads nothing heavy.


class Memo(NamedTuple):
    transcript: str  # as given (relative to the working folder, as the library reads it)
    file: str  # the memo, in the savings cache's folder
    key: str  # core.statusline.memo_key


def memo_for(given: StatusInputs, options: Options, environ: Mapping[str, str]) -> Memo | None:
    """Where the figures for the status JSON's fields under `options` and `environ` are kept; None
    without a transcript."""
    from .. import __version__
    from .budget_environment import ENVIRONMENT

    path = text(given.transcript_path)
    if path is None:
        return None
    absolute = os.path.abspath(path)
    flags = list(options._replace(color=None, server=True))  # the colour is the line's, and where they are worked out is not the figures'
    try:
        key = memo_key(__version__, absolute, given, flags, [environ.get(name, "") for name in ENVIRONMENT.values()])
    except (RecursionError, ValueError):  # a field nested as deep as json.loads took it, one level too deep to write
        return None
    folder = cache_folder(environ.get("XDG_CACHE_HOME"), os.path.expanduser("~"))
    if folder is None:  # no home folder: no memo
        return None
    return Memo(path, os.path.join(folder, cache_name(absolute) + MEMO_SUFFIX), key)


def stamp(path: str) -> tuple[bool, list[int] | None]:
    """Whether the transcript's state can key a memo, and that state: its size, modification time,
    inode and change time (None: there is no such file). A folder, a FIFO or a path that cannot be
    looked at is not memoised."""
    import stat

    try:
        info = os.stat(path)
    except FileNotFoundError:
        return True, None
    except (OSError, ValueError):
        return False, None
    if not stat.S_ISREG(info.st_mode):
        return False, None
    return True, file_stamp(info)


def recall(memo: Memo, state: list[int] | None, prompt_cache: Any, now: float) -> StatusFigures | None:
    """The memo's figures when it was made for this key and this state of the transcript, else None
    (none yet, another state, or a file that is not a memo of ours)."""
    try:
        with open(memo.file, "rb") as handle:
            data = handle.read(MAX_MEMO + 1)
    except OSError:
        return None
    return memo_figures(data, memo.key, state, prompt_cache, now) if len(data) <= MAX_MEMO else None


def remember(memo: Memo, state: list[int] | None, found: StatusFigures, now: float) -> None:
    """Keep `found` for the next run, written atomically (concurrent runs each write a whole memo, the
    last one stays) but not synced (a memo lost in a crash is computed again, and the fsync would be
    a few ms more after every message); a memo that cannot be written is not one: the next run
    computes again."""
    data = memo_bytes(memo.key, state, found, now)
    if data is None:
        return
    from ..api import atomic_file
    from ..core.errors import CtxpipeError

    try:
        os.makedirs(os.path.dirname(memo.file), mode=0o700, exist_ok=True)
        with atomic_file(memo.file, durable=False) as out:
            out.write(data)
    except (OSError, CtxpipeError):
        pass


def memoised_figures(status: Mapping[str, Any], options: Options, environ: Mapping[str, str]) -> StatusFigures:
    """`figures`, from the memo when the transcript and everything else they depend on is as it was
    when they were worked out; else worked out and kept, when the transcript did not change while
    they were (the same state before and after)."""
    import time

    given = StatusInputs.of(status)
    memo = memo_for(given, options, environ)
    now = time.time()  # before the stamp: the transcript was as it says at least this late
    if memo is None or not private_folder(os.path.dirname(memo.file)):
        return worked_out(status, options, environ, now, None)
    keyed, before = stamp(memo.transcript)
    if keyed:
        found = recall(memo, before, given.prompt_cache, now)
        if found is not None:
            return found
    return worked_out(status, options, environ, now, Keep(memo, before) if keyed else None)


class Keep(NamedTuple):
    """Where figures worked out are kept, and the transcript's state before they were."""

    memo: Memo
    before: list[int] | None


def keep(kept: Keep, found: StatusFigures, now: float) -> None:
    """Keep `found` in the memo, when the transcript did not change while they were worked out."""
    if stamp(kept.memo.transcript) == (True, kept.before):
        remember(kept.memo, kept.before, found, now)


# --- the server ------------------------------------------------------------------------------------
# After a message the memo misses, and working the figures out here costs the count's imports (about
# 50 ms, most of it orjson's own: it loads dataclasses, uuid and datetime). The status line's server
# (cli/statusline_server.py) has them loaded: a miss asks it over a Unix socket in the cache folder,
# and a run that finds none works the figures out itself and starts one, detached, for the next runs.

SERVER_VARIABLE = "CTXPIPE_STATUSLINE_SERVER"  # "0": as --no-server
SERVER_DEADLINE = 2.0  # seconds for the server's answer; then the run works the figures out itself
SERVER_ENVIRONMENT = ("XDG_CACHE_HOME",)  # what the figures read of the environment, with the budget's
# What connecting to a server's socket raises when none listens there (no file, or one left by a server
# that ended); any other failure (a full queue, a timeout) is a server that is there but busy.
NOT_LISTENING = (FileNotFoundError, ConnectionRefusedError)


def worked_out(status: Mapping[str, Any], options: Options, environ: Mapping[str, str], now: float, kept: Keep | None) -> StatusFigures:
    """`figures`, kept as `kept` says: by the status line's server when one answers, else by this
    process, which starts a server when none listens (unless --no-server or CTXPIPE_STATUSLINE_SERVER=0
    says not to use one)."""
    path = server_path(environ) if options.server and environ.get(SERVER_VARIABLE) != "0" else None
    if path is not None and private_folder(os.path.dirname(path)):
        found, listening = ask_server(path, status, options, environ, now, kept)
        if found is not None:
            return found
        if not listening:
            start_server(path)  # first: it loads while this process works the figures out
    found = figures(status, options, environ, now)
    if kept is not None:
        keep(kept, found, now)
    return found


def private_folder(folder: str) -> bool:
    """Whether `folder` is this user's and closed to everyone else (made so when it is missing, or this
    user's but open to others): the memos and the server's socket are read from there, and in a folder
    another user may write to (a shared XDG_CACHE_HOME) they could be anyone's. One lstat a run."""
    import stat

    try:
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False  # a link, or another user's: not used
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)
    except OSError:
        return False
    return True


def package_folder() -> str:
    """The folder of the ctxpipe this process runs: a server answers only runs of the same code."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def server_path(environ: Mapping[str, str]) -> str | None:
    """The server's socket for this install, interpreter and home folder (core.statusline.server_name);
    None where the server cannot tell who asks (SO_PEERCRED is Linux's), or the path is too long for
    a Unix socket."""
    if not sys.platform.startswith("linux"):
        return None
    from .. import __version__

    home = os.path.expanduser("~")
    folder = cache_folder(environ.get("XDG_CACHE_HOME"), home)
    if folder is None:  # no home folder: no server
        return None
    path = os.path.join(folder, server_name(__version__, package_folder(), sys.executable, home))
    return path if len(os.fsencode(path)) < 108 else None  # sun_path's size on Linux


def peer_is_this_user(conn: Any) -> bool:
    """Whether the process at the other end of the Unix socket `conn` runs as this user (SO_PEERCRED):
    the server asks it of every run, and a run of the server it reached."""
    import _socket

    if not hasattr(_socket, "SO_PEERCRED"):
        return False  # no way to tell who is there: trust nobody
    credentials = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(credentials[4:8], sys.byteorder) == os.getuid()


def ask_server(
    path: str, status: Mapping[str, Any], options: Options, environ: Mapping[str, str], now: float, kept: Keep | None
) -> tuple[StatusFigures | None, bool]:
    """The server's figures for this run (it keeps them as `kept` says), or None: no server (or not
    this user's), no whole answer within SERVER_DEADLINE of asking, or one that is not figures; and
    whether a server listens there (a run starts one only where none does: one that fails a request,
    or is busy, is not replaced)."""
    # _socket, not socket: socket.py's wrapper loads enum, selectors and array (3 ms of this run).
    import _socket
    import json
    import stat
    import time

    deadline = time.monotonic() + SERVER_DEADLINE  # for the whole exchange, however the server drips its answer
    try:
        info = os.stat(path)
    except OSError:
        return None, False
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
        return None, True  # not ours to ask, nor to replace
    try:
        cwd = os.getcwd()  # a relative transcript_path is this run's
    except OSError:
        return None, True  # its working folder was removed: this run works the figures out as it can
    from .budget_environment import ENVIRONMENT

    names = (*ENVIRONMENT.values(), *SERVER_ENVIRONMENT)
    request = {
        "format": SERVER_FORMAT,
        "status": status,
        "options": list(options),
        "environ": {name: environ[name] for name in names if name in environ},
        "now": now,
        "cwd": cwd,
        "keep": None if kept is None else [kept.before],  # the server works out where the memo is, as this run did
    }
    try:
        data = json.dumps(request).encode()
    except (ValueError, RecursionError):  # a status JSON json cannot write back (a lone surrogate, …)
        return None, True
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            conn.settimeout(SERVER_DEADLINE)
            conn.connect(path)
        except NOT_LISTENING:
            return None, False
        except OSError:
            return None, True  # one is there but cannot take the run now (its queue full, too slow)
        try:
            if not peer_is_this_user(conn):
                return None, True  # a socket swapped for another user's: not asked, not replaced
            conn.sendall(data)  # the timeout bounds the whole call
            conn.shutdown(_socket.SHUT_WR)
            answer = received_whole(conn, deadline, MAX_MEMO)
        except OSError:  # no answer in time
            return None, True
    finally:
        conn.close()
    if answer is None:
        return None, True
    return answer_figures(answer, StatusInputs.of(status).prompt_cache, now), True


def received_whole(conn: Any, deadline: float, limit: int) -> bytes | None:
    """What the other end of `conn` sends until it closes its side, when it has by `deadline` (of
    time.monotonic) and in at most `limit` bytes, else None: one bound for the whole exchange,
    however the other end drips it (the run's wait for its answer, the server's for a request)."""
    import time

    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        conn.settimeout(left)
        chunk = conn.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


def start_server(path: str) -> None:
    """A detached server at `path`, unless a run started one less than SERVER_LOCK_STALE ago (its lock
    file: the server removes it once it listens)."""
    lock = path + SERVER_LOCK_SUFFIX
    try:
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            import time

            if 0 <= time.time() - os.stat(lock).st_mtime < SERVER_LOCK_STALE:
                return  # one is starting, or could not: not again before the lock is stale (a lock dated ahead is stale)
            os.unlink(lock)
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        import subprocess

        subprocess.Popen(
            # The server checks that it runs this package (one found through this run's working folder
            # would not be the one `-m` finds from /), and ends at once if not.
            [sys.executable, "-m", "ctxpipe.cli.statusline_server", path, package_folder()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not Claude Code's to wait for, nor the terminal's Ctrl-C's
            close_fds=True,
            cwd="/",
        )
    except OSError:
        pass  # no cache folder, or no process: the next miss tries again once the lock is stale


# --- the line --------------------------------------------------------------------------------------


def human(tokens: int) -> str:
    """76500 → 76.5K, 200000 → 200K, 1000000 → 1M, 850 → 850."""
    sign, tokens = ("-", -tokens) if tokens < 0 else ("", tokens)
    for size, unit in ((1_000_000, "M"), (1_000, "K")):
        if tokens >= size:
            figure = f"{tokens / size:.1f}".removesuffix(".0")
            return f"{sign}{figure}{unit}"
    return f"{sign}{tokens}"


def line(found: StatusFigures, color: bool) -> str:
    from .terminal import shown

    def paint(words: str, code: str) -> str:
        return f"\x1b[{code}m{words}{RESET}" if color else words

    parts: list[str] = []
    if found.percent is not None and found.tokens is not None and found.window is not None:  # the first says the others; mypy needs them said
        level = found.level or "normal"
        parts.append(f"⛁ {human(found.tokens)}/{human(found.window)} {found.percent}% " + paint(level, LEVEL_COLOUR[level]))
        if found.autocompact_off:
            parts.append("autocompact off")
        elif found.to_autocompact is not None:
            left = found.to_autocompact
            parts.append(f"{human(left)} to autocompact" if left > 0 else f"{human(-left)} past autocompact")
        if found.saving is not None:
            parts.append(f"{shown(found.saving.stage)} −{human(found.saving.tokens)}")
    else:
        parts.append("⛁ " + shown(found.note or "no transcript"))  # our words, but read back from a memo or a server: escaped too
    if found.cache is not None:
        parts.append(found.cache)  # our own words and figures only
    if found.model:
        parts.append(shown(found.model))  # from stdin or the transcript: escaped, whatever it holds
    separator = paint(" · ", "2") if color else " · "
    return separator.join(parts)


def wants_color(options: Options, environ: Mapping[str, str]) -> bool:
    if options.color is not None:
        return options.color
    return "NO_COLOR" not in environ  # any value, even empty, turns it off


def run(argv: Sequence[str], stdin: IO[bytes] | None, stdout: IO[str], stderr: IO[str], environ: Mapping[str, str]) -> int:
    """The command: the exit status, the line written to `stdout`."""
    from .terminal import shown

    try:
        options = parse_flags(argv)
    except UsageError as exc:
        print(f"ctxpipe: error: {shown(exc)} (see '{PROG} --help')", file=stderr)
        return ExitStatus.USAGE
    if options is None:
        stdout.write(HELP)
        return ExitStatus.OK
    if stdin is None or stdin.isatty():
        print(f"ctxpipe: error: statusline reads Claude Code's status JSON on stdin (see '{PROG} --help')", file=stderr)
        return ExitStatus.USAGE
    status = read_status(stdin)
    if status is None:
        print(NO_STATUS, file=stdout)
        return ExitStatus.OK
    print(line(memoised_figures(status, options, environ), wants_color(options, environ)), file=stdout)
    return ExitStatus.OK


# --- the process -----------------------------------------------------------------------------------


def main(argv: Sequence[str]) -> NoReturn:
    """The console entry for `ctxpipe statusline` (cli/entry.py): cli/app.main's outcomes on the light
    path. A closed stdout is quiet, Ctrl-C exits 130, a bug is one line on stderr and exit 1."""
    try:
        status = _process(argv)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the outcome is decided: a late Ctrl-C changes nothing
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        sys.exit(ExitStatus.INTERRUPTED)
    sys.exit(status)


def with_standard_streams(argv: Sequence[str], stderr: IO[str] | None = None) -> int:
    """`run` on this process's standard streams: for this light entry point and for the typer
    command that lists statusline in `ctxpipe --help` and runs it in-process."""
    from .encoding import tolerant, tolerant_standard_streams

    tolerant_standard_streams()
    return run(argv, sys.stdin.buffer if sys.stdin is not None else None, sys.stdout, tolerant(stderr) if stderr else sys.stderr, os.environ)


_OWN_PROCESS = False  # the light entry point's process (not the typer app's): `figures` guards its maps


def _process(argv: Sequence[str]) -> int:
    global _OWN_PROCESS
    from .terminal import shown

    for number in (0, 1, 2):  # started with `>&-`: no file opened later may take a standard number
        try:
            os.fstat(number)
        except OSError:
            os.open(os.devnull, os.O_RDWR)
    stderr = sys.stderr if sys.stderr is not None else open(os.devnull, "w")
    if sys.stdout is None:
        return ExitStatus.OK  # nobody to show a line to
    _OWN_PROCESS = True  # a file truncated under its map ends the process with one line and exit 1
    try:
        status = with_standard_streams(argv, stderr)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away: quietly, as every command
        from .emit import detach

        detach(sys.stdout)
        return ExitStatus.OK
    except OSError as exc:  # stdout cannot take the line (a full disk behind it): said as every command says it, not a bug
        from ..api import write_error  # the error path only: the line's run loads no api
        from .emit import detach

        detach(sys.stdout)

        print(f"ctxpipe: error: {shown(str(write_error('stdout', exc)))}", file=stderr)
        return ExitStatus.ERROR
    except Exception as exc:  # a bug: one line naming it (CTXPIPE_DEBUG=1 shows the traceback)
        if os.environ.get("CTXPIPE_DEBUG"):
            raise
        from ..core.errors import InternalError

        print(f"ctxpipe: error: {shown(InternalError.of(None, exc))}", file=stderr)
        return ExitStatus.ERROR
    return status
