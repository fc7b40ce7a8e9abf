"""`count --by day|project|session`: the cost of every billed call rolled up over files, the rows
adding up to the total, days at their boundaries in a time zone, --since/--until at their edges,
subagents in their session, titles, and ccusage's daily and session reports as the oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import Session
from ccusage import VERSION as CCUSAGE_VERSION
from ccusage import report as ccusage_report
from ctxpipe.core.titles import buffer_title, session_title
from ctxpipe.files.sessions import decoded_project
from ctxpipe.jobs.schemas import errors
from helpers import CLEAN_ENV, ok, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import claude_sessions

OPUS, HAIKU = "claude-opus-4-6", "claude-haiku-4-5-20251001"
# Round prices ($ per million tokens), so that each call's dollars are worked out by hand below.
PRICES = {"opus": {"input": 10, "cache_write_5m": 20, "cache_write_1h": 30, "cache_read": 1, "output": 100}}
PARTS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")


def call_usage(n: int) -> dict[str, int]:
    """A call's usage whose every part differs from the others' (n: 1, 2, 3, …)."""
    return {"input_tokens": n, "cache_creation_input_tokens": 100 * n, "cache_read_input_tokens": 1000 * n, "output_tokens": 10 * n}


def dollars(n: int) -> float:
    return (n * 10 + 100 * n * 20 + 1000 * n * 1 + 10 * n * 100) / 1e6


def timed_session(times: list[str], model: str = OPUS, cwd: str = "/home/dev/app", first: int = 1, **fields: Any) -> Session:
    """A session with one call per time given, the n-th (from `first`) with call_usage(n)."""
    session = Session(model)
    for number, when in enumerate(times, first):
        session.user(f"Step {number}.")
        session.text("Done.", call_usage(number), message_id=f"msg_{fields.get('prefix', '')}{number:04d}")
        session.lines[-1]["timestamp"] = when
    for line in session.lines:
        line["cwd"] = cwd
        line.update({key: value for key, value in fields.items() if key != "prefix"})
    return session


# The calls of one session around midnight UTC: 23:59:59.999 on the 4th, 00:00:00.000 on the 5th, then 10:00 on the 5th.
MIDNIGHT = ["2026-05-04T23:59:59.999Z", "2026-05-05T00:00:00.000Z", "2026-05-05T10:00:00.000Z"]


def rollup(*args: Any, env: dict[str, str] | None = None, code: int = 0) -> list[dict[str, Any]]:
    result = run_cli("count", "--json", *args, env={**CLEAN_ENV, **(env or {})})
    assert result.returncode == code, result.stderr.decode()
    assert b"Traceback" not in result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert all(errors("count.report.schema.json", row) == [] for row in rows), rows
    return rows


def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICES))
    return path


def assert_adds_up(rows: list[dict[str, Any]]) -> None:
    """Every figure of the total row is its rows' sum: dollars (to the millionth they are given in), tokens by kind, calls."""
    *groups, total = [row for row in rows if "error" not in row]
    assert total["total"] is True and total["groups"] == len(groups)
    assert total["api_calls"] == sum(row["api_calls"] for row in groups)
    for part in PARTS:
        assert total["tokens"][part] == sum(row["tokens"][part] for row in groups), part
    assert round(total["usd"] * 1e6) == sum(round(row["usd"] * 1e6) for row in groups)


# --- days ------------------------------------------------------------------------------------------


def test_a_session_spanning_midnight_splits_across_days_and_the_rows_add_up(tmp_path: Path) -> None:
    path = timed_session(MIDNIGHT).write(tmp_path / "s.jsonl")
    rows = rollup("--by", "day", "--timezone", "UTC", "--prices", prices(tmp_path), path)
    assert [row["group"] for row in rows[:-1]] == ["2026-05-04", "2026-05-05"]
    assert [row["api_calls"] for row in rows[:-1]] == [1, 2]
    assert rows[0]["usd"] == pytest.approx(dollars(1), abs=1e-6) and rows[1]["usd"] == pytest.approx(dollars(2) + dollars(3), abs=1e-6)
    assert rows[1]["tokens"] == {"input": 5, "cache_write_5m": 500, "cache_write_1h": 0, "cache_read": 5000, "output": 50}
    assert rows[-1]["usd"] == pytest.approx(dollars(1) + dollars(2) + dollars(3), abs=1e-6) and rows[-1]["files"] == 1
    assert_adds_up(rows)
    # The same accounting as count --cost: the session's total is the file's cost.
    cost = json.loads(ok(run_cli("count", "--cost", "--json", "--prices", prices(tmp_path), path)).stdout)["cost"]
    assert rows[-1]["usd"] == pytest.approx(cost["usd"], abs=1e-6) and rows[-1]["tokens"] == cost["tokens"]


