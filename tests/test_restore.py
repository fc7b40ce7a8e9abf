"""`restore`: the file-state rebuild, the selection and its budgets, the entries written, where content
comes from (disk under the root only, or the transcript), `--plan`, `--from`, pass-through and
idempotence.

Sessions are built with tests/project_sessions.py (Read/Edit/Write/TodoWrite/ExitPlanMode/Skill as
Claude Code 2.1.x writes them); the disk tests lay out a real project folder in tmp_path whose path
is the transcript's cwd, and they run restore from it (the default root is the current directory,
and only for a transcript whose cwd is in it). The selection rules follow context-management.md section 7
(createPostCompactFileAttachments, FileStateCache).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import ctxpipe
import orjson
import pytest
from ctxpipe.core import restore as core
from ctxpipe.core.jsonl import iter_entries
from ctxpipe.core.placeholders import PLACEHOLDER, STUB_PREFIX
from ctxpipe.core.restore import RestoreSettings, file_states
from ctxpipe.core.stage import line_bytes
from ctxpipe.formats import get
from ctxpipe.jobs.ports import DISK
from helpers import ROOT, run_cli
from project_sessions import NOW_ISO, Project, write_files
from stage_checks import findings, tool_problems

CC = get("claude-code")
HEADER = re.compile(
    r"^\[restored file\] (?P<name>\S+) \(lines (?P<first>\d+)-(?P<last>\d+),(?P<partial> partial view,)? (?P<tokens>[\d,]+) tokens, (?P<origin>[^)]+)\)$"
)
REFERENCE = re.compile(r"^\[restored file reference\] (?P<name>\S+) \((?P<tokens>[\d,]+) tokens, over the (per-file|total) budget; use Read\)$")


# --- helpers ------------------------------------------------------------------------------------


def entries_of(data: bytes) -> list[Any]:
    return list(iter_entries(io.BytesIO(data), "x"))


def states_of(p: Project) -> dict[str, core.FileState]:
    entries = entries_of(p.to_bytes())
    return file_states([(CC.messages(entries), entries)], p.cwd)


def run(data: bytes, settings: RestoreSettings = RestoreSettings(source="transcript")) -> tuple[bytes, Any, list[core.Candidate]]:
    """What `ctxpipe restore` writes for `data`, in-process."""
    entries = entries_of(data)
    outcome, candidates = core.restore(entries, CC, settings, "2026-05-01T00:00:00.000Z", workspace=DISK)
    return b"".join(line_bytes(outcome.entries)), outcome, candidates


def added_objects(before: bytes, after: bytes) -> list[dict[str, Any]]:
    assert after.startswith(before), "every line of the input is kept, byte for byte"
    return [orjson.loads(line) for line in after[len(before) :].splitlines()]


def texts(objs: list[dict[str, Any]]) -> list[str]:
    return [obj["message"]["content"] for obj in objs]


def files_chosen(candidates: list[core.Candidate]) -> list[str]:
    return [c.name for c in candidates if c.kind == "file" and c.chosen]


def text_of_tokens(tokens: int, tag: str = "x") -> str:
    """Text of exactly 4*tokens characters in lines of 79 (so the rough count is exactly `tokens`)."""
    line = (f"# {tag} " + "y" * 79)[:79]
    text = "\n".join([line] * (4 * tokens // 80 + 1))
    return text[: 4 * tokens]


def plan_rows(result: Any) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr.decode()
    return [json.loads(line) for line in result.stdout.splitlines()]


def restore_cli(path: Path, *args: str, cwd: Path = ROOT) -> Any:
    return run_cli("restore", "--now", NOW_ISO, *args, path, cwd=cwd)


# --- the file-state rebuild ----------------------------------------------------------------------


def test_read_stores_the_structured_file_content_not_the_numbered_text() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("src/app.py", "import os\n\ndef main():\n    pass")
    p.say("ok")
    state = states_of(p)["/w/proj/src/app.py"]
    assert state.content == "import os\n\ndef main():\n    pass"
    assert (state.partial, state.offset, state.limit, state.action) == (False, None, None, "read")
    assert state.timestamp == p.lines[-2]["timestamp"]  # the result's time


def test_read_without_structured_result_uses_the_cat_n_text_tab_form() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("a.py", "one\n\tindented\nthree", structured=False, arrow=False)
    p.say("ok")
    assert states_of(p)["/w/proj/a.py"].content == "one\n\tindented\nthree"


def test_read_without_structured_result_uses_the_cat_n_text_arrow_form() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("b.py", "one\ntwo\nthree", structured=False, arrow=True, reminder=True)
    p.say("ok")
    assert states_of(p)["/w/proj/b.py"].content == "one\ntwo\nthree"


def test_offset_and_limit_make_a_partial_view() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("d.py", "l1\nl2\nl3\nl4\nl5", offset=2, limit=2)
    p.read("e.py", "e1\ne2\ne3", limit=2)
    p.say("ok")
    d, e = states_of(p)["/w/proj/d.py"], states_of(p)["/w/proj/e.py"]
    assert (d.content, d.offset, d.limit, d.partial) == ("l2\nl3", 2, 2, True)
    assert (e.content, e.offset, e.limit, e.partial) == ("e1\ne2", None, 2, True)


def test_edits_are_replayed_on_known_content() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("f.py", "alpha beta alpha")
    p.edit("f.py", "alpha", "ALPHA")  # the first occurrence only
    p.read("g.py", "x = 1\nx = 1\n")
    p.edit("g.py", "x = 1", "x = 2", replace_all=True)
    p.read("h.py", "a b c")
    p.multi_edit("h.py", [("a", "A"), ("A b", "AB")])  # applied in order: the second sees the first
    p.say("ok")
    states = states_of(p)
    assert states["/w/proj/f.py"].content == "ALPHA beta alpha"
    assert states["/w/proj/f.py"].action == "edited" and states["/w/proj/f.py"].partial is False
    assert states["/w/proj/g.py"].content == "x = 2\nx = 2\n"
    assert states["/w/proj/h.py"].content == "AB c"
    assert states["/w/proj/f.py"].timestamp == p.lines[4]["timestamp"] > p.lines[2]["timestamp"]  # the edit's time, not the read's


def test_an_edit_that_cannot_be_replayed_leaves_no_content() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.edit("never_read.py", "a", "b")
    p.read("k.py", "k = 1")
    p.edit("k.py", "not in the file", "zzz")
    p.read("m.py", "a b")
    p.multi_edit("m.py", [("a", "A"), ("missing", "x")])
    p.say("ok")
    states = states_of(p)
    for name in ("never_read.py", "k.py", "m.py"):
        assert states[f"/w/proj/{name}"].content is None, name
        assert states[f"/w/proj/{name}"].action == "edited"


def test_write_stores_its_content_and_later_edits_apply_to_it() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("w.py", "old text")
    p.write("w.py", "def f():\n    return 1\n")
    p.write("n.py", "brand new")
    p.edit("n.py", "brand", "fresh")
    p.say("ok")
    states = states_of(p)
    assert (states["/w/proj/w.py"].content, states["/w/proj/w.py"].action) == ("def f():\n    return 1\n", "written")
    assert states["/w/proj/n.py"].content == "fresh new"


def test_the_unchanged_stub_never_counts_as_content() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("i.py", "the real content")
    read_time = p.lines[-1]["timestamp"]
    p.unchanged("i.py")
    p.unchanged("only_stub.py")
    p.say("ok")
    states = states_of(p)
    assert states["/w/proj/i.py"].content == "the real content"
    assert states["/w/proj/i.py"].timestamp == read_time
    assert "File unchanged" not in (states.get("/w/proj/only_stub.py") and states["/w/proj/only_stub.py"].content or "")


def cleared(p: Project, text: str) -> None:
    """The last tool result's content replaced by `text`, as microcompact or collapse leave it."""
    p.lines[-1]["message"]["content"][0]["content"] = text


