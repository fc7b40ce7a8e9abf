"""ctxpipe as Claude Code's hooks: the settings it merges and takes out, and each hook on its own.

The hooks run as Claude Code runs them: `python -m ctxpipe hook NAME` with the hook's JSON on stdin,
in a child process whose HOME is a temporary folder (their state lives under it). The whole loop
with the real Claude Code 2.1.332 is tests/test_claude_code_hooks.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import usage
from ctxpipe.core.hook_settings import HOOKS, installed, ours, with_ctxpipe, without_ctxpipe
from helpers import child_env
from test_summarize import Convo

PROGRAM = "/opt/venv/bin/python -m ctxpipe"
USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": "notify-send compacting"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
    },
    "statusLine": {"type": "command", "command": "ctxpipe statusline"},
}


# --- the settings -------------------------------------------------------------------------------------


def test_install_adds_one_hook_per_event_and_keeps_everything_else() -> None:
    merged = with_ctxpipe(USER_SETTINGS, PROGRAM)
    assert installed(merged) == {event: f"{PROGRAM} hook {name}" for event, name in HOOKS.items()}
    assert merged["hooks"]["PreCompact"][0] == USER_SETTINGS["hooks"]["PreCompact"][0]  # the user's own hook, first
    assert merged["hooks"]["Stop"] == USER_SETTINGS["hooks"]["Stop"] and merged["statusLine"] == USER_SETTINGS["statusLine"]
    assert with_ctxpipe(merged, PROGRAM) == merged, "a second install changes nothing"
    moved = with_ctxpipe(merged, "ctxpipe")  # another interpreter: the same entries, their command replaced
    assert sum(len(group["hooks"]) for group in moved["hooks"]["PreCompact"]) == 2 and installed(moved)["PreCompact"] == "ctxpipe hook pre-compact"


def test_uninstall_takes_out_only_what_install_added() -> None:
    assert without_ctxpipe(with_ctxpipe(USER_SETTINGS, PROGRAM)) == USER_SETTINGS
    assert without_ctxpipe(with_ctxpipe({}, PROGRAM)) == {}
    # A user's hook that shares a group with ctxpipe's stays, in that group.
    shared = {"hooks": {"PostCompact": [{"hooks": [{"type": "command", "command": "ctxpipe hook post-compact"}, {"type": "command", "command": "log.sh"}]}]}}
    assert without_ctxpipe(shared) == {"hooks": {"PostCompact": [{"hooks": [{"type": "command", "command": "log.sh"}]}]}}


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("ctxpipe hook pre-compact", "pre-compact"),
        ("/home/me/.venv/bin/python -m ctxpipe hook prompt", "prompt"),
        ("'/path with space/python' -m ctxpipe hook session-start", "session-start"),
        ("/usr/local/bin/ctxpipe hook post-compact --verbose", "post-compact"),
        ("mycxtpipe hook pre-compact", None),
        ("ctxpipe statusline", None),
        ("echo ctxpipe hook nonsense", None),
    ],
)
def test_a_hook_is_ctxpipe_s_by_what_it_runs(command: str, name: str | None) -> None:
    assert ours({"type": "command", "command": command}) == name


@pytest.mark.parametrize(
    "command",
    [
        "sh -c 'ctxpipe hook prompt || true'",
        'bash -lc "ctxpipe hook prompt"',
        "CTX_LOG=1 nice -n 19 ctxpipe hook prompt 2>>/tmp/ctx.log",
        "cd /srv && ctxpipe hook prompt",
        'ctxpipe hook prompt --note "$HOME"',
    ],
)
def test_a_hook_the_user_wrapped_is_left_as_written(command: str) -> None:
    # Rewriting only what follows `hook NAME` dropped the wrapper's opening quote and kept its
    # closing one: a command the shell refuses (exit 2, which Claude Code takes as "block").
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command}]}]}}
    merged = with_ctxpipe(settings, PROGRAM)
    assert merged["hooks"]["UserPromptSubmit"] == settings["hooks"]["UserPromptSubmit"]  # as written, and not twice
    assert installed(merged)["UserPromptSubmit"] == command and installed(merged)["PreCompact"] == f"{PROGRAM} hook pre-compact"
    assert with_ctxpipe(merged, PROGRAM) == merged


@pytest.mark.parametrize(
    ("command", "renewed"),
    [
        ("ctxpipe hook pre-compact --block-when 'tokens<40k'", f"{PROGRAM} hook pre-compact --block-when 'tokens<40k'"),
        ("'/old venv/bin/python' -P -m ctxpipe hook pre-compact", f"{PROGRAM} hook pre-compact"),
        ("/usr/local/bin/ctxpipe hook pre-compact", f"{PROGRAM} hook pre-compact"),
    ],
)
def test_a_plain_hook_gets_the_new_program_and_keeps_its_options(command: str, renewed: str) -> None:
    settings = {"hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": command, "timeout": 30}]}]}}
    [entry] = with_ctxpipe(settings, PROGRAM)["hooks"]["PreCompact"][0]["hooks"]
    assert entry == {"type": "command", "command": renewed, "timeout": 30}


def ctxpipe(*args: str, home: Path, stdin: bytes = b"", cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = child_env({"HOME": str(home), "CLAUDE_CONFIG_DIR": "", "ANTHROPIC_API_KEY": ""})
    return subprocess.run([sys.executable, "-m", "ctxpipe", *args], input=stdin, capture_output=True, env=env, cwd=cwd or home, timeout=120)


def test_hooks_install_and_uninstall_leave_the_user_s_file_as_it_was(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = json.dumps(USER_SETTINGS, indent=4).encode()  # not how ctxpipe writes JSON: the bytes must still come back
    settings.write_bytes(original)
    dry = ctxpipe("hooks", "install", "--dry-run", home=tmp_path)
    assert dry.returncode == 0 and settings.read_bytes() == original and b"hook pre-compact" in dry.stdout
    assert ctxpipe("hooks", "install", home=tmp_path).returncode == 0
    after = json.loads(settings.read_bytes())
    assert set(installed(after)) == set(HOOKS) and without_ctxpipe(after) == USER_SETTINGS
    assert (tmp_path / ".claude" / "settings.json.ctxpipe-backup").read_bytes() == original
    again = ctxpipe("hooks", "install", home=tmp_path)
    assert b"nothing to change" in again.stderr and json.loads(settings.read_bytes()) == after
    assert ctxpipe("hooks", "uninstall", home=tmp_path).returncode == 0
    assert settings.read_bytes() == original


def test_uninstall_removes_the_settings_file_install_created(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    assert ctxpipe("hooks", "install", "--project", home=tmp_path, cwd=project).returncode == 0
    assert installed(json.loads((project / ".claude" / "settings.json").read_bytes()))
    assert not (tmp_path / ".claude" / "settings.json").exists(), "--project leaves the user's settings alone"
    assert ctxpipe("hooks", "uninstall", "--project", home=tmp_path, cwd=project).returncode == 0
    assert not (project / ".claude" / "settings.json").exists()


def test_a_settings_file_that_is_not_json_is_refused_and_left_alone(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(b"{ not json")
    done = ctxpipe("hooks", "install", home=tmp_path)
    assert done.returncode != 0 and b"not JSON" in done.stderr and b"Traceback" not in done.stderr
    assert settings.read_bytes() == b"{ not json"


def test_a_program_whose_hooks_would_not_be_found_again_is_refused(tmp_path: Path) -> None:
    # Installed twice, its hooks ran twice; uninstall left them (it finds ctxpipe's by the name).
    done = ctxpipe("hooks", "install", "--program", "/opt/tools/ctx", home=tmp_path)
    assert done.returncode == 2 and b"Invalid value for --program" in done.stderr and b"Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / ".claude" / "settings.json").exists()


@pytest.mark.parametrize(
    ("hooks", "said"),
    [([1], b'"hooks" is a list'), ({"PreCompact": {"hooks": [{"command": "mine"}]}}, b'"hooks"."PreCompact" is a dict'), ("x", b'"hooks" is a str')],
)
def test_hooks_of_another_shape_are_refused_not_overwritten(tmp_path: Path, hooks: Any, said: bytes) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = json.dumps({"model": "opus", "hooks": hooks}).encode()
    settings.write_bytes(original)
    done = ctxpipe("hooks", "install", home=tmp_path)
    assert done.returncode == 1 and said in done.stderr and str(settings).encode() in done.stderr, done.stderr
    assert settings.read_bytes() == original
    # null is no hooks: nothing of it is lost.
    settings.write_bytes(b'{"hooks": null}')
    assert ctxpipe("hooks", "install", home=tmp_path).returncode == 0
    assert set(installed(json.loads(settings.read_bytes()))) == set(HOOKS)


def test_settings_nested_too_deeply_are_one_line(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    for depth in (3000, 600):  # past json's own limit; under it, past what a copy of it can walk
        original = b'{"a": ' + b"[" * depth + b"]" * depth + b"}"
        settings.write_bytes(original)
        for action in ("install", "uninstall"):
            done = ctxpipe("hooks", action, home=tmp_path)
            assert b"Traceback" not in done.stderr and b"internal error" not in done.stderr, done.stderr
            assert done.returncode in (0, 1) and settings.read_bytes() == original


def test_a_settings_path_that_is_no_file_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "settings.json"
    os.mkfifo(fifo)
    for action in ("install", "uninstall"):
        done = ctxpipe("hooks", action, "--settings", str(fifo), home=tmp_path)  # a read would wait for a writer
        assert done.returncode == 1 and b"not a regular file" in done.stderr, done.stderr
    assert fifo.is_fifo()


def test_a_read_only_settings_file_is_left_as_it_is(tmp_path: Path) -> None:
    # chmod a-w says "do not change this": the rename install writes with needs no write permission
    # on the file itself (and root has every permission), so it is asked of the mode.
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = json.dumps(USER_SETTINGS).encode()
    settings.write_bytes(original)
    settings.chmod(0o444)
    done = ctxpipe("hooks", "install", home=tmp_path)
    assert done.returncode == 1 and b"read-only" in done.stderr and settings.read_bytes() == original, done.stderr
    assert ctxpipe("hooks", "install", "--dry-run", home=tmp_path).returncode == 0  # showing what it would be changes nothing
    settings.chmod(0o644)
    assert ctxpipe("hooks", "install", home=tmp_path).returncode == 0
    settings.chmod(0o444)
    done = ctxpipe("hooks", "uninstall", home=tmp_path)
    assert done.returncode == 1 and b"read-only" in done.stderr and installed(json.loads(settings.read_bytes()))


def test_uninstall_through_a_link_removes_the_file_install_made_not_the_link(tmp_path: Path) -> None:
    # A dotfiles manager's link to a file not there yet: install makes the file at its end, and
    # uninstall takes that out again, leaving the link as it found it.
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles / "settings.json")
    assert ctxpipe("hooks", "install", home=tmp_path).returncode == 0
    assert installed(json.loads((dotfiles / "settings.json").read_bytes())) and link.is_symlink()
    assert ctxpipe("hooks", "uninstall", home=tmp_path).returncode == 0
    assert link.is_symlink() and not (dotfiles / "settings.json").exists()


def test_project_settings_run_ctxpipe_by_its_name(tmp_path: Path) -> None:
    # A project's settings are shared: this machine's interpreter is not another's.
    project = tmp_path / "proj"
    project.mkdir()
    assert ctxpipe("hooks", "install", "--project", home=tmp_path, cwd=project).returncode == 0
    assert installed(json.loads((project / ".claude" / "settings.json").read_bytes()))["PreCompact"] == "ctxpipe hook pre-compact"


# --- the hooks ------------------------------------------------------------------------------------------

REQUEST = "Add retries to the HTTP client"
QUEUED = "also log each retry at debug level"
TODO = "Document the retry policy"


def session(tmp_path: Path) -> Path:
    s = Convo()
    s.user(REQUEST)
    s.call("Edit", {"file_path": "/home/dev/shop/src/http/client.py", "old_string": "a", "new_string": "b"}, "ok", 9_000)
    s.raw({"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-03-04T10:30:00.000Z", "sessionId": s.session_id, "content": QUEUED})
    s.raw({"type": "queue-operation", "operation": "remove", "timestamp": "2026-03-04T10:30:01.000Z", "sessionId": s.session_id})
    s.call("TodoWrite", {"todos": [{"content": TODO, "status": "pending"}]}, "ok", 9_500)
    s.text("Working on it.", usage(10_000))
    return s.write(tmp_path / "session.jsonl")


def hook(name: str, payload: dict[str, Any], home: Path, *flags: str) -> subprocess.CompletedProcess[bytes]:
    return ctxpipe("hook", name, *flags, home=home, stdin=json.dumps(payload).encode())


def test_pre_compact_names_what_the_summary_must_keep_most_important_first(tmp_path: Path) -> None:
    path = session(tmp_path)
    done = hook("pre-compact", {"session_id": "s1", "transcript_path": str(path), "cwd": "/home/dev/shop", "trigger": "manual"}, tmp_path)
    assert done.returncode == 0 and done.stderr == b""
    text = done.stdout.decode()
    lines = text.splitlines()
    assert lines[1] == f"- Last request: {QUEUED}"  # the queued message was the last one the user typed
    assert f"Message the user typed while you worked (it reached you mid-turn): {QUEUED}" not in text  # said once, as the last request
    assert f"- User instruction: {REQUEST}" in lines and f"- Open task: {TODO}" in lines
    assert "src/http/client.py" in text and len(text) <= 10_000


def test_pre_compact_stays_within_claude_code_s_limit(tmp_path: Path) -> None:
    s = Convo()
    for number in range(400):
        s.user(f"Request number {number}: " + "make the parser handle every edge case " * 5)
        s.text("Done.", usage(9_000 + number))
    path = s.write(tmp_path / "big.jsonl")
    text = hook("pre-compact", {"session_id": "s2", "transcript_path": str(path)}, tmp_path).stdout.decode()
    assert 9_000 < len(text) <= 10_000 and "Request number 399" in text.splitlines()[1]
    assert text.rstrip().endswith("more (keep every user message and open task)")


def test_pre_compact_can_refuse_a_compaction_that_would_not_save_enough(tmp_path: Path) -> None:
    path = session(tmp_path)
    payload = {"session_id": "s3", "transcript_path": str(path)}
    refused = hook("pre-compact", payload, tmp_path, "--block-when", "tokens<50k")
    assert refused.returncode == 2 and refused.stdout == b"" and b"under 50,000" in refused.stderr
    assert hook("pre-compact", payload, tmp_path, "--block-when=tokens<5000").returncode == 0


def test_after_a_summary_that_lost_facts_they_go_back_in_once(tmp_path: Path) -> None:
    path = session(tmp_path)
    base = {"session_id": "s4", "transcript_path": str(path), "cwd": "/home/dev/shop"}
    assert hook("pre-compact", {**base, "trigger": "auto"}, tmp_path).returncode == 0
    # Claude Code runs SessionStart(compact) before it writes the summary: nothing is known lost yet.
    assert hook("session-start", {**base, "source": "compact"}, tmp_path).stdout == b""
    post = hook("post-compact", {**base, "trigger": "auto", "compact_summary": f"The user asked: {REQUEST}."}, tmp_path)
    assert post.returncode == 0 and post.stdout.decode().startswith("ctxpipe: the summary carried 1 of ")
    [record] = [json.loads(line) for line in (tmp_path / ".claude" / "ctxpipe" / "hooks" / "s4.audit.jsonl").read_text().splitlines()]
    assert record["carried"] == 1 and {fact["text"] for fact in record["lost"]} >= {QUEUED, TODO}
    answer = json.loads(hook("session-start", {**base, "source": "resume"}, tmp_path).stdout)
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart" and QUEUED in context and TODO in context and REQUEST not in context
    assert hook("prompt", {**base, "prompt": "next"}, tmp_path).stdout == b"", "put back once"


def test_the_next_prompt_puts_back_what_was_lost_when_no_session_starts(tmp_path: Path) -> None:
    path = session(tmp_path)
    base = {"session_id": "s5", "transcript_path": str(path)}
    hook("pre-compact", base, tmp_path)
    hook("post-compact", {**base, "compact_summary": "Nothing to say."}, tmp_path)
    answer = json.loads(hook("prompt", {**base, "prompt": "go on"}, tmp_path).stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit" and QUEUED in answer["hookSpecificOutput"]["additionalContext"]


def test_an_expensive_resume_is_told_what_it_costs_and_what_compact_would_save(tmp_path: Path) -> None:
    path = session(tmp_path)
    payload = {"session_id": "s6", "transcript_path": str(path), "source": "resume", "context_tokens": 180_000, "prompt_cache_likely_expired": True}
    answer = json.loads(hook("session-start", {**payload, "estimated_cache_write_usd": 0.68}, tmp_path).stdout)
    assert answer["systemMessage"].startswith("ctxpipe: this resume sends 180,000 tokens to an expired prompt cache (about $0.68")
    assert "ctxpipe compact --in-place" in answer["systemMessage"]
    assert hook("session-start", {**payload, "context_tokens": 20_000}, tmp_path).stdout == b"", "a small resume is not worth a word"
    assert hook("session-start", {**payload, "prompt_cache_likely_expired": False}, tmp_path).stdout == b""


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (("pre-compact",), b"not json"),
        (("pre-compact",), b"[1, 2]"),
        (("pre-compact",), b'{"session_id": "s7", "transcript_path": "/no/such/file.jsonl"}'),
        (("post-compact",), b'{"session_id": "../../etc/passwd", "compact_summary": "x"}'),
        (("session-start",), b'{"transcript_path": "/tmp/x.jsonl"}'),
        (("pre-compact", "--block-when", "lots"), b"{}"),
        (("unknown-hook",), b"{}"),
    ],
)
def test_a_hook_never_fails_the_session(tmp_path: Path, args: tuple[str, ...], stdin: bytes) -> None:
    done = ctxpipe("hook", *args, home=tmp_path, stdin=stdin)
    assert done.returncode == 0 and done.stdout == b""
    assert done.stderr.count(b"\n") == 1 and done.stderr.startswith(b"ctxpipe hook: ") and b"Traceback" not in done.stderr


def test_hook_input_that_is_not_json_is_named_as_such(tmp_path: Path) -> None:
    for stdin in (b"not json", b"\xff\xfe"):
        done = ctxpipe("hook", "prompt", home=tmp_path, stdin=stdin)
        assert done.returncode == 0 and done.stderr.startswith(b"ctxpipe hook: the hook input on stdin is not JSON: "), done.stderr


def test_a_transcript_line_never_reaches_the_terminal_raw(tmp_path: Path) -> None:
    s = Convo()
    s.user("rename it \x1b]0;pwned\x07 now")
    s.text("ok", usage(9_000))
    path = s.write(tmp_path / "hostile.jsonl")
    done = hook("post-compact", {"session_id": "s8", "transcript_path": str(path), "compact_summary": "x"}, tmp_path)
    assert done.returncode == 0 and b"\x1b" not in done.stdout + done.stderr


def test_the_state_folder_follows_claude_config_dir(tmp_path: Path) -> None:
    path = session(tmp_path)
    config = tmp_path / "config"
    env = child_env({"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(config)})
    payload = json.dumps({"session_id": "s9", "transcript_path": str(path)}).encode()
    subprocess.run([sys.executable, "-m", "ctxpipe", "hook", "pre-compact"], input=payload, env=env, capture_output=True, check=True, timeout=120)
    assert (config / "ctxpipe" / "hooks" / "s9.json").exists() and not (tmp_path / ".claude" / "ctxpipe").exists()
    assert os.environ.get("CLAUDE_CONFIG_DIR") != str(config)


# --- what the review of the hooks found (session 54) ------------------------------------------------


def test_the_installed_command_runs_ctxpipe_not_the_project_s_own_modules(tmp_path: Path) -> None:
    """Claude Code runs a hook in the project's folder: a project's `platform.py` or `ctxpipe/`
    package is not imported instead of the standard library's or ctxpipe's."""
    from ctxpipe.core.hook_settings import hook_command
    from ctxpipe.jobs.hooks import this_program

    project = tmp_path / "project"
    (project / "ctxpipe").mkdir(parents=True)
    (project / "ctxpipe" / "__init__.py").write_text("raise SystemExit(2)\n")
    (project / "ctxpipe" / "__main__.py").write_text("raise SystemExit(2)\n")
    for shadow in ("platform", "random", "tempfile", "inspect", "datetime"):
        (project / f"{shadow}.py").write_text("raise RuntimeError('the project ran')\n")
    payload = json.dumps({"session_id": "p1", "transcript_path": str(session(tmp_path))}).encode()
    env = child_env({"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": ""})
    done = subprocess.run(["sh", "-c", hook_command(this_program(), "pre-compact")], input=payload, capture_output=True, env=env, cwd=project, timeout=120)
    assert (done.returncode, done.stderr) == (0, b"") and REQUEST.encode() in done.stdout


def test_block_when_refuses_only_a_context_it_measured(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    not_a_transcript = tmp_path / "notes.jsonl"
    not_a_transcript.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    for path in (empty, not_a_transcript):
        done = hook("pre-compact", {"session_id": "b1", "transcript_path": str(path), "trigger": "auto"}, tmp_path, "--block-when", "tokens<40k")
        assert done.returncode == 0, done.stderr


def test_a_second_install_keeps_what_the_user_changed_and_the_first_backup(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = json.dumps(USER_SETTINGS, indent=4).encode()
    settings.write_bytes(original)
    assert ctxpipe("hooks", "install", home=tmp_path).returncode == 0
    edited = json.loads(settings.read_bytes())
    for group in edited["hooks"]["PreCompact"]:
        for entry in group["hooks"]:
            if ours(entry) == "pre-compact":
                entry["command"] = entry["command"].replace("/python", "/python-old") + " --block-when 'tokens<40k'"
                entry["timeout"] = 120
    settings.write_text(json.dumps(edited, indent=2))
    assert ctxpipe("hooks", "install", home=tmp_path).returncode == 0
    [entry] = [e for g in json.loads(settings.read_bytes())["hooks"]["PreCompact"] for e in g["hooks"] if ours(e) == "pre-compact"]
    assert entry["command"].endswith(" hook pre-compact --block-when 'tokens<40k'") and "/python-old" not in entry["command"]
    assert entry["timeout"] == 120
    assert (tmp_path / ".claude" / "settings.json.ctxpipe-backup").read_bytes() == original
    assert ctxpipe("hooks", "uninstall", home=tmp_path).returncode == 0
    assert settings.read_bytes() == original


@pytest.mark.parametrize("settings_bytes", [b'{"cleanupPeriodDays": 1e999}', b'{"hooks": {"PreCompact": [{"hooks": 5}, 7]}}'])
def test_odd_settings_are_refused_or_kept_never_damaged(tmp_path: Path, settings_bytes: bytes) -> None:
    """A number JSON cannot write back is refused (written as Infinity, Claude Code would refuse the whole
    file); groups of other shapes are kept as they are, by install and uninstall alike."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(settings_bytes)
    for command in ("install", "uninstall"):
        done = ctxpipe("hooks", command, home=tmp_path)
        assert b"Traceback" not in done.stderr and b"internal error" not in done.stderr, done.stderr
        if b"1e999" in settings_bytes:
            assert settings.read_bytes() == settings_bytes and (done.returncode != 0 or command == "uninstall")
        else:
            assert done.returncode == 0 and json.loads(settings.read_bytes())["hooks"]["PreCompact"][:2] == [{"hooks": 5}, 7]


