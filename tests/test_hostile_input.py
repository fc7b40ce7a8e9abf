"""Hostile values in known fields, deep nesting, a bad file in a batch, bad option values, and
compact run on its own output.

- A known field holding a value of the wrong type reads as absent; a usage figure that is not a
  non-negative count below 10^15 reads as 0 (the same total as a 0 there, never negative).
- orjson reads at most 1024 levels: a line nested deeper is a bad line (FILE:LINE, skippable);
  anything up to that passes through every command, and a stage writes untouched lines back
  byte for byte and keeps the deep value in a line it rewrites.
- In a batch, a file that breaks is one error row naming it; the others are still processed.
- Option values are checked where the option is declared: a bad one is exit 2 and one line.
- compact of compact's output, with nothing new since, writes it back byte for byte.
"""

from __future__ import annotations

import gc
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from builders import Session, usage
from ctxpipe.core.errors import InputError, InternalError
from ctxpipe.jobs.batch import PARALLEL_MIN_BYTES, Runner, run_all
from helpers import CORPUS, FIXTURES, corpus_files, run_cli

NOW = "2026-06-01T00:00:00Z"
ERROR = "ctxpipe: error: "
# Every command that reads a transcript, as a user would run it on one file.
READERS: dict[str, list[str]] = {
    "convert": ["convert", "--to", "claude-code"],
    "convert-anthropic": ["convert", "--to", "anthropic", "--repair"],
    "validate": ["validate"],
    "count": ["count", "--full", "--by", "tool", "--top", "3"],
    "count-timeline": ["count", "--timeline", "--json"],
    "warn": ["warn"],
    "api-edits": ["api-edits", "--compact"],
    "microcompact": ["microcompact", "--force", "--now", NOW],
    "microcompact-cache-aware": ["microcompact", "--cache-aware", "--clear-at-least", "0", "--now", NOW],
    "collapse": ["collapse", "--now", NOW],
    "snip": ["snip", "--keep-last", "2", "--now", NOW],
    "summarize": ["summarize", "--engine", "offline", "--keep-last", "2", "--now", NOW],
    "restore": ["restore", "--source", "transcript", "--now", NOW],
    "compact": ["compact", "--force", "--engine", "offline", "--keep-last", "2", "--source", "transcript", "--now", NOW],
}
# validate exits 1 when it finds an error in the file; warn's exit code is the level (0, 3-5).
STATUS = {"validate": {0, 1}, "warn": {0, 3, 4, 5}}


def session() -> Session:
    """A session with reads, a repeated read, a Bash call and an edit: every stage has work."""
    s = Session()
    s.user("Make the server use the WORKERS setting.")
    total = 9_000
    for number, (name, tool_input, result) in enumerate(
        [
            ("Read", {"file_path": "/home/dev/app/config.py"}, "WORKERS = 4\n" * 40),
            ("Bash", {"command": "pytest -q"}, "1 failed, 9 passed\n" * 30),
            ("Read", {"file_path": "/home/dev/app/config.py"}, "WORKERS = 4\n" * 40),
            ("Edit", {"file_path": "/home/dev/app/app.py", "old_string": "serve()", "new_string": "serve(WORKERS)"}, "The file was updated."),
            ("Read", {"file_path": "/home/dev/app/app.py"}, "serve(WORKERS)\n" * 20),
        ]
    ):
        tool = s.tool_id()
        total += 400 + number * 50
        s.response([{"type": "tool_use", "id": tool, "name": name, "input": tool_input}], usage(total))
        s.tool_result(tool, result)
    s.text("Done: the server reads WORKERS.", usage(total + 600))
    s.user("Thanks, now run the tests again.")
    return s


def write(tmp_path: Path, lines: list[dict[str, Any]] | list[bytes], name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join((line if isinstance(line, bytes) else json.dumps(line, separators=(",", ":")).encode()) + b"\n" for line in lines))
    return path


def assert_clean(result: Any, allowed: set[int] = frozenset({0})) -> str:  # type: ignore[assignment]
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "internal error" not in err, err
    assert result.returncode in allowed, (result.returncode, err)
    return err


