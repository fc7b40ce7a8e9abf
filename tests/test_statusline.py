"""`ctxpipe statusline`: Claude Code's status JSON in (any field missing, null or wrong-typed), one line
out with count's tokens and warn's level; colour; escaping; the savings cache; the light start-up."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import SONNET, Session, simple, usage
from ctxpipe.cli.statusline import HELP, NO_STATUS, human
from ctxpipe.core.statusline import Saving, StatusFigures, StatusInputs, memo_bytes, memo_figures, memo_key
from helpers import CLEAN_ENV, FIXTURES, aged, child_env, run_cli, run_process
from hypothesis import given, settings
from hypothesis import strategies as st

LINE = re.compile(r"^⛁ (?P<tokens>\S+)/(?P<window>\S+) (?P<percent>\d+)% (?P<level>normal|warning|autocompact|blocking)(?P<rest>.*)$")
ESC = "\x1b"


CACHE: list[Path] = []  # the test's own cache folder (XDG_CACHE_HOME), made fresh for each test


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    CACHE[:] = [tmp_path_factory.mktemp("xdg-cache")]
    yield


def status(env: dict[str, str] | None = None, *flags: str, **payload: Any) -> tuple[str, Any]:
    """Run statusline in-process on `payload` as JSON; the line (checked to be one line) and the run.
    Where nothing runs in the background (--no-savings, or no transcript) it runs twice: the second
    run, which the memo may answer, must print the same line."""
    full_env = {**CLEAN_ENV, "XDG_CACHE_HOME": str(CACHE[0]), **(env or {})}
    result = run_cli("statusline", *flags, stdin=json.dumps(payload).encode(), env=full_env)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr and result.stderr == b"", result.stderr
    text = result.stdout.decode()
    assert text.endswith("\n") and text.count("\n") == 1, text
    if "--no-savings" in flags or "transcript_path" not in payload:
        again = run_cli("statusline", *flags, stdin=json.dumps(payload).encode(), env=full_env)
        assert (again.returncode, again.stdout, again.stderr) == (0, result.stdout, b""), (result, again)
    return text.rstrip("\n"), result


def json_of(*args: str | os.PathLike[str]) -> dict[str, Any]:
    result = run_cli(*args, "--json", env=CLEAN_ENV)
    return json.loads(result.stdout.splitlines()[0])


# --- the level and the numbers, against warn --json and count --json ------------------------------


@pytest.mark.parametrize(("tokens", "level"), [(100_000, "normal"), (147_000, "warning"), (167_000, "autocompact"), (177_000, "blocking")])
def test_the_level_and_figures_are_warns(tmp_path: Path, tokens: int, level: str) -> None:
    path = simple(tokens).write(tmp_path / "session.jsonl")
    text, _ = status(None, "--no-savings", transcript_path=str(path))
    match = LINE.match(text)
    assert match, text
    report = json_of("warn", path)
    counted = json_of("count", path)
    assert match["level"] == report["level"] == level
    assert match["tokens"] == human(report["tokens"]) == human(counted["tokens"])
    assert match["window"] == human(report["context_window"]) == human(counted["context_window"]) == "200K"
    assert int(match["percent"]) == round(100 * report["tokens"] / report["context_window"])
    left = report["thresholds"]["autocompact"] - report["tokens"]
    assert (f" · {human(left)} to autocompact" if left > 0 else f" · {human(-left)} past autocompact") in match["rest"]
    assert text.endswith(" · Sonnet 4.5")  # the catalog's name for the transcript's model (SONNET), as Claude Code gave none


def test_environment_settings_apply_as_for_warn(tmp_path: Path) -> None:
    path = simple(120_000).write(tmp_path / "session.jsonl")
    env = {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}  # 70% of 180,000 = 126,000: warning from 106,000
    text, _ = status(env, "--no-savings", transcript_path=str(path))
    report = json.loads(run_cli("warn", "--json", path, env={**CLEAN_ENV, **env}).stdout)
    assert report["level"] == "warning" and f" {report['level']} · {human(126_000 - 120_000)} to autocompact" in text
    flagged, _ = status(None, "--no-savings", "--autocompact-pct", "70", transcript_path=str(path))
    assert flagged == text
    off, _ = status({"DISABLE_AUTO_COMPACT": "1"}, "--no-savings", transcript_path=str(path))
    assert "autocompact off" in off


def test_the_window_comes_from_context_window(tmp_path: Path) -> None:
    path = simple(150_000).write(tmp_path / "session.jsonl")
    text, _ = status(None, "--no-savings", transcript_path=str(path), context_window={"context_window_size": 1_000_000})
    match = LINE.match(text)
    assert match and match["window"] == "1M" and match["level"] == "normal" and match["percent"] == "15"
    report = json.loads(run_cli("warn", "--json", "--window", "1000000", path, env=CLEAN_ENV).stdout)
    assert human(report["thresholds"]["autocompact"] - 150_000) + " to autocompact" in text
    flag, _ = status(None, "--no-savings", "--window", "200000", transcript_path=str(path), context_window={"context_window_size": 1_000_000})
    assert LINE.match(flag)["window"] == "200K"  # type: ignore[index]  # the flag wins


def test_without_a_transcript_the_usage_claude_code_gives_is_used() -> None:
    usage_now = {"input_tokens": 5, "cache_creation_input_tokens": 1_000, "cache_read_input_tokens": 150_000, "output_tokens": 300}
    text, _ = status(None, model={"id": "claude-opus-4-6", "display_name": "Opus"}, context_window={"context_window_size": 200_000, "current_usage": usage_now})
    assert text == "⛁ 151.3K/200K 76% warning · 15.7K to autocompact · Opus"  # 180,000 − 13,000 − 151,305


# --- what Claude Code 2.1.332 writes ---------------------------------------------------------------

OPUS_48 = "claude-opus-4-8"  # a native-1M model: window 1,000,000, max output 64,000 (reserve 20,000), autocompact 967,000
UNKNOWN = "claude-custom-x"  # not in the catalog: 200,000 under 2.1.88's rules, 1,000,000 under 2.1.332's


def _versioned(total: int, model: str, version: str) -> Session:
    """simple(total, model) written by Claude Code `version` (each line records it)."""
    session = Session(model, version=version)
    session.user("Please check the build.")
    session.text("Done.", usage(total))
    return session


def test_a_native_1m_model_gets_the_catalogs_window(tmp_path: Path) -> None:
    """The issue's session at 11 %: 200K/53 % before the catalog; 1M, autocompact at 967,000, now."""
    path = simple(106_100, model=OPUS_48).write(tmp_path / "session.jsonl")
    text, _ = status(None, "--no-savings", transcript_path=str(path), version="2.1.332")
    assert text == "⛁ 106.1K/1M 11% normal · 860.9K to autocompact · Opus 4.8"  # 967,000 − 106,100
    report = json_of("warn", path)
    assert (report["context_window"], report["thresholds"]["autocompact"]) == (1_000_000, 967_000)
    # No transcript: the usage Claude Code gives, against the catalog's window for model.id (a Bedrock id too).
    for model in (OPUS_48, "us.anthropic.claude-opus-4-8"):
        text, _ = status(None, model={"id": model}, context_window={"current_usage": usage(106_100)})
        assert text == "⛁ 106.1K/1M 11% normal · 860.9K to autocompact · Opus 4.8", model
    # A model whose window is 200,000 (1M only with [1m]) keeps it.
    text, _ = status(None, model={"id": "claude-opus-4-6"}, context_window={"current_usage": usage(106_100)})
    assert text == "⛁ 106.1K/200K 53% normal · 60.9K to autocompact · Opus 4.6"  # 180,000 − 13,000 − 106,100
    text, _ = status(None, model={"id": "claude-opus-4-6[1m]"}, context_window={"current_usage": usage(106_100)})
    assert text == "⛁ 106.1K/1M 11% normal · 860.9K to autocompact · Opus 4.6 (1M context)"