@pytest.mark.parametrize("placeholder", [PLACEHOLDER, STUB_PREFIX + " the same output appears again later]"])
def test_a_read_cleared_since_is_no_content_seen(placeholder: str) -> None:
    # Without a structured result (a subagent's file, an anthropic-format file) the tool result's
    # text is the only copy of the file: once a stage replaced it, it shows no content.
    p = Project("/w/proj")
    p.ask("go")
    p.read("kept.py", "the real content", structured=False)
    p.read("kept.py", "the real content", structured=False)
    cleared(p, placeholder)
    p.read("only.py", "gone", structured=False)
    cleared(p, placeholder)
    p.say("ok")
    states = states_of(p)
    assert states["/w/proj/kept.py"].content == "the real content"
    assert "/w/proj/only.py" not in states
    data = with_boundary(p)
    out, _, candidates = run(data)
    assert files_chosen(candidates) == ["kept.py"]
    assert not any(placeholder[:10] in t for t in texts(added_objects(data, out)))


def test_compact_restores_the_files_its_own_microcompact_cleared() -> None:
    # In compact, microcompact clears the old reads before the summary; restore still brings the files
    # back as the session read them (Claude Code's file cache is not cleared with the results).
    p = Project("/w/proj")
    p.ask("go")
    for n in range(5):
        p.read(f"m{n}.py", f"# module {n}\n" + "x = 1\n" * 200, structured=False)
    for n in range(6):  # the five most recent results microcompact keeps: every read is cleared
        p.call("Bash", {"command": f"pytest -k case{n}"}, f"case{n}: ok\n" * 100)
    p.say("Read them all.")
    p.ask("Now summarise.")
    p.say("Done.")
    result = run_cli("compact", "--force", "--engine", "offline", "--keep-last", "2", "--source", "transcript", "--now", NOW_ISO, "-", stdin=p.to_bytes())
    assert result.returncode == 0, result.stderr.decode()
    assert b"microcompact: cleared 6 tool results" in result.stderr, "the reads were cleared first"
    written = [orjson.loads(line) for line in result.stdout.splitlines()]
    restored = [o["message"]["content"] for o in written if o.get("isMeta") and str(o.get("message", {}).get("content")).startswith("[restored file]")]
    assert len(restored) == 5 and all("# module" in t for t in restored)
    assert PLACEHOLDER.encode() not in b"".join(line for line in result.stdout.splitlines() if b"[restored file]" in line)


