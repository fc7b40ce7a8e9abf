"""validate's structural rules beyond the line schema: parentUuid loops, a tool_result before its
tool_use (core.convert's one rule, which convert's warnings read too), a tool_result whose tool_use
never appears; and the compiled schema check, which must agree with jsonschema line for line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from builders import Session, usage
from ctxpipe.core.model import Finding
from ctxpipe.formats.claude_code import parent_cycles
from ctxpipe.jobs import schemas
from ctxpipe.jobs.validate import finding_rows, sort_findings
from helpers import CORPUS, FIXTURES, corpus_files, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ENTRY = "claude-code.entry.schema.json"
LINE_SCHEMAS = (ENTRY, "anthropic.message.schema.json", "codex.line.schema.json")


def _validate(path: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    done = run_cli("validate", "--json", *args, path)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    for report in reports:  # every report keeps to its published schema
        assert schemas.errors("validate.report.schema.json", report) == []
    return done.returncode, [finding for report in reports for finding in report["findings"]]


def _coded(findings: list[dict[str, Any]], code: str) -> list[dict[str, Any]]:
    return [finding for finding in findings if finding["code"] == code]


def _conversation(turns: int = 3) -> Session:
    session = Session()
    session.user("Please fix the parser.")
    session.text("Looking.", usage(1000))
    for k in range(turns):
        session.user(f"step {k}")
        session.text(f"done {k}", usage(1100 + 10 * k))
    return session


# --- parentUuid loops -----------------------------------------------------------------------


def test_a_two_line_loop_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    session = _conversation()
    session.lines[3]["parentUuid"] = session.lines[5]["uuid"]  # line 4 -> line 6 -> line 5 -> line 4
    code, findings = _validate(session.write(tmp_path / "loop.jsonl"))
    assert code == 1
    [loop] = _coded(findings, "parent-cycle")
    assert loop["severity"] == "error" and loop["line"] == 4
    assert "line 4 → 6 → 5 → 4" in loop["message"]


def test_a_line_that_is_its_own_parent_is_a_loop(tmp_path: Path) -> None:
    session = _conversation()
    session.lines[-1]["parentUuid"] = session.lines[-1]["uuid"]
    code, findings = _validate(session.write(tmp_path / "self.jsonl"))
    last = len(session.lines)
    assert code == 1
    assert [(f["line"], f["message"].split(";")[0]) for f in _coded(findings, "parent-cycle")] == [(last, f"parentUuid links loop: line {last} → {last}")]


def test_a_long_loop_is_named_by_its_first_lines_and_its_length(tmp_path: Path) -> None:
    session = _conversation(turns=30)
    session.lines[0]["parentUuid"] = session.lines[-1]["uuid"]  # the whole chain loops: no root
    code, findings = _validate(session.write(tmp_path / "whole.jsonl"))
    [loop] = _coded(findings, "parent-cycle")
    total = len(session.lines)
    assert code == 1 and loop["line"] == 1
    assert loop["message"].startswith(f"parentUuid links loop: line 1 → {total} → {total - 1} → ")
    assert f"… ({total} lines) → 1;" in loop["message"]


def test_a_tree_without_loops_has_no_loop_finding(tmp_path: Path) -> None:
    session = _conversation()
    session.user("a sidechain question", parent=session.lines[1]["uuid"], sidechain=True)
    session.lines[2]["parentUuid"] = "ffffffff-0000-4000-8000-000000000000"  # dangling, not a loop
    code, findings = _validate(session.write(tmp_path / "tree.jsonl"))
    assert _coded(findings, "parent-cycle") == []
    assert [f["line"] for f in _coded(findings, "dangling-parent")] == [3]


def test_every_loop_is_found_and_a_deep_chain_is_walked_without_recursion() -> None:
    from ctxpipe.core.jsonl import Entry

    def entry(uuid: int, parent: int | None) -> Entry:
        return Entry({"type": "user", "uuid": str(uuid), "parentUuid": None if parent is None else str(parent)})

    depth = 100_000
    chain = [entry(0, None)] + [entry(k, k - 1) for k in range(1, depth)]
    assert parent_cycles(chain) == []
    # Two loops hanging off the chain's end, and a later line that repeats uuid 7 (the later one wins).
    loops = chain + [entry(depth, depth + 1), entry(depth + 1, depth), entry(depth + 2, depth + 2), entry(7, depth + 3), entry(depth + 3, 7)]
    assert parent_cycles(loops) == [[depth, depth + 1], [depth + 2], [depth + 3, depth + 4]]


# --- a tool_result before its tool_use, and one whose tool_use never appears ---------------------


def _early_result(session: Session) -> tuple[str, int, int]:
    """A tool_result written on the line before the tool_use it answers: (id, result line, use line)."""
    tool = session.tool_id()
    result_line = len(session.lines) + 1
    session.tool_result(tool, "the output, too soon")
    session.response([{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": "/a.py"}}], usage(2000))
    return tool, result_line, result_line + 1


def test_a_result_before_its_tool_use_is_an_error_naming_the_later_line(tmp_path: Path) -> None:
    session = _conversation()
    tool, result_line, use_line = _early_result(session)
    session.text("ok", usage(2100))
    code, findings = _validate(session.write(tmp_path / "early.jsonl"))
    assert code == 1
    assert [(f["severity"], f["line"], f["message"]) for f in _coded(findings, "result-before-use")] == [
        ("error", result_line, f"tool_result for {tool} comes before its tool_use (line {use_line})")
    ]
    assert _coded(findings, "orphan-tool-result") == []  # one finding for the one problem


def test_a_result_whose_tool_use_never_appears_is_an_orphan(tmp_path: Path) -> None:
    session = _conversation()
    session.tool_result("toolu_NEVER", "no one asked")
    session.text("ok", usage(2100))
    line = len(session.lines) - 1
    code, findings = _validate(session.write(tmp_path / "orphan.jsonl"))
    assert code == 1
    assert [(f["line"], f["message"]) for f in _coded(findings, "orphan-tool-result")] == [(line, "tool_result for toolu_NEVER has no tool_use in this file")]
    assert _coded(findings, "result-before-use") == []


def test_convert_names_the_same_problem_with_the_same_words(tmp_path: Path) -> None:
    session = _conversation()
    tool, _, _ = _early_result(session)
    session.tool_result(tool, "the real output")
    session.tool_result("toolu_NEVER", "no one asked")
    session.text("ok", usage(2100))
    done = run_cli("convert", "--to", "anthropic", session.write(tmp_path / "early.jsonl"))
    warnings = done.stderr.decode()
    assert done.returncode == 0, warnings
    assert f"tool_result for {tool} comes before its tool_use" in warnings
    assert "tool_result for toolu_NEVER has no tool_use" in warnings


def test_anthropic_messages_a_result_before_its_tool_use(tmp_path: Path) -> None:
    lines = [
        {"role": "user", "content": "read a.py"},
        {"role": "assistant", "content": [{"type": "text", "text": "sure"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "early"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_A", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "x"}]},
    ]
    path = tmp_path / "messages.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    code, findings = _validate(path)
    assert code == 1
    assert [(f["line"], f["message"]) for f in _coded(findings, "result-before-use")] == [(3, "tool_result for toolu_A comes before its tool_use")]


def test_codex_an_output_before_its_call(tmp_path: Path) -> None:
    def item(payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "2026-05-04T10:00:00.000Z", "type": "response_item", "payload": payload}

    lines = [
        {"timestamp": "2026-05-04T10:00:00.000Z", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}},
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]}),
        item({"type": "function_call_output", "call_id": "call_1", "output": "early"}),
        item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "call_1"}),
        item({"type": "function_call_output", "call_id": "call_2", "output": "never called"}),
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    code, findings = _validate(path, "--format", "codex")
    assert code == 1
    assert [(f["line"], f["message"]) for f in _coded(findings, "result-before-use")] == [(3, "output for call call_1 comes before its call (line 4)")]
    assert [(f["line"], f["message"]) for f in _coded(findings, "orphan-tool-result")] == [(5, "output for call call_2 has no call")]


def test_the_report_schema_documents_every_finding_code() -> None:
    documented = schemas.load("validate.report.schema.json")["$defs"]["file"]["properties"]["findings"]["items"]["properties"]["code"]["description"]
    for code in ("parent-cycle", "result-before-use", "orphan-tool-result", "dangling-parent"):
        assert code in documented


# --- the schema check: compiled fast path vs jsonschema -------------------------------------------


def test_a_line_nested_too_deeply_for_the_schema_check_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    block: dict[str, Any] = {"type": "text", "text": 1}  # invalid, so the fast check sends it to jsonschema
    for _ in range(300):
        block = {"type": "tool_result", "tool_use_id": "t", "content": [block]}
    line = {"type": "user", "uuid": "u", "parentUuid": None, "message": {"role": "user", "content": [block]}}
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(line) + "\n")  # orjson refuses to write it so deep; it reads it
    code, findings = _validate(path)
    assert code == 1
    assert [f["message"] for f in _coded(findings, "schema")] == ["(line): nested too deeply to check against the schema"]


def _agree(name: str, instance: Any) -> None:
    try:
        reference = schemas.reference_errors(name, instance)
    except RecursionError:  # nested deeper than jsonschema can follow: nothing to compare with
        return
    assert schemas.errors(name, instance) == reference  # the same messages: jsonschema writes them


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False), st.sampled_from(["", "x", "user", "text"]))
ANY_JSON = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["type", "text", "id"]), inner, max_size=2), max_leaves=4
)

VALID_BLOCKS = [
    {"type": "text", "text": "hi"},
    {"type": "thinking", "thinking": "", "signature": "sig"},
    {"type": "redacted_thinking", "data": "d"},
    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/a"}},
    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "out"}], "is_error": False},
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}},
    {"type": "document", "anything": 1},
]
ENVELOPE = {"uuid": "u1", "parentUuid": None, "isSidechain": False, "timestamp": "2026-01-01T00:00:00Z", "sessionId": "s"}
VALID_ENTRIES = [
    {**ENVELOPE, "type": "user", "message": {"role": "user", "content": "hello"}},
    {**ENVELOPE, "type": "user", "message": {"role": "user", "content": [VALID_BLOCKS[4]]}, "isCompactSummary": True},
    {
        **ENVELOPE,
        "type": "assistant",
        "requestId": "r",
        "message": {
            "role": "assistant",
            "id": "msg_1",
            "model": "m",
            "content": [VALID_BLOCKS[0]],
            "stop_reason": None,
            "usage": {"input_tokens": 5, "output_tokens": 1, "cache_creation": {"ephemeral_5m_input_tokens": 2}, "service_tier": "x"},
        },
    },
    {**ENVELOPE, "type": "system", "subtype": "compact_boundary", "logicalParentUuid": "u0", "compactMetadata": {"trigger": "auto", "preTokens": 5}},
    {**ENVELOPE, "type": "progress", "data": {"type": "hook_progress"}},
    {**ENVELOPE, "type": "attachment", "attachment": {"type": "x"}},
    {"type": "summary", "summary": "t", "leafUuid": "u"},
    {"type": "file-history-snapshot", "snapshot": {}},
    {"type": "queue-operation", "operation": "x"},
    {"type": "permission-mode"},
]


def _places(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a JSON object (list items by index)."""
    found = []
    children = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for key, value in children:
        found.append(path + (key,))
        found += _places(value, path + (key,))
    return found