def test_the_running_versions_rules_apply(tmp_path: Path) -> None:
    """A model the catalog does not know: 200,000 under 2.1.88's rules, 1,000,000 under 2.1.332's.
    The running Claude Code's version (stdin) decides; without it, the transcript's; --rules over both."""
    path = _versioned(150_000, UNKNOWN, "2.1.88").write(tmp_path / "session.jsonl")
    old = "⛁ 150K/200K 75% warning · 17K to autocompact · " + UNKNOWN  # 200,000 − 20,000 − 13,000 − 150,000
    new = "⛁ 150K/1M 15% normal · 817K to autocompact · " + UNKNOWN  # 1,000,000 − 20,000 − 13,000 − 150,000
    assert status(None, "--no-savings", transcript_path=str(path))[0] == old  # the transcript's version
    assert status(None, "--no-savings", transcript_path=str(path), version="not a version")[0] == old
    assert status(None, "--no-savings", transcript_path=str(path), version="2.1.332")[0] == new  # resumed by 2.1.332
    assert status(None, "--no-savings", "--rules", "2.1.88", transcript_path=str(path), version="2.1.332")[0] == old
    assert status(None, "--no-savings", "--rules", "latest", transcript_path=str(path))[0] == new
    # warn says the same of the file, with the same rules.
    assert json_of("warn", path)["context_window"] == 200_000
    assert json_of("warn", "--rules", "2.1.332", path)["thresholds"]["autocompact"] == 967_000
    # Without a transcript: stdin's version, else the latest rules.
    for version, expected in (("2.1.88", old), ("2.1.332", new), (None, new)):
        payload: dict[str, Any] = {"model": {"id": UNKNOWN}, "context_window": {"current_usage": usage(150_000)}}
        if version:
            payload["version"] = version
        assert status(None, **payload)[0] == expected, version


def test_the_given_window_is_read_under_the_sessions_rules(tmp_path: Path) -> None:
    """With context_window_size the levels are worked out again; the version goes with them:
    CLAUDE_CODE_AUTO_COMPACT_WINDOW=500k caps only the autocompact window for 2.1.332 (the line
    shows the model's 1M), the whole window for 2.1.88."""
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500k"}
    window = {"context_window_size": 1_000_000}
    capped = "⛁ 300K/1M 30% normal · 167K to autocompact"  # 500,000 − 20,000 − 13,000 − 300,000, of the model's 1M
    window_capped = "⛁ 300K/500K 60% normal · 167K to autocompact"  # 2.1.88: the window itself is 500,000
    new = _versioned(300_000, OPUS_48, "2.1.332").write(tmp_path / "new.jsonl")
    old = _versioned(300_000, OPUS_48, "2.1.88").write(tmp_path / "old.jsonl")
    assert status(env, "--no-savings", transcript_path=str(new), context_window=window)[0].startswith(capped)
    assert status(env, "--no-savings", transcript_path=str(old), context_window=window)[0].startswith(window_capped)  # the transcript's version
    assert status(env, "--no-savings", transcript_path=str(old), context_window=window, version="2.1.332")[0].startswith(capped)
    assert status(env, "--no-savings", transcript_path=str(new), context_window=window, version="2.1.88")[0].startswith(window_capped)
    assert status(env, "--no-savings", "--rules", "2.1.332", transcript_path=str(old), context_window=window)[0].startswith(capped)
    warn = json.loads(run_cli("warn", "--json", new, env={**CLEAN_ENV, **env}).stdout)  # the catalog's 1M, capped as 2.1.332 caps it
    assert warn["thresholds"]["autocompact"] == 467_000
    # The same through the usage Claude Code gives.
    payload = {"model": {"id": OPUS_48}, "context_window": {**window, "current_usage": usage(300_000)}}
    assert status(env, **payload, version="2.1.332")[0].startswith(capped)
    assert status(env, **payload, version="2.1.88")[0].startswith(window_capped)


def test_used_percentage_stands_in_when_there_is_no_usage() -> None:
    """No transcript and no current_usage: used_percentage of the window (given, else the catalog's)."""
    text, _ = status(None, model={"id": OPUS_48}, context_window={"used_percentage": 11})
    assert text == "⛁ 110K/1M 11% normal · 857K to autocompact · Opus 4.8"  # 11 % of 1,000,000; 967,000 − 110,000
    text, _ = status(None, model={"id": "claude-opus-4-6"}, context_window={"context_window_size": 200_000, "used_percentage": 76.4})
    assert text == "⛁ 152.8K/200K 76% warning · 14.2K to autocompact · Opus 4.6"  # 76.4 % of 200,000; 167,000 − 152,800
    # A transcript that cannot be read, or a current_usage with no figure in it, gives way to it too.
    for context_window in ({"used_percentage": 11, "current_usage": None}, {"used_percentage": 11, "current_usage": {"input_tokens": "5"}}):
        text, _ = status(None, transcript_path="/no/such/file.jsonl", model={"id": OPUS_48}, context_window=context_window)
        assert text.startswith("⛁ 110K/1M 11% normal"), (context_window, text)
    # current_usage, when there is one, is the exact figure and wins.
    text, _ = status(None, model={"id": OPUS_48}, context_window={"used_percentage": 90, "current_usage": usage(106_100)})
    assert text.startswith("⛁ 106.1K/1M 11% normal")
    # A given window is the percentage's basis; --window sets the levels' window.
    text, _ = status(None, "--window", "500000", model={"id": OPUS_48}, context_window={"context_window_size": 1_000_000, "used_percentage": 20})
    assert text.startswith("⛁ 200K/500K 40% normal · 267K to autocompact")  # 20 % of 1,000,000; 500,000 − 20,000 − 13,000 − 200,000


@pytest.mark.parametrize("percent", [None, True, False, "11", "11%", -1, 100.5, [11], {"value": 11}])
def test_a_used_percentage_of_another_type_is_not_used(percent: Any) -> None:
    text, _ = status(None, model={"id": OPUS_48}, context_window={"used_percentage": percent})
    assert text == "⛁ no transcript · Opus 4.8"


def test_figures_no_json_number_can_hold_are_left_out() -> None:
    """The standard library's reader (taken for a lone surrogate escape) reads 10^400 as an int, which
    no float holds: it is no percentage and no moment."""
    for value in ("1" + "0" * 400, "-1" + "0" * 400):
        payload = f'{{"model": {{"id": "{OPUS_48}", "display_name": "\\ud800"}}, "context_window": {{"used_percentage": {value}}}, "prompt_cache": {{"expires_at": {value}}}}}'
        result = run_cli("statusline", stdin=payload.encode(), env=CLEAN_ENV)
        assert (result.returncode, result.stderr) == (0, b""), result.stderr
        assert result.stdout.decode() == "⛁ no transcript · \\ud800\n", result.stdout