def test_a_read_cleared_in_the_kept_tail_does_not_count_as_visible() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("app.py", "print('app')")

    def tail(p: Project) -> None:
        p.read("app.py", "print('app')")
        cleared(p, PLACEHOLDER)

    _, _, candidates = run(with_boundary(p, tail))
    assert files_chosen(candidates) == ["app.py"]


def test_a_session_that_went_on_after_its_compaction_gets_what_it_did_since() -> None:
    # Claude Code keeps the history in the file and goes on below the boundary: what comes back is
    # the newest state of each file, plan and todo list, never one the work since has replaced.
    p = Project("/w/proj")
    p.ask("go")
    p.todos([("write parser", "in_progress"), ("write tests", "pending")])
    p.write("notes.md", "old notes")
    p.read("app.py", "v1")
    p.plan("## Plan\nold plan")

    def went_on(p: Project) -> None:
        p.todos([("write parser", "completed"), ("write tests", "completed"), ("ship it", "in_progress")])
        p.write("notes.md", "NEW notes after the compaction")
        p.edit("app.py", "v1", "v2")
        p.plan("## Plan\nnew plan")

    data = with_boundary(p, went_on)
    out, _, candidates = run(data)
    added = "\n".join(texts(added_objects(data, out)))
    assert "NEW notes after the compaction" in added and "old notes" not in added
    assert "     1\tv2" in added and "\tv1" not in added
    assert "[completed] write parser" in added and "[in_progress] ship it" in added and "[in_progress] write parser" not in added
    assert "new plan" in added and "old plan" not in added


def test_the_kept_tail_s_copies_of_the_history_are_not_replayed_twice() -> None:
    # summarize keeps the last messages as copies (the same tool calls) below its boundary: an edit
    # replayed again would find its old text gone and lose the file.
    p = Project("/w/proj")
    p.ask("go")
    p.read("app.py", "alpha\nbeta")
    p.edit("app.py", "alpha", "gamma")
    p.say("Edited.")
    p.ask("Thanks.")
    p.say("Done.")
    data = p.to_bytes()
    summarized = run_cli("summarize", "--engine", "offline", "--keep-last", "4", "--now", NOW_ISO, "-", stdin=data)
    assert summarized.returncode == 0, summarized.stderr.decode()
    out, _, candidates = run(summarized.stdout)
    restored = next(t for t in texts(added_objects(summarized.stdout, out)) if t.startswith("[restored file] app.py"))
    assert restored.split("\n")[1:] == ["     1\tgamma", "     2\tbeta"]


def test_an_edit_of_a_partial_read_keeps_the_lines_where_they_are() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("big.py", "\n".join(f"line {n}" for n in range(1, 301)), offset=200, limit=5)
    p.edit("big.py", "line 202", "line 202 EDITED")
    state = states_of(p)["/w/proj/big.py"]
    assert (state.offset, state.limit, state.partial, state.action) == (200, 5, True, "edited")
    data = with_boundary(p)
    out, _, _ = run(data)
    restored = next(t for t in texts(added_objects(data, out)) if t.startswith("[restored file] big.py"))
    header = HEADER.match(restored.split("\n", 1)[0])
    assert header and (header["first"], header["last"], header["partial"]) == ("200", "204", " partial view,")
    assert "   202\tline 202 EDITED" in restored


def test_a_failed_read_is_not_a_state() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.call("Read", {"file_path": "/w/proj/missing.py"}, "File does not exist.", error=True)
    p.say("ok")
    assert "/w/proj/missing.py" not in states_of(p)


def test_paths_are_normalised_and_relative_ones_joined_with_cwd() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("./a/../b.py", "first", as_given=True)
    p.read("b.py", "second", as_given=True)
    p.read("/w/proj//b.py", "third", as_given=True)
    p.read("/w/proj/src/./c.py", "c", as_given=True)
    p.say("ok")
    states = states_of(p)
    assert sorted(states) == ["/w/proj/b.py", "/w/proj/src/c.py"]
    assert states["/w/proj/b.py"].content == "third"
    assert core.normalise("../x.py", "/w/proj") == "/w/x.py"
    assert core.normalise("/a/./b/../c", None) == "/a/c"


# --- selection ----------------------------------------------------------------------------------


def with_boundary(p: Project, tail: Any = None) -> bytes:
    """The history so far, a compact boundary with its summary, then `tail(p)` (default: one reply)."""
    p.say("Work so far is done.")
    p.compact_here()
    if tail:
        tail(p)
    p.ask("Carry on.")
    p.say("On it.")
    return p.to_bytes()


def test_at_most_five_files_newest_first_by_their_last_action() -> None:
    p = Project("/w/proj")
    p.ask("go")
    for n in range(7):
        p.read(f"f{n}.py", f"content {n}")
    p.edit("f1.py", "content 1", "content one")  # f1 becomes the newest
    data = with_boundary(p)
    out, outcome, candidates = run(data)
    assert files_chosen(candidates) == ["f1.py", "f6.py", "f5.py", "f4.py", "f3.py"]
    skipped = {c.name: c.reason for c in candidates if c.kind == "file" and not c.chosen}
    assert set(skipped) == {"f0.py", "f2.py"} and all("5 most recent" in r for r in skipped.values())
    added = texts(added_objects(data, out))
    assert [HEADER.match(t.split("\n", 1)[0])["name"] for t in added] == ["f1.py", "f6.py", "f5.py", "f4.py", "f3.py"]
    assert added[0].endswith("     1\tcontent one")  # the edit replayed on the read


