"""The format contract: every registered format declares every capability and implements every
member of core.transcript_format.TranscriptFormat, and no code outside formats/ branches on a
format's name (it asks a capability)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import orjson
import pytest
from ctxpipe.core.errors import UnsupportedError
from ctxpipe.core.jsonl import Entry
from ctxpipe.core.transcript_format import CAPABILITIES, TranscriptFormat, WriteOptions
from ctxpipe.formats import NAMES, REGISTRY, WRITABLE
from ctxpipe.formats.base import TranscriptFormat as ReExported
from helpers import FIXTURES, ROOT, run_cli

FORMATS = [REGISTRY[name] for name in NAMES]
PACKAGE = ROOT  # the repo root is the package


def _protocol_members() -> tuple[set[str], set[str]]:
    """(attributes, methods) the Protocol declares, as typing.get_protocol_members (3.13) would."""
    attributes = set(TranscriptFormat.__annotations__)
    methods = {name for name, value in vars(TranscriptFormat).items() if callable(value) and not name.startswith("_")}
    return attributes, methods


def load(path: Path) -> list[Entry]:
    return [Entry(orjson.loads(line), number) for number, line in enumerate(path.read_bytes().splitlines(), 1)]


def test_the_contract_is_declared_in_core_and_re_exported() -> None:
    assert ReExported is TranscriptFormat
    attributes, methods = _protocol_members()
    assert set(CAPABILITIES) <= attributes
    assert {"meta_entries", "split_at_compaction", "boundary_metadata", "context_positions"} <= methods


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_declares_every_capability_itself(fmt: TranscriptFormat) -> None:
    own = vars(type(fmt))
    for capability in CAPABILITIES:
        assert capability in own, f"{fmt.name} does not declare {capability}"
        assert isinstance(own[capability], bool), f"{fmt.name}.{capability} is not a bool"


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_implements_every_protocol_member(fmt: TranscriptFormat) -> None:
    attributes, methods = _protocol_members()
    for attribute in attributes:
        assert hasattr(fmt, attribute), f"{fmt.name} lacks {attribute}"
    for method in methods:
        implemented = getattr(fmt, method, None)
        assert callable(implemented), f"{fmt.name} lacks {method}()"
        expected = list(inspect.signature(getattr(TranscriptFormat, method)).parameters)[1:]  # without self
        assert list(inspect.signature(implemented).parameters) == expected, f"{fmt.name}.{method} differs from the contract"


def test_writable_lists_the_formats_that_write() -> None:
    assert WRITABLE == tuple(name for name in NAMES if REGISTRY[name].writable)
    assert "codex" not in WRITABLE and {"anthropic", "claude-code"} <= set(WRITABLE)


def test_a_read_only_format_refuses_every_write() -> None:
    codex = REGISTRY["codex"]
    entries = load(FIXTURES / "codex" / "rollout.jsonl")
    writes = [
        lambda: codex.from_messages([{"role": "user", "content": "hi"}], WriteOptions()),
        lambda: codex.replace_blocks(entries[0], {}),
        lambda: codex.compacted(entries, [], "summary", {}, "2026-01-01T00:00:00Z"),
        lambda: codex.meta_entries(entries, ["text"], "2026-01-01T00:00:00Z"),
        lambda: codex.marker(entries, "x", "y", "z", {}, "2026-01-01T00:00:00Z"),
    ]
    for write in writes:
        with pytest.raises(UnsupportedError, match="reads the codex format"):
            write()


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
    entries = load(next((FIXTURES / name).glob("*.jsonl")))
    assert fmt.split_at_compaction(entries) is None
    assert all(fmt.boundary_metadata(entry.obj) is None for entry in entries)


def test_codex_context_starts_at_its_last_compacted_line() -> None:
    codex = REGISTRY["codex"]
    entries = load(FIXTURES / "codex" / "rollout.jsonl")
    assert codex.context_positions(entries) == list(range(len(entries)))
    compacted = Entry({"timestamp": "2026-02-10T09:00:00Z", "type": "compacted", "payload": {"message": "earlier work, summarized"}}, len(entries) + 1)
    later = entries + [compacted, entries[4]]
    assert codex.context_positions(later) == [len(entries), len(entries) + 1]
    assert [m.entries[0] for m in codex.messages(later)] == codex.context_positions(later)


def test_convert_offers_only_the_formats_it_writes() -> None:
    refused = run_cli("convert", "--to", "codex", stdin=(FIXTURES / "anthropic" / "basic.jsonl").read_bytes())
    assert refused.returncode == 2, refused.stderr
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