def test_the_model_is_the_display_name_else_the_catalogs_name_else_the_id() -> None:
    cases = [
        ({"id": OPUS_48, "display_name": "My Opus"}, "My Opus"),
        ({"id": OPUS_48}, "Opus 4.8"),
        ({"id": OPUS_48, "display_name": ""}, "Opus 4.8"),
        ({"id": OPUS_48, "display_name": 7}, "Opus 4.8"),
        ({"id": "anthropic.claude-sonnet-5"}, "Sonnet 5"),
        ({"id": "claude-sonnet-4-5-20250929"}, "Sonnet 4.5"),
        ({"id": "claude-sonnet-4-5@20250929"}, "Sonnet 4.5"),
        ({"id": "claude-opus-4"}, "Opus 4"),  # Opus 4's alias (not Opus 4.8's)
        ({"id": "claude-opus-4-8-preview"}, "claude-opus-4-8-preview"),  # no substring match: not a catalog model
        ({"id": UNKNOWN}, UNKNOWN),
        ({"id": "evil\x1b[2J"}, "evil\\x1b[2J"),  # an unknown id, shown escaped
    ]
    for model, shown in cases:
        text, _ = status(None, model=model, context_window={"context_window_size": 200_000, "current_usage": usage(50_000)})
        assert text.endswith(" · " + shown), (model, text)


# --- the prompt cache ------------------------------------------------------------------------------

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize(
    ("prompt_cache", "said"),
    [
        ({"warm": True, "ttl": "5m", "expires_at": int(NOW) + 200}, "cache 3m left"),  # epoch seconds, as 2.1.332 writes it
        ({"warm": True, "expires_at": (NOW + 200) * 1000}, "cache 3m left"),  # epoch milliseconds
        ({"warm": True, "expires_at": "2026-01-01T00:03:20Z"}, "cache 3m left"),
        ({"warm": True, "expires_at": "2026-01-01T00:03:20.000Z"}, "cache 3m left"),  # JavaScript's toISOString
        ({"warm": True, "expires_at": "2026-01-01T01:03:20+01:00"}, "cache 3m left"),
        ({"expires_at": int(NOW) + 45}, "cache 45s left"),
        ({"warm": True, "ttl": "1h", "expires_at": int(NOW) + 3600}, "cache 1h left"),
        ({"warm": True, "expires_at": int(NOW) + 3600 + 900}, "cache 1h15m left"),
        ({"warm": True, "expires_at": int(NOW) - 1}, "cache cold"),  # expired since Claude Code wrote it
        ({"warm": True, "expires_at": int(NOW)}, "cache cold"),
        ({"warm": False, "expires_at": int(NOW) + 200}, "cache cold"),
        ({"warm": False, "expires_at": None, "caching_observed": False}, "cache cold"),
        ({"warm": True, "expires_at": None}, "cache warm"),
        ({"warm": True, "expires_at": "soon"}, "cache warm"),
        ({"warm": True, "expires_at": int(NOW) + 30 * 86_400}, "cache warm"),  # a month off is no prompt cache's
        ({"expires_at": "2026-01-01T00:03:20"}, None),  # no zone: no moment
        ({"expires_at": True}, None),
        ({"expires_at": -5}, None),
        ({"expires_at": [int(NOW) + 200]}, None),
        ({"warm": "yes"}, None),
        ({}, None),
        ([], None),
        ("warm", None),
        (None, None),
    ],
    ids=repr,
)
def test_the_prompt_cache_countdown(prompt_cache: Any, said: str | None) -> None:
    from ctxpipe.cli.statusline import Options, figures, line
    from ctxpipe.jobs.statusline import cache_state

    assert cache_state(prompt_cache, NOW) == said
    payload = {"model": {"id": OPUS_48}, "context_window": {"context_window_size": 1_000_000, "current_usage": usage(106_100)}, "prompt_cache": prompt_cache}
    text = line(figures(payload, Options(savings=False), CLEAN_ENV, now=NOW), color=False)
    middle = f" · {said}" if said else ""
    assert text == f"⛁ 106.1K/1M 11% normal · 860.9K to autocompact{middle} · Opus 4.8"


def test_the_cache_is_shown_against_the_clock(tmp_path: Path) -> None:
    path = simple(100_000).write(tmp_path / "session.jsonl")
    expires = int(time.time()) + 190  # 3m10s: "3m" for the next ten seconds
    text, _ = status(None, "--no-savings", transcript_path=str(path), prompt_cache={"warm": True, "ttl": "5m", "expires_at": expires})
    assert text.endswith(" · cache 3m left · Sonnet 4.5"), text
    assert status(None, "--no-savings", transcript_path=str(path), prompt_cache={"warm": True, "expires_at": int(time.time()) - 10})[0].endswith(
        " · cache cold · Sonnet 4.5"
    )
    assert "cache" not in status(None, "--no-savings", transcript_path=str(path))[0]  # no prompt_cache: nothing said
    # With nothing to count, the cache is still worth a glance.
    assert status(None, model={"id": OPUS_48}, prompt_cache={"warm": False})[0] == "⛁ no transcript · cache cold · Opus 4.8"


# --- untrusted JSON --------------------------------------------------------------------------------

BAD_VALUES = [None, 3, "x", [], {}, True, -5, 1.5, {"id": None}]


@pytest.mark.parametrize(
    "field", ["transcript_path", "model", "workspace", "context_window", "cost", "exceeds_200k_tokens", "version", "session_id", "prompt_cache"]
)
@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
def test_any_field_missing_null_or_wrong_typed(tmp_path: Path, field: str, value: Any) -> None:
    path = simple(100_000).write(tmp_path / "session.jsonl")
    payload: dict[str, Any] = {
        "hook_event_name": "Status",
        "session_id": "abc",
        "transcript_path": str(path),
        "cwd": str(tmp_path),
        "model": {"id": SONNET, "display_name": "Sonnet"},
        "workspace": {"current_dir": str(tmp_path), "project_dir": str(tmp_path)},
        "version": "2.1.88",
        "cost": {"total_cost_usd": 0.01},
        "exceeds_200k_tokens": False,
        "context_window": {"context_window_size": 200_000, "current_usage": usage(100_000)},
    }
    payload[field] = value
    text, _ = status(None, "--no-savings", **payload)
    if field == "transcript_path":  # the usage Claude Code gave stands in
        assert text.startswith("⛁ 100K/200K 50% normal"), text
    else:
        assert LINE.match(text) and "100K/200K" in text, text
    if field == "prompt_cache":  # none of the bad values says anything of the cache
        assert "cache" not in text, text
    del payload[field]
    missing, _ = status(None, "--no-savings", **payload)
    assert missing.startswith("⛁ 100K/200K 50% normal"), missing


