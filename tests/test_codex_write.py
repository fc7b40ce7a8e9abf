"""Codex CLI rollouts as a format ctxpipe writes: every stage and `compact` on a rollout write a
rollout that validates and reads back as one, keep every line they did not change byte for byte,
never part a call from its output, and say what they saved in the figures `count` reads back;
`--ledger` and `expand` give the input back; `convert` keeps time, model, usage and cwd, and
writes rollouts too. (Codex itself resuming what ctxpipe wrote: tests/test_codex_resume.py.)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from ctxpipe.core.collapse import read_key
from ctxpipe.core.placeholders import PLACEHOLDER, STUB_PREFIX
from ctxpipe.formats.codex import SUMMARY_PREFIX, USER_MESSAGES_BUDGET
from helpers import FIXTURES, run_cli

ROLLOUTS = sorted((FIXTURES / "codex").glob("*.jsonl"))
SUMMARIZED = [path for path in ROLLOUTS if path.name != "rollout.jsonl"]  # rollout.jsonl holds one exchange: nothing to summarize
ODD = FIXTURES / "adversarial" / "codex-odd.jsonl"
NOW = "2030-01-02T03:04:05.000Z"  # long after every fixture's last response: the cache has expired
STAGES: dict[str, tuple[str, ...]] = {
    "microcompact": ("microcompact", "--force", "--keep-recent", "1"),  # Codex has no microcompact of its own: asked for
    "collapse": ("collapse",),
    "summarize": ("summarize", "--engine", "offline", "--keep-last", "4"),
    "snip": ("snip", "--keep-last", "6"),
    "restore": ("restore",),
    "compact": ("compact", "--force", "--engine", "offline", "--keep-last", "4", "--now", NOW),
}
# Lines a stage adds: Codex's own compaction and its events, and ctxpipe's records (token_counts).
ADDED_KINDS = {("compacted", None), ("event_msg", "context_compacted"), ("event_msg", "token_count")}


def lines(data: bytes) -> list[bytes]:
    return data.splitlines()


def objects(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in lines(data)]


def json_of(*args: Any, stdin: bytes | None = None) -> Any:
    result = run_cli(*args, stdin=stdin)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def count_of(data: bytes) -> dict[str, Any]:
    counted: dict[str, Any] = json_of("count", "--json", "-", stdin=data)
    return counted


def run_stage(tmp_path: Path, rollout: Path, stage: str, *extra: str) -> tuple[bytes, dict[str, Any]]:
    """The stage's output and its --report-json."""
    report = tmp_path / f"{stage}-{rollout.stem}.json"
    result = run_cli(*STAGES[stage], *extra, "--report-json", report, rollout, stdin=None)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    return result.stdout, json.loads(report.read_text())


def without_output(obj: dict[str, Any]) -> dict[str, Any]:
    """The line with every tool output taken out: what clearing or folding one must leave as it was."""
    payload = dict(obj.get("payload") or {})
    payload.pop("output", None)
    if isinstance(payload.get("replacement_history"), list):
        payload["replacement_history"] = [
            {k: v for k, v in item.items() if k != "output"} if isinstance(item, dict) else item for item in payload["replacement_history"]
        ]
    return {**obj, "payload": payload}


def calls_and_outputs(data: bytes) -> tuple[list[str], list[str]]:
    """The call ids of the calls and of the outputs the active context sends (read as ctxpipe reads it)."""
    from ctxpipe.api import read_transcript
    from ctxpipe.formats import get

    transcript = read_transcript(data)
    calls, outputs = [], []
    for message in get(transcript.format).messages(transcript.entries):
        for block in message.content:
            if block.get("type") == "tool_use":
                calls.append(block["id"])
            elif block.get("type") == "tool_result":
                outputs.append(block["tool_use_id"])
    return calls, outputs


