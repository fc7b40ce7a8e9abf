"""The real Codex CLI 0.171.0 resumes rollouts (tests/codex_cli.py) against the Responses API
stand-in (tests/responses_server.py), and we check the request it sends.

Codex rebuilds the conversation from the rollout (each `response_item` appended, a `compacted`
line's `replacement_history` replacing all before it) and sends it as the request's `input`: its own
base instructions (a developer message) first, then that history, then the fresh context of the new
turn (developer and user messages: skills, environment), then the prompt. The stand-in refuses, as
the real API does, an input in which a call and its output are split.

The first run installs Codex with npm (about 300 MB; a warm cache takes seconds); each resume then
takes under a second. Skipped when node or npm is missing, when the install fails, or with
CTXPIPE_SKIP_CODEX=1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from codex_cli import CodexResult, needs_codex, resume
from helpers import run_cli
from responses_server import COMPACTION_PROMPT, OUTPUTS, SUMMARY_PREFIX, ResponsesServer, call_pairing_error, item_text

pytestmark = needs_codex

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "codex-resume"
SESSION = FIXTURES / "session.jsonl"  # three turns: 10 calls (exec_command, apply_patch) and their outputs
COMPACTED = FIXTURES / "compacted.jsonl"  # a compacted line, then the token_count of its new size
# Codex 0.171.0's own remote compaction: its replacement_history ends with the server's opaque `compaction` item.
REMOTE_COMPACTED = FIXTURES / "remote-compacted.jsonl"
PROMPT = "continue"


@pytest.fixture(scope="module")
def server():
    with ResponsesServer() as s:
        yield s


def lines(rollout: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in rollout.splitlines() if line.strip()]


def history(rollout: bytes) -> list[dict[str, Any]]:
    """The conversation Codex rebuilds from a rollout: response_items appended, a `compacted` line's
    replacement_history in place of everything before it; an older line holding only its summary
    `message` leaves the user messages typed before it (the newest within 20,000 tokens at 4 bytes a
    token, as its build_compacted_history counts) and the summary as a user message."""
    items: list[dict[str, Any]] = []
    for line in lines(rollout):
        payload = line["payload"]
        if line["type"] == "response_item":
            items.append(payload)
        elif line["type"] == "compacted" and isinstance(payload.get("replacement_history"), list):
            items = list(payload["replacement_history"])
        elif line["type"] == "compacted":
            typed = [
                i
                for i in items
                if i.get("type") == "message"
                and i.get("role") == "user"
                and not item_text(i).lstrip().startswith(("<environment_context>", "<user_instructions>", "# AGENTS.md"))
            ]
            kept: list[dict[str, Any]] = []
            budget = 20_000
            for item in reversed(typed):
                cost = (len(item_text(item).encode()) + 3) // 4
                if cost > budget:
                    break
                budget -= cost
                kept.insert(0, item)
            items = [*kept, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": payload["message"]}]}]
    return items


def key(item: dict[str, Any]) -> tuple[Any, ...]:
    """What an item says, without what Codex adds when it sends it (ids, metadata, `content: null`)."""
    fields = ("type", "role", "name", "arguments", "call_id", "output", "input", "encrypted_content")
    return (*(item.get(f) for f in fields), item_text(item), json.dumps(item.get("summary"), sort_keys=True))


def size(items: list[dict[str, Any]]) -> int:
    return len(json.dumps(items, ensure_ascii=False).encode())


def check_turn(result: CodexResult, rollout: bytes) -> list[dict[str, Any]]:
    """The checks every resume passes; returns the resumed history as the request carries it."""
    assert result.returncode == 0, result.debug()
    assert result.external == [], f"Codex tried to reach the internet: {[r.path for r in result.external]}"
    assert result.compactions == [], f"Codex compacted again before the turn\n{result.debug()}"
    assert result.body["stream"] is True and result.body["store"] is False, result.debug()
    sent = result.input
    expected = history(rollout)
    # Codex's base instructions come first: its own, or those an older rollout recorded for its model.
    assert sent[0]["role"] == "developer" and item_text(sent[0]).startswith(("You are Codex", "You are a coding agent running in the Codex CLI")), item_text(
        sent[0]
    )[:80]
    assert [key(i) for i in sent[1 : 1 + len(expected)]] == [key(i) for i in expected], "the history is not the rollout's, in order"
    fresh = sent[1 + len(expected) : -1]
    assert fresh and all(i.get("type") == "message" and i.get("role") in ("developer", "user") for i in fresh), [key(i) for i in fresh]
    assert item_text(sent[-1]) == PROMPT and sent[-1]["role"] == "user"
    # Every call answered by its output, and none of the outputs made up by Codex (it inserts an
    # "aborted" output for a call it finds unanswered): each one is the rollout's own.
    assert call_pairing_error(sent) == ""
    written = {(i["call_id"], json.dumps(i.get("output"))) for i in expected if i.get("type") in OUTPUTS}
    assert {(i["call_id"], json.dumps(i.get("output"))) for i in sent if i.get("type") in OUTPUTS} == written
    # Codex appended the new turn to the rollout and left what was there as it was.
    assert result.rollout_after.startswith(rollout) and len(result.rollout_after) > len(rollout)
    return sent[1 : 1 + len(expected)]


# -- (a) a rollout as Codex writes it ---------------------------------------------------------


@pytest.fixture(scope="module")
def original(server, tmp_path_factory) -> CodexResult:
    """The fixture session resumed once: the baseline the compacted outputs are held to."""
    server.enqueue("Resumed the original.")
    return resume(SESSION.read_bytes(), PROMPT, server, tmp_path_factory.mktemp("original"))


def test_codex_resumes_every_message_call_and_output_in_order(original):
    rollout = SESSION.read_bytes()
    resumed = check_turn(original, rollout)
    assert "Resumed the original." in original.stdout
    kinds = [i["type"] for i in resumed]
    assert kinds.count("function_call") == 8 and kinds.count("custom_tool_call") == 2 and kinds.count("reasoning") == 4
    users = [item_text(i) for i in resumed if i.get("role") == "user"]
    assert users[-3:] == [
        "The CSV parser test fails on blank lines. Find out why and fix it.",
        "Also make the reader skip comment lines that start with #, and add a test for it.",
        "Run the whole suite and tell me if anything else broke.",
    ]
    assert original.body["model"] == "gpt-5.5", "the rollout's model: another one adds a <model_switch> message"


def test_codex_mends_a_split_call_which_is_why_outputs_are_compared_with_the_rollouts(server, tmp_path):
    # Codex never sends a split call (which the API would refuse): it answers a call left without its
    # output with the output "aborted", and drops an output whose call is gone (logging "Orphan
    # function call output"). So a rollout that splits a call still resumes, and check_turn compares
    # the outputs sent with the rollout's own to see it.
    rollout = SESSION.read_bytes().splitlines(keepends=True)
    call = next(n for n, line in enumerate(rollout) if b'"function_call"' in line and b"call_Vx1b" in line)
    output = next(n for n, line in enumerate(rollout) if b'"function_call_output"' in line and b"call_Vx1b" in line)
    dangling = resume(b"".join(rollout[:output] + rollout[output + 1 :]), PROMPT, server, tmp_path / "dangling")
    orphan = resume(b"".join(rollout[:call] + rollout[call + 1 :]), PROMPT, server, tmp_path / "orphan")

    assert dangling.returncode == 0 and orphan.returncode == 0, dangling.debug() + orphan.debug()
    assert [i["output"] for i in dangling.input if i.get("call_id") == "call_Vx1b" and i["type"] == "function_call_output"] == ["aborted"]
    assert not any(i.get("call_id") == "call_Vx1b" for i in orphan.input)
    assert call_pairing_error(dangling.input) == call_pairing_error(orphan.input) == ""


# -- (b) a rollout Codex compacted -------------------------------------------------------------


def test_a_compacted_rollout_resumes_as_its_replacement_history_without_compacting_again(server, tmp_path):
    rollout = COMPACTED.read_bytes()
    result = resume(rollout, PROMPT, server, tmp_path)

    resumed = check_turn(result, rollout)
    replacement = next(line["payload"]["replacement_history"] for line in lines(rollout) if line["type"] == "compacted")
    assert [{k: s.get(k) for k in i} for i, s in zip(replacement, resumed)] == replacement, "Codex changed an item (it only adds metadata)"
    summary = item_text(resumed[-1])
    assert summary.startswith(SUMMARY_PREFIX + "\n") and "CODE WORD: QUINCE" in summary
    assert not any(i.get("call_id") == "call_W1" for i in result.input), "the compacted-away call came back"


def compaction_items(items: list[dict[str, Any]]) -> list[str]:
    return [i["encrypted_content"] for i in items if i.get("type") == "compaction"]


def test_codex_sends_its_own_compaction_item_back_as_it_is(server, tmp_path):
    rollout = REMOTE_COMPACTED.read_bytes()
    result = resume(rollout, PROMPT, server, tmp_path)

    resumed = check_turn(result, rollout)
    assert compaction_items(resumed) == compaction_items(history(rollout)) and len(compaction_items(resumed)) == 1
    assert item_text(resumed[-1]).startswith("Not yet.") and resumed[-1]["role"] == "assistant"


def without_last_token_count(rollout: bytes) -> bytes:
    kept = rollout.splitlines(keepends=True)
    assert b'"token_count"' in kept[-1]
    return b"".join(kept[:-1])


def with_null_info(rollout: bytes) -> bytes:
    kept = rollout.splitlines(keepends=True)
    last = json.loads(kept[-1])
    last["payload"]["info"] = None
    return b"".join(kept[:-1]) + json.dumps(last).encode() + b"\n"


def from_provider(rollout: bytes, provider: str) -> bytes:
    first, rest = rollout.split(b"\n", 1)
    meta = json.loads(first)
    meta["payload"]["model_provider"] = provider
    return json.dumps(meta).encode() + b"\n" + rest


@pytest.mark.parametrize("provider", ["openai", "standin"])
@pytest.mark.parametrize("edit", [without_last_token_count, with_null_info], ids=["no-token-count", "info-null"])
def test_without_the_new_size_after_the_compacted_line_codex_compacts_again(server, tmp_path, edit, provider):
    # Codex takes the size of the context from the last token_count's last_token_usage.total_tokens
    # and compacts before the turn at 90 % of the model's window (gpt-5.5: 244,800 of 272,000;
    # found by bisecting: 244,000 resumes as it is, 245,000 compacts). Here the last one left is the
    # turn before the compaction (246,300), so Codex compacts the replacement history again at once,
    # though it is a few thousand tokens: whoever writes a `compacted` line must follow it with a
    # token_count holding the new size, as Codex itself does (its own has last_token_usage all 0
    # but total_tokens, the estimate of the new history). An `info: null` does not count.
    rollout = from_provider(edit(COMPACTED.read_bytes()), provider)
    result = resume(rollout, PROMPT, server, tmp_path)

    assert result.returncode == 0, result.debug()
    (compaction,) = result.compactions
    replacement = next(line["payload"]["replacement_history"] for line in lines(rollout) if line["type"] == "compacted")
    assert [key(i) for i in compaction.body["input"][1:-1]] == [key(i) for i in replacement]
    if provider == "openai":
        # The built-in provider compacts remotely: the history, then a `compaction_trigger` item; the
        # answer, one opaque `compaction` item, stands for the history in the turn's request.
        assert compaction.body["input"][-1] == {"type": "compaction_trigger"}
        assert [i["type"] for i in result.input].count("compaction") == 1
    else:
        # Any other provider compacts inline: the history, then Codex's compaction prompt; the answer's
        # text becomes a user message after the summary prefix, with the user messages kept verbatim.
        assert item_text(compaction.body["input"][-1]).startswith(COMPACTION_PROMPT)
        assert [item_text(i) for i in result.input].count(f"{SUMMARY_PREFIX}\n{server.summary}") == 1
    assert sum(item_text(i).startswith(SUMMARY_PREFIX) for i in result.input) == 1  # inline: the new one; remote: the old one, kept
    assert [line["type"] for line in lines(result.rollout_after)].count("compacted") == 2, "Codex wrote its own compacted line"


def full(rollout: bytes) -> bytes:
    """The rollout with its last turn at 246,000 tokens: past 0.171.0's threshold for gpt-5.5 (244,800)."""
    kept = rollout.splitlines(keepends=True)
    last = max(n for n, line in enumerate(kept) if b'"token_count"' in line)
    line = json.loads(kept[last])
    line["payload"]["info"]["last_token_usage"].update(input_tokens=245_970, cached_input_tokens=245_720, total_tokens=246_000)
    kept[last] = json.dumps(line, separators=(",", ":")).encode() + b"\n"
    return b"".join(kept)