def test_a_file_of_5000_tokens_comes_back_whole_and_one_over_as_a_reference() -> None:
    p = Project("/w/proj")
    p.ask("go")
    fits, over = text_of_tokens(5000, "fits"), text_of_tokens(5001, "over")
    assert core.tokens_of(fits) == 5000 and core.tokens_of(over) == 5001
    p.read("fits.py", fits)
    p.read("over.py", over)
    data = with_boundary(p)
    out, _, candidates = run(data)
    by_name = {c.name: c for c in candidates if c.kind == "file"}
    assert by_name["fits.py"].chosen and by_name["fits.py"].tokens == 5000
    assert by_name["over.py"].chosen and "over the per-file budget" in by_name["over.py"].reason
    added = texts(added_objects(data, out))
    reference = next(t for t in added if t.startswith("[restored file reference]"))
    header, note = reference.split("\n", 1)
    assert REFERENCE.match(header) and REFERENCE.match(header)["name"] == "over.py" and "5,001 tokens" in header
    # The path and a note, never the content (so never a line cut in the middle).
    assert "over.py" in note and "Read" in note and "# over" not in reference and "yyy" not in reference
    whole = next(t for t in added if t.startswith("[restored file] fits.py"))
    assert HEADER.match(whole.split("\n", 1)[0])["tokens"] == "5,000"
    assert [line.split("\t", 1)[1] for line in whole.split("\n")[1:]] == fits.split("\n")


def test_the_total_file_budget_is_50000_tokens() -> None:
    assert (core.MAX_FILES, core.MAX_TOKENS_PER_FILE, core.FILES_BUDGET) == (5, 5_000, 50_000)
    p = Project("/w/proj")
    p.ask("go")
    for n in range(15):
        p.read(f"g{n:02d}.py", text_of_tokens(4000, f"g{n}"))
    data = with_boundary(p)
    out, _, candidates = run(data, RestoreSettings(source="transcript", max_files=20))
    files = [c for c in candidates if c.kind == "file"]
    whole = [c for c in files if c.chosen and "budget" not in c.reason]
    assert [c.name for c in whole] == [f"g{n:02d}.py" for n in range(14, 2, -1)]  # 12 × 4,000 = 48,000
    assert sum(c.tokens for c in whole) <= 50_000
    rest = [c for c in files if c not in whole]
    assert rest and all(c.chosen and "over the total budget" in c.reason for c in rest)
    assert all("yyy" not in t for t in texts(added_objects(data, out)) if t.startswith("[restored file reference]"))


def test_a_file_whose_full_read_is_in_the_kept_tail_is_skipped_but_a_partial_one_is_not() -> None:
    p = Project("/w/proj")
    p.ask("go")
    for name in ("full.py", "partial.py", "other.py"):
        p.read(name, f"{name} line 1\n{name} line 2\n{name} line 3")

    def tail(p: Project) -> None:
        p.read("full.py", "full.py line 1\nfull.py line 2\nfull.py line 3")
        p.read("partial.py", "partial.py line 1\npartial.py line 2\npartial.py line 3", offset=2, limit=1)

    data = with_boundary(p, tail)
    _, _, candidates = run(data)
    by_name = {c.name: c for c in candidates if c.kind == "file"}
    assert not by_name["full.py"].chosen and "kept tail" in by_name["full.py"].reason
    assert by_name["partial.py"].chosen and by_name["other.py"].chosen


def test_a_stub_read_in_the_kept_tail_does_not_count_as_visible() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("app.py", "print('app')")
    data = with_boundary(p, lambda p: p.unchanged("app.py"))
    _, _, candidates = run(data)
    assert files_chosen(candidates) == ["app.py"]


def test_memory_files_are_skipped() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("CLAUDE.md", "Be terse.")
    p.read("sub/CLAUDE.md", "Nested rules.")
    p.read("CLAUDE.local.md", "Local rules.")
    p.read("app.py", "print('app')")
    data = with_boundary(p)
    out, _, candidates = run(data)
    assert files_chosen(candidates) == ["app.py"]
    memory = [c for c in candidates if c.name.endswith(".md")]
    assert len(memory) == 3 and not any(c.chosen for c in memory)
    assert "Be terse." not in out[len(data) :].decode() and "Nested rules." not in out[len(data) :].decode()


def test_the_latest_plan_and_the_latest_todo_list_come_back() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.plan("OLD PLAN: do nothing")
    p.todos([("old item", "pending")])
    p.plan("## Plan\n1. Add the endpoint\n2. Test it")
    p.todos([("Add the endpoint", "completed"), ("Test it", "in_progress"), ("Ship", "pending")])
    data = with_boundary(p)
    out, _, candidates = run(data)
    added = texts(added_objects(data, out))
    plans = [t for t in added if t.startswith("[restored plan]")]
    todos = [t for t in added if t.startswith("[restored todo list]")]
    assert len(plans) == 1 and plans[0].endswith("## Plan\n1. Add the endpoint\n2. Test it") and "OLD PLAN" not in plans[0]
    assert len(todos) == 1 and "old item" not in todos[0]
    assert todos[0].split("\n")[1:] == ["- [completed] Add the endpoint", "- [in_progress] Test it", "- [pending] Ship"]
    assert {c.kind for c in candidates if c.chosen} == {"plan", "todos"}


