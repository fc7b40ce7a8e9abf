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
left out (None, or a note saying why), never an exception.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.fields import MAX_COUNT

if TYPE_CHECKING:  # types only: core.budget loads the model catalog, which `import ctxpipe.api` need not
    from ..core.budget import BudgetSettings, Level
    from .count import FileCount

STAGES = ("microcompact", "collapse")  # the stages whose dry run the line offers as the saving
MIN_SAVING = 1_000  # smaller savings are not worth a glance
LOCK_STALE = 600.0  # seconds: a refresh lock older than this was left by a run that died
# The background refresh runs two stages on the whole file (a stage holds a few times the file's size
# in memory): past this size it records why instead, and the line goes without a saving.
REFRESH_LIMIT = 512 << 20
USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
EPOCH_MS_FROM = 1e11  # an expires_at above this is in milliseconds (1e11 seconds is the year 5138)
MAX_CACHE_LEFT = 86_400.0  # seconds: prompt caches live 5 minutes or an hour; a day off is a wrong clock or a wrong field


# NamedTuples, not dataclasses: a dataclass costs ~1 ms of start-up to make, and the line starts often.


class StatusOptions(NamedTuple):
    """How to read the status JSON: the command's flags, in library terms."""

    window: int | None = None  # the window in tokens, over Claude Code's context_window_size and the catalog's
    budget: BudgetSettings | None = None  # autocompact and reserve settings (the command's: the environment's, then its flags); None: the defaults
    savings: bool = True  # look up the saving (and start a background refresh when it is out of date)


class Saving(NamedTuple):
    stage: str  # one of STAGES
    tokens: int  # what its dry run frees, at least MIN_SAVING


class StatusFigures(NamedTuple):
    """What the line says; None where it cannot be known."""

    model: str | None  # Claude Code's display name, else the catalog's name for its id or the transcript's model, else the id
    tokens: int | None = None  # the active context: count's figure for the transcript, else Claude Code's usage or percentage
    window: int | None = None
    level: Level | None = None
    to_autocompact: int | None = None  # tokens left before autocompact (negative: past it); None when off or nothing counted
    autocompact_off: bool = False
    saving: Saving | None = None  # the biggest last known saving of STAGES
    cache: str | None = None  # the prompt cache, e.g. "cache 3m left" (cache_state)
    note: str | None = None  # what stopped the figures, e.g. "no transcript"

    @property
    def percent(self) -> int | None:
        """The share of the window in use, in whole percent as the line shows it; None without both figures."""
        return round(100 * self.tokens / self.window) if self.tokens is not None and self.window else None


# --- the status JSON -------------------------------------------------------------------------------


def _field(data: Any, *keys: str) -> Any:
    """data[k1][k2]…, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _tokens(value: Any) -> int | None:
    """A token figure: a non-negative whole number (not a bool, not a float) below MAX_COUNT, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT else None


def _number(value: Any) -> float | None:
    """A finite number (an int or a float, not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    import math

    try:
        number = float(value)  # an int too large for a float is no figure of ours
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _version(status: Mapping[str, Any]) -> str | None:
    """The running Claude Code's version ("2.1.332"), when it is one (core.rules reads it)."""
    from ..core.rules import version_key

    version = _text(status.get("version"))
    return version if version is not None and version_key(version) is not None else None


def _usage(value: Any) -> int | None:
    """count's figure for context_window.current_usage (the last response's usage: the prompt it was
    sent and what it wrote); None unless it is an object with at least one token figure."""
    if not isinstance(value, dict) or all(_tokens(value.get(key)) is None for key in USAGE_KEYS):
        return None
    from ..core.count import usage_total

    return usage_total(value)


def _used_percentage(value: Any) -> float | None:
    """context_window.used_percentage: a number from 0 to 100, else None."""
    number = _number(value)
    return number if number is not None and 0 <= number <= 100 else None


def model_name(model: str | None) -> str | None:
    """The catalog's display name for a model id, as Claude Code shows it ("Opus 4.8"; "Opus 4.6 (1M
    context)" for claude-opus-4-6[1m]); None for a model the catalog does not know."""
    from ..core.catalog import asks_for_1m, catalog

    found = catalog().find(model)
    if found is None:
        return None
    return found.display_name + (" (1M context)" if asks_for_1m(model) and found.supports_1m_suffix else "")


def _moment(value: Any) -> float | None:
    """prompt_cache.expires_at as epoch seconds. Claude Code 2.1.332 writes whole epoch seconds
    (Math.ceil(ms / 1000)); epoch milliseconds and ISO 8601 with a zone are read too. None for
    anything else (null, a bool, a string without a zone…)."""
    number = _number(value)
    if number is not None:
        if number <= 0:
            return None
        return number / 1000 if number > EPOCH_MS_FROM else number
    text = (_text(value) or "").strip()
    if not text or len(text) > 64:
        return None
    from datetime import datetime

    if text[-1:] in ("Z", "z"):  # JavaScript's toISOString; Python reads "Z" only from 3.11
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
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


# --- the figures -----------------------------------------------------------------------------------


