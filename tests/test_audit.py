"""`ctxpipe audit`: every compaction of a session, what it kept and lost, and what it cost after.

Sessions are built by hand (tests/builders.py through test_summarize's Convo) so that every fact,
every token and every call is known: the figures asserted here are counted by the test itself, not
read back from ctxpipe. The corpus case checks a real Claude Code compaction against the boundary's
own record.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from builders import usage
from ctxpipe import api
from ctxpipe.core.prices import price_of
from ctxpipe.core.tokens import IMAGE_TOKENS
from ctxpipe.jobs import schemas
from helpers import CLEAN_ENV, CORPUS, FIXTURES, corpus_files, ok, run_cli
from test_summarize import MODEL, Convo

REQUEST = "Add retries to the HTTP client in src/http/client.py"
QUEUED = "also log each retry at debug level"
FAILURE = "FAILED tests/test_client.py::test_retry - AssertionError: expected 3 calls"
TODO = "Document the retry policy"
CLIENT = "/home/dev/shop/src/http/client.py"
# What Claude Code's summary says: the request and the file, not the queued message, the error or the todo.
SUMMARY = f"Summary: the user asked: {REQUEST}. The retry loop was added to src/http/client.py."
AFTER = usage(30_000, cache_creation=12_000)  # the first call after the compaction: 12,000 written again


def queued(s: Convo, content: str, **removal: str) -> None:
    """A prompt typed while the agent works, then taken from the queue (bare `remove`: delivered mid-turn)."""
    s.raw({"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-03-04T10:30:00.000Z", "sessionId": s.session_id, "content": content})
    s.raw({"type": "queue-operation", "operation": "remove", "timestamp": "2026-03-04T10:30:01.000Z", "sessionId": s.session_id, **removal})


def session(thrash: bool = True) -> Convo:
    s = Convo()
    s.user(REQUEST)
    s.call("Read", {"file_path": CLIENT}, "class Client:\n    def get(self, url): ...\n" * 40, 9_000)
    s.call("Edit", {"file_path": CLIENT, "old_string": "def get", "new_string": "def get_with_retry"}, "ok", 9_500)
    queued(s, QUEUED)
    s.call("Bash", {"command": "pytest tests/test_client.py"}, FAILURE, 10_000, error=True)
    s.call("TodoWrite", {"todos": [{"content": TODO, "status": "pending"}]}, "ok", 10_500)
    s.compact(SUMMARY)
    s.text("Picking up where we left off.", AFTER)
    s.call("Read", {"file_path": CLIENT}, "class Client:\n    def get_with_retry(self, url): ...\n" * 40, 31_000)
    if thrash:  # two calls later, compacted again
        s.compact(f"Summary: {REQUEST}; {QUEUED}.")
        s.text("Continuing.", usage(20_000))
    return s


def boundary_lines(s: Convo) -> list[int]:
    return [n for n, line in enumerate(s.lines, 1) if line.get("subtype") == "compact_boundary"]


def audit_rows(data: bytes) -> list[dict[str, Any]]:
    return [row.to_wire() for row in api.audit_transcript(data).rows()]


# --- the figures ----------------------------------------------------------------------------------


def test_an_image_read_again_costs_what_the_count_charges_for_an_image() -> None:
    # A screenshot read before and after a compaction: its base64 is not text the model reads.
    picture = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" + "A" * 200_000}}]
    s = Convo()
    s.user("Look at the screenshot.")
    s.call("Read", {"file_path": "/home/dev/shop/shot.png"}, picture, 9_000)
    s.compact(SUMMARY)
    s.text("Picking up where we left off.", AFTER)
    s.call("Read", {"file_path": "/home/dev/shop/shot.png"}, picture, 31_000)
    first, _ = audit_rows(s.to_bytes())
    assert first["rereads"] == 1
    assert IMAGE_TOKENS <= first["reread_tokens"] < IMAGE_TOKENS + 50  # the flat cost, and the result's few words around it


def test_each_compaction_is_audited_against_what_the_session_recorded() -> None:
    s = session()
    first, second, total = audit_rows(s.to_bytes())
    assert [first["line"], second["line"]] == boundary_lines(s)
    assert first["trigger"] == "auto" and first["by"] == "claude-code" and first["pre_tokens"] == 150_000  # the boundary's record
    assert first["post_tokens"] == 30_000 - AFTER["output_tokens"]  # input + cache writes + cache reads of the first response after it
    assert first["cache_write_tokens"] == 12_000
    prices = price_of(MODEL)
    assert prices is not None
    assert first["rebuild_usd"] == pytest.approx(12_000 * prices.cache_write_5m / 1e6)
    assert first["summary_tokens"] > 0 and first["refill_turns"] == 4 and not first["thrash"]
    assert first["rereads"] == 1 and first["reread_tokens"] > 0  # the client read again after it
    # The second came two calls after the first, automatically: the context refilled at once.
    assert second["refill_turns"] == 2 and second["thrash"] is True
    assert total["total"] is True and total["compactions"] == 2 and total["thrash"] == 1 and not total["thrashing"]
    assert total["facts"] == first["facts"] + second["facts"] and total["carried"] == first["carried"] + second["carried"]
    assert all(schemas.reference_errors("audit.report.schema.json", row) == [] for row in (first, second, total))


def test_the_lost_facts_are_the_ones_the_summary_does_not_hold() -> None:
    first = audit_rows(session(thrash=False).to_bytes())[0]
    # Counted by hand: the two typed messages (the queued one delivered mid-turn among them), the last
    # request (the queued one), the file edited, the failure, the todo, the current work (the file).
    lost = {(fact["kind"], fact["text"]) for fact in first["lost"]}
    assert lost == {("instruction", QUEUED), ("last-request", QUEUED), ("error", FAILURE), ("task", TODO)}
    assert first["facts"] == 7 and first["carried"] == 3
    # 3/7 = 0.428571…: rounded down, never up (round() would say 0.4286).
    assert first["recall"] == math.floor(3 / 7 * 10_000) / 10_000 == 0.4285


def test_a_file_is_carried_by_its_path_from_the_project() -> None:
    """Claude Code names files from the project's root ("src/http/client.py"), not by their absolute path."""
    first = audit_rows(session(thrash=False).to_bytes())[0]
    assert ("file", CLIENT) not in {(fact["kind"], fact["text"]) for fact in first["lost"]}
    s = session(thrash=False)
    s.lines[[n for n, line in enumerate(s.lines) if line.get("isCompactSummary")][0]]["message"]["content"] = (
        "Summary: the user asked for retries in client.py."
    )
    kinds = {fact["kind"] for fact in audit_rows(s.to_bytes())[0]["lost"]}
    assert "file" in kinds, "a bare file name is too common a word to carry a path"