def count_report(path: Path, *extra: str) -> dict[str, Any]:
    result = run_cli("count", "--json", *extra, path)
    assert_clean(result)
    [report] = [json.loads(line) for line in result.stdout.splitlines()]
    return report


# --- usage figures that are not counts --------------------------------------------------------

# (name, the raw JSON written for the figure). 10^40 is a 41-digit integer literal, beyond 64 bits.
ODD_FIGURES = [
    ("nan-string", b'"NaN"'),
    ("1e308", b"1e308"),
    ("10^40", b"1" + b"0" * 40),
    ("object", b"{}"),
    ("array", b"[]"),
    ("true", b"true"),
    ("negative", b"-13909"),
    ("null", b"null"),
    ("numeric-string", b'"12000"'),
    ("1e15", b"1e15"),
]


def _with_figure(data: bytes, key: str, raw: bytes) -> bytes:
    """Every `key` figure of every usage in `data` replaced by the raw JSON `raw`."""
    return re.sub(rb'("' + key.encode() + rb'":)\d+', lambda match: match.group(1) + raw, data)


@pytest.mark.parametrize("key", ["cache_read_input_tokens", "input_tokens", "output_tokens"])
@pytest.mark.parametrize("name, raw", ODD_FIGURES, ids=[name for name, _ in ODD_FIGURES])
def test_a_usage_figure_that_is_not_a_count_reads_as_zero(name, raw, key, tmp_path):
    data = session().to_bytes()
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(_with_figure(data, key, raw))
    zero = tmp_path / "zero.jsonl"
    zero.write_bytes(_with_figure(data, key, b"0"))
    assert odd.read_bytes() != data
    got, expected = count_report(odd), count_report(zero)
    assert got["tokens"] == expected["tokens"] >= 0
    assert got["exact_tokens"] == expected["exact_tokens"] >= 0


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_takes_odd_usage_figures(reader, tmp_path):
    # One file holding each odd figure on some response, every usage key in turn.
    data = session().to_bytes()
    keys = ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"]
    lines = data.splitlines()
    responses = [n for n, line in enumerate(lines) if b'"usage"' in line]
    for number, position in enumerate(responses):
        _, raw = ODD_FIGURES[number % len(ODD_FIGURES)]
        lines[position] = _with_figure(lines[position], keys[number % len(keys)], raw)
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = run_cli(*READERS[reader], path)
    assert_clean(result, STATUS.get(reader, {0}))
    if reader.startswith("count"):
        for report in map(json.loads, result.stdout.splitlines()):
            assert all(point["tokens"] >= 0 for point in report.get("timeline", [])), report
            assert report.get("tokens", 0) >= 0


def test_a_figure_orjson_reads_as_infinity_is_a_bad_line(tmp_path):
    # 1e400 is no double: the JSON layer refuses the line; it is named, and --on-error skip passes it.
    lines = session().to_bytes().splitlines()
    position = next(n for n, line in enumerate(lines) if b'"usage"' in line)
    lines[position] = _with_figure(lines[position], "output_tokens", b"1e400")
    path = write(tmp_path, lines)
    result = run_cli("convert", "--to", "anthropic", path)
    assert result.returncode == 1
    assert result.stderr.decode().startswith(f"{ERROR}{path}:{position + 1}: invalid JSON")
    skipped = run_cli("convert", "--to", "anthropic", "--on-error", "skip", path)
    assert "skipped 1 bad line" in assert_clean(skipped)


# --- odd types in the other known fields --------------------------------------------------------

DEEP = "<deep>"  # replaced by a list nested 1000 levels deep in the written line