@pytest.mark.parametrize(
    ("zone", "days"),
    [
        ("UTC", ["2026-05-04", "2026-05-05"]),
        ("America/New_York", ["2026-05-04"]),  # UTC-4 in May: 19:59 and 20:00 on the 4th, 06:00 on the 5th
        ("Asia/Tokyo", ["2026-05-05"]),  # UTC+9: 08:59, 09:00 and 19:00 on the 5th
    ],
)
def test_days_are_taken_in_the_time_zone_given(tmp_path: Path, zone: str, days: list[str]) -> None:
    times = MIDNIGHT if zone != "America/New_York" else MIDNIGHT[:2]
    rows = rollup("--by", "day", "--timezone", zone, timed_session(times).write(tmp_path / "s.jsonl"))
    assert [row["group"] for row in rows[:-1]] == days


def test_the_day_boundary_of_a_zone_splits_there(tmp_path: Path) -> None:
    # 14:59:59.999Z is 23:59:59.999 in Tokyo, 15:00Z is midnight there: two days in Tokyo, one in UTC.
    path = timed_session(["2026-05-04T14:59:59.999Z", "2026-05-04T15:00:00.000Z"]).write(tmp_path / "s.jsonl")
    assert [row["group"] for row in rollup("--by", "day", "--timezone", "Asia/Tokyo", path)[:-1]] == ["2026-05-04", "2026-05-05"]
    assert [row["group"] for row in rollup("--by", "day", "--timezone", "UTC", path)[:-1]] == ["2026-05-04"]


def test_without_timezone_days_are_in_local_time(tmp_path: Path) -> None:
    """The machine's time zone (TZ), as ccusage takes it: a child process, so TZ is read at start-up."""
    path = timed_session(["2026-05-04T14:59:59.999Z", "2026-05-04T15:00:00.000Z"]).write(tmp_path / "s.jsonl")
    env = {**os.environ, **CLEAN_ENV, "TZ": "Asia/Tokyo"}
    result = subprocess.run([sys.executable, "-m", "ctxpipe", "count", "--by", "day", "--json", str(path)], capture_output=True, env=env, check=True)
    assert [json.loads(line)["group"] for line in result.stdout.splitlines()[:-1]] == ["2026-05-04", "2026-05-05"]


def test_a_call_without_a_time_is_on_no_day_and_outside_any_bound(tmp_path: Path) -> None:
    session = timed_session(MIDNIGHT[:1])
    session.user("Again.")
    session.text("Done.", call_usage(2), message_id="msg_untimed")
    del session.lines[-1]["timestamp"]
    path = session.write(tmp_path / "s.jsonl")
    rows = rollup("--by", "day", "--timezone", "UTC", path)
    assert [row["group"] for row in rows[:-1]] == ["2026-05-04", "(no time)"]
    assert_adds_up(rows)
    assert [row["group"] for row in rollup("--by", "day", "--timezone", "UTC", "--since", "20260101", path)[:-1]] == ["2026-05-04"]