def test_a_queued_prompt_the_user_took_back_is_no_fact() -> None:
    s = session(thrash=False)
    at = next(n for n, line in enumerate(s.lines) if line.get("operation") == "remove")
    s.lines[at]["reason"] = "cleared_on_cancel"  # 2.1.332: Esc pressed, the prompt never reached the model
    first = audit_rows(s.to_bytes())[0]
    # The request (twice: typed, and the last one), the file, the failure, the todo, the current work.
    assert QUEUED not in {fact["text"] for fact in first["lost"]} and first["facts"] == 6


def test_a_session_without_compaction_has_its_total_only() -> None:
    s = Convo()
    s.user("Hello")
    s.text("Hi.", usage(5_000))
    [total] = audit_rows(s.to_bytes())
    assert total == {
        "file": "<bytes>",
        "total": True,
        "compactions": 0,
        "facts": 0,
        "carried": 0,
        "recall": None,
        "lost_facts": 0,
        "rebuild_usd": 0.0,
        "rereads": 0,
        "reread_tokens": 0,
        "thrash": 0,
        "thrashing": False,
    }


def test_three_refills_in_a_row_are_thrashing() -> None:
    s = session(thrash=False)
    for number in range(3):
        s.compact(f"Summary {number}: {REQUEST}.")
        s.text("Again.", usage(20_000))
    *compactions, total = audit_rows(s.to_bytes())
    assert [row["thrash"] for row in compactions] == [False, True, True, True]
    assert total["thrash"] == 3 and total["thrashing"] is True


def test_ctxpipe_s_own_compaction_is_audited_with_its_kept_tail(tmp_path: Path) -> None:
    s = session(thrash=False)
    s.user("Now make the retry count configurable.")
    s.text("Done: the count is read from RETRIES.", usage(40_000))
    path = s.write(tmp_path / "s.jsonl")
    compacted = tmp_path / "c.jsonl"
    ok(run_cli("summarize", path, "-o", compacted, "--engine", "offline", "--keep-last", "1", "--now", "2026-03-04T11:00:00Z", env=CLEAN_ENV))
    rows = audit_rows(compacted.read_bytes())
    ours = [row for row in rows if row.get("by") == "ctxpipe"]
    assert len(ours) == 1
    # What Claude Code's compaction carried (the request, the file, the current work: the file) and what
    # came after it (the new request, typed and the last): the offline summary keeps every one.
    assert ours[0]["lost"] == [] and ours[0]["recall"] == 1.0 and ours[0]["facts"] == 5