@pytest.mark.parametrize("context_window", [None, 7, {"context_window_size": "big", "current_usage": [1]}, {"context_window_size": -1, "current_usage": None}])
def test_nothing_usable_says_no_transcript_with_the_model(context_window: Any) -> None:
    text, _ = status(None, model={"id": "claude-opus-4-6", "display_name": "Opus"}, context_window=context_window)
    assert text == "⛁ no transcript · Opus"
    text, _ = status(None, transcript_path="/no/such/file.jsonl", model={"id": "claude-opus-4-6"}, context_window=context_window)
    assert text == "⛁ transcript unreadable · Opus 4.6"  # no display name: the catalog's for model.id


def test_a_folder_or_a_fifo_as_transcript_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        text, _ = status(None, transcript_path=str(path))
        assert text == "⛁ transcript unreadable"


@pytest.mark.parametrize("stdin", [b"", b"   \n", b"not json", b"[1, 2]", b'"text"', b"\xff\xfe", b"{" * 100_000, b"{}" + b" " * (2 << 20)])
def test_empty_or_non_json_stdin_says_so_and_exits_0(stdin: bytes) -> None:
    result = run_cli("statusline", stdin=stdin)
    assert (result.returncode, result.stdout, result.stderr) == (0, NO_STATUS.encode() + b"\n", b"")


def test_bad_flags_exit_2_with_one_line() -> None:
    for flags in (
        ["--window", "0"],
        ["--window", "x"],
        ["--autocompact-pct", "150"],
        ["--autocompact-pct"],
        ["--rules", "2.1.5"],
        ["--rules=x\x1b[2J"],
        ["--rules"],
        ["--bogus"],
        ["extra"],
    ):
        result = run_cli("statusline", *flags, stdin=b"{}")
        assert result.returncode == 2 and result.stdout == b"", flags
        lines = result.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctxpipe: error: ") and lines[0].endswith("(see 'ctxpipe statusline --help')"), lines
        assert ESC not in lines[0], lines
    refused = run_cli("statusline", "--rules", "2.1.5", stdin=b"{}").stderr.decode()
    assert "'2.1.5'" in refused and "2.1.88, 2.1.332 and latest" in refused  # known_rules' message: what it knows


def test_help_matches_the_other_commands_and_the_shared_flags() -> None:
    result = run_process("statusline", "--help")
    assert result.returncode == 0 and result.stdout.decode() == HELP
    assert result.stdout.startswith(b"Usage: ctxpipe statusline [OPTIONS]") and b"Example" in result.stdout
    assert b"statusline" in run_process("--help").stdout
    # The budget flags say what count's and warn's say.
    from ctxpipe.cli import budget_options  # the declarations (cli/declare.py), read here, not by statusline

    for declared in (
        budget_options.Window,
        budget_options.AutocompactPct,
        budget_options.MaxOutput,
        budget_options.NoAutoCompact,
        budget_options.ClaudeCodeRules,
    ):
        help_text = declared.__metadata__[0].settings["help"]
        assert help_text in HELP.replace("\n" + " " * 30, " "), help_text


# --- colour and escaping ---------------------------------------------------------------------------


def _on_a_pipe(path: Path, *flags: str, env: dict[str, str]) -> str:
    full = {key: value for key, value in child_env({**CLEAN_ENV, **env}).items() if key != "NO_COLOR" or "NO_COLOR" in env}
    payload = json.dumps({"transcript_path": str(path)}).encode()
    run = subprocess.run([sys.executable, "-m", "ctxpipe", "statusline", "--no-savings", *flags], input=payload, capture_output=True, env=full, timeout=60)
    assert run.returncode == 0 and run.stderr == b"", run.stderr
    return run.stdout.decode()


def test_colour_on_a_pipe_by_default_off_with_no_color(tmp_path: Path) -> None:
    path = simple(150_000).write(tmp_path / "session.jsonl")
    coloured = _on_a_pipe(path, env={})
    assert f"{ESC}[33mwarning{ESC}[0m" in coloured and f"{ESC}[2m · {ESC}[0m" in coloured
    for plain in (_on_a_pipe(path, env={"NO_COLOR": "1"}), _on_a_pipe(path, env={"NO_COLOR": ""}), _on_a_pipe(path, "--no-color", env={})):
        assert ESC not in plain and " warning · " in plain
    assert f"{ESC}[33mwarning" in _on_a_pipe(path, "--color", env={"NO_COLOR": "1"})
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == _on_a_pipe(path, env={"NO_COLOR": "1"})


def test_hostile_model_names_are_shown_escaped(tmp_path: Path) -> None:
    hostile = "evil\x1b]0;pwned\x07\x1b[2J\u202e\r\nname"
    path = simple(100_000, model=hostile).write(tmp_path / "session.jsonl")
    for flags, payload in (([], {"transcript_path": str(path)}), (["--color"], {"transcript_path": str(path), "model": {"display_name": hostile}})):
        text, _ = status(None, "--no-savings", *flags, **payload)
        visible = re.sub(r"\x1b\[[0-9;]*m", "", text)  # our own colour codes, nothing else
        assert "\x1b" not in visible and "\x07" not in visible and "\u202e" not in visible and "\r" not in visible
        assert visible.endswith("evil\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\r\\nname")


# --- the savings cache -----------------------------------------------------------------------------