def test_a_json_answer_reaches_claude_code_with_its_strings_escaped() -> None:
    from ctxpipe.cli.hook import _visible

    shown = json.loads(_visible(json.dumps({"hookSpecificOutput": {"additionalContext": "keep \x1b]0;pwned\x07 this\nand that"}, "n": [1, "\x9b"]})))
    text = shown["hookSpecificOutput"]["additionalContext"]
    assert "\x1b" not in text and "\x07" not in text and text.endswith("\nand that") and "\x9b" not in shown["n"][1]


@pytest.mark.parametrize("where", ["http://127.0.0.1:9/session.jsonl", "fifo"])
def test_a_hook_reads_only_a_local_regular_file(tmp_path: Path, where: str) -> None:
    path = where
    if where == "fifo":
        os.mkfifo(tmp_path / "fifo.jsonl")
        path = str(tmp_path / "fifo.jsonl")
    done = hook("pre-compact", {"session_id": "f1", "transcript_path": path}, tmp_path)
    assert done.returncode == 0 and done.stdout == b"" and done.stderr.count(b"\n") == 1
    assert b"not a local file" in done.stderr if where != "fifo" else b"not a regular file" in done.stderr


def test_the_hooks_state_is_the_user_s_only(tmp_path: Path) -> None:
    path = session(tmp_path)
    assert hook("pre-compact", {"session_id": "m1", "transcript_path": str(path)}, tmp_path).returncode == 0
    folder = tmp_path / ".claude" / "ctxpipe" / "hooks"
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_damaged_state_file_is_started_again_not_failed_on(tmp_path: Path) -> None:
    path = session(tmp_path)
    state = tmp_path / ".claude" / "ctxpipe" / "hooks" / "d1.json"
    state.parent.mkdir(parents=True)
    state.write_bytes(b'{"facts": [["request", "cut sh')
    done = hook("pre-compact", {"session_id": "d1", "transcript_path": str(path)}, tmp_path)
    assert done.returncode == 0 and REQUEST.encode() in done.stdout and done.stderr == b""
    assert json.loads(state.read_bytes())  # replaced by a whole one