def test_codex_compacts_a_full_rollout_before_the_turn(server, tmp_path):
    result = resume(full(SESSION.read_bytes()), PROMPT, server, tmp_path)
    assert result.returncode == 0, result.debug()
    assert len(result.compactions) == 1 and len(result.input) < 10, result.debug()


# -- (c) what ctxpipe wrote ---------------------------------------------------------------------


# Each command as a user would run it: its arguments, on the fixture made full or as it is, and
# whether its output holds a summary.
CTXPIPE_RUNS = {
    "compact-full": (("compact",), True, True),  # what Codex would compact itself: compact's own threshold summarizes it
    # --force: the fixture is far below the threshold; --keep-last: after microcompact the rest would fit the tail.
    "compact-forced": (("compact", "--force", "--engine", "offline", "--keep-last", "6"), False, True),
    "microcompact": (("microcompact", "--force"), False, False),
    "summarize": (("summarize", "--engine", "offline"), False, True),
}


@pytest.mark.parametrize("name", CTXPIPE_RUNS)
def test_codex_resumes_what_ctxpipe_wrote_with_a_smaller_request(server, tmp_path, original, name):
    args, made_full, summarized = CTXPIPE_RUNS[name]
    source = tmp_path / "full.jsonl"
    source.write_bytes(full(SESSION.read_bytes()) if made_full else SESSION.read_bytes())
    out = tmp_path / "out.jsonl"
    ran = run_cli(*args, source, "-o", out)
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")
    rollout = out.read_bytes()

    result = resume(rollout, PROMPT, server, tmp_path / "codex")

    resumed = check_turn(result, rollout)
    before = check_turn(original, SESSION.read_bytes())
    # The resumed history only: Codex's own instructions and fresh context around it are the same
    # for both but for the temporary paths in them.
    assert size(resumed) < size(before), f"{size(resumed)} bytes of history sent ({len(resumed)} items), {size(before)} ({len(before)}) for the original"
    newest = [key(i) for i in before if i.get("call_id") == "call_Vx3a"]
    assert len(newest) == 2 and all(k in {key(i) for i in resumed} for k in newest), "the newest call and its output, whole"
    texts = [item_text(i) for i in resumed]
    assert "Run the whole suite and tell me if anything else broke." in texts, "the newest user message, verbatim"
    assert sum(t.startswith(SUMMARY_PREFIX + "\n") for t in texts) == (1 if summarized else 0), texts


