"""What a session says happened (core/facts.py) as the offline summary and the verifier use it.

- Typed input from every place Claude Code keeps it: `queue-operation` enqueue lines (prompts typed
  while the agent was busy), slash commands with arguments, `!` shell commands; injected text is not.
- failure_line: the line that names a failure, not "Exit code N", progress or literal "\\n".
- Failures: repeats counted, fixes found, unresolved first, a user's refusal is no error.
- Open work from todos, the task tools, bd (beads) ids, plan files and ExitPlanMode.
- Findings instead of narration; the verifier per kind and at scale; compact summarizes what
  microcompact cleared and names the transcript by an absolute path.

Sessions are built with tests/builders.py (through test_summarize's Convo and helpers).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from builders import usage
from ctxpipe.core.facts import failure_line, folded, one_line, spaced
from ctxpipe.core.jsonl import ReadStats
from ctxpipe.core.reports import KindRecall
from ctxpipe.core.summarize import Fact, key_facts, verify
from helpers import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from test_summarize import CC, NOW_ISO, Convo, in_process, lines_of, ok, section, summary_of

REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
    "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."
)


def queued(s: Convo, content: Any) -> None:
    """A `queue-operation` enqueue line, as Claude Code 2.1 writes a prompt typed while it works."""
    s.raw({"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-03-04T10:30:00.000Z", "sessionId": s.session_id, "content": content})


def summary(s: Convo, keep_last: int = 1) -> str:
    out, outcome = in_process(s.to_bytes(), keep_last=keep_last)
    assert outcome.changed, outcome.note
    return summary_of(out)


def facts_of(s: Convo) -> list[Fact]:
    """key_facts over the whole session (all of it as history), queued prompts included."""
    _, entries = CC.read_region(s.to_bytes(), "in.jsonl", "fail", ReadStats())
    return key_facts(CC.messages(entries), [], CC.typed_elsewhere(entries))


def started(first: str = "Fix the date parser.") -> Convo:
    s = Convo()
    s.user(first)
    return s


def closed(s: Convo) -> Convo:
    """End the turn with words that show the work done, and a small last exchange to keep as the tail."""
    s.text("Done: all 12 tests pass.", usage(20000))
    return s


# --- typed input --------------------------------------------------------------------------------


def busy_session(content: Any) -> Convo:
    """A prompt queued while a tool ran (no user line for it), then more work."""
    s = started()
    s.call("Read", {"file_path": "/home/dev/shop/parser.py"}, "def parse(s): ...\n", 9000)
    queued(s, content)
    s.call("Bash", {"command": "pytest -q"}, "1 passed", 9500)
    s.text("Parser read and tests run.", usage(9800))
    s.call("Read", {"file_path": "/home/dev/shop/dates.py"}, "DAY_FIRST = True\n", 10000)
    return s


def test_a_queued_prompt_without_a_user_line_is_a_typed_message_and_the_last_request() -> None:
    s = busy_session("check again")
    text = summary(s)
    assert "   - check again (typed while the agent was busy)\n" in section(text, 6)
    assert section(text, 6).index("Fix the date parser.") < section(text, 6).index("check again")
    assert section(text, 9).strip().splitlines()[0] == 'Continue with the latest request: "check again"'
    facts = facts_of(s)
    assert Fact("instruction", "check again") in facts
    assert Fact("last-request", "check again") in facts


def test_a_queued_command_attachment_is_typed_and_repeats_its_enqueue_once() -> None:
    s = started()
    s.call("Read", {"file_path": "/home/dev/shop/parser.py"}, "def parse(s): ...\n", 9000)
    queued(s, "also check the zone parser")
    s.line("attachment", attachment={"type": "queued_command", "prompt": "also check the zone parser", "commandMode": "prompt"})
    s.call("Bash", {"command": "pytest -q"}, "1 passed", 9500)
    s.line("attachment", attachment={"type": "queued_command", "prompt": "and the README"})  # no enqueue line for this one
    s.call("Read", {"file_path": "/home/dev/shop/dates.py"}, "DAY_FIRST = True\n", 10000)
    typed = section(summary(s), 6)
    assert typed.count("also check the zone parser") == 1
    assert "   - and the README (typed while the agent was busy)\n" in typed
    assert Fact("last-request", "and the README") in facts_of(s)


def test_a_queued_prompt_as_blocks_drops_the_ide_selection() -> None:
    s = busy_session(
        [
            {"type": "text", "text": "<ide_selection>The user selected lines 3-9 from /home/dev/shop/parser.py:\ndef parse(s): ...</ide_selection>"},
            {"type": "text", "text": "why does this return None?"},
        ]
    )
    typed = section(summary(s), 6)
    assert "   - why does this return None? (typed while the agent was busy)\n" in typed
    assert "ide_selection" not in typed and "selected lines" not in typed
    assert Fact("last-request", "why does this return None?") in facts_of(s)


def test_a_queued_prompt_that_a_later_user_line_repeats_is_listed_once() -> None:
    s = busy_session("check again")
    s.user("check again")  # written when the queue drained
    s.text("Checked again: still passing.", usage(10500))
    s.call("Bash", {"command": "ls"}, "a\n", 10600)
    typed = section(summary(s), 6)
    assert typed.count("check again") == 1
    assert [f for f in facts_of(s) if f.kind == "instruction"] == [Fact("instruction", "Fix the date parser."), Fact("instruction", "check again")]


def test_a_queued_task_notification_is_not_typed_input() -> None:
    note = "<task-notification><task-id>b7x</task-id><status>completed</status><summary>Background build finished</summary></task-notification>"
    s = busy_session(note)
    text = summary(s)
    assert "task-notification" not in section(text, 6) and "Background build" not in section(text, 6)
    assert section(text, 9).strip().splitlines()[0] == 'Continue with the latest request: "Fix the date parser."'
    assert [f.text for f in facts_of(s) if f.kind == "instruction"] == ["Fix the date parser."]


def test_slash_commands_with_arguments_and_shell_commands_are_typed_but_a_bare_clear_is_not() -> None:
    s = Convo()
    s.user("<command-name>/clear</command-name>\n            <command-message>clear</command-message>\n            <command-args></command-args>")
    s.user("<command-message>review</command-message>\n<command-name>/review</command-name>\n<command-args>the auth module</command-args>")
    s.text("Reviewing the auth module.", usage(9000))
    s.user("<bash-input>ls</bash-input>")
    s.user("<bash-stdout>auth.py\nserver.py</bash-stdout><bash-stderr></bash-stderr>")
    s.text("Two files.", usage(9500))
    s.call("Read", {"file_path": "/home/dev/shop/auth.py"}, "x = 1\n", 9800)
    typed = section(summary(s), 6)
    assert "   - /review the auth module (slash command)\n" in typed
    assert "   - ! ls (shell command typed by the user)\n" in typed
    assert "/clear" not in typed and "bash-stdout" not in typed and "server.py" not in typed
    assert [f.text for f in facts_of(s) if f.kind == "instruction"] == ["/review the auth module", "! ls"]


# --- the line that names a failure --------------------------------------------------------------


def test_failure_line_takes_the_fatal_line_not_the_exit_code() -> None:
    output = (
        "Exit code 128\nfatal: The current branch x has no upstream branch.\nTo push the current branch and set the remote as upstream, use\n\n"
        "    git push --set-upstream origin x\n"
    )
    line = failure_line(output)
    assert line.startswith("fatal: The current branch x has no upstream branch.")
    assert "Exit code" not in line


def test_failure_line_takes_a_tracebacks_exception_line() -> None:
    output = (
        'Exit code 1\nTraceback (most recent call last):\n  File "/home/dev/shop/run.py", line 9, in <module>\n    main()\n'
        '  File "/home/dev/shop/run.py", line 5, in main\n    log.error("config: missing %s", key)\n'
        "  File \"/home/dev/shop/config.py\", line 12, in get\n    raise KeyError(key)\nKeyError: 'DATABASE_URL'\n"
    )
    assert failure_line(output) == "KeyError: 'DATABASE_URL'"


def test_failure_line_joins_a_header_and_its_cause_across_literal_backslash_n() -> None:
    line = failure_line("Pre-commit validation failed:\\n\\n[FORMAT] Code is not formatted.")
    assert "Pre-commit validation failed:" in line and "[FORMAT] Code is not formatted." in line
    assert "\\n" not in line and "\n" not in line


def test_failure_line_takes_a_linters_finding_not_its_progress() -> None:
    output = (
        "Exit code 2\nChecking 3 source files ...\n\n  Software Design\n┃\n"
        "┃ [D] ↘ Nested modules could be aliased at the top of the invoking module.\n"
        "┃       lib/app/parser.ex:12:5 #(App.Parser.parse)\n\n"
        "Please report incorrect results: https://github.com/rrrene/credo/issues\n\n"
        "Analysis took 0.1 seconds (0.05s to load, 0.05s running 55 checks on 3 files)\n"
        "12 mods/funs, found 1 software design suggestion.\n"
    )
    line = failure_line(output)
    assert line.startswith("[D]") and "Nested modules could be aliased" in line
    assert "Checking" not in line and "Analysis took" not in line


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "Exit code 1\nCompiling 12 files (.ex)\nGenerated shop app\n\n== Compilation error in file lib/shop.ex ==\n"
            "** (CompileError) lib/shop.ex:4: undefined function foo/0\n",
            "(CompileError) lib/shop.ex:4: undefined function foo/0",
        ),
        (
            "Exit code 101\n   Compiling libc v0.2.150\n   Compiling shop v0.1.0 (/home/dev/shop)\nerror[E0425]: cannot find value `x` in this scope\n"
            " --> src/main.rs:2:5\n",
            "error[E0425]: cannot find value `x` in this scope",
        ),
        ("Exit code 2\nBuilding shop...\nDownloading deps...\nmain.go:7:2: undefined: fooBar\n", "main.go:7:2: undefined: fooBar"),
    ],
)
def test_failure_line_never_picks_compiler_progress(output: str, expected: str) -> None:
    line = failure_line(output)
    assert expected in line
    for progress in ("Compiling", "Generated", "Building", "Downloading", "Exit code"):
        assert progress not in line


# --- failures in the summary --------------------------------------------------------------------

MIX_FAILURE = "Exit code 2\n\n  1) test parses day-month-year (ShopTest)\n     Assertion with == failed\n     left: ~D[2026-04-03]\n"


def test_repeats_are_counted_fixes_found_and_unresolved_listed_first() -> None:
    s = started()
    s.call("Bash", {"command": "ruff check ."}, "Exit code 1\nshop/dates.py:3:1: F401 [*] `os` imported but unused\n", 8800, error=True)
    s.call("Bash", {"command": "git push"}, "Exit code 128\nfatal: The current branch dates has no upstream branch.\n", 8900, error=True)
    s.call("Bash", {"command": "mix test"}, MIX_FAILURE, 9000, error=True)
    s.call("Bash", {"command": "mix test"}, MIX_FAILURE, 9200, error=True)
    s.call("Bash", {"command": "ruff check --fix ."}, "Found 1 error (1 fixed, 0 remaining).", 9300)
    s.call("Bash", {"command": "mix test test/shop_test.exs"}, "3 tests, 0 failures", 9400)  # same program and subcommand
    s.call(
        "Bash",
        {"command": "curl -sf localhost:4000/health"},
        "Exit code 7\ncurl: (7) Failed to connect to localhost port 4000: Connection refused\n",
        9600,
        error=True,
    )
    s.text("The push needs an upstream.", usage(9800))
    s.call("Read", {"file_path": "/home/dev/shop/mix.exs"}, "defmodule Shop.MixProject do\n", 10000)
    errors = section(summary(s), 4)
    items = [line for line in errors.splitlines() if line.startswith("   - [")]
    assert sorted(items) == sorted(
        [
            "   - [UNRESOLVED] Bash git push",
            "   - [UNRESOLVED] Bash curl -sf localhost:4000/health",
            "   - [fixed] Bash mix test (×2)",
            "   - [fixed] Bash ruff check .",
        ]
    )
    assert [item.split("]")[0] for item in items] == ["   - [UNRESOLVED"] * 2 + ["   - [fixed"] * 2  # open ones first
    assert "error: fatal: The current branch dates has no upstream branch." in errors
    assert "then succeeded: Bash mix test test/shop_test.exs" in errors
    facts = facts_of(s)
    assert Fact("error", "fatal: The current branch dates has no upstream branch.") in facts
    assert len([f for f in facts if f.kind == "fixed-error"]) == 2 and len([f for f in facts if f.kind == "error"]) == 2


def test_a_user_rejection_is_not_an_error() -> None:
    s = started()
    tool_id = s.tool_id()
    s.response([{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "rm -rf build"}}], usage(9000))
    s.result(tool_id, REJECTED, error=True)
    s.user("[Request interrupted by user for tool use]")
    s.user("Don't delete the build folder.")
    s.text("Understood, leaving it.", usage(9300))
    s.call("Read", {"file_path": "/home/dev/shop/Makefile"}, "all:\n", 9500)
    errors = section(summary(s), 4)
    assert "[UNRESOLVED]" not in errors and "[fixed]" not in errors and "doesn't want" not in errors
    assert "   - The user declined: Bash rm -rf build" in errors
    assert not [f for f in facts_of(s) if f.kind in ("error", "fixed-error")]


# --- open work ----------------------------------------------------------------------------------


def test_todo_list_open_items_are_pending_tasks() -> None:
    s = started()
    s.call(
        "TodoWrite",
        {
            "todos": [
                {"content": "Parse day-first dates", "status": "completed", "activeForm": "Parsing"},
                {"content": "Add the date cache", "status": "in_progress", "activeForm": "Adding"},
                {"content": "Document the format", "status": "pending", "activeForm": "Documenting"},
            ]
        },
        "Todos have been modified successfully.",
        9000,
    )
    closed(s)
    pending = section(summary(s), 7)
    assert "   - [in_progress] Add the date cache\n" in pending and "   - [pending] Document the format\n" in pending
    assert "Parse day-first dates" not in pending
    facts = facts_of(s)
    assert {f.text for f in facts if f.kind == "task"} == {"Add the date cache", "Document the format"}
    assert Fact("current-work", "Add the date cache") in facts


def task_session() -> Convo:
    s = started()
    s.call(
        "TaskCreate",
        {"subject": "Write the parser", "description": "Day-first dates", "activeForm": "Writing the parser"},
        "Task #1 created successfully: Write the parser",
        9000,
    )
    s.call(
        "TaskCreate",
        {"subject": "Write the docs", "description": "The date format", "activeForm": "Writing the docs"},
        "Task #2 created successfully: Write the docs",
        9100,
    )
    s.call("TaskUpdate", {"taskId": "1", "status": "in_progress"}, "Updated task #1 status", 9200)
    s.call("TaskUpdate", {"taskId": "2", "status": "completed"}, "Updated task #2 status", 9300)
    return closed(s)


def test_task_tools_give_open_tasks_and_the_current_work() -> None:
    s = task_session()
    text = summary(s)
    assert "   - [in_progress] Write the parser (task 1)\n" in section(text, 7)
    assert "Write the docs" not in section(text, 7)
    assert "Working on: Write the parser" in section(text, 8)
    facts = facts_of(s)
    assert Fact("task", "Write the parser") in facts and Fact("current-work", "Write the parser") in facts
    assert Fact("task", "Write the docs") not in facts


def bd_session(reason: str = '--reason="Fixed the cache-miss path and the read-through test"') -> Convo:
    s = started("Work on the proj-abc epic.")
    s.call(
        "Bash", {"command": "bd show proj-abc.2"}, "○ proj-abc.2 · Add the cache   [● P1 · OPEN]\n\nDescription:\nCache parsed dates by input string.\n", 9000
    )
    s.call("Bash", {"command": "bd update proj-abc.2 --status in_progress"}, "✓ Updated issue: proj-abc.2", 9100)
    s.call("Bash", {"command": f"bd close proj-abc.1 {reason}"}, "✓ Closed proj-abc.1: Parse day-first dates", 9200)
    return closed(s)


@pytest.mark.parametrize(
    "reason",
    [
        '--reason="Fixed the cache-miss path and the read-through test"',
        "--reason 'Fixed the cache-miss path and the read-through test'",
        "--reason=cache-miss",
        "--reason cache-miss --add-label needs-review",
    ],
)  # flag values are no ids
def test_bd_ids_with_their_last_state_and_the_closed_ones(reason: str) -> None:
    s = bd_session(reason)
    pending = section(summary(s), 7)
    assert "   - [in_progress] proj-abc.2: Add the cache\n" in pending
    assert "   - Closed in this session: proj-abc.1\n" in pending
    assert "cache-miss" not in pending and "read-through" not in pending
    tasks = [f.text for f in facts_of(s) if f.kind == "task"]
    assert tasks == ["proj-abc.2: Add the cache"]


def test_a_plan_file_is_shown_as_edited() -> None:
    s = started()
    plan = "/home/u/.claude/plans/x.md"
    s.call(
        "Write", {"file_path": plan, "content": "# Dates plan\n\n1. Parse day-first dates\n2. Cache results\n"}, f"File created successfully at: {plan}", 9000
    )
    s.call(
        "Edit",
        {"file_path": plan, "old_string": "2. Cache results", "new_string": "2. Cache results in an LRU of 512 entries"},
        f"The file {plan} has been updated.",
        9100,
    )
    closed(s)
    pending = section(summary(s), 7)
    assert f"   - Plan ({plan}):\n" in pending
    assert "     2. Cache results in an LRU of 512 entries\n" in pending
    assert "     1. Parse day-first dates\n" in pending
    assert "     2. Cache results\n" not in pending


def test_an_exit_plan_mode_plan_is_pending_work() -> None:
    s = started()
    s.call(
        "ExitPlanMode",
        {"plan": "## Plan\n- Step one: switch the parser to day-first\n- Step two: add a regression test"},
        "User has approved your plan. You can now start coding.",
        9000,
    )
    closed(s)
    pending = section(summary(s), 7)
    assert "   - Plan (the plan presented with ExitPlanMode):\n" in pending
    assert "- Step one: switch the parser to day-first" in pending and "- Step two: add a regression test" in pending


def test_none_recorded_only_when_there_is_no_open_work() -> None:
    s = closed(started())
    assert section(summary(s), 7).strip() == "(none recorded)"


def todo_only() -> Convo:
    s = started()
    s.call(
        "TodoWrite",
        {"todos": [{"content": "Document the format", "status": "pending", "activeForm": "Documenting"}]},
        "Todos have been modified successfully.",
        9000,
    )
    return closed(s)


def plan_only() -> Convo:
    s = started()
    s.call("ExitPlanMode", {"plan": "- Switch the parser to day-first"}, "User has approved your plan.", 9000)
    return closed(s)


@pytest.mark.parametrize("build", [todo_only, task_session, bd_session, plan_only])
def test_any_source_of_open_work_fills_pending_tasks(build: Any) -> None:
    assert "(none recorded)" not in section(summary(build()), 7)


def test_an_unfinished_request_is_pending_work() -> None:
    s = started()
    s.call("Read", {"file_path": "/home/dev/shop/parser.py"}, "def parse(s): ...\n", 9000)
    s.text("The parser splits on '/'.", usage(9200))
    s.call("Read", {"file_path": "/home/dev/shop/dates.py"}, "DAY_FIRST = True\n", 9400)
    assert '   - Request not yet shown done: "Fix the date parser."' in section(summary(s), 7)


def test_a_request_is_done_by_a_later_sign_but_the_latest_only_by_the_last_words() -> None:
    s = started("Fix the date parser.")
    s.text("Fixed: the parser reads day-first dates.", usage(9000))
    s.user("Now do the same for the time parser, and then the zone parser.")
    s.call("Edit", {"file_path": "/home/dev/shop/times.py", "old_string": "a", "new_string": "b"}, "ok", 9200)
    s.text("The time parser is done; the zone parser is next.", usage(9400))  # one part done, not the request
    s.call("Read", {"file_path": "/home/dev/shop/zones.py"}, "ZONES = {}\n", 9600)
    pending = section(summary(s), 7)
    assert "Fix the date parser." not in pending  # a later "Fixed:" shows it done
    assert '   - Request not yet shown done: "Now do the same for the time parser, and then the zone parser."' in pending
    s.text("Done: both parsers now read day-first.", usage(9800))
    assert "Request not yet shown done" not in section(summary(s), 7)


def test_key_concepts_count_commands_by_program_and_files_by_changes() -> None:
    s = started()
    for n, command in enumerate(["cd /home/dev/shop && pytest -q tests/test_dates.py", "pytest -q", "git add dates.py", "git push"]):
        s.call("Bash", {"command": command}, "ok", 9000 + n)
    for n in range(3):
        s.call("Edit", {"file_path": "/home/dev/shop/dates.py", "old_string": str(n), "new_string": str(n + 1)}, "ok", 9100 + n)
    s.call("Write", {"file_path": "/home/dev/shop/zones.py", "content": "ZONES = {}\n"}, "ok", 9200)
    closed(s)
    text = summary(s)
    assert "   - Commands run: pytest ×2, git add ×1, git push ×1\n" in section(text, 2)
    files = section(text, 3)
    assert "   - /home/dev/shop/dates.py — edited (3 changes)\n" in files and "   - /home/dev/shop/zones.py — written\n" in files


# --- findings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "said, kept, dropped",
    [
        (
            "Let me read the file. The test fails because the parser reads day-month-year. Now I'll fix it:",
            "The test fails because the parser reads day-month-year.",
            ["Let me read", "Now I'll fix"],
        ),
        (
            "Let me check whether this is caused by the locale. Now I'll fix the bug in the parser so that it reads day-first.\n"
            "Switched the parser to day-first dates instead of month-first.",  # narration is dropped even with a concluding word in it
            "Switched the parser to day-first dates instead of month-first.",
            ["caused by the locale", "fix the bug"],
        ),
    ],
)
def test_findings_keep_the_explanation_and_drop_the_narration(said: str, kept: str, dropped: list[str]) -> None:
    s = started()
    s.text(said, usage(9000))
    s.call("Read", {"file_path": "/home/dev/shop/parser.py"}, "def parse(s): ...\n", 9200)
    s.call("Read", {"file_path": "/home/dev/shop/dates.py"}, "DAY_FIRST = True\n", 9400)
    findings = section(summary(s), 5)
    assert f"   - {kept}\n" in findings
    assert not [text for text in dropped if text in findings]


# --- the verifier -------------------------------------------------------------------------------


def test_a_summary_missing_an_error_line_is_caught_by_kind() -> None:
    s = started()
    s.call("Edit", {"file_path": "/home/dev/shop/parser.py", "old_string": "a", "new_string": "b"}, "The file /home/dev/shop/parser.py has been updated.", 9000)
    s.call("Bash", {"command": "git push"}, "Exit code 128\nfatal: The current branch dates has no upstream branch.\n", 9200, error=True)
    s.text("Push failed.", usage(9400))
    s.call("Read", {"file_path": "/home/dev/shop/dates.py"}, "DAY_FIRST = True\n", 9600)
    facts = facts_of(s)
    text = summary(s)
    assert verify(facts, text).missing == []  # the offline summary carries them all
    line = "fatal: The current branch dates has no upstream branch."
    checked = verify(facts, text.replace(line, "(an error)"))
    assert checked.missing == [Fact("error", line)]
    kinds = checked.by_kind()
    assert kinds["error"] == KindRecall(facts=1, carried=0, recall=0.0)
    assert kinds["file"] == KindRecall(facts=1, carried=1, recall=1.0)
    assert kinds["instruction"] == KindRecall(facts=1, carried=1, recall=1.0)
    assert kinds["last-request"] == KindRecall(facts=1, carried=1, recall=1.0)
    assert checked.recall == pytest.approx(1 - 1 / len(facts))


def test_by_kind_counts_each_kind() -> None:
    facts = [
        Fact("instruction", "add the cache"),
        Fact("instruction", "check again"),
        Fact("file", "/a/b.py"),
        Fact("task", "Write the docs"),
        Fact("task", "Write the parser"),
    ]
    checked = verify(facts, "The user said: Add the CACHE.\nEdited /a/b.py. Open: Write the parser.")
    assert checked.by_kind() == {
        "instruction": KindRecall(facts=2, carried=1, recall=0.5),
        "file": KindRecall(facts=1, carried=1, recall=1.0),
        "task": KindRecall(facts=2, carried=1, recall=0.5),
    }
    assert list(checked.by_kind()) == ["instruction", "file", "task"]  # FACT_KINDS order


def test_verify_handles_twenty_thousand_facts_and_a_five_megabyte_context() -> None:
    kinds = ("instruction", "file", "error", "task")
    facts = [Fact(kinds[n % 4], f"item {n:05d} of module_{n} in /src/pkg{n % 97}/file{n}.py") for n in range(20_000)]
    carried = "\n".join(f.text for n, f in enumerate(facts) if n % 2 == 0)
    haystack = carried + "\n" + "filler text " * ((5_000_000 - len(carried)) // 12)
    assert len(haystack) >= 4_900_000
    checked = verify(facts, haystack)
    assert len(checked.missing) == 10_000
    assert {f.text for f in checked.missing} == {f.text for n, f in enumerate(facts) if n % 2}


# --- compact summarizes what microcompact cleared -------------------------------------------------

DISTINCTIVE = "fatal: refusing to merge unrelated histories (ZEBRA-7731)"


def test_compact_summary_keeps_an_error_microcompact_cleared_and_names_the_transcript_absolutely(tmp_path: Path) -> None:
    s = started("Merge the upstream branch.")
    s.call("Bash", {"command": "git merge upstream/main"}, f"Exit code 128\n{DISTINCTIVE}\n", 9000, error=True)
    s.text("The merge is refused; the histories are unrelated.", usage(9200))
    for n in range(8):  # more than --keep-recent 5 later calls: the failed result is old enough to be cleared
        s.call("Read", {"file_path": f"/home/dev/shop/mod{n}.py"}, f"x = {n}\n" * 40, 9400 + 200 * n)
    s.text("Read the modules.", usage(11200))
    s.user("Keep going.")
    s.text("On it.", usage(11400))
    (tmp_path / "s.jsonl").write_bytes(s.to_bytes())
    result = ok(
        run_cli(
            "compact",
            "--force",
            "--engine",
            "offline",
            "--source",
            "transcript",
            "--now",
            NOW_ISO,
            "--keep-last",
            "2",
            "s.jsonl",
            env={"ANTHROPIC_API_KEY": ""},
            cwd=tmp_path,
        )
    )
    out = result.stdout
    # The failed result itself was cleared in the output ...
    failed_id = "toolu_01T00001"
    results = [
        b
        for o in lines_of(out)
        if isinstance(o.get("message", {}).get("content"), list)
        for b in o["message"]["content"]
        if b.get("type") == "tool_result" and b.get("tool_use_id") == failed_id
    ]
    assert results and all(DISTINCTIVE not in str(b.get("content")) for b in results)
    # ... and the summary still names it.
    text = summary_of(out)
    assert DISTINCTIVE in section(text, 4)
    named = text.split("read the full transcript at: ", 1)[1].splitlines()[0].strip()
    assert os.path.isabs(named)
    assert Path(named).samefile(tmp_path / "s.jsonl")


# --- what the review of the first version found ---------------------------------------------------


def test_a_bd_show_that_does_not_name_its_id_is_no_crash() -> None:
    s = started()
    s.call("Bash", {"command": "bd show foo-abc | grep status"}, "No issue found.", 9000)
    closed(s)
    assert "foo-abc" in section(summary(s), 7)  # seen, with no title to take


def fixed_or_not(first: tuple[str, dict[str, Any], str], then: tuple[str, dict[str, Any], str]) -> str:
    s = started()
    s.call(first[0], first[1], first[2], 9000, error=True)
    s.call(then[0], then[1], then[2], 9100)
    closed(s)
    return section(summary(s), 4)


@pytest.mark.parametrize(
    "failed, succeeded, fixed",
    [
        (
            ("Edit", {"file_path": "/p/app.py", "old_string": "a", "new_string": "b"}, "String to replace not found in file."),
            ("Read", {"file_path": "/p/app.py"}, "x = 1\n"),
            False,
        ),  # reading a file does not fix an edit of it
        (
            ("Edit", {"file_path": "/p/app.py", "old_string": "a", "new_string": "b"}, "String to replace not found in file."),
            ("Edit", {"file_path": "/p/app.py", "old_string": "x", "new_string": "y"}, "ok"),
            True,
        ),
        (
            ("Bash", {"command": 'python -c "import mylib"'}, "ModuleNotFoundError: No module named 'mylib'"),
            ("Bash", {"command": 'python -c "import sys; print(sys.version)"'}, "3.11"),
            False,
        ),
        (
            ("Bash", {"command": "pytest tests/test_parser.py"}, "FAILED tests/test_parser.py::test_day - assert 1 == 2"),
            ("Bash", {"command": "pytest tests/test_util.py"}, "3 passed"),
            False,
        ),
        (
            ("Bash", {"command": "pytest tests/test_parser.py"}, "FAILED tests/test_parser.py::test_day - assert 1 == 2"),
            ("Bash", {"command": "cd /p && pytest -q"}, "12 passed"),
            True,
        ),  # a broader run
        (
            ("Bash", {"command": "git push"}, "fatal: The current branch x has no upstream branch."),
            ("Bash", {"command": "git push --set-upstream origin x"}, "ok"),
            True,
        ),
        (
            ("Bash", {"command": "mix credo --strict lib/a.ex lib/b.ex 2>&1"}, "[D] Nested modules could be aliased"),
            ("Bash", {"command": "mix compile --warnings-as-errors 2>&1 && mix credo --strict lib/a.ex 2>&1"}, "ok"),
            True,
        ),  # a chain ran both; they share lib/a.ex
        (
            ("Bash", {"command": 'git add lib/x.ex && git commit -m "feat: x; and y"'}, "fatal: pathspec 'lib/x.ex' is beyond a symbolic link"),
            ("Bash", {"command": "git add priv/x.exs && git commit -m \"$(cat <<'EOF'\nfeat: x\nEOF\n)\""}, "ok"),
            True,
        ),  # the commit went through
        (
            ("Bash", {"command": "mix credo --strict lib/a.ex"}, "[D] Nested modules could be aliased"),
            ("Bash", {"command": "mix compile && echo 'mix credo --strict lib/a.ex'"}, "ok"),
            False,
        ),  # quoted text is no command
    ],
)
def test_a_success_fixes_a_failure_only_of_the_same_kind_and_target(failed: Any, succeeded: Any, fixed: bool) -> None:
    errors = fixed_or_not(failed, succeeded)
    assert errors.startswith("   - [fixed]" if fixed else "   - [UNRESOLVED]"), errors


def test_a_failure_that_comes_back_after_a_fix_is_open_again_and_listed_once() -> None:
    s = started()
    for n, error in enumerate([True, False, True]):
        s.call("Bash", {"command": "pyright"}, "a.py:3:1 - error: x is not defined" if error else "0 errors", 9000 + n, error=error)
    closed(s)
    errors = section(summary(s), 4)
    assert errors.count("x is not defined") == 1 and "   - [UNRESOLVED] Bash pyright (×2)\n" in errors


def test_the_reason_typed_when_declining_a_call_is_a_user_message() -> None:
    s = started()
    reason = "Let's keep the name of the py file but change the pyproject script to reference it, otherwise gtg"
    s.call(
        "Edit",
        {"file_path": "/p/pyproject.toml", "old_string": "a", "new_string": "b"},
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT "
        f"written to the file). The user provided the following reason for the rejection:  {reason}",
        9000,
        error=True,
    )
    closed(s)
    text = summary(s)
    assert f"   - {reason}\n" in section(text, 6) and "The user declined: Edit /p/pyproject.toml" in section(text, 4)
    assert Fact("instruction", reason) in facts_of(s)


def test_a_queued_prompt_removed_from_the_queue_reached_the_model_mid_turn() -> None:
    """2.1.88 and before write a bare `remove` when a queued prompt is attached to the turn in
    progress (the only place its text is recorded): it is a message like any other."""
    s = started()
    s.call("Read", {"file_path": "/p/a.py"}, "x\n", 9000)
    queued(s, "new beads for the epic were added. tackle them")
    s.raw({"type": "queue-operation", "operation": "remove", "timestamp": "2026-03-04T10:30:01.000Z", "sessionId": s.session_id})
    s.call("Read", {"file_path": "/p/b.py"}, "y\n", 9100)
    assert "   - new beads for the epic were added. tackle them (typed while the agent was busy)\n" in section(summary(s), 6)
    assert Fact("instruction", "new beads for the epic were added. tackle them") in facts_of(s)


@pytest.mark.parametrize(
    "taken_back",
    [
        {"operation": "remove", "reason": "cleared_on_cancel"},  # 2.1.332: the user pressed Esc
        {"operation": "popAll", "content": "deploy it to production now"},  # 2.1.88: pulled back into the input
    ],
)
def test_a_queued_prompt_the_user_took_back_is_no_message(taken_back: dict[str, str]) -> None:
    s = started()
    s.call("Read", {"file_path": "/p/a.py"}, "x\n", 9000)
    queued(s, "deploy it to production now")
    s.raw({"type": "queue-operation", **taken_back, "timestamp": "2026-03-04T10:30:01.000Z", "sessionId": s.session_id})
    queued(s, "check again")
    s.call("Read", {"file_path": "/p/b.py"}, "y\n", 9100)
    text = summary(s)
    assert "deploy it" not in text and "   - check again (typed while the agent was busy)\n" in section(text, 6)


@pytest.mark.parametrize(
    "words",
    [
        "I could not complete the migration.",
        "The tests are still not fixed.",
        "I haven't finished the migration yet.",
        "Migration done for orders; users is next.",
    ],
)
def test_words_that_deny_or_defer_are_no_sign_of_done(words: str) -> None:
    s = started("Migrate the orders and users tables.")
    s.call("Bash", {"command": "alembic upgrade head"}, "ok", 9000)
    s.text(words, usage(9100))
    assert '   - Request not yet shown done: "Migrate the orders and users tables."' in section(summary(s), 7)


def test_a_rejected_plan_is_no_pending_plan() -> None:
    s = started()
    s.call("ExitPlanMode", {"plan": "- Drop the orders table"}, "User rejected Claude's plan.", 9000, error=True)
    closed(s)
    assert "Drop the orders table" not in section(summary(s), 7)


def test_warnings_and_progress_never_name_a_failure() -> None:
    output = "WARN ty is pre-release software and may have bugs and fatal errors.\nerror[call-non-callable]: Object of type `None` is not callable"
    assert failure_line(output) == "error[call-non-callable]: Object of type `None` is not callable"


def test_a_call_keeps_its_backslashes() -> None:
    s = started()
    s.call("Bash", {"command": "printf 'a\\nb' > C:\\Users\\nick\\notes.txt"}, "ok", 9000)
    closed(s)
    assert "printf 'a\\nb' > C:\\Users\\nick\\notes.txt" in section(summary(s, keep_last=1), 8)


@pytest.mark.parametrize(
    "fact, context, carried",
    [
        (Fact("instruction", "Don't push this branch until the review is done"), "pushed the branch after the review; work done; until then", False),
        (Fact("instruction", "please update the tests and the readme files"), "pleased: updates to tests/ and readme.md", False),
        (Fact("instruction", "please update the tests and the readme files now"), "Please update the tests and the README files, now.", True),
        (Fact("file", "a.py"), "edited data.py", False),
        (Fact("file", "a.py"), "edited a.py, then data.py", True),
        (Fact("instruction", "y"), "   - y\n", True),
        (Fact("instruction", "y"), "yes", False),
    ],
)
def test_the_verifier_matches_whole_words_and_negations(fact: Fact, context: str, carried: bool) -> None:
    assert (verify([fact], context).missing == []) == carried


def test_the_verifier_finds_many_facts_that_share_a_long_prefix() -> None:
    prefix = "/users/dev/project/src/converter.py:"
    facts = [Fact("error", f"{prefix}{n}:17 - error: Argument of type None cannot be assigned") for n in range(3000)]
    context = "\n".join(f.text for f in facts[::2])
    missing = verify(facts, context).missing
    assert missing == facts[1::2]


def test_an_error_known_only_from_the_assistant_s_words_is_a_fact_until_it_says_it_is_fixed() -> None:
    """A subagent's report or output the assistant summed up may be the only place an error is named."""
    s = started()
    s.call("Task", {"description": "run the suite", "prompt": "run it"}, "The suite ran: 3 failures.", 9000)
    s.text("The suite fails with TypeError: Cannot read properties of undefined (reading 'id'). Looking at the mapper next.", usage(9100))
    error = "TypeError: Cannot read properties of undefined (reading 'id')"
    assert Fact("error", error) in facts_of(s)
    s.call("Edit", {"file_path": "/p/mapper.ts", "old_string": "a", "new_string": "b"}, "ok", 9200)
    s.text("Fixed: the mapper checks for a missing record; all 40 tests pass.", usage(9300))
    assert Fact("fixed-error", error) in facts_of(s) and Fact("error", error) not in facts_of(s)