@st.composite
def lines_of(draw: Any, valid: list[dict[str, Any]]) -> Any:
    """A valid line of one shape with up to three changes: a value replaced by any JSON, or a key removed."""
    obj = orjson.loads(orjson.dumps(draw(st.sampled_from(valid))))
    if isinstance(obj.get("message"), dict) and isinstance(obj["message"].get("content"), list):
        obj["message"]["content"] = draw(st.lists(st.sampled_from(VALID_BLOCKS), max_size=3)).copy()
        obj = orjson.loads(orjson.dumps(obj))
    for _ in range(draw(st.integers(0, 3))):
        places = _places(obj)
        if not places:
            break
        *parent_path, key = draw(st.sampled_from(places))
        parent = obj
        for step in parent_path:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[key]
        else:
            parent[key] = draw(ANY_JSON | st.sampled_from(["user", "assistant", "text", "tool_result", "compact_boundary", -1, 1.0, True, None]))
    return obj


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_of(VALID_ENTRIES))
def test_the_fast_schema_check_agrees_with_jsonschema_on_generated_lines(entry: Any) -> None:
    _agree(ENTRY, entry)


@settings(max_examples=200, deadline=None)
@given(lines_of([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [VALID_BLOCKS[3]]}, {"role": "user", "content": [VALID_BLOCKS[4]]}]))
def test_the_fast_schema_check_agrees_with_jsonschema_on_generated_messages(message: Any) -> None:
    _agree("anthropic.message.schema.json", message)


