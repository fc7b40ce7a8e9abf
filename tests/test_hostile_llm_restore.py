"""Hostile transcripts and hostile servers, for `restore`, `summarize` and `compact` (issue 10).

- restore: a transcript never chooses the folder files are read from (its `cwd` is not a root);
  without --root only the current directory is read, and only for a transcript whose cwd is in it,
  stderr saying once what was skipped and why. Paths with a NUL byte, FIFOs and a 1 GB file are
  handled: the big one costs a few kilobytes of reading, not its size in memory (measured).
- summarize: a `sessionId` that is not a UUID never names the notes file.
- the LLM engine against tests/messages_server.py misbehaving: an error body echoing the key
  (redacted everywhere), answers that are not Messages API JSON (a failed summary like any other:
  the offline engine runs, the breaker counts it), and a server that drips its answer or asks to
  wait for ever (one --timeout deadline for the whole summary, on summarize and compact).

No test reaches the internet; the servers are on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ctxpipe
import pytest
from ctxpipe.core import restore as core
from ctxpipe.core.restore import RestoreSettings
from ctxpipe.core.stage import StageContext, line_bytes
from ctxpipe.core.summarize import SummarizeSettings
from ctxpipe.core.summarize_engines import SUMMARY_TIMEOUT, Breaker, SummaryFailed, redact
from ctxpipe.formats import get
from ctxpipe.jobs.llm import ModelAccess, llm_summary, summary_timeout
from ctxpipe.jobs.ports import DISK
from ctxpipe.jobs.summary import summarize_entries
from helpers import ok, run_cli
from messages_server import MessagesServer, Reply
from project_sessions import NOW_ISO, Project, write_files

CC = get("claude-code")
SECRET = "sk-ant-api03-CTXPIPE-HOSTILE-SECRET-0a1b2c3d4e"  # never a real key; must never be printed
NO_KEY = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": "", "ANTHROPIC_AUTH_TOKEN": ""}
WITH_KEY = {**NO_KEY, "ANTHROPIC_API_KEY": SECRET}


def with_boundary(p: Project) -> bytes:
    p.say("Work so far is done.")
    p.compact_here()
    p.ask("Carry on.")
    p.say("On it.")
    return p.to_bytes()


def long_session(cwd: Path | str, session_id: str | None = None, reads: dict[str, str] | None = None) -> bytes:
    """Enough conversation that `--keep-last 2` leaves a history to summarize (and files to restore)."""
    p = Project(cwd, session_id) if session_id else Project(cwd)
    p.ask("Fix the app.")
    for path, seen in (reads or {}).items():
        p.read(path, seen, as_given=True)
    for n in range(6):
        p.ask(f"Step {n}: keep going.")
        p.say(f"Step {n} done.")
    return p.to_bytes()


def restore_notes(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if "not reading files from disk" in line]


# --- restore: the transcript does not choose what is read ------------------------------------


def elsewhere(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A transcript whose cwd is another folder holding a secret file it claims to have read."""
    victim = tmp_path / "victim"
    write_files(victim, {"secret.txt": "TOP-SECRET on disk\n"})
    work = tmp_path / "work"
    work.mkdir()
    p = Project(victim)
    p.ask("go")
    p.read(str(victim / "secret.txt"), "seen in the transcript", as_given=True)
    return victim, work, with_boundary(p)


def test_a_transcript_cwd_elsewhere_reads_nothing_from_disk_and_says_why_once(tmp_path: Path) -> None:
    victim, work, data = elsewhere(tmp_path)
    (tmp_path / "s.jsonl").write_bytes(data)
    result = ok(run_cli("restore", "--now", NOW_ISO, tmp_path / "s.jsonl", cwd=work))
    assert b"TOP-SECRET" not in result.stdout and b"seen in the transcript" in result.stdout
    (note,) = restore_notes(result.stderr)
    assert note.startswith(
        f"ctxpipe: restore: {tmp_path / 's.jsonl'}: restored 1 file; not reading files from disk: the transcript's project {victim} is not the current "
        "directory; --root DIR reads them; "
    ), note
    # --source disk: nothing to restore, and the same reason.
    disk = ok(run_cli("restore", "--now", NOW_ISO, "--source", "disk", tmp_path / "s.jsonl", cwd=work))
    assert disk.stdout == data and len(restore_notes(disk.stderr)) == 1 and b"nothing to restore" in disk.stderr
    # The user chooses: --root, or running from the project, reads it.
    for args, here in ((("--root", str(victim)), work), ((), victim), ((), tmp_path)):
        chosen = ok(run_cli("restore", "--now", NOW_ISO, *args, tmp_path / "s.jsonl", cwd=here))
        assert b"TOP-SECRET on disk" in chosen.stdout and not restore_notes(chosen.stderr), (args, here)


