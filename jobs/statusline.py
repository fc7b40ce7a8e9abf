"""The status line's figures: what `ctxpipe statusline` says for the JSON Claude Code writes on its stdin.

Claude Code runs the status line after every message, so this module is loaded on a light path:
counting reads only the transcript's end, and the savings, which need the whole file and the stage
code, come from a small cache that a detached background run of this module (`python -m
ctxpipe.jobs.statusline --refresh PATH CACHE_DIR`) brings up to date. Heavy imports stay inside the
functions that need them.

What Claude Code 2.1.332 writes there (read from its binary): `model{id,display_name}`, `version`
(the running client's: its rules apply, core.rules), `context_window{context_window_size (the
model's window, not the autocompact one), current_usage (the last response's usage), used_percentage
(round(prompt / window × 100))…}` and `prompt_cache{warm, ttl ("5m"/"1h"), expires_at (epoch
seconds, or null)…}` (absent before the first request).

The JSON is untrusted: any field may be missing, null or of another type. What cannot be known is
left out (None, or a note saying why), never an exception. Only the fields core.statusline's
StatusInputs names are read: they key the command line's memo of the figures, which a run on an
unchanged transcript reads instead of calling this module.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.statusline import (
    SAVING_STAGES,
    Saving,
    StatusFigures,
    StatusInputs,
    ahead_of_clock,
    cache_folder,
    cache_name,
    cache_state,
    changed_at,
    file_stamp,
    number,
    racy_window,
    settled,
    text,
    tokens,
)

if TYPE_CHECKING:  # types only: core.budget loads the model catalog, which `import ctxpipe.api` need not
    from ..core.budget import BudgetSettings
    from .count import FileCount


MIN_SAVING = 1_000  # smaller savings are not worth a glance
LOCK_STALE = 600.0  # seconds: a refresh lock older than this was left by a run that died
# The background refresh runs two stages on the whole file (a stage holds its active context parsed,
# which in a session never compacted is the whole file): past this size it records why instead, and
# the line goes without a saving.
REFRESH_LIMIT = 512 << 20
MAX_ENTRY = 1 << 16  # bytes: a saving's entry is a few hundred
SETTLE_TRIES = 3  # stamps a refresh takes while the transcript keeps changing, before it records one not settled
USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


# NamedTuples, not dataclasses: a dataclass costs ~1 ms of start-up to make, and the line starts often.


class StatusOptions(NamedTuple):
    """How to read the status JSON: the command's flags, in library terms."""

    window: int | None = None  # the window in tokens, over Claude Code's context_window_size and the catalog's
    budget: BudgetSettings | None = None  # autocompact and reserve settings (the command's: the environment's, then its flags); None: the defaults
    savings: bool = True  # look up the saving (and start a background refresh when it is out of date)


# --- the status JSON -------------------------------------------------------------------------------


def _version(given: Any) -> str | None:
    """The running Claude Code's version ("2.1.332"), when it is one (core.rules reads it)."""
    from ..core.rules import version_key

    version = text(given)
    return version if version is not None and version_key(version) is not None else None


def _usage(value: Any) -> int | None:
    """count's figure for context_window.current_usage (the last response's usage: the prompt it was
    sent and what it wrote); None unless it is an object with at least one token figure."""
    if not isinstance(value, dict) or all(tokens(value.get(key)) is None for key in USAGE_KEYS):
        return None
    from ..core.count import usage_total

    return usage_total(value)


def _used_percentage(value: Any) -> float | None:
    """context_window.used_percentage: a number from 0 to 100, else None."""
    found = number(value)
    return found if found is not None and 0 <= found <= 100 else None


def model_name(model: str | None) -> str | None:
    """The catalog's display name for a model id, as Claude Code shows it ("Opus 4.8"; "Opus 4.6 (1M
    context)" for claude-opus-4-6[1m]); None for a model the catalog does not know."""
    from ..core.catalog import asks_for_1m, catalog

    found = catalog().find(model)
    if found is None:
        return None
    return found.display_name + (" (1M context)" if asks_for_1m(model) and found.supports_1m_suffix else "")