def figures(status: Mapping[str, Any], options: StatusOptions, environ: Mapping[str, str], now: float | None = None) -> StatusFigures:
    """What the line says for Claude Code's `status`; `environ` gives the savings cache's folder
    ($XDG_CACHE_HOME), `now` (epoch seconds, default the clock) dates the prompt cache's expiry."""
    from ..core.budget import BudgetSettings, thresholds

    settings = options.budget or BudgetSettings()
    version = _version(status)
    settings = _running_rules(settings, version)
    given_window = _tokens(_field(status, "context_window", "context_window_size")) or None
    model_id = _text(_field(status, "model", "id"))
    path = _text(status.get("transcript_path"))
    model = _text(_field(status, "model", "display_name")) or model_name(model_id) or model_id
    if now is None:
        import time

        now = time.time()
    cache = cache_state(status.get("prompt_cache"), now)
    counted, unreadable = _count(path, options.window, settings, model_id) if path else (None, "transcript unreadable")
    if counted is not None:
        tokens, levels = counted.count.tokens, counted.thresholds
        model = model or model_name(counted.count.model) or counted.count.model
        if options.window is None and given_window is not None:
            # Claude Code's own window for this session (the environment's cap still applies).
            levels = thresholds(counted.count.model, settings, given_window, "context_window_size", version=version or counted.version)
    else:
        window, reason = (options.window, "--window") if options.window else (given_window, "context_window_size") if given_window else (None, None)
        levels = thresholds(model_id, settings, window, reason, window_flag=bool(options.window), version=version)  # no window: the catalog's
        used = _usage(_field(status, "context_window", "current_usage"))
        if used is None:
            percent = _used_percentage(_field(status, "context_window", "used_percentage"))
            if percent is None:
                return StatusFigures(model, cache=cache, note=unreadable if path else "no transcript")
            # Claude Code's percentage of the model's window (context_window_size; never a capped one).
            used = round(percent * (given_window or options.window or _model_window(model_id, settings, version)) / 100)
        tokens = used
    saving = _saving(path, environ) if options.savings and counted is not None and path is not None else None
    return StatusFigures(
        model,
        tokens,
        levels.window,
        levels.level(tokens),
        None if levels.autocompact is None else levels.autocompact - tokens,
        levels.autocompact is None,
        saving,
        cache,
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


def cache_dir(environ: Mapping[str, str]) -> str:
    """$XDG_CACHE_HOME/ctxpipe/statusline (an absolute XDG_CACHE_HOME only, as the spec says), else ~/.cache/…"""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ctxpipe", "statusline")


def _key(path: str) -> str:
    """The cache file's name for `path` (the entry names its path too, so a collision only misses)."""
    import zlib  # built in: hashlib would cost a few ms of start-up

    name = os.fsencode(os.path.abspath(path))
    return f"{zlib.crc32(name):08x}{zlib.adler32(name):08x}"


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns


def read_cache(directory: str, path: str) -> dict[str, Any] | None:
    """The cached entry for `path`, or None (none yet, or not one of ours)."""
    import orjson

    try:
        with open(os.path.join(directory, _key(path) + ".json"), "rb") as handle:
            entry = orjson.loads(handle.read(1 << 16))
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("path") == os.path.abspath(path) else None


def _best(entry: Mapping[str, Any]) -> Saving | None:
    savings = entry.get("savings")
    if not isinstance(savings, dict):
        return None
    found = [Saving(name, freed) for name in STAGES if (freed := _tokens(savings.get(name))) is not None]
    if not found:
        return None
    best = max(found, key=lambda saving: saving.tokens)
    return best if best.tokens >= MIN_SAVING else None


def _saving(path: str, environ: Mapping[str, str]) -> Saving | None:
    """The last known saving for `path`; a background refresh starts when it is out of date."""
    directory = cache_dir(environ)
    entry = read_cache(directory, path)
    stamp = _stamp(path)
    fresh = entry is not None and stamp is not None and [entry.get("size"), entry.get("mtime_ns")] == list(stamp)
    if not fresh and stamp is not None:
        _start_refresh(directory, path)
    return _best(entry) if entry is not None else None


def _start_refresh(directory: str, path: str) -> None:
    """A detached `--refresh` run for `path`, unless one is running (its lock file exists)."""
    lock = os.path.join(directory, _key(path) + ".lock")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            import time

            if time.time() - os.stat(lock).st_mtime < LOCK_STALE:
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
    would free, keyed to the file's size and mtime before the run. Then drop the lock."""
    lock = os.path.join(directory, _key(path) + ".lock")
    try:
        stamp = _stamp(path)
        if stamp is None:
            return
        entry: dict[str, Any] = {"path": path, "size": stamp[0], "mtime_ns": stamp[1]}
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
    """Tokens each of STAGES would free now, as the stage prints it (its default settings, a dry run)."""
    from datetime import datetime, timezone

    from ..files.inputs import mapped
    from .pipeline import BY_NAME, run_stage, stage_context

    now = datetime.now(timezone.utc)
    freed: dict[str, int] = {}
    with mapped(path) as buffer:
        for name in STAGES:
            stage = BY_NAME[name]
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