def check_rollout(before: bytes, after: bytes, stage: str) -> None:
    """What every stage's output must be, whatever it did."""
    checked = json_of("validate", "--json", "-", stdin=after)
    assert checked["format"] == "codex" and checked["errors"] == 0, checked["findings"]
    assert {f["code"] for f in checked["findings"]} <= {f["code"] for f in json_of("validate", "--json", "-", stdin=before)["findings"]}
    # Calls and outputs travel together: each call the context sends has its output after it, and no output is alone.
    calls, outputs = calls_and_outputs(after)
    assert sorted(calls) == sorted(outputs) and len(set(calls)) == len(calls)
    # Every line kept is kept byte for byte; a changed line differs in a tool output alone; a new line is Codex's compaction or a record.
    kept, written = set(lines(before)), set(lines(after))
    assert lines(after)[0] == lines(before)[0]  # session_meta first, untouched
    gone = [orjson.loads(line) for line in lines(before) if line not in written]
    new = [orjson.loads(line) for line in lines(after) if line not in kept]
    changed = [obj for obj in new if any(without_output(obj) == without_output(old) for old in gone)]
    for obj in new:
        if obj not in changed:
            assert (obj["type"], obj["payload"].get("type") if obj["type"] == "event_msg" else None) in ADDED_KINDS, obj
    if stage in ("microcompact", "collapse"):
        assert len(changed) == len(gone)  # nothing removed: each line gone came back with an output replaced
    if stage == "snip":
        assert not changed  # snip removes lines whole; it never edits one


@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda p: p.stem)
def test_each_stage_writes_a_rollout(tmp_path: Path, rollout: Path, stage: str) -> None:
    before = rollout.read_bytes()
    after, report = run_stage(tmp_path, rollout, stage)
    check_rollout(before, after, stage)
    counted = count_of(after)
    # One accounting: what the stage says it left is what `count` reads in what it wrote.
    assert counted["format"] == "codex" and counted["tokens"] == report["tokens_after"]
    assert report["tokens_before"] == count_of(before)["tokens"]
    if report.get("tokens_saved") and stage in ("microcompact", "collapse", "snip"):
        # Its record says what it took from the last recorded usage, and count subtracts exactly that.
        assert report["tokens_before"] - report["tokens_after"] == report["tokens_saved"]
        records = [o["payload"]["ctxpipe"] for o in objects(after) if o["type"] == "event_msg" and isinstance(o["payload"].get("ctxpipe"), dict)]
        assert records[-1]["tokensSaved"] == report["tokens_saved"]
    # A second run finds nothing more to do.
    again = run_cli(*STAGES[stage], "-", stdin=after)
    assert again.returncode == 0 and (again.stdout == after or stage == "snip"), again.stderr


