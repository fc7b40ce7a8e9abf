"""The format contract, in its two parts: every registered format declares every capability and
implements the reader (core.transcript_format.TranscriptFormat); a writable one implements the
editor (TranscriptEditor) too and a read-only one defines none of its members; and no code outside
formats/ branches on a format's name (it asks a capability)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import orjson
import pytest
from ctxpipe.core.errors import UnsupportedError
from ctxpipe.core.jsonl import Entry
from ctxpipe.core.transcript_format import CAPABILITIES, TranscriptEditor, TranscriptFormat, WritableFormat, editor_of
from ctxpipe.formats import NAMES, REGISTRY, WRITABLE, stage_editor
from ctxpipe.formats import base as formats_base
from ctxpipe.formats.codex import CodexFormat
from helpers import FIXTURES, ROOT, run_cli

FORMATS = [REGISTRY[name] for name in NAMES]
PACKAGE = ROOT  # the repo root is the package
READ_ONLY_REFUSAL = "ctxpipe reads the codex-reader format but does not {} it; convert it first (ctxpipe convert --to, to a format it writes)"


def _protocol_members(protocol: type) -> tuple[set[str], set[str]]:
    """(attributes, methods) a Protocol declares itself, as typing.get_protocol_members (3.13) would."""
    attributes = set(vars(protocol).get("__annotations__", {}))
    methods = {name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")}
    return attributes, methods


READER_ATTRIBUTES, READER_METHODS = _protocol_members(TranscriptFormat)
EDITOR_ATTRIBUTES, EDITOR_METHODS = _protocol_members(TranscriptEditor)


def read_only_format() -> TranscriptFormat:
    """A format ctxpipe only reads (every registered one writes now): Codex's reader without its editor."""
    reader = {name: value for name, value in vars(CodexFormat).items() if name not in EDITOR_METHODS | EDITOR_ATTRIBUTES}
    made: TranscriptFormat = type("CodexReader", CodexFormat.__bases__, {**reader, "name": "codex-reader", "writable": False})()
    return made


def load(path: Path) -> list[Entry]:
    return [Entry(orjson.loads(line), number) for number, line in enumerate(path.read_bytes().splitlines(), 1)]


def _signature_matches(fmt: TranscriptFormat, protocol: type, method: str) -> None:
    implemented = getattr(fmt, method, None)
    assert callable(implemented), f"{fmt.name} lacks {method}()"
    expected = list(inspect.signature(getattr(protocol, method)).parameters)[1:]  # without self
    assert list(inspect.signature(implemented).parameters) == expected, f"{fmt.name}.{method} differs from the contract"


def test_the_contract_is_declared_in_core_and_re_exported() -> None:
    assert (formats_base.TranscriptFormat, formats_base.TranscriptEditor, formats_base.WritableFormat) == (TranscriptFormat, TranscriptEditor, WritableFormat)
    assert set(CAPABILITIES) <= READER_ATTRIBUTES
    assert {"meta_entries", "split_at_compaction", "boundary_metadata", "context_positions"} <= READER_METHODS | EDITOR_METHODS
    # The editor is the writing members the stages and convert --to call, and nothing a reader needs.
    assert EDITOR_METHODS == {"from_messages", "replace_blocks", "compacted", "meta_entries", "marker"}
    assert EDITOR_ATTRIBUTES == {"summary_preamble"}  # how the format's agent opens a summary: a writing matter
    assert not EDITOR_METHODS & READER_METHODS
    # A writable format is both parts and adds nothing of its own.
    assert _protocol_members(WritableFormat) == (set(), set())
    assert TranscriptFormat in WritableFormat.__mro__ and TranscriptEditor in WritableFormat.__mro__


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_declares_every_capability_itself(fmt: TranscriptFormat) -> None:
    own = vars(type(fmt))
    for capability in CAPABILITIES:
        assert capability in own, f"{fmt.name} does not declare {capability}"
        assert isinstance(own[capability], bool), f"{fmt.name}.{capability} is not a bool"


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_implements_the_reader(fmt: TranscriptFormat) -> None:
    for attribute in READER_ATTRIBUTES:
        assert hasattr(fmt, attribute), f"{fmt.name} lacks {attribute}"
    for method in READER_METHODS:
        _signature_matches(fmt, TranscriptFormat, method)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_a_format_implements_the_editor_if_and_only_if_it_is_writable(fmt: TranscriptFormat) -> None:
    if fmt.writable:
        for method in EDITOR_METHODS:
            _signature_matches(fmt, TranscriptEditor, method)
        assert isinstance(fmt.summary_preamble, str) and fmt.summary_preamble.strip()
        assert isinstance(fmt, WritableFormat) and editor_of(fmt) is fmt
    else:
        # No stubs that raise: a read-only format has none of the editor's members, inherited or its own.
        assert [member for member in sorted(EDITOR_METHODS | EDITOR_ATTRIBUTES) if hasattr(fmt, member)] == [], f"{fmt.name} is read only"
        assert not isinstance(fmt, WritableFormat)


