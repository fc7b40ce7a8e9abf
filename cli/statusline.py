"""`ctxpipe statusline`: the command Claude Code's `statusLine` setting runs after every message.

It reads the JSON Claude Code writes on stdin and prints one line: tokens / window, percent, the
level (warn's names), tokens left before autocompact, and the biggest saving microcompact or
collapse would make now. It starts on a light path (cli/entry.py sends it here before typer, rich
or any stage module loads): counting reads only the transcript's end, and the savings, which need
the whole file and the stage code, come from a small cache that a detached background run of this
module (`python -m ctxpipe.cli.statusline --refresh PATH`) brings up to date.

What Claude Code 2.1.332 writes there (read from its binary): `model{id,display_name}`, `version`
(the running client's: its rules apply, core.rules), `context_window{context_window_size (the
model's window, not the autocompact one), current_usage (the last response's usage), used_percentage
(round(prompt / window × 100))…}` and `prompt_cache{warm, ttl ("5m"/"1h"), expires_at (epoch
seconds, or null)…}` (absent before the first request).

The stdin JSON is untrusted: any field may be missing, null or of another type. What cannot be
known is left out, never a traceback; the line always ends the run with exit 0, but for bad flags
(2, as every command) or stdin on a terminal (2: nothing to read).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any, NamedTuple, NoReturn

from ..core.fields import MAX_COUNT
from .budget_environment import budget_settings
from .status import ExitStatus

if TYPE_CHECKING:  # types only
    from ..core.budget import BudgetSettings
    from ..jobs.count import FileCount

PROG = "ctxpipe statusline"
STAGES = ("microcompact", "collapse")  # the stages whose dry run the line offers as the saving
MIN_SAVING = 1_000  # smaller savings are not worth a glance
MAX_STDIN = 1 << 20  # Claude Code's JSON is a few hundred bytes; more is not it
LOCK_STALE = 600.0  # seconds: a refresh lock older than this was left by a run that died
# The background refresh runs two stages on the whole file (a stage holds a few times the file's size
# in memory): past this size it records why instead, and the line goes without a saving.
REFRESH_LIMIT = 512 << 20
LEVEL_COLOUR = {"normal": "32", "warning": "33", "autocompact": "35", "blocking": "1;31"}  # as warn's green/yellow/magenta/bold red
DIM, RESET = "\x1b[2m", "\x1b[0m"
NO_STATUS = "ctxpipe: no status JSON on stdin"
USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
EPOCH_MS_FROM = 1e11  # an expires_at above this is in milliseconds (1e11 seconds is the year 5138)
MAX_CACHE_LEFT = 86_400.0  # seconds: prompt caches live 5 minutes or an hour; a day off is a wrong clock or a wrong field

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
  Nothing is written beside the transcript.

  Colour (ANSI) is on by default, even on a pipe, as Claude Code renders it;
  NO_COLOR (set to any value) or --no-color turns it off, --color forces it.
  The environment variables warn reads apply (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE…);
  flags win. Stdin that is empty or not a JSON object prints "ctxpipe: no
  status JSON on stdin" and exits 0; stdin on a terminal exits 2.

  Example:  echo '{"transcript_path": "session.jsonl"}' | ctxpipe statusline

Options:
  --window <int range>        Context window in tokens (default: the model catalog's; 1M for [1m] names).  [1<=x<=999999999999999]
  --autocompact-pct <float>   Autocompact at this percentage (above 0, at most 100) of the effective window (can only lower the threshold).
  --max-output-tokens <int range>
                              The model's max output tokens (sets the reserve: min(this, 20,000)).  [1<=x<=999999999999999]
  --no-auto-compact           As DISABLE_AUTO_COMPACT: no autocompact level.
  --rules VERSION             Apply the rules of this Claude Code release (2.1.88, 2.1.332 or latest) instead of those of the version that wrote the session.
  --color / --no-color        Colour the line with ANSI codes (default: on, unless NO_COLOR is set).
  --no-savings                Leave out the saving (no cache read, no background run).
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


# --- flags -----------------------------------------------------------------------------------------
# A hand-made parser, not argparse: these few flags do not pay argparse's import, and the usage line,
# help and error messages keep the other commands' shape.


def _positive_int(flag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"Invalid value for '{flag}': {text!r} is not a valid integer.") from None
    if not 1 <= value < MAX_COUNT:
        raise UsageError(f"Invalid value for '{flag}': {value} is not in the range 1<=x<={MAX_COUNT - 1}.")
    return value


def _percentage(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"Invalid value for '{flag}': {text!r} is not a valid float.") from None
    if not 0 < value <= 100:  # NaN fails this too
        raise UsageError(f"Invalid value for '{flag}': {value:g} is not a percentage above 0 and at most 100")
    return value


def _release(flag: str, text: str) -> str:
    """--rules: a Claude Code release whose rules ctxpipe knows, or latest (as cli/options.claude_code_rules)."""
    from ..core.rules import known_rules

    try:
        known_rules(text)
    except ValueError as exc:
        raise UsageError(f"Invalid value for '{flag}': {exc}") from None
    return text


VALUED = {"--window": _positive_int, "--max-output-tokens": _positive_int, "--autocompact-pct": _percentage, "--rules": _release}
SWITCHES = {"--no-auto-compact": ("no_auto_compact", True), "--color": ("color", True), "--no-color": ("color", False), "--no-savings": ("savings", False)}


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


def read_status(stream: IO[bytes]) -> dict[str, Any] | None:
    """Claude Code's JSON object from stdin, or None when stdin holds no JSON object."""
    data = stream.read(MAX_STDIN + 1)
    if len(data) > MAX_STDIN:
        return None
    import orjson

    try:
        status = orjson.loads(data)
    except ValueError as error:  # orjson.JSONDecodeError: not UTF-8, not JSON, or nothing at all
        if "surrogate" not in str(error):
            return None
        # A lone surrogate escape ("\ud83d": JavaScript writes one for a string cut inside an emoji) is
        # legal JSON, which orjson refuses; read as core/jsonl.py reads such a line (imported only then).
        from ..core.jsonl import loads_with_lone_surrogates

        try:
            status = loads_with_lone_surrogates(data)
        except (ValueError, RecursionError):
            return None
    return status if isinstance(status, dict) else None


