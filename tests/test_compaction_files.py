"""Files written by Claude Code's compaction side-call (`agent-acompact-*.jsonl`, agentId
`acompact-…`) are not sessions: count labels them, warn does not alarm on them, compact skips them.

The side-call files are built here the way Claude Code 2.1.39 writes them (transcript-format.md,
section 12): sidechain lines with `agentId: "acompact-<6 hex>"`, a few isMeta reminders, the summary
prompt and one assistant answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import SESSION, Session, simple, usage
from ctxpipe.cli.status import ExitStatus
from ctxpipe.files.sessions import COMPACTION_NOTE, find_sessions, is_compaction, kind_of, kind_read
from ctxpipe.jobs.count import CountOptions, count_file
from ctxpipe.jobs.schemas import errors
from helpers import CLEAN_ENV, CORPUS, needs_corpus, run_cli

AGENT = "acompact-70d8e7"
NAME = f"agent-{AGENT}.jsonl"
BLOCKING = 190_000  # above Sonnet 4.5's blocking limit (177,000): a session this size exits 5


def side_call(total: int = BLOCKING, agent: str | None = AGENT) -> Session:
    """A compaction side-call whose one answer used `total` tokens (agent None: no agentId at all)."""
    tag = {} if agent is None else {"agentId": agent}
    s = Session()
    parent = "9f5fc94c-95e1-43f9-b701-1d1cffa159e0"  # points into the main file, as Claude Code's do
    for reminder in ("<system-reminder>\nPostToolUse:Edit hook additional context\n</system-reminder>",) * 3:
        parent = s.user(reminder, parent=parent, sidechain=True, isMeta=True, **tag)
    prompt = s.user("Your task is to create a detailed summary of the conversation so far.", parent=parent, sidechain=True, **tag)
    s.response(
        [{"type": "text", "text": "<analysis>…</analysis><summary>1. Primary Request…</summary>"}], usage(total, output=3000), sidechain=True, parent=prompt
    )
    if agent is not None:  # Session.response has no extra fields: tag the answer's line afterwards
        s.lines[-1]["agentId"] = agent
    return s


def main_session(total: int = BLOCKING) -> Session:
    """A session of a few turns, the last answer's usage `total` (so compact --force has a history to summarize)."""
    s = Session()
    for turn in range(1, 6):
        s.user(f"Step {turn}: please check the build again.")
        s.text(f"Checked the build, step {turn}.", usage(total * turn // 5))
    return s


def project(root: Path) -> Path:
    """A 2.1.x project folder: one main session, one subagent, one compaction side-call."""
    folder = root / "-home-dev-app"
    main_session().write(folder / f"{SESSION}.jsonl")
    simple(20_000).write(folder / SESSION / "subagents" / "agent-a1b2c3d.jsonl")
    side_call().write(folder / SESSION / "subagents" / NAME)
    return folder


def cli(*args: str | Path, stdin: bytes | None = b""):
    result = run_cli(*args, stdin=stdin, env=CLEAN_ENV)
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    return result


def json_rows(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


# --- the rule ------------------------------------------------------------------------------------


def test_the_name_tells_a_compaction_side_call_without_reading_it(tmp_path: Path) -> None:
    assert kind_of(Path(NAME)) == "compaction"
    assert kind_of(Path("x") / SESSION / "subagents" / "agent-a1b2c3d.jsonl") == "subagent"
    assert kind_of(Path("agent-acompac.jsonl")) == "subagent"  # not the prefix: an ordinary subagent name
    assert kind_of(Path(f"{SESSION}.jsonl")) == "main"
    # A file named so is one even when its lines carry no agentId at all.
    path = side_call(agent=None).write(tmp_path / NAME)
    assert is_compaction(path.read_bytes(), str(path))


def test_the_first_agent_id_tells_a_renamed_or_piped_file() -> None:
    data = side_call().to_bytes()
    assert kind_read(data, "main") == "compaction"  # renamed to a session's name
    assert kind_read(data, None) == "compaction"  # stdin
    assert is_compaction(data, "-") and is_compaction(data, "summary-call.jsonl")
    # A subagent's own agentId, or none: not a compaction.
    assert kind_read(simple(1000).to_bytes(), None) is None
    assert kind_read(simple(1000).to_bytes(), "main") == "main"
    ordinary = side_call(agent="a1b2c3d").to_bytes()
    assert kind_read(ordinary, "main") == "main"
    # A name that says subagent is not overruled by the lines.
    assert kind_read(data, "subagent") == "subagent"


def test_only_a_top_level_agent_id_counts() -> None:
    # Claude Code 2.1's progress lines in a main file carry data.agentId: the file stays a session.
    s = simple(1000)
    s.raw({"type": "progress", "data": {"type": "agent_progress", "agentId": AGENT}, "uuid": "p1", "parentUuid": None})
    s.lines.insert(0, s.lines.pop())
    assert kind_read(s.to_bytes(), "main") == "main"


def test_a_damaged_first_line_does_not_hide_the_agent_id_and_the_peek_is_bounded() -> None:
    data = side_call().to_bytes()
    assert kind_read(b'{"agentId": "acompact-1"\n\n' + data, None) == "compaction"
    # The rule reads the first lines only: an agentId far down a main file's lines is not looked for.
    far = simple(1000)
    for number in range(40):
        far.user(f"message {number}")
    far.lines[-1]["agentId"] = AGENT
    assert kind_read(far.to_bytes(), "main") == "main"


def test_find_sessions_labels_the_side_call_by_name(tmp_path: Path) -> None:
    folder = project(tmp_path)
    assert [(f.path.name, f.kind) for f in find_sessions([str(folder)])] == [
        (f"{SESSION}.jsonl", "main"),
        ("agent-a1b2c3d.jsonl", "subagent"),
        (NAME, "compaction"),
    ]
    assert [f.kind for f in find_sessions([str(folder)], subagents=False)] == ["main"]


# --- count ---------------------------------------------------------------------------------------


def test_count_json_labels_the_side_call_in_a_folder_by_name_or_content(tmp_path: Path) -> None:
    folder = project(tmp_path)
    side_call().write(folder / "renamed-side-call.jsonl")  # the name says nothing: the lines do
    result = cli("count", "--json", folder)
    assert result.returncode == 0, result.stderr.decode()
    rows = json_rows(result.stdout)
    for row in rows[:-1]:
        assert errors("count.report.schema.json", row) == [], row
    assert [(Path(row["file"]).name, row["kind"], row["tokens"]) for row in rows[:-1]] == [
        (f"{SESSION}.jsonl", "main", BLOCKING),
        ("renamed-side-call.jsonl", "compaction", BLOCKING),
        ("agent-a1b2c3d.jsonl", "subagent", 20_000),
        (NAME, "compaction", BLOCKING),
    ]


def test_count_json_labels_a_single_file_and_stdin(tmp_path: Path) -> None:
    path = side_call().write(tmp_path / NAME)
    (row,) = json_rows(cli("count", "--json", path).stdout)
    assert row["kind"] == "compaction"
    (piped,) = json_rows(cli("count", "--json", stdin=path.read_bytes()).stdout)
    assert piped["kind"] == "compaction" and piped["file"] == "-"
    assert errors("count.report.schema.json", piped) == []
    (session,) = json_rows(cli("count", "--json", stdin=main_session().to_bytes()).stdout)
    assert session["kind"] is None


def test_count_table_shows_the_kind_and_says_what_a_compaction_is(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Under a test stdout is not a terminal (so the CLI prints JSON); call the table printer itself,
    # wide enough for whole cells.
    from ctxpipe.cli.commands.count import _print

    monkeypatch.setenv("COLUMNS", "200")
    folder = project(tmp_path)
    results = [count_file(str(f.path), CountOptions(), f.kind, f.path.name) for f in find_sessions([str(folder)])]
    _print(results, [result.count_report() for result in results], False, None)
    lines = capsys.readouterr().out.splitlines()
    assert "kind" in lines[0]
    row = next(line for line in lines if NAME in line)
    assert "compaction" in row
    assert "subagent" in next(line for line in lines if "agent-a1b2c3d" in line)
    assert lines[-1] == f"kind compaction: {COMPACTION_NOTE}"


def test_count_table_of_sessions_alone_has_no_kind_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ctxpipe.cli.commands.count import _print

    result = count_file(str(main_session().write(tmp_path / f"{SESSION}.jsonl")), CountOptions(), "main")
    _print([result], [result.count_report()], False, None)
    text = capsys.readouterr().out
    assert "kind" not in text.splitlines()[0] and "compaction" not in text


# --- warn ----------------------------------------------------------------------------------------


def test_warn_reports_the_side_calls_level_without_alarm(tmp_path: Path) -> None:
    path = side_call().write(tmp_path / NAME)
    result = cli("warn", "--json", path)
    (report,) = json_rows(result.stdout)
    assert errors("warn.report.schema.json", report) == [], report
    assert report["level"] == "blocking" and report["tokens"] == BLOCKING
    assert report["kind"] == "compaction" and COMPACTION_NOTE in report["note"]
    assert result.returncode == 0
    # The same figures in a session alarm: exit 5, and the report says nothing more.
    session = cli("warn", "--json", main_session().write(tmp_path / f"{SESSION}.jsonl"))
    (alarm,) = json_rows(session.stdout)
    assert session.returncode == 5 and alarm["level"] == "blocking"
    assert "kind" not in alarm and "note" not in alarm


def test_warn_tells_a_piped_side_call_by_its_lines_and_passes_it_through(tmp_path: Path) -> None:
    data = side_call().to_bytes()
    result = cli("warn", "--pass-through", stdin=data)
    assert result.returncode == 0
    assert result.stdout == data
    assert b"blocking" in result.stderr and b"not a session: no alarm" in result.stderr
    assert cli("warn", "--pass-through", stdin=side_call(agent="a1b2c3d").to_bytes()).returncode == 5


# --- compact -------------------------------------------------------------------------------------


def test_compact_batch_skips_side_calls_saying_so(tmp_path: Path) -> None:
    folder = project(tmp_path)
    renamed = side_call().write(folder / "renamed-side-call.jsonl")
    out = tmp_path / "out"
    result = cli("compact", "--engine", "offline", "--json", "--out-dir", out, folder)
    assert result.returncode == 0, result.stderr.decode()
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.jsonl"))
    assert written == [f"{SESSION}.jsonl", f"{SESSION}/subagents/agent-a1b2c3d.jsonl"]
    warnings = [line for line in result.stderr.decode().splitlines() if "skipped" in line]
    assert warnings == [f"ctxpipe: warning: {path}: skipped: {COMPACTION_NOTE}" for path in (renamed, folder / SESSION / "subagents" / NAME)]
    rows = json_rows(result.stdout)
    skipped = [row for row in rows if "skipped" in row]
    assert [(Path(row["file"]).name, row["kind"], row["skipped"], row["output"]) for row in skipped] == [
        ("renamed-side-call.jsonl", "compaction", COMPACTION_NOTE, None),
        (NAME, "compaction", COMPACTION_NOTE, None),
    ]
    assert [Path(row["file"]).name for row in rows if "skipped" not in row] == [f"{SESSION}.jsonl", "agent-a1b2c3d.jsonl"]


def test_compact_in_place_leaves_a_side_call_byte_for_byte(tmp_path: Path) -> None:
    folder = project(tmp_path)
    path = folder / SESSION / "subagents" / NAME
    before = path.read_bytes()
    result = cli("compact", "--engine", "offline", "--force", "--keep-last", "2", "--in-place", "--backup", ".bak", folder)
    assert result.returncode == 0, result.stderr.decode()
    assert path.read_bytes() == before
    assert not path.with_name(NAME + ".bak").exists()
    assert (folder / f"{SESSION}.jsonl.bak").exists()  # the session itself was compacted


@pytest.mark.parametrize("piped", [False, True])
def test_compact_refuses_a_side_call_given_alone(tmp_path: Path, piped: bool) -> None:
    path = side_call().write(tmp_path / NAME)
    result = cli("compact", "--engine", "offline", stdin=path.read_bytes()) if piped else cli("compact", "--engine", "offline", path)
    assert result.returncode == ExitStatus.NOT_A_SESSION == 6
    assert result.stdout == b""
    assert result.stderr.decode().splitlines() == [
        f"ctxpipe: error: {'-' if piped else path}: {COMPACTION_NOTE}; nothing to compact (compact its session instead)"
    ]


# --- the real file -------------------------------------------------------------------------------

REAL = CORPUS / "marot__spotter" / "test__fixtures__transcripts__fa812bfe-b295-4cca-9c2f-fdf01028cb46__subagents__agent-acompact-70d8e7.jsonl"


@needs_corpus
def test_the_corpus_side_call_is_labelled_not_alarmed_and_skipped(tmp_path: Path) -> None:
    # Its folder separators were flattened to "__": the name says nothing, the lines say compaction.
    assert kind_of(REAL) == "main"
    (row,) = json_rows(cli("count", "--json", REAL).stdout)
    assert row["kind"] == "compaction"
    warned = cli("warn", "--json", REAL)
    (report,) = json_rows(warned.stdout)
    assert report["level"] in ("autocompact", "blocking") and warned.returncode == 0  # 173,417 tokens: above 167,000
    copy = tmp_path / "in" / REAL.name
    copy.parent.mkdir()
    copy.write_bytes(REAL.read_bytes())
    result = cli("compact", "--engine", "offline", "--out-dir", tmp_path / "out", copy.parent)
    assert result.returncode == 0, result.stderr.decode()
    assert f"{copy}: skipped: {COMPACTION_NOTE}" in result.stderr.decode()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_warn_over_a_folder_reports_every_file_and_exits_with_the_highest_session_level(tmp_path: Path) -> None:
    folder = project(tmp_path / "projects")  # main 190,000 (blocking), a subagent 20,000, a side-call 190,000
    result = cli("warn", "--json", folder)
    rows = json_rows(result.stdout)
    assert errors("warn.report.schema.json", rows[0]) == []
    levels = {Path(row["file"]).name: (row["level"], row.get("kind")) for row in rows}
    assert levels == {f"{SESSION}.jsonl": ("blocking", None), "agent-a1b2c3d.jsonl": ("normal", None), NAME: ("blocking", "compaction")}
    assert result.returncode == 5  # the main session's level
    # Without the session, the side-call's level alarms no one: the subagent's normal is the highest.
    (folder / f"{SESSION}.jsonl").unlink()
    assert cli("warn", "--json", folder).returncode == 0
    # A file that cannot be read is named on stderr and makes the exit 1; the others are reported.
    (folder / "broken.jsonl").write_bytes(b'{"type": "user"\n')
    broken = cli("warn", "--json", folder)
    assert broken.returncode == ExitStatus.ERROR
    assert "broken.jsonl:1:" in broken.stderr.decode()
    rows = json_rows(broken.stdout)  # the subagent, the side-call and the broken file's row
    assert len(rows) == 3
    assert [row["error"] for row in rows if "error" in row] == ["line 1: " + broken.stderr.decode().split("broken.jsonl:1: ", 1)[1].strip()]


def test_warn_pass_through_takes_one_transcript_only(tmp_path: Path) -> None:
    folder = project(tmp_path / "projects")
    result = cli("warn", "--pass-through", folder)
    assert result.returncode == ExitStatus.USAGE and result.stdout == b""
    assert "--pass-through" in result.stderr.decode()


def test_validate_labels_the_side_call_by_name_and_by_its_lines_alone(tmp_path: Path) -> None:
    from test_narrow_terminal import on_terminal

    by_name = side_call().write(tmp_path / "agent-acompact-9a8b7c.jsonl")
    renamed = side_call().write(tmp_path / "renamed.jsonl")
    session = main_session().write(tmp_path / "session.jsonl")
    for path in (by_name, renamed):
        [row] = [json.loads(line) for line in run_cli("validate", "--json", path).stdout.splitlines()]
        assert (row["kind"], row["note"]) == ("compaction", COMPACTION_NOTE)
        assert errors("validate.report.schema.json", row) == []
    [piped] = [json.loads(line) for line in run_cli("validate", "--json", "-", stdin=renamed.read_bytes()).stdout.splitlines()]
    assert piped["kind"] == "compaction"
    [plain] = [json.loads(line) for line in run_cli("validate", "--json", session).stdout.splitlines()]
    assert "kind" not in plain and "note" not in plain
    assert COMPACTION_NOTE in on_terminal(["validate", by_name], 300)