def test_skills_come_back_truncated_at_5000_tokens_and_25000_in_all_newest_first() -> None:
    assert (core.MAX_TOKENS_PER_SKILL, core.SKILLS_BUDGET) == (5_000, 25_000)
    p = Project("/w/proj")
    p.ask("go")
    p.skill("tiny", "Use the tiny tool.")
    for n in range(6):
        p.skill(f"big{n}", f"# big{n}\n" + text_of_tokens(6000, f"big{n}"))
    data = with_boundary(p)
    out, _, candidates = run(data)
    skills = [c for c in candidates if c.kind == "skill"]
    assert [c.name.rsplit("/", 1)[1] for c in skills] == ["big5", "big4", "big3", "big2", "big1", "big0", "tiny"]
    chosen = [c for c in skills if c.chosen]
    assert [c.name.rsplit("/", 1)[1] for c in chosen] == ["big5", "big4", "big3", "big2", "big1"]
    assert sum(c.tokens for c in chosen) <= 25_000 and all(c.tokens <= 5_000 for c in chosen)
    assert all("budget" in c.reason for c in skills if not c.chosen)
    added = [t for t in texts(added_objects(data, out)) if t.startswith("[restored skill]")]
    assert len(added) == 5 and added[0].startswith("[restored skill] /home/dev/.claude/skills/big5 (")
    body = added[0].split("\n", 1)[1]
    assert body.startswith("Base directory for this skill: /home/dev/.claude/skills/big5\n\n# big5\n")
    assert body.endswith(core.SKILL_TRUNCATED) and core.tokens_of(body) <= 5_000


@pytest.mark.parametrize("command", ["restore", "compact"])
def test_a_root_that_is_not_a_folder_is_refused(tmp_path: Path, command: str) -> None:
    # A misspelt --root would otherwise be a root nothing lies under: every file from the transcript, silently.
    session = tmp_path / "s.jsonl"
    session.write_bytes((ROOT / "fixtures" / "restore" / "plan.in.jsonl").read_bytes())
    (tmp_path / "a-file").write_text("x")
    for root, said in ((tmp_path / "nowhere", "no folder"), (tmp_path / "a-file", "is not a folder")):
        result = run_cli(command, "--root", root, session, cwd=tmp_path)
        assert result.returncode == 2 and result.stdout == b"", result.stderr.decode()
        assert said in result.stderr.decode() and "--root" in result.stderr.decode()
    assert run_cli(command, "--root", tmp_path, session, cwd=tmp_path).returncode == 0


def test_skills_stop_at_the_first_that_would_pass_the_budget() -> None:
    # Claude Code stops adding skills there: an older, smaller one does not come back after it.
    p = Project("/w/proj")
    p.ask("go")
    p.skill("tiny", "Use the tiny tool.")
    for n in range(6, 0, -1):
        p.skill(f"m{n}", text_of_tokens(4500, f"m{n}"))
    _, _, candidates = run(with_boundary(p))
    skills = {c.name.rsplit("/", 1)[1]: c for c in candidates if c.kind == "skill"}
    assert [name for name, c in skills.items() if c.chosen] == ["m1", "m2", "m3", "m4", "m5"]
    assert sum(c.tokens for c in skills.values() if c.chosen) + skills["tiny"].tokens <= 25_000, "tiny would fit"
    assert not skills["m6"].chosen and not skills["tiny"].chosen and skills["tiny"].reason == "over the skills budget"


def test_a_small_skill_comes_back_whole() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.skill("pdf", "Use pdftotext, then summarise.")
    data = with_boundary(p)
    out, _, _ = run(data)
    [added] = texts(added_objects(data, out))
    assert added.split("\n", 1)[1] == "Base directory for this skill: /home/dev/.claude/skills/pdf\n\nUse pdftotext, then summarise."


def test_a_skill_invoked_twice_comes_back_once() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.skill("pdf", "Use pdftotext.")
    p.skill("pdf", "Use pdftotext.")
    data = with_boundary(p)
    out, _, _ = run(data)
    assert len([t for t in texts(added_objects(data, out)) if t.startswith("[restored skill]")]) == 1


def test_a_partial_view_from_the_transcript_keeps_its_line_numbers() -> None:
    p = Project("/w/proj")
    p.ask("go")
    p.read("d.py", "l1\nl2\nl3\nl4\nl5", offset=3, limit=2)
    data = with_boundary(p)
    out, _, _ = run(data)
    [added] = texts(added_objects(data, out))
    header, body = added.split("\n", 1)
    match = HEADER.match(header)
    assert match and (match["first"], match["last"], match["partial"]) == ("3", "4", " partial view,")
    assert body == "     3\tl3\n     4\tl4"


# --- the entries written ------------------------------------------------------------------------


