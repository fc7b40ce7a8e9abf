"""Formats: detection, the active context of Claude Code files, conversion rules."""

from __future__ import annotations

from pathlib import Path

import ctxpipe
import orjson
import pytest
from ctxpipe.core.convert import MISSING_RESULT_TEXT, to_api_messages
from ctxpipe.core.errors import InputError
from ctxpipe.formats import WriteOptions, detect, editor_of, get
from ctxpipe.formats.claude_code import context_positions, main_chain
from helpers import FIXTURES


def load(name: str) -> ctxpipe.core.model.Transcript:  # type: ignore[name-defined]
    return ctxpipe.read_transcript(FIXTURES / name)


def texts(messages: list[dict]) -> list[str]:
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(block.get("text", block.get("type")) for block in content)
    return out


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claude-code/basic.jsonl", "claude-code"),
        ("claude-code/parallel.jsonl", "claude-code"),
        ("anthropic/basic.jsonl", "anthropic"),
        ("codex/rollout.jsonl", "codex"),
    ],
)
def test_format_is_detected_from_content(name: str, expected: str) -> None:
    assert load(name).format == expected


def test_undetectable_content_asks_for_format() -> None:
    with pytest.raises(InputError, match="--format"):
        ctxpipe.read_transcript(b'{"foo":1}\n')


def test_empty_input_is_an_empty_claude_code_transcript() -> None:
    transcript = ctxpipe.read_transcript(b"")
    assert transcript.entries == [] and transcript.format == "claude-code"


def test_response_lines_merge_by_message_id_with_usage_from_the_last() -> None:
    transcript = load("claude-code/basic.jsonl")
    messages = get("claude-code").messages(transcript.entries)
    first = messages[1]
    assert first.message_id == "msg_01AAA"
    assert [block["type"] for block in first.content] == ["thinking", "text", "tool_use"]
    assert first.usage is not None and first.usage["output_tokens"] == 61  # the last fragment's value


def test_parallel_results_that_branch_off_the_chain_are_in_the_context() -> None:
    transcript = load("claude-code/parallel.jsonl")
    chain = main_chain(transcript.entries)
    context = context_positions(transcript.entries)
    # The first result's parent is its own tool_use line, so the leaf's walk misses it.
    first_result = next(
        i for i, e in enumerate(transcript.entries) if "toolu_01CART" in str(e.obj.get("message", {}).get("content")) and e.obj["type"] == "user"
    )
    assert first_result not in chain
    assert first_result in context
    api, report = to_api_messages(get("claude-code").messages(transcript.entries), transcript.entries)
    assert not report.unanswered and not report.orphans
    assert [block["tool_use_id"] for block in api[2]["content"]] == ["toolu_01CART", "toolu_01PRICE"]


def test_rewound_branch_is_not_in_the_context() -> None:
    transcript = load("claude-code/rewind.jsonl")
    words = " ".join(texts(ctxpipe.api_messages(transcript)))
    assert "alias" in words
    assert "Renaming in cli.py" not in words


def test_active_context_starts_at_the_last_compact_boundary() -> None:
    transcript = load("claude-code/compacted.jsonl")
    active = texts(ctxpipe.api_messages(transcript))
    assert active[0].startswith("This session is being continued")
    assert "I will add a limiter decorator." not in active
    full = texts(ctxpipe.api_messages(transcript, history=True))
    assert full[0] == "Add rate limiting to the /login endpoint."
    assert "I will add a limiter decorator." in full


def test_inline_sidechain_is_not_part_of_the_main_conversation() -> None:
    transcript = load("claude-code/sidechain.jsonl")
    api = ctxpipe.api_messages(transcript)
    assert "List every TODO comment with its file." not in texts(api)  # the subagent's own prompt
    assert len(api) == 4


def test_subagent_file_conversation_is_the_sidechain_itself() -> None:
    lines = [e.obj for e in load("claude-code/sidechain.jsonl").entries if e.obj.get("isSidechain")]
    transcript = ctxpipe.read_transcript(b"".join(orjson.dumps(obj) + b"\n" for obj in lines))
    api = ctxpipe.api_messages(transcript)
    assert texts(api)[0] == "List every TODO comment with its file."


def test_unanswered_tool_use_is_reported_and_repaired_only_when_asked() -> None:
    transcript = load("claude-code/interrupted.jsonl")
    messages = get("claude-code").messages(transcript.entries)
    api, report = to_api_messages(messages, transcript.entries)
    assert [p.tool_use_id for p in report.unanswered] == ["toolu_01E2E"]
    assert report.unanswered[0].line == 2
    assert api[-1]["role"] == "assistant"
    repaired, report = to_api_messages(messages, transcript.entries, repair=True)
    assert repaired[-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01E2E", "content": MISSING_RESULT_TEXT, "is_error": True}],
    }
    assert report.repaired == 1


