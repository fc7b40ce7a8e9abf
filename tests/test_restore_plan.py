"""`restore`: the latest plan as its own item, memory and rule files kept out of the file slots, and
the plan-mode reminder.

Claude Code keeps a session's plan in ~/.claude/plans/<slug>.md (written with Write/Edit; 2.1.x
ExitPlanMode results name it in `toolUseResult.filePath`) and re-attaches it after a compaction
whenever it exists, plus a plan_mode reminder when the permission mode is plan; CLAUDE.md, rules and
auto-memory are reloaded by their own mechanism (context-management.md section 7; the seed's
compact.ts:1690 TODO about `.claude/rules/*.md`). Sessions are built with tests/project_sessions.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from ctxpipe.core import restore as core
from ctxpipe.core.jsonl import iter_entries
from ctxpipe.core.reports import PlanRow
from ctxpipe.core.restore import RestoreSettings, is_memory_file, is_plan_file
from ctxpipe.core.stage import line_bytes
from ctxpipe.formats import get
from ctxpipe.jobs.ports import DISK
from helpers import run_cli
from project_sessions import NOW_ISO, Project, write_files

CC = get("claude-code")
PLAN = "/home/dev/.claude/plans/linked-soaring-matsumoto.md"


def run(data: bytes, settings: RestoreSettings = RestoreSettings(source="transcript")) -> tuple[list[str], Any, list[core.Candidate]]:
    """The texts `restore` adds to `data`, its outcome and its candidates, in-process."""
    entries = list(iter_entries(io.BytesIO(data), "x"))
    outcome, candidates = core.restore(entries, CC, settings, "2026-05-01T00:00:00.000Z", workspace=DISK)
    out = b"".join(line_bytes(outcome.entries))
    assert out.startswith(data), "every line of the input is kept, byte for byte"
    return [orjson.loads(line)["message"]["content"] for line in out[len(data) :].splitlines()], outcome, candidates


def with_boundary(p: Project, mode: str | None = None) -> bytes:
    """The history, a compact boundary with its summary, then a prompt (recording `mode`) and a reply."""
    p.say("Work so far is done.")
    p.compact_here()
    if mode is None:
        p.ask("Carry on.")
    else:
        p.user("Carry on.", permissionMode=mode)
    p.say("On it.")
    return p.to_bytes()


def plan_items(added: list[str]) -> list[str]:
    return [t for t in added if t.startswith("[restored plan]")]


def exit_plan(p: Project, text: str, path: str | None = PLAN, approved: bool = True) -> str:
    """ExitPlanMode as 2.1.x writes it: the plan in the input, the plan file in the result."""
    result = {"plan": text, "isAgent": False, **({"filePath": path} if path else {})}
    answer = "User has approved your plan. You can now start coding." if approved else "The user doesn't want to proceed with this tool use."
    return p.call("ExitPlanMode", {"plan": text}, answer, error=not approved, result_extra=result)


def rows_of(result: Any) -> dict[str, dict[str, Any]]:
    assert result.returncode == 0, result.stderr.decode()
    return {row["name"]: row for row in map(json.loads, result.stdout.splitlines())}


# --- the plan ------------------------------------------------------------------------------------


def test_the_plan_file_comes_back_from_the_transcript_with_its_edits_and_takes_no_file_slot() -> None:
    p = Project("/w/proj")
    p.ask("Plan the endpoint.")
    p.write(PLAN, "# Plan\n1. Add the endpoint\n2. Test it")
    p.edit(PLAN, "2. Test it", "2. Test it\n3. Document it")
    for n in range(5):
        p.read(f"f{n}.py", f"content {n}")
    added, outcome, candidates = run(with_boundary(p))
    plans = plan_items(added)
    assert plans == [f"[restored plan] {PLAN} (13 tokens, the latest Edit in the transcript)\n# Plan\n1. Add the endpoint\n2. Test it\n3. Document it"]
    assert [c.name for c in candidates if c.kind == "file" and c.chosen] == [f"f{n}.py" for n in range(4, -1, -1)]
    plan_row = next(c for c in candidates if c.kind == "file" and c.name == PLAN)
    assert not plan_row.chosen and "its own item" in plan_row.reason
    assert "1 plan" in outcome.note and "5 files" in outcome.note


def test_the_latest_exit_plan_mode_plan_wins_over_an_older_plan_file_write() -> None:
    p = Project("/w/proj")
    p.ask("Plan it.")
    p.write(PLAN, "OLD PLAN")
    exit_plan(p, "NEW PLAN: add the endpoint")
    added, _, candidates = run(with_boundary(p))
    assert plan_items(added) == [f"[restored plan] {PLAN} (7 tokens, the latest ExitPlanMode in the transcript)\nNEW PLAN: add the endpoint"]
    assert [c.kind for c in candidates if c.chosen] == ["plan"]


def test_an_edit_after_exit_plan_mode_is_replayed_on_its_plan() -> None:
    p = Project("/w/proj")
    p.ask("Plan it.")
    exit_plan(p, "1. one\n2. two", approved=False)  # rejected: the plan file still holds it
    p.edit(PLAN, "2. two", "2. TWO, revised")
    added, _, _ = run(with_boundary(p))
    assert plan_items(added)[0].endswith("\n1. one\n2. TWO, revised")


def test_a_plan_with_no_file_comes_back_even_with_source_disk(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.ask("Plan it.")
    p.plan("## A 2.0-style plan")  # no filePath: the plan exists only in the transcript
    added, _, _ = run(with_boundary(p), RestoreSettings(source="disk", root=str(tmp_path)))
    assert plan_items(added) == ["[restored plan] latest plan (5 tokens, the latest ExitPlanMode in the transcript)\n## A 2.0-style plan"]


def test_the_plan_comes_back_from_disk_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    plan = root / ".claude" / "plans" / "slug.md"
    write_files(root, {".claude/plans/slug.md": "# Plan (DISK, edited by hand)"})
    p = Project(root)
    p.ask("Plan it.")
    exit_plan(p, "# Plan (TRANSCRIPT)", str(plan))
    data = with_boundary(p)
    (tmp_path / "s.jsonl").write_bytes(data)
    result = run_cli("restore", "--now", NOW_ISO, "--root", str(root), tmp_path / "s.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    added = [orjson.loads(line)["message"]["content"] for line in result.stdout[len(data) :].splitlines()]
    assert plan_items(added) == ["[restored plan] .claude/plans/slug.md (7 tokens, from disk)\n# Plan (DISK, edited by hand)"]
    transcript = run_cli("restore", "--now", NOW_ISO, "--root", str(root), "--source", "transcript", tmp_path / "s.jsonl", cwd=tmp_path)
    assert b"# Plan (TRANSCRIPT)" in transcript.stdout and b"DISK" not in transcript.stdout


def test_a_plan_file_outside_the_root_is_never_read(tmp_path: Path) -> None:
    root, home = tmp_path / "proj", tmp_path / "home"
    write_files(home, {".claude/plans/slug.md": "SECRET from outside the root"})
    write_files(root, {"app.py": "print('app')\n"})
    (root / ".claude" / "plans").mkdir(parents=True)
    (root / ".claude" / "plans" / "link.md").symlink_to(home / ".claude" / "plans" / "slug.md")
    p = Project(root)
    p.ask("Plan it.")
    exit_plan(p, "transcript copy of the plan", str(home / ".claude" / "plans" / "slug.md"))
    data = with_boundary(p)
    (tmp_path / "s.jsonl").write_bytes(data)
    auto = run_cli("restore", "--now", NOW_ISO, "--root", str(root), tmp_path / "s.jsonl", cwd=tmp_path)
    assert auto.returncode == 0 and b"SECRET" not in auto.stdout and b"transcript copy of the plan" in auto.stdout
    rows = rows_of(run_cli("restore", "--plan", "--json", "--source", "disk", "--root", str(root), tmp_path / "s.jsonl", cwd=tmp_path))
    plan = rows[str(home / ".claude" / "plans" / "slug.md")]
    assert plan["kind"] == "plan" and not plan["chosen"] and "outside the project root" in plan["reason"]
    # A plan path that is a link inside the root to a file outside it is not read either.
    p2 = Project(root)
    p2.ask("Plan it.")
    exit_plan(p2, "linked copy", str(root / ".claude" / "plans" / "link.md"))
    (tmp_path / "s2.jsonl").write_bytes(with_boundary(p2))
    linked = run_cli("restore", "--now", NOW_ISO, "--root", str(root), tmp_path / "s2.jsonl", cwd=tmp_path)
    assert linked.returncode == 0 and b"SECRET" not in linked.stdout and b"linked copy" in linked.stdout


def test_a_plan_over_the_per_file_cap_is_truncated_to_it(tmp_path: Path) -> None:
    p = Project("/w/proj")
    p.ask("Plan it.")
    exit_plan(p, "step\n" * 8_000)  # 10,000 tokens
    added, _, candidates = run(with_boundary(p))
    plan = next(c for c in candidates if c.kind == "plan")
    assert plan.chosen and plan.tokens == core.tokens_of(plan.text or "") == core.MAX_TOKENS_PER_FILE
    assert plan_items(added)[0].startswith(f"[restored plan] {PLAN} (5,000 tokens, the latest ExitPlanMode in the transcript, truncated to 5,000 tokens)")
    assert (plan.text or "").endswith(core.PLAN_TRUNCATED)
    astral = core.truncated("\U0001f600" * 20_000, 100, core.PLAN_TRUNCATED)
    assert core.tokens_of(astral) <= 100 and astral.endswith(core.PLAN_TRUNCATED)


def test_a_huge_plan_file_on_disk_is_read_only_as_far_as_the_cap(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write_files(root, {".claude/plans/big.md": "x" * 4_000_000})
    p = Project(root)
    p.ask("Plan it.")
    exit_plan(p, "small transcript copy", str(root / ".claude/plans/big.md"))
    added, _, _ = run(with_boundary(p), RestoreSettings(root=str(root)))
    assert plan_items(added)[0].startswith("[restored plan] .claude/plans/big.md (5,000 tokens, from disk, truncated to 5,000 tokens)")


@pytest.mark.parametrize(
    "path, plan",
    [
        ("/home/dev/.claude/plans/a-b-c.md", True),
        ("/w/proj/.claude/plans/x.md", True),
        ("C:\\Users\\dev\\.claude\\plans\\x.md", True),
        ("/home/dev/.claude/plans/x.txt", False),
        ("/w/proj/plans/x.md", False),
        ("/w/proj/.claude/plans/sub/x.md", False),
    ],
)
def test_is_plan_file(path: str, plan: bool) -> None:
    assert is_plan_file(path) is plan


# --- memory and rule files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, memory",
    [
        ("/w/proj/CLAUDE.md", True),
        ("/w/proj/a/b/c/CLAUDE.md", True),
        ("/w/proj/CLAUDE.local.md", True),
        ("/home/dev/.claude/projects/-w-proj/memory/MEMORY.md", True),
        ("/w/proj/MEMORY.md", True),
        ("/w/proj/.claude/rules/style.md", True),
        ("/w/proj/.claude/rules/deep/api.md", True),
        ("/home/dev/.claude/settings.json", True),
        ("/Users/dev/.claude/skills/x/SKILL.md", True),
        ("C:\\Users\\dev\\.claude\\CLAUDE.md", True),
        ("/w/proj/claude.md", False),
        ("/w/proj/CLAUDE.md.bak", False),
        ("/w/proj/.claudeignore", False),
        ("/w/proj/my.claude/rules/x.md", False),
        ("/w/proj/src/app.py", False),
    ],
)
def test_is_memory_file(path: str, memory: bool) -> None:
    assert is_memory_file(path) is memory


def test_memory_and_rule_files_never_take_a_slot_while_normal_files_do() -> None:
    p = Project("/w/proj")
    p.ask("go")
    for n in range(5):
        p.read(f"f{n}.py", f"content {n}")
    memory = {
        "CLAUDE.md": "Be terse.",
        "pkg/deep/CLAUDE.md": "Nested rules.",
        "CLAUDE.local.md": "Local rules.",
        ".claude/rules/style.md": "RULE: tabs",
        "/home/dev/.claude/projects/-w-proj/memory/MEMORY.md": "AUTO MEMORY",
        "/home/dev/.claude/settings.json": '{"theme": "dark"}',
    }
    for path, body in memory.items():  # read after the normal files: they are the newest
        p.read(path, body)
    added, _, candidates = run(with_boundary(p))
    assert [c.name for c in candidates if c.kind == "file" and c.chosen] == [f"f{n}.py" for n in range(4, -1, -1)]
    skipped = {c.name: c.reason for c in candidates if c.kind == "file" and not c.chosen}
    assert set(skipped) == set(memory) and all("memory or rule file" in reason for reason in skipped.values())
    everything = "\n".join(added)
    assert not any(body in everything for body in memory.values())


# --- the plan-mode reminder ----------------------------------------------------------------------


def reminders(added: list[str]) -> list[str]:
    return [t for t in added if t.startswith("[restored plan mode]")]


def planning() -> Project:
    p = Project("/w/proj")
    p.ask("Plan the endpoint.")
    p.write(PLAN, "# Plan\n1. Add the endpoint")
    return p


def test_the_plan_mode_reminder_comes_back_when_the_last_prompt_was_in_plan_mode() -> None:
    added, outcome, candidates = run(with_boundary(planning(), mode="plan"))
    assert len(reminders(added)) == 1 and PLAN in reminders(added)[0] and "ExitPlanMode" in reminders(added)[0]
    assert [c.kind for c in candidates if c.chosen] == ["plan", "plan-mode"]
    assert added[-1].startswith("[restored plan mode]") and "1 plan-mode reminder" in outcome.note
    assert outcome.report.restored[-1] == PlanRow(
        kind="plan-mode", name="plan mode", tokens=candidates[-1].tokens, chosen=True, reason="the session's last permission mode is plan"
    )


def test_a_permission_mode_line_sets_plan_mode() -> None:
    p = planning()
    data = with_boundary(p)
    p.raw({"type": "permission-mode", "permissionMode": "plan", "sessionId": p.session_id})
    added, _, _ = run(p.to_bytes())
    assert len(reminders(added)) == 1
    assert reminders(run(data)[0]) == []


@pytest.mark.parametrize("mode", [None, "default", "acceptEdits", "bypassPermissions"])
def test_no_reminder_unless_the_mode_is_plan(mode: str | None) -> None:
    added, _, candidates = run(with_boundary(planning(), mode=mode))
    assert reminders(added) == [] and "plan-mode" not in {c.kind for c in candidates}
    assert len(plan_items(added)) == 1  # the plan comes back whatever the mode


def test_a_later_mode_or_an_approved_plan_ends_plan_mode() -> None:
    p = planning()
    p.user("Plan it well.", permissionMode="plan")
    p.user("Go ahead.", permissionMode="acceptEdits")
    assert reminders(run(with_boundary(p))[0]) == []
    approved = planning()
    approved.user("Plan it well.", permissionMode="plan")
    exit_plan(approved, "# Plan\n1. Add the endpoint")
    assert reminders(run(with_boundary(approved))[0]) == []
    rejected = planning()
    rejected.user("Plan it well.", permissionMode="plan")
    exit_plan(rejected, "# Plan\n1. Add the endpoint", approved=False)
    assert len(reminders(run(with_boundary(rejected))[0])) == 1


def test_restoring_twice_adds_no_second_plan_or_reminder() -> None:
    data = with_boundary(planning(), mode="plan")
    entries = list(iter_entries(io.BytesIO(data), "x"))
    once, _ = core.restore(entries, CC, RestoreSettings(source="transcript"), NOW_ISO, workspace=DISK)
    twice, _ = core.restore(once.entries, CC, RestoreSettings(source="transcript"), NOW_ISO, workspace=DISK)
    assert once.changed and not twice.changed and "restored already" in twice.note


def test_the_report_and_plan_list_the_plan_and_the_reminder(tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").write_bytes(with_boundary(planning(), mode="plan"))
    result = run_cli("restore", "--now", NOW_ISO, "--report-json", tmp_path / "r.json", tmp_path / "s.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads((tmp_path / "r.json").read_text())
    assert [(r["kind"], r["name"]) for r in report["restored"]] == [("plan", PLAN), ("plan-mode", "plan mode")]
    assert report["tokens"] == sum(r["tokens"] for r in report["restored"])
    listed = run_cli("restore", "--plan", "--json", tmp_path / "s.jsonl", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr.decode()
    rows = [(r["kind"], r["name"], r["chosen"]) for r in map(json.loads, listed.stdout.splitlines())]
    assert rows == [("file", PLAN, False), ("plan", PLAN, True), ("plan-mode", "plan mode", True)]


def test_count_prices_the_plan_mode_reminder_claude_code_re_sends() -> None:
    p = planning()
    p.user("Keep planning.", permissionMode="plan")
    data = with_boundary(p)
    entries = list(iter_entries(io.BytesIO(data), "x"))
    split = core.split_at_boundary(entries, CC)
    assert split is not None
    items = core.reinjection(split[0], entries, "files, plan and skills", core.tokens_of).items
    assert [item.kind for item in items] == ["plan", "plan-mode"]
    assert [item.kind for item in core.reinjection(split[0], entries, "plan", core.tokens_of).items] == ["plan"]


def test_a_plan_with_nothing_to_plan_says_why() -> None:
    # A session with no summary yet: no candidate, and the reason restore itself gives, not silence.
    from helpers import FIXTURES, run_cli

    path = FIXTURES / "claude-code" / "repeats.jsonl"
    result = run_cli("restore", "--plan", path)
    assert result.returncode == 0 and result.stdout == b""
    assert result.stderr.decode().strip() == f"ctxpipe: restore: {path}: nothing to restore: no compact boundary (summarize first, or give --from ORIGINAL)"