# --- the figures -----------------------------------------------------------------------------------


def figures(status: Mapping[str, Any], options: StatusOptions, environ: Mapping[str, str], now: float | None = None) -> StatusFigures:
    """What the line says for Claude Code's `status`; `environ` gives the savings cache's folder
    ($XDG_CACHE_HOME), `now` (epoch seconds, default the clock) dates the prompt cache's expiry.
    Only StatusInputs' fields are read (they key the command line's memo)."""
    from ..core.budget import BudgetSettings, thresholds

    given = StatusInputs.of(status)
    settings = options.budget or BudgetSettings()
    version = _version(given.version)
    settings = _running_rules(settings, version)
    given_window = tokens(given.window) or None
    model_id = text(given.model_id)
    path = text(given.transcript_path)
    model = text(given.display_name) or model_name(model_id) or model_id
    if now is None:
        import time

        now = time.time()
    cache = cache_state(given.prompt_cache, now)
    counted, unreadable = _count(path, options.window, settings, model_id) if path else (None, "transcript unreadable")
    if counted is not None:
        used, levels = counted.count.tokens, counted.thresholds
        model = model or model_name(counted.count.model) or counted.count.model
        if options.window is None and given_window is not None:
            # Claude Code's own window for this session (the environment's cap still applies).
            levels = thresholds(counted.count.model, settings, given_window, "context_window_size", version=version or counted.version)
    else:
        window, reason = (options.window, "--window") if options.window else (given_window, "context_window_size") if given_window else (None, None)
        levels = thresholds(model_id, settings, window, reason, window_flag=bool(options.window), version=version)  # no window: the catalog's
        found = _usage(given.current_usage)
        if found is None:
            percent = _used_percentage(given.used_percentage)
            if percent is None:
                return StatusFigures(model, cache=cache, note=unreadable if path else "no transcript")
            # Claude Code's percentage of the model's window (context_window_size; never a capped one).
            found = round(percent * (given_window or options.window or _model_window(model_id, settings, version)) / 100)
        used = found
    saving, stale = _saving(path, environ) if options.savings and counted is not None and path is not None else (None, False)
    return StatusFigures(
        model,
        used,
        levels.window,
        levels.level(used),
        None if levels.autocompact is None else levels.autocompact - used,
        levels.autocompact is None,
        saving,
        cache,
        saving_stale=stale,
    )


def _running_rules(settings: BudgetSettings, version: str | None) -> BudgetSettings:
    """The settings with the rules of the running Claude Code's `version` (a session it resumed runs by
    them now, whatever version wrote the transcript's lines), unless --rules chose others."""
    if version is None or settings.rules is not None:
        return settings
    from ..core.budget import Setting
    from ..core.rules import rules_for

    return replace(settings, rules=Setting(rules_for(version)[0].release, f"version {version} (the running Claude Code's)"))


def _model_window(model: str | None, settings: BudgetSettings, version: str | None) -> int:
    """The model's own window (no autocompact cap) under the rules that apply."""
    from ..core.budget import model_window, settings_rules

    return model_window(model, settings, settings_rules(settings, version)[0])[0]


def _count(path: str, window: int | None, settings: BudgetSettings, model_id: str | None) -> tuple[FileCount | None, str]:
    """count's result for the transcript (as `count --on-error skip`: Claude Code may be writing its
    last line), with Claude Code's model where the transcript names none; None when it cannot be
    read, with what the line says instead."""
    import stat

    from ..core.errors import CtxpipeError
    from ..files.sessions import kind_of
    from ..formats.other_agents import OtherAgentFile
    from .count import CountOptions, count_file

    unreadable = "transcript unreadable"
    counting = CountOptions(window=window, budget=settings, on_error="skip")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device would block or never end
            return None, unreadable
        result = count_file(path, counting, kind_of(path))
        if result.count.model is None and model_id is not None:  # the model sets the reserve (and a [1m] window)
            result = count_file(path, replace(counting, model=model_id), kind_of(path))
    except OtherAgentFile as exc:  # named as every command names it, in the line's few words
        return None, f"transcript is {exc.agent}"
    except (OSError, CtxpipeError, ValueError):
        return None, unreadable
    return result, unreadable