def project(tmp_path: Path) -> tuple[Path, Project]:
    root = tmp_path / "proj"
    files = {"src/app.py": "import os\n\n\ndef main():\n    print('DISK app')\n", "README.md": "# App (DISK)\n"}
    write_files(root, files)
    p = Project(root)
    p.ask("Fix the app and the README.")
    p.read("src/app.py", "import os\n\ndef main():\n    print('TRANSCRIPT app')")
    p.read("README.md", "# App (TRANSCRIPT)")
    p.todos([("Fix the app", "completed"), ("Docs", "pending")])
    return root, p


def test_each_item_is_an_is_meta_user_entry_with_a_header_chained_below_the_last_line(tmp_path: Path) -> None:
    root, p = project(tmp_path)
    data = with_boundary(p)
    (tmp_path / "s.jsonl").write_bytes(data)
    result = restore_cli(tmp_path / "s.jsonl", cwd=root)
    assert result.returncode == 0, result.stderr.decode()
    added = added_objects(data, result.stdout)
    assert len(added) == 3
    last_uuid = orjson.loads(data.splitlines()[-1])["uuid"]
    parents = [last_uuid] + [obj["uuid"] for obj in added[:-1]]
    for obj, parent in zip(added, parents):
        assert obj["type"] == "user" and obj["isMeta"] is True and obj["isSidechain"] is False
        assert obj["parentUuid"] == parent and obj["message"]["role"] == "user"
    # From the run's clock (later than every line above), 1 ms apart: Claude Code resumes from the newest leaf.
    stamps = [obj["timestamp"] for obj in added]
    assert stamps == ["2026-05-01T00:00:00.000Z", "2026-05-01T00:00:00.001Z", "2026-05-01T00:00:00.002Z"]
    assert all(stamp > orjson.loads(line).get("timestamp", "") for line in data.splitlines() for stamp in stamps)
    for obj in added:
        assert obj["cwd"] == str(root) and obj["sessionId"] == p.session_id
    readme, app, todo = texts(added)
    # Newest first: the README was read after the app.
    assert readme.split("\n", 1)[0] == "[restored file] README.md (lines 1-2, 3 tokens, from disk)"
    match = HEADER.match(app.split("\n", 1)[0])
    assert match and match["name"] == "src/app.py" and match["origin"] == "from disk" and match["last"] == "6"
    assert app.split("\n")[1:] == [f"{n:6d}\t{line}" for n, line in enumerate((root / "src/app.py").read_text().split("\n"), 1)]
    assert todo.startswith("[restored todo list] 2 items\n")
    assert b"restored 2 files, 1 todo list" in result.stderr
    # The result is still a sound transcript: no error, no new pairing problem, the restored text in the context.
    assert not [f for f in findings(result.stdout) if f.severity == "error"]
    assert tool_problems(result.stdout) == tool_problems(data)
    messages = ctxpipe.api_messages(ctxpipe.read_transcript(result.stdout, "claude-code"))
    last_user = messages[-1]
    assert last_user["role"] == "user" and "[restored file] README.md" in json.dumps(last_user)


def test_the_report_json_lists_what_came_back(tmp_path: Path) -> None:
    _, p = project(tmp_path)
    (tmp_path / "s.jsonl").write_bytes(with_boundary(p))
    result = restore_cli(tmp_path / "s.jsonl", "--report-json", tmp_path / "r.json")
    assert result.returncode == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["name"] for r in report["restored"]] == ["README.md", "src/app.py", "todo list"]
    assert report["tokens"] == sum(r["tokens"] for r in report["restored"]) > 0


# --- where content comes from: --source and the root -------------------------------------------


def test_source_disk_transcript_and_auto(tmp_path: Path) -> None:
    root, p = project(tmp_path)
    p.read("gone.py", "GONE from disk, seen in the transcript")
    data = with_boundary(p)
    (tmp_path / "s.jsonl").write_bytes(data)

    def restored(*args: str) -> str:
        return "\n".join(texts(added_objects(data, restore_cli(tmp_path / "s.jsonl", *args, cwd=root).stdout)))

    disk, transcript, auto = restored("--source", "disk"), restored("--source", "transcript"), restored("--source", "auto")
    assert "DISK app" in disk and "TRANSCRIPT app" not in disk and "GONE from disk" not in disk
    assert "TRANSCRIPT app" in transcript and "DISK app" not in transcript and "GONE from disk" in transcript
    assert "as last seen in the transcript)" in transcript
    assert "DISK app" in auto and "TRANSCRIPT app" not in auto and "GONE from disk" in auto
    rows = plan_rows(restore_cli(tmp_path / "s.jsonl", "--plan", "--source", "disk", cwd=root))
    assert {r["name"]: r["reason"] for r in rows}["gone.py"] == "not on disk"
    bad = restore_cli(tmp_path / "s.jsonl", "--source", "cloud")
    assert bad.returncode == 2 and b"--source" in bad.stderr


