"""`compact`: the pipeline and its guards, one input to stdout, batches (--out-dir, --in-place,
--backup, --jobs, bad files, the progress bar), a run killed mid-batch, the summary circuit breaker
shared by a batch, and the real Claude Code resuming what compact wrote.

Sessions come from fixtures/claude-code/, the shared corpus, and tests/project_sessions.py. Every
run is deterministic: --now, --engine offline (or the fake Messages API of tests/messages_server.py
for the breaker) and --source transcript unless a test builds a real project folder.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from claude_code import needs_claude_code
from ctxpipe.core.errors import CtxpipeError
from ctxpipe.core.jsonl import ReadStats
from ctxpipe.files.sessions import find_sessions
from ctxpipe.formats import get
from ctxpipe.jobs import batch
from ctxpipe.jobs.count import CountOptions, count_buffer, count_file
from helpers import FIXTURES, ROOT, corpus_files, needs_corpus, run_cli
from messages_server import MessagesServer, Reply
from project_sessions import NOW_ISO, Project, bulky, resumed_from, source_file, write_files
from stage_checks import findings, tool_problems

CC = get("claude-code")
CLAUDE_FIXTURES = sorted((FIXTURES / "claude-code").glob("*.jsonl"))
DETERMINISTIC = ("--engine", "offline", "--source", "transcript", "--now", NOW_ISO)
SUMMARY_PREAMBLE = "This session is being continued from a previous conversation"


def compact(*args: Any, stdin: bytes | None = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return run_cli("compact", *args, stdin=stdin, env={"ANTHROPIC_API_KEY": "", **(env or {})}, cwd=ROOT)


def reports(result: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def stage(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in report["stages"] if s["stage"] == name)


def errors_of(data: bytes) -> set[tuple[str, str]]:
    return {(f.code, f.message) for f in findings(data) if f.severity == "error"}


def head_of(data: bytes) -> bytes:
    """The bytes before the active context: a stage never touches them."""
    offset, _ = CC.read_region(data, "x", "fail", ReadStats())
    return data[:offset]


def one_report(path: Path, tmp_path: Path, *args: Any) -> tuple[dict[str, Any], bytes]:
    """Compact one file through the batch path (for its JSON report); (report, output bytes)."""
    out = tmp_path / f"out-{len(list(tmp_path.iterdir()))}"
    result = compact(*DETERMINISTIC, "--out-dir", out, *args, path.parent)
    assert result.returncode == 0, result.stderr.decode()
    [report] = [r for r in reports(result) if Path(r["file"]).name == path.name]
    return report, (out / path.name).read_bytes()


def single(tmp_path: Path, name: str) -> Path:
    """A fixture copied alone into its own folder."""
    folder = tmp_path / name.replace(".jsonl", "")
    folder.mkdir()
    shutil.copy(FIXTURES / "claude-code" / name, folder / name)
    return folder / name


# --- the pipeline and its guards ------------------------------------------------------------------


def test_below_the_threshold_nothing_is_summarized_and_stderr_says_why() -> None:
    data = (FIXTURES / "claude-code" / "basic.jsonl").read_bytes()
    result = compact(*DETERMINISTIC, FIXTURES / "claude-code" / "basic.jsonl")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == data, "nothing to do: the input comes back byte for byte"
    err = result.stderr.decode()
    assert re.search(r"summarize: \S*basic\.jsonl: not needed: 18,109 tokens < the autocompact threshold 167,000", err), err
    assert "restore:" not in err
    assert re.search(r"compact: \S*basic\.jsonl: 18,109 → 18,109 tokens", err), err
    lines = [line.split(":")[1].strip() for line in err.splitlines()]
    assert lines == ["microcompact", "collapse", "summarize", "compact"]


@pytest.mark.parametrize("args, why", [
    pytest.param(("--force",), "--force", id="force"),
    pytest.param(("--target-tokens", "10000"), "18,109 tokens > --target-tokens 10,000", id="target-tokens"),
    pytest.param(("--autocompact-pct", "5"), "18,109 tokens ≥ the autocompact threshold 9,000", id="autocompact-pct"),
    pytest.param(("--window", "40000"), "18,109 tokens ≥ the autocompact threshold 7,000", id="window"),
])  # fmt: skip
def test_a_summary_at_or_above_the_threshold_then_restore(tmp_path: Path, args: tuple[str, ...], why: str) -> None:
    path = single(tmp_path, "basic.jsonl")
    report, out = one_report(path, tmp_path, "--keep-last", "2", *args)
    assert [s["stage"] for s in report["stages"]] == ["microcompact", "collapse", "summarize", "restore"]
    summarized = stage(report, "summarize")
    assert summarized["changed"] and summarized["why"] == why and summarized["engine"] == "offline"
    assert stage(report, "restore")["changed"]
    assert report["tokens_before"] == 18_109 and report["changed"]
    # After the summary no usage anchors the count: the session baseline plus the few messages left.
    counted = count_buffer(out, "-", CountOptions()).count
    assert report["tokens_after"] == counted.tokens and counted.baseline_added > 0
    assert report["tokens_after"] - counted.baseline_added < 2_000
    objs = [orjson.loads(line) for line in out.splitlines()]
    boundary = max(i for i, o in enumerate(objs) if o.get("subtype") == "compact_boundary")
    assert objs[boundary + 1].get("isCompactSummary") is True
    restored = [o for o in objs[boundary:] if o.get("isMeta") and str(o.get("message", {}).get("content", "")).startswith("[restored")]
    assert restored and objs[-len(restored) :] == restored, "the restored entries come last"


def test_target_tokens_is_strict_and_the_report_says_why_not(tmp_path: Path) -> None:
    path = single(tmp_path, "basic.jsonl")
    report, out = one_report(path, tmp_path, "--keep-last", "2", "--target-tokens", "18109")
    assert [s["stage"] for s in report["stages"]] == ["microcompact", "collapse", "summarize"]
    assert not stage(report, "summarize")["changed"]
    assert "not needed: 18,109 tokens < the autocompact threshold 167,000" in stage(report, "summarize")["note"]
    assert out == path.read_bytes() and report["changed"] is False and report["tokens_after"] == report["tokens_before"]


def test_microcompact_runs_before_collapse(tmp_path: Path) -> None:
    """repeats.jsonl reads the same files again: microcompact clears the old copies first, so collapse
    finds nothing left to fold; keep them all (--keep-recent 50) and collapse folds them."""
    path = single(tmp_path, "repeats.jsonl")
    cleared, cleared_out = one_report(path, tmp_path)
    assert stage(cleared, "microcompact")["changed"] and not stage(cleared, "collapse")["changed"]
    assert b"[Old tool result content cleared]" in cleared_out and b"[ctxpipe collapse:" not in cleared_out
    folded, folded_out = one_report(path, tmp_path, "--keep-recent", "50")
    assert not stage(folded, "microcompact")["changed"] and stage(folded, "collapse")["changed"]
    assert b"[ctxpipe collapse:" in folded_out and b"[Old tool result content cleared]" not in folded_out
    for report in (cleared, folded):
        assert report["tokens_after"] < report["tokens_before"]
        assert report["tokens_before"] - report["tokens_after"] == sum(s.get("tokens_freed", 0) for s in report["stages"])


@pytest.mark.parametrize("fixture", CLAUDE_FIXTURES, ids=lambda p: p.stem)
def test_the_output_keeps_the_invariants(fixture: Path) -> None:
    data = fixture.read_bytes()
    result = compact(*DETERMINISTIC, "--force", "--keep-last", "2", fixture)
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout
    assert out.endswith(b"\n") and out.startswith(head_of(data))
    assert errors_of(out) <= errors_of(data)
    unanswered_in, orphans_in = tool_problems(data)
    unanswered_out, orphans_out = tool_problems(out)
    assert unanswered_out <= unanswered_in and orphans_out <= orphans_in
    match = re.search(rb"compact: \S+: ([\d,]+) \xe2\x86\x92 ([\d,]+) tokens", result.stderr)
    assert match, result.stderr.decode()
    before, after = (int(x.replace(b",", b"")) for x in match.groups())
    # The figures are count's on the input and on the output (a tiny session can grow: restore adds files back).
    assert before == count_buffer(data, "-", CountOptions()).count.tokens
    assert after == count_buffer(out, "-", CountOptions()).count.tokens
    if re.search(rb"summarize: \S+: summarized", result.stderr):
        assert out.count(b'"subtype":"compact_boundary"') == data.count(b'"subtype":"compact_boundary"') + 1
    else:
        assert re.search(rb"summarize: \S+: nothing to summarize", result.stderr) and out == data


@pytest.mark.parametrize("fixture", [
    pytest.param(p, id=p.stem, marks=[])
    for p in CLAUDE_FIXTURES
])  # fmt: skip
def test_count_reports_tokens_after(tmp_path: Path, fixture: Path) -> None:
    path = single(tmp_path, fixture.name)
    report, out = one_report(path, tmp_path, "--force", "--keep-last", "2")
    (tmp_path / "written.jsonl").write_bytes(out)
    assert count_file(str(tmp_path / "written.jsonl"), CountOptions()).count.tokens == report["tokens_after"]


@needs_corpus
def test_the_corpus_compacts_with_its_invariants(tmp_path: Path) -> None:
    """Every real transcript through the batch path, the Codex rollouts among them (written as rollouts)."""
    files = corpus_files()
    codex = corpus_files("codex")
    assert files
    folder = files[0].parent.parent
    out = tmp_path / "out"
    result = compact(*DETERMINISTIC, "--force", "--keep-last", "4", "--out-dir", out, folder)
    by_file = {Path(r["file"]): r for r in reports(result)}
    assert set(by_file) >= set(files)
    assert result.returncode == 0, result.stderr
    assert not [path for path, row in by_file.items() if "error" in row]
    for rollout in set(codex) & set(by_file):
        report = by_file.pop(rollout)
        written = (out / rollout.relative_to(folder)).read_bytes()
        assert written.split(b"\n", 1)[0] == rollout.read_bytes().split(b"\n", 1)[0], rollout.name  # its session_meta, byte for byte
        assert report["tokens_after"] <= report["tokens_before"], rollout.name
        checked = run_cli("validate", "--json", "-", stdin=written)
        assert checked.returncode == 0 and json.loads(checked.stdout)["format"] == "codex", rollout.name
    # Claude Code's compaction side-call is not a session: skipped, not written (test_compaction_files.py).
    skipped = {path for path, report in by_file.items() if "skipped" in report}
    assert skipped == {path for path in files if "agent-acompact-" in path.name}
    by_file = {path: report for path, report in by_file.items() if path not in skipped}
    summarized = 0
    for path, report in by_file.items():
        data, written = path.read_bytes(), (out / path.relative_to(folder)).read_bytes()
        assert Path(report["output"]) == out / path.relative_to(folder)
        assert written.startswith(head_of(data)) and written.endswith(b"\n")
        assert errors_of(written) <= errors_of(data), path.name
        unanswered_in, orphans_in = tool_problems(data)
        unanswered_out, orphans_out = tool_problems(written)
        assert unanswered_out <= unanswered_in and orphans_out <= orphans_in, path.name
        assert report["tokens_after"] <= report["tokens_before"], path.name
        names = [s["stage"] for s in report["stages"]]
        assert names[:3] == ["microcompact", "collapse", "summarize"]
        assert (names[3:] == ["restore"]) == stage(report, "summarize")["changed"], path.name
        summarized += stage(report, "summarize")["changed"]
    assert summarized >= len(by_file) // 2


# --- one input: stdout and stdin ------------------------------------------------------------------


def test_stdin_gives_what_the_path_gives() -> None:
    data = (FIXTURES / "claude-code" / "repeats.jsonl").read_bytes()
    from_path = compact(*DETERMINISTIC, FIXTURES / "claude-code" / "repeats.jsonl")
    from_stdin = compact(*DETERMINISTIC, stdin=data)
    dash = compact(*DETERMINISTIC, "-", stdin=data)
    assert from_path.returncode == from_stdin.returncode == dash.returncode == 0
    assert from_stdin.stdout == from_path.stdout == dash.stdout != data
    assert b"compact: -: 14,233" in from_stdin.stderr
    summarized = compact(*DETERMINISTIC, "--force", "--keep-last", "2", stdin=data)
    assert summarized.returncode == 0 and SUMMARY_PREAMBLE.encode() in summarized.stdout
    assert not errors_of(summarized.stdout)


def test_usage_errors() -> None:
    data = (FIXTURES / "claude-code" / "basic.jsonl").read_bytes()
    for args in (
        ("--out-dir", "x"),
        ("--in-place",),
        ("--in-place", "--out-dir", "x", "f.jsonl"),
        ("--backup", ".bak", "f.jsonl"),
        ("--engine", "magic", "f.jsonl"),
    ):
        result = compact(*args, stdin=data)
        assert result.returncode == 2, (args, result.stderr.decode())
        assert b"Traceback" not in result.stderr


def test_a_folder_without_a_destination_and_an_unknown_source_are_usage_errors(tmp_path: Path) -> None:
    """`compact DIR` with neither --out-dir nor --in-place, and `--source bogus`: exit 2, one line naming
    the option, nothing written (the first once crashed with a TypeError, the second restored nothing)."""
    folder = tmp_path / "projects"
    folder.mkdir()
    shutil.copy(FIXTURES / "claude-code" / "basic.jsonl", folder / "s.jsonl")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    no_destination = compact(folder)
    assert no_destination.returncode == 2 and no_destination.stdout == b""
    assert b"--out-dir" in no_destination.stderr and b"--in-place" in no_destination.stderr and b"Traceback" not in no_destination.stderr
    bogus = compact("--source", "bogus", FIXTURES / "claude-code" / "basic.jsonl")
    assert bogus.returncode == 2 and bogus.stdout == b"" and b"--source" in bogus.stderr and b"bogus" in bogus.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_bad_input_on_stdout_mode_is_one_message_and_exit_1(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes((FIXTURES / "claude-code" / "basic.jsonl").read_bytes() + b'{"type":"user","message":\n')
    result = compact(*DETERMINISTIC, broken)
    assert result.returncode == 1 and b"Traceback" not in result.stderr and b"broken.jsonl:" in result.stderr


# --- batches --------------------------------------------------------------------------------------


def small(cwd: str, number: int, sidechain: bool = False) -> bytes:
    p = Project(cwd, session_id=f"3f2a1b0c-9d8e-4f7a-8b6c-{number:012d}", seed=number)
    p.ask(f"Task {number}")
    for n in range(6):
        p.read(f"src/m{n}.py", source_file(f"m{n}", 30))
        p.say(f"step {n}")
    p.ask("finish")
    p.say("done")
    if sidechain:
        for obj in p.lines:
            obj.update(isSidechain=True, agentId=f"a{number}")
    return p.to_bytes()


def layouts(root: Path) -> dict[str, bytes]:
    """Sessions in the three layouts, in two project folders; relative path -> bytes."""
    files = {
        "-home-dev-app/11111111-1111-4111-8111-111111111111.jsonl": small("/home/dev/app", 1),
        "-home-dev-app/agent-a2.jsonl": small("/home/dev/app", 2, sidechain=True),
        "-home-dev-app/11111111-1111-4111-8111-111111111111/subagents/agent-a3.jsonl": small("/home/dev/app", 3, sidechain=True),
        "-home-dev-other/44444444-4444-4444-8444-444444444444.jsonl": small("/home/dev/other", 4),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_out_dir_mirrors_the_tree_in_every_layout(tmp_path: Path) -> None:
    src = tmp_path / "projects"
    files = layouts(src)
    out = tmp_path / "out"
    result = compact(*DETERMINISTIC, "--force", "--keep-last", "2", "--out-dir", out, src)
    assert result.returncode == 0, result.stderr.decode()
    written = tree(out)
    assert sorted(written) == sorted(files)
    assert tree(src) == files, "the inputs are not touched"
    got = reports(result)
    assert sorted(Path(r["file"]).relative_to(src).as_posix() for r in got) == sorted(files)
    for report in got:
        rel = Path(report["file"]).relative_to(src).as_posix()
        assert report["output"] == str(out / rel)
        assert set(report) >= {"file", "format", "tokens_before", "tokens_after", "changed", "stages", "output"}
        assert report["format"] == "claude-code" and report["changed"] and report["tokens_after"] < report["tokens_before"]
        assert written[rel].startswith(files[rel][: len(head_of(files[rel]))]) and not errors_of(written[rel])
    mains = compact(*DETERMINISTIC, "--force", "--keep-last", "2", "--no-subagents", "--out-dir", tmp_path / "mains", src)
    assert sorted(tree(tmp_path / "mains")) == sorted(rel for rel in files if "agent-" not in rel)
    assert mains.returncode == 0


def test_in_place_replaces_atomically_and_backup_keeps_the_original(tmp_path: Path) -> None:
    src = tmp_path / "projects"
    files = layouts(src)
    quiet = src / "-home-dev-other" / "quiet.jsonl"  # below the target, nothing to clear: it must not be touched
    shutil.copy(FIXTURES / "claude-code" / "rewind.jsonl", quiet)
    main = src / "-home-dev-app" / "11111111-1111-4111-8111-111111111111.jsonl"
    main.chmod(0o640)
    before = {p: os.stat(p) for p in [src / rel for rel in files] + [quiet]}
    out = tmp_path / "out"
    assert compact(*DETERMINISTIC, "--keep-last", "2", "--target-tokens", "12000", "--out-dir", out, src).returncode == 0
    result = compact(*DETERMINISTIC, "--keep-last", "2", "--target-tokens", "12000", "--in-place", "--backup", ".bak", src)
    assert result.returncode == 0, result.stderr.decode()
    for rel, data in files.items():
        path = src / rel
        assert path.read_bytes() == (out / rel).read_bytes() != data, rel  # what --out-dir wrote, from the same input path
        assert Path(str(path) + ".bak").read_bytes() == data, rel
        assert os.stat(path).st_ino != before[path].st_ino, "replaced by a rename, not rewritten in place"
    assert os.stat(main).st_mode & 0o777 == 0o640, "the replaced file keeps its mode"
    assert quiet.read_bytes() == (FIXTURES / "claude-code" / "rewind.jsonl").read_bytes()
    assert os.stat(quiet).st_ino == before[quiet].st_ino and os.stat(quiet).st_mtime_ns == before[quiet].st_mtime_ns
    assert not Path(str(quiet) + ".bak").exists()
    assert not [p for p in src.rglob(".*") if p.is_file()], "no temporary file is left after a clean run"
    assert {r["file"]: r["changed"] for r in reports(result)}[str(quiet)] is False


def test_a_bad_file_is_said_at_the_end_and_the_others_are_written(tmp_path: Path) -> None:
    src = tmp_path / "projects"
    files = layouts(src)
    broken = src / "-home-dev-other" / "broken.jsonl"
    broken.write_bytes(files["-home-dev-other/44444444-4444-4444-8444-444444444444.jsonl"] + b'{"type":"user","message":{"role":"user"}, oops}\n')
    for mode in (("--out-dir", tmp_path / "out"), ("--in-place",)):
        result = compact(*DETERMINISTIC, "--force", "--keep-last", "2", *mode, src)
        assert result.returncode == 1
        err = result.stderr.decode().splitlines()
        assert err[-1] == "ctxpipe: compact: 1 of 5 files failed"
        assert re.fullmatch(rf"ctxpipe: error: {re.escape(str(broken))}:\d+: invalid JSON: .*", err[-2]), err
        rows = reports(result)
        assert sorted(Path(r["file"]).name for r in rows if "error" not in r) == sorted(Path(rel).name for rel in files)
        assert {Path(r["file"]).name: r["error"] for r in rows if "error" in r} == {
            "broken.jsonl": re.sub(r"^.*?:(\d+): ", r"line \1: ", err[-2].removeprefix("ctxpipe: error: ")),
        }
    assert sorted(tree(tmp_path / "out")) == sorted(files)
    assert all((src / rel).read_bytes() == (tmp_path / "out" / rel).read_bytes() for rel in files)
    assert broken.read_bytes().endswith(b"oops}\n")


def test_a_progress_bar_on_a_terminal_only(tmp_path: Path) -> None:
    pty = pytest.importorskip("pty")
    src = tmp_path / "projects"
    layouts(src)
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100", "ANTHROPIC_API_KEY": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", "compact", *DETERMINISTIC, "--force", "--keep-last", "2", "--out-dir", str(tmp_path / "out"), str(src)],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    stdout = proc.stdout.read() if proc.stdout else b""
    assert proc.wait(timeout=60) == 0
    os.close(master)
    assert b"compacting" in shown and b"4/4" in shown and b"0 errors" in shown
    assert len(stdout.splitlines()) == 4  # the reports still go to the pipe
    piped = compact(*DETERMINISTIC, "--force", "--keep-last", "2", "--out-dir", tmp_path / "out2", src)
    assert b"compacting" not in piped.stderr and b"4/4" not in piped.stderr


# --- many files: parallel workers and a kill ------------------------------------------------------

BIG_FILES = 200  # about 20 MB: just above PARALLEL_MIN_BYTES (16 MiB), so --jobs 2 forks its workers
BIG_ARGS = (*DETERMINISTIC, "--force", "--keep-last", "4")


@pytest.fixture(scope="module")
def big_batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[Path, bytes], dict[Path, bytes], list[dict[str, Any]]]:
    """BIG_FILES sessions of ~100 KB (more than PARALLEL_MIN_BYTES), and what one uninterrupted --jobs 1 run makes of each."""
    base = tmp_path_factory.mktemp("big")
    folder = base / "sessions"
    folder.mkdir()
    originals = {}
    for number in range(BIG_FILES):
        path = folder / f"s{number:03d}.jsonl"
        originals[path] = bulky("/w/proj", number)
        path.write_bytes(originals[path])
    assert sum(map(len, originals.values())) > batch.PARALLEL_MIN_BYTES
    result = compact(*BIG_ARGS, "--jobs", "1", "--out-dir", base / "jobs1", folder)
    assert result.returncode == 0, result.stderr.decode()
    expected = {path: (base / "jobs1" / path.name).read_bytes() for path in originals}
    for path in list(originals)[:: BIG_FILES // 5]:
        assert expected[path] != originals[path] and expected[path].endswith(b"\n") and not errors_of(expected[path])
    return folder, originals, expected, reports(result)


def test_jobs_2_gives_the_same_outputs_as_jobs_1(big_batch: Any, tmp_path: Path) -> None:
    folder, originals, expected, jobs1_reports = big_batch
    result = compact(*BIG_ARGS, "--jobs", "2", "--out-dir", tmp_path / "jobs2", folder)
    assert result.returncode == 0, result.stderr.decode()
    assert {path: (tmp_path / "jobs2" / path.name).read_bytes() for path in originals} == expected
    jobs2_reports = reports(result)
    assert [{k: v for k, v in r.items() if k != "output"} for r in jobs2_reports] == [{k: v for k, v in r.items() if k != "output"} for r in jobs1_reports]
    assert [r["file"] for r in jobs2_reports] == [str(p) for p in sorted(originals)], "reports in input order"


def _pid_and_length(item: str) -> tuple[int, int]:
    if item == "bad":
        raise CtxpipeError("bad: this one fails")
    time.sleep(0.02)
    return os.getpid(), len(item)


def test_run_all_spreads_over_workers_keeps_the_order_and_isolates_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 0)
    items = ["a" * n for n in range(1, 20)]
    items[7] = "bad"
    done: list[bool] = []
    results = batch.run_all(_pid_and_length, items, batch.Runner(2), [1], progress=lambda total: contextlib.nullcontext(done.append))
    assert [ok for ok, _ in results] == [item != "bad" for item in items]
    assert [value[1] for ok, value in results if ok] == [len(item) for item in items if item != "bad"]
    assert isinstance(results[7][1], CtxpipeError)
    pids = {value[0] for ok, value in results if ok}
    assert os.getpid() not in pids and len(pids) == 2
    assert sorted(done) == sorted(ok for ok, _ in results)
    sequential = batch.run_all(_pid_and_length, items, batch.Runner(1), [1])
    assert {value[0] for ok, value in sequential if ok} == {os.getpid()}


TEMP_NAME = re.compile(r"^\.s\d{3}\.jsonl\..+\.tmp$")


def test_a_killed_in_place_batch_leaves_every_file_old_or_new(big_batch: Any) -> None:
    folder, originals, expected, _ = big_batch
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    sizes = {path: len(data) for path, data in originals.items()}
    mixed_rounds = 0
    for round_number in range(3):
        for leftover in folder.iterdir():
            if leftover not in originals:
                leftover.unlink()
        for path, data in originals.items():
            path.write_bytes(data)
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxpipe", "compact", *BIG_ARGS, "--jobs", "2", "--in-place", str(folder)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "ANTHROPIC_API_KEY": ""},
        )
        deadline = time.monotonic() + 60
        # Wait for the first replaced file, then a random moment more (bounded), then kill the whole process group.
        while proc.poll() is None and time.monotonic() < deadline:
            if any(entry.stat().st_size != sizes.get(Path(entry.path), -1) for entry in os.scandir(folder) if not entry.name.startswith(".")):
                break
            time.sleep(0.002)
        delay = rng.uniform(0.0, 0.6)
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        context = f"round {round_number}, seed {seed}, delay {delay:.3f}s, exit {proc.returncode}"
        old = new = 0
        for path in originals:
            data = path.read_bytes()
            if data == originals[path]:
                old += 1
            else:
                assert data == expected[path], f"{path.name} is neither the original nor the complete compacted file ({context})"
                new += 1
        leftovers = sorted(entry.name for entry in os.scandir(folder) if Path(entry.path) not in originals)
        assert all(TEMP_NAME.match(name) for name in leftovers), f"unexpected files left behind: {leftovers} ({context})"
        assert len(leftovers) <= 2, f"at most one temporary file per worker: {leftovers} ({context})"
        assert sorted(f.path for f in find_sessions([str(folder)])) == sorted(originals), "a temporary file would pass for a session"
        mixed_rounds += bool(old and new)
        print(f"KILL {context}: old {old} new {new} leftovers {leftovers}")
    assert mixed_rounds, f"no round was killed in the middle of the batch (seed {seed}); the check above proves little"


# --- the circuit breaker, shared by a batch ------------------------------------------------------


@pytest.fixture
def failing_server() -> Any:
    with MessagesServer() as server:
        server.default_reply = lambda body: Reply.error(400, "invalid_request_error", "messages: this request is not valid")
        yield server


def test_the_breaker_stops_calling_the_model_after_three_failed_summaries(tmp_path: Path, failing_server: MessagesServer) -> None:
    src = tmp_path / "projects"
    for number in range(6):
        (src / f"s{number}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (src / f"s{number}.jsonl").write_bytes(small("/home/dev/app", number))
    result = compact(
        "--engine",
        "llm",
        "--base-url",
        failing_server.url,
        "--force",
        "--keep-last",
        "2",
        "--source",
        "transcript",
        "--now",
        NOW_ISO,
        "--out-dir",
        tmp_path / "out",
        src,
        env={"ANTHROPIC_API_KEY": "test-key"},
    )
    assert result.returncode == 0, result.stderr.decode()
    calls = failing_server.message_requests()
    assert [r.status for r in calls] == [400, 400, 400], "three failed summaries, then no more requests"
    assert all(isinstance(r.body, dict) and r.body.get("messages") for r in calls)
    got = reports(result)
    assert len(got) == 6 and all(stage(r, "summarize")["changed"] and stage(r, "summarize")["engine"] == "offline" for r in got)
    assert [("not asked again" in stage(r, "summarize")["note"]) for r in got] == [False, False, False, True, True, True]
    assert all("test-key" not in json.dumps(r) for r in got) and b"test-key" not in result.stderr
    assert len(tree(tmp_path / "out")) == 6


def test_the_breaker_is_shared_by_parallel_workers(tmp_path: Path, failing_server: MessagesServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime, timezone

    from ctxpipe.api import compact_one
    from ctxpipe.core.microcompact import MicrocompactSettings
    from ctxpipe.core.restore import RestoreSettings
    from ctxpipe.core.summarize import SummarizeSettings
    from ctxpipe.jobs.pipeline import CompactOptions

    now = datetime(2026, 5, 1, tzinfo=timezone.utc)
    settings = {
        "microcompact": MicrocompactSettings(force=True),
        "summarize": SummarizeSettings("llm", model="claude-sonnet-4-6", base_url=failing_server.url, keep_last=2, max_retries=0),
        "restore": RestoreSettings(source="transcript"),
    }
    options = CompactOptions(settings, force_summary=True, now=now, api_key="test-key")
    items = []
    for number in range(10):
        path = tmp_path / f"s{number}.jsonl"
        path.write_bytes(small("/home/dev/app", number))
        items.append((str(path), str(path), str(tmp_path / "out" / path.name)))
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 0)
    results = batch.run_all(functools.partial(compact_one, options=options, backup=None), items, batch.Runner(2), [1], shared_breaker=True)
    assert all(ok for ok, _ in results), results
    calls = len(failing_server.message_requests())
    assert 3 <= calls <= 4, f"{calls} requests: the breaker opens after 3 failures (one more may already be in flight in the other worker)"
    skipped = [r for _, r in results if "not asked again" in stage(r.to_wire(), "summarize")["note"]]
    assert len(skipped) == 10 - calls
    assert all(Path(target).exists() for _, _, target in items)


# --- the real Claude Code resumes what compact wrote ---------------------------------------------

NEW_PROMPT = "What is left to do?"
APP = "from flask import Flask\n\napp = Flask(__name__)\n\n\n@app.route('/')\ndef index():\n    return 'hi'\n"
CONFIG = "DEBUG = False\nPORT = 8000\n"
README = "# App\n\nA tiny app.\n"


def app_session(root: Path, session_id: str) -> bytes:
    """A session that reads and edits three files of a real folder (the edits are applied on disk too)."""
    write_files(root, {"src/app.py": APP, "src/config.py": CONFIG, "README.md": README})
    p = Project(root, session_id=session_id)
    p.ask("Add a /health route and set the port to 9000. The code word is MANGO.")
    p.read("src/app.py", APP)
    p.edit("src/app.py", "@app.route('/')", "@app.route('/health')\ndef health():\n    return {'ok': True}\n\n\n@app.route('/')")
    p.read("src/config.py", CONFIG)
    p.edit("src/config.py", "PORT = 8000", "PORT = 9000")
    p.bash("pytest -q", "2 passed in 0.05s")
    p.say("Done: /health is added and the port is 9000.")
    p.ask("Now mention it in the README.")
    p.read("README.md", README)
    p.edit("README.md", "A tiny app.", "A tiny app.\n\nGET /health returns ok.")
    p.say("README updated.")
    p.ask("Run the tests once more.")
    p.bash("pytest -q", "3 passed in 0.06s")
    p.say("All 3 tests pass.")
    write_files(
        root,
        {
            "src/app.py": APP.replace("@app.route('/')", "@app.route('/health')\ndef health():\n    return {'ok': True}\n\n\n@app.route('/')"),
            "src/config.py": CONFIG.replace("8000", "9000"),
            "README.md": README.replace("A tiny app.", "A tiny app.\n\nGET /health returns ok."),
        },
    )
    return p.to_bytes()


def sent_blocks(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for message in messages:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if block.get("type") == "text":
                out.append(("text", block["text"]))
            elif block.get("type") == "tool_use":
                out.append(("tool_use", block["id"]))
            elif block.get("type") == "tool_result":
                out.append(("tool_result", block["tool_use_id"]))
    return out


def pairs_whole(messages: list[dict[str, Any]]) -> bool:
    for index, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        uses = {b["id"] for b in content if b.get("type") == "tool_use"}
        if uses:
            following = messages[index + 1]["content"] if index + 1 < len(messages) and isinstance(messages[index + 1]["content"], list) else []
            if uses != {b["tool_use_id"] for b in following if b.get("type") == "tool_result"}:
                return False
    return True


def compacted_app(tmp_path: Path, *extra: str) -> tuple[Path, str, bytes, bytes]:
    import uuid

    root = tmp_path / "app"
    session_id = str(uuid.uuid4())
    original = app_session(root, session_id)
    (tmp_path / "s.jsonl").write_bytes(original)
    result = compact("--force", "--engine", "offline", "--keep-last", "4", "--now", NOW_ISO, *extra, tmp_path / "s.jsonl")
    assert result.returncode == 0 and re.search(rb"restore: \S+s\.jsonl: restored 3 files", result.stderr), result.stderr.decode()
    return root, session_id, original, result.stdout


@needs_claude_code
def test_claude_code_resumes_the_compacted_session(tmp_path: Path) -> None:
    from claude_code import resume

    # --keep-recent 100: microcompact leaves its marker out (see the xfail below for what it does otherwise).
    root, session_id, original, compacted = compacted_app(tmp_path, "--keep-recent", "100")
    with MessagesServer() as server:
        before = resume(original, session_id, root, NEW_PROMPT, server)
        after = resume(compacted, session_id, root, NEW_PROMPT, server)
    assert before.returncode == 0 and after.returncode == 0, after.debug()
    assert after.external == []
    sent = after.body["messages"]
    texts = [text for kind, text in sent_blocks(sent) if kind == "text"]
    assert any(t.startswith(SUMMARY_PREAMBLE) and "MANGO" in t for t in texts), after.debug()
    restored = [t for t in texts if t.startswith("[restored file]")]
    assert restored and restored[0].startswith("[restored file] README.md (lines 1-6, ") and "GET /health returns ok." in restored[0]
    # The tail is intact: the last request and its test run (tool_use and tool_result), then the answer.
    blocks = sent_blocks(sent)
    tail = [b for b in blocks if b[0] != "text" or b[1] in ("Run the tests once more.", "All 3 tests pass.")]
    assert tail == [("text", "Run the tests once more."), ("tool_use", "toolu_01T00008"), ("tool_result", "toolu_01T00008"), ("text", "All 3 tests pass.")]
    assert pairs_whole(sent)
    assert "Add a /health route and set the port to 9000. The code word is MANGO." not in [t for t in texts if not t.startswith(SUMMARY_PREAMBLE)]
    assert len(json.dumps(sent)) < len(json.dumps(before.body["messages"]))
    assert len(sent) < len(before.body["messages"])


@needs_claude_code
@pytest.mark.parametrize("extra", [
    pytest.param(("--keep-recent", "100"), id="restore-timestamps"),
    pytest.param((), id="microcompact-marker"),
])  # fmt: skip
def test_claude_code_receives_every_restored_file(tmp_path: Path, extra: tuple[str, ...]) -> None:
    from claude_code import resume

    root, session_id, _, compacted = compacted_app(tmp_path, *extra)
    last_restored = orjson.loads(compacted.splitlines()[-1])["uuid"]
    with MessagesServer() as server:
        after = resume(compacted, session_id, root, NEW_PROMPT, server)
    assert after.returncode == 0, after.debug()
    texts = [text for kind, text in sent_blocks(after.body["messages"]) if kind == "text"]
    headers = [t.split(" (")[0] for t in texts if t.startswith("[restored file]")]
    assert headers == ["[restored file] README.md", "[restored file] src/config.py", "[restored file] src/app.py"], after.debug()
    assert resumed_from(compacted) == last_restored


@pytest.mark.parametrize("extra", [
    pytest.param(("--keep-recent", "100"), id="restore-timestamps"),
    pytest.param((), id="microcompact-marker"),
])  # fmt: skip
def test_compact_output_resumes_from_its_last_restored_entry_by_the_observed_rule(tmp_path: Path, extra: tuple[str, ...]) -> None:
    """The same two bugs without node, by the rule Claude Code was seen to follow (project_sessions.resumed_from)."""
    _, _, _, compacted = compacted_app(tmp_path, *extra)
    objs = [orjson.loads(line) for line in compacted.splitlines()]
    restored = [o for o in objs if o.get("isMeta") and str(o["message"]["content"]).startswith("[restored file]")]
    assert len(restored) == 3 and objs[-3:] == restored
    assert resumed_from(compacted) == restored[-1]["uuid"]


def test_the_llm_engine_without_a_key_is_an_error_and_calls_nothing(tmp_path: Path) -> None:
    # As with summarize: asking for the model without a key is a mistake to report, not to paper over.
    with MessagesServer() as server:
        result = compact(
            "--engine",
            "llm",
            "--base-url",
            server.url,
            "--force",
            "--keep-last",
            "2",
            "--source",
            "transcript",
            "--now",
            NOW_ISO,
            FIXTURES / "claude-code" / "basic.jsonl",
            env={"ANTHROPIC_API_KEY": ""},
        )
        assert server.requests == []
    assert result.returncode == 1 and result.stdout == b""
    assert b"ctxpipe: error: --engine llm needs ANTHROPIC_API_KEY" in result.stderr and b"Traceback" not in result.stderr


def test_compact_drop_history_keeps_the_baseline_the_whole_file_measured(tmp_path: Path) -> None:
    # A session Claude Code compacted before: its baseline is measured on the history above the
    # boundary, which --drop-history does not write. The new summary's boundary carries the figure,
    # as summarize --drop-history writes it, so the output still counts it.
    p = Project("/w/app")
    p.ask("Tidy the modules.")
    for n in range(6):
        p.read(f"src/m{n}.py", source_file(f"m{n}", 60))
        p.say(f"Read m{n}.")
    p.compact_here()
    for n in range(6, 12):
        p.read(f"src/m{n}.py", source_file(f"m{n}", 60))
        p.say(f"Read m{n}.")
    p.ask("Thanks, finish up.")
    path = tmp_path / "s.jsonl"
    path.write_bytes(p.to_bytes())
    measured = json.loads(run_cli("count", "--json", path).stdout)["baseline"]
    assert measured["source"] == "measured"
    result = compact("--force", "--engine", "offline", "--drop-history", "--keep-last", "4", path)
    assert result.returncode == 0, result.stderr.decode()
    boundary = [orjson.loads(line) for line in result.stdout.splitlines() if b'"compact_boundary"' in line][-1]
    assert boundary["compactMetadata"]["ctxpipe"]["baseline"] == measured["tokens"]
    counted = json.loads(run_cli("count", "--json", "-", stdin=result.stdout).stdout)
    assert counted["baseline"]["tokens"] == measured["tokens"]
    alone = run_cli("summarize", "--engine", "offline", "--drop-history", "--keep-last", "4", "--now", NOW_ISO, path)
    assert json.loads(run_cli("count", "--json", "-", stdin=alone.stdout).stdout)["baseline"] == counted["baseline"]


def test_compact_says_when_its_summary_grew_the_context(tmp_path: Path) -> None:
    # compacted.jsonl's history is its earlier summary and two short messages: a summary --force asks
    # for leaves more than it replaces. summarize's own warning goes with compact's line, and into the report.
    path = FIXTURES / "claude-code" / "compacted.jsonl"
    result = compact("--force", "--engine", "offline", "--keep-last", "1", "--now", "2026-05-05T00:00:00Z", "--report-json", tmp_path / "r.json", path)
    assert result.returncode == 0, result.stderr.decode()
    summarize = stage(json.loads((tmp_path / "r.json").read_text()), "summarize")
    assert summarize["changed"] and summarize["tokens_after"] >= summarize["tokens_before"], summarize  # the case this is about
    assert "warning: the offline summary would leave" in summarize["note"] and "written as asked" in summarize["note"]
    line = next(line for line in result.stderr.decode().splitlines() if line.startswith("ctxpipe: summarize:"))
    assert "warning: the offline summary would leave" in line