def test_writable_lists_the_formats_that_write() -> None:
    assert WRITABLE == tuple(name for name in NAMES if REGISTRY[name].writable)
    assert {"anthropic", "claude-code", "codex"} <= set(WRITABLE)


def test_a_read_only_format_is_refused_its_editor() -> None:
    reader = read_only_format()
    assert not isinstance(reader, WritableFormat)
    with pytest.raises(UnsupportedError) as edit:
        editor_of(reader)
    assert str(edit.value) == READ_ONLY_REFUSAL.format("edit")
    with pytest.raises(UnsupportedError) as write:
        editor_of(reader, "write")
    assert str(write.value) == READ_ONLY_REFUSAL.format("write")
    # A stage is refused in its own words: which formats it edits, and to convert first.
    for stage in ("microcompact", "collapse", "summarize", "restore", "snip", "compact"):
        with pytest.raises(UnsupportedError) as refused:
            stage_editor(reader, "rollout.jsonl", stage)
        assert str(refused.value) == f"rollout.jsonl: {stage} edits codex, claude-code and anthropic transcripts; convert a codex-reader transcript first"
    assert stage_editor(REGISTRY["anthropic"], "messages.jsonl", "snip") is REGISTRY["anthropic"]


def test_the_editor_is_its_members_not_the_flag() -> None:
    """A format that says it is writable but has no editor is refused: editor_of looks at the members."""
    claims = type("ClaimsToWrite", (type(read_only_format()),), {"writable": True})()
    with pytest.raises(UnsupportedError, match="does not edit it"):
        editor_of(claims)


def test_every_command_edits_a_rollout() -> None:
    """Codex rollouts are written now: each stage on one writes a rollout (tests/test_codex_write.py holds what it writes)."""
    rollout = FIXTURES / "codex" / "rollout.jsonl"
    for stage in ("microcompact", "collapse", "summarize", "restore", "compact"):
        edited = run_cli(stage, rollout, stdin=None)
        assert edited.returncode == 0 and edited.stdout.startswith(b'{"timestamp"'), edited.stderr
        assert b"convert a codex transcript first" not in edited.stderr


def test_claude_code_splits_at_its_last_boundary() -> None:
    claude = REGISTRY["claude-code"]
    entries = load(FIXTURES / "claude-code" / "compacted.jsonl")
    split = claude.split_at_compaction(entries)
    assert split is not None
    history, context = split
    assert history and all(max(m.entries) < 4 for m in history)  # line 5 (position 4) is the compact_boundary
    assert context == claude.messages(entries)
    assert claude.boundary_metadata(entries[4].obj) == {"trigger": "auto", "preTokens": 167512}
    assert claude.boundary_metadata(entries[0].obj) is None
    assert claude.split_at_compaction(load(FIXTURES / "claude-code" / "basic.jsonl")) is None


@pytest.mark.parametrize("name", ["anthropic", "codex"])
def test_formats_without_a_boundary_line_split_nothing(name: str) -> None:
    fmt = REGISTRY[name]
    entries = load(FIXTURES / name / ("rollout.jsonl" if name == "codex" else "basic.jsonl"))
    assert fmt.split_at_compaction(entries) is None
    assert all(fmt.boundary_metadata(entry.obj) is None for entry in entries)


def test_codex_splits_at_its_last_compacted_line() -> None:
    codex = REGISTRY["codex"]
    entries = load(FIXTURES / "codex" / "compacted.jsonl")
    place = next(p for p, entry in enumerate(entries) if entry.obj["type"] == "compacted")
    split = codex.split_at_compaction(entries)
    assert split is not None
    history, context = split
    assert history and all(max(m.entries) < place for m in history)
    assert context == codex.messages(entries) and context[0].compact_summary  # the summary opens the context