# --- --since and --until ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bounds", "calls", "zone"),
    [
        (["--since", "20260505"], [2, 3], "UTC"),  # a date: from the first instant of that day
        (["--since", "2026-05-05"], [2, 3], "UTC"),
        (["--until", "20260504"], [1], "UTC"),  # a date: to the last instant of that day
        (["--since", "20260504", "--until", "20260504"], [1], "UTC"),
        (["--until", "2026-05-04T23:59:59.999Z"], [1], "UTC"),  # a time: the instant given is in
        (["--until", "2026-05-04T23:59:59.998Z"], [], "UTC"),
        (["--since", "2026-05-05T00:00:00Z"], [2, 3], "UTC"),
        (["--since", "2026-05-05T00:00:00.001Z"], [3], "UTC"),
        (["--since", "2026-05-05T01:00:00+01:00", "--until", "2026-05-05T00:00:00Z"], [2], "UTC"),  # an offset: the same instant
        (["--since", "2026-05-05T09:00:00"], [2, 3], "Asia/Tokyo"),  # no offset: in --timezone, here 00:00Z
        (["--until", "20260505"], [1, 2, 3], "Asia/Tokyo"),  # in Tokyo every call is on the 5th
        (["--since", "20260505", "--until", "20260505"], [2, 3], "UTC"),
    ],
)
def test_since_and_until_at_their_edges(tmp_path: Path, bounds: list[str], calls: list[int], zone: str) -> None:
    rows = rollup("--by", "session", "--timezone", zone, *bounds, "--prices", prices(tmp_path), timed_session(MIDNIGHT).write(tmp_path / "s.jsonl"))
    assert rows[-1]["api_calls"] == len(calls)
    assert rows[-1]["usd"] == pytest.approx(sum(dollars(n) for n in calls), abs=1e-6)
    assert rows[-1]["tokens"]["input"] == sum(calls)


# --- sessions and projects -------------------------------------------------------------------------


def claude_tree(tmp_path: Path) -> Path:
    """A CLAUDE_CONFIG_DIR with two projects: a session with a subagent (2.1.x layout) and a title,
    spanning midnight; another session in another project."""
    projects = tmp_path / "claude" / "projects"
    main = timed_session(MIDNIGHT, sessionId="sess-a")
    main.raw({"type": "ai-title", "aiTitle": "Refactor the parser", "sessionId": "sess-a"})
    main.raw({"type": "custom-title", "customTitle": "Parser work", "sessionId": "sess-a"})
    main.write(projects / "-home-dev-app" / "sess-a.jsonl")
    agent = timed_session(["2026-05-05T00:30:00.000Z"], model=HAIKU, first=4, sessionId="sess-a", agentId="a1", isSidechain=True, prefix="agent")
    agent.write(projects / "-home-dev-app" / "sess-a" / "subagents" / "agent-a1.jsonl")
    other = timed_session(["2026-05-03T12:00:00.000Z"], cwd="/home/dev/site", first=5, sessionId="sess-b", prefix="b")
    other.write(projects / "-home-dev-site" / "sess-b.jsonl")
    return tmp_path / "claude"


def test_subagents_roll_up_into_their_session_with_its_title_and_project(tmp_path: Path) -> None:
    config = claude_tree(tmp_path)
    rows = rollup("--by", "session", "--prices", prices(tmp_path), config / "projects")
    sessions = {row["group"]: row for row in rows[:-1]}
    assert set(sessions) == {"sess-a", "sess-b"}
    a = sessions["sess-a"]
    assert a["files"] == 2 and a["api_calls"] == 4 and a["models"] == [OPUS, HAIKU]
    assert a["title"] == "Parser work" and a["project"] == "/home/dev/app"  # the custom title wins over the AI's
    assert sessions["sess-b"]["title"] == "Step 5." and sessions["sess-b"]["project"] == "/home/dev/site"  # the first prompt
    assert [row["group"] for row in rows[:-1]] == ["sess-b", "sess-a"]  # the most recent last
    assert_adds_up(rows)
    projects = rollup("--by", "project", config / "projects")
    assert {row["group"]: row["api_calls"] for row in projects[:-1]} == {"/home/dev/app": 4, "/home/dev/site": 1}
    assert_adds_up(projects)


def test_a_2_0_subagent_beside_its_session_rolls_up_by_the_session_it_records(tmp_path: Path) -> None:
    folder = tmp_path / "-home-dev-app"
    timed_session(MIDNIGHT[:1], sessionId="sess-a").write(folder / "sess-a.jsonl")
    timed_session(MIDNIGHT[1:2], first=2, sessionId="sess-a", agentId="a1", isSidechain=True, prefix="agent").write(folder / "agent-a1.jsonl")
    rows = rollup("--by", "session", folder)
    assert [(row["group"], row["files"], row["api_calls"]) for row in rows[:-1]] == [("sess-a", 2, 2)]