def _repeating_session(reads: int) -> Session:
    """The same file read `reads` times, each result 40 KB: collapse and microcompact both free some."""
    session = Session()
    session.user("Look at the parser.")
    total = 20_000
    for _ in range(reads):
        tool = session.tool_id()
        session.response([{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": "/home/dev/app/parser.py"}}], usage(total))
        session.tool_result(tool, "def parse(line):\n    return line.split()\n" * 1_000)
        total += 11_000
    session.text("Read it.", usage(total))
    return session


def _freed(stage: str, path: Path, tmp_path: Path) -> int:
    report = tmp_path / f"{stage}.report.json"
    result = run_cli(stage, "--report-json", report, path, env=CLEAN_ENV)
    assert result.returncode == 0, result.stderr
    return int(json.loads(report.read_text())["tokens_freed"])


def _wait_for(predicate: Any, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the background refresh did not finish"
        time.sleep(0.1)


def test_the_saving_is_cached_and_refreshed_when_the_file_changes(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    path = _repeating_session(3).write(folder / "session.jsonl")
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache)}
    entries = cache / "ctxpipe" / "statusline"

    first, _ = status(env, transcript_path=str(path))
    assert "−" not in first  # nothing known yet: a refresh started in the background
    _wait_for(lambda: list(entries.glob("*.json")) and not list(entries.glob("*.lock")))
    stage_figures = {stage: _freed(stage, path, tmp_path) for stage in ("microcompact", "collapse")}
    best = max(stage_figures, key=lambda stage: stage_figures[stage])
    assert stage_figures[best] >= 1_000, stage_figures
    second, _ = status(env, transcript_path=str(path))
    assert second.split(" · ")[2] == f"{best} −{human(stage_figures[best])}", second
    [entry_file] = entries.glob("*.json")
    entry = json.loads(entry_file.read_text())
    assert entry["savings"] == stage_figures and entry["stamp"][0] == path.stat().st_size

    # The file grows: the old saving is shown while a new refresh runs, then the new one.
    _repeating_session(6).write(path)
    stale, _ = status(env, transcript_path=str(path))
    assert f"{best} −{human(stage_figures[best])}" in stale
    _wait_for(lambda: json.loads(entry_file.read_text())["stamp"][0] == path.stat().st_size and not list(entries.glob("*.lock")))
    grown = json.loads(entry_file.read_text())["savings"]
    assert grown == {stage: _freed(stage, path, tmp_path) for stage in ("microcompact", "collapse")} and grown != stage_figures

    # Nothing was written anywhere but the cache: the transcript's folder holds the transcript only.
    assert sorted(p.name for p in folder.iterdir()) == ["session.jsonl"]
    assert {p.name for p in tmp_path.iterdir()} == {"project", "cache", "microcompact.report.json", "collapse.report.json"}
    # The saving, and no lock left (the line's memo too, once the transcript is a tick old: racy_window).
    assert {p.suffix for p in entries.iterdir()} - {".line"} == {".json"}


def test_no_savings_starts_no_refresh(tmp_path: Path) -> None:
    path = aged(_repeating_session(3).write(tmp_path / "session.jsonl"))
    status({"XDG_CACHE_HOME": str(tmp_path / "cache")}, "--no-savings", transcript_path=str(path))
    time.sleep(0.5)
    assert [p.suffix for p in (tmp_path / "cache" / "ctxpipe" / "statusline").iterdir()] == [".line"]  # the memo only: no refresh, no lock


# --- the memo: a run on an unchanged transcript -----------------------------------------------------


def _memos() -> list[Path]:
    return sorted((CACHE[0] / "ctxpipe" / "statusline").glob("*.line"))


def test_an_unchanged_transcript_is_answered_by_the_memo(tmp_path: Path) -> None:
    """The memo holds the figures for the transcript's state; a run that finds it unchanged prints
    them without counting (shown by a memo whose figure was changed behind its back). Any change of
    the state, its times alone, is a new count."""
    path = aged(simple(100_000).write(tmp_path / "session.jsonl"))
    text, _ = status(None, "--no-savings", transcript_path=str(path))
    [memo] = _memos()
    entry = json.loads(memo.read_bytes())
    info = path.stat()
    assert entry["figures"][1] == 100_000 and entry["stamp"] == [info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns]
    entry["figures"][1] = 123_456
    memo.write_text(json.dumps(entry))
    assert LINE.match(status(None, "--no-savings", transcript_path=str(path))[0])["tokens"] == "123.5K"  # type: ignore[index]
    aged(path, 30)  # the same bytes, other times
    assert status(None, "--no-savings", transcript_path=str(path))[0] == text
    assert json.loads(memo.read_bytes())["figures"][1] == 100_000  # counted again, and kept


def test_a_rewrite_of_the_same_size_is_counted_again(tmp_path: Path) -> None:
    """In place, same size, same inode, even its modification time put back: the change time differs."""
    path = aged(simple(110_000).write(tmp_path / "session.jsonl"))
    other = simple(150_000).write(tmp_path / "other.jsonl").read_bytes()
    assert len(other) == path.stat().st_size
    assert LINE.match(status(None, "--no-savings", transcript_path=str(path))[0])["tokens"] == "110K"  # type: ignore[index]
    assert len(_memos()) == 1
    before = path.stat()
    with open(path, "r+b") as handle:
        handle.write(other)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as `touch -r` or `rsync -t` would
    assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert LINE.match(status(None, "--no-savings", transcript_path=str(path))[0])["tokens"] == "150K"  # type: ignore[index]


_counts = st.none() | st.integers(-(10**15), 10**15)
_words = st.none() | st.text(max_size=20)  # lone surrogates too: a model name may hold one


@settings(max_examples=200, deadline=None)
@given(
    st.builds(
        StatusFigures,
        _words,
        _counts,
        _counts,
        st.none() | st.sampled_from(["normal", "warning", "autocompact", "blocking"]),
        _counts,
        st.booleans(),
        st.none() | st.builds(Saving, st.sampled_from(["microcompact", "collapse"]), st.integers(0, 10**15)),
        st.none(),
        _words,
    ),
    st.none() | st.lists(st.integers(0, 10**18), min_size=4, max_size=4),  # times up to 2001 in ns
)
def test_a_memo_gives_back_the_figures_it_keeps(found: StatusFigures, state: list[int] | None) -> None:
    data = memo_bytes("key", state, found, now=2e9)  # 2033: every time above is older than a tick
    assert data is not None
    assert memo_figures(data, "key", state, None, 0) == found
    assert memo_figures(data, "another key", state, None, 0) is None
    assert memo_figures(data, "key", [1, 2, 3, 4] if state != [1, 2, 3, 4] else None, None, 0) is None
    assert memo_bytes("key", state, found._replace(saving_stale=True), now=2e9) is None


def test_a_transcript_whose_old_time_was_put_back_is_memoised_a_tick_after() -> None:
    # cp -p, rsync -t: the modification time a minute back, the change time now. Within the tick of
    # the change time, a same-size rewrite that puts the time back again would leave the stamp as it
    # is: no memo until a tick has passed (as count's kept counts).
    now = 1_800_000_000.0
    changed = int(now * 1e9) - 10_000_123  # 10 ms ago, with digits below the second: a fine tick
    stamp = [1000, changed - 60 * 10**9, 7, changed]
    assert memo_bytes("key", stamp, StatusFigures(100_000), now) is None
    assert memo_bytes("key", stamp, StatusFigures(100_000), now + 0.1) is not None


def test_the_memo_key_tells_json_types_apart() -> None:
    def key(window: Any) -> str:
        return memo_key("0", "/s.jsonl", StatusInputs.of({"context_window": {"context_window_size": window}}), [], [])

    assert len({key(value) for value in (1, 1.0, True, "1", None, [1])}) == 6
    assert key({"a": 1, "b": 2}) == key({"b": 2, "a": 1})  # key order says nothing


def test_a_transcript_written_just_now_is_not_memoised(tmp_path: Path) -> None:
    """Its times could stay the same through another write in the same tick of the file system's
    clock. (Dated an hour ahead here, so that no run is quick enough or slow enough to matter.)"""
    path = aged(simple(100_000).write(tmp_path / "session.jsonl"), -3600)
    status(None, "--no-savings", transcript_path=str(path))
    assert _memos() == []
    aged(path, 3600 + 60)
    status(None, "--no-savings", transcript_path=str(path))
    assert len(_memos()) == 1


@pytest.mark.parametrize(
    ("flags", "env", "changed"),
    [
        ([], {}, {"model": {"display_name": "Another"}}),
        ([], {}, {"version": "2.1.332"}),  # the running Claude Code's rules
        ([], {}, {"context_window": {"context_window_size": 1_000_000}}),
        ([], {}, {"context_window": {"context_window_size": 200_000.0}}),  # a float is no window: not the same as 200000
        ([], {}, {"context_window": {"context_window_size": True}}),
        (["--window", "500000"], {}, {}),
        (["--rules", "2.1.88"], {}, {}),
        (["--autocompact-pct", "50"], {}, {}),
        ([], {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}, {}),
        ([], {"DISABLE_AUTO_COMPACT": "1"}, {}),
    ],
)
def test_the_memo_is_for_its_inputs_only(tmp_path: Path, flags: list[str], env: dict[str, str], changed: dict[str, Any]) -> None:
    """A run with other status fields, flags or environment is not answered by another run's memo
    (one doctored to show it): it prints what a run with no memo at all prints."""
    path = aged(_versioned(120_000, UNKNOWN, "2.1.88").write(tmp_path / "session.jsonl"))
    payload: dict[str, Any] = {"transcript_path": str(path), "model": {"display_name": "Mine"}, "context_window": {"context_window_size": 200_000}}
    status(None, "--no-savings", **payload)
    [memo] = _memos()
    entry = json.loads(memo.read_bytes())
    entry["figures"][1] = 123_456
    memo.write_text(json.dumps(entry))
    assert "123.5K" in status(None, "--no-savings", **payload)[0]  # the same inputs: the memo answers
    variant, _ = status(env, "--no-savings", *flags, **{**payload, **changed})
    fresh, _ = status({**env, "XDG_CACHE_HOME": str(tmp_path / "fresh")}, "--no-savings", *flags, **{**payload, **changed})
    assert variant == fresh and "123.5K" not in variant


def test_a_relative_transcript_path_is_keyed_on_the_working_folder(tmp_path: Path) -> None:
    for name, tokens in (("a", 100_000), ("b", 150_000)):
        aged(simple(tokens).write(tmp_path / name / "session.jsonl"))
    payload = json.dumps({"transcript_path": "session.jsonl"}).encode()
    env = {**CLEAN_ENV, "XDG_CACHE_HOME": str(CACHE[0])}
    for _ in range(2):
        for name, shown in (("a", "100K"), ("b", "150K")):
            result = run_cli("statusline", "--no-savings", "--no-color", stdin=payload, env=env, cwd=tmp_path / name)
            assert result.stdout.decode().startswith(f"⛁ {shown}/200K "), (name, result)
    assert len(_memos()) == 2


@pytest.mark.parametrize("named", ["\ud800", "a\x00b", "/no/such/\udcff.jsonl", "/no/such/file.jsonl"])
def test_a_transcript_path_no_file_can_have_is_unreadable(named: str) -> None:
    for _ in range(2):  # the second run may find a memo (a missing file is a state too)
        assert status(None, "--no-savings", transcript_path=named)[0] == "⛁ transcript unreadable"


def test_the_prompt_cache_countdown_is_never_memoised(tmp_path: Path) -> None:
    path = aged(simple(100_000).write(tmp_path / "session.jsonl"))
    for left, said in ((600, "cache 9m left"), (200, "cache 3m left"), (-5, "cache cold")):
        text, _ = status(None, "--no-savings", transcript_path=str(path), prompt_cache={"warm": True, "expires_at": time.time() + left})
        assert text.split(" · ")[2] == said, text
    assert len(_memos()) == 1


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: data[: len(data) // 2],
        lambda data: b"\xff\xfe" + data,
        lambda data: b"[" * 100_000,
        lambda data: data.replace(b'"figures": [', b'"figures": [1, '),  # the right key, the wrong shape
        lambda data: data.replace(b'"normal"', b'"calm"'),
        lambda data: data.replace(b"100000", b"true"),
        lambda data: data + b" " * (1 << 17),  # too big to be one of ours
    ],
)
def test_a_damaged_memo_is_not_used(tmp_path: Path, damage: Any) -> None:
    path = aged(simple(100_000).write(tmp_path / "session.jsonl"))
    text, _ = status(None, "--no-savings", "--no-color", transcript_path=str(path))
    assert text.startswith("⛁ 100K/200K 50% normal · ")
    [memo] = _memos()
    memo.write_bytes(damage(memo.read_bytes()))
    assert status(None, "--no-savings", "--no-color", transcript_path=str(path))[0] == text  # worked out again, and kept
    assert json.loads(memo.read_bytes())["figures"][1] == 100_000


def test_an_unwritable_cache_leaves_the_line_as_it_is(tmp_path: Path) -> None:
    path = aged(simple(100_000).write(tmp_path / "session.jsonl"))
    (tmp_path / "file").write_text("not a folder")
    text, _ = status({"XDG_CACHE_HOME": str(tmp_path / "file")}, "--no-savings", "--no-color", transcript_path=str(path))
    assert text.startswith("⛁ 100K/200K 50% normal · ")


def test_a_saving_out_of_date_is_not_memoised(tmp_path: Path) -> None:
    path = aged(_repeating_session(3).write(tmp_path / "session.jsonl"))
    entries = CACHE[0] / "ctxpipe" / "statusline"
    first, _ = status(None, transcript_path=str(path))
    assert "−" not in first and _memos() == []  # the refresh that started will change the saving
    _wait_for(lambda: list(entries.glob("*.json")) and not list(entries.glob("*.lock")))
    second, _ = status(None, transcript_path=str(path))
    assert "−" in second and len(_memos()) == 1
    assert status(None, transcript_path=str(path))[0] == second


def test_concurrent_runs_all_print_the_line(tmp_path: Path) -> None:
    """Runs at once on one transcript each print the whole line; the memo left is a whole one."""
    path = aged(simple(100_000).write(tmp_path / "session.jsonl"))
    env = child_env({**CLEAN_ENV, "XDG_CACHE_HOME": str(CACHE[0])})
    payload = json.dumps({"transcript_path": str(path)}).encode()
    expected = status(None, "--no-savings", "--no-color", transcript_path=str(path))[0] + "\n"
    for memo in _memos():
        memo.unlink()
    command = [sys.executable, "-m", "ctxpipe", "statusline", "--no-savings", "--no-color"]
    runs = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(6)]
    outputs = [run.communicate(payload, timeout=120) for run in runs]
    assert all((run.returncode, out, err) == (0, expected.encode(), b"") for run, (out, err) in zip(runs, outputs)), outputs
    [memo] = _memos()
    assert json.loads(memo.read_bytes())["figures"][1] == 100_000


# --- the light start-up ----------------------------------------------------------------------------

HEAVY = (
    "typer",
    "rich",
    "click",
    "anthropic",
    "tiktoken",
    "jsonschema",
    "jsonschema_rs",
    "ahocorasick",
    "ctxpipe.jobs.pipeline",
    "ctxpipe.core.microcompact",
    "ctxpipe.core.collapse",
    "ctxpipe.core.reports",  # the report dataclasses: a count makes none until it is reported
)


def test_the_light_path_imports_nothing_heavy(tmp_path: Path) -> None:
    path = simple(100_000).write(tmp_path / "session.jsonl")
    payload = json.dumps({"transcript_path": str(path)}).encode()
    env = child_env({**CLEAN_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "ctxpipe", "statusline"], input=payload, capture_output=True, env=env, timeout=60)
    assert run.returncode == 0 and LINE.match(run.stdout.decode().rstrip("\n")), run
    imported = {line.split("|")[-1].strip() for line in run.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "ctxpipe.cli.statusline" in imported and "ctxpipe.jobs.count" in imported
    assert not {name for name in imported if name.split(".")[0] in HEAVY or name in HEAVY}, sorted(imported)


# What a run the memo answers must not load: the library, the formats, orjson (it loads dataclasses,
# uuid and platform), the model catalog, the typed reads of a line's fields and the datetime they need,
# typing (core/records.py).
NOT_FOR_A_MEMO = (
    "ctxpipe.api",
    "ctxpipe.jobs",
    "ctxpipe.files",
    "ctxpipe.formats",
    "ctxpipe.core.budget",
    "ctxpipe.core.catalog",
    "ctxpipe.core.fields",
    "orjson",
    "dataclasses",
    "datetime",
    "typing",
    "socket",  # socket.py's wrapper (3 ms): the server is asked through _socket, and not on a memo's run
)
# What every start loads with the package (ctxpipe/__init__): a finder for dataclasses' generated code,
# which reads nothing until dataclasses is imported.
PACKAGE_START = {"ctxpipe.files", "ctxpipe.files.dataclass_code"}


# The console script, and the modules loaded by its end on stderr (-X importtime misses those that
# importlib.import_module loads, as api's names loaded on use).
WITH_MODULES = (
    "import atexit, os, sys; atexit.register(lambda: os.write(2, '\\n'.join(sorted(sys.modules)).encode()));"
    " from ctxpipe.cli.entry import main; sys.argv[1:] = ['statusline', '--no-savings']; main()"
)


def test_a_run_the_memo_answers_loads_nothing_heavy(tmp_path: Path) -> None:
    path = aged(simple(100_000).write(tmp_path / "session.jsonl"))
    payload = json.dumps({"transcript_path": str(path), "model": {"id": SONNET}}).encode()
    env = child_env({**CLEAN_ENV, "XDG_CACHE_HOME": str(CACHE[0])})
    runs = [subprocess.run([sys.executable, "-c", WITH_MODULES], input=payload, capture_output=True, env=env, timeout=60) for _ in range(2)]
    assert runs[0].returncode == runs[1].returncode == 0 and runs[0].stdout == runs[1].stdout and LINE.match(runs[0].stdout.decode().rstrip("\n"))
    first, second = (set(run.stderr.decode().split("\n")) for run in runs)
    assert "ctxpipe.jobs.count" in first and "ctxpipe.core.statusline" in second  # counted, then answered by the memo
    assert sorted(name for name in second - PACKAGE_START if any(name == heavy or name.startswith(heavy + ".") for heavy in NOT_FOR_A_MEMO)) == []


def test_a_closed_stdout_is_quiet(tmp_path: Path) -> None:
    path = simple(100_000).write(tmp_path / "session.jsonl")
    payload = json.dumps({"transcript_path": str(path)}).encode()
    run = subprocess.run(
        [sys.executable, "-m", "ctxpipe", "statusline", "--no-savings"],
        input=payload,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_env(),
        timeout=60,
    )
    assert run.returncode == 0 and run.stderr == b""
    closed = subprocess.run(
        f"{sys.executable} -m ctxpipe statusline --no-savings >&-", shell=True, input=payload, capture_output=True, env=child_env(), timeout=60
    )
    assert closed.returncode == 0 and b"Traceback" not in closed.stderr


def test_figures_no_window_can_have_are_left_out_or_refused(tmp_path: Path) -> None:
    """A window or limit of 10^15 tokens or more is no window: Claude Code's figure is left out (the
    model's window stands), a flag's is a usage error, an environment variable's is ignored."""
    path = simple(100_000).write(tmp_path / "session.jsonl")
    huge = 10**400
    text, _ = status(None, "--no-savings", transcript_path=str(path), context_window={"context_window_size": 10**15})
    assert LINE.match(text) and LINE.match(text)["window"] == "200K"
    # Legal JSON that orjson refuses (a lone surrogate escape) takes the standard library's reader, which reads any integer.
    payload = f'{{"transcript_path": {json.dumps(str(path))}, "model": {{"display_name": "\\ud800"}}, "context_window": {{"context_window_size": {huge}}}}}'
    result = run_cli("statusline", "--no-savings", stdin=payload.encode(), env={**CLEAN_ENV, "XDG_CACHE_HOME": str(CACHE[0])})
    assert result.returncode == 0 and result.stderr == b"" and b"/200K " in result.stdout
    refused = run_cli("statusline", "--window", str(huge), stdin=b"{}", env=CLEAN_ENV)
    assert refused.returncode == 2 and b"is not in the range" in refused.stderr
    ignored, _ = status({"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE": str(huge)}, "--no-savings", transcript_path=str(path))
    assert LINE.match(ignored) and LINE.match(ignored)["level"] == "normal"


def test_the_background_refresh_leaves_a_file_over_its_limit_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.jobs import statusline

    path = simple(100_000).write(tmp_path / "session.jsonl")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setattr(statusline, "REFRESH_LIMIT", path.stat().st_size - 1)
    statusline.refresh(str(path), str(cache))
    folder = os.open(cache, os.O_RDONLY)
    try:
        entry = statusline.read_cache(folder, str(path))
    finally:
        os.close(folder)
    assert entry is not None and "savings" not in entry and "no saving computed" in entry["error"]
    assert [item.name for item in cache.iterdir()] == [next(cache.iterdir()).name]  # the entry only: the lock is gone


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="makes a folder of another user's: needs root")
def test_a_saving_folder_of_another_users_is_neither_read_nor_written(tmp_path: Path) -> None:
    # A shared XDG_CACHE_HOME where another user made ctxpipe/statusline, open to all, with an entry
    # that is a link to one of ours, a FIFO beside it: no saving read from there (none shown, no wait),
    # and nothing written through the link.
    from ctxpipe.core.statusline import cache_name

    path = aged(_repeating_session(3).write(tmp_path / "project" / "session.jsonl"))
    shared = tmp_path / "shared"
    entries = shared / "ctxpipe" / "statusline"
    entries.mkdir(parents=True)
    victim = tmp_path / "important.txt"
    victim.write_text("mine\n")
    name = cache_name(str(path.resolve()))
    (entries / f"{name}.json").symlink_to(victim)
    for folder in (shared / "ctxpipe", entries):
        os.chown(folder, 65534, 65534)
        folder.chmod(0o777)
    line, _ = status({"XDG_CACHE_HOME": str(shared), "CTXPIPE_STATUSLINE_SERVER": "0"}, transcript_path=str(path))
    time.sleep(1.0)  # a refresh started in the background would have written by now
    assert LINE.match(line) and "−" not in line, line
    assert victim.read_text() == "mine\n"
    assert sorted(item.name for item in entries.iterdir()) == [f"{name}.json"]  # no lock, no memo: the folder is not ours


def test_without_a_home_folder_nothing_is_kept_in_the_working_folder(tmp_path: Path) -> None:
    # No absolute XDG_CACHE_HOME and a home folder that is not absolute (HOME unset and no passwd
    # entry leaves expanduser's "~"; a relative HOME does the same): no memo, no saving, no server,
    # no kept counts, rather than a ./~/.cache beside whatever the run started in.
    from ctxpipe.core.statusline import cache_folder

    assert cache_folder(None, "~") is None and cache_folder("relative", "~") is None
    assert cache_folder("/x", "~") == "/x/ctxpipe/statusline" and cache_folder(None, "/h", "count") == "/h/.cache/ctxpipe/count"
    path = aged(_repeating_session(3).write(tmp_path / "project" / "session.jsonl"))
    env = {"HOME": "~", "XDG_CACHE_HOME": "", "CTXPIPE_STATUSLINE_SERVER": "1"}
    ran = run_cli("statusline", stdin=json.dumps({"transcript_path": str(path)}).encode(), env={**CLEAN_ENV, **env}, cwd=tmp_path / "project")
    assert ran.returncode == 0 and LINE.match(ran.stdout.decode().rstrip("\n")), ran
    counted = run_cli("count", "--json", path, env=env, cwd=tmp_path / "project")
    assert counted.returncode == 0, counted.stderr
    time.sleep(0.5)  # a refresh started in the background would have made its folder by now
    assert sorted(item.name for item in (tmp_path / "project").iterdir()) == ["session.jsonl"]


# --- the library's status line ---------------------------------------------------------------------


def test_the_library_gives_the_figures_the_command_prints(tmp_path: Path) -> None:
    from ctxpipe.api import Saving, StatusFigures, StatusOptions, refresh_status_savings, status_line

    path = aged(_repeating_session(3).write(tmp_path / "session.jsonl"))  # old enough to be memoised
    cache = tmp_path / "cache"
    env = {**CLEAN_ENV, "XDG_CACHE_HOME": str(cache)}
    refresh_status_savings(path, cache / "ctxpipe" / "statusline")  # the background run, in the foreground: the saving is known
    payload: dict[str, Any] = {"transcript_path": str(path), "model": {"id": OPUS_48}, "prompt_cache": {"warm": False}}

    found = status_line(payload, StatusOptions(), env)
    assert isinstance(found, StatusFigures) and isinstance(found.saving, Saving)
    counted = json_of("count", path)
    freed = {stage: _freed(stage, path, tmp_path) for stage in ("microcompact", "collapse")}
    best = max(freed, key=lambda stage: freed[stage])
    assert (found.tokens, found.window) == (counted["tokens"], counted["context_window"])
    assert found.saving == (best, freed[best]) and found.cache == "cache cold" and found.note is None
    assert found.to_autocompact is not None and found.level == json_of("warn", path)["level"]
    text, _ = status({"XDG_CACHE_HOME": str(cache)}, **payload)
    assert found.percent == round(100 * found.tokens / found.window)
    assert text == (
        f"⛁ {human(found.tokens)}/{human(found.window)} {found.percent}% {found.level} · {human(found.to_autocompact)} to autocompact"
        f" · {found.saving.stage} −{human(found.saving.tokens)} · {found.cache} · {found.model}"
    )
    assert sorted(p.suffix for p in (cache / "ctxpipe" / "statusline").iterdir()) == [".json", ".line"]  # the entry was fresh: no refresh (no lock)

    # The flags' library spelling, and what cannot be known.
    assert status_line(payload, StatusOptions(window=1_000_000, savings=False), env).window == 1_000_000
    assert status_line({"model": {"id": OPUS_48}}, environ=env) == StatusFigures("Opus 4.8", note="no transcript")
    assert status(None, model={"id": OPUS_48})[0] == "⛁ no transcript · Opus 4.8"


def test_the_command_line_reaches_the_status_line_through_the_library_only() -> None:
    from test_layers import graph

    assert "ctxpipe.api" in graph()["ctxpipe.cli.statusline"]  # the scan sees its imports (inside functions too)
    outside = sorted(
        target
        for module in ("ctxpipe.cli.statusline", "ctxpipe.cli.commands.statusline")
        for target in graph()[module]
        if target not in ("ctxpipe.api", "ctxpipe") and not target.startswith(("ctxpipe.core.", "ctxpipe.cli."))  # ctxpipe: its __version__ keys the memo
    )
    assert outside == []


def test_a_full_disk_behind_stdout_is_said_as_every_command_says_it(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    status = json.dumps({"transcript_path": str(FIXTURES / "claude-code" / "repeats.jsonl")}).encode()
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "ctxpipe", "statusline", "--no-savings"],
            input=status,
            stdout=full,
            stderr=subprocess.PIPE,
            env={**os.environ, "CTXPIPE_STATUSLINE_SERVER": "0", "XDG_CACHE_HOME": str(tmp_path)},
            timeout=60,
        )
    assert done.returncode == 1 and done.stderr.decode().splitlines() == ["ctxpipe: error: stdout: cannot write (No space left on device)"]