def test_codex_context_starts_at_its_last_compacted_line() -> None:
    codex = REGISTRY["codex"]
    entries = load(FIXTURES / "codex" / "rollout.jsonl")
    assert codex.context_positions(entries) == list(range(len(entries)))
    compacted = Entry({"timestamp": "2026-02-10T09:00:00Z", "type": "compacted", "payload": {"message": "earlier work, summarized"}}, len(entries) + 1)
    later = entries + [compacted, entries[4]]
    # A line holding only its summary keeps, as Codex rebuilds it, the user messages typed before it.
    typed = [
        p
        for p, e in enumerate(entries)
        if e.obj["type"] == "response_item" and e.obj["payload"].get("role") == "user" and "<environment_context>" not in str(e.obj)
    ]
    assert typed == [4]
    assert codex.context_positions(later) == [4, len(entries), len(entries) + 1]
    assert sorted(m.entries[0] for m in codex.messages(later)) == codex.context_positions(later)


def test_convert_offers_only_the_formats_it_writes() -> None:
    refused = run_cli("convert", "--to", "gemini", stdin=(FIXTURES / "anthropic" / "basic.jsonl").read_bytes())
    assert refused.returncode == 2 and b"codex" in refused.stderr, refused.stderr
    written = run_cli("convert", "--to", "codex", stdin=(FIXTURES / "anthropic" / "basic.jsonl").read_bytes())
    assert written.returncode == 0 and b'"type":"session_meta"' in written.stdout.split(b"\n", 1)[0], written.stderr
    rebuilt = run_cli("convert", "--to", "claude-code", "--repair", FIXTURES / "claude-code" / "basic.jsonl", stdin=None)
    assert rebuilt.returncode == 2 and b"use them with --to anthropic" in rebuilt.stderr, rebuilt.stderr


def _name_comparisons(path: Path, root: Path = PACKAGE) -> list[str]:
    """Comparisons against a registered format's name (`x.name == "codex"`, `name in ("codex",)`)."""

    def names_in(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and node.value in REGISTRY:
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [n for element in node.elts for n in names_in(element)]
        return []

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            named = [n for side in (node.left, *node.comparators) for n in names_in(side)]
            if named:
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} compares with {named}")
    return found


def _package_modules() -> list[Path]:
    skipped = ("formats", "tests", "bench", ".ci", "build", "dist")  # build/: what pip install . leaves
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in skipped and ".egg-info" not in str(p))


def test_no_module_outside_formats_compares_a_format_name() -> None:
    found = {}
    for path in _package_modules():
        hits = _name_comparisons(path)
        if hits:
            found[path.relative_to(PACKAGE).as_posix()] = hits
    assert not found, f"ask a capability ({', '.join(CAPABILITIES)}) instead: {found}"


def test_the_name_check_finds_a_comparison(tmp_path: Path) -> None:
    """The AST scan is not vacuous: it sees both spellings of a name branch."""
    module = tmp_path / "probe.py"
    module.write_text('def f(fmt):\n    return fmt.name == "codex" or fmt.name in ("anthropic",) or fmt is other\n', encoding="utf-8")
    assert len(_name_comparisons(module, tmp_path)) == 2


def _table_rows(text: str, first_cell: str) -> dict[str, list[str]]:
    """The rows of the Markdown table whose header starts with `first_cell`: name -> its other cells."""
    lines = text.splitlines()
    start = next(number for number, line in enumerate(lines) if line.startswith(f"| {first_cell} |"))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


@pytest.mark.parametrize("document", ["README.md", "docs/formats.md"])
def test_the_formats_table_is_the_registry(document: str) -> None:
    """Every registered format is a row, read yes, written as `writable` says (issue 28: the table is true)."""
    rows = _table_rows((ROOT / document).read_text(), "name")
    assert sorted(rows) == sorted(NAMES)
    for name, cells in rows.items():
        assert cells[-2:] == ["yes", "yes" if REGISTRY[name].writable else "no"], (document, name)


def test_the_capability_table_is_what_each_format_declares() -> None:
    text = (ROOT / "docs" / "formats.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| capability |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")][2:]
    assert sorted(columns) == sorted(NAMES)
    rows = _table_rows(text, "capability")
    assert set(CAPABILITIES) | {"compacts_at"} == set(rows)
    for capability, cells in rows.items():
        for name, cell in zip(columns, cells[1:], strict=True):
            value = getattr(REGISTRY[name], capability)
            expected = ("yes" if value else "no") if isinstance(value, bool) else "none" if value is None else f"{value:g}"
            assert cell == expected, (capability, name)
