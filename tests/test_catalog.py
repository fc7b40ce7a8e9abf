"""The model catalog and the rules of the Claude Code release that wrote a session (issue 21).

CATALOG below is typed by hand from Claude Code 2.1.332's baked-in catalog (../shared/reference/
claude-code-2.1.332-models.md): every model under every id a transcript records gets its window, max
output, thresholds and prices. The last test reads the catalog out of the real 2.1.332 binary and
holds ctxpipe's catalog_data.py to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from builders import Session, usage
from claude_code import CURRENT_CLAUDE_CODE_VERSION, needs_claude_code
from ctxpipe.core import catalog_data
from ctxpipe.core.budget import BudgetSettings, Setting, thresholds
from ctxpipe.core.catalog import catalog
from ctxpipe.core.jsonl import Entry
from ctxpipe.core.prices import price_of
from ctxpipe.core.rules import RELEASES, known_rules, rules_for, session_version
from helpers import ok, run_cli

M = 1_000_000


class Row(NamedTuple):
    id: str
    api_id: str  # the first-party id a transcript records
    window: int  # without [1m]
    max_output: tuple[int, int]
    prices: tuple[float, float, float, float, float]  # input, output, cache write 5m, 1h, cache read ($/MTok)


CATALOG = [
    Row("claude-3-5-haiku", "claude-3-5-haiku-20241022", 200_000, (8192, 8192), (0.8, 4, 1, 1.6, 0.08)),
    Row("claude-haiku-4-5", "claude-haiku-4-5-20251001", 200_000, (32_000, 64_000), (1, 5, 1.25, 2, 0.1)),
    Row("claude-haiku-5-5", "claude-haiku-5-5", M, (128_000, 128_000), (0.1, 0.5, 0.125, 0.2, 0.01)),
    Row("claude-3-5-sonnet", "claude-3-5-sonnet-20241022", 200_000, (8192, 8192), (3, 15, 3.75, 6, 0.3)),
    Row("claude-3-7-sonnet", "claude-3-7-sonnet-20250219", 200_000, (32_000, 64_000), (3, 15, 3.75, 6, 0.3)),
    Row("claude-sonnet-4-0", "claude-sonnet-4-20250514", 200_000, (32_000, 64_000), (3, 15, 3.75, 6, 0.3)),
    Row("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", 200_000, (32_000, 64_000), (3, 15, 3.75, 6, 0.3)),
    Row("claude-sonnet-4-6", "claude-sonnet-4-6", 200_000, (32_000, 128_000), (3, 15, 3.75, 6, 0.3)),
    Row("claude-sonnet-5", "claude-sonnet-5", M, (64_000, 128_000), (2, 10, 2.5, 4, 0.2)),
    Row("claude-sonnet-5-5", "claude-sonnet-5-5", M, (128_000, 128_000), (2, 10, 2.5, 4, 0.1)),
    Row("claude-opus-4-0", "claude-opus-4-20250514", 200_000, (32_000, 32_000), (15, 75, 18.75, 30, 1.5)),
    Row("claude-opus-4-1", "claude-opus-4-1-20250805", 200_000, (32_000, 32_000), (15, 75, 18.75, 30, 1.5)),
    Row("claude-opus-4-5", "claude-opus-4-5-20251101", 200_000, (32_000, 64_000), (5, 25, 6.25, 10, 0.5)),
    Row("claude-opus-4-6", "claude-opus-4-6", 200_000, (64_000, 128_000), (5, 25, 6.25, 10, 0.5)),
    Row("claude-opus-4-7", "claude-opus-4-7", M, (64_000, 128_000), (5, 25, 6.25, 10, 0.5)),
    Row("claude-opus-4-8", "claude-opus-4-8", M, (64_000, 128_000), (5, 25, 6.25, 10, 0.5)),
    Row("claude-opus-5", "claude-opus-5", M, (64_000, 128_000), (5, 25, 6.25, 10, 0.5)),
    Row("claude-opus-5-5", "claude-opus-5-5", M, (128_000, 128_000), (4, 20, 5, 8, 0.2)),
    Row("claude-fable-5", "claude-fable-5", M, (64_000, 128_000), (10, 50, 12.5, 20, 1)),
    Row("claude-fable-5-1", "claude-fable-5-1", M, (64_000, 128_000), (10, 50, 12.5, 20, 0.25)),
    Row("claude-fable-5-2", "claude-fable-5-2", M, (128_000, 128_000), (8, 40, 10, 16, 0.2)),
    Row("claude-mythos-5", "claude-mythos-5", M, (64_000, 128_000), (10, 50, 12.5, 20, 1)),
    Row("claude-mythos-5-1", "claude-mythos-5-1", M, (64_000, 128_000), (10, 50, 12.5, 20, 0.25)),
    Row("claude-mythos-5-2", "claude-mythos-5-2", M, (128_000, 128_000), (8, 40, 10, 16, 0.2)),
]
ROWS = {row.id: row for row in CATALOG}
# Spellings a transcript records besides the catalog id and the first-party id (Bedrock, Vertex).
MORE_SPELLINGS = {
    "claude-sonnet-4-5": ["us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5@20250929", "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"],
    "claude-opus-4-8": ["us.anthropic.claude-opus-4-8", "anthropic.claude-opus-4-8", "global.anthropic.claude-opus-4-8"],
    "claude-haiku-4-5": ["claude-haiku-4-5@20251001", "CLAUDE-HAIKU-4-5-20251001"],
    "claude-3-5-sonnet": ["claude-3-5-sonnet-v2@20241022"],
}


def spellings(row: Row) -> list[str]:
    return list(dict.fromkeys([row.id, row.api_id, *MORE_SPELLINGS.get(row.id, [])]))


def test_the_catalog_holds_exactly_the_models_of_claude_code_2_1_332() -> None:
    assert [model.id for model in catalog().models] == [row.id for row in CATALOG]
    assert catalog().release == RELEASES[-1] == "2.1.332"  # the release `latest` means is the one the catalog was read from


@pytest.mark.parametrize("row", CATALOG, ids=lambda row: row.id)
def test_every_spelling_of_a_model_gets_its_window_output_thresholds_and_prices(row: Row) -> None:
    for spelling in spellings(row):
        for version in RELEASES:
            levels = thresholds(spelling, version=version)
            reserve = min(row.max_output[0], 20_000)
            assert (levels.window, levels.max_output_tokens) == (row.window, row.max_output[0]), (spelling, version)
            assert levels.autocompact == row.window - reserve - 13_000 and levels.blocking == row.window - reserve - 3_000, spelling
            assert levels.warning == row.window - reserve - 33_000
        # [1m] gives 1M on any model; the catalog still gives the output limits.
        assert thresholds(f"{spelling}[1m]").window == M
        assert thresholds(f"{spelling}[1M]", BudgetSettings(max_output_tokens=Setting("999999", "flag"))).max_output_tokens == row.max_output[1]
        prices = price_of(spelling)
        assert prices is not None, spelling
        assert (prices.input, prices.output, prices.cache_write_5m, prices.cache_write_1h, prices.cache_read) == pytest.approx(row.prices), spelling


@pytest.mark.parametrize("row", CATALOG, ids=lambda row: row.id)
def test_warn_and_count_cost_on_a_session_of_each_model(tmp_path: Path, row: Row) -> None:
    session = Session(row.api_id, version="2.1.332")
    session.user("hi")
    session.text("hello", {"input_tokens": 1000, "cache_creation_input_tokens": 20_000, "cache_read_input_tokens": 50_000, "output_tokens": 2000})
    path = session.write(tmp_path / "s.jsonl")
    warned = json.loads(ok(run_cli("warn", "--json", path)).stdout)
    reserve = min(row.max_output[0], 20_000)
    assert warned["context_window"] == row.window and warned["rules"] == "2.1.332"
    assert warned["thresholds"]["autocompact"] == row.window - reserve - 13_000
    cost = json.loads(ok(run_cli("count", "--cost", "--json", path)).stdout)["cost"]
    given, output, write, _, read = row.prices
    assert cost["usd"] == pytest.approx((1000 * given + 20_000 * write + 50_000 * read + 2000 * output) / M, abs=1e-6)
    assert cost["unpriced_models"] == []


def test_the_session_the_issue_measured_costs_what_opus_4_8_costs(tmp_path: Path) -> None:
    """ctxpipe said $28.58 at opus-4's $15/$75; opus-4-8 is $5/$25: a third of it."""
    session = Session("claude-opus-4-8", version="2.1.332")
    for turn in range(3):
        session.user(f"step {turn}")
        session.text("ok", {"input_tokens": 10, "cache_creation_input_tokens": 100_000, "cache_read_input_tokens": 200_000 * turn, "output_tokens": 3000})
    cost = json.loads(ok(run_cli("count", "--cost", "--json", session.write(tmp_path / "s.jsonl"))).stdout)["cost"]
    by_hand = (30 * 5 + 300_000 * 6.25 + 600_000 * 0.5 + 9000 * 25) / M
    assert cost["usd"] == pytest.approx(by_hand, abs=1e-6)
    assert cost["prices_per_mtok"]["claude-opus-4-8"] == {"input": 5, "cache_write_5m": 6.25, "cache_write_1h": 10, "cache_read": 0.5, "output": 25}