def _mutate(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> bool:
    target: Any = obj
    for key in path[:-1]:
        if isinstance(target, dict) and key in target:
            target = target[key]
        elif isinstance(target, list) and isinstance(key, int) and key < len(target):
            target = target[key]
        else:
            return False
    last = path[-1]
    if isinstance(target, dict) and last in target or isinstance(target, list) and isinstance(last, int) and last < len(target):
        target[last] = value
        return True
    return False


# (case id, field path on every line that has it, value)
ODD_FIELDS = [
    ("content-number", ("message", "content"), 42),
    ("content-object", ("message", "content"), {"type": "text", "text": "x"}),
    ("block-not-object", ("message", "content", 0), "a string where a block should be"),
    ("block-type-object", ("message", "content", 0, "type"), {"a": 1}),
    ("tool-input-string", ("message", "content", 0, "input"), "rm -rf /"),
    ("tool-id-number", ("message", "content", 0, "id"), 7),
    ("tool-use-id-list", ("message", "content", 0, "tool_use_id"), ["toolu_1"]),
    ("tool-name-object", ("message", "content", 0, "name"), {"name": "Read"}),
    ("text-deep", ("message", "content", 0, "text"), DEEP),
    ("result-content-deep", ("message", "content", 0, "content"), DEEP),
    ("timestamp-number", ("timestamp",), 1717200000),
    ("timestamp-invalid", ("timestamp",), "not a time"),
    ("timestamp-far", ("timestamp",), "9999-12-31T23:59:59.999-05:00"),
    ("model-number", ("message", "model"), 5),
    ("model-deep", ("message", "model"), DEEP),
    ("cwd-list", ("cwd",), ["/home", "dev"]),
    ("uuid-number", ("uuid",), 12345),
    ("parent-uuid-object", ("parentUuid",), {"uuid": "x"}),
    ("type-list", ("type",), ["user"]),
    ("session-id-deep", ("sessionId",), DEEP),
    ("request-id-deep", ("requestId",), DEEP),
    ("message-id-list", ("message", "id"), ["msg"]),
]


def _odd_session(path: tuple[Any, ...], value: Any, tmp_path: Path) -> Path:
    """The session with `value` at `path` on every line but the first (which tells the format)."""
    lines = []
    changed = 0
    for number, obj in enumerate(session().lines):
        obj = json.loads(json.dumps(obj))
        changed += number > 0 and _mutate(obj, path, value)
        lines.append(json.dumps(obj, separators=(",", ":")).replace(json.dumps(DEEP), "[" * 1000 + "]" * 1000).encode())
    assert changed, path
    return write(tmp_path, lines)


# compact runs microcompact, collapse, summarize and restore: one run each of the others would cost
# minutes on a shared machine for little more.
FIELD_READERS = ["convert-anthropic", "validate", "count", "count-timeline", "warn", "api-edits", "snip", "compact"]


@pytest.mark.parametrize("reader", FIELD_READERS)
@pytest.mark.parametrize("case, path, value", ODD_FIELDS, ids=[case[0] for case in ODD_FIELDS])
def test_odd_types_in_known_fields_read_as_absent(case, path, value, reader, tmp_path):
    source = _odd_session(path, value, tmp_path)
    result = run_cli(*READERS[reader], source)
    assert_clean(result, STATUS.get(reader, {0}))


# --- nesting ------------------------------------------------------------------------------------


def _deep_everywhere(depth: int) -> bytes:
    """The session with an unknown field nested `depth` levels deep (the line itself one more) on every line."""
    nested = b"[" * depth + b"]" * depth
    return b"".join(line[:-1] + b',"x":' + nested + b"}\n" for line in session().to_bytes().splitlines())


@pytest.mark.parametrize("reader", sorted(READERS))
def test_nesting_1000_deep_in_an_unknown_field_passes_through(reader, tmp_path):
    data = _deep_everywhere(1000)
    path = tmp_path / "deep.jsonl"
    path.write_bytes(data)
    result = run_cli(*READERS[reader], path)
    assert_clean(result, STATUS.get(reader, {0}))
    if reader in ("microcompact", "collapse", "snip", "summarize", "restore", "compact", "convert"):
        before = data.splitlines()
        after = result.stdout.splitlines()
        assert set(before) & set(after), "no line came through byte for byte"
        for line in after:
            if line not in before and b'"x":' in line:
                # A rewritten line keeps the deep value exactly (the standard library writes what orjson will not).
                assert b'"x":' + b"[" * 1000 + b"]" * 1000 in line


def test_microcompact_rewrites_a_deep_line_and_keeps_everything_else(tmp_path):
    data = _deep_everywhere(1000)
    path = tmp_path / "deep.jsonl"
    path.write_bytes(data)
    result = run_cli("microcompact", "--force", "--keep-recent", "1", "--no-marker", "--now", NOW, path)
    assert_clean(result)
    before, after = data.splitlines(), result.stdout.splitlines()
    assert len(before) == len(after)
    changed = [n for n, (old, new) in enumerate(zip(before, after)) if old != new]
    assert changed, "microcompact cleared nothing"
    for n in changed:
        assert b"[Old tool result content cleared]" in after[n]
        assert after[n].endswith(b'"x":' + b"[" * 1000 + b"]" * 1000 + b"}")


@pytest.mark.parametrize("depth", [1024, 10_000, 100_000])
@pytest.mark.parametrize("reader", ["convert", "count", "warn", "microcompact", "compact", "api-edits"])
def test_a_line_nested_deeper_than_1024_levels_is_a_bad_line(reader, depth, tmp_path):
    lines = session().to_bytes().splitlines()
    bad = len(lines) - 3
    lines[bad] = lines[bad][:-1] + b',"x":' + b"[" * depth + b"]" * depth + b"}"
    path = write(tmp_path, lines)
    result = run_cli(*READERS[reader], path)
    err = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in err, err
    assert err == f"{ERROR}{path}:{bad + 1}: a JSON value nested deeper than 1024 levels (the most a line may hold)\n"
    skipped = run_cli(*READERS[reader], "--on-error", "skip", path)
    assert "skipped 1 bad line" in assert_clean(skipped)


def test_validate_lists_a_too_deep_line_as_a_bad_line(tmp_path):
    lines = session().to_bytes().splitlines()
    lines[2] = lines[2][:-1] + b',"x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    result = run_cli("validate", write(tmp_path, lines))
    assert_clean(result, {1})
    [report] = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(f["code"], f["line"]) for f in report["findings"] if f["severity"] == "error"] == [("bad-line", 3)]