def outside_project(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A project whose history read files outside it: ../, an absolute path, and a symlink inside pointing out."""
    root = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_files(root, {"src/app.py": "print('inside DISK')\n"})
    write_files(outside, {"rel.txt": "TOP-SECRET rel on disk", "abs.txt": "TOP-SECRET abs on disk", "linked.txt": "TOP-SECRET link on disk"})
    (root / "link.txt").symlink_to(outside / "linked.txt")
    (root / "inner_link.py").symlink_to(root / "src" / "app.py")
    p = Project(root)
    p.ask("go")
    p.read("../outside/rel.txt", "seen rel", as_given=True)
    p.read(str(outside / "abs.txt"), "seen abs", as_given=True)
    p.read("link.txt", "seen link")
    p.read("inner_link.py", "seen inner link")
    p.read("src/../src/app.py", "seen app", as_given=True)
    return root, outside, with_boundary(p)


def test_disk_reads_stay_under_the_root(tmp_path: Path) -> None:
    root, outside, data = outside_project(tmp_path)
    (tmp_path / "s.jsonl").write_bytes(data)
    rows = {r["name"]: r for r in plan_rows(restore_cli(tmp_path / "s.jsonl", "--plan", "--source", "disk", cwd=root))}
    for name in (str(outside / "rel.txt"), str(outside / "abs.txt"), "link.txt"):
        assert not rows[name]["chosen"] and "outside the project root" in rows[name]["reason"], rows[name]
    assert rows["src/app.py"]["chosen"] and rows["inner_link.py"]["chosen"]  # a link that stays inside is fine
    disk = restore_cli(tmp_path / "s.jsonl", "--source", "disk", cwd=root)
    assert disk.returncode == 0 and b"TOP-SECRET" not in disk.stdout
    assert b"inside DISK" in disk.stdout
    # auto falls back to what the transcript showed, never to the file outside.
    auto = restore_cli(tmp_path / "s.jsonl", cwd=root).stdout
    assert b"TOP-SECRET" not in auto and b"seen rel" in auto and b"seen abs" in auto and b"seen link" in auto
    allowed = restore_cli(tmp_path / "s.jsonl", "--source", "disk", "--allow-outside-root", cwd=root).stdout
    assert all(f"TOP-SECRET {k} on disk".encode() in allowed for k in ("rel", "abs", "link"))


def read_from_disk(path: str, root: str, allow_outside: bool) -> tuple[str | None, str]:
    """The whole file's text as the real disk port reads it, or None and why."""
    read = DISK.read(path, root, allow_outside)
    return read.text, read.why


def test_read_from_disk_refuses_escapes_and_says_why(tmp_path: Path) -> None:
    root, outside, _ = outside_project(tmp_path)
    for path in (str(root / ".." / "outside" / "rel.txt"), str(outside / "abs.txt"), str(root / "link.txt"), "../outside/rel.txt"):
        text, why = read_from_disk(path, str(root), False)
        assert text is None and "outside the project root" in why and "--allow-outside-root" in why, path
    assert read_from_disk(str(root / "link.txt"), str(root), True) == ("TOP-SECRET link on disk", "from disk")
    assert read_from_disk("src/app.py", str(root), False) == ("print('inside DISK')\n", "from disk")
    # A root that is itself reached through a link still holds its files.
    (tmp_path / "root_link").symlink_to(root)
    assert read_from_disk(str(root / "src" / "app.py"), str(tmp_path / "root_link"), False)[0] == "print('inside DISK')\n"
    # A sibling folder whose name starts like the root's is not inside it.
    write_files(tmp_path / "proj-evil", {"x.txt": "evil"})
    assert read_from_disk(str(tmp_path / "proj-evil" / "x.txt"), str(root), False)[0] is None


def test_the_root_defaults_to_the_current_directory_holding_the_transcript_cwd_and_root_overrides_it(tmp_path: Path) -> None:
    root, p = project(tmp_path)
    (tmp_path / "s.jsonl").write_bytes(with_boundary(p))
    # Run from the project, or from a folder above it: the current directory is the root.
    for here in (root, tmp_path):
        rows = {r["name"]: r for r in plan_rows(run_cli("restore", "--plan", "--source", "disk", tmp_path / "s.jsonl", cwd=here))}
        assert rows["src/app.py"]["reason"] == "from disk", here
    # Run from elsewhere (or from inside the project): nothing is read from disk, whatever the transcript's cwd says.
    for here in (ROOT, root / "src"):
        rows = {r["name"]: r for r in plan_rows(run_cli("restore", "--plan", "--source", "disk", tmp_path / "s.jsonl", cwd=here))}
        assert not rows["src/app.py"]["chosen"] and rows["src/app.py"]["reason"].startswith("not reading files from disk: the transcript's project"), here
    other = tmp_path / "other"
    other.mkdir()
    rows = {r["name"]: r for r in plan_rows(restore_cli(tmp_path / "s.jsonl", "--plan", "--source", "disk", "--root", str(other)))}
    assert not rows["src/app.py"]["chosen"] and "outside the project root" in rows["src/app.py"]["reason"]
    rows = {r["name"]: r for r in plan_rows(restore_cli(tmp_path / "s.jsonl", "--plan", "--source", "disk", "--root", str(root / "src")))}
    assert rows["src/app.py"]["chosen"] and not rows["README.md"]["chosen"]


# --- --plan, --from, pass-through, idempotence --------------------------------------------------


def test_plan_lists_every_candidate_and_writes_no_transcript(tmp_path: Path) -> None:
    root, p = project(tmp_path)
    p.read("CLAUDE.md", "rules")
    for n in range(6):
        p.read(f"extra{n}.py", f"extra {n}")
    (tmp_path / "s.jsonl").write_bytes(with_boundary(p))
    result = restore_cli(tmp_path / "s.jsonl", "--plan", "-o", tmp_path / "out.jsonl")
    rows = plan_rows(result)
    assert not (tmp_path / "out.jsonl").exists()
    assert all(set(r) == {"kind", "name", "tokens", "chosen", "reason"} for r in rows)
    assert all(r["reason"] for r in rows)
    files = [r for r in rows if r["kind"] == "file"]
    assert [r["name"] for r in files] == [f"extra{n}.py" for n in range(5, -1, -1)] + ["CLAUDE.md", "README.md", "src/app.py"]
    assert sum(r["chosen"] for r in files) == 5
    assert all(r["tokens"] > 0 for r in files if r["chosen"]) and all(r["tokens"] == 0 for r in files if not r["chosen"])
    assert [r["kind"] for r in rows if r["kind"] != "file"] == ["todos"]
    assert rows == plan_rows(restore_cli(tmp_path / "s.jsonl", "--plan", "--json"))


def test_from_supplies_the_history_a_summary_dropped(tmp_path: Path) -> None:
    root, p = project(tmp_path)
    p.say("Both fixed.")
    p.ask("Thanks.")
    p.say("You are welcome.")
    original = tmp_path / "original.jsonl"
    original.write_bytes(p.to_bytes())
    dropped = run_cli("summarize", "--engine", "offline", "--keep-last", "2", "--drop-history", "--now", NOW_ISO, original)
    assert dropped.returncode == 0, dropped.stderr.decode()
    (tmp_path / "dropped.jsonl").write_bytes(dropped.stdout)
    alone = restore_cli(tmp_path / "dropped.jsonl")
    assert alone.returncode == 0 and alone.stdout == dropped.stdout and b"nothing to restore" in alone.stderr
    with_from = restore_cli(tmp_path / "dropped.jsonl", "--from", original, cwd=root)
    assert with_from.returncode == 0, with_from.stderr.decode()
    added = texts(added_objects(dropped.stdout, with_from.stdout))
    assert [t.split("\n", 1)[0].split(" (")[0] for t in added] == ["[restored file] README.md", "[restored file] src/app.py", "[restored todo list] 2 items"]
    assert "DISK app" in added[1]


def test_no_boundary_and_no_from_passes_through_unchanged(tmp_path: Path) -> None:
    _, p = project(tmp_path)
    p.say("done")
    data = p.to_bytes()
    (tmp_path / "s.jsonl").write_bytes(data)
    result = restore_cli(tmp_path / "s.jsonl")
    assert result.returncode == 0 and result.stdout == data
    assert b"no compact boundary" in result.stderr
    piped = run_cli("restore", stdin=data)
    assert piped.returncode == 0 and piped.stdout == data
    anthropic = (ROOT / "fixtures" / "anthropic" / "basic.jsonl").read_bytes()
    assert run_cli("restore", stdin=anthropic).stdout == anthropic


def test_restoring_twice_adds_nothing(tmp_path: Path) -> None:
    _, p = project(tmp_path)
    (tmp_path / "s.jsonl").write_bytes(with_boundary(p))
    once = restore_cli(tmp_path / "s.jsonl")
    (tmp_path / "once.jsonl").write_bytes(once.stdout)
    twice = run_cli("restore", "--now", "2026-06-01T00:00:00Z", tmp_path / "once.jsonl")
    assert once.stdout != (tmp_path / "s.jsonl").read_bytes()
    assert twice.returncode == 0 and twice.stdout == once.stdout
    assert b"restored already" in twice.stderr


def test_the_same_input_gives_the_same_bytes(tmp_path: Path) -> None:
    _, p = project(tmp_path)
    data = with_boundary(p)
    settings = RestoreSettings(source="transcript")
    assert run(data, settings)[0] == run(data, settings)[0]
    uuids = [obj["uuid"] for obj in added_objects(data, run(data, settings)[0])]
    assert len(set(uuids)) == len(uuids) == 3


def test_the_ledger_undoes_a_restore(tmp_path: Path) -> None:
    data = (ROOT / "fixtures" / "claude-code" / "restore.jsonl").read_bytes()
    restored = run_cli("restore", "--source", "transcript", "--now", NOW_ISO, "--ledger", tmp_path / "undo.jsonl", stdin=data)
    assert restored.returncode == 0 and len(restored.stdout) > len(data)
    (tmp_path / "r.jsonl").write_bytes(restored.stdout)
    undone = run_cli("expand", "--ledger", tmp_path / "undo.jsonl", tmp_path / "r.jsonl")
    assert undone.returncode == 0 and undone.stdout == data


def test_claude_code_would_resume_from_the_last_restored_entry() -> None:
    from project_sessions import resumed_from

    data = (ROOT / "fixtures" / "claude-code" / "restore.jsonl").read_bytes()
    out, _, _ = run(data)
    added = added_objects(data, out)
    assert len(added) == 5
    assert resumed_from(out) == added[-1]["uuid"]