# --- the figures -----------------------------------------------------------------------------------


class Figures:
    """What the line says; None where it cannot be known."""

    def __init__(self, model: str | None) -> None:
        self.model = model
        self.tokens: int | None = None
        self.window: int | None = None
        self.level: str | None = None
        self.to_autocompact: int | None = None  # None: autocompact is off (or nothing counted)
        self.autocompact_off = False
        self.saving: tuple[str, int] | None = None
        self.cache: str | None = None  # e.g. "cache 3m left" (cache_state)
        self.note: str | None = None  # e.g. "no transcript"


def figures(status: Mapping[str, Any], options: Options, environ: Mapping[str, str], now: float | None = None) -> Figures:
    """What the line says for Claude Code's `status`; `now` (epoch seconds, default the clock) dates
    the prompt cache's expiry."""
    from ..core.budget import thresholds

    settings = budget_settings(environ, options.autocompact_pct, options.max_output_tokens, None, options.no_auto_compact, options.rules)
    version = _version(status)
    settings = _running_rules(settings, version)
    given_window = _tokens(_field(status, "context_window", "context_window_size")) or None
    model_id = _text(_field(status, "model", "id"))
    path = _text(status.get("transcript_path"))
    result = Figures(_text(_field(status, "model", "display_name")) or model_name(model_id) or model_id)
    if now is None:
        import time

        now = time.time()
    result.cache = cache_state(status.get("prompt_cache"), now)
    counted, unreadable = _count(path, options, settings, model_id) if path else (None, "transcript unreadable")
    if counted is not None:
        tokens, levels = counted.count.tokens, counted.thresholds
        result.model = result.model or model_name(counted.count.model) or counted.count.model
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
                result.note = unreadable if path else "no transcript"
                return result
            # Claude Code's percentage of the model's window (context_window_size; never a capped one).
            used = round(percent * (given_window or options.window or _model_window(model_id, settings, version)) / 100)
        tokens = used
    result.tokens, result.window, result.level = tokens, levels.window, levels.level(tokens)
    if levels.autocompact is None:
        result.autocompact_off = True
    else:
        result.to_autocompact = levels.autocompact - tokens
    if options.savings and counted is not None and path is not None:
        result.saving = _saving(path, environ)
    return result


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