# --- a bad file in a batch ----------------------------------------------------------------------


def _job(item: tuple[str, int]) -> int:
    """A per-file job that meets a bug on one file and bad input on another."""
    path, size = item
    if path.endswith("bad.jsonl"):
        raise ValueError("a bug met on this file")
    if path.endswith("input.jsonl"):
        raise InputError(path, 3, "bad input")
    return size


def test_a_file_that_breaks_a_job_is_one_error_row_naming_it(nothing_frozen: None) -> None:
    items = [("a.jsonl", 1), ("bad.jsonl", 2), ("input.jsonl", 3), ("c.jsonl", 4)]
    for jobs, total in ((1, 0), (2, PARALLEL_MIN_BYTES)):  # in this process, and in worker processes
        results = run_all(_job, items, Runner(jobs), [total])
        assert [ok for ok, _ in results] == [True, False, False, True]
        assert results[0][1] == 1 and results[3][1] == 4
        internal = results[1][1]
        assert isinstance(internal, InternalError)
        assert str(internal) == "bad.jsonl: internal error (ValueError: a bug met on this file); this is a bug in ctxpipe, please report it with the file"
        assert str(results[2][1]) == "input.jsonl:3: bad input"
        # The heap frozen for the forked workers is unfrozen after: a library caller's objects stay collectable.
        assert gc.get_freeze_count() == 0


def test_count_of_a_folder_with_a_hostile_file_counts_the_others(tmp_path):
    folder = tmp_path / "projects"
    folder.mkdir()
    good = session().write(folder / "good.jsonl")
    lines = session().to_bytes().splitlines()
    lines[3] = lines[3][:-1] + b',"x":' + b"[" * 2000 + b"]" * 2000 + b"}"
    hostile = write(folder, lines, "hostile.jsonl")
    odd = _odd_session(("message", "usage", "output_tokens"), "NaN", folder)
    result = run_cli("count", "--json", folder)
    err = assert_clean(result, {1})
    assert err.splitlines()[0] == f"{ERROR}{hostile}:4: a JSON value nested deeper than 1024 levels (the most a line may hold)"
    rows = {row.get("file"): row for row in map(json.loads, result.stdout.splitlines())}
    assert str(good) in rows and str(odd) in rows
    assert rows[str(hostile)] == {"file": str(hostile), "error": "line 4: a JSON value nested deeper than 1024 levels (the most a line may hold)"}
    assert rows[str(good)]["tokens"] > 0