def test_a_response_copied_into_a_second_file_counts_once(tmp_path: Path) -> None:
    # A resumed session's file starts with the calls of the one it resumed (same message and request ids).
    timed_session(MIDNIGHT[:1]).write(tmp_path / "first.jsonl")
    timed_session(MIDNIGHT[:2]).write(tmp_path / "resumed.jsonl")
    rows = rollup("--by", "session", "--prices", prices(tmp_path), tmp_path)
    assert {row["group"]: row["api_calls"] for row in rows[:-1]} == {"first": 1, "resumed": 1}
    assert rows[-1]["usd"] == pytest.approx(dollars(1) + dollars(2), abs=1e-6)


def test_a_projects_folder_name_is_decoded_as_far_as_the_folders_here_say(tmp_path: Path) -> None:
    (tmp_path / "my-app" / "src").mkdir(parents=True)
    encoded = "-" + str(tmp_path / "my-app" / "src").strip("/").replace("/", "-")
    assert decoded_project(encoded) == str(tmp_path / "my-app" / "src")
    assert decoded_project(encoded + "-gone-now") == str(tmp_path / "my-app" / "src") + "/gone-now"  # past what exists: kept
    assert decoded_project("corpus") == "corpus"  # not an encoded path
    # A session that records no cwd is in the project its folder names.
    session = timed_session(MIDNIGHT[:1])
    for line in session.lines:
        del line["cwd"]
    rows = rollup("--by", "project", session.write(tmp_path / "projects" / encoded / "s.jsonl"))
    assert rows[0]["group"] == str(tmp_path / "my-app" / "src")


# --- titles ----------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(claude_sessions(), st.lists(st.sampled_from(["custom-title", "ai-title", "summary", "junk"]), max_size=4), st.randoms(use_true_random=False))
def test_the_byte_search_finds_the_title_session_title_finds_in_every_line(data: bytes, kinds: list[str], random: Any) -> None:
    lines = data.splitlines(keepends=True)
    fields = {"custom-title": "customTitle", "ai-title": "aiTitle", "summary": "summary", "junk": "note"}
    for number, kind in enumerate(kinds):
        line = {"type": kind, fields[kind]: f'title {number} "summary"'}  # a quoted type name inside a string is escaped
        lines.insert(random.randint(0, len(lines)), json.dumps(line).encode() + b"\n")
    whole = b"".join(lines)
    records = [json.loads(line) for line in whole.splitlines() if line.strip()]
    assert buffer_title(whole) == session_title(records)


def test_count_shows_the_title_where_it_reads_every_line(tmp_path: Path) -> None:
    session = timed_session(MIDNIGHT[:1])
    session.raw({"type": "custom-title", "customTitle": "Fix the build", "sessionId": "s"})
    path = session.write(tmp_path / "s.jsonl")
    assert json.loads(ok(run_cli("count", "--cost", "--json", path)).stdout)["title"] == "Fix the build"
    assert "title" not in json.loads(ok(run_cli("count", "--json", path)).stdout)  # the fast read of the end does not look


# --- the command line ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--by", "day", "--top", "3"], "--top"),
        (["--by", "session", "--timeline"], "--timeline"),
        (["--by", "project", "--svg", "x.svg"], "--svg"),
        (["--since", "20260101"], "--since"),
        (["--by", "tool", "--until", "20260101"], "--until"),
        (["--timezone", "UTC"], "--timezone"),
        (["--by", "day", "--since", "2026"], "--since"),
        (["--by", "day", "--until", "2026-13-01"], "--until"),
        (["--by", "day", "--timezone", "Mars/Olympus"], "--timezone"),
    ],
)
def test_impossible_combinations_and_bad_values_are_one_usage_line(tmp_path: Path, args: list[str], flag: str) -> None:
    result = run_cli("count", *args, timed_session(MIDNIGHT).write(tmp_path / "s.jsonl"), env=CLEAN_ENV)
    err = result.stderr.decode()
    assert result.returncode == 2 and err.count("\n") == 1 and flag in err and "Traceback" not in err, err
    assert result.stdout == b""