def test_haiku_5_5_bills_a_prompt_over_100k_at_its_long_prompt_rate(tmp_path: Path) -> None:
    session = Session("claude-haiku-5-5", version="2.1.332")
    session.user("short")
    session.text("a", {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 99_900, "output_tokens": 10})  # 100,000: not over
    session.user("long")
    session.text("b", {"input_tokens": 100, "cache_creation_input_tokens": 1, "cache_read_input_tokens": 99_900, "output_tokens": 10})  # 100,001
    cost = json.loads(ok(run_cli("count", "--cost", "--json", session.write(tmp_path / "s.jsonl"))).stdout)["cost"]
    first = (100 * 0.1 + 99_900 * 0.01 + 10 * 0.5) / M
    second = (100 * 0.5 + 1 * 0.625 + 99_900 * 0.05 + 10 * 2.5) / M
    assert cost["usd"] == pytest.approx(first + second, abs=1e-6) and cost["long_context_calls"] == 1


def test_fast_mode_and_us_only_inference_are_billed_as_claude_code_bills_them(tmp_path: Path) -> None:
    session = Session("claude-opus-4-8", version="2.1.332")
    plain = {"input_tokens": 1000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1000}
    session.user("one")
    session.text("a", plain | {"speed": "fast"})  # opus-4-8 fast: 10 / 50
    session.user("two")
    session.text("b", plain | {"inference_geo": "us"})  # 1.1 × 5 / 25
    session.user("three")
    session.text("c", plain | {"speed": "standard"})
    cost = json.loads(ok(run_cli("count", "--cost", "--json", session.write(tmp_path / "s.jsonl"))).stdout)["cost"]
    assert cost["usd"] == pytest.approx((1000 * 10 + 1000 * 50) / M + 1.1 * (1000 * 5 + 1000 * 25) / M + (1000 * 5 + 1000 * 25) / M, abs=1e-6)
    assert cost["fast_calls"] == 1
    # A model without a fast rate is billed at its list price even when usage says fast.
    assert price_of("claude-sonnet-5") is not None and price_of("claude-sonnet-5").fast is None  # type: ignore[union-attr]