def test_a_nul_byte_in_a_read_path_does_not_stop_a_batch(tmp_path):
    project = tmp_path / "app"
    project.mkdir()
    (project / "config.py").write_text("WORKERS = 4\n")
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        s = Session()
        s.user("Read the config.")
        first, second = s.tool_id(), s.tool_id()
        s.response([{"type": "tool_use", "id": first, "name": "Read", "input": {"file_path": f"{project}/con\u0000fig.py"}}], usage(9_000))
        s.tool_result(first, "WORKERS = 4\n" * 200)
        s.response([{"type": "tool_use", "id": second, "name": "Read", "input": {"file_path": f"{project}/config.py"}}], usage(12_000))
        s.tool_result(second, "WORKERS = 4\n" * 200)
        s.text("Read it.", usage(12_500))
        for line in s.lines:
            line["cwd"] = str(project)
        s.write(folder / name)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert b"\\u0000" in before["a.jsonl"]
    result = run_cli("compact", "--in-place", "--force", "--engine", "offline", "--keep-last", "1", "--source", "disk", "--root", project, "--now", NOW, folder)
    assert_clean(result)
    for name in ("a.jsonl", "b.jsonl"):
        after = (folder / name).read_bytes()
        assert after != before[name] and b"compact_boundary" in after
    restored = run_cli("restore", "--source", "disk", "--root", project, "--now", NOW, folder / "a.jsonl")
    assert_clean(restored)


def test_a_damaged_ledger_record_is_an_error_not_a_traceback(tmp_path):
    import hashlib

    path = session().write(tmp_path / "s.jsonl")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    ledger = tmp_path / "ledger.jsonl"
    for record in ({"prefix_bytes": "x", "recipe": []}, {"prefix_bytes": 0, "recipe": [{"b64": 5}]}, {"recipe": [[0, "a"]]}, {}):
        ledger.write_text(json.dumps({"ctxpipe_ledger": 1, "stage": "microcompact", "output_sha256": digest, **record}) + "\n")
        result = run_cli("expand", "--ledger", ledger, path)
        assert result.returncode == 1 and result.stdout == b""
        assert result.stderr.decode() == f"{ERROR}the ledger's microcompact record is damaged: it cannot rebuild its input\n"


def test_a_ledger_copying_the_output_again_and_again_is_refused_before_anything_is_built(tmp_path):
    """Issue 22, case 4: a 2.7 MB tampered ledger made expand build 4.3 GB before it checked the digest.
    A recipe copies each output line at most once; one that copies more is damaged, and said so."""
    import hashlib

    path = session().write(tmp_path / "s.jsonl")
    data = path.read_bytes()
    lines = data.count(b"\n")
    ledger = tmp_path / "ledger.jsonl"
    for recipe in ([[0, lines]] * 2000, [[0, lines + 1]], [[-1, 2]], [[3, 2]]):
        record = {"ctxpipe_ledger": 1, "stage": "collapse", "output_sha256": hashlib.sha256(data).hexdigest(), "input_sha256": "0" * 64, "prefix_bytes": 0}
        ledger.write_text(json.dumps({**record, "recipe": recipe}) + "\n")
        result = run_cli("expand", "--ledger", ledger, path)
        assert result.returncode == 1 and result.stdout == b""
        assert result.stderr.decode() == f"{ERROR}the ledger's collapse record is damaged: it cannot rebuild its input\n"


# --- option values ------------------------------------------------------------------------------

