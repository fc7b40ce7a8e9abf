"""The API's batches give what the commands print for the same files (the commands are its clients):
count_many, validate_many, compact_many and report_many over a folder, on local worker processes
and, when the dask extra is installed, on a local Dask cluster. And the API stays a light import
whose every listed name resolves."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ctxpipe
import pytest
from ctxpipe import api
from ctxpipe.core.errors import InputError, SettingsError
from ctxpipe.core.microcompact import MicrocompactSettings
from ctxpipe.core.reports import CountTotal, FailedFile
from ctxpipe.core.restore import RestoreSettings
from ctxpipe.core.summarize import SummarizeSettings
from ctxpipe.core.wire import to_wire
from ctxpipe.jobs import batch
from helpers import FIXTURES, ok, run_cli

NOW = "2026-05-01T00:00:00Z"
MOMENT = datetime(2026, 5, 1, tzinfo=timezone.utc)
SESSIONS = ["basic.jsonl", "compacted.jsonl", "parallel.jsonl", "repeats.jsonl", "sidechain.jsonl"]
COMPACT_FLAGS = ["--force", "--engine", "offline", "--keep-last", "3", "--source", "transcript", "--now", NOW]


def _compact_options() -> ctxpipe.CompactOptions:
    """The library's spelling of COMPACT_FLAGS."""
    settings = {
        "microcompact": MicrocompactSettings(force=True),
        "summarize": SummarizeSettings("offline", keep_last=3),
        "restore": RestoreSettings(source="transcript"),
    }
    return ctxpipe.CompactOptions(settings, force_summary=True, now=MOMENT)


def json_lines(data: bytes) -> list[object]:
    return [json.loads(line) for line in data.splitlines()]


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Fixture sessions in a project folder and a subfolder, a subagent, and one file that is not JSON."""
    root = tmp_path / "projects"
    (root / "app" / "subagents").mkdir(parents=True)
    for number, name in enumerate(SESSIONS):
        shutil.copy(FIXTURES / "claude-code" / name, root / ("app" if number % 2 else "") / name)
    shutil.copy(FIXTURES / "claude-code" / "basic.jsonl", root / "app" / "subagents" / "agent-a1b2.jsonl")
    (root / "broken.jsonl").write_bytes(b'{"type": "user", broken\n')
    return root


@pytest.fixture(params=[1, 2], ids=["one worker", "two workers"])
def jobs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    # Small files: without this the batch would run in this process whatever jobs says.
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 0)
    return int(request.param)


def test_session_files_are_what_the_batches_work_on(folder: Path) -> None:
    skipped: list[tuple[str, str]] = []
    found = ctxpipe.session_files([folder], on_skip=lambda shown, why: skipped.append((shown, why)))
    assert sorted(Path(file.shown).name for file in found) == sorted([*SESSIONS, "agent-a1b2.jsonl", "broken.jsonl"])
    assert {file.kind for file in found} == {"main", "subagent"} and skipped == []
    assert "agent-a1b2.jsonl" not in [Path(file.shown).name for file in ctxpipe.session_files([folder], subagents=False)]
    with pytest.raises(InputError):
        ctxpipe.session_files([folder / "missing"])


def test_count_many_is_count_json(folder: Path, jobs: int) -> None:
    printed = run_cli("count", "--json", "--jobs", str(jobs), folder)
    assert printed.returncode == 1  # the broken file
    counted = ctxpipe.count_many([str(folder)], jobs=jobs)
    assert [row.to_wire() for row in counted.rows()] == json_lines(printed.stdout)
    assert [str(error) for error in counted.failures] == [line.removeprefix("ctxpipe: error: ") for line in printed.stderr.decode().splitlines()]
    assert len(counted.files) == len(SESSIONS) + 2 and [file.ok for file in counted.files].count(False) == 1
    total = counted.rows()[-1]
    assert isinstance(total, CountTotal) and total.failed == 1 and total.files == len(SESSIONS) + 1


def test_count_many_takes_count_options(folder: Path) -> None:
    printed = ok(run_cli("count", "--json", "--cost", "--tokenizer", "rough", "--no-subagents", folder / "app"))
    counted = ctxpipe.count_many([folder / "app"], ctxpipe.CountOptions(tokenizer="rough", cost=True), subagents=False)
    assert [row.to_wire() for row in counted.rows()] == json_lines(printed.stdout)
    assert "usd" in counted.rows()[-1].to_wire()


def test_validate_many_is_validate_json(folder: Path, jobs: int) -> None:
    printed = run_cli("validate", "--json", "--on-error", "skip", "--jobs", str(jobs), folder)
    validated = ctxpipe.validate_many([folder], on_error="skip", jobs=jobs)
    assert [file.report.to_wire() for file in validated.done] == json_lines(printed.stdout)
    assert printed.returncode == (1 if any(not file.report.valid for file in validated.done) else 0)
    broken = next(file for file in validated.done if file.source.endswith("broken.jsonl"))
    assert broken.stats.skipped == 1  # skipped, so counted rather than listed as a finding


def _output_below(row: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A compact row with its output relative to `folder` (a failed file's row has none)."""
    return {**row, "output": str(Path(row["output"]).relative_to(folder))} if "output" in row else row