@pytest.mark.skipif(not Path("/etc/passwd").is_file(), reason="needs /etc/passwd (the issue's own example)")
def test_the_issue_example_etc_passwd_through_restore_and_compact(tmp_path: Path) -> None:
    first = Path("/etc/passwd").read_text(errors="replace").split("\n", 1)[0].encode()
    p = Project("/etc")
    p.ask("go")
    p.read("/etc/passwd", "seen in the transcript", as_given=True)
    (tmp_path / "r.jsonl").write_bytes(with_boundary(p))
    (tmp_path / "c.jsonl").write_bytes(long_session("/etc", reads={"/etc/passwd": "seen in the transcript"}))
    restored = ok(run_cli("restore", "--now", NOW_ISO, tmp_path / "r.jsonl", cwd=tmp_path))
    compacted = ok(run_cli("compact", "--force", "--engine", "offline", "--keep-last", "2", "--now", NOW_ISO, tmp_path / "c.jsonl", cwd=tmp_path, env=NO_KEY))
    for result in (restored, compacted):
        assert first not in result.stdout and b"seen in the transcript" in result.stdout
        (note,) = restore_notes(result.stderr)
        assert "the transcript's project /etc is not the current directory; --root DIR reads them" in note


def test_the_library_default_root_is_not_the_transcript_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victim, work, data = elsewhere(tmp_path)
    entries = list(ctxpipe.read_transcript(data, "claude-code").entries)
    monkeypatch.chdir(work)
    outcome, candidates = core.restore(entries, CC, RestoreSettings(), "2026-05-01T00:00:00.000Z", workspace=DISK)
    written = b"".join(line_bytes(outcome.entries))
    assert b"TOP-SECRET" not in written and b"seen in the transcript" in written
    assert outcome.report.disk.startswith(f"the transcript's project {victim} is not the current directory")
    assert [c.disk_skipped for c in candidates if c.kind == "file"] == [True]
    monkeypatch.chdir(victim)
    outcome, _ = core.restore(entries, CC, RestoreSettings(), "2026-05-01T00:00:00.000Z", workspace=DISK)
    assert b"TOP-SECRET on disk" in b"".join(line_bytes(outcome.entries)) and outcome.report.disk is None


def test_a_transcript_without_a_cwd_reads_nothing_from_disk(tmp_path: Path) -> None:
    victim, work, data = elsewhere(tmp_path)
    lines = [json.loads(line) for line in data.splitlines()]
    for line in lines:
        line.pop("cwd", None)
    (tmp_path / "s.jsonl").write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    result = ok(run_cli("restore", "--now", NOW_ISO, tmp_path / "s.jsonl", cwd=victim))
    assert b"TOP-SECRET" not in result.stdout
    (note,) = restore_notes(result.stderr)
    assert "the transcript names no project folder (cwd)" in note