def test_settings_written_meanwhile_are_left_as_they_are(tmp_path: Path) -> None:
    """Claude Code may write its settings while install works: the file is replaced only if it is still
    the version read, else left with what was written meanwhile."""
    from ctxpipe.core.errors import ChangedMeanwhile
    from ctxpipe.files.storage import version
    from ctxpipe.jobs.hooks import SettingsChange, _write

    settings = tmp_path / "settings.json"
    settings.write_bytes(b'{"model": "opus"}\n')
    read = version(str(settings))
    settings.write_bytes(b'{"model": "sonnet"}\n')  # Claude Code, meanwhile
    with pytest.raises(ChangedMeanwhile):
        _write(SettingsChange(settings, b'{"model": "opus"}\n', b'{"model": "opus", "hooks": {}}\n'), False, if_version=read)
    assert settings.read_bytes() == b'{"model": "sonnet"}\n' and sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


def test_a_dry_run_shows_the_settings_escaped(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"statusLine": {"command": "echo \u009b31m \u202e"}}, ensure_ascii=False))
    done = ctxpipe("hooks", "install", "--dry-run", home=tmp_path)
    assert done.returncode == 0 and "\u009b".encode() not in done.stdout and "\u202e".encode() not in done.stdout
    assert json.loads(done.stdout)["statusLine"]["command"] == "echo \u009b31m \u202e"  # the same value, escaped