def test_orphan_results_are_reported_and_dropped_on_repair() -> None:
    data = b'{"role":"user","content":"hi"}\n{"role":"assistant","content":[{"type":"text","text":"hello"}]}\n{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_X","content":"?"},{"type":"text","text":"go on"}]}\n'
    transcript = ctxpipe.read_transcript(data)
    messages = get("anthropic").messages(transcript.entries)
    _, report = to_api_messages(messages, transcript.entries)
    assert [(p.tool_use_id, p.line) for p in report.orphans] == [("toolu_X", 3)]
    repaired, report = to_api_messages(messages, transcript.entries, repair=True)
    assert repaired[-1]["content"] == [{"type": "text", "text": "go on"}]
    assert report.dropped_orphans == 1


def test_anthropic_round_trips_through_claude_code() -> None:
    original = load("anthropic/basic.jsonl")
    options = WriteOptions(session_id="33333333-3333-4333-8333-333333333333", start_time="2026-01-01T00:00:00Z")
    as_claude = ctxpipe.convert(original, "claude-code", options=options)
    assert [e.obj["type"] for e in as_claude.entries].count("assistant") == 5  # one line per block
    back = ctxpipe.convert(as_claude, "anthropic")
    # The same messages, each with the time of the first line it was written as (convert keeps times).
    assert [{k: v for k, v in e.obj.items() if k != "timestamp"} for e in back.entries] == [e.obj for e in original.entries]
    assert [e.obj["timestamp"] for e in back.entries] == sorted({e.obj["timestamp"] for e in back.entries}) and back.entries[0].obj[
        "timestamp"
    ] == "2026-01-01T00:00:00.000Z"


def test_claude_code_lines_written_by_ctxpipe_form_one_chain() -> None:
    original = load("anthropic/basic.jsonl")
    as_claude = ctxpipe.convert(original, "claude-code", options=WriteOptions(session_id="s", start_time="2026-01-01T00:00:00Z"))
    uuids = [e.obj["uuid"] for e in as_claude.entries]
    assert len(set(uuids)) == len(uuids)
    assert [e.obj["parentUuid"] for e in as_claude.entries] == [None, *uuids[:-1]]
    assert main_chain(as_claude.entries) == list(range(len(uuids)))
    assert ctxpipe.validate_transcript(as_claude) == []


def test_codex_rollout_reads_calls_results_and_usage() -> None:
    transcript = load("codex/rollout.jsonl")
    messages = get("codex").messages(transcript.entries)
    tool_use = next(m for m in messages if m.content[0]["type"] == "tool_use")
    assert tool_use.content[0]["input"] == {"command": ["bash", "-lc", "find src -name '*.py' | wc -l"]}
    assert tool_use.model == "gpt-5.2-codex"
    # Cached tokens are inside OpenAI's input_tokens; they are split out like Anthropic usage.
    assert tool_use.usage == {"input_tokens": 400, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4800, "output_tokens": 60}
    final = messages[-1]
    assert final.usage == {"input_tokens": 260, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 5100, "output_tokens": 15}
    assert messages[0].meta  # <environment_context> is injected, not typed
    assert not any(m.role == "user" and "You are Codex" in str(m.content) for m in messages)


def test_codex_compacted_line_replaces_the_history_before_it() -> None:
    data = (
        b'{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"old question"}]}}\n'
        b'{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"old answer"}]}}\n'
        b'{"timestamp":"t","type":"compacted","payload":{"message":"Summary of the earlier work."}}\n'
        b'{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"new question"}]}}\n'
    )
    transcript = ctxpipe.read_transcript(data)
    # The answer goes; the typed question stays, as Codex rebuilds a line holding only its summary.
    assert texts(ctxpipe.api_messages(transcript)) == ["Summary of the earlier work.", "old question", "new question"]
    assert "old answer" in texts(ctxpipe.api_messages(transcript, history=True))


def test_codex_is_written_from_messages() -> None:
    written = editor_of(get("codex"), "write").from_messages([{"role": "user", "content": "x"}], WriteOptions(cwd="/w", start_time="2026-01-01T00:00:00Z"))
    assert [(e.obj["type"], e.obj["payload"].get("type")) for e in written] == [("session_meta", None), ("response_item", "message")]
    assert written[0].obj["payload"]["cwd"] == "/w" and written[1].obj["payload"]["content"] == [{"type": "input_text", "text": "x"}]
    converted = ctxpipe.convert(ctxpipe.read_transcript(FIXTURES / "anthropic" / "basic.jsonl"), "codex")
    assert converted.format == "codex" and ctxpipe.read_transcript(b"".join(e.encode() + b"\n" for e in converted.entries)).format == "codex"


def test_detect_prefers_a_line_that_some_format_claims() -> None:
    entries = ctxpipe.read_transcript(b'{"type":"summary","summary":"t","leafUuid":"x"}\n').entries
    assert detect(entries, "x").name == "claude-code"


