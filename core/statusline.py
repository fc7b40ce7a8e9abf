"""The status line's pure parts: the fields of Claude Code's status JSON it reads, the prompt cache's
countdown, the figures the line says, and the memo of those figures (the line's cache).

Claude Code runs `ctxpipe statusline` after every message, and a run whose transcript has not changed
since the last one should cost a `stat`, not a count: the command line keeps a memo of the figures
(cli/statusline.py reads and writes it), keyed on everything they depend on: what the status JSON
says (StatusInputs), the command's flags and budget environment, ctxpipe's version, and the
transcript's size, modification time, inode and change time. The prompt cache's countdown depends
on the clock, so it is never memoised: it is worked out again on every run.

Everything here is light to import (no dataclass, no catalog): the memo is read before anything heavy
loads.
"""

from __future__ import annotations

import json
import posixpath
import zlib
from collections.abc import Mapping, Sequence

from .limits import MAX_COUNT
from .records import TYPE_CHECKING

if TYPE_CHECKING:  # types only: core.budget loads the model catalog, and typing is not loaded on the light path (core/records.py)
    from typing import Any, NamedTuple

    from .budget import Level
else:
    from .records import NamedTuple

EPOCH_MS_FROM = 1e11  # an expires_at above this is in milliseconds (1e11 seconds is the year 5138)
MAX_CACHE_LEFT = 86_400.0  # seconds: prompt caches live 5 minutes or an hour; a day off is a wrong clock or a wrong field
MEMO_FORMAT = 1  # bumped when the memo's shape or meaning changes
MEMO_SUFFIX = ".line"
MAX_MEMO = 1 << 16  # bytes: a memo is a few hundred; a status JSON whose key is longer is not memoised
# Seconds: a file changed this recently is not taken as unchanged since (the status line's memo and
# saving, count's kept counts): a write in the same tick of its file system's clock would leave its
# size, times and inode as they were. RACY where the times are kept to the second (ext3, HFS+; 2 s on
# FAT), FINE_RACY where they are finer (ext4, XFS, btrfs, APFS: set from the kernel's tick of 1-10 ms).
RACY = 2.0
FINE_RACY = 0.05
LEVELS = ("normal", "warning", "autocompact", "blocking")  # core.budget's, without loading the catalog
SAVING_STAGES = ("microcompact", "collapse")  # the stages whose dry run the line offers as the saving


# NamedTuples, not dataclasses: a dataclass costs ~1 ms of start-up to make, and the line starts often.


class Saving(NamedTuple):
    stage: str  # one of SAVING_STAGES
    tokens: int  # what its dry run frees, at least jobs.statusline.MIN_SAVING


class StatusFigures(NamedTuple):
    """What the line says; None where it cannot be known."""

    model: str | None  # Claude Code's display name, else the catalog's name for its id or the transcript's model, else the id
    tokens: int | None = None  # the active context: count's figure for the transcript, else Claude Code's usage or percentage
    window: int | None = None
    level: Level | None = None
    to_autocompact: int | None = None  # tokens left before autocompact (negative: past it); None when off or nothing counted
    autocompact_off: bool = False
    saving: Saving | None = None  # the biggest last known saving of the stages
    cache: str | None = None  # the prompt cache, e.g. "cache 3m left" (cache_state)
    note: str | None = None  # what stopped the figures, e.g. "no transcript"
    saving_stale: bool = False  # the saving was worked out for an older state of the transcript (a background refresh is due)

    @property
    def percent(self) -> int | None:
        """The share of the window in use, in whole percent as the line shows it; None without both figures."""
        return round(100 * self.tokens / self.window) if self.tokens is not None and self.window else None


# --- the status JSON -------------------------------------------------------------------------------


def field(data: Any, *keys: str) -> Any:
    """data[k1][k2]…, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


class StatusInputs(NamedTuple):
    """Every field of the status JSON the line reads, as given (any JSON value: the readers below
    check them). The figures are worked out from these alone, so they key the memo."""

    transcript_path: Any
    version: Any  # the running Claude Code's
    model_id: Any
    display_name: Any
    window: Any  # context_window.context_window_size
    current_usage: Any  # context_window.current_usage
    used_percentage: Any  # context_window.used_percentage
    prompt_cache: Any  # the clock's part: never memoised

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> StatusInputs:
        return cls(
            status.get("transcript_path"),
            status.get("version"),
            field(status, "model", "id"),
            field(status, "model", "display_name"),
            field(status, "context_window", "context_window_size"),
            field(status, "context_window", "current_usage"),
            field(status, "context_window", "used_percentage"),
            status.get("prompt_cache"),
        )


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def tokens(value: Any) -> int | None:
    """A token figure: a non-negative whole number (not a bool, not a float) below MAX_COUNT, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT else None


