"""Gemini CLI chats (issue 28, item 3): read, never written. Both forms are detected (the .json
document, read as the JSONL Gemini CLI's own migration writes, and the .jsonl form with its `$set`
and `$rewindTo` lines); `count` anchors on the last reply's own `tokens` with the model's window from
Gemini CLI's token limits; `warn` judges against Gemini CLI's compression threshold; `report`,
`count --cost --prices` and `audit` read them; every stage refuses them in one line. The fixtures
are in fixtures/gemini/ (see its README)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctxpipe.core.budget import OTHER_WINDOWS, model_window
from ctxpipe.formats import gemini
from helpers import ERROR_PREFIX, FIXTURES, error_line, no_traceback, ok, run_cli

HERE = FIXTURES / "gemini"
CHAT_JSON = HERE / "chat.json"
CHAT_JSONL = HERE / "chat.jsonl"
SAMPLES = sorted(path for path in HERE.iterdir() if path.suffix in (".json", ".jsonl"))
WINDOW = 1_048_576  # tokenLimits.ts: every Gemini 2.5 / 3 model
STAGES = {"microcompact": [], "collapse": [], "snip": ["--keep-last", "2"], "summarize": [], "restore": [], "compact": []}  # stage: the flags it needs


def count(*args: Any, stdin: bytes = b"") -> dict[str, Any]:
    result: dict[str, Any] = json.loads(ok(run_cli("count", *args, stdin=stdin)).stdout)
    return result


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(CHAT_JSON.read_bytes())
    return loaded


def write_document(path: Path, record: dict[str, Any]) -> Path:
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False))  # as JSON.stringify(record, null, 2)
    return path


def last_reply_tokens(messages: list[dict[str, Any]]) -> dict[str, Any]:
    tokens: dict[str, Any] = next(m["tokens"] for m in reversed(messages) if m.get("type") == "gemini" and m.get("tokens"))
    return tokens


def chat_with_prompt(path: Path, prompt_tokens: int, model: str = "gemini-2.5-flash") -> Path:
    """A .jsonl chat whose last reply was sent `prompt_tokens` and wrote nothing: its context is that prompt."""
    lines = [
        {"sessionId": "s1", "projectHash": "p1", "startTime": "2026-05-01T10:00:00.000Z", "lastUpdated": "2026-05-01T10:00:09.000Z"},
        {"id": "u1", "timestamp": "2026-05-01T10:00:00.000Z", "type": "user", "content": [{"text": "Summarise the repository."}]},
        {
            "id": "g1",
            "timestamp": "2026-05-01T10:00:09.000Z",
            "type": "gemini",
            "content": "",
            "model": model,
            "tokens": {"input": prompt_tokens, "output": 0, "cached": 0, "thoughts": 0, "tool": 0, "total": prompt_tokens},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# --- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: path.name)
def test_every_chat_is_detected_as_gemini(path: Path) -> None:
    assert count(path)["format"] == "gemini"
    assert json.loads(ok(run_cli("validate", path)).stdout)["format"] == "gemini"


@pytest.mark.parametrize("path", [CHAT_JSON, CHAT_JSONL], ids=lambda path: path.name)
def test_a_chat_on_stdin_is_read_too(path: Path) -> None:
    assert count("-", stdin=path.read_bytes())["tokens"] == count(path)["tokens"]
    assert json.loads(ok(run_cli("validate", "-", stdin=path.read_bytes())).stdout)["format"] == "gemini"


def test_the_document_reads_as_gemini_cli_migrates_it_to_jsonl(tmp_path: Path) -> None:
    # ChatRecordingService.initialize migrates a .json chat: the metadata on a line, then a line a message.
    record = document()
    metadata = {key: value for key, value in record.items() if key != "messages"}
    migrated = tmp_path / "migrated.jsonl"
    migrated.write_text("".join(json.dumps(line) + "\n" for line in [metadata, *record["messages"]]))
    from_document, from_lines = count(CHAT_JSON), count(migrated)
    for key in ("tokens", "exact_tokens", "estimated_tokens", "messages", "model", "context_window"):
        assert from_document[key] == from_lines[key], key
    converted = ok(run_cli("convert", "--to", "anthropic", CHAT_JSON)).stdout
    assert converted == ok(run_cli("convert", "--to", "anthropic", migrated)).stdout


def test_the_document_laid_out_otherwise_is_read_as_one_record(tmp_path: Path) -> None:
    path = tmp_path / "four-spaces.json"
    path.write_text(json.dumps(document(), indent=4))
    assert count(path)["tokens"] == count(CHAT_JSON)["tokens"]


def test_a_message_is_named_by_the_line_it_starts_on_in_the_document(tmp_path: Path) -> None:
    record = document()
    record["messages"][2]["type"] = "bogus"
    path = write_document(tmp_path / "chat.json", record)
    text = path.read_text().splitlines()
    starts = [number for number, line in enumerate(text, 1) if line == "    {"]
    report = json.loads(run_cli("validate", path).stdout)
    assert [(finding["code"], finding["line"]) for finding in report["findings"]] == [("unknown-type", starts[2])]
    assert text[starts[2]].strip().startswith('"id": "2b8c4e3a')


# --- count -------------------------------------------------------------------------------------


def test_count_anchors_on_the_last_reply_and_estimates_the_prompt_after_it() -> None:
    tokens = last_reply_tokens(document()["messages"])
    counted = count(CHAT_JSON)
    # The reply's prompt and what it wrote (its thoughts are not sent back), then the estimated last prompt.
    assert counted["exact_tokens"] == tokens["input"] + tokens["output"] == 14_270
    assert counted["estimated_tokens"] > 0 and counted["estimated_messages"] == 1
    assert counted["tokens"] == counted["exact_tokens"] + counted["estimated_tokens"]
    assert counted["context_window"] == WINDOW and counted["model"] == "gemini-2.5-pro"
    assert "Gemini CLI" in counted["window_source"]


def test_count_of_a_chat_ending_in_a_reply_is_its_record_alone() -> None:
    path = HERE / "sample-2026-03.json"
    tokens = last_reply_tokens(json.loads(path.read_bytes())["messages"])
    counted = count(path)
    assert counted["tokens"] == counted["exact_tokens"] == tokens["input"] + tokens["output"]
    assert counted["estimated_tokens"] == 0


def test_count_follows_rewinds_and_the_compression_of_the_jsonl_form() -> None:
    lines = records(CHAT_JSONL)
    counted = count(CHAT_JSONL)
    tokens = last_reply_tokens(lines)
    assert counted["exact_tokens"] == tokens["input"] + tokens["output"] == 8_920
    # What the compression left (snapshot, acknowledgement, kept reply), the prompt and the reply after
    # it, and the edit's result: the rewound prompt and the history before the compression are gone.
    assert counted["messages"] == 6
    active = ok(run_cli("convert", "--to", "anthropic", CHAT_JSONL)).stdout.decode()
    assert "<state_snapshot>" in active and "adn rerun" not in active and "Find why the nightly import" not in active.split("<state_snapshot>")[0]
    # The tool result recorded twice (on the call and as a user turn) is in the context once.
    assert active.count("Successfully modified file: /home/dev/shop/importer.py") == 1


@pytest.mark.parametrize("cut", ["the compression and its info line", "and the next prompt"])
def test_right_after_a_compression_the_count_is_what_it_left_not_the_prompt_before_it(cut: str, tmp_path: Path) -> None:
    # The reply the compression kept still carries the tokens of the prompt it answered, before the
    # compression: the count must not anchor on it (Gemini CLI's own line says "compressed from 55% to 1%").
    lines = CHAT_JSONL.read_bytes().splitlines(keepends=True)
    end = next(n for n, line in enumerate(lines, 1) if b"Context compressed from" in line) + (cut != "the compression and its info line")
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b"".join(lines[:end]))
    before = max(record["tokens"]["input"] for record in records(path)[:-1] if isinstance(record.get("tokens"), dict))
    counted = count(path)
    assert counted["exact_tokens"] == 0 and counted["tokens"] < 0.05 * before, counted
    assert counted["percent_of_window"] < 2
    warned = run_cli("warn", "--json", path)
    assert warned.returncode == 0 and json.loads(warned.stdout)["level"] == "normal"


def test_a_reply_written_again_under_its_id_is_one_reply() -> None:
    history = ok(run_cli("count", "--cost", CHAT_JSONL)).stdout
    assert json.loads(history)["cost"]["api_calls"] == 3  # g1 (written twice), g2, g3; the acknowledgement has no tokens


def test_the_window_is_declared_once_from_gemini_clis_token_limits() -> None:
    assert {key: window for key, window, _ in OTHER_WINDOWS if key.startswith(("gemini", "gemma"))} == {
        "gemma-4-31b-it": 256_000,
        "gemma-4-26b-a4b-it": 256_000,
        "gemini-": WINDOW,
    }
    for model in ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-3-pro-preview", "gemini-3.1-flash-lite"):
        assert model_window(model)[0] == WINDOW, model
    assert model_window("gemma-4-31b-it")[0] == 256_000
    assert model_window("claude-sonnet-4-5")[0] != WINDOW  # Claude's windows stay the catalog's


# --- warn --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "level", "code"),
    [(524_287, "normal", 0), (524_288, "autocompact", 4), (1_048_575, "autocompact", 4), (1_048_576, "blocking", 5)],
)
def test_warn_judges_against_gemini_clis_compression_threshold(prompt: int, level: str, code: int, tmp_path: Path) -> None:
    path = chat_with_prompt(tmp_path / "chat.jsonl", prompt)
    result = run_cli("warn", "--json", path)
    no_traceback(result)
    assert result.returncode == code, result.stderr
    report = json.loads(result.stdout)
    assert (report["tokens"], report["level"], report["context_window"]) == (prompt, level, WINDOW)
    # Half the window, where Gemini CLI compresses (chatCompressionService.ts), is the compaction point.
    assert report["thresholds"] == {"warning": WINDOW // 2, "error": WINDOW // 2, "autocompact": WINDOW // 2, "blocking": WINDOW}
    assert gemini.COMPRESSION_THRESHOLD == 0.5


def test_warn_of_a_gemma_chat_uses_its_window(tmp_path: Path) -> None:
    report = json.loads(run_cli("warn", "--json", chat_with_prompt(tmp_path / "chat.jsonl", 128_000, "gemma-4-31b-it")).stdout)
    assert (report["context_window"], report["level"], report["thresholds"]["autocompact"]) == (256_000, "autocompact", 128_000)


# --- report and cost ---------------------------------------------------------------------------


def test_the_report_page_renders_the_chat_with_its_text_escaped(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    ok(run_cli("report", CHAT_JSON, "-o", page))
    html = page.read_text()
    assert "CSV export drops rows with a &lt;script&gt; tag in the name &amp; I need them kept" in html
    assert "<script> tag" not in html and html.count("<script") == 1  # the page's own script alone
    assert "gemini-2.5-pro" in html


def test_cost_with_prices_prices_every_reply_by_its_tokens(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    rate = {"input": 1.25, "cache_write_5m": 0, "cache_write_1h": 0, "cache_read": 0.125, "output": 10}
    prices.write_text(json.dumps({"gemini-2.5-pro": rate}))
    cost = count("--cost", "--prices", prices, CHAT_JSON)["cost"]
    replies = [m["tokens"] for m in document()["messages"] if m.get("tokens")]
    # Gemini counts the cached part inside `input`, and bills thoughts as output.
    fresh = sum(t["input"] - t["cached"] + t["tool"] for t in replies)
    cached = sum(t["cached"] for t in replies)
    output = sum(t["output"] + t["thoughts"] for t in replies)
    assert cost["tokens"] == {"input": fresh, "cache_write_5m": 0, "cache_write_1h": 0, "cache_read": cached, "output": output}
    assert cost["api_calls"] == 3
    assert cost["usd"] == pytest.approx((fresh * 1.25 + cached * 0.125 + output * 10) / 1_000_000, abs=2e-6)


def test_cost_without_prices_names_the_model_it_cannot_price() -> None:
    cost = count("--cost", CHAT_JSON)["cost"]
    assert cost["usd"] is None and cost["unpriced_models"] == ["gemini-2.5-pro"]


# --- audit -------------------------------------------------------------------------------------


def test_audit_finds_the_compression_the_jsonl_form_records() -> None:
    rows = [json.loads(line) for line in ok(run_cli("audit", "--json", CHAT_JSONL)).stdout.splitlines()]
    compaction, total = rows
    lines = CHAT_JSONL.read_bytes().splitlines()
    assert b"<state_snapshot>" in lines[compaction["line"] - 1] and b'"$set"' in lines[compaction["line"] - 1]
    assert (compaction["by"], compaction["trigger"]) == ("gemini-cli", "auto")  # the info line follows it
    assert compaction["pre_tokens"] == 571_840  # the last prompt before it, what Gemini CLI compares with its threshold
    assert compaction["post_tokens"] == 8_876  # the first reply after it
    assert compaction["facts"] > 0 and total["compactions"] == 1


def test_audit_of_a_document_says_no_compactions_when_it_records_none_to_audit(tmp_path: Path) -> None:
    # The .json form records an automatic compression only as an info line, not what it kept.
    record = document()
    record["messages"].insert(3, {"id": "i1", "timestamp": "2026-03-18T14:04:02.441Z", "type": "info", "content": "Context compressed from 52% to 3%."})
    for path in (CHAT_JSON, write_document(tmp_path / "chat.json", record)):
        rows = [json.loads(line) for line in ok(run_cli("audit", "--json", path)).stdout.splitlines()]
        assert [row.get("total") for row in rows] == [True] and rows[0]["compactions"] == 0


# --- read only ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", sorted(STAGES))
@pytest.mark.parametrize("path", [CHAT_JSON, CHAT_JSONL], ids=lambda path: path.name)
def test_every_stage_refuses_a_chat_in_one_line(stage: str, path: Path) -> None:
    message = error_line(run_cli(stage, *STAGES[stage], path, stdin=None))
    assert message == f"{ERROR_PREFIX}{path}: {stage} edits codex, claude-code and anthropic transcripts; convert a gemini transcript first"


def test_convert_to_gemini_is_not_offered() -> None:
    result = run_cli("convert", "--to", "gemini", CHAT_JSON)
    assert result.returncode == 2 and b"Traceback" not in result.stderr


# --- hostile chats -----------------------------------------------------------------------------


def test_a_document_cut_off_names_the_line_it_ends_on(tmp_path: Path) -> None:
    data = CHAT_JSON.read_bytes()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: len(data) // 2])
    last = path.read_bytes().count(b"\n") + 1
    for argv in (["count"], ["validate"], ["report", "--json"], ["audit"]):
        message = error_line(run_cli(*argv, path))
        assert message.startswith(f"{ERROR_PREFIX}{path}:{last}: a Gemini CLI chat cut off"), (argv, message)
    assert error_line(run_cli("validate", "-", stdin=path.read_bytes())).startswith(f"{ERROR_PREFIX}-:{last}: a Gemini CLI chat cut off")


def test_a_document_with_bad_json_inside_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    lines = CHAT_JSON.read_text().splitlines()
    lines[9] = lines[9].replace('"type":', '"type"')
    path.write_text("\n".join(lines))
    assert error_line(run_cli("count", path)).startswith(f"{ERROR_PREFIX}{path}:10: a Gemini CLI chat that is not valid JSON")


WRONG_TYPES = {
    "tokens a string": lambda m: m[1].update(tokens="many"),
    "tokens negative": lambda m: m[1].update(tokens={"input": -5, "output": -1, "cached": -3}),
    "tokens null": lambda m: m[1].update(tokens=None),
    "toolCalls a string": lambda m: m[1].update(toolCalls="read_file"),
    "tool call without args": lambda m: m[1]["toolCalls"][0].update(args=[1, 2], result="ok", id=7),
    "content a number": lambda m: m[0].update(content=42),
    "thoughts objects of nothing": lambda m: m[1].update(thoughts=[None, 3, {"subject": 5}]),
    "message a string": lambda m: m.insert(1, "hello"),
    "model an object": lambda m: m[1].update(model={"name": "gemini-2.5-pro"}),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_fields_of_the_wrong_type_read_as_absent_without_a_traceback(case: str, tmp_path: Path) -> None:
    record = document()
    WRONG_TYPES[case](record["messages"])
    path = write_document(tmp_path / "chat.json", record)
    for argv in (["count", "--cost"], ["warn", "--json"], ["audit"], ["validate"], ["report", "--json"]):
        result = run_cli(*argv, path)
        no_traceback(result)
        assert result.returncode in (0, 1, 3, 4, 5), (argv, result.returncode)
        if argv[0] == "count":
            counted = json.loads(result.stdout)
            assert isinstance(counted["tokens"], int) and 0 <= counted["tokens"] < 2**53


def test_a_wrong_top_level_is_refused_as_a_document_not_read(tmp_path: Path) -> None:
    record = document()
    record["messages"] = {"0": record["messages"][0]}  # not the array Gemini CLI writes
    path = write_document(tmp_path / "chat.json", record)
    assert "one JSON document over several lines" in error_line(run_cli("count", path))


@pytest.mark.parametrize("number", ["1e400", "123456789012345678901234567890", "-1"])
def test_huge_or_negative_token_figures_give_one_line_or_a_sane_count(number: str, tmp_path: Path) -> None:
    for suffix in (".json", ".jsonl"):
        if suffix == ".json":
            text = CHAT_JSON.read_text().replace('"input": 14236', f'"input": {number}')
        else:
            text = CHAT_JSONL.read_text().replace('"input":8876', f'"input":{number}')
        path = tmp_path / f"chat{suffix}"
        path.write_text(text)
        result = run_cli("count", path)
        no_traceback(result)
        if result.returncode == 0:
            assert 0 <= json.loads(result.stdout)["tokens"] < 2**53
        else:
            error_line(result)


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_deep_nesting_gives_one_line(suffix: str, tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    if suffix == ".json":
        text = CHAT_JSON.read_text().replace('"content": [', f'"content": [{deep}, ', 1)
    else:
        text = CHAT_JSONL.read_text().replace('"content":[', f'"content":[{deep},', 1)
    path = tmp_path / f"deep{suffix}"
    path.write_text(text)
    assert "nested deeper" in error_line(run_cli("count", path))


def test_a_rewind_to_an_unknown_message_drops_every_message_as_gemini_cli_does(tmp_path: Path) -> None:
    path = tmp_path / "rewound.jsonl"
    path.write_bytes(CHAT_JSONL.read_bytes() + b'{"$rewindTo":"no-such-id"}\n')
    counted = count(path)
    assert counted["messages"] == 0 and counted["exact_tokens"] == 0
    findings = json.loads(run_cli("validate", path).stdout)["findings"]
    assert [(f["code"], f["line"]) for f in findings] == [("rewind-unknown", len(records(path)))]


@pytest.mark.parametrize("argv", [["validate"], ["convert", "--to", "anthropic"], ["count"]], ids=lambda argv: argv[0])
def test_format_gemini_named_reads_the_document_too(argv: list[str]) -> None:
    for source, stdin in ((CHAT_JSON, b""), ("-", CHAT_JSON.read_bytes())):
        named = ok(run_cli(*argv, "--format", "gemini", source, stdin=stdin)).stdout
        assert named == ok(run_cli(*argv, source, stdin=stdin)).stdout


def test_a_binary_line_inside_a_document_on_a_stream_names_its_line(tmp_path: Path) -> None:
    lines = CHAT_JSON.read_bytes().split(b"\n")
    lines[20] = b"\x00" * (2 << 20)  # a long binary line, which the stream reader refuses as it reads
    message = error_line(run_cli("validate", "-", stdin=b"\n".join(lines)))
    assert message.startswith(f"{ERROR_PREFIX}-:21: binary data")


def test_warn_window_flag_moves_gemini_clis_threshold_with_it(tmp_path: Path) -> None:
    path = chat_with_prompt(tmp_path / "chat.jsonl", 60_000)
    result = run_cli("warn", "--json", "--window", "100000", path)
    assert result.returncode == 4, result.stderr
    report = json.loads(result.stdout)
    assert (report["context_window"], report["thresholds"]["autocompact"], report["level"]) == (100_000, 50_000, "autocompact")