def test_lines_no_format_claims_are_no_empty_claude_code_transcript() -> None:
    # JSON objects with a `type`, but none Claude Code writes and none of its session links: before,
    # any string `type` made a line Claude Code's, and such a file a valid transcript of 0 tokens.
    data = b'{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"hi"}}\n{"type":"note","text":"x"}\n'
    with pytest.raises(InputError, match="cannot tell the transcript format") as raised:
        ctxpipe.read_transcript(data)
    assert raised.value.line == 1


@pytest.mark.parametrize(
    "data",
    [
        b'{"type":"summary","summary":"Fix the parser","leafUuid":"00000000-0000-4000-8000-000000000001"}\n',  # 1.0.x: summaries only
        b'{"type":"relocated","from":"/home/dev/old","to":"/home/dev/app"}\n',  # a 2.1.332 type, bare
        b'{"type":"custom-title","customTitle":"parser"}\n{"type":"ai-title","aiTitle":"Parser fix"}\n',
        b'{"type":"some-future-entry","sessionId":"44444444-4444-4444-8444-444444444444"}\n',  # unknown, but of a session
        b'{"type":"x-unknown","n":1}\n{"type":"another-future-entry","uuid":"00000000-0000-4000-8000-000000000002"}\n',
    ],
    ids=["summaries", "new-type-bare", "titles", "unknown-with-session", "unknown-then-uuid"],
)
def test_claude_code_files_of_summaries_or_new_entry_types_are_still_claude_code(data: bytes) -> None:
    transcript = ctxpipe.read_transcript(data)
    assert transcript.format == "claude-code" and len(transcript.entries) == data.count(b"\n")


def test_claude_code_sniff_claims_its_types_and_links_and_leaves_other_types_undecided() -> None:
    sniff = get("claude-code").sniff
    assert sniff({"type": "file-history-snapshot", "messageId": "m"}) is True
    assert sniff({"type": "x-new", "parentUuid": "p"}) is True
    assert sniff({"type": "message", "id": "a1"}) is None  # pi's entry type: maybe a newer Claude Code's, maybe not
    assert sniff({"type": "response_item", "payload": {}}) is False
    assert sniff({"role": "user", "content": "x"}) is False


def test_a_compacted_session_converted_to_anthropic_keeps_the_usage_after_its_summary() -> None:
    # Claude Code keeps no tail: a response after its summary measured the context as it is. Here the
    # summary is followed at once by the reply (compacted.jsonl without its line 7, relinked).
    from ctxpipe.core.stage import line_bytes

    lines = [orjson.loads(line) for line in (FIXTURES / "claude-code" / "compacted.jsonl").read_bytes().splitlines()]
    follow_up = lines.pop(6)
    next(line for line in lines if line.get("parentUuid") == follow_up["uuid"])["parentUuid"] = follow_up["parentUuid"]
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    before = ctxpipe.count_transcript(data)
    assert before.exact_tokens > 0
    anthropic = b"".join(line_bytes(ctxpipe.convert(ctxpipe.read_transcript(data), "anthropic").entries))
    assert ctxpipe.count_transcript(anthropic).exact_tokens == before.exact_tokens
    back = b"".join(line_bytes(ctxpipe.convert(ctxpipe.read_transcript(anthropic), "claude-code").entries))
    assert ctxpipe.count_transcript(back).exact_tokens == before.exact_tokens
    # ctxpipe's own summary of a Messages-API file keeps a tail: its usage stays stale there.
    from ctxpipe.core.summarize import SummarizeSettings

    session = b"".join(line_bytes(ctxpipe.convert(ctxpipe.read_transcript(FIXTURES / "claude-code" / "repeats.jsonl"), "anthropic").entries))
    summarized, report = ctxpipe.api.run_stage("summarize", session, SummarizeSettings(engine="offline", keep_last=2))
    assert summarized != session and b'"usage"' in summarized.split(b"\n", 1)[1]  # the kept tail still carries it
    assert ctxpipe.count_transcript(summarized).exact_tokens == 0


def test_a_gemini_chat_without_its_metadata_line_is_read_as_gemini(tmp_path: Path) -> None:
    # `tail -n +2`, a first line skipped as damaged: its first record is {"type": "user", …} with
    # neither a message nor a uuid, which Claude Code claimed (a count of 0 tokens, every stage
    # "nothing to do").
    from helpers import run_cli

    whole = (FIXTURES / "gemini" / "chat.jsonl").read_bytes()
    cut = tmp_path / "chat.jsonl"
    cut.write_bytes(whole.split(b"\n", 1)[1])
    counted = [orjson.loads(run_cli("count", "--json", path).stdout) for path in (FIXTURES / "gemini" / "chat.jsonl", cut)]
    assert [c["format"] for c in counted] == ["gemini", "gemini"] and counted[0]["tokens"] == counted[1]["tokens"] > 0