def test_a_file_that_cannot_be_read_is_a_row_and_the_others_roll_up(tmp_path: Path) -> None:
    timed_session(MIDNIGHT).write(tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_bytes(b'{"type": "user", "message": \n')
    rows = rollup("--by", "day", "--timezone", "UTC", tmp_path, code=1)
    assert rows[-2] == {"file": str(tmp_path / "b.jsonl"), "error": rows[-2]["error"]} and rows[-2]["error"].startswith("line 1: ")
    assert rows[-1]["failed"] == 1 and rows[-1]["files"] == 1 and rows[-1]["api_calls"] == 3
    assert_adds_up(rows)


def test_bad_lines_skipped_are_said_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(timed_session(MIDNIGHT).to_bytes() + b"{bad\n")
    result = run_cli("count", "--by", "day", "--json", "--on-error", "skip", path, env=CLEAN_ENV)
    assert ok(result).stdout.splitlines() and json.loads(result.stdout.splitlines()[-1])["api_calls"] == 3
    assert result.stderr.decode() == f"ctxpipe: warning: {path}: skipped 1 bad line\n"
    assert run_cli("count", "--by", "day", "--json", path, env=CLEAN_ENV).returncode == 1  # without skip: the bad line stops it


def test_stdin_rolls_up_as_one_session(tmp_path: Path) -> None:
    data = timed_session(MIDNIGHT).to_bytes()
    result = run_cli("count", "--by", "session", "--json", stdin=data, env=CLEAN_ENV)
    rows = [json.loads(line) for line in ok(result).stdout.splitlines()]
    assert rows[0]["group"] == "-" and rows[0]["api_calls"] == 3 and rows[0]["project"] == "/home/dev/app"


def test_the_table_has_a_row_per_group_and_the_total(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.cli import streams

    config = claude_tree(tmp_path)
    monkeypatch.setattr(streams, "stdout_is_terminal", lambda: True)
    table = ok(run_cli("count", "--by", "session", "--prices", prices(tmp_path), config / "projects", env={**CLEAN_ENV, "COLUMNS": "220"}))
    text = table.stdout.decode()
    assert "Parser work" in text and "/home/dev/site" in text
    usd = rollup("--by", "session", "--prices", prices(tmp_path), config / "projects")[-1]["usd"]
    total = next(line for line in text.splitlines() if "total" in line)
    assert f"${usd:.4f}" in total and " 5 " in total
    for by, group in (("project", "/home/dev/site"), ("day", "2026-05-03")):  # each row named by its group
        lines = ok(run_cli("count", "--by", by, "--timezone", "UTC", config / "projects", env={**CLEAN_ENV, "COLUMNS": "220"})).stdout.decode().splitlines()
        assert lines[0].split()[0] == by and any(line.split()[0] == group for line in lines[2:]), lines


# --- ccusage, the oracle ---------------------------------------------------------------------------


def ccusage(config: Path, command: str, tz: str) -> dict[str, Any]:
    try:
        return ccusage_report(config, command, tz)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"ccusage {CCUSAGE_VERSION} did not run here (exit {exc.returncode}): {(exc.stderr or '').strip()[:200]}")


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo"])
def test_days_and_sessions_agree_with_ccusage(tmp_path: Path, zone: str) -> None:
    config = claude_tree(tmp_path)
    days = {row["group"]: row for row in rollup("--by", "day", "--timezone", zone, config / "projects")[:-1]}
    theirs = {row["date"]: row for row in ccusage(config, "daily", zone)["daily"]}
    assert set(days) == set(theirs) and len(days) >= 2
    for day, row in days.items():
        assert round(row["usd"], 2) == round(theirs[day]["totalCost"], 2) and row["usd"] == pytest.approx(theirs[day]["totalCost"], abs=1e-5), day
        same_tokens(row, theirs[day])
    sessions = {row["group"]: row for row in rollup("--by", "session", config / "projects")[:-1]}
    theirs = {row["sessionId"]: row for row in ccusage(config, "session", zone)["sessions"]}
    assert set(sessions) == set(theirs)
    for session, row in sessions.items():
        assert row["usd"] == pytest.approx(theirs[session]["totalCost"], abs=1e-5), session
        same_tokens(row, theirs[session])


def same_tokens(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    tokens = ours["tokens"]
    assert tokens["input"] == theirs["inputTokens"] and tokens["output"] == theirs["outputTokens"]
    assert tokens["cache_write_5m"] + tokens["cache_write_1h"] == theirs["cacheCreationTokens"] and tokens["cache_read"] == theirs["cacheReadTokens"]