@pytest.mark.parametrize("rollout", SUMMARIZED, ids=lambda p: p.stem)
def test_summarize_writes_codex_own_compaction(tmp_path: Path, rollout: Path) -> None:
    before = rollout.read_bytes()
    after, report = run_stage(tmp_path, rollout, "summarize")
    assert after.startswith(before)  # the history stays above, byte for byte
    added = objects(after[len(before) :])
    compacted, event = added[0], added[1]
    assert compacted["type"] == "compacted" and event == {"timestamp": event["timestamp"], "type": "event_msg", "payload": {"type": "context_compacted"}}
    history = compacted["payload"]["replacement_history"]
    assert compacted["payload"]["message"] == ""  # as Codex writes it: the summary is in the history
    assert history[-1]["type"] == "message" and history[-1]["role"] == "user" and len(history[-1]["content"]) == 1
    message = history[-1]["content"][0]["text"]
    assert history[-1]["content"][0]["type"] == "input_text" and message.startswith(SUMMARY_PREFIX + "\n") and "Summary:" in message
    # The initial context Codex keeps (developer instructions, AGENTS.md, environment_context), as the
    # active context held it (not what an older compaction holding only its summary left behind).
    items = [o["payload"] for o in objects(before) if o["type"] == "response_item"]
    last = max((n for n, o in enumerate(objects(before)) if o["type"] == "compacted"), default=-1)
    held = [o["payload"] for o in objects(before)[last + 1 :] if o["type"] == "response_item"]
    held += objects(before)[last]["payload"].get("replacement_history", []) if last >= 0 else []
    if any(item.get("role") == "developer" for item in held):
        assert history[0]["role"] == "developer" and history[0] in items
    if any("<environment_context>" in str(item) for item in held):
        assert any("<environment_context>" in part["text"] for item in history for part in item["content"])
    # The user messages kept verbatim: typed ones of the summarized part, the newest within Codex's budget, in order.
    typed = [
        h
        for h in history[:-1]
        if h["role"] == "user" and not h["content"][0]["text"].lstrip().startswith(("<environment_context>", "# AGENTS.md", SUMMARY_PREFIX))
    ]
    assert typed and sum((len(h["content"][0]["text"].encode()) + 3) // 4 for h in typed) <= USER_MESSAGES_BUDGET
    inputs = [item for item in items if item.get("role") == "user"] + [
        h for o in objects(before) if o["type"] == "compacted" for h in o["payload"].get("replacement_history", [])
    ]
    assert all(h in inputs for h in typed)
    # The kept tail, again, byte for byte: its calls with their outputs.
    tail = [line for line in lines(after[len(before) :])[2:-1]]
    assert tail and all(line in set(lines(before)) and orjson.loads(line)["type"] == "response_item" for line in tail)
    # Last, the new size as Codex reads it, with the window the rollout records, so Codex does not compact again on resume.
    size = added[-1]["payload"]
    assert size["type"] == "token_count" and size["ctxpipe"]["subtype"] == "ctxpipe_compact"
    assert size["info"]["last_token_usage"]["total_tokens"] == report["tokens_after"] == count_of(after)["tokens"] < report["tokens_before"]
    windows = [o["payload"]["info"]["model_context_window"] for o in objects(before) if o["payload"].get("type") == "token_count" and o["payload"].get("info")]
    assert size["info"]["model_context_window"] == windows[-1]
    assert size["ctxpipe"]["preTokens"] == report["tokens_before"] and size["ctxpipe"]["postTokens"] == report["tokens_after"]


def test_microcompact_clears_an_output_in_its_own_shape(tmp_path: Path) -> None:
    old = FIXTURES / "codex" / "old-outputs.jsonl"
    after, report = run_stage(tmp_path, old, "microcompact")
    assert report["cleared"] >= 2
    outputs = [o["payload"]["output"] for o in objects(after) if o["payload"].get("type") == "function_call_output"]
    cleared = [json.loads(output) for output in outputs if output.startswith('{"output"') and json.loads(output)["output"] == PLACEHOLDER]
    assert len(cleared) == report["cleared"] and all(set(c) == {"output", "metadata"} for c in cleared)  # still the JSON string Codex wrote, metadata kept
    plain, _ = run_stage(tmp_path, FIXTURES / "codex" / "reads.jsonl", "microcompact")
    assert PLACEHOLDER in [
        o["payload"]["output"] for o in objects(plain) if o["payload"].get("type") == "function_call_output"
    ]  # a plain string: the placeholder itself


def test_collapse_folds_the_same_read_whatever_the_call_options(tmp_path: Path) -> None:
    after, report = run_stage(tmp_path, FIXTURES / "codex" / "reads.jsonl", "collapse")
    folds = {fold["tool_use_id"]: fold["survivor"] for fold in report["folds"]}
    # sed -n of the same range, nl -ba twice, and `cat pyproject.toml` run with two different timeouts.
    assert folds == {"call_r02": "call_r08", "call_r04": "call_r10", "call_r05": "call_r09"}
    stubs = {o["payload"]["call_id"]: o["payload"]["output"] for o in objects(after) if o["payload"].get("type") == "function_call_output"}
    assert stubs["call_r05"].startswith(STUB_PREFIX + " shell cat pyproject.toml returned exactly")


def test_a_read_is_known_by_its_command_not_its_tool() -> None:
    argv = {"command": ["bash", "-lc", "sed -n '1,80p' src/app.py"], "workdir": "/repo", "timeout_ms": 1000}
    assert (
        read_key(argv)
        == read_key({"command": ["bash", "-lc", "sed -n '1,80p' src/app.py"], "workdir": "/repo"})
        == ("/repo", "sed", "-n", "1,80p", "src/app.py")
    )
    assert read_key({"command": "cat README.md"}) == ("", "cat", "README.md")  # Claude Code's Bash and Codex's shell_command
    assert read_key({"cmd": "nl -ba x.py", "workdir": "/w"}) == ("/w", "nl", "-ba", "x.py")  # exec_command
    for not_a_read in ("cat a.py | grep x", "sed -i 's/a/b/' f", "cat a > b", "ls", "cat $(pick)", "head -n 5"):
        assert read_key({"command": ["bash", "-lc", not_a_read]}) is None, not_a_read
    assert read_key({"command": "cat 'unterminated"}) is None and read_key("cat a") is None


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda p: p.stem)
def test_the_ledger_gives_the_rollout_back(tmp_path: Path, rollout: Path) -> None:
    before = rollout.read_bytes()
    ledger = tmp_path / "ledger.jsonl"
    out = tmp_path / "out.jsonl"
    data = before
    for stage in ("microcompact", "collapse", "summarize"):  # a chain of stages, each with its record
        result = run_cli(*STAGES[stage], "--ledger", ledger, "-", stdin=data)
        assert result.returncode == 0, result.stderr
        data = result.stdout
    assert data != before
    expanded = run_cli("expand", "--ledger", ledger, "-", stdin=data)
    assert expanded.returncode == 0 and expanded.stdout == before, expanded.stderr
    compacted = run_cli(*STAGES["compact"], "--ledger", ledger, rollout, "-o", out, stdin=None)
    assert compacted.returncode == 0, compacted.stderr
    check_rollout(before, out.read_bytes(), "compact")
    assert run_cli("expand", "--ledger", ledger, out).stdout == before


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("target", ["claude-code", "anthropic"])
def test_convert_keeps_time_model_usage_and_cwd(rollout: Path, target: str) -> None:
    before = rollout.read_bytes()
    source = count_of(before)
    result = run_cli("convert", "--to", target, rollout, stdin=None)
    assert result.returncode == 0, result.stderr
    converted = objects(result.stdout)
    counted = count_of(result.stdout)
    # The last response's usage came along: the same recorded prompt anchors the count (not a 4x estimate).
    assert counted["exact_tokens"] == source["exact_tokens"] > 0 and counted["model"] == source["model"]
    assert abs(counted["tokens"] - source["tokens"]) <= 0.05 * source["tokens"]
    stamps = {o["timestamp"] for o in objects(before)}
    assert all(o["timestamp"] in stamps for o in converted)
    if target == "claude-code":
        cwd = next(o["payload"]["cwd"] for o in reversed(objects(before)) if o["type"] in ("turn_context", "session_meta"))
        assert {o["cwd"] for o in converted} == {cwd}
        assert all(o["message"]["model"] == source["model"] for o in converted if o["type"] == "assistant")