# --- the savings cache -----------------------------------------------------------------------------


def cache_dir(environ: Mapping[str, str]) -> str | None:
    """$XDG_CACHE_HOME/ctxpipe/statusline (an absolute XDG_CACHE_HOME only, as the spec says), else ~/.cache/…"""
    return cache_folder(environ.get("XDG_CACHE_HOME"), os.path.expanduser("~"))


def _key(path: str) -> str:
    """The cache file's name for `path` (the entry names its path too, so a collision only misses)."""
    return cache_name(os.path.abspath(path))


def _stamp(path: str) -> list[int] | None:
    """What a saving is valid for: the transcript's size, modification time, inode and change time
    (the memo's stamp: a rewrite of the same size, its old time put back, still moves the change time)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return file_stamp(info)


def read_cache(folder: int, path: str) -> dict[str, Any] | None:
    """The cached entry for `path` in the open `folder` (count_cache.open_private's), or None (none
    yet, or not one of ours): a regular file of the folder's own, never through a link, never waited
    on (a FIFO put there)."""
    import orjson

    from .count_cache import read_kept

    data = read_kept(folder, _key(path) + ".json", MAX_ENTRY)
    try:
        entry = orjson.loads(data) if data is not None else None
    except ValueError:
        return None
    return entry if isinstance(entry, dict) and entry.get("path") == os.path.abspath(path) else None


def _best(entry: Mapping[str, Any]) -> Saving | None:
    savings = entry.get("savings")
    if not isinstance(savings, dict):
        return None
    found = [Saving(name, freed) for name in SAVING_STAGES if (freed := tokens(savings.get(name))) is not None]
    if not found:
        return None
    best = max(found, key=lambda saving: saving.tokens)
    return best if best.tokens >= MIN_SAVING else None


def _saving(path: str, environ: Mapping[str, str]) -> tuple[Saving | None, bool]:
    """The last known saving for `path`, and whether it is out of date (a background refresh then
    starts, unless one is at work)."""
    from .count_cache import open_private

    directory = cache_dir(environ)
    if directory is None:  # no home folder: no cache
        return None, False
    with contextlib.suppress(OSError):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    folder = open_private(directory)
    if folder is None:  # another user's, open to others, or a link: its entries could say anything, and go anywhere
        return None, False
    try:
        entry = read_cache(folder, path)
    finally:
        os.close(folder)
    stamp = _stamp(path)
    fresh = entry is not None and stamp is not None and entry.get("stamp") == stamp and _trusted(entry, stamp)
    if not fresh and stamp is not None:
        _start_refresh(directory, path)
    return (_best(entry) if entry is not None else None), not fresh


def _trusted(entry: Mapping[str, Any], stamp: list[int]) -> bool:
    """Whether an entry whose stamp equals the transcript's is of these bytes: its stamp was taken a
    tick or more after the transcript last changed (a rewrite of the same size within the tick would
    leave it matching), or the transcript is dated ahead of the clock (no write can give it those
    times again before the clock catches up: then one more refresh)."""
    import time

    taken = entry.get("taken")
    return (type(taken) is int and settled(stamp, taken / 1e9)) or ahead_of_clock(stamp, time.time())


def _settled_stamp(path: str) -> tuple[int, list[int]] | None:
    """When the stamp was taken (epoch ns, just before it) and the stamp, once the transcript has not
    changed for a tick (racy_window; or after SETTLE_TRIES waits for a file that keeps changing); None: no file."""
    import time

    for attempt in range(1, SETTLE_TRIES + 1):
        taken = time.time_ns()  # before the stamp: a change after it is past the stamp's reach
        stamp = _stamp(path)
        if stamp is None:
            return None
        if settled(stamp, taken / 1e9) or ahead_of_clock(stamp, taken / 1e9) or attempt == SETTLE_TRIES:
            return taken, stamp  # dated ahead: no wait helps, and the line trusts it until the clock catches up
        time.sleep(changed_at(stamp) + racy_window(stamp) - taken / 1e9)  # at most two ticks
    return None  # no tries


def _start_refresh(directory: str, path: str) -> None:
    """A detached `--refresh` run for `path`, unless one is running (its lock file exists)."""
    lock = os.path.join(directory, _key(path) + ".lock")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            import time

            if 0 <= time.time() - os.stat(lock).st_mtime < LOCK_STALE:  # a lock dated ahead (the clock set back) is stale
                return  # one is at work
            os.unlink(lock)  # left by a run that died: take it over
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        import subprocess

        subprocess.Popen(
            [sys.executable, "-m", "ctxpipe.jobs.statusline", "--refresh", os.path.abspath(path), directory],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not ours to wait for, and not killed by the terminal's Ctrl-C
            close_fds=True,
        )
    except OSError:  # no cache folder, or no process: the line goes without a saving
        try:
            os.unlink(lock)
        except OSError:
            pass


def refresh(path: str, directory: str) -> None:
    """Run microcompact and collapse (default settings, nothing written) on `path` and cache what each
    would free, keyed to the file's stamp before the run, taken once the file has not changed for a tick
    (else the next line starts another). Then drop the lock."""
    lock = os.path.join(directory, _key(path) + ".lock")
    try:
        stamped = _settled_stamp(path)
        if stamped is None:
            return
        taken, stamp = stamped
        entry: dict[str, Any] = {"path": path, "stamp": stamp, "taken": taken}
        if stamp[0] > REFRESH_LIMIT:
            entry["error"] = f"the transcript is over {REFRESH_LIMIT >> 20} MiB: no saving computed in the background"
        else:
            try:
                entry["savings"] = stage_savings(path)
            except Exception as exc:  # recorded so the next line does not start the same failing run again
                entry["error"] = f"{type(exc).__name__}: {exc}"
        _write_cache(os.path.join(directory, _key(path) + ".json"), entry)
    finally:
        try:
            os.unlink(lock)
        except OSError:
            pass


def stage_savings(path: str) -> dict[str, int]:
    """Tokens each of SAVING_STAGES would free now, as the stage prints it (its default settings, a dry run)."""
    from datetime import datetime, timezone

    from ..files.inputs import mapped
    from .pipeline import run_stage, stage_context, stage_named

    now = datetime.now(timezone.utc)
    freed: dict[str, int] = {}
    with mapped(path) as buffer:
        for name in SAVING_STAGES:
            stage = stage_named(name)
            run = run_stage(stage, buffer, path, stage.settings(), stage_context(now, path), on_error="skip")
            freed[name] = run.report.tokens_freed
            del run  # its views of the map must go before the map closes
    return freed


def _write_cache(target: str, entry: Mapping[str, Any]) -> None:
    """The entry written atomically (files/atomic.py, in the refresh process only); a cache that cannot be
    written is left as it was: the next line tries again."""
    import orjson

    from ..core.errors import CtxpipeError
    from ..files.atomic import atomic_file

    try:
        with atomic_file(target) as out:
            out.write(orjson.dumps(entry))
    except (CtxpipeError, OSError):
        pass


def refresh_in_background(argv: list[str]) -> int:
    """The detached run `_start_refresh` starts: `--refresh PATH CACHE_DIR`, at a low priority."""
    if len(argv) != 3 or argv[0] != "--refresh":
        return 2
    try:
        os.nice(10)  # after the session it reports on, never before it
    except OSError:
        pass
    refresh(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(refresh_in_background(sys.argv[1:]))