def number(value: Any) -> float | None:
    """A finite number (an int or a float, not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    import math

    try:
        found = float(value)  # an int too large for a float is no figure of ours
    except OverflowError:
        return None
    return found if math.isfinite(found) else None


def _moment(value: Any) -> float | None:
    """prompt_cache.expires_at as epoch seconds. Claude Code 2.1.332 writes whole epoch seconds
    (Math.ceil(ms / 1000)); epoch milliseconds and ISO 8601 with a zone are read too. None for
    anything else (null, a bool, a string without a zone…)."""
    found = number(value)
    if found is not None:
        if found <= 0:
            return None
        return found / 1000 if found > EPOCH_MS_FROM else found
    given = (text(value) or "").strip()
    if not given or len(given) > 64:
        return None
    from datetime import datetime

    if given[-1:] in ("Z", "z"):  # JavaScript's toISOString; Python reads "Z" only from 3.11
        given = given[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(given)
        return moment.timestamp() if moment.tzinfo is not None else None  # no zone: no moment
    except (ValueError, OverflowError, OSError):
        return None


def _duration(seconds: float) -> str:
    """45 → 45s, 200 → 3m, 3600 → 1h, 4500 → 1h15m: what is left, rounded down."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    hours, minutes = divmod(whole // 60, 60)
    return f"{hours}h{minutes}m" if minutes else f"{hours}h"


def cache_state(prompt_cache: Any, now: float) -> str | None:
    """What prompt_cache says of the prompt cache at `now` (epoch seconds): "cache 3m left" while it
    is warm, "cache cold" once it has expired or when it holds nothing (the next request writes the
    whole prompt again), "cache warm" when it is warm with no expiry given; None when it says nothing."""
    if not isinstance(prompt_cache, dict):
        return None
    warm = prompt_cache.get("warm")
    if warm is False:
        return "cache cold"
    expires = _moment(prompt_cache.get("expires_at"))
    if expires is not None and expires - now <= MAX_CACHE_LEFT:  # further off is no prompt cache's expiry
        left = expires - now
        return f"cache {_duration(left)} left" if left >= 1 else "cache cold"
    return "cache warm" if warm is True else None


# --- where the status line keeps what it knows ------------------------------------------------------


def file_stamp(info: Any) -> list[int]:
    """What a transcript's state is keyed on (the memo's, the saving's), from its os.stat_result (the
    core does no I/O, nor imports os for a type): its size, modification time,
    inode and change time (a rewrite of the same size with its old time put back still moves the change time)."""
    return [info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns]


def racy_window(stamp: Sequence[int]) -> float:
    """The tick of the file's clock as its stamp shows it: a change time that is a whole second (one
    in a billion on a file system that keeps nanoseconds) says times are kept to the second. The
    change time, not the modification time: nothing but the kernel sets it."""
    return RACY if stamp[3] % 1_000_000_000 == 0 else FINE_RACY


def changed_at(stamp: Sequence[int]) -> float:
    """When the file last changed, either time (epoch seconds): a tool that puts the old modification
    time back (rsync -t, cp -p) still moves the change time."""
    return max(stamp[1], stamp[3]) / 1e9


def ahead_of_clock(stamp: Sequence[int], moment: float) -> bool:
    """Whether the file's times are more than a tick ahead of `moment` (epoch seconds: a clock set
    back, a copy from a machine whose clock ran ahead). Until the clock comes within a tick of them,
    any change to the file gives it the clock's times, so an equal stamp means unchanged bytes."""
    return moment < changed_at(stamp) - racy_window(stamp)


def settled(stamp: Sequence[int], moment: float) -> bool:
    """Whether a stamp taken at `moment` (epoch seconds) came a tick or more (racy_window) after the
    file last changed (either time): only then does an equal stamp later mean unchanged bytes."""
    return moment - changed_at(stamp) >= racy_window(stamp)


def cache_folder(xdg_cache_home: str | None, home: str, part: str = "statusline") -> str | None:
    """$XDG_CACHE_HOME/ctxpipe/<part> (an absolute XDG_CACHE_HOME only, as the spec says), else
    <home>/.cache/ctxpipe/<part>: the status line's, or `count`'s kept counts (jobs.count_cache).
    None where neither is absolute (no HOME and no passwd entry: expanduser leaves "~"): no cache
    then, rather than one in whatever folder the run is started from. The caller reads the
    environment and the home folder."""
    base = xdg_cache_home or ""
    if not posixpath.isabs(base):
        if not posixpath.isabs(home):
            return None
        base = posixpath.join(home, ".cache")
    return posixpath.join(base, "ctxpipe", part)


def cache_name(absolute_path: str) -> str:
    """The cache files' name (without suffix) for a transcript's absolute path; an entry names its
    path too, so a collision only misses. zlib: built in, where hashlib costs a few ms of start-up."""
    name = absolute_path.encode("utf-8", "surrogatepass")  # any str: a lone surrogate from the JSON too
    return f"{zlib.crc32(name):08x}{zlib.adler32(name):08x}"


# --- the memo ---------------------------------------------------------------------------------------