def test_nul_bytes_in_paths_and_a_fifo_are_skipped_not_fatal(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write_files(root, {"ok.py": "print('ok on disk')\n"})
    os.mkfifo(root / "pipe.txt")
    p = Project(root)
    p.ask("go")
    p.read(f"{root}/a\x00b.py", "seen nul", as_given=True)
    p.read("pipe.txt", "seen fifo")
    p.read("ok.py", "seen ok")
    (tmp_path / "s.jsonl").write_bytes(with_boundary(p))
    rows = {r["name"]: r for r in map(json.loads, ok(run_cli("restore", "--plan", "--source", "disk", tmp_path / "s.jsonl", cwd=root)).stdout.splitlines())}
    assert rows["a\x00b.py"]["reason"] == "not a file name (it holds a NUL byte)" and not rows["a\x00b.py"]["chosen"]
    assert rows["pipe.txt"]["reason"] == "not a regular file" and not rows["pipe.txt"]["chosen"]
    assert rows["ok.py"]["reason"] == "from disk"
    auto = ok(run_cli("restore", "--now", NOW_ISO, tmp_path / "s.jsonl", cwd=root))
    assert b"seen nul" in auto.stdout and b"seen fifo" in auto.stdout and b"ok on disk" in auto.stdout
    # A cwd with a NUL byte is no folder: nothing is read, nothing crashes.
    q = Project(f"{root}\x00x")
    q.ask("go")
    q.read(str(root / "ok.py"), "seen ok", as_given=True)
    (tmp_path / "q.jsonl").write_bytes(with_boundary(q))
    nul_cwd = ok(run_cli("restore", "--now", NOW_ISO, tmp_path / "q.jsonl", cwd=root))
    assert b"ok on disk" not in nul_cwd.stdout and len(restore_notes(nul_cwd.stderr)) == 1


# --- restore: a file is read only as far as its budget needs --------------------------------------


def max_rss_kb(*args: str | Path, cwd: Path) -> tuple[int, subprocess.CompletedProcess[bytes]]:
    """Peak RSS of `ctxpipe ARGS` run as a child (getrusage of the children of a small wrapper)."""
    wrapper = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
        "sys.stderr.buffer.write(r.stderr); sys.stdout.buffer.write(r.stdout); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)"
    )
    result = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "ctxpipe", *map(str, args)],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
    )
    return int(result.stderr.decode().strip().splitlines()[-1]), result


def test_a_1_gb_file_costs_kilobytes_not_gigabytes(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    with open(root / "huge.log", "wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GiB of NUL characters, no disk space used
    write_files(root, {"small.py": "print('small')\n"})
    p = Project(root)
    p.ask("go")
    p.read("huge.log", "\x00" * 10, limit=1)  # a partial Read: the file itself is never shown
    p.read("small.py", "print('small')")
    (tmp_path / "s.jsonl").write_bytes(with_boundary(p))
    rss, result = max_rss_kb("restore", "--now", NOW_ISO, tmp_path / "s.jsonl", cwd=root)
    ok(result)
    assert b"[restored file reference] huge.log (about 268,435,456 tokens, over the per-file budget; use Read)" in result.stdout
    assert b"[restored file] small.py (lines 1-2, 4 tokens, from disk)" in result.stdout
    baseline, plain = max_rss_kb("restore", "--now", NOW_ISO, "--source", "transcript", tmp_path / "s.jsonl", cwd=root)
    ok(plain)
    # Before: 2.1 GB to write a 45-token note. Now the disk read adds next to nothing to the process.
    assert rss < baseline + 20_000, (rss, baseline)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("x" * 20_000, "[restored file] f.txt (lines 1-1, 5,000 tokens, from disk)", id="exactly-the-budget"),
        pytest.param("x" * 20_004, "[restored file reference] f.txt (5,001 tokens, over the per-file budget; use Read)", id="one-over-read-whole"),
        pytest.param("x" * 40_000, "[restored file reference] f.txt (about 10,000 tokens, over the per-file budget; use Read)", id="over-read-in-part"),
        pytest.param("\U0001f600" * 2_600, "[restored file] f.txt (lines 1-1, 1,300 tokens, from disk)", id="astral-under"),
        pytest.param("\u00e9" * 30_000, "[restored file reference] f.txt (about 7,500 tokens, over the per-file budget; use Read)", id="two-byte-over"),
    ],
)
def test_the_budget_decision_is_the_same_when_only_the_start_is_read(tmp_path: Path, text: str, expected: str) -> None:
    root = tmp_path / "proj"
    write_files(root, {"f.txt": text})
    p = Project(root)
    p.ask("go")
    p.read("f.txt", "seen", limit=1)
    entries = list(ctxpipe.read_transcript(with_boundary(p), "claude-code").entries)
    _, candidates = core.restore(entries, CC, RestoreSettings(root=str(root)), "2026-05-01T00:00:00.000Z", workspace=DISK)
    (file,) = [c for c in candidates if c.kind == "file"]
    assert file.chosen and file.header == expected