# --- the command ----------------------------------------------------------------------------------


def lines_of(result: Any) -> list[dict[str, Any]]:
    ok(result)
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_audit_of_a_file_a_folder_and_stdin_agree(tmp_path: Path) -> None:
    one = session().write(tmp_path / "projects" / "-home-dev-shop" / "a.jsonl")
    other = session(thrash=False).write(tmp_path / "projects" / "-home-dev-shop" / "b.jsonl")
    of_file = lines_of(run_cli("audit", "--json", one, env=CLEAN_ENV))
    of_folder = lines_of(run_cli("audit", "--json", tmp_path / "projects", env=CLEAN_ENV))
    of_stdin = lines_of(run_cli("audit", "--json", stdin=one.read_bytes(), env=CLEAN_ENV))
    assert [row["file"] for row in of_folder if row.get("total")] == [str(one), str(other)]
    assert [row for row in of_folder if row["file"] == str(one)] == of_file
    assert [{**row, "file": str(one)} for row in of_stdin] == of_file
    for row in of_folder:
        assert schemas.reference_errors("audit.report.schema.json", row) == []


def test_a_compaction_side_call_is_labelled_as_count_and_warn_label_it(tmp_path: Path) -> None:
    from test_narrow_terminal import on_terminal

    s = Convo()
    s.user("Summarize the conversation so far.")
    s.text("<summary>The work so far.</summary>", usage(9_000))
    by_name = s.write(tmp_path / "sess" / "subagents" / "agent-acompact-1f2e.jsonl")
    plain = s.write(tmp_path / "plain.jsonl")
    [total] = lines_of(run_cli("audit", "--json", by_name, env=CLEAN_ENV))
    assert total["kind"] == "compaction" and total["note"].startswith("a compaction side-call") and total["compactions"] == 0
    assert schemas.reference_errors("audit.report.schema.json", total) == []
    [warned] = lines_of(run_cli("warn", "--json", by_name, env=CLEAN_ENV))
    assert (warned["kind"], warned["note"].split(":")[0]) == ("compaction", total["note"])
    # A session's name says nothing of the kind: no label.
    [session_total] = lines_of(run_cli("audit", "--json", plain, env=CLEAN_ENV))
    assert "kind" not in session_total and "note" not in session_total
    assert f"agent-acompact-1f2e.jsonl: {total['note']}" in on_terminal(["audit", by_name], 200)


def test_the_table_names_what_each_compaction_lost(tmp_path: Path) -> None:
    from test_narrow_terminal import on_terminal

    path = session(thrash=False).write(tmp_path / "s.jsonl")
    shown = on_terminal(["audit", path], 160)
    assert "1 compaction(s), 3 of 7 facts carried (42.8%)" in shown
    assert QUEUED in shown and TODO in shown and "thrash" not in shown


def test_a_corpus_compaction_matches_its_boundary_and_never_claims_more_than_an_independent_count() -> None:
    """The corpus's one compaction by Claude Code: the figures are the boundary's, and the recall is no
    more than bench/summary_recall.py finds in the same summary with a fact list made by hand."""
    from test_summary_recall import recall_bench

    corpus = CORPUS / recall_bench.SESSION
    if not corpus.exists():
        pytest.skip("the shared corpus (with a Claude Code compaction) is not beside this checkout")
    first, total = [row.to_wire() for row in api.audit_transcript(corpus).rows()]
    lines = recall_bench.read_lines(corpus)
    boundary = lines[first["line"] - 1]
    assert boundary["subtype"] == "compact_boundary" and first["pre_tokens"] == boundary["compactMetadata"]["preTokens"]
    assert first["trigger"] == boundary["compactMetadata"]["trigger"] and total["compactions"] == 1
    summary, _ = recall_bench.after_boundary(lines)
    independent = recall_bench.recall(json.loads(recall_bench.FACTS.read_text()), summary)
    assert 0 < first["carried"] < first["facts"]
    assert first["recall"] <= independent["recall"], (first["recall"], independent["recall"])