CODEX_LINES = [orjson.loads(raw) for raw in (FIXTURES / "validate" / "codex.in.jsonl").read_bytes().splitlines() if raw.strip()]


@settings(max_examples=200, deadline=None)
@given(lines_of(CODEX_LINES))
def test_the_fast_schema_check_agrees_with_jsonschema_on_generated_codex_lines(line: Any) -> None:
    _agree("codex.line.schema.json", line)


def test_the_fast_schema_check_agrees_with_jsonschema_on_every_fixture_line() -> None:
    checked = 0
    for raw in sorted({raw for path in FIXTURES.rglob("*.jsonl") for raw in path.read_bytes().splitlines()}):  # each distinct line once
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        for name in LINE_SCHEMAS:  # agreement holds for any object, whatever its format
            _agree(name, obj)
        checked += 1
    assert checked > 100


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the shared corpus is not beside this checkout ({CORPUS})")
def test_the_fast_schema_check_agrees_with_jsonschema_on_the_corpus() -> None:
    # Every line the fast check passes, jsonschema passes too (a sample: jsonschema is slow).
    for path in corpus_files()[:20]:
        for raw in path.read_bytes().splitlines()[:300]:
            _agree(ENTRY, orjson.loads(raw))


# --- lines that fail the schema: where jsonschema-rs finds each error, jsonschema writes it ----------