BAD_OPTIONS = [
    (["convert", "--to", "claude-code", "--format", "anthropic", "--start-time", "bogus"], "--start-time"),
    (["count", "--window", "0"], "--window"),
    (["count", "--window", "-5"], "--window"),
    (["warn", "--window", "-5"], "--window"),
    (["api-edits", "--window", "0"], "--window"),
    (["count", "--autocompact-pct", "150"], "--autocompact-pct"),
    (["count", "--autocompact-pct", "0"], "--autocompact-pct"),
    (["warn", "--autocompact-pct", "nan"], "--autocompact-pct"),
    (["count", "--max-output-tokens", "0"], "--max-output-tokens"),
    (["warn", "--blocking-limit", "-1"], "--blocking-limit"),
    (["count", "--top", "-1"], "--top"),
    (["count", "--jobs", "-2"], "--jobs"),
    (["count", "--baseline", "-1"], "--baseline"),
    (["microcompact", "--keep-recent", "-3"], "--keep-recent"),
    (["microcompact", "--gap-minutes", "-5"], "--gap-minutes"),
    (["microcompact", "--now", "bogus"], "--now"),
    (["microcompact", "--cache-aware", "--clear-at-least", "-1"], "--clear-at-least"),
    (["microcompact", "--cache-aware", "--horizon", "0"], "--horizon"),
    (["collapse", "--now", "2026-13-45"], "--now"),
    (["snip", "--keep-last", "0"], "--keep-last"),
    (["summarize", "--keep-min-tokens", "-5"], "--keep-min-tokens"),
    (["summarize", "--keep-max-tokens", "-5"], "--keep-max-tokens"),
    (["summarize", "--keep-fraction", "1.5"], "--keep-fraction"),
    (["summarize", "--engine", "bogus"], "--engine"),
    (["restore", "--source", "bogus"], "--source"),
    (["compact", "--source", "bogus"], "--source"),
    (["compact", "--engine", "bogus"], "--engine"),
    (["compact", "--keep-recent", "-1"], "--keep-recent"),
    (["compact", "--gap-minutes", "-1"], "--gap-minutes"),
    (["compact", "--target-tokens", "-5"], "--target-tokens"),
    (["compact", "--jobs", "-1"], "--jobs"),
    (["compact", "--now", "9999-12-31T23:59:59-05:00"], "--now"),
    (["compact", "--window", "0"], "--window"),
]


@pytest.mark.parametrize("argv, option", BAD_OPTIONS, ids=[" ".join(argv) for argv, _ in BAD_OPTIONS])
def test_a_bad_option_value_is_a_one_line_usage_error(argv, option, tmp_path):
    path = session().write(tmp_path / "s.jsonl")
    result = run_cli(*argv, path)
    err = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, err)
    assert result.stdout == b""
    assert err.startswith(ERROR) and err.count("\n") == 1, err
    assert option in err and f"(see 'ctxpipe {argv[0]} --help')" in err


def test_a_file_an_option_names_is_input(tmp_path):
    # Files are input, whichever flag names them: one that cannot be read, or does not hold what it
    # should, is exit 1 with FILE: what (a usage error is a bad flag or value).
    source = session().write(tmp_path / "s.jsonl")
    prices = tmp_path / "prices.json"
    row = {"input": 3, "cache_write_5m": 3.75, "cache_write_1h": 6, "cache_read": 0.3, "output": 15}
    for table in ({"sonnet": {**row, "input": "free"}}, {"sonnet": {**row, "input": -1}}, {"sonnet": {**row, "output": 1e400}}, [1, 2]):
        prices.write_text(json.dumps(table).replace("Infinity", "1e400"))
        result = run_cli("microcompact", "--cache-aware", "--prices", prices, source)
        assert result.returncode == 1 and result.stdout == b""
        assert result.stderr.decode().startswith(f"{ERROR}{prices}: not a price table"), result.stderr
    for argv in (["microcompact", "--cache-aware", "--prices"], ["summarize", "--engine", "session-memory", "--session-memory"]):
        for missing, what in ((tmp_path / "missing.json", "no such file"), (tmp_path, "is a directory")):
            result = run_cli(*argv, missing, source)
            assert result.returncode == 1 and result.stdout == b""
            assert result.stderr.decode() == f"{ERROR}{missing}: {what}" + (", expected a file" if what == "is a directory" else "") + "\n"


def test_restore_and_compact_accept_the_same_sources():
    for command in ("restore", "compact"):
        text = " ".join(run_cli(command, "--help", env={"COLUMNS": "300"}).stdout.decode().split())
        assert "--source <disk|transcript|auto>" in text, text


# --- compact on its own output ------------------------------------------------------------------