def test_a_codex_compacted_line_is_audited() -> None:
    def item(role: str, text: str) -> bytes:
        kind = "input_text" if role == "user" else "output_text"
        return (
            json.dumps(
                {
                    "timestamp": "2026-02-10T08:00:00.000Z",
                    "type": "response_item",
                    "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
                }
            ).encode()
            + b"\n"
        )

    data = (
        item("user", "Rename the config loader to load_settings")
        + item("assistant", "Renamed.")
        + item("user", "Then add a --dry-run flag to the CLI")
        + b'{"timestamp":"2026-02-10T08:05:00.000Z","type":"compacted","payload":{"message":"The user asked: Rename the config loader to load_settings."}}\n'
        + item("user", "Continue")
    )
    first, total = audit_rows(data)
    assert first["by"] == "codex" and first["line"] == 4 and first["trigger"] is None and first["pre_tokens"] is None
    # The two requests (the second also the last): the summary holds only the first, but a line
    # holding only its summary keeps the user messages typed before it, as Codex rebuilds it, so
    # the second is carried verbatim and nothing is lost.
    assert first["lost"] == [] and first["facts"] == 3 and first["carried"] == 3 and total["compactions"] == 1


def test_the_report_page_shows_each_compaction_with_what_it_lost() -> None:
    s = session(thrash=False)
    s.user("<script>alert('lost')</script> keep this")  # a typed message the next compaction loses, shown as text
    s.text("Noted.", usage(32_000))
    s.compact("Summary: nothing much.")
    s.text("Continuing.", usage(20_000))
    data = s.to_bytes()
    report = api.session_report(data)
    first, second, _ = audit_rows(data)
    compactions = [event for event in report.events if event.kind == "compact_boundary"]
    assert [(event.facts, event.carried, event.recall) for event in compactions] == [(row["facts"], row["carried"], row["recall"]) for row in (first, second)]
    page = api.report_html(report)
    assert f'data-facts="{first["facts"]}" data-carried="{first["carried"]}">3/7 (42.8%)</td>' in page
    assert "Lost by the compaction at line" in page and f"instruction: {QUEUED}" in page
    assert "<script>alert('lost')</script>" not in page and "&lt;script&gt;alert(" in page
    assert schemas.reference_errors("report.report.schema.json", report.to_wire()) == []


def test_the_verifier_never_rounds_a_loss_away() -> None:
    """One fact lost of 20,001 is not 100 %: every share is rounded down, in the report and the note."""
    from ctxpipe.core.fields import rounded_percent
    from ctxpipe.core.summarize import Fact, Verification

    facts = [Fact("file", f"/p/f{n}.py") for n in range(20_001)]
    checked = Verification(facts, facts[:1])
    assert checked.recall > 0.99995 and checked.report().recall == 0.9999
    assert checked.report().kinds["file"].recall == 0.9999
    assert rounded_percent(checked.recall) == "99.9%" and rounded_percent(1.0) == "100%"


def _compaction_histories(data: bytes) -> list[tuple[list[Any], list[Any]]]:
    """Each compaction's `before`, and what building the chain above its boundary gives."""
    from ctxpipe.core.jsonl import ReadStats, iter_buffer_entries
    from ctxpipe.formats.claude_code import FORMAT, build_messages, context_positions, uuid_index

    entries = list(iter_buffer_entries(data, "s.jsonl", "skip", ReadStats()))
    chain = context_positions(entries, history=True, latest=uuid_index(entries))
    return [(span.before, build_messages(entries, [p for p in chain if p < span.position])) for span in FORMAT.compactions(entries)]


def test_each_compactions_history_is_the_chain_above_it() -> None:
    # The histories are built once, stretch by stretch, each span's a snapshot (built again for every
    # boundary, 1,600 compactions took 36 s and 2 GB). A response whose lines fall on both sides of a
    # boundary (its message id again below it) is extended in a copy: no earlier history changes.
    s = Convo()
    for turn in range(4):
        s.user(f"Request {turn}: add retries to the HTTP client")
        s.call("Read", {"file_path": f"/home/dev/shop/src/file{turn}.py"}, "contents", 10_000 + turn)
        s.text(f"Done with {turn}.", usage(11_000 + turn))
        s.compact()
    responses = [line for line in s.lines if line["type"] == "assistant"]
    for earlier, later in zip(responses, responses[2:]):  # each id again two responses on, below a boundary
        later["message"]["id"] = earlier["message"]["id"]
    histories = _compaction_histories(s.to_bytes())
    assert len(histories) == 4
    for before, direct in histories:
        assert before == direct
    # The copy-on-write was needed: a history holds a response that a later one holds extended.
    assert any(len(a.entries) < len(b.entries) for (x, _), (y, _) in zip(histories, histories[1:]) for a in x for b in y if a.message_id == b.message_id)


@pytest.mark.parametrize("path", [*sorted((FIXTURES / "claude-code").glob("*.jsonl")), *corpus_files()], ids=lambda p: p.name)
def test_the_histories_of_real_sessions_are_the_chain_above_each_compaction(path: Path) -> None:
    for before, direct in _compaction_histories(path.read_bytes()):
        assert before == direct