def test_a_summary_over_codexs_own_compaction_keeps_its_opaque_item(server, tmp_path):
    # The `compaction` item holds the earlier summary encrypted by the server: ctxpipe cannot read it,
    # so a summary of its own cannot carry it, and the item must stay (an earlier summary is never
    # summarized away). Codex sends it back to the server as it is, which can read it.
    out = tmp_path / "out.jsonl"
    ran = run_cli("compact", "--force", "--engine", "offline", "--keep-last", "2", REMOTE_COMPACTED, "-o", out)
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")
    rollout = out.read_bytes()

    result = resume(rollout, PROMPT, server, tmp_path / "codex")

    resumed = check_turn(result, rollout)
    assert compaction_items(resumed) == compaction_items(history(REMOTE_COMPACTED.read_bytes())), "the earlier compaction was dropped"
    texts = [item_text(i) for i in resumed]
    assert "Did you also update the README's usage section?" in texts, "the newest user message, verbatim"


def test_a_rollout_codex_wrote_compacts_in_place_and_codex_resumes_it(server, tmp_path, original):
    # What Codex 0.171.0 itself appended when it resumed the fixture: its base context items, the new
    # line types (world_state, token_usage_record, event_msg thread_settings_applied), its token_count.
    # The compacted file replaces the rollout in the same CODEX_HOME, whose state database already
    # knows the thread: Codex reads the file again.
    written = original.rollout_after
    assert all(kind in written for kind in (b'"world_state"', b'"token_usage_record"', b'"thread_settings_applied"'))
    source, out = tmp_path / "rollout.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(written)
    ran = run_cli("compact", "--force", "--engine", "offline", "--keep-last", "4", source, "-o", out)
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")
    rollout = out.read_bytes()
    assert rollout.startswith(written.split(b"\n", 1)[0])

    result = resume(rollout, PROMPT, server, original.workdir)

    resumed = check_turn(result, rollout)
    assert size(resumed) < size(history(written)), f"{size(resumed)} bytes of history sent, {size(history(written))} before"
    assert sum(item_text(i).startswith(SUMMARY_PREFIX + "\n") for i in resumed) == 1