# --- summarize: a session id is a UUID or names nothing -------------------------------------------


@pytest.mark.parametrize("hostile", ["{x}/secret", "../x/secret", "..", "7d3c9a52-1f0e-4b8a-9c61-2e5f8d4a7b10/../../x/secret"])
def test_a_session_id_that_is_not_a_uuid_never_names_the_notes_file(tmp_path: Path, hostile: str) -> None:
    notes = tmp_path / "x" / "secret" / "session-memory" / "summary.md"
    notes.parent.mkdir(parents=True)
    notes.write_text("# Notes\nSECRET NOTES FROM ANOTHER FOLDER\n")
    (tmp_path / "x" / "session-memory").mkdir()
    (tmp_path / "x" / "session-memory" / "summary.md").write_text("# Notes\nSECRET NOTES ONE UP\n")
    project = tmp_path / "projects" / "p"
    session = hostile.format(x=tmp_path / "x")
    (project / "s.jsonl").parent.mkdir(parents=True)
    (project / "s.jsonl").write_bytes(long_session(tmp_path / "app", session))
    result = ok(run_cli("summarize", "--keep-last", "2", "--now", NOW_ISO, project / "s.jsonl", env=NO_KEY))
    assert b"SECRET NOTES" not in result.stdout
    assert "with the offline engine (no session notes and no ANTHROPIC_API_KEY)" in result.stderr.decode()


def test_a_uuid_session_id_still_finds_its_notes(tmp_path: Path) -> None:
    session = "3f2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c"
    notes = tmp_path / session / "session-memory" / "summary.md"
    notes.parent.mkdir(parents=True)
    notes.write_text("# Current state\nThe real notes of this session.\n")
    (tmp_path / "s.jsonl").write_bytes(long_session(tmp_path / "app", session))
    result = ok(run_cli("summarize", "--keep-last", "2", "--now", NOW_ISO, tmp_path / "s.jsonl", env=NO_KEY))
    assert b"The real notes of this session." in result.stdout and "with the session-memory engine" in result.stderr.decode()


# --- the LLM engine against a misbehaving server --------------------------------------------------


@pytest.fixture
def server():
    with MessagesServer(max_sleep=60) as s:  # a drip lasts up to a minute: only the client's deadline ends it sooner
        yield s
    assert s.threads() == []


def summarize_cli(path: Path, server: MessagesServer, *args: str, env: dict[str, str] = WITH_KEY) -> Any:
    return run_cli("summarize", "--keep-last", "2", "--now", NOW_ISO, "--base-url", server.url, *args, path, env=env)


def session_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(long_session(tmp_path / "app"))
    return path


