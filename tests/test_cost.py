"""`count --cost`: every billed call once, priced by part; checked by hand and against ccusage."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from builders import Session, usage
from ccusage import VERSION as CCUSAGE_VERSION
from ccusage import session_costs
from ctxpipe.jobs.schemas import errors
from helpers import ok, run_cli

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
OPUS, HAIKU, SONNET = "claude-opus-4-6", "claude-haiku-4-5-20251001", "claude-sonnet-4-5-20250929"


def priced_session() -> Session:
    """Four billed calls whose dollars are worked out by hand below, and a synthetic line that is not one."""
    session = Session(OPUS)
    session.user("Read the config.")
    tool = session.tool_id()
    # A: one response over two lines (the first with the stale output count): counted once, from its last line.
    session.response(
        [{"type": "text", "text": "Reading."}, {"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": "/a"}}],
        {"input_tokens": 10, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0, "output_tokens": 300},
    )
    session.tool_result(tool, "x = 1\n")
    # B: cache writes split by TTL: 100 for 5 minutes, 400 for an hour.
    session.text(
        "Done.",
        {
            "input_tokens": 5,
            "cache_creation_input_tokens": 500,
            "cache_read_input_tokens": 2000,
            "output_tokens": 100,
            "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 400},
        },
    )
    # C: a subagent's call on a sidechain: billed, not on the timeline.
    task = session.user("Look around.", parent=None, sidechain=True)
    session.text(
        "Looked.",
        {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1000, "output_tokens": 20},
        model=HAIKU,
        sidechain=True,
        parent=task,
    )
    # A synthetic error line: Claude Code wrote it, no API call was made.
    session.text(
        "API Error: overloaded", {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0}, model="<synthetic>"
    )
    # D: a prompt over 200K tokens on a 1M-window model: the whole request at the long-context rate.
    session.user("And the rest?")
    session.text("All read.", {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 250_000, "output_tokens": 1000}, model=SONNET)
    return session


# By hand, $/MTok from Anthropic's list: opus-4-6 5 / 6.25 / 10 / 0.50 / 25; haiku-4-5 1 / 1.25 / 2 / 0.10 / 5;
# sonnet-4-5 over 200K 6 / 7.50 / 12 / 0.60 / 22.50.
CALL_A = (10 * 5 + 2000 * 6.25 + 300 * 25) / 1e6  # 0.02005
CALL_B = (5 * 5 + 100 * 6.25 + 400 * 10 + 2000 * 0.5 + 100 * 25) / 1e6  # 0.00815
CALL_C = (3 * 1 + 1000 * 0.1 + 20 * 5) / 1e6  # 0.000203
CALL_D = (10 * 6 + 250_000 * 0.6 + 1000 * 22.5) / 1e6  # 0.17256


def cost_of(path: Path, *flags: str) -> dict[str, Any]:
    result = run_cli("count", "--cost", "--json", *flags, path)
    ok(result)
    row = json.loads(result.stdout.splitlines()[0])
    assert errors("count.report.schema.json", row) == [], row
    return row["cost"]


def test_every_billed_call_once_priced_by_part(tmp_path: Path) -> None:
    cost = cost_of(priced_session().write(tmp_path / "s.jsonl"))
    assert cost["api_calls"] == 4
    assert cost["usd"] == pytest.approx(CALL_A + CALL_B + CALL_C + CALL_D, abs=1e-6)
    assert cost["tokens"] == {"input": 28, "cache_write_5m": 2100, "cache_write_1h": 400, "cache_read": 253_000, "output": 1420}
    assert cost["usd_by_part"]["cache_write_1h"] == pytest.approx(400 * 10 / 1e6)
    assert cost["usd_by_part"]["output"] == pytest.approx((300 * 25 + 100 * 25 + 20 * 5 + 1000 * 22.5) / 1e6)
    assert cost["cache_hit_rate"] == round(253_000 / (2010 + 2505 + 1003 + 250_010), 4)
    assert cost["models"] == [OPUS, HAIKU, SONNET]
    assert cost["long_context_calls"] == 1
    assert cost["prices_per_mtok"][SONNET]["cache_read"] == 0.3  # its list price; the call over 200K was billed at 0.6
    assert cost["unpriced_models"] == [] and cost["cache_rebuilds"] == 0


def test_a_cache_rebuild_is_counted_and_a_growing_prompt_is_not(tmp_path: Path) -> None:
    session = Session(OPUS)
    session.user("one")
    session.text("a", usage(20_000, cache_creation=20_000 - 55))  # the first call writes everything: no rebuild
    session.user("two")
    session.text("b", {"input_tokens": 5, "cache_creation_input_tokens": 15_000, "cache_read_input_tokens": 19_995, "output_tokens": 50})  # grew
    session.user("three, after an hour away")
    session.text("c", {"input_tokens": 5, "cache_creation_input_tokens": 35_100, "cache_read_input_tokens": 0, "output_tokens": 50})  # rebuilt
    cost = cost_of(session.write(tmp_path / "s.jsonl"))
    assert cost["cache_rebuilds"] == 1


def test_a_subagent_starting_its_own_prompt_is_no_cache_rebuild(tmp_path: Path) -> None:
    session = Session(OPUS)
    session.user("Look into three modules.")
    session.text("On it.", usage(30_000, cache_creation=30_000 - 55))
    for agent in range(3):  # each subagent writes a fresh 20K prompt of its own while the main chain reads its 30K
        task = session.user(f"Module {agent}.", parent=None, sidechain=True)
        session.text(
            "Read it.",
            {"input_tokens": 5, "cache_creation_input_tokens": 20_000, "cache_read_input_tokens": 0, "output_tokens": 50},
            sidechain=True,
            parent=task,
        )
        session.user(f"Next {agent}.")
        session.text("Noted.", {"input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 30_000 + 100 * agent, "output_tokens": 50})
    cost = cost_of(session.write(tmp_path / "s.jsonl"))
    assert cost["api_calls"] == 7 and cost["cache_rebuilds"] == 0


def test_a_model_without_a_price_makes_the_total_unknown_until_prices_names_it(tmp_path: Path) -> None:
    session = Session("acme-coder-9")
    session.user("hi")
    session.text("hello", usage(1000, output=100, input_tokens=900, cache_creation=0))
    path = session.write(tmp_path / "s.jsonl")
    cost = cost_of(path)
    assert cost["usd"] is None and cost["unpriced_models"] == ["acme-coder-9"]
    assert cost["tokens"]["input"] == 900  # the tokens are still known
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"acme-coder": {"input": 2, "cache_write_5m": 2.5, "cache_write_1h": 4, "cache_read": 0.2, "output": 8}}))
    cost = cost_of(path, "--prices", str(prices))
    assert cost["usd"] == pytest.approx((900 * 2 + 100 * 8) / 1e6)


def test_prices_file_with_its_own_long_context_rate(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    base = {"input": 1, "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1, "output": 1}
    prices.write_text(json.dumps({"sonnet-4-5": base | {"long_context": {key: 2 for key in base}}}))
    cost = cost_of(priced_session().write(tmp_path / "s.jsonl"), "--prices", str(prices))
    assert cost["usd"] == pytest.approx(CALL_A + CALL_B + CALL_C + (250_010 + 1000) * 2 / 1e6, abs=1e-6)


@pytest.mark.parametrize(
    "table",
    [
        "[1, 2]",
        '{"opus": {"input": 1}}',
        '{"opus": {"input": 1, "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1, "output": -1}}',
        '{"opus": {"input": 1, "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1, "output": 1, "long_context": 5}}',
        # A finite price whose products are not: a session's cost would be infinite.
        '{"opus": {"input": 1e308, "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1, "output": 1}}',
        '{"opus": {"input": 1, "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1, "output": 1000001}}',
        "not json",
    ],
)
def test_a_bad_price_table_is_bad_input_naming_the_file(tmp_path: Path, table: str) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(table)
    result = run_cli("count", "--cost", "--prices", prices, priced_session().write(tmp_path / "s.jsonl"))
    assert result.returncode == 1
    assert result.stderr.decode().startswith(f"ctxpipe: error: {prices}: not a price table") and result.stderr.count(b"\n") == 1


def test_the_table_shows_the_cost_and_hit_rate_and_the_total_adds_them_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.cli import streams

    first = priced_session().write(tmp_path / "a" / "s.jsonl")
    second = priced_session().write(tmp_path / "b" / "s.jsonl")
    result = run_cli("count", "--cost", "--json", first, second)
    ok(result)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows[-1]["total"] and rows[-1]["usd"] == pytest.approx(2 * (CALL_A + CALL_B + CALL_C + CALL_D), abs=1e-5)
    assert errors("count.report.schema.json", rows[-1]) == []
    monkeypatch.setattr(streams, "stdout_is_terminal", lambda: True)
    table = ok(run_cli("count", "--cost", first, env={"COLUMNS": "200"})).stdout.decode()  # wide enough for every column
    assert "cost" in table and "cache hit" in table
    assert f"${CALL_A + CALL_B + CALL_C + CALL_D:.4f}" in table and "99.0%" in table


def test_without_cost_count_reads_only_the_end_and_prints_no_cost(tmp_path: Path) -> None:
    result = run_cli("count", "--json", priced_session().write(tmp_path / "s.jsonl"))
    ok(result)
    assert "cost" not in json.loads(result.stdout)


# --- ccusage, the oracle -------------------------------------------------------------------------------


def ccusage_sessions(config: Path) -> dict[str, float]:
    try:
        return session_costs(config)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"ccusage {CCUSAGE_VERSION} did not run here (exit {exc.returncode}): {(exc.stderr or '').strip()[:200]}")


def test_count_cost_agrees_with_ccusage_on_sessions_without_a_long_prompt(tmp_path: Path) -> None:
    projects = tmp_path / "claude" / "projects" / "-home-dev-app"
    sessions = {"with-a-sidechain-and-1h-writes": priced_session(), "rebuilt": Session(OPUS)}
    sessions["with-a-sidechain-and-1h-writes"].lines = sessions["with-a-sidechain-and-1h-writes"].lines[:-2]  # without call D
    rebuilt = sessions["rebuilt"]
    rebuilt.user("one")
    rebuilt.text("a", usage(20_000, cache_creation=5000), message_id="msg_other")
    for name, session in sessions.items():
        session.write(projects / f"{name}.jsonl")
    theirs = ccusage_sessions(tmp_path / "claude")
    for name in sessions:
        ours = cost_of(projects / f"{name}.jsonl")["usd"]
        assert ours == pytest.approx(theirs[name], rel=0.01), name


def test_a_long_prompt_is_where_ccusage_differs_and_why(tmp_path: Path) -> None:
    """Anthropic bills a request whose prompt is over 200K tokens at the long-context rate, all of it;
    ccusage 20 bills only the tokens of each part above 200K at that rate, and output at the base rate."""
    session = Session(SONNET)
    session.user("And the rest?")
    session.text(
        "All read.", {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 250_000, "output_tokens": 1000}, message_id="msg_long"
    )
    path = session.write(tmp_path / "claude" / "projects" / "p" / "long.jsonl")
    theirs = ccusage_sessions(tmp_path / "claude")["long"]
    assert theirs == pytest.approx((10 * 3 + 200_000 * 0.3 + 50_000 * 0.6 + 1000 * 15) / 1e6)
    assert cost_of(path)["usd"] == pytest.approx(CALL_D)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="needs ../shared/corpus beside the project")
def test_count_cost_agrees_with_ccusage_on_every_corpus_session(tmp_path: Path) -> None:
    projects = tmp_path / "claude" / "projects" / "corpus"
    projects.mkdir(parents=True)
    for source in CORPUS.rglob("*.jsonl"):
        if "codex" not in source.name:
            shutil.copy(source, projects / source.name.rsplit("__", 1)[-1])
    theirs = ccusage_sessions(tmp_path / "claude")
    assert len(theirs) >= 5
    for name, usd in theirs.items():
        assert cost_of(projects / f"{name}.jsonl")["usd"] == pytest.approx(usd, rel=0.01), name