def test_an_error_a_call_showed_is_not_counted_again_from_the_words_that_quote_it() -> None:
    s = started()
    s.call("Bash", {"command": "npm test"}, "FAIL src/a.test.ts\nTypeError: x is not a function\n    at a.ts:3", 9000, error=True)
    s.text("It fails with TypeError: x is not a function, as expected from the rename.", usage(9100))
    errors = [fact for fact in facts_of(s) if fact.kind == "error"]
    assert [fact.text for fact in errors] == ["TypeError: x is not a function"]


def test_words_that_only_name_an_exception_are_no_error() -> None:
    s = started()
    s.text("The client retries on ValueError and raises TimeoutError after 3 attempts.", usage(9000))
    assert not [fact for fact in facts_of(s) if fact.kind in ("error", "fixed-error")]


def test_a_bare_slash_command_queued_as_a_prompt_is_no_message() -> None:
    """`claude -p --resume ID /compact` queues "/compact" itself: it asks nothing of the model."""
    s = started("Fix the date parser.")
    queued(s, "/compact")
    assert [fact.text for fact in facts_of(s) if fact.kind == "last-request"] == ["Fix the date parser."]


def test_a_plan_file_s_unchecked_steps_are_open_tasks_even_past_the_plan_s_excerpt() -> None:
    """The summary quotes a plan's first 1,500 characters; its open steps are facts of their own."""
    s = started()
    plan = "/home/u/.claude/plans/big.md"
    body = "# Plan\n\n" + "Background. " * 200 + "\n\n- [x] Parse day-first dates\n- [ ] Cache results in an LRU\n1. [ ] Document the cache\n"
    s.call("Write", {"file_path": plan, "content": body}, f"File created successfully at: {plan}", 9000)
    closed(s)
    tasks = [fact.text for fact in facts_of(s) if fact.kind == "task"]
    assert tasks == ["Cache results in an LRU", "Document the cache"]  # the checked step is done
    pending = section(summary(s), 7)
    assert "   - Plan step not done: Cache results in an LRU\n" in pending and "   - Plan step not done: Document the cache\n" in pending


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "\n", "\t", "\u2003", "\u3000", "xy", "  \n "]), max_size=600).map("".join), st.integers(1, 80))
def test_a_long_text_is_folded_only_as_far_as_its_cut_needs(text: str, limit: int) -> None:
    """folded (one_line's and the report excerpts' folding) reads the same as folding the whole text:
    the whole when it is short, else a start of it longer than the limit, so a cut reads alike."""
    whole = re.sub(r"\s+", " ", text).strip()
    start = folded(text, limit)
    if len(whole) <= limit:
        assert start == whole
    else:
        assert len(start) > limit and whole.startswith(start)
        assert one_line(text, limit) == whole[: limit - 1].rstrip() + "…"


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        st.characters(codec="utf-8", categories=("Zs", "Zl", "Zp", "Cc", "Ll", "Nd")) | st.sampled_from(["\x1c", "\x1f", "\x85", "\u180e", "\u200b", "\ufeff"])
    )
)
def test_spaced_folds_as_the_whitespace_pattern_does(text: str) -> None:
    """spaced (str.split's whitespace) takes the same characters as the pattern `\\s` it stands in for,
    control separators and every Unicode space included, and the near-spaces neither takes."""
    assert spaced(text) == re.sub(r"\s+", " ", text).strip()


def test_a_message_of_megabytes_is_folded_from_its_start() -> None:
    text = "word \n\t " * 2_000_000  # 16 MB
    assert folded(text, 40) == ("word " * 200).strip()[: len(folded(text, 40))]
    assert one_line(text, 12) == "word word w…"