def memo_key(version: str, absolute_path: str, given: StatusInputs, flags: Sequence[Any], environment: Sequence[str]) -> str:
    """Everything the figures depend on but the transcript's bytes and the clock, as one string:
    ctxpipe's `version`, the transcript's absolute path, the status JSON's fields but prompt_cache,
    the command's `flags` (as plain JSON values) and the budget `environment`'s values. JSON with
    sorted keys: true, 1 and 1.0 stay apart (the readers tell them apart), key order does not."""
    return json.dumps([MEMO_FORMAT, version, absolute_path, list(given._replace(prompt_cache=None)), list(flags), list(environment)], sort_keys=True)


def _figures_list(found: StatusFigures) -> list[Any]:
    """The figures a memo keeps, as plain JSON values (the prompt cache's state is the clock's: not kept)."""
    return [*found[:6], list(found.saving) if found.saving else None, found.note]


def memo_bytes(key: str, stamp: Sequence[int] | None, found: StatusFigures, now: float) -> bytes | None:
    """The memo of `found` for `key` and the transcript's `stamp` (size, mtime, inode, ctime in ns;
    None: no such file) taken at `now` (epoch seconds); None when it is not to be memoised: a saving
    out of date (the refresh will change it), a transcript changed less than a tick ago (either time:
    settled), a key too long."""
    if found.saving_stale or (stamp is not None and not settled(stamp, now)):
        return None
    data = json.dumps({"key": key, "stamp": None if stamp is None else list(stamp), "figures": _figures_list(found)}).encode()
    return data if len(data) <= MAX_MEMO else None


def _figure(value: Any) -> bool:
    """A token figure as ctxpipe works one out: a whole number within MAX_COUNT either way (tokens
    to autocompact may be negative). A memo or an answer is read back, not trusted: a number of 400
    digits would stop the line (no float holds it), a string would print whatever it holds."""
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_COUNT <= value <= MAX_COUNT


def memo_figures(data: bytes, key: str, stamp: Sequence[int] | None, prompt_cache: Any, now: float) -> StatusFigures | None:
    """The figures a memo holds when it was made for `key` and `stamp`, with the prompt cache's state
    at `now`; None for any other memo, or one that is not ours (unreadable, wrong shape)."""
    try:
        memo = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(memo, dict) or memo.get("key") != key or memo.get("stamp") != (None if stamp is None else list(stamp)):
        return None
    return _checked_figures(memo.get("figures"), prompt_cache, now)


def _checked_figures(figures: Any, prompt_cache: Any, now: float, saving_stale: bool = False) -> StatusFigures | None:
    """_figures_list's values back as figures, with the prompt cache's state at `now`; None unless
    they have its shape."""
    if not isinstance(figures, list) or len(figures) != 8:
        return None
    model, count, window, level, left, off, saving, note = figures
    if not (
        (model is None or isinstance(model, str))
        and all(value is None or _figure(value) for value in (count, window, left))
        and (level is None or level in LEVELS)
        and isinstance(off, bool)
        and (saving is None or (isinstance(saving, list) and len(saving) == 2 and saving[0] in SAVING_STAGES and _figure(saving[1])))
        and (note is None or isinstance(note, str))
    ):
        return None
    return StatusFigures(
        model, count, window, level, left, off, Saving(*saving) if saving else None, cache_state(prompt_cache, now), note, saving_stale=saving_stale
    )


# --- the status line's server -------------------------------------------------------------------------
# A memo misses after every message (the transcript grew), and working the figures out in a new process
# costs the imports of the count (orjson alone loads dataclasses, uuid and datetime: about 20 ms, twice
# Python's own start). So a miss asks a resident process that has them loaded (cli/statusline_server.py)
# over a Unix socket in the cache folder; it answers with the figures a run of its own would work out.

SERVER_FORMAT = 2  # bumped when a request's or an answer's shape changes
SERVER_PREFIX = "server-"  # the socket's name (and its lock's) starts so: a transcript's cache files are named by cache_name alone
SERVER_LOCK_SUFFIX = ".lock"  # beside the socket: a run is starting a server there
SERVER_HELD_SUFFIX = ".held"  # beside the socket: flocked by the server that runs there, for its life
SERVER_LOCK_STALE = 30.0  # seconds: a lock older than this was left by a server that could not start


def server_name(version: str, package: str, python: str, home: str) -> str:
    """The server's socket file name: one server per ctxpipe install, interpreter and home folder (a
    server answers only runs that would work the figures out as it does)."""
    return SERVER_PREFIX + cache_name("\0".join((str(SERVER_FORMAT), version, package, python, home))) + ".sock"


def server_answer(found: StatusFigures) -> bytes:
    """What the server sends back for the figures it worked out."""
    return json.dumps({"format": SERVER_FORMAT, "figures": _figures_list(found), "saving_stale": found.saving_stale}).encode()


def answer_figures(data: bytes, prompt_cache: Any, now: float) -> StatusFigures | None:
    """The figures in the server's answer, with the prompt cache's state at `now`; None for anything
    else (the run then works them out itself)."""
    try:
        answer = json.loads(data)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    if not isinstance(answer, dict) or answer.get("format") != SERVER_FORMAT or not isinstance(answer.get("saving_stale"), bool):
        return None
    return _checked_figures(answer.get("figures"), prompt_cache, now, answer["saving_stale"])