def _failing_session(turns: int = 40) -> list[dict[str, Any]]:
    """A conversation with tool calls, every line then broken in one or more ways in turn: types
    changed, required fields gone (some in two schemas at once: several errors at one path), a
    block's field or the role wrong, a negative count."""
    session = _conversation(turns=2)
    for k in range(turns):
        tool = session.tool_id()
        session.response(
            [{"type": "text", "text": f"reading {k}"}, {"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": f"/a{k}.py"}}], usage(2000 + k)
        )
        session.tool_result(tool, [{"type": "text", "text": f"line {k}"}])
        session.text(f"done {k}", usage(2100 + k))
    session.system("compact_boundary", logicalParentUuid=session.last, compactMetadata={"trigger": "auto", "preTokens": 100})
    lines: list[dict[str, Any]] = orjson.loads(orjson.dumps(session.lines))
    for k, line in enumerate(lines):
        message = line["message"] if isinstance(line.get("message"), dict) else {}
        content = message.get("content")
        blocks = [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
        way = k % 9
        if way == 1:
            del line["uuid"], line["parentUuid"]  # two errors of one keyword at one path
            if k % 2 and line["type"] in ("user", "assistant"):
                del line["message"]  # and a third from another schema, at the same path
        elif way == 2:
            line["isSidechain"] = "false"
            line["uuid"] = k  # two errors at two paths
        elif way == 3 and blocks:
            for field in ("text", "tool_use_id", "id"):
                if blocks[0].pop(field, None) is not None:
                    break
            message["role"] = "robot"
        elif way == 4 and isinstance(message.get("usage"), dict):
            message["usage"]["input_tokens"] = -k
            message["usage"]["output_tokens"] = str(k)
        elif way == 5:
            line["type"] = ["user"]  # not a string: no type's schema applies
        elif way == 6 and isinstance(line.get("compactMetadata"), dict):
            line["compactMetadata"] = {"trigger": 1, "preTokens": -1}
        elif way == 7:
            line["parentUuid"] = 7
            line["sessionId"] = None
        elif way == 8 and message:
            line["message"] = "not an object"
        else:
            line["timestamp"] = 1_767_225_600_000 + k  # one error
    return lines


def test_validate_on_lines_that_all_fail_reports_what_jsonschema_reports_for_each(tmp_path: Path) -> None:
    lines = _failing_session()
    expected = [(number, message) for number, line in enumerate(lines, 1) for message in schemas.reference_errors(ENTRY, line)]
    assert all(schemas.reference_errors(ENTRY, line) for line in lines)  # every line fails
    path = tmp_path / "failing.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    code, findings = _validate(path)
    reported = [(f["line"], f["message"]) for f in _coded(findings, "schema")]
    assert code == 1
    assert reported[:20] == expected[:20]  # the first errors, word for word
    assert reported == expected and len(reported) > len(lines)  # and every one, in jsonschema's order
    [report] = [json.loads(line) for line in run_cli("validate", "--json", path).stdout.splitlines()]
    assert report["errors"] == len(expected) + sum(1 for f in findings if f["severity"] == "error" and f["code"] != "schema")


def test_a_failing_line_is_explained_without_jsonschema_walking_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # jsonschema-rs says where each error is and jsonschema's keyword writes it: jsonschema does
    # not validate the line whole (that took 1-4 ms a line), yet the words and order are its own.
    lines = _failing_session(turns=6)
    expected = [schemas.reference_errors(ENTRY, line) for line in lines]

    def whole(name: str, instance: Any) -> list[str]:
        raise AssertionError("validated by jsonschema whole")

    monkeypatch.setattr(schemas, "reference_errors", whole)
    assert [schemas.errors(ENTRY, line, orjson.dumps(line)) for line in lines] == expected


def test_errors_at_one_path_come_in_the_order_jsonschema_meets_them() -> None:
    # At one path, jsonschema's sort keeps the order in which it walked the schema: the envelope's
    # `required` (allOf 0) before the user entry's (allOf 1), and each name in its schema's order.
    line = {"type": "user", "isSidechain": False}
    assert schemas.errors(ENTRY, line) == [
        "(line): 'uuid' is a required property",
        "(line): 'parentUuid' is a required property",
        "(line): 'message' is a required property",
    ]
    assert schemas.errors(ENTRY, line) == schemas.reference_errors(ENTRY, line)
    block = {"type": "tool_use"}
    message = {"role": "user", "content": [block, {"type": "text"}]}
    assert schemas.errors("anthropic.message.schema.json", message) == schemas.reference_errors("anthropic.message.schema.json", message)


def test_a_line_deeper_than_the_located_check_goes_to_jsonschema_whole_which_copes_with_it_there() -> None:
    # Up to LOCATED_DEPTH levels the located errors are used: jsonschema itself, with some 300
    # frames already on the stack, still validates such a line, so it would not have said "nested
    # too deeply" where the located errors say something else.
    def line(levels: int) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": 1}
        for _ in range(levels):
            block = {"type": "tool_result", "tool_use_id": "t", "content": [block]}
        return {"type": "user", "uuid": "u", "parentUuid": None, "message": {"role": "user", "content": [block]}}

    levels = (schemas.LOCATED_DEPTH - 4) // 2  # the line, its message, content and a block; then a content list and a block a level
    at_limit = line(levels)
    assert not schemas._deeper_than(at_limit, orjson.dumps(at_limit), schemas.LOCATED_DEPTH)
    assert schemas._deeper_than(line(levels + 1), orjson.dumps(line(levels + 1)), schemas.LOCATED_DEPTH)

    def nested(frames: int) -> list[str]:
        return nested(frames - 1) if frames else schemas.reference_errors(ENTRY, at_limit)

    assert schemas.errors(ENTRY, at_limit, orjson.dumps(at_limit)) == nested(300)
    assert schemas.errors(ENTRY, at_limit) == nested(300)  # without the bytes, the depth is walked


@given(st.binary() | st.lists(st.sampled_from([b"{", b"[", b"}", b"]", b'"', b"\\", b"a", b"\xe2\x80\xa8"])).map(b"".join))
def test_the_openings_of_a_line_are_its_braces_and_brackets(raw: bytes) -> None:
    # A line with no more openings than LOCATED_DEPTH nests no deeper: the count must miss none.
    assert schemas._openings(raw) == raw.count(b"{") + raw.count(b"[")


def test_a_line_whose_errors_the_located_check_cannot_explain_is_validated_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # When jsonschema's keyword does not find at a place what jsonschema-rs found there (or the
    # keyword is not one that judges a value alone), the line goes to jsonschema whole.
    line = {"type": "user", "uuid": 5, "parentUuid": None, "message": {"role": "user", "content": "hi"}}
    expected = schemas.reference_errors(ENTRY, line)
    monkeypatch.setattr(schemas, "_TAILS", {})  # no message known from an earlier line: the keyword is asked
    monkeypatch.setattr(schemas, "_judged", lambda *args: [])
    calls = []
    reference = schemas.reference_errors
    monkeypatch.setattr(schemas, "reference_errors", lambda name, instance: calls.append(name) or reference(name, instance))
    assert schemas.errors(ENTRY, line) == expected == ["uuid: 5 is not of type 'string'"]
    assert calls == [ENTRY]
    assert schemas._keyword_at("https://ctxpipe.dev/schemas/claude-code.entry.schema.json#/allOf") is None  # not a leaf keyword
    assert schemas._keyword_at(None) is None


def test_validate_leaves_the_cycle_collector_as_it_found_it(tmp_path: Path) -> None:
    import gc

    from ctxpipe.api import validate_one
    from ctxpipe.core.errors import CtxpipeError

    session = _conversation()
    path = session.write(tmp_path / "ok.jsonl")
    assert gc.isenabled()
    report, _, _ = validate_one((str(path), "ok.jsonl"), None, "fail")
    assert report.valid and gc.isenabled()
    with pytest.raises(CtxpipeError):  # raised with the collector off
        validate_one((str(tmp_path / "missing.jsonl"), "missing.jsonl"), None, "fail")
    assert gc.isenabled()
    gc.disable()
    try:
        validate_one((str(path), "ok.jsonl"), None, "fail")
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- known places: lines that fail where earlier ones did ----------------------------------------


class _Asking:
    """The compiled check, counting how often it is asked where a line's errors are."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.asked = 0

    def is_valid(self, instance: Any) -> bool:
        return bool(self.inner.is_valid(instance))

    def iter_errors(self, instance: Any) -> Any:
        self.asked += 1
        return self.inner.iter_errors(instance)


@pytest.fixture
def fresh_places(monkeypatch: pytest.MonkeyPatch) -> _Asking:
    for state in ("_KNOWN", "_LEARNING", "_SEEN"):
        monkeypatch.setattr(schemas, state, {})
    asking = _Asking(schemas.fast_validator(ENTRY))
    monkeypatch.setattr(schemas, "fast_validator", lambda name: asking if name == ENTRY else None)
    return asking


def _user_line(k: int, **changes: Any) -> dict[str, Any]:
    line = {**ENVELOPE, "uuid": f"u{k}", "type": "user", "message": {"role": "user", "content": [{"type": "text", "text": f"t{k}"}]}}
    line.update(changes)
    return line


def test_lines_that_fail_where_earlier_ones_did_are_explained_without_asking_where(fresh_places: _Asking) -> None:
    lines = [_user_line(k, timestamp=k) for k in range(10)]  # the same place, other values
    assert [schemas.errors(ENTRY, line) for line in lines] == [[f"timestamp: {k} is not of type 'string'"] for k in range(10)]
    assert fresh_places.asked == schemas.PLACE_SEEN_TO_KEEP  # then the place is known
    others = [
        _user_line(20, timestamp=20, uuid=5),  # a known place and one that is not: asked
        _user_line(21, message={"role": "user", "content": [{"type": "text"}]}),  # not a known place: asked
        {**_user_line(22, timestamp=22), "type": "assistant", "message": {"role": "assistant", "content": []}},  # known, other schemas apply
        _user_line(23, timestamp=None, isSidechain="no"),
        _user_line(24),  # valid
    ]
    assert [schemas.errors(ENTRY, line) for line in others] == [schemas.reference_errors(ENTRY, line) for line in others]
    assert fresh_places.asked == schemas.PLACE_SEEN_TO_KEEP + 3


def test_a_known_place_in_a_content_block_is_its_own_for_each_block_type_and_position(fresh_places: _Asking) -> None:
    def with_blocks(k: int, *blocks: dict[str, Any]) -> dict[str, Any]:
        return _user_line(k, message={"role": "user", "content": list(blocks)})

    learnt = [with_blocks(k, {"type": "text", "text": k}) for k in range(3)]  # text's type, in block 0
    for line in learnt:
        schemas.errors(ENTRY, line)
    asked = fresh_places.asked
    lines = [
        with_blocks(3, {"type": "text", "text": 3}),  # known
        with_blocks(4, {"type": "text", "text": "ok"}, {"type": "text", "text": 4}),  # the same keyword in block 1: not known
        with_blocks(5, {"type": "tool_use", "id": "t", "name": "n", "input": {}, "text": 5}),  # text of a tool_use: no error
        with_blocks(6, {"type": "text", "text": 6}, {"type": "text", "text": 7}),
        with_blocks(7, {"type": "thinking", "text": 8}),
    ]
    assert [schemas.errors(ENTRY, line) for line in lines] == [schemas.reference_errors(ENTRY, line) for line in lines]
    assert fresh_places.asked == asked + 3  # the first is known and the third valid: the others fail elsewhere too


def test_the_variant_of_the_known_places_notes_where_a_line_fails_there(fresh_places: _Asking) -> None:
    line = _user_line(1, timestamp=1, isSidechain="x")
    learnt = [_user_line(k, timestamp=k) for k in range(2)] + [_user_line(k, isSidechain=str(k)) for k in range(2)]
    for learning in learnt:
        schemas._located_errors(ENTRY, schemas.fast_validator(ENTRY), learning)
    known = schemas._KNOWN[ENTRY]
    numbers = {shown: number for number, (_, shown, _, _, _) in enumerate(known.places)}
    assert {"timestamp", "isSidechain"} <= set(numbers)

    def noted(instance: Any) -> tuple[bool, list[int]]:
        schemas._FAILED.places = []
        return bool(known.relaxed.is_valid(instance)), sorted(schemas._FAILED.places)

    assert noted(_user_line(2)) == (True, [])
    assert noted(line) == (True, sorted([numbers["timestamp"], numbers["isSidechain"]]))
    assert noted(_user_line(3, timestamp=3, uuid=3))[0] is False  # it fails elsewhere too


_LEARNT: list[bool] = []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_of(VALID_ENTRIES))
def test_the_known_places_agree_with_jsonschema_on_generated_lines(entry: Any) -> None:
    if not _LEARNT:  # what every line of a failing file teaches, then lines of any kind
        for line in _failing_session():
            schemas.errors(ENTRY, line)
        _LEARNT.append(True)
    assert schemas._KNOWN[ENTRY].places
    _agree(ENTRY, entry)


# --- the order of what validate lists ----------------------------------------------------------

_LINES = st.one_of(st.none(), st.integers(min_value=1, max_value=12))
_FINDINGS = st.lists(
    st.builds(
        Finding,
        st.sampled_from(["error", "warning"]),
        st.sampled_from(["bad-line", "parent-cycle", "schema", "split-response", "z"]),
        st.text(max_size=3),
        _LINES,
    ),
    max_size=8,
)


@given(_FINDINGS, st.lists(st.integers(min_value=1, max_value=12), max_size=20).map(sorted), _FINDINGS)
def test_the_schema_errors_are_listed_among_the_other_findings_as_a_sort_of_all_of_them_would(
    bad_lines: list[Finding], schema_lines: list[int], structure: list[Finding]
) -> None:
    # The schema errors come in line order and are not sorted again: the others must land where a
    # stable sort of all three lists, one after the other, puts them (ties included).
    problems = [(line, f"m{k}") for k, line in enumerate(schema_lines)]
    every = [f.row() for f in bad_lines] + [Finding("error", "schema", message, line).row() for line, message in problems] + [f.row() for f in structure]
    assert finding_rows(bad_lines, problems, structure) == sort_findings(every)
    problems.reverse()  # not in line order: all are sorted
    every = [f.row() for f in bad_lines] + [Finding("error", "schema", message, line).row() for line, message in problems] + [f.row() for f in structure]
    assert finding_rows(bad_lines, problems, structure) == sort_findings(every)