def _count(path: str, options: Options, settings: BudgetSettings, model_id: str | None) -> tuple[FileCount | None, str]:
    """count's result for the transcript (as `count --on-error skip`: Claude Code may be writing its
    last line), with Claude Code's model where the transcript names none; None when it cannot be
    read, with what the line says instead."""
    import stat

    from ..core.errors import CtxpipeError
    from ..files.sessions import kind_of
    from ..formats.other_agents import OtherAgentFile
    from ..jobs.count import CountOptions, count_file

    unreadable = "transcript unreadable"
    counting = CountOptions(window=options.window, budget=settings, on_error="skip")
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


def _best(entry: Mapping[str, Any]) -> tuple[str, int] | None:
    savings = entry.get("savings")
    if not isinstance(savings, dict):
        return None
    found = [(name, freed) for name in STAGES if (freed := _tokens(savings.get(name))) is not None]
    if not found:
        return None
    name, freed = max(found, key=lambda item: item[1])
    return (name, freed) if freed >= MIN_SAVING else None


def _saving(path: str, environ: Mapping[str, str]) -> tuple[str, int] | None:
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
            [sys.executable, "-m", "ctxpipe.cli.statusline", "--refresh", os.path.abspath(path), directory],
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
    from ..jobs.pipeline import BY_NAME, run_stage, stage_context

    now = datetime.now(timezone.utc)
    freed: dict[str, int] = {}
    with mapped(path) as buffer:
        for name in STAGES:
            stage = BY_NAME[name]
            run = run_stage(stage, buffer, path, stage.settings(), stage_context(now, path), on_error="skip")
            freed[name] = int(run.report["tokens_freed"])
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


# --- the line --------------------------------------------------------------------------------------


def human(tokens: int) -> str:
    """76500 → 76.5K, 200000 → 200K, 1000000 → 1M, 850 → 850."""
    sign, tokens = ("-", -tokens) if tokens < 0 else ("", tokens)
    for size, unit in ((1_000_000, "M"), (1_000, "K")):
        if tokens >= size:
            figure = f"{tokens / size:.1f}".removesuffix(".0")
            return f"{sign}{figure}{unit}"
    return f"{sign}{tokens}"


def line(found: Figures, color: bool) -> str:
    from .terminal import shown

    def paint(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}{RESET}" if color else text

    parts: list[str] = []
    if found.tokens is not None and found.window:
        percent = round(100 * found.tokens / found.window)
        level = found.level or "normal"
        parts.append(f"⛁ {human(found.tokens)}/{human(found.window)} {percent}% " + paint(level, LEVEL_COLOUR[level]))
        if found.autocompact_off:
            parts.append("autocompact off")
        elif found.to_autocompact is not None:
            left = found.to_autocompact
            parts.append(f"{human(left)} to autocompact" if left > 0 else f"{human(-left)} past autocompact")
        if found.saving is not None:
            parts.append(f"{found.saving[0]} −{human(found.saving[1])}")
    else:
        parts.append("⛁ " + (found.note or "no transcript"))
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
    print(line(figures(status, options, environ), wants_color(options, environ)), file=stdout)
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


def _process(argv: Sequence[str]) -> int:
    from ..files.inputs import guard_truncation
    from .terminal import shown

    for number in (0, 1, 2):  # started with `>&-`: no file opened later may take a standard number
        try:
            os.fstat(number)
        except OSError:
            os.open(os.devnull, os.O_RDWR)
    stderr = sys.stderr if sys.stderr is not None else open(os.devnull, "w")
    if sys.stdout is None:
        return ExitStatus.OK  # nobody to show a line to
    guard_truncation(lambda name: f"ctxpipe: error: {shown(name)}: changed while being read", ExitStatus.ERROR)
    try:
        status = with_standard_streams(argv, stderr)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away: quietly, as every command
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitStatus.OK
    except Exception as exc:  # a bug: one line naming it (CTXPIPE_DEBUG=1 shows the traceback)
        if os.environ.get("CTXPIPE_DEBUG"):
            raise
        from ..core.errors import InternalError

        print(f"ctxpipe: error: {shown(InternalError.of(None, exc))}", file=stderr)
        return ExitStatus.ERROR
    return status


if __name__ == "__main__":
    # The background refresh: `python -m ctxpipe.cli.statusline --refresh PATH CACHE_DIR`.
    if len(sys.argv) == 4 and sys.argv[1] == "--refresh":
        try:
            os.nice(10)  # after the session it reports on, never before it
        except OSError:
            pass
        refresh(sys.argv[2], sys.argv[3])
    sys.exit(0)