def test_a_model_not_in_the_catalog_is_named_as_such(tmp_path: Path) -> None:
    session = Session("acme-coder-9", version="2.1.332")
    session.user("hi")
    session.text("hello", usage(1000))
    path = session.write(tmp_path / "s.jsonl")
    warned = json.loads(ok(run_cli("warn", "--json", path)).stdout)
    assert any("acme-coder-9 is not in the model catalog" in line for line in warned["explanations"])
    assert warned["context_window"] == M  # 2.1.332 gives a model it does not know 1M
    older = json.loads(ok(run_cli("warn", "--json", "--rules", "2.1.88", path)).stdout)
    assert older["context_window"] == 200_000 and older["max_output_tokens"] == 32_000
    assert json.loads(ok(run_cli("warn", "--json", path)).stdout)["max_output_tokens"] == 32_000
    assert "not in the model catalog" in ok(run_cli("count", "--cost", path)).stdout.decode()
    assert price_of("claude-opus-4") is not None and price_of("claude-opus-4-9") is None  # an id, not a fragment: opus-4 must not price opus-4-9


# --- the rules of the release that wrote the session -----------------------------------------------


@pytest.mark.parametrize(
    ("version", "release"),
    [
        ("2.1.88", "2.1.88"),
        ("2.1.200", "2.1.88"),
        ("1.0.24", "2.1.88"),
        ("2.1.332", "2.1.332"),
        ("2.1.400", "2.1.332"),
        ("3.0.0", "2.1.332"),
        (None, "2.1.332"),
        ("ctxpipe", "2.1.332"),
    ],
)
def test_a_session_follows_the_newest_release_not_after_its_version(version: str | None, release: str) -> None:
    assert rules_for(version)[0].release == release
    assert rules_for(version, "2.1.88")[0].release == "2.1.88" and rules_for(version, "latest")[0].release == RELEASES[-1]


