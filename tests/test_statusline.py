"""`ctxpipe statusline`: Claude Code's status JSON in (any field missing, null or wrong-typed), one line
out with count's tokens and warn's level; colour; escaping; the savings cache; the light start-up."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from builders import SONNET, Session, simple, usage
from ctxpipe.cli.statusline import HELP, NO_STATUS, human
from helpers import CLEAN_ENV, child_env, run_cli, run_process

LINE = re.compile(r"^⛁ (?P<tokens>\S+)/(?P<window>\S+) (?P<percent>\d+)% (?P<level>normal|warning|autocompact|blocking)(?P<rest>.*)$")
ESC = "\x1b"


def status(env: dict[str, str] | None = None, *flags: str, **payload: Any) -> tuple[str, Any]:
    """Run statusline in-process on `payload` as JSON; the line (checked to be one line) and the run."""
    result = run_cli("statusline", *flags, stdin=json.dumps(payload).encode(), env={**CLEAN_ENV, "XDG_CACHE_HOME": "/nonexistent-cache", **(env or {})})
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr and result.stderr == b"", result.stderr
    text = result.stdout.decode()
    assert text.endswith("\n") and text.count("\n") == 1, text
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
    assert text.endswith(" · " + SONNET)  # the transcript's model, as no display name was given


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


# --- untrusted JSON --------------------------------------------------------------------------------

BAD_VALUES = [None, 3, "x", [], {}, True, -5, 1.5, {"id": None}]


@pytest.mark.parametrize("field", ["transcript_path", "model", "workspace", "context_window", "cost", "exceeds_200k_tokens", "version", "session_id"])
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
    del payload[field]
    missing, _ = status(None, "--no-savings", **payload)
    assert missing.startswith("⛁ 100K/200K 50% normal"), missing


@pytest.mark.parametrize("context_window", [None, 7, {"context_window_size": "big", "current_usage": [1]}, {"context_window_size": -1, "current_usage": None}])
def test_nothing_usable_says_no_transcript_with_the_model(context_window: Any) -> None:
    text, _ = status(None, model={"id": "claude-opus-4-6", "display_name": "Opus"}, context_window=context_window)
    assert text == "⛁ no transcript · Opus"
    text, _ = status(None, transcript_path="/no/such/file.jsonl", model={"id": "claude-opus-4-6"}, context_window=context_window)
    assert text == "⛁ transcript unreadable · claude-opus-4-6"


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
    for flags in (["--window", "0"], ["--window", "x"], ["--autocompact-pct", "150"], ["--autocompact-pct"], ["--bogus"], ["extra"]):
        result = run_cli("statusline", *flags, stdin=b"{}")
        assert result.returncode == 2 and result.stdout == b"", flags
        lines = result.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctxpipe: error: ") and lines[0].endswith("(see 'ctxpipe statusline --help')"), lines


def test_help_matches_the_other_commands_and_the_shared_flags() -> None:
    result = run_process("statusline", "--help")
    assert result.returncode == 0 and result.stdout.decode() == HELP
    assert result.stdout.startswith(b"Usage: ctxpipe statusline [OPTIONS]") and b"Example" in result.stdout
    assert b"statusline" in run_process("--help").stdout
    # The budget flags say what count's and warn's say.
    import typer  # noqa: F401  # the typer declarations are read here, not by statusline
    from ctxpipe.cli import budget_options

    for declared in (budget_options.Window, budget_options.AutocompactPct, budget_options.MaxOutput, budget_options.NoAutoCompact):
        option = declared.__metadata__[0]
        assert option.help in HELP.replace("\n" + " " * 30, " "), option.help


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
    assert entry["savings"] == stage_figures and entry["size"] == path.stat().st_size

    # The file grows: the old saving is shown while a new refresh runs, then the new one.
    _repeating_session(6).write(path)
    stale, _ = status(env, transcript_path=str(path))
    assert f"{best} −{human(stage_figures[best])}" in stale
    _wait_for(lambda: json.loads(entry_file.read_text())["size"] == path.stat().st_size and not list(entries.glob("*.lock")))
    grown = json.loads(entry_file.read_text())["savings"]
    assert grown == {stage: _freed(stage, path, tmp_path) for stage in ("microcompact", "collapse")} and grown != stage_figures

    # Nothing was written anywhere but the cache: the transcript's folder holds the transcript only.
    assert sorted(p.name for p in folder.iterdir()) == ["session.jsonl"]
    assert {p.name for p in tmp_path.iterdir()} == {"project", "cache", "microcompact.report.json", "collapse.report.json"}
    assert sorted(p.suffix for p in entries.iterdir()) == [".json"]


def test_no_savings_reads_and_starts_nothing(tmp_path: Path) -> None:
    path = _repeating_session(3).write(tmp_path / "session.jsonl")
    status({"XDG_CACHE_HOME": str(tmp_path / "cache")}, "--no-savings", transcript_path=str(path))
    time.sleep(0.5)
    assert not (tmp_path / "cache").exists()


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
    "ctxpipe.pipeline",
    "ctxpipe.core.microcompact",
    "ctxpipe.core.collapse",
)


def test_the_light_path_imports_nothing_heavy(tmp_path: Path) -> None:
    path = simple(100_000).write(tmp_path / "session.jsonl")
    payload = json.dumps({"transcript_path": str(path)}).encode()
    env = child_env({**CLEAN_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "ctxpipe", "statusline"], input=payload, capture_output=True, env=env, timeout=60)
    assert run.returncode == 0 and LINE.match(run.stdout.decode().rstrip("\n")), run
    imported = {line.split("|")[-1].strip() for line in run.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "ctxpipe.cli.statusline" in imported and "ctxpipe.file_count" in imported
    assert not {name for name in imported if name.split(".")[0] in HEAVY or name in HEAVY}, sorted(imported)


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
    result = run_cli("statusline", "--no-savings", stdin=payload.encode(), env={**CLEAN_ENV, "XDG_CACHE_HOME": "/nonexistent-cache"})
    assert result.returncode == 0 and result.stderr == b"" and b"/200K " in result.stdout
    refused = run_cli("statusline", "--window", str(huge), stdin=b"{}", env=CLEAN_ENV)
    assert refused.returncode == 2 and b"is not in the range" in refused.stderr
    ignored, _ = status({"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE": str(huge)}, "--no-savings", transcript_path=str(path))
    assert LINE.match(ignored) and LINE.match(ignored)["level"] == "normal"


def test_the_background_refresh_leaves_a_file_over_its_limit_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.cli import statusline

    path = simple(100_000).write(tmp_path / "session.jsonl")
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(statusline, "REFRESH_LIMIT", path.stat().st_size - 1)
    statusline.refresh(str(path), str(cache))
    entry = statusline.read_cache(str(cache), str(path))
    assert entry is not None and "savings" not in entry and "no saving computed" in entry["error"]
    assert [item.name for item in cache.iterdir()] == [next(cache.iterdir()).name]  # the entry only: the lock is gone
