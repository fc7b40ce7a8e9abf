"""Issue 11's invariants on the corpus's compacted session, measured by bench/summary_recall.py
against a hand-made fact list (bench/facts/spotter-fa812bfe.json), not by ctxpipe's own verifier:
every typed message and the last request carried by `summarize` and `compact`, and the verifier
never claiming more than that independent measurement finds in the same output."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from helpers import CORPUS, ROOT, needs_corpus

BENCH = ROOT / "bench" / "summary_recall.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("summary_recall", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


recall_bench = _bench()


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    result: dict[str, Any] = recall_bench.measure()
    return result


def test_a_fact_is_carried_by_its_text_or_an_alternative_case_and_whitespace_aside() -> None:
    fact = {"kind": "file", "text": "/home/u/lib/Foo.ex", "alternatives": ["lib/foo.ex"]}
    assert recall_bench.carried(fact, recall_bench.normal("edited  LIB/FOO.EX\nearlier"))
    assert recall_bench.carried(fact, recall_bench.normal("/HOME/u/lib/foo.ex"))
    assert not recall_bench.carried(fact, recall_bench.normal("lib/ foo.ex and lib/bar.ex are not it"))
    figures = recall_bench.recall([fact, {"kind": "error", "text": "no upstream branch", "alternatives": []}], "Lib/Foo.ex")
    assert (figures["facts"], figures["carried"], figures["recall"]) == (2, 1, 0.5)
    assert figures["kinds"]["error"]["missing"] == ["no upstream branch"]
    assert figures["kinds"]["task"]["recall"] is None  # no facts of a kind: no figure, not 100 %


@needs_corpus
def test_every_fact_is_in_the_history_it_was_taken_from() -> None:
    """The fact list describes lines 1..1583 of the session: each fact's text or an alternative
    occurs there, and each says where (line numbers) and, for an error, whether it was resolved."""
    lines = recall_bench.read_lines(CORPUS / recall_bench.SESSION)
    cut = next(i for i, o in enumerate(lines) if o.get("subtype") == "compact_boundary")
    assert cut == 1583
    history = recall_bench.normal("\n".join(recall_bench.message_text(o) for o in lines[:cut]))
    facts = json.loads(recall_bench.FACTS.read_text(encoding="utf-8"))
    assert {f["kind"] for f in facts} == set(recall_bench.KINDS)
    for fact in facts:
        assert recall_bench.carried(fact, history), fact["text"]
        assert any(ch.isdigit() for ch in fact["why"]), fact["text"]
        assert fact["kind"] != "error" or isinstance(fact.get("resolved"), bool), fact["text"]


@needs_corpus
def test_claude_code_and_ctxpipe_were_both_measured(measured: dict[str, Any]) -> None:
    assert measured["failed"] == []
    assert measured["claude_code"]["kinds"]["instruction"]["facts"] == 2
    for output in ("summarize", "compact"):
        assert measured[output]["facts"] == measured["claude_code"]["facts"] > 30


@needs_corpus
@pytest.mark.parametrize("output", ["summarize", "compact"])
@pytest.mark.parametrize("kind", ["instruction", "last-request"])
def test_every_typed_message_and_the_last_request_are_carried(measured: dict[str, Any], output: str, kind: str) -> None:
    figures = measured[output]["kinds"][kind]
    assert figures["recall"] == 1.0, f"{output} missed: {figures['missing']}"


@needs_corpus
@pytest.mark.parametrize("output", ["summarize", "compact"])
def test_the_verifier_never_claims_more_than_the_independent_measurement(measured: dict[str, Any], output: str) -> None:
    said = measured[f"{output}_verifier"]
    assert said is not None and said["recall"] is not None, f"{output}: no verifier figures"
    claims = [c for c in measured["over_claims"] if c["output"] == output]
    assert claims == [], f"{output}: the verifier over-claims: {claims}"