@pytest.mark.parametrize("source", [FIXTURES / "claude-code" / "basic.jsonl", FIXTURES / "anthropic" / "basic.jsonl", ROLLOUTS[0]], ids=lambda p: p.parent.name)
def test_convert_to_codex_writes_a_rollout(source: Path) -> None:
    via = run_cli("convert", "--to", "anthropic", source, stdin=None).stdout if source.parent.name == "codex" else source.read_bytes()
    result = run_cli("convert", "--to", "codex", "--cwd", "/home/dev/calc", "-", stdin=via)
    assert result.returncode == 0, result.stderr
    written = objects(result.stdout)
    assert written[0]["type"] == "session_meta" and written[0]["payload"]["cwd"] == "/home/dev/calc"
    assert json_of("validate", "--json", "-", stdin=result.stdout)["errors"] == 0
    calls, outputs = calls_and_outputs(result.stdout)
    assert sorted(calls) == sorted(outputs)
    source_count, counted = count_of(via), count_of(result.stdout)
    assert counted["format"] == "codex" and counted["exact_tokens"] == source_count["exact_tokens"]
    # And back: the same messages (thinking is not written: Codex sends reasoning back only as the API
    # encrypted it; nor is is_error: Codex records an output as its text alone).
    back = run_cli("convert", "--to", "anthropic", "-", stdin=result.stdout)
    assert said(back.stdout) == said(run_cli("convert", "--to", "anthropic", "-", stdin=via).stdout)