def test_compact_many_is_compact_out_dir(folder: Path, tmp_path: Path, jobs: int) -> None:
    printed = run_cli("compact", "--json", *COMPACT_FLAGS, "--jobs", str(jobs), "--out-dir", tmp_path / "by-command", folder)
    assert printed.returncode == 1  # the broken file
    done = ctxpipe.compact_many([folder], tmp_path / "by-api", _compact_options(), jobs=jobs)
    rows = [_output_below(row, tmp_path / "by-api") for row in (row.to_wire() for row in done.rows())]
    expected = [_output_below(row, tmp_path / "by-command") for row in json_lines(printed.stdout)]
    assert rows == expected
    (failed,) = [row for row in rows if "error" in row]  # the broken file: a row of its own, in its place
    assert Path(failed["file"]).name == "broken.jsonl" and failed["error"].startswith("line 1: ")
    assert files_under(tmp_path / "by-api") == files_under(tmp_path / "by-command")
    assert len(done.reports) == len(SESSIONS) + 1 and len(done.failures) == 1


def test_compact_many_in_place_keeps_backups(folder: Path) -> None:
    session = folder / "app" / "repeats.jsonl"
    before = session.read_bytes()
    done = ctxpipe.compact_many([session], options=_compact_options(), in_place=True, backup=".bak")
    [report] = done.reports
    assert report.changed and report.backup == f"{session}.bak"
    assert Path(f"{session}.bak").read_bytes() == before != session.read_bytes()


def test_compact_many_checks_its_plan_before_writing(folder: Path, tmp_path: Path) -> None:
    # The same file name from two folders given by name would land on one path below out_dir.
    (tmp_path / "other").mkdir()
    shutil.copy(folder / "basic.jsonl", tmp_path / "other" / "basic.jsonl")
    with pytest.raises(SettingsError, match="would both be written"):
        ctxpipe.compact_many([folder / "basic.jsonl", tmp_path / "other" / "basic.jsonl"], tmp_path / "out", _compact_options())
    assert not (tmp_path / "out").exists()
    with pytest.raises(SettingsError):
        ctxpipe.compact_many([folder], options=_compact_options())  # neither out_dir nor in_place


def test_report_many_is_report_json(folder: Path, jobs: int) -> None:
    printed = run_cli("report", "--json", "--now", NOW, "--jobs", str(jobs), folder)
    reported = ctxpipe.report_many([folder], now=MOMENT, jobs=jobs)
    # Its dry runs' cache decisions are dataclasses; a file that failed is its error row, in its place.
    expected = [to_wire(file.result.report) if file.error is None else FailedFile.of(file.file, file.error).to_wire() for file in reported.files]
    assert expected == json_lines(printed.stdout)
    assert len(reported.failures) == 1 and reported.index is None


def test_report_many_writes_the_pages_and_the_index_of_report_out_dir(folder: Path, tmp_path: Path, jobs: int) -> None:
    run_cli("report", "--now", NOW, "--jobs", str(jobs), "--out-dir", tmp_path / "by-command", folder)
    reported = ctxpipe.report_many([folder], tmp_path / "by-api", now=MOMENT, jobs=jobs)
    assert reported.index == str(tmp_path / "by-api" / api.INDEX)
    Path(reported.index).write_text(reported.index_html(), encoding="utf-8")
    assert files_under(tmp_path / "by-api") == files_under(tmp_path / "by-command")
    assert all(file.result is None or file.result.report is None for file in reported.files)  # the pages stayed in the workers