# -- (c) rollouts of older Codex releases (fixtures/codex: 0.46, 0.63, 0.93, 0.135 shapes) ----------

OLDER = sorted((FIXTURES.parent / "codex").glob("*.jsonl"))


@pytest.mark.parametrize("rollout", OLDER, ids=lambda p: p.stem)
def test_every_rollout_compacted_resumes_as_count_says(server, tmp_path, rollout):
    """compact --force as a user runs it: Codex resumes the result, every call answered, at most one
    summary, and its request is smaller exactly when ctxpipe's count of the output is (where nothing
    paid, the rollout is written as it was)."""
    server.enqueue("Resumed the original.")
    before = check_turn(resume(rollout.read_bytes(), PROMPT, server, tmp_path / "original"), rollout.read_bytes())
    out = tmp_path / "out.jsonl"
    ran = run_cli("compact", "--force", "--engine", "offline", rollout, "-o", out)
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")
    compacted = out.read_bytes()
    server.enqueue("Resumed the compacted rollout.")
    resumed = check_turn(resume(compacted, PROMPT, server, tmp_path / "compacted"), compacted)
    summaries = sum(item_text(i).startswith(SUMMARY_PREFIX + "\n") for i in resumed)
    had_one = any(item_text(i).startswith(SUMMARY_PREFIX + "\n") for i in before)
    assert summaries == int(had_one or b": summarized " in ran.stderr)  # a new summary takes the earlier one in
    tokens = [json.loads(run_cli("count", "--json", path).stdout)["tokens"] for path in (rollout, out)]
    assert (size(resumed) < size(before)) == (tokens[1] < tokens[0]), (size(resumed), size(before), tokens)
    assert (compacted == rollout.read_bytes()) == (tokens[1] == tokens[0])


def test_a_claude_code_session_converted_to_a_rollout_resumes_in_codex(server, tmp_path):
    """convert --to codex of a Claude Code session: Codex resumes it with the session's messages,
    every call answered by its own output, in order, and compacts nothing."""
    session = FIXTURES.parent / "claude-code" / "repeats.jsonl"
    ran = run_cli("convert", "--to", "codex", session)
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")
    rollout = ran.stdout
    server.enqueue("Resumed the converted session.")
    resumed = check_turn(resume(rollout, PROMPT, server, tmp_path), rollout)
    messages = [json.loads(line) for line in run_cli("convert", "--to", "anthropic", session).stdout.splitlines()]
    calls = [block["id"] for m in messages if isinstance(m["content"], list) for block in m["content"] if block.get("type") == "tool_use"]
    assert calls and [i["call_id"] for i in resumed if i.get("type") == "function_call"] == calls
    first = next(m for m in messages if m["role"] == "user")
    assert item_text(resumed[0]) == (first["content"] if isinstance(first["content"], str) else first["content"][0]["text"])
