"""`ctxpipe warn`: levels and exit codes from Claude Code's formulas, environment overrides and
flags, --explain and --pass-through. Golden cases live in fixtures/warn (run by test_golden.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import SONNET, Session, simple, usage
from ctxpipe.cli.budget_options import ENVIRONMENT, budget_settings
from ctxpipe.core.budget import BudgetSettings, Setting, thresholds
from ctxpipe.jobs.count import CountOptions, count_buffer
from ctxpipe.jobs.schemas import errors
from helpers import FIXTURES, child_env, drain_pty, run_cli

CLEAN_ENV = {name: "" for name in ENVIRONMENT.values()}  # run_cli passes os.environ on; keep these out
EXIT = {"normal": 0, "warning": 3, "autocompact": 4, "blocking": 5}


def warn(*args, stdin: bytes | None = b"", env: dict[str, str] | None = None):
    """Run warn --json; returns (process, report), the report checked against its schema."""
    result = run_cli("warn", "--json", *args, stdin=stdin, env={**CLEAN_ENV, **(env or {})})
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    report = json.loads(lines[0])
    assert errors("warn.report.schema.json", report) == [], report
    assert result.returncode == EXIT[report["level"]], (result.returncode, report["level"])
    return result, report


def at(tokens: int, model: str = SONNET) -> bytes:
    return simple(tokens, model=model).to_bytes()


# --- formulas and levels -------------------------------------------------------------------------


def test_thresholds_of_a_200k_sonnet_4_5() -> None:
    levels = thresholds(SONNET)
    assert levels.window == 200_000
    assert levels.max_output_tokens == 32_000
    assert levels.reserve == 20_000
    assert levels.effective_window == 180_000
    assert levels.warning == levels.error == 147_000
    assert levels.autocompact == 167_000
    assert levels.blocking == 177_000
    assert levels.ignored == ()
    assert [levels.level(n) for n in (0, 146_999, 147_000, 166_999, 167_000, 176_999, 177_000, 250_000)] == [
        "normal",
        "normal",
        "warning",
        "warning",
        "autocompact",
        "autocompact",
        "blocking",
        "blocking",
    ]
    assert (levels.percent_left(0), levels.percent_left(150_000), levels.percent_left(167_000), levels.percent_left(190_000)) == (100, 10, 0, 0)


def test_thresholds_of_a_1m_window() -> None:
    for levels in (thresholds("claude-sonnet-4-5[1m]"), thresholds(SONNET, window=1_000_000, window_reason="inferred")):
        assert levels.window == 1_000_000
        assert levels.effective_window == 980_000
        assert (levels.warning, levels.autocompact, levels.blocking) == (947_000, 967_000, 977_000)


def test_small_max_output_models_have_a_smaller_reserve() -> None:
    levels = thresholds("claude-3-5-sonnet-20241022")
    assert levels.max_output_tokens == levels.reserve == 8_192
    assert levels.effective_window == 191_808
    assert levels.autocompact == 178_808


@pytest.mark.parametrize(
    "tokens, level",
    [
        (100_000, "normal"),
        (146_999, "normal"),
        (147_000, "warning"),
        (160_000, "warning"),
        (167_000, "autocompact"),
        (176_999, "autocompact"),
        (177_000, "blocking"),
        (190_000, "blocking"),
    ],
)
def test_exit_code_follows_the_level(tokens: int, level: str) -> None:
    result, report = warn(stdin=at(tokens))
    assert report["level"] == level
    assert result.returncode == EXIT[level]
    assert report["tokens"] == report["exact_tokens"] == tokens
    assert report["thresholds"] == {"warning": 147_000, "error": 147_000, "autocompact": 167_000, "blocking": 177_000}
    assert (report["context_window"], report["effective_window"], report["max_output_tokens"]) == (200_000, 180_000, 32_000)
    assert report["percent_used"] == round(100 * tokens / 200_000, 1)
    assert report["percent_left"] == max(0, round((167_000 - tokens) / 167_000 * 100))
    assert report["file"] == "-" and report["model"] == SONNET


def test_a_recorded_prompt_over_200k_puts_the_session_on_a_1m_window() -> None:
    result, report = warn(stdin=at(250_000))
    assert report["level"] == "normal" and result.returncode == 0
    assert report["context_window"] == 1_000_000
    assert report["thresholds"]["autocompact"] == 967_000
    assert any("does not fit" in line for line in report["explanations"])


def test_a_1m_model_name_moves_every_threshold() -> None:
    _, report = warn("--model", "claude-opus-4-6[1m]", stdin=at(950_000 - 1))
    assert report["thresholds"] == {"warning": 947_000, "error": 947_000, "autocompact": 967_000, "blocking": 977_000}
    assert report["level"] == "warning"
    assert report["max_output_tokens"] == 64_000


def test_the_estimated_part_counts_toward_the_level() -> None:
    s = simple(146_000)
    s.user("x " * 3000)  # about 3,000 pieces after the last response
    _, report = warn(stdin=s.to_bytes())
    assert report["exact_tokens"] == 146_000
    assert report["estimated_tokens"] > 1_000
    assert report["tokens"] == report["exact_tokens"] + report["estimated_tokens"]
    assert report["level"] == "warning"


# --- environment overrides -----------------------------------------------------------------------


def test_autocompact_pct_override_lowers_the_threshold() -> None:
    result, report = warn(stdin=at(100_000), env={"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"})
    assert report["thresholds"]["autocompact"] == 90_000  # floor(180,000 × 50 %)
    assert report["thresholds"]["warning"] == 70_000
    assert report["thresholds"]["blocking"] == 177_000  # untouched
    assert report["level"] == "autocompact" and result.returncode == 4
    assert any("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in line for line in report["explanations"])


def test_autocompact_pct_override_never_raises_the_threshold() -> None:
    _, report = warn(stdin=at(170_000), env={"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "95"})  # 95 % of 180,000 = 171,000
    assert report["thresholds"]["autocompact"] == 167_000
    assert report["level"] == "autocompact"
    [ignored] = report["ignored"]
    assert "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in ignored and "171,000" in ignored and "only lower" in ignored


@pytest.mark.parametrize("value", ["abc", "0", "150", "-5", "nan", "inf"])
def test_invalid_autocompact_pct_is_ignored_with_a_reason(value: str) -> None:
    _, report = warn(stdin=at(100_000), env={"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": value})
    assert report["thresholds"]["autocompact"] == 167_000
    [ignored] = report["ignored"]
    assert ignored.startswith(f"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={value!r} ignored: ")
    assert "percentage" in ignored


def test_a_pct_of_exactly_100_is_accepted_but_cannot_raise() -> None:
    levels = thresholds(SONNET, BudgetSettings(autocompact_pct=Setting("100", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")))
    assert levels.autocompact == 167_000
    assert "only lower" in levels.ignored[0]
    lowered = thresholds(SONNET, BudgetSettings(autocompact_pct=Setting("12.5", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")))
    assert lowered.autocompact == 22_500  # floor(180,000 × 12.5 %)


def test_small_max_output_tokens_shrinks_the_reserve_and_raises_the_thresholds() -> None:
    result, report = warn(stdin=at(170_000), env={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"})
    assert report["max_output_tokens"] == 8_000
    assert report["effective_window"] == 192_000
    assert report["thresholds"] == {"warning": 159_000, "error": 159_000, "autocompact": 179_000, "blocking": 189_000}
    assert report["level"] == "warning" and result.returncode == 3  # autocompact without the variable


def test_max_output_tokens_is_capped_at_the_models_upper_limit() -> None:
    _, report = warn(stdin=at(100_000), env={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "100000"})
    assert report["max_output_tokens"] == 64_000  # sonnet-4.x limit; the reserve stays 20,000
    assert report["effective_window"] == 180_000
    assert any("capped" in line for line in report["explanations"])
    _, report = warn("--model", "claude-3-5-sonnet-20241022", stdin=at(100_000), env={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "16000"})
    assert report["max_output_tokens"] == 8_192  # the model cannot write more, so the reserve is 8,192
    assert report["effective_window"] == 191_808


def test_invalid_max_output_tokens_is_ignored() -> None:
    _, report = warn(stdin=at(100_000), env={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "lots"})
    assert report["max_output_tokens"] == 32_000
    assert report["ignored"] == ["CLAUDE_CODE_MAX_OUTPUT_TOKENS='lots' ignored: not a whole number"]


def test_blocking_limit_override() -> None:
    result, report = warn(stdin=at(160_000), env={"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE": "150000"})
    assert report["thresholds"]["blocking"] == 150_000
    assert report["thresholds"]["autocompact"] == 167_000
    assert report["level"] == "blocking" and result.returncode == 5
    _, report = warn(stdin=at(160_000), env={"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE": "-1"})
    assert report["thresholds"]["blocking"] == 177_000
    assert "must be positive" in report["ignored"][0]


@pytest.mark.parametrize("variable, value", [("DISABLE_AUTO_COMPACT", "1"), ("DISABLE_AUTO_COMPACT", "true"), ("DISABLE_COMPACT", "1")])
def test_disabling_autocompact_drops_the_level_and_moves_the_warning(variable: str, value: str) -> None:
    result, report = warn(stdin=at(170_000), env={variable: value})
    assert report["thresholds"]["autocompact"] is None
    assert report["thresholds"]["warning"] == report["thresholds"]["error"] == 180_000 - 20_000
    assert report["thresholds"]["blocking"] == 177_000
    assert report["level"] == "warning" and result.returncode == 3  # would be autocompact otherwise
    assert report["percent_left"] == round((180_000 - 170_000) / 180_000 * 100)
    assert any(variable in line and "off" in line for line in report["explanations"])


@pytest.mark.parametrize("value", ["0", "false", "no", "off"])
def test_a_falsy_disable_auto_compact_leaves_it_on(value: str) -> None:
    _, report = warn(stdin=at(170_000), env={"DISABLE_AUTO_COMPACT": value, "DISABLE_COMPACT": value})
    assert report["thresholds"]["autocompact"] == 167_000
    assert report["level"] == "autocompact"


def test_pct_override_is_ignored_when_autocompact_is_off() -> None:
    _, report = warn(stdin=at(100_000), env={"DISABLE_AUTO_COMPACT": "1", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"})
    assert report["thresholds"]["autocompact"] is None
    assert report["thresholds"]["warning"] == 160_000
    assert any("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in line and "off" in line for line in report["ignored"])


# --- flags beat the environment ------------------------------------------------------------------


def test_flags_beat_the_environment() -> None:
    _, report = warn("--autocompact-pct", "60", stdin=at(100_000), env={"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"})
    assert report["thresholds"]["autocompact"] == 108_000  # 60 % of 180,000, not 50 %
    assert any("--autocompact-pct" in line for line in report["explanations"])
    _, report = warn("--max-output-tokens", "16000", stdin=at(100_000), env={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"})
    assert report["max_output_tokens"] == 16_000 and report["effective_window"] == 184_000
    _, report = warn("--blocking-limit", "160000", stdin=at(100_000), env={"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE": "150000"})
    assert report["thresholds"]["blocking"] == 160_000
    result, report = warn("--no-auto-compact", stdin=at(170_000))
    assert report["thresholds"]["autocompact"] is None and result.returncode == 3


def test_budget_settings_read_the_environment_and_let_flags_win() -> None:
    environ = {
        "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000",
        "DISABLE_COMPACT": "",
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000",
    }
    settings = budget_settings(environ, autocompact_pct=60.0, blocking_limit=150_000)
    assert settings.autocompact_pct == Setting("60", "--autocompact-pct")
    assert settings.max_output_tokens == Setting("8000", "CLAUDE_CODE_MAX_OUTPUT_TOKENS")
    assert settings.blocking_limit == Setting("150000", "--blocking-limit")
    assert settings.auto_compact_window == Setting("100000", "CLAUDE_CODE_AUTO_COMPACT_WINDOW")
    assert settings.disable_compact is None  # an empty variable is unset
    assert budget_settings({}, no_auto_compact=True).disable_auto_compact == Setting("1", "--no-auto-compact")


def test_window_flag_beats_auto_compact_window_env() -> None:
    _, report = warn("--window", "150000", stdin=at(50_000), env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"})
    assert report["context_window"] == 150_000


# --- --explain and --pass-through ----------------------------------------------------------------


def test_explain_with_json_prints_only_the_report() -> None:
    result = run_cli("warn", "--json", "--explain", "-", stdin=at(150_000), env={**CLEAN_ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "99"})
    assert result.returncode == 3
    assert result.stderr == b""
    [line] = result.stdout.splitlines()
    report = json.loads(line)
    assert report["explanations"][0].startswith("rules of Claude Code 2.1.88: the session's version")
    assert report["explanations"][1] == "window 200,000: the model catalog's window for claude-sonnet-4-5 (1M only with [1m] or the 1M beta)"
    assert "autocompact 167,000 = effective 180,000 − 13,000" in report["explanations"]
    assert "blocking 177,000 = effective 180,000 − 3,000" in report["explanations"]
    assert len(report["ignored"]) == 1
    # Not a terminal and no --json: still only the JSON report on stdout.
    plain = run_cli("warn", "--explain", "-", stdin=at(150_000), env={**CLEAN_ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "99"})
    assert plain.stdout == result.stdout and plain.stderr == b""


@pytest.mark.parametrize("via", ["path", "stdin"])
def test_pass_through_copies_the_input_and_reports_on_stderr(via: str, tmp_path: Path) -> None:
    data = at(150_000)
    if via == "path":
        path = tmp_path / "s.jsonl"
        path.write_bytes(data)
        result = run_cli("warn", "--pass-through", "--explain", path, env={**CLEAN_ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "99"})
        source = str(path)
    else:
        result = run_cli("warn", "--pass-through", "--explain", stdin=data, env={**CLEAN_ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "99"})
        source = "-"
    assert result.stdout == data
    assert result.returncode == 3  # still the level
    err = result.stderr.decode()
    assert err.startswith(f"{source}: warning — 150,000 tokens (75.0% of 200,000; 10% left before autocompact at 167,000)")
    assert "effective window 180,000 = window 200,000 − reserve 20,000" in err  # --explain, on stderr
    assert "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=99 ignored" in err


def test_pass_through_without_explain_and_with_json_still_keeps_stdout_clean() -> None:
    data = at(178_000)
    result = run_cli("warn", "--pass-through", "--json", stdin=data, env=CLEAN_ENV)
    assert result.stdout == data
    assert result.returncode == 5
    err = result.stderr.decode()
    assert err.count("\n") == 1 and "blocking" in err and "effective window" not in err


def test_pass_through_is_byte_identical_for_odd_input() -> None:
    s = simple(120_000)
    s.raw({"type": "x-future-entry", "note": "caf\u00e9 \u2028 separator", "n": 12345678901234567890})
    crlf = b"\xef\xbb\xbf" + s.to_bytes().replace(b"\n", b"\r\n")[:-2]  # BOM, CRLF, no final newline
    result = run_cli("warn", "--pass-through", stdin=crlf, env=CLEAN_ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout == crlf
    empty = run_cli("warn", "--pass-through", stdin=b"", env=CLEAN_ENV)
    assert empty.returncode == 0 and empty.stdout == b""


def test_warn_and_count_agree() -> None:
    for path in sorted((FIXTURES / "claude-code").glob("*.jsonl")):
        _, report = warn(path)
        counted = count_buffer(path.read_bytes(), str(path), CountOptions()).count_report()
        assert report["tokens"] == counted.tokens
        assert report["exact_tokens"] == counted.exact_tokens
        assert report["context_window"] == counted.context_window
        assert report["model"] == counted.model


def test_a_long_session_is_warned_from_its_end(tmp_path: Path) -> None:
    s = Session()
    s.user("Keep going.")
    for total in range(20_000, 171_000, 10_000):
        s.text("Next step done.", usage(total, output=40))
        s.user("Continue.")
    s.text("All steps done.", usage(172_000, output=40))
    path = s.write(tmp_path / "long.jsonl")
    result, report = warn(path)
    assert report["exact_tokens"] == 172_000
    assert report["level"] == "autocompact" and result.returncode == 4


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
@pytest.mark.parametrize("given", ["file", "folder"])
def test_explain_on_a_terminal_goes_to_stderr_as_its_help_says(given: str, tmp_path: Path) -> None:
    # One file and a folder print through the same path: the level on stdout, its reasons on stderr.
    path = tmp_path / "s.jsonl"
    path.write_bytes(at(150_000))
    leader, follower = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ctxpipe", "warn", "--explain", str(path if given == "file" else tmp_path)],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
            env=child_env({**CLEAN_ENV, "COLUMNS": "200"}),
            timeout=120,
        )
    finally:
        os.close(follower)
    shown = drain_pty(leader).decode()
    assert done.returncode == 3
    assert "warning — 150,000 tokens" in shown and "effective window" not in shown  # the terminal: the level only
    assert "effective window 180,000 = window 200,000 − reserve 20,000" in done.stderr.decode()