def said(data: bytes) -> list[tuple[str, list[Any]]]:
    """Each message's role and blocks (a string as its text block), thinking and is_error left out."""
    out = []
    for message in objects(data):
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else [b for b in content if b.get("type") != "thinking"]
        blocks = [{key: value for key, value in block.items() if key != "is_error"} for block in parts]
        out.append((message["role"], blocks))
    return out


def test_a_rollout_is_warned_at_codex_own_threshold() -> None:
    warned = json_of("warn", "--json", FIXTURES / "codex" / "reads.jsonl")
    assert warned["context_window"] == 272_000
    assert warned["thresholds"]["autocompact"] == warned["thresholds"]["warning"] == math.floor(272_000 * 0.9)


@pytest.mark.parametrize("stage", list(STAGES))
def test_an_odd_rollout_gets_an_answer_not_a_traceback(stage: str) -> None:
    """The hostile file through every stage: exit 0 with a rollout every line of which is JSON, or one error line."""
    result = run_cli(*STAGES[stage], ODD, stdin=None)
    assert b"Traceback" not in result.stderr and result.returncode in (0, 1), result.stderr
    if result.returncode == 0:
        assert all(isinstance(orjson.loads(line), dict) for line in lines(result.stdout))
        kept = set(lines(ODD.read_bytes()))
        assert lines(result.stdout)[0] in kept
    else:
        assert result.stderr.decode().count("ctxpipe: error: ") == 1


def test_snip_keeps_the_turn_context_lines_in_the_cut(tmp_path: Path) -> None:
    # A turn_context names the model and folder of what follows: a cut inside a long turn must not
    # take it, or the count, the cost and Codex itself lose the model.
    source = FIXTURES / "codex" / "reads.jsonl"
    contexts = [line for line in lines(source.read_bytes()) if json.loads(line).get("type") == "turn_context"]
    result = run_cli("snip", "--keep-last", "3", source)
    assert result.returncode == 0, result.stderr.decode()
    assert [line for line in lines(result.stdout) if json.loads(line).get("type") == "turn_context"] == contexts
    model = json.loads(contexts[-1])["payload"]["model"]
    assert json.loads(run_cli("count", "--json", "-", stdin=result.stdout).stdout)["model"] == model


def test_a_rollout_with_no_reply_yet_is_counted_against_its_model_s_window(tmp_path: Path) -> None:
    # The first turn's turn_context names the model before any response (or token_count) records it.
    source = FIXTURES / "codex" / "rollout.jsonl"
    kept = []
    for line in lines(source.read_bytes()):
        obj = json.loads(line)
        if obj.get("type") == "response_item" and obj["payload"].get("role") not in ("user", "developer"):
            break  # the model's first output (reasoning, a call or a message)
        kept.append(line)
    model = next(json.loads(line)["payload"]["model"] for line in kept if json.loads(line).get("type") == "turn_context")
    report = json.loads(run_cli("count", "--json", "-", stdin=b"\n".join(kept) + b"\n").stdout)
    assert report["format"] == "codex" and report["model"] == model and report["context_window"] == 272_000, report


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def test_convert_to_codex_keeps_images_in_messages_and_tool_results(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}}
    conversation = [
        {"role": "user", "content": [{"type": "text", "text": "What is in this screenshot?"}, image]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/shot.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "the file:"}, image]}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A single pixel."}], "usage": {"input_tokens": 5000, "output_tokens": 5}},
    ]
    source = tmp_path / "api.jsonl"
    source.write_bytes(b"".join(orjson.dumps(message) + b"\n" for message in conversation))
    written = run_cli("convert", "--to", "codex", source)
    assert written.returncode == 0, written.stderr.decode()
    items = [json.loads(line)["payload"] for line in lines(written.stdout) if json.loads(line).get("type") == "response_item"]
    data_url = f"data:image/png;base64,{PIXEL}"
    typed = next(item for item in items if item.get("role") == "user" and "screenshot" in json.dumps(item))
    assert typed["content"] == [{"type": "input_text", "text": "What is in this screenshot?"}, {"type": "input_image", "image_url": data_url}]
    output = next(item for item in items if item["type"] == "function_call_output")["output"]
    assert output == [{"type": "input_text", "text": "the file:"}, {"type": "input_image", "image_url": data_url}]
    assert json.loads(run_cli("validate", "--json", "-", stdin=written.stdout).stdout)["valid"]
    # Read back, both images are images again (the estimate prices each at its flat cost).
    back = [json.loads(line) for line in lines(run_cli("convert", "--to", "anthropic", "-", stdin=written.stdout).stdout)]
    images = [block for message in back for block in json.dumps(message["content"]) and _blocks_of(message["content"]) if block.get("type") == "image"]
    assert len(images) == 2 and all(image["source"]["url"] == data_url for image in images)