COMPACT_RUNS = [
    ("force", ["--force"]),
    ("force-keep-last", ["--force", "--keep-last", "4"]),
    ("force-keep-one", ["--force", "--keep-last", "1"]),
    ("target-tokens", ["--target-tokens", "1000"]),
    ("keep-fraction-like", ["--force", "--keep-min-tokens", "100", "--keep-min-text-messages", "1"]),
    ("threshold", []),
    ("threshold-low", ["--autocompact-pct", "5"]),  # above the threshold without --force
]
COMPACT_INPUTS = [p for p in sorted((FIXTURES / "claude-code").glob("*.jsonl"))] + [FIXTURES / "anthropic" / "basic.jsonl"]


def _compact(source: Path, target: Path, options: list[str]) -> bytes:
    result = run_cli("compact", "--engine", "offline", "--source", "transcript", "--now", NOW, *options, source)
    assert_clean(result)
    target.write_bytes(result.stdout)
    return result.stdout


@pytest.mark.parametrize("source", COMPACT_INPUTS, ids=[p.name for p in COMPACT_INPUTS])
@pytest.mark.parametrize("run, options", COMPACT_RUNS, ids=[name for name, _ in COMPACT_RUNS])
def test_compact_of_its_own_output_is_byte_identical(run, options, source, tmp_path):
    once = _compact(source, tmp_path / "once.jsonl", options)
    twice = _compact(tmp_path / "once.jsonl", tmp_path / "twice.jsonl", options)
    assert twice == once


def test_compact_of_a_session_made_larger_by_restore_stays_put(tmp_path):
    # The case that grew: the kept tail plus restored files outnumber --keep-last, so a second run
    # used to fold the earlier tail into a second summary (and a third, ...).
    first = _compact(FIXTURES / "claude-code" / "repeats.jsonl", tmp_path / "1.jsonl", ["--force", "--keep-last", "4"])
    assert b"[restored file]" in first and first.count(b'"subtype":"compact_boundary"') == 1
    for number in range(2, 5):
        assert _compact(tmp_path / f"{number - 1}.jsonl", tmp_path / f"{number}.jsonl", ["--force", "--keep-last", "4"]) == first


def test_compact_after_new_turns_summarizes_again(tmp_path):
    once = _compact(FIXTURES / "claude-code" / "repeats.jsonl", tmp_path / "once.jsonl", ["--force", "--keep-last", "4"])
    objs = [json.loads(line) for line in once.splitlines()]
    last = objs[-1]
    follow = Session()
    follow.last = last["uuid"]
    follow.user("Now add a test for WORKERS.")
    follow.text("Added tests/test_workers.py.", usage(12_000))
    follow.user("Run it.")
    follow.text("It passes.", usage(12_400))
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(once + follow.to_bytes())
    result = run_cli("compact", "--engine", "offline", "--source", "transcript", "--now", NOW, "--force", "--keep-last", "2", grown)
    assert_clean(result)
    assert result.stdout.count(b'"subtype":"compact_boundary"') == 2
    assert f"summarize: {grown}: summarized" in result.stderr.decode()


def test_summarize_twice_is_summarize_once(tmp_path):
    source = session().write(tmp_path / "s.jsonl")
    once = run_cli("summarize", "--engine", "offline", "--keep-last", "2", "--now", NOW, source)
    assert_clean(once)
    (tmp_path / "once.jsonl").write_bytes(once.stdout)
    twice = run_cli("summarize", "--engine", "offline", "--keep-last", "2", "--now", NOW, tmp_path / "once.jsonl")
    assert "nothing new since the last summary" in assert_clean(twice)
    assert twice.stdout == once.stdout


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the shared corpus is not beside this checkout ({CORPUS})")
@pytest.mark.parametrize(
    "options",
    [["--force"], ["--force", "--keep-last", "3"], ["--target-tokens", "5000"], ["--autocompact-pct", "5"]],
    ids=["force", "keep-last", "target", "threshold"],
)
def test_compact_is_idempotent_on_the_corpus(options, tmp_path):
    sessions = [f for f in corpus_files() if "agent-acompact-" not in f.name]  # a compaction side-call is refused (test_compaction_files.py)
    for number, source in enumerate(sessions):
        copy = tmp_path / f"{number}.jsonl"
        shutil.copyfile(source, copy)
        once = _compact(copy, tmp_path / f"{number}.once.jsonl", options)
        assert _compact(tmp_path / f"{number}.once.jsonl", tmp_path / f"{number}.twice.jsonl", options) == once, source.name