def test_a_scheduler_goes_with_the_dask_executor(folder: Path) -> None:
    with pytest.raises(SettingsError, match="--executor dask"):
        ctxpipe.count_many([folder], scheduler="tcp://127.0.0.1:1")


def test_batches_on_a_dask_cluster_give_what_local_workers_give(folder: Path, tmp_path: Path) -> None:
    from cloud import dask_cluster, require_dask

    require_dask()
    with dask_cluster(workers=1) as cluster:  # one worker: the cheapest cluster, started once for both batches
        counted = ctxpipe.count_many([folder], executor="dask", scheduler=cluster.address)
        on_dask = ctxpipe.compact_many([folder], tmp_path / "dask", _compact_options(), executor="dask", scheduler=cluster.address)
    assert counted.rows() == ctxpipe.count_many([folder], jobs=1).rows()
    local = ctxpipe.compact_many([folder], tmp_path / "local", _compact_options(), jobs=1)
    assert [_output_below(row.to_wire(), tmp_path / "dask") for row in on_dask.rows()] == [
        _output_below(row.to_wire(), tmp_path / "local") for row in local.rows()
    ]
    assert files_under(tmp_path / "dask") == files_under(tmp_path / "local")


@pytest.mark.parametrize("name", ["basic.jsonl", "compacted.jsonl"])
def test_warn_transcript_is_warn_json(name: str) -> None:
    path = FIXTURES / "claude-code" / name
    printed = run_cli("warn", "--json", "--window", "20000", path)  # a small window: a level above normal
    report = ctxpipe.warn_transcript(path, ctxpipe.CountOptions(window=20_000))
    assert [report.to_wire()] == json_lines(printed.stdout)
    assert printed.returncode == {"normal": 0, "warning": 3, "autocompact": 4, "blocking": 5}[report.level]
    assert ctxpipe.warn_transcript(path.read_bytes(), ctxpipe.CountOptions(window=20_000)).tokens == report.tokens


def test_context_management_is_api_edits() -> None:
    from ctxpipe.core.api_edits import ApiEditsOptions

    path = FIXTURES / "claude-code" / "repeats.jsonl"
    printed = ok(run_cli("api-edits", "--json", "--keep", "2", "--compact", path))
    found = ctxpipe.context_management(path, ApiEditsOptions(keep=2, compact=True))
    assert [found.edits.request] == json_lines(printed.stdout)
    assert found.stats.skipped == 0 and found.counted.file == str(path)


# --- the face itself --------------------------------------------------------------------------------


def test_every_listed_name_resolves() -> None:
    assert [name for name in api.__all__ if not hasattr(api, name)] == []
    assert [name for name in ctxpipe.__all__ if not hasattr(ctxpipe, name)] == []


def test_the_names_loaded_on_use_are_those_of_their_modules() -> None:
    import importlib

    for name, (module, attribute) in api._LOADED_ON_USE.items():
        assert getattr(api, name) is getattr(importlib.import_module(f"ctxpipe.{module}"), attribute), name
        assert name in api.__all__, name


def test_importing_the_api_loads_no_job() -> None:
    # The jobs, the sessions finder and the report load when a function needs them.
    code = "import sys, ctxpipe.api; print(sorted(m for m in sys.modules if m.startswith(('ctxpipe.jobs', 'ctxpipe.report', 'ctxpipe.cli'))))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert result.stdout.strip() == b"[]", result.stdout


def test_a_now_without_a_zone_is_the_local_time_and_unknown_names_are_settings_errors(tmp_path: Path) -> None:
    # datetime.now() is what a caller passes first: taken as Python takes it (local time), not a TypeError.
    session = FIXTURES / "claude-code" / "repeats.jsonl"
    naive = datetime(2030, 1, 1, 12, 0, 0)
    out, report = api.run_stage("microcompact", session, MicrocompactSettings(), now=naive)
    same, _ = api.run_stage("microcompact", session, MicrocompactSettings(), now=naive.astimezone())
    assert out == same and report.extras is not None
    assert api.session_report(session, now=naive).to_wire() == api.session_report(session, now=naive.astimezone()).to_wire()
    # A format or stage name that is not one: SettingsError naming the known ones, never a KeyError.
    with pytest.raises(SettingsError, match=r"no format named 'claude' \(one of"):
        ctxpipe.read_transcript(session, format="claude")
    with pytest.raises(SettingsError, match=r"no stage named 'micro' \(one of snip, microcompact"):
        api.run_stage("micro", session)