def _blocks_of(content: Any) -> list[dict[str, Any]]:
    """Every block of a message's content, the blocks inside tool results too."""
    found = []
    for block in content if isinstance(content, list) else []:
        found.append(block)
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            found += block["content"]
    return found


def test_an_image_a_tool_returned_counts_as_an_image(tmp_path: Path) -> None:
    # view_image's output is content items: the image is priced as one (and microcompact may clear it).
    rollout = (FIXTURES / "codex" / "rollout.jsonl").read_bytes().splitlines()
    first_output = next(n for n, line in enumerate(rollout) if json.loads(line).get("payload", {}).get("type") == "function_call_output")
    obj = json.loads(rollout[first_output])
    without, with_image = dict(obj), dict(obj)
    without["payload"] = {**obj["payload"], "output": [{"type": "input_text", "text": "the image:"}]}
    with_image["payload"] = {
        **obj["payload"],
        "output": [{"type": "input_text", "text": "the image:"}, {"type": "input_image", "image_url": f"data:image/png;base64,{PIXEL}"}],
    }

    def counted(line: dict[str, Any]) -> int:
        data = b"\n".join([*rollout[:first_output], orjson.dumps(line), *rollout[first_output + 1 :]]) + b"\n"
        report = json.loads(run_cli("count", "--json", "--by", "block", "-", stdin=data).stdout)
        return sum(row["tokens"] for row in report["breakdown"] if row["key"] == "tool_result")

    assert counted(with_image) - counted(without) >= 1000  # an image's flat cost, not nothing


def test_convert_to_codex_answers_every_hostile_file_without_an_internal_error() -> None:
    # The hostile contract runs convert to the two other formats; here codex's writer (its clock
    # once overflowed on the last moment a datetime holds).
    cases = sorted((FIXTURES / "adversarial").glob("*.jsonl"))
    assert len(cases) > 40
    for case in cases:
        result = run_cli("convert", "--to", "codex", case)
        err = result.stderr.decode(errors="replace")
        assert result.returncode in (0, 1) and "internal error" not in err and "Traceback" not in err, (case.name, err)
        if result.returncode == 1:
            assert len([line for line in err.splitlines() if line.startswith("ctxpipe: error: ")]) == 1, (case.name, err)


@pytest.mark.parametrize("command", [["summarize", "--engine", "offline"], ["compact", "--force", "--engine", "offline"]])
def test_drop_history_is_refused_for_a_rollout(command: list[str]) -> None:
    # Codex resumes a rollout only with its session_meta above the compaction: --drop-history would write one it cannot.
    result = run_cli(*command, "--drop-history", FIXTURES / "codex" / "reads.jsonl", env={"ANTHROPIC_API_KEY": ""})
    assert result.returncode == 1 and result.stdout == b""
    assert b"--drop-history: not for a codex file" in result.stderr and b"session_meta" in result.stderr
