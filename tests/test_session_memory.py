"""Session-memory compaction: the notes must cover the history they replace, and a result still at
or above the autocompact threshold is said so (and, under auto, replaced by the next engine's);
and the boundary's compactMetadata.trigger says whether the threshold fired.

Claude Code records the last message its notes summarized (lastSummarizedMessageId); ctxpipe has
only the notes file, so it compares the file's time with the history's last message. Times are
set with os.utime; the transcript is fixtures/claude-code/basic.jsonl (1 March 2026, 10:00:00 to
10:00:12 UTC) laid out as Claude Code keeps it: <project>/<session>.jsonl with the notes at
<project>/<session>/session-memory/summary.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import ctxpipe
import orjson
from builders import Session, usage
from ctxpipe.core.fields import moment
from ctxpipe.core.jsonl import Entry
from ctxpipe.core.model import Message
from ctxpipe.core.summarize import CARRY_ON, SummarizeSettings, tail_start
from ctxpipe.core.summarize_engines import history_end, notes_cover
from ctxpipe.formats import get
from helpers import FIXTURES, ROOT, run_cli

SESSION = "11111111-1111-4111-8111-111111111111"
NOW = "2026-05-01T00:00:00Z"
NOTES = """# Session Title
_A short and distinctive 5-10 word descriptive title for the session_
Fixing the parse_date test

# Current State
_What is actively being worked on right now?_
The date parser accepts ISO dates; the code word is SNAPDRAGON.
"""


def at(text: str) -> datetime:
    when = moment(text)
    assert when is not None
    return when


# --- the pure decision --------------------------------------------------------------------------------


def test_notes_cover_a_history_that_ended_before_they_were_written() -> None:
    end = at("2026-03-01T10:00:12Z")
    assert notes_cover(end + timedelta(minutes=5), end)[0] is True
    assert notes_cover(end, end)[0] is True  # written with the last message: covered
    covered, why = notes_cover(end - timedelta(seconds=1), end)
    assert covered is False
    assert "2026-03-01 10:00:11 UTC" in why and "2026-03-01 10:00:12 UTC" in why and "before" in why
    covered, why = notes_cover(end, None)
    assert covered is True and "no times" in why


def test_history_end_is_the_newest_time_on_the_history_lines() -> None:
    def entry(stamp: Any) -> Entry:
        return Entry({"type": "user", "timestamp": stamp} if stamp is not None else {"type": "user"}, None)

    entries = [entry("2026-03-01T10:00:00Z"), entry("2026-03-01T10:00:09Z"), entry("2026-03-01T10:00:05Z"), entry(None), entry("2026-03-01T11:00:00Z")]
    history = [Message("user", [], [0]), Message("assistant", [], [1, 2]), Message("user", [], [3])]
    assert history_end(entries, history) == at("2026-03-01T10:00:09Z")  # the tail (entry 4) is not the history
    assert history_end(entries, [Message("user", [], [3])]) is None
    assert history_end([entry("not a time")], [Message("user", [], [0])]) is None


# --- summarize and compact ------------------------------------------------------------------------------


def project(tmp_path: Path, notes: str | None = NOTES, written: str | None = None, data: bytes | None = None) -> tuple[Path, Path]:
    """(transcript, notes) laid out as Claude Code keeps them; the notes' time set to `written`."""
    transcript = tmp_path / "proj" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    if data is None:
        shutil.copy(FIXTURES / "claude-code" / "basic.jsonl", transcript)
    else:
        transcript.write_bytes(data)
    memory = transcript.parent / SESSION / "session-memory" / "summary.md"
    if notes is not None:
        memory.parent.mkdir(parents=True)
        memory.write_text(notes)
        if written is not None:
            stamp = at(written).timestamp()
            os.utime(memory, (stamp, stamp))
    return transcript, memory


def summarize(*args: Any) -> subprocess.CompletedProcess[bytes]:
    return run_cli("summarize", "--now", NOW, *args, env={"ANTHROPIC_API_KEY": ""}, cwd=ROOT)


def compact(*args: Any) -> subprocess.CompletedProcess[bytes]:
    return run_cli("compact", "--now", NOW, "--source", "transcript", *args, env={"ANTHROPIC_API_KEY": ""}, cwd=ROOT)


