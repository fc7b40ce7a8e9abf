"""The library returns what the commands print: the same bytes and the same report objects."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import ctxpipe
import pytest
from ctxpipe.core.microcompact import MicrocompactSettings
from ctxpipe.core.restore import RestoreSettings
from ctxpipe.core.snip import SnipSettings
from ctxpipe.core.summarize import SummarizeSettings
from ctxpipe.jobs.pipeline import CompactOptions
from helpers import FIXTURES, ok, run_cli

NOW = "2026-05-01T00:00:00Z"
MOMENT = datetime(2026, 5, 1, tzinfo=timezone.utc)
REPEATS = FIXTURES / "claude-code" / "repeats.jsonl"


@pytest.mark.parametrize("name", ["basic.jsonl", "repeats.jsonl", "compacted.jsonl"])
def test_count_transcript_is_count_json(name: str) -> None:
    path = FIXTURES / "claude-code" / name
    assert ctxpipe.count_transcript(path).to_wire() == json.loads(ok(run_cli("count", "--json", path)).stdout)
    assert ctxpipe.count_transcript(path.read_bytes()).tokens == ctxpipe.count_transcript(path).tokens


@pytest.mark.parametrize(
    ("name", "settings", "flags"),
    [
        ("microcompact", MicrocompactSettings(force=True, keep_recent=1), ["--force", "--keep-recent", "1"]),
        ("collapse", None, []),
        ("snip", SnipSettings(keep_last=2), ["--keep-last", "2"]),
        ("summarize", SummarizeSettings("offline", keep_last=2), ["--engine", "offline", "--keep-last", "2"]),
    ],
)
def test_run_stage_is_the_stage_command(tmp_path: Path, name: str, settings: object, flags: list[str]) -> None:
    report_file = tmp_path / "report.json"
    printed = ok(run_cli(name, *flags, "--now", NOW, "--report-json", report_file, REPEATS))
    output, report = ctxpipe.run_stage(name, REPEATS, settings, now=MOMENT)
    assert output == printed.stdout
    assert report.to_wire() == {**json.loads(report_file.read_bytes()), "file": str(REPEATS)}
    assert report.tokens_after == ctxpipe.count_transcript(output).tokens  # what it says it freed is what count finds


def test_run_stage_refuses_settings_that_do_not_go_together() -> None:
    from ctxpipe.core.errors import SettingsError

    with pytest.raises(SettingsError, match="exactly one"):
        ctxpipe.run_stage("snip", REPEATS, SnipSettings())


def test_compact_is_the_compact_command(tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    flags = ["--force", "--engine", "offline", "--keep-last", "3", "--source", "transcript", "--now", NOW]
    printed = ok(run_cli("compact", *flags, "--report-json", report_file, REPEATS))
    settings = {
        "microcompact": MicrocompactSettings(force=True),
        "summarize": SummarizeSettings("offline", keep_last=3),
        "restore": RestoreSettings(source="transcript"),
    }
    output, report = ctxpipe.compact(REPEATS, CompactOptions(settings, force_summary=True, now=MOMENT))
    assert output == printed.stdout
    assert report.to_wire() == {**json.loads(report_file.read_bytes()), "file": str(REPEATS)}
    assert [stage.stage for stage in report.stages] == ["microcompact", "collapse", "summarize", "restore"]


def test_compact_hands_its_force_and_model_to_the_stages_as_the_command_does(tmp_path: Path) -> None:
    """CompactOptions(force_summary=True) forces microcompact too, as `compact --force` does."""
    flags = ["--force", "--engine", "offline", "--source", "transcript", "--now", "2026-04-02T09:05:00Z"]
    printed = ok(run_cli("compact", *flags, REPEATS))
    settings = {"summarize": SummarizeSettings("offline"), "restore": RestoreSettings(source="transcript")}
    output, report = ctxpipe.compact(REPEATS, CompactOptions(settings, force_summary=True, now=datetime(2026, 4, 2, 9, 5, tzinfo=timezone.utc)))
    assert output == printed.stdout
    assert report.stages[0].stage == "microcompact" and report.stages[0].changed


def test_compact_refuses_a_compaction_side_call(tmp_path: Path) -> None:
    from ctxpipe.core.errors import UnsupportedError

    side_call = tmp_path / "agent-acompact-0a1b2c.jsonl"
    side_call.write_bytes(REPEATS.read_bytes())
    with pytest.raises(UnsupportedError, match="compaction side-call"):
        ctxpipe.compact(side_call)


def test_run_stage_names_the_settings_it_takes() -> None:
    with pytest.raises(TypeError, match="MicrocompactSettings"):
        ctxpipe.run_stage("microcompact", REPEATS, SnipSettings(keep_last=2))


def test_a_lazy_pattern_copies_and_pickles_as_a_pattern() -> None:
    import copy
    import pickle
    import re

    from ctxpipe.core.patterns import pattern

    lazy = pattern(r"a+b", re.I)
    assert lazy.search("xAAb") is not None
    assert pickle.loads(pickle.dumps(lazy)).pattern == "a+b" and copy.deepcopy(lazy).search("ab") is not None


# --- docs/library.md's example runs as written ------------------------------------------------------


def _python_block(page: str) -> str:
    """The first python block of a page of the repository (README.md, docs/library.md)."""
    text = (Path(__file__).resolve().parent.parent / page).read_text(encoding="utf-8")
    return text[text.index("```python\n") + len("```python\n") : text.index("\n```\n", text.index("```python\n"))]


def _claimed(source_line: str) -> tuple[bool, object]:
    """The value an example line's comment claims, when it starts with a Python literal
    (`x  # 967000: why` claims 967000; `x  # 'normal' | 'warning'` claims nothing)."""
    import ast

    if "  # " not in source_line:
        return False, None
    comment = source_line.split("  # ", 1)[1]
    for end in sorted({len(comment), *(i for i, c in enumerate(comment) if c in ":(" and i)}, reverse=True):
        try:
            return True, ast.literal_eval(comment[:end].strip())
        except (ValueError, SyntaxError):
            continue
    return False, None


@pytest.mark.parametrize(("page", "least_claims"), [("docs/library.md", 7), ("README.md", 2)])
def test_the_library_examples_run_and_say_true(page: str, least_claims: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ast
    import shutil

    (tmp_path / "session.jsonl").write_bytes(REPEATS.read_bytes())
    projects = tmp_path / "projects" / "-home-me-app"
    projects.mkdir(parents=True)
    for name in ("basic.jsonl", "repeats.jsonl", "parallel.jsonl"):
        shutil.copy(FIXTURES / "claude-code" / name, projects / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    block = _python_block(page)
    lines = block.splitlines()
    namespace: dict[str, object] = {}
    checked = 0
    for statement in ast.parse(block).body:
        code = compile(ast.Module([statement], []), page, "exec")
        if isinstance(statement, ast.Expr) and statement.lineno == statement.end_lineno:
            claims, value = _claimed(lines[statement.lineno - 1])
            if claims:
                found = eval(compile(ast.Expression(statement.value), page, "eval"), namespace)
                assert found == value, f"{page} line {lines[statement.lineno - 1]!r} gives {found!r}"
                checked += 1
                continue
        exec(code, namespace)
    assert checked >= least_claims  # the claims the block makes are checked, not only run
    assert (tmp_path / "out" / "session.jsonl").is_file()
    if page == "docs/library.md":
        assert (tmp_path / "messages.jsonl").is_file()
        assert sorted(path.name for path in (tmp_path / "compacted").rglob("*.jsonl")) == ["basic.jsonl", "parallel.jsonl", "repeats.jsonl"]