def test_a_gemini_document_given_as_bytes_reads_as_its_file_does() -> None:
    path = FIXTURES / "gemini" / "chat.json"
    data = path.read_bytes()
    assert ctxpipe.count_transcript(data).tokens == ctxpipe.count_transcript(path).tokens
    assert api.warn_count(data).warn_report().level == api.warn_count(path).warn_report().level
    assert api.session_report(data).count.tokens == ctxpipe.count_transcript(path).tokens


def test_library_convert_refuses_the_rebuild_the_command_refuses_and_keeps_the_recorded_cwd() -> None:
    from ctxpipe.formats import WriteOptions

    transcript = ctxpipe.read_transcript(FIXTURES / "claude-code" / "repeats.jsonl")
    for asked in ({"repair": True}, {"history": True}):
        with pytest.raises(SettingsError, match="rebuild messages"):
            ctxpipe.convert(transcript, "claude-code", **asked)
    recorded = get_cwd(transcript.entries)
    codex = ctxpipe.convert(transcript, "codex", options=WriteOptions(session_id="11111111-2222-4333-8444-555555555555"))
    meta = next(entry.obj for entry in codex.entries if entry.obj.get("type") == "session_meta")
    assert meta["payload"]["cwd"] == recorded != "." and meta["payload"]["id"] == "11111111-2222-4333-8444-555555555555"


def get_cwd(entries: Any) -> str:
    return next(entry.obj["cwd"] for entry in reversed(entries) if isinstance(entry.obj.get("cwd"), str))


def test_library_settings_are_held_to_what_their_flags_accept() -> None:
    from ctxpipe.jobs.count import CountOptions
    from ctxpipe.jobs.pipeline import CompactOptions

    session = FIXTURES / "claude-code" / "repeats.jsonl"
    refused = {
        "a misspelt stage": lambda: CompactOptions({"sumarize": SummarizeSettings()}),
        "another stage's settings": lambda: CompactOptions({"summarize": MicrocompactSettings()}),
        "a value under the flag's minimum": lambda: api.run_stage("microcompact", session, MicrocompactSettings(keep_recent=-5)),
        "a choice the flag has not": lambda: CompactOptions({"summarize": SummarizeSettings(engine="fastest")}),
        "a window of no tokens": lambda: CountOptions(window=-1),
        "an unknown tokenizer": lambda: ctxpipe.count_transcript(session, CountOptions(tokenizer="nope")),
        "an unknown on_error": lambda: ctxpipe.read_transcript(session, on_error="bogus"),  # type: ignore[arg-type]
    }
    for case, call in refused.items():
        with pytest.raises(SettingsError):
            call()
            pytest.fail(f"{case}: accepted")
    # What the flags accept still runs.
    assert api.run_stage("microcompact", session, MicrocompactSettings(keep_recent=0, force=True))[1].extras is not None


def test_one_path_where_a_list_is_asked_is_a_type_error_and_a_bytearray_reads_as_bytes() -> None:
    session = FIXTURES / "claude-code" / "repeats.jsonl"
    with pytest.raises(TypeError, match="a list of paths, not one path"):
        ctxpipe.count_many(str(session))  # type: ignore[arg-type]
    data = session.read_bytes()
    assert [entry.raw for entry in ctxpipe.read_transcript(bytearray(data)).entries] == [entry.raw for entry in ctxpipe.read_transcript(data).entries]


def test_a_local_dask_cluster_leaves_the_callers_environment_as_it_was() -> None:
    # Its nannies set PYTHONHASHSEED, OMP_NUM_THREADS, … in this process for the workers they start.
    import os

    from cloud import require_dask

    require_dask()
    before = dict(os.environ)
    counted = ctxpipe.count_many([FIXTURES / "claude-code" / "repeats.jsonl"], jobs=1, executor="dask")
    assert counted.failures == [] and len(counted.files) == 1
    assert dict(os.environ) == before