def objects(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def summary_text(data: bytes) -> str:
    lines = objects(data)
    boundary = max(i for i, o in enumerate(lines) if o.get("subtype") == "compact_boundary")
    content = lines[boundary + 1]["message"]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def boundary_of(data: bytes) -> dict[str, Any]:
    return [o for o in objects(data) if o.get("subtype") == "compact_boundary"][-1]


def history_and_tail_end(transcript: Path, keep_last: int) -> tuple[datetime, datetime]:
    """The newest time on the history `--keep-last N` replaces, and on the whole transcript."""
    read = ctxpipe.read_transcript(str(transcript))
    fmt = get(read.format)
    messages = fmt.messages(read.entries)
    start = tail_start(messages, SummarizeSettings(keep_last=keep_last))
    end = history_end(read.entries, messages[:start])
    last = history_end(read.entries, messages)
    assert end is not None and last is not None
    return end, last


def test_notes_written_after_the_history_are_used(tmp_path: Path) -> None:
    transcript, _ = project(tmp_path, written="2026-03-01T11:00:00Z")
    for engine in ("auto", "session-memory"):
        result = summarize("--engine", engine, "--keep-last", "2", transcript)
        assert result.returncode == 0, result.stderr.decode()
        assert "SNAPDRAGON" in summary_text(result.stdout)
        err = result.stderr.decode()
        assert "with the session-memory engine" in err and "written at 2026-03-01 11:00:00 UTC, after the history's last message" in err


def test_the_notes_need_only_cover_the_history_that_is_replaced(tmp_path: Path) -> None:
    """Written after the history's last message but before the kept tail's: they cover what the summary replaces."""
    transcript, memory = project(tmp_path)
    end, last = history_and_tail_end(transcript, 2)
    assert end < last
    between = end + (last - end) / 2
    os.utime(memory, (between.timestamp(), between.timestamp()))
    result = summarize("--keep-last", "2", transcript)
    assert result.returncode == 0, result.stderr.decode()
    assert "with the session-memory engine" in result.stderr.decode() and "SNAPDRAGON" in summary_text(result.stdout)
    # Keeping nothing, the same notes miss the end of what is replaced.
    result = summarize("--keep-fraction", "0", transcript)
    assert result.returncode == 0, result.stderr.decode()
    assert "with the offline engine" in result.stderr.decode()


def test_stale_notes_auto_falls_back_and_says_why(tmp_path: Path) -> None:
    transcript, memory = project(tmp_path, written="2026-03-01T09:00:00Z")
    end, _ = history_and_tail_end(transcript, 2)
    result = summarize("--keep-last", "2", transcript)
    assert result.returncode == 0, result.stderr.decode()
    assert "SNAPDRAGON" not in summary_text(result.stdout)
    err = result.stderr.decode()
    assert "with the offline engine" in err
    assert (
        f"the session notes at {memory} do not cover the history: written at 2026-03-01 09:00:00 UTC, before the history's last message at "
        f"{end:%Y-%m-%d %H:%M:%S} UTC; no ANTHROPIC_API_KEY" in err
    ), err
    report = tmp_path / "report.json"
    assert summarize("--keep-last", "2", "--report-json", report, transcript).returncode == 0
    assert "do not cover the history" in json.loads(report.read_text())["engine_reason"]


def test_stale_notes_asked_for_are_refused_in_one_line(tmp_path: Path) -> None:
    transcript, memory = project(tmp_path, written="2026-03-01T09:00:00Z")
    for run in (
        summarize("--engine", "session-memory", "--keep-last", "2", transcript),
        compact("--force", "--engine", "session-memory", "--keep-last", "2", transcript),
    ):
        assert run.returncode == 1 and run.stdout == b""
        err = run.stderr.decode()
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert str(memory) in err and "do not cover the history" in err and "09:00:00 UTC" in err and "--engine auto or offline" in err


def test_a_history_without_times_is_taken_as_covered_and_said_so(tmp_path: Path) -> None:
    lines = objects((FIXTURES / "claude-code" / "basic.jsonl").read_bytes())
    data = b"".join(orjson.dumps({k: v for k, v in o.items() if k != "timestamp"}) + b"\n" for o in lines)
    transcript, _ = project(tmp_path, written="2000-01-01T00:00:00Z", data=data)
    result = summarize("--keep-last", "2", transcript)
    assert result.returncode == 0, result.stderr.decode()
    err = result.stderr.decode()
    assert "with the session-memory engine" in err and "the history records no times, so the notes are taken as covering it" in err


SMALL = ("--force", "--window", "40000", "--baseline", "0", "--keep-last", "2")


def big_notes() -> str:
    """Notes whose summary is far above a 7,000-token threshold (each section is cut to 8,000 characters)."""
    words = "\n".join(f"- item{n} parser{n * 7 % 13} date{n % 31}" for n in range(400))
    return NOTES + "".join(f"\n# Section {n}\n_notes_\n{words}\n" for n in range(8))


def compact_report(tmp_path: Path, transcript: Path, *args: Any) -> tuple[dict[str, Any], bytes]:
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
    result = compact("--out-dir", out, *args, transcript)
    assert result.returncode == 0, result.stderr.decode()
    [report] = [json.loads(line) for line in result.stdout.splitlines()]
    return report, (out / transcript.name).read_bytes()


def summarize_stage(report: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in report["stages"] if s["stage"] == "summarize")


def test_notes_that_leave_the_context_above_the_threshold_fall_back_under_auto(tmp_path: Path) -> None:
    transcript, _ = project(tmp_path, big_notes())
    # --window 40000: the autocompact threshold is 7,000 tokens; --baseline 0 leaves out the fixed
    # part of the requests (some 17,000 tokens here), so what is left is the summary and the tail.
    report, data = compact_report(tmp_path, transcript, *SMALL)
    stage = summarize_stage(report)
    assert stage["engine"] == "offline", stage
    assert "the session notes leave" in stage["note"] and "still ≥ the autocompact threshold 7,000; no ANTHROPIC_API_KEY" in stage["note"]
    assert "item1 parser7" not in summary_text(data) and boundary_of(data)["compactMetadata"]["ctxpipe"]["engine"] == "offline"
    # Asked for, notes that leave more than the history they replace are no summary (issue 22, case 3):
    # the offline engine stands in, and the note says why.
    report, data = compact_report(tmp_path, transcript, *SMALL, "--engine", "session-memory")
    stage = summarize_stage(report)
    assert stage["engine"] == "offline" and "item1 parser7" not in summary_text(data)
    assert (
        stage["fallback_reason"].startswith("the session-memory summary would leave ")
        and "a summary that does not shrink the context is not one" in stage["note"]
    )
    assert boundary_of(data)["compactMetadata"]["postTokens"] < boundary_of(data)["compactMetadata"]["preTokens"]


def long_history() -> bytes:
    """A session whose history (some 40,000 tokens) is longer than big_notes()."""
    built = Session()
    built.user("Write the parser.")
    for number in range(40):
        built.text(f"Step {number}: " + "the parser reads one more kind of line " * 120, usage(2_000 + 1_000 * number))
        built.user(f"Go on with step {number + 1}.")
    built.text("Done.", usage(45_000))
    return built.to_bytes()


def test_notes_over_the_threshold_that_still_shrink_the_context_are_used_when_asked_for(tmp_path: Path) -> None:
    transcript, _ = project(tmp_path, big_notes(), written="2026-06-01T00:00:00Z", data=long_history())
    # The threshold (7,000 tokens) the notes stay above; the history they replace is longer still.
    report, data = compact_report(tmp_path, transcript, *SMALL, "--engine", "session-memory")
    stage = summarize_stage(report)
    assert stage["engine"] == "session-memory" and "item1 parser7" in summary_text(data), stage
    assert "still ≥ the autocompact threshold 7,000" in stage["note"]
    metadata = boundary_of(data)["compactMetadata"]
    assert metadata["postTokens"] >= 7_000 and f"leave {metadata['postTokens']:,} tokens" in stage["note"]


def test_notes_that_fit_are_used_by_compact(tmp_path: Path) -> None:
    transcript, _ = project(tmp_path)
    report, data = compact_report(tmp_path, transcript, *SMALL)
    stage = summarize_stage(report)
    assert stage["engine"] == "session-memory" and "SNAPDRAGON" in summary_text(data)
    assert "still ≥" not in stage["note"]


# --- compactMetadata.trigger ------------------------------------------------------------------------------


def test_the_trigger_is_auto_only_when_the_threshold_fired(tmp_path: Path) -> None:
    transcript, _ = project(tmp_path, notes=None)
    cases = [
        (("--window", "40000"), "auto"),  # 18,109 ≥ 7,000: Claude Code would have compacted
        (("--window", "40000", "--target-tokens", "10000"), "auto"),  # the threshold fired either way
        (("--window", "40000", "--force"), "manual"),
        (
            (
                "--target-tokens",
                "10000",
            ),
            "manual",
        ),  # asked for: 18,109 < 167,000
        (("--force",), "manual"),
    ]
    for args, trigger in cases:
        report, data = compact_report(tmp_path, transcript, "--engine", "offline", "--keep-last", "2", *args)
        assert summarize_stage(report)["changed"], args
        assert boundary_of(data)["compactMetadata"]["trigger"] == trigger, args
        # An automatic compaction tells the model to resume without asking (Claude Code's follow-up suppression).
        assert (CARRY_ON in summary_text(data)) == (trigger == "auto"), args
        assert summary_text(data).rstrip().endswith(CARRY_ON) == (trigger == "auto"), args
    result = summarize("--engine", "offline", "--keep-last", "2", transcript)
    assert result.returncode == 0 and boundary_of(result.stdout)["compactMetadata"]["trigger"] == "manual"
    assert CARRY_ON not in summary_text(result.stdout)