def test_a_saving_stamped_within_the_file_systems_tick_of_a_change_is_refreshed(tmp_path: Path) -> None:
    # A same-size rewrite in the tick of the file system's clock in which the refresh took its stamp
    # leaves the stamp matching: a stamp taken less than a tick after the transcript's last change
    # is not trusted (the saving is shown, out of date, and a refresh starts), and the
    # refresh itself waits for the tick to pass before it takes its stamp.
    from ctxpipe.core.statusline import racy_window
    from ctxpipe.jobs import statusline

    path = _repeating_session(3).write(tmp_path / "session.jsonl")
    cache = tmp_path / "cache"
    environ = {"XDG_CACHE_HOME": str(cache)}
    directory = statusline.cache_dir(environ)
    assert directory is not None
    os.makedirs(directory, mode=0o700)
    statusline.refresh(str(path), directory)
    folder = os.open(directory, os.O_RDONLY)
    try:
        entry = statusline.read_cache(folder, str(path))
    finally:
        os.close(folder)
    assert entry is not None and entry["savings"] and entry["stamp"] == statusline._stamp(str(path))
    info = path.stat()
    assert entry["taken"] >= max(info.st_mtime_ns, info.st_ctime_ns) + racy_window(entry["stamp"]) * 1e9  # it waited for the tick
    assert statusline._saving(str(path), environ)[1] is False  # settled: fresh, no refresh

    entry_file = Path(directory) / (statusline._key(str(path)) + ".json")
    racy = {**entry, "taken": max(info.st_mtime_ns, info.st_ctime_ns) + int(racy_window(entry["stamp"]) * 1e9) // 2}  # stamped within the tick
    entry_file.write_bytes(json.dumps(racy).encode())
    saving, stale = statusline._saving(str(path), environ)
    assert saving is not None and stale is True  # shown, but out of date: a refresh started
    _wait_for(lambda: json.loads(entry_file.read_text())["taken"] != racy["taken"] and not list(Path(directory).glob("*.lock")))
    assert statusline._saving(str(path), environ)[1] is False


def test_a_saving_of_a_transcript_dated_ahead_of_the_clock_is_taken_once(tmp_path: Path) -> None:
    # A clock set back, or a copy from a machine whose clock ran ahead: no wait settles such a file,
    # and none is needed (until the clock catches up, a write gives it the clock's times). The refresh
    # stamps it at once, and the line takes that saving without starting another refresh each time.
    from ctxpipe.jobs import statusline

    path = _repeating_session(3).write(tmp_path / "session.jsonl")
    ahead = time.time() + 3600
    os.utime(path, (ahead, ahead))
    environ = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    directory = statusline.cache_dir(environ)
    assert directory is not None
    os.makedirs(directory, mode=0o700)
    statusline.refresh(str(path), directory)
    for _ in range(3):
        saving, stale = statusline._saving(str(path), environ)
        assert saving is not None and stale is False
    assert not list(Path(directory).glob("*.lock"))  # no refresh started