def test_the_highest_version_the_lines_record_is_the_sessions() -> None:
    def lines(*versions: object) -> list[Entry]:
        return [Entry({"type": "user", "version": version}) for version in versions]

    assert session_version(lines("2.1.88", "2.1.332", "2.1.114", None, 7, "junk")) == "2.1.332"
    assert session_version(lines("2.1.9", "2.1.10")) == "2.1.10" and session_version([]) is None
    with pytest.raises(ValueError, match="2.1.88, 2.1.332 and latest"):
        known_rules("2.1.100")


def levels_for(environ: dict[str, str], model: str = "claude-opus-4-8", version: str = "2.1.332") -> Any:
    from ctxpipe.cli.budget_environment import budget_settings

    return thresholds(model, budget_settings(environ), version=version)


@pytest.mark.parametrize(("value", "cap"), [("500k", 500_000), ("500K", 500_000), ("1.5m", M), ("500000", 500_000), ("50000", 100_000), ("1k", 100_000)])
def test_the_auto_compact_window_as_2_1_332_reads_it(value: str, cap: int) -> None:
    levels = levels_for({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": value})
    expected = min(cap, M)
    assert levels.effective_window == expected - 20_000 and levels.autocompact == expected - 33_000
    assert levels.blocking == 977_000  # the model's window: the cap no longer lowers it
    assert levels.window == M


def test_under_2_1_88_the_window_variable_caps_the_blocking_limit_too() -> None:
    levels = levels_for({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"}, version="2.1.88")
    assert (levels.window, levels.autocompact, levels.blocking) == (500_000, 467_000, 477_000)
    # 500k is what the user means, whichever release wrote the session (2.1.88 itself read whole numbers only).
    read = levels_for({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500k"}, version="2.1.88")
    assert (read.window, read.autocompact, read.blocking) == (500_000, 467_000, 477_000)
    assert any("read as 500,000" in line for line in read.explanations)
    assert levels_for({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "50000"}, version="2.1.88").window == 50_000  # no 100,000 minimum there


@pytest.mark.parametrize("value", ["abc", "0", "-5", "k", "1e400"])
def test_an_unusable_auto_compact_window_is_ignored_and_said(value: str) -> None:
    levels = levels_for({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": value})
    assert levels.autocompact == 967_000 and any("CLAUDE_CODE_AUTO_COMPACT_WINDOW" in line for line in levels.ignored)


def test_disabling_1m_windows_brings_native_1m_models_to_200k() -> None:
    assert levels_for({"CLAUDE_CODE_DISABLE_1M_CONTEXT": "1"}).window == 200_000
    assert levels_for({"CLAUDE_CODE_DISABLE_1M_CONTEXT": "1"}, "claude-sonnet-4-5[1m]").window == 200_000
    assert levels_for({"CLAUDE_CODE_DISABLE_1M_CONTEXT": "1"}, "acme").window == 200_000


def test_max_context_tokens_sizes_unknown_models_and_every_model_without_compaction() -> None:
    assert levels_for({"CLAUDE_CODE_MAX_CONTEXT_TOKENS": "300000"}, "acme").window == 300_000
    assert levels_for({"CLAUDE_CODE_MAX_CONTEXT_TOKENS": "300000"}).window == M  # a known model keeps its window
    assert levels_for({"CLAUDE_CODE_MAX_CONTEXT_TOKENS": "300000", "DISABLE_COMPACT": "1"}).window == 300_000
    assert levels_for({"CLAUDE_CODE_MAX_CONTEXT_TOKENS": "300000"}, "acme", "2.1.88").window == 200_000  # 2.1.88 kept it for Anthropic's staff


def test_a_recorded_prompt_over_200k_proves_a_1m_window(tmp_path: Path) -> None:
    session = Session("claude-sonnet-4-5-20250929", version="2.1.332")
    session.user("hi")
    session.text("hello", usage(250_000))
    warned = json.loads(ok(run_cli("warn", "--json", session.write(tmp_path / "s.jsonl"))).stdout)
    assert warned["context_window"] == M and "does not fit" in warned["explanations"][1]


def test_warn_says_which_rules_it_applied_and_takes_rules(tmp_path: Path) -> None:
    session = Session("claude-opus-4-8", version="2.1.332")
    session.user("hi")
    session.text("hello", usage(20_000))
    path = session.write(tmp_path / "s.jsonl")
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"}
    today = json.loads(ok(run_cli("warn", "--json", path, env=env)).stdout)
    seed = json.loads(ok(run_cli("warn", "--json", "--rules", "2.1.88", path, env=env)).stdout)
    assert today["explanations"][0] == "rules of Claude Code 2.1.332: the session's version"
    assert (today["autocompact_window"], today["thresholds"]["blocking"]) == (500_000, 977_000)
    assert (seed["rules"], seed["context_window"], seed["thresholds"]["blocking"]) == ("2.1.88", 500_000, 477_000)
    bad = run_cli("warn", "--rules", "2.2.0", path)
    assert bad.returncode == 2 and b"2.1.88, 2.1.332 and latest" in bad.stderr and b"Traceback" not in bad.stderr


# --- the oracle: the catalog inside Claude Code's binary ----------------------------------------------


@needs_claude_code
def test_catalog_data_is_what_the_claude_code_2_1_332_binary_carries() -> None:
    from claude_code import claude_code_command
    from claude_code_catalog import ctxpipe_catalog

    binary = Path(claude_code_command(CURRENT_CLAUDE_CODE_VERSION)[0])
    theirs = ctxpipe_catalog(binary)
    # Against a newer release (CTXPIPE_CLAUDE_CODE_CURRENT) a difference is news: remake catalog_data.py
    # with `python tests/claude_code_catalog.py BINARY RELEASE` and add that release's rules to core/rules.py.
    assert catalog_data.MODELS == theirs["models"]
    assert catalog_data.PRICING_TIERS == theirs["pricing_tiers"]
    assert catalog_data.FOUR_BYTES_PER_TOKEN == theirs["four_bytes_per_token"]


def test_a_codex_rollout_takes_its_window_from_the_rollout(tmp_path: Path) -> None:
    from helpers import FIXTURES

    rollout = (FIXTURES / "codex" / "rollout.jsonl").read_bytes()
    assert rollout.count(b'"model_context_window":258400') == 2
    warned = json.loads(ok(run_cli("warn", "--json", FIXTURES / "codex" / "rollout.jsonl")).stdout)
    # Newer Codex records 95 % of the model's window; Codex 0.171.0 compacts at 90 % of the window itself.
    assert warned["context_window"] == 272_000 and warned["thresholds"]["autocompact"] == 244_800
    older = tmp_path / "rollout.jsonl"  # older Codex recorded the window itself
    older.write_bytes(rollout.replace(b'"model_context_window":258400', b'"model_context_window":272000'))
    assert json.loads(ok(run_cli("warn", "--json", older)).stdout)["thresholds"]["autocompact"] == 244_800
    other = tmp_path / "other.jsonl"  # a figure that is not 95 % of a whole number of thousands is the window
    other.write_bytes(rollout.replace(b'"model_context_window":258400', b'"model_context_window":200123'))
    assert json.loads(ok(run_cli("count", "--json", other)).stdout)["context_window"] == 200_123
    assert json.loads(ok(run_cli("count", "--json", "--window", "100000", older)).stdout)["context_window"] == 100_000  # --window still decides