def test_a_batch_says_on_stderr_which_files_the_model_failed_on_and_where(tmp_path: Path) -> None:
    """Issue 22, case 18: in a batch, a failed model summary was said only in the rows."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    folder = tmp_path / "in"
    folder.mkdir()
    for number in range(5):
        (folder / f"s{number}.jsonl").write_bytes(long_session(tmp_path / "app"))
    result = run_cli(
        "compact", "--force", "--keep-last", "2", "--engine", "llm", "--base-url", url, "--timeout", "0.5", "--jobs", "1", "--now", NOW_ISO,
        "--out-dir", tmp_path / "out", folder, env=WITH_KEY,
    )  # fmt: skip
    err = ok(result).stderr.decode()
    failed = [line for line in err.splitlines() if "the llm engine failed" in line]
    # The breaker opens after 3 failures in a row: the other 2 files are not sent, and one line says so.
    assert len(failed) == 3, err
    for line in failed:
        assert line.startswith("ctxpipe: warning: ") and str(folder) in line and url in line and line.endswith("the offline engine stood in")
    assert "the offline engine summarized 2 more without asking it" in err
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    summaries = [stage for row in rows for stage in row["stages"] if stage["stage"] == "summarize"]
    assert [stage["engine"] for stage in summaries] == ["offline"] * 5
    assert sum(1 for stage in summaries if url in stage.get("fallback_reason", "")) == 3


def test_redact_hides_the_key_anything_key_shaped_and_auth_header_values() -> None:
    text = (
        f"echo {SECRET}; another sk-ant-api03-Zz_9-other; {{'x-api-key': 'k3y-V4lue-123', 'Authorization': 'Bearer t0ken-abc'}}; "
        "proxy-authorization=Basic dXNlcjpwYXNz; mine-is-longkey99"
    )
    out = redact(text, SECRET, "mine-is-longkey99", None)
    for secret in (SECRET, "sk-ant-api03-Zz_9-other", "k3y-V4lue-123", "t0ken-abc", "dXNlcjpwYXNz", "mine-is-longkey99"):
        assert secret not in out
    assert "'x-api-key': '[redacted]'" in out and "'Authorization': 'Bearer [redacted]'" in out and out.count("[redacted]") == 6
    assert redact("authorization failed; no x-api-key header") == "authorization failed; no x-api-key header"


def test_a_short_key_is_redacted_where_it_stands_alone() -> None:
    assert redact("bad key sk-1234 (sent as 'sk-1234')", "sk-1234") == "bad key [redacted] (sent as '[redacted]')"
    assert redact("tasks-12345 and ask-1234x stay", "sk-1234") == "tasks-12345 and ask-1234x stay"


def test_an_echoed_short_key_is_redacted_on_stderr_and_in_the_report(tmp_path: Path, server: MessagesServer) -> None:
    short = "sk-1234"
    path = session_file(tmp_path)
    server.enqueue(Reply.error(400, "invalid_request_error", f"bad key {short}"))
    result = ok(summarize_cli(path, server, "--engine", "llm", "--report-json", tmp_path / "r.json", env={**NO_KEY, "ANTHROPIC_API_KEY": short}))
    report = (tmp_path / "r.json").read_bytes()
    for blob in (result.stdout, result.stderr, report):
        assert short.encode() not in blob
    assert b"bad key [redacted]" in result.stderr and b"[redacted]" in report


def test_an_error_body_echoing_the_key_is_redacted_on_stderr_and_in_the_report(tmp_path: Path, server: MessagesServer) -> None:
    path = session_file(tmp_path)
    server.enqueue(Reply.echo_credentials(401), Reply.error(400, "invalid_request_error", f"bad key {SECRET} (also sk-ant-api03-LEAKED-other)"))
    for _ in range(2):
        result = ok(summarize_cli(path, server, "--engine", "llm", "--report-json", tmp_path / "r.json"))
        report = (tmp_path / "r.json").read_bytes()
        for blob in (result.stdout, result.stderr, report):
            assert SECRET.encode() not in blob and b"HOSTILE-SECRET" not in blob and b"LEAKED" not in blob
        assert b"[redacted]" in result.stderr and b"[redacted]" in report
        assert "so the offline engine ran" in result.stderr.decode()
    assert [r.reply_kind for r in server.message_requests()] == ["echo_credentials", "error"]
    # The echo did carry the key: redaction, not luck, kept it out.
    assert server.message_requests()[0].api_key_present


def test_compact_redacts_the_echoed_key_too(tmp_path: Path, server: MessagesServer) -> None:
    path = session_file(tmp_path)
    server.default_reply = lambda body: Reply.echo_credentials(400)
    result = ok(run_cli("compact", "--force", "--engine", "llm", "--keep-last", "2", "--now", NOW_ISO, "--base-url", server.url, path, env=WITH_KEY))
    assert SECRET.encode() not in result.stderr + result.stdout and b"[redacted]" in result.stderr
    assert len(server.message_requests()) == 1


NOT_MESSAGES = [
    pytest.param(Reply.raw("All good, here is your summary.", content_type="text/plain"), "is not JSON", id="plain-text-200"),
    pytest.param(Reply.raw('{"type": "message", "content": [{"type": "text", "text": "cut'), "is not JSON", id="bad-json"),
    pytest.param(Reply.raw('{"type": "message", "role": "assistant", "content": null}'), "no content list", id="null-content"),
    pytest.param(Reply.raw('{"type": "message", "role": "assistant", "content": "just text"}'), "no content list", id="content-not-a-list"),
    pytest.param(Reply.raw('["a", "list"]'), "no content list", id="json-array"),
    pytest.param(Reply.raw('{"type": "message", "content": [{"type": "image"}, 7, null]}'), "holds no text", id="no-text-blocks"),
    pytest.param(Reply.raw('{"type": "message", "content": []}'), "holds no text", id="empty-content"),
]


def summarize_in_process(data: bytes, engine: str, url: str, breaker: Breaker | None = None) -> Any:
    """summarize_entries with the model at `url` (one request each, no retries) and its key."""
    entries = list(ctxpipe.read_transcript(data, "claude-code").entries)
    settings = SummarizeSettings(engine, model="claude-sonnet-4-6", base_url=url, keep_last=2, max_retries=0)
    return summarize_entries(entries, CC, settings, StageContext(datetime.now(timezone.utc), api_key="test-key-123"), breaker or Breaker())


@pytest.mark.parametrize(("reply", "why"), NOT_MESSAGES)
@pytest.mark.parametrize("engine", ["auto", "llm"])
def test_an_answer_that_is_not_a_messages_reply_is_a_failed_summary(server: MessagesServer, reply: Reply, why: str, engine: str) -> None:
    server.enqueue(reply)
    outcome = summarize_in_process(long_session("/w/app"), engine, server.url)
    assert outcome.changed and outcome.report.engine == "offline" and why in outcome.report.fallback_reason
    assert "the model failed (" in outcome.note and "so the offline engine ran" in outcome.note
    assert "1. Primary Request and Intent:" in b"".join(line_bytes(outcome.entries)).decode()
    assert len(server.message_requests()) == 1


@pytest.mark.parametrize(
    ("reply", "why", "engine"),
    [
        pytest.param(Reply.raw("All good, here is your summary.", content_type="text/plain"), "is not JSON", "llm", id="plain-text-200-llm"),
        pytest.param(Reply.raw('{"type": "message", "role": "assistant", "content": null}'), "no content list", "auto", id="null-content-auto"),
    ],
)
def test_through_the_cli_it_is_one_line_and_exit_0(tmp_path: Path, server: MessagesServer, reply: Reply, why: str, engine: str) -> None:
    path = session_file(tmp_path)
    server.enqueue(reply)
    result = ok(summarize_cli(path, server, "--engine", engine, "--report-json", tmp_path / "r.json"))
    err = result.stderr.decode()
    (line,) = [line for line in err.splitlines() if line.startswith("ctxpipe: summarize:")]
    assert "the model failed (" in line and why in line and "so the offline engine ran" in line
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["engine"] == "offline" and why in report["fallback_reason"]
    assert "1. Primary Request and Intent:" in result.stdout.decode()


def test_answers_that_are_not_messages_replies_count_in_the_breaker(server: MessagesServer) -> None:
    server.default_reply = lambda body: Reply.raw("<html>502 Bad Gateway</html>", content_type="text/html")
    data = long_session("/w/app")
    breaker = Breaker()
    engines = [summarize_in_process(data, "auto", server.url, breaker).report.engine for _ in range(5)]
    assert engines == ["offline"] * 5 and breaker.open
    assert len(server.message_requests()) == 3  # the 4th and 5th summaries did not ask


# --- one deadline for the whole summary -----------------------------------------------------------


def test_a_dripping_server_is_cut_off_at_the_deadline(tmp_path: Path, server: MessagesServer) -> None:
    path = session_file(tmp_path)
    server.enqueue(Reply.drip(0.2))  # a valid answer at 5 bytes a second: over a minute, yet every read is quick
    started = time.monotonic()
    result = ok(summarize_cli(path, server, "--engine", "llm", "--timeout", "2"))
    elapsed = time.monotonic() - started
    assert elapsed < 30, elapsed  # 2 s of waiting, the rest is starting Python and the SDK on a shared machine
    assert f"the model failed (the summary request to {server.url} timed out: a summary may take 2 s in all (--timeout))" in result.stderr.decode()
    assert [r.reply_kind for r in server.message_requests()] == ["drip"]


def test_the_deadline_covers_every_retry_and_wait_in_process(server: MessagesServer) -> None:
    # Each answer asks to wait 30 s before retrying; 4 retries would take 2 minutes.
    server.default_reply = lambda body: Reply.rate_limit(30)
    history = CC.messages(list(ctxpipe.read_transcript(long_session("/w/app"), "claude-code").entries))[:6]
    import anthropic  # noqa: F401 - loaded before the clock starts: the SDK's import is slow on a busy machine

    started = time.monotonic()
    with pytest.raises(SummaryFailed, match="timed out: a summary may take 1.5 s in all"):
        llm_summary(history, SummarizeSettings(timeout=1.5, max_retries=4), ModelAccess("claude-sonnet-4-6", "test-key-123", server.url))
    assert time.monotonic() - started < 10  # without the deadline: 4 retries x 30 s
    assert len(server.message_requests()) == 1


def test_the_engine_also_runs_when_called_from_async_code(server: MessagesServer) -> None:
    import asyncio

    server.enqueue("<summary>\n1. Primary Request and Intent: from inside a loop.\n</summary>")
    history = CC.messages(list(ctxpipe.read_transcript(long_session("/w/app"), "claude-code").entries))[:6]

    async def caller() -> Any:  # a library user's coroutine: the engine runs its own loop beside this one
        return llm_summary(history, SummarizeSettings(timeout=20, max_retries=0), ModelAccess("claude-sonnet-4-6", "test-key-123", server.url))

    result = asyncio.run(caller())
    assert result.text == "Summary:\n1. Primary Request and Intent: from inside a loop." and result.deadline > time.monotonic()


def test_compact_takes_the_same_timeout(tmp_path: Path, server: MessagesServer) -> None:
    path = session_file(tmp_path)
    server.default_reply = lambda body: Reply.drip(0.2)
    started = time.monotonic()
    result = ok(
        run_cli("compact", "--force", "--engine", "llm", "--keep-last", "2", "--timeout", "1.5", "--now", NOW_ISO, "--base-url", server.url, path, env=WITH_KEY)
    )
    assert time.monotonic() - started < 30
    assert "timed out: a summary may take 1.5 s in all (--timeout)" in result.stderr.decode()
    assert len(server.message_requests()) == 1


def test_timeout_is_one_option_with_one_default_on_both_commands() -> None:
    for command in ("summarize", "compact"):
        text = " ".join(ok(run_cli(command, "--help", env={"COLUMNS": "300"})).stdout.decode().split())
        assert f"seconds for a whole summary, every request, retry and wait included (default {SUMMARY_TIMEOUT:g})" in text, command
    assert summary_timeout(SummarizeSettings()) == SUMMARY_TIMEOUT
    bad = run_cli("summarize", "--timeout", "-1", stdin=b"")
    assert bad.returncode == 2 and b"--timeout" in bad.stderr


@pytest.mark.parametrize("url", ["http://[::1", "http://exa\x01mple.com", "http://127.0.0.1:99999", "ftp://127.0.0.1", "127.0.0.1:8080", "http:// spaced"])
@pytest.mark.parametrize("given", ["--base-url", "ANTHROPIC_BASE_URL"])
@pytest.mark.parametrize("command", ["summarize", "compact"])
def test_a_malformed_endpoint_is_one_line_naming_where_it_came_from(tmp_path: Path, url: str, given: str, command: str) -> None:
    path = session_file(tmp_path)
    flag = ["--base-url", url] if given == "--base-url" else []
    env = {**WITH_KEY, **({"ANTHROPIC_BASE_URL": url} if given == "ANTHROPIC_BASE_URL" else {})}
    result = run_cli(command, "--engine", "llm", "--force" if command == "compact" else "--verify", "--keep-last", "2", *flag, path, env=env)
    assert result.returncode == 1 and result.stdout == b""
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(f"ctxpipe: error: {given} ") and "internal error" not in line and "\x01" not in line


def test_an_offline_run_does_not_read_a_malformed_endpoint(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    result = ok(run_cli("summarize", "--engine", "offline", "--keep-last", "2", path, env={**WITH_KEY, "ANTHROPIC_BASE_URL": "http://[::1"}))
    assert b"with the offline engine" in result.stderr
