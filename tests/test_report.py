"""`ctxpipe report`: the facts behind the page are the figures the other commands print.

The page itself (rendering, the browser, hostile text) is tested in test_report_page.py; here the data
and the command: every number of `report --json` is checked against `count`, `warn`, `count --cost`,
`count --timeline` and each stage's own `--report-json` on the same file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import ctxpipe
import pytest
from builders import Session
from ctxpipe.core.wire import to_wire
from ctxpipe.jobs.schemas import errors
from helpers import FIXTURES, child_env, corpus_files, drain_pty, needs_corpus, ok, run_cli

NOW = "2026-05-04T12:00:00Z"
OPUS = "claude-opus-4-6"


def busy_session(prompt: int | None = None, reads: int = 12) -> Session:
    """A session whose old Read results hold most of the context; its usage grows by what each
    result holds (estimated), the last call at `prompt` tokens when given."""
    from ctxpipe.jobs.tokenizers import counter_named

    counter = counter_named("pieces")
    session = Session(OPUS)
    session.user("Look through the service and tighten its limits.")
    total = 18_000
    for number in range(reads):
        tool = session.tool_id()
        session.response(
            [{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": f"/home/dev/app/module_{number}.py"}}],
            {"input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": total, "output_tokens": 40},
        )
        result = "".join(f"def handler_{number}_{line}(request):\n    return limit(request, {line})\n" for line in range(300))
        session.tool_result(tool, result)
        total += 145 + round(1.2 * counter.count(result))
    last = prompt or total + 3000
    session.text("All read.", {"input_tokens": 5, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": last - 3005, "output_tokens": 30})
    session.user("Now raise the limit in module_0.")
    return session


def report_json(*args: Any, cwd: Path | None = None) -> list[dict[str, Any]]:
    result = ok(run_cli("report", "--json", "--now", NOW, *args, cwd=cwd))
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    for row in rows:
        assert errors("report.report.schema.json", row) == [], row
    return rows


def json_of(*args: Any) -> dict[str, Any]:
    return json.loads(ok(run_cli(*args)).stdout.splitlines()[0])


@pytest.fixture
def busy(tmp_path: Path) -> Path:
    return busy_session().write(tmp_path / "project" / "busy.jsonl")


def test_the_facts_are_count_warn_and_cost_of_the_same_file(busy: Path) -> None:
    [report] = report_json(busy)
    count = json_of("count", "--cost", "--json", busy)
    assert report["count"] == count
    assert report["cost"] == count["cost"]
    assert report["warn"] == json.loads(run_cli("warn", "--json", busy).stdout)
    assert report["model"] == OPUS and report["kind"] == "main"
    assert report["first_activity"] == "2026-05-04T10:00:00.000Z"


def test_one_timeline_point_per_api_call_of_the_main_chain(busy: Path) -> None:
    [report] = report_json(busy)
    timeline = json_of("count", "--timeline", "--json", busy)["timeline"]
    main = [call for call in report["calls"] if call["main"]]
    assert [(call["line"], call["prompt_tokens"]) for call in main] == [(point["line"], point["tokens"]) for point in timeline]
    assert len(main) == 13 and [call["turn"] for call in report["calls"]] == list(range(1, 14))


def test_each_dry_run_is_the_stage_s_own_figure_and_nothing_is_written(busy: Path, tmp_path: Path) -> None:
    before = sorted(os.listdir(busy.parent)), busy.read_bytes()
    [report] = report_json(busy)
    assert (sorted(os.listdir(busy.parent)), busy.read_bytes()) == before
    runs = {run["stage"]: run for run in report["dry_runs"]}
    assert list(runs) == ["microcompact", "collapse", "summarize"]
    own = {
        "microcompact": ["microcompact", "--force"],
        "collapse": ["collapse"],
        "summarize": ["summarize", "--engine", "offline"],
    }
    for stage, argv in own.items():
        written = tmp_path / f"{stage}.json"
        ok(run_cli(*argv, "--now", NOW, "--report-json", written, "-o", tmp_path / f"{stage}.jsonl", busy))
        figures = json.loads(written.read_text())
        assert (runs[stage]["tokens_before"], runs[stage]["tokens_after"], runs[stage]["tokens_freed"]) == (
            figures["tokens_before"],
            figures["tokens_after"],
            figures["tokens_freed"],
        ), stage
    microcompact = runs["microcompact"]
    assert microcompact["changed"] and microcompact["tokens_freed"] > 20_000  # 7 of the 12 results (the last 5 are kept)
    cache = microcompact["cache"]
    assert cache["tokens_freed"] == microcompact["tokens_freed"] and cache["horizon"] == 5
    assert cache["cache_warm"] is False  # two hours after the last call: the cache has expired, so clearing pays at once
    assert cache["clear"] and cache["break_even_turn"] == 1
    # The cache that survives the clearing: the fixed part and the messages before the first cleared result.
    assert report["count"]["baseline_tokens"] <= cache["kept_prefix_tokens"] < cache["prompt_tokens"] - cache["tokens_freed"]


def test_the_horizon_and_the_clock_decide_whether_a_break_pays(busy: Path) -> None:
    # Right after the last call the cache is warm: clearing pays back only over enough turns.
    warm = "2026-05-04T10:00:20Z"
    [one] = report_json("--horizon", "1", "--now", warm, busy)
    [many] = report_json("--horizon", "20", "--now", warm, busy)
    first, later = one["dry_runs"][0]["cache"], many["dry_runs"][0]["cache"]
    assert first["cache_warm"] and later["cache_warm"]
    assert first["clear"] is False and later["clear"] is True
    assert "does not pay for itself within 1 turn." in one["recommendation"] and one["advice"]["stage"] is None
    # Over 20 turns every break pays: the advice is the stage that saves the most dollars, with its command.
    saving = {run["stage"]: run["cache"]["cost_keep_usd"] - run["cache"]["cost_clear_usd"] for run in many["dry_runs"] if run["cache"]}
    assert len(saving) == 2 and many["advice"]["stage"] == max(saving, key=saving.__getitem__)
    assert many["advice"]["command"].startswith(f"ctxpipe {many['advice']['stage']} ") and many["advice"]["command"] in many["recommendation"]


def test_events_place_compactions_and_stage_markers_after_their_call(tmp_path: Path) -> None:
    cleared = tmp_path / "cleared.jsonl"
    ok(run_cli("microcompact", "--force", "--now", NOW, "-o", cleared, busy_session().write(tmp_path / "s.jsonl")))
    [report] = report_json(cleared)
    [event] = report["events"]
    marker = json.loads(cleared.read_bytes().splitlines()[-1])
    assert event["kind"] == "microcompact" and event["tokens_saved"] == marker["microcompactMetadata"]["tokensSaved"]
    assert event["after_turn"] == 13 and event["line"] == len(cleared.read_bytes().splitlines())
    golden = json.loads((FIXTURES / "report" / "compacted.out.jsonl").read_text())
    assert [(e["kind"], e["line"], e["after_turn"]) for e in golden["events"]] == [("compact_boundary", 7, 3)]
    rebuilt = [call["turn"] for call in golden["calls"] if call["cache_rebuilt"]]
    assert rebuilt == [4]  # the first call after the compaction writes the cache again


def test_largest_lines_carry_a_short_one_line_excerpt(busy: Path) -> None:
    [report] = report_json(busy)
    top = report["largest"]
    assert len(top) == 10 and top[0]["block"] == "tool_result" and top[0]["tool"] == "Read"
    assert all(len(row["excerpt"]) <= 160 and "\n" not in row["excerpt"] for row in top)
    assert top[0]["excerpt"].startswith("def handler_") and top[0]["excerpt"].endswith("…")
    for by in ("tool", "role", "block"):
        assert report["breakdown"][by] == json_of("count", "--by", by, "--json", busy)["breakdown"]


def test_a_quiet_session_needs_nothing(tmp_path: Path) -> None:
    [report] = report_json(FIXTURES / "report" / "compacted.in.jsonl")
    assert report["recommendation"] == "No need to compact now: 16,597 tokens, 150,403 before autocompact."
    # Below the warning level a saving under 10,000 tokens is not worth a cache break, however cheap.
    [small] = report_json(busy_session(reads=2).write(tmp_path / "small.jsonl"))
    [summarize] = [run for run in small["dry_runs"] if run["stage"] == "summarize"]
    assert 0 < summarize["tokens_freed"] < 10_000 and summarize["cache"]["clear"]
    assert all(run["tokens_freed"] <= summarize["tokens_freed"] for run in small["dry_runs"])
    assert small["recommendation"].startswith("No need to compact now") and "under the 10,000 worth a cache break" in small["recommendation"]
    assert small["advice"] == {"stage": None, "command": None, "why": small["recommendation"]}
    # Microcompact's break pays here too, but it frees under 10,000: the stage advised is one that frees more.
    [more] = report_json(busy_session(reads=6).write(tmp_path / "more.jsonl"))
    [microcompact] = [run for run in more["dry_runs"] if run["stage"] == "microcompact"]
    assert 0 < microcompact["tokens_freed"] < 10_000 and microcompact["cache"]["clear"]
    advised = next(run for run in more["dry_runs"] if run["stage"] == more["advice"]["stage"])
    assert advised["tokens_freed"] >= 10_000 and advised["cache"]["clear"]


def test_a_folder_gets_a_page_each_mirrored_and_an_index(tmp_path: Path) -> None:
    tree = tmp_path / "projects"
    busy_session().write(tree / "-home-dev-app" / "one.jsonl")
    busy_session(reads=3).write(tree / "-home-dev-api" / "two.jsonl")
    (tree / "-home-dev-api" / "broken.jsonl").write_bytes(b'{"type":"user","message":{oops\n')
    out = tmp_path / "pages"
    result = run_cli("report", "--now", NOW, "--out-dir", out, tree)
    assert result.returncode == 1  # one file could not be read: the others still get their pages
    assert b"broken.jsonl" in result.stderr and b"Traceback" not in result.stderr
    assert sorted(str(path.relative_to(out)) for path in out.rglob("*.html")) == ["-home-dev-api/two.html", "-home-dev-app/one.html", "index.html"]
    index = (out / "index.html").read_text()
    assert 'href="./-home-dev-app/one.html"' in index and 'href="./-home-dev-api/two.html"' in index and "broken.jsonl" in index
    page = (out / "-home-dev-app" / "one.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


@pytest.mark.parametrize("out", ["~/pages", "pages", "./pages/"])
def test_every_index_link_leads_to_its_page_however_the_folder_is_spelt(tmp_path: Path, out: str) -> None:
    # A shell leaves "~" as it is in --out-dir=~/pages: the pages go under a folder named so, and
    # the index still links to each of them.
    tree = tmp_path / "projects"
    busy_session().write(tree / "-home-dev-app" / "one.jsonl")
    busy_session(reads=3).write(tree / "-home-dev-api" / "two.jsonl")
    (tmp_path / "home").mkdir()
    ok(run_cli("report", "--now", NOW, f"--out-dir={out}", "projects", cwd=tmp_path, env={"HOME": str(tmp_path / "home")}))
    [index] = list(tmp_path.rglob("index.html"))
    links = re.findall(r'href="(\./[^"#]+\.html)"', index.read_text())
    assert len(links) == 2 and all((index.parent / link).is_file() for link in links), links


def test_report_json_over_several_files_has_a_row_for_each_file_that_failed(tmp_path: Path) -> None:
    # As count writes it: a file that cannot be read is a row {file, error}, in its place.
    folder = tmp_path / "sessions"
    (folder / "a.jsonl").parent.mkdir()
    (folder / "a.jsonl").write_bytes(b'{"type":"user","message":{oops\n')
    busy_session().write(folder / "b.jsonl")
    result = run_cli("report", "--json", "--now", NOW, folder, tmp_path / "missing.jsonl")
    assert result.returncode == 1
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["file"] for row in rows] == [str(folder / "a.jsonl"), str(folder / "b.jsonl"), str(tmp_path / "missing.jsonl")]
    assert rows[0]["error"].startswith("line 1: ") and rows[2] == {"file": str(tmp_path / "missing.jsonl"), "error": "no such file"}
    assert "count" in rows[1] and "error" not in rows[1]
    for row in rows:
        assert errors("report.report.schema.json", row) == [], row


def test_usage_errors_say_what_to_give(tmp_path: Path, busy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = busy.parent
    for argv, words in [
        (["report", folder], b"--out-dir"),
        (["report", "-o", tmp_path / "a.html", "--out-dir", tmp_path / "b", busy], b"not both"),
        (["report", "-o", tmp_path / "a.html", "--json", folder], b"-o FILE is for one transcript"),
        (["report", "--horizon", "0", busy], b"--horizon"),
        (["report", "--horizon", "100000000", busy], b"--horizon"),
        (["report", "--json", "--out-dir", tmp_path / "c", folder], b"--json prints the facts instead"),
    ]:
        result = run_cli(*argv)
        assert result.returncode == 2 and words in result.stderr and result.stdout == b"", (argv, result.stderr)
    from ctxpipe.cli import streams

    monkeypatch.setattr(streams, "stdout_is_terminal", lambda: True)
    result = run_cli("report", busy)
    assert result.returncode == 2 and b"-o FILE" in result.stderr and result.stdout == b""


def test_a_page_never_replaces_an_input_and_a_folder_that_cannot_be_made_is_one_error(tmp_path: Path, busy: Path) -> None:
    original = busy.read_bytes()
    result = run_cli("report", "-o", busy, busy)
    assert result.returncode == 2 and b"the transcript read" in result.stderr and busy.read_bytes() == original
    pages = tmp_path / "pages"
    pages.mkdir()
    named_like_a_page = pages / "a.html"
    named_like_a_page.write_bytes(original)
    result = run_cli("report", "--out-dir", pages, named_like_a_page, busy)
    assert result.returncode == 2 and b"would replace the input" in result.stderr and named_like_a_page.read_bytes() == original
    for folder in (busy, os.devnull):  # a file, a device: no folder can be made there
        result = run_cli("report", "--now", NOW, "--out-dir", folder, busy)
        assert result.returncode == 1 and result.stderr.count(b"\n") == 1, result.stderr
        assert result.stderr.startswith(f"ctxpipe: error: {folder}: cannot create the folder".encode())
    assert busy.read_bytes() == original


def test_one_page_to_a_file_or_to_stdout(tmp_path: Path, busy: Path) -> None:
    page = tmp_path / "page.html"
    result = ok(run_cli("report", "--now", NOW, "-o", page, busy))
    assert result.stdout == b"" and page.read_text().startswith("<!DOCTYPE html>")
    piped = ok(run_cli("report", "--now", NOW, "-", stdin=busy.read_bytes()))
    assert piped.stdout.decode().startswith("<!DOCTYPE html>")


def test_the_library_returns_what_the_command_prints(busy: Path) -> None:
    from datetime import datetime, timezone

    [printed] = report_json(busy)
    report = ctxpipe.session_report(busy, now=datetime(2026, 5, 4, 12, tzinfo=timezone.utc))
    assert json.loads(json.dumps(to_wire(report))) == printed  # its dry runs' cache decisions are dataclasses
    page = ctxpipe.report_html(report)
    assert page == ok(run_cli("report", "--now", NOW, busy)).stdout.decode()


@needs_corpus
@pytest.mark.parametrize("path", corpus_files(), ids=lambda path: path.name[-24:])
def test_every_corpus_session_reports_the_figures_of_count(path: Path) -> None:
    [report] = report_json(path)
    count = json_of("count", "--cost", "--json", path)
    assert report["count"]["tokens"] == count["tokens"] and report["cost"] == count["cost"]
    assert sum(call["main"] for call in report["calls"]) == len(json_of("count", "--timeline", "--json", path)["timeline"])
    parts = {part["part"]: part["tokens"] for part in report["window"]}
    assert sum(parts.values()) == max(count["context_window"], count["tokens"])
    assert parts["baseline"] + parts["messages"] == count["tokens"]
    warned = json_of("warn", "--json", path)
    if warned.get("kind") == "compaction":  # a side-call is labelled as warn labels it, and nothing is advised
        assert report["kind"] == "compaction" and report["advice"]["stage"] is None and "not a session" in report["recommendation"]


# --- the advice, the window, the largest results, the index ----------------------------------------


def test_with_a_baseline_given_the_dry_runs_start_from_the_page_s_total() -> None:
    # --baseline adds a fixed part to a file that records no usage: the header and each dry run's
    # "tokens now" are the same figure, and each frees what it frees.
    path = FIXTURES / "count" / "anthropic-no-usage.in.jsonl"
    [report] = report_json("--baseline", "50000", path)
    assert report["count"]["tokens"] == json_of("count", "--json", "--baseline", "50000", path)["tokens"] > 50_000
    for run in report["dry_runs"]:
        assert run["tokens_before"] == report["count"]["tokens"] and run["tokens_after"] == run["tokens_before"] - run["tokens_freed"], run


def test_the_cost_chart_splits_each_call_at_the_prices_applied(tmp_path: Path, busy: Path) -> None:
    # With --prices whose ratios are not Anthropic's, each bar's parts are its tokens at those prices.
    import html

    from ctxpipe.report.page import PART_LABELS, PART_NAMES, _usd

    rates = {"input": 5, "cache_write_5m": 5, "cache_write_1h": 5, "cache_read": 2.5, "output": 50}
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({OPUS: rates}))
    [report] = report_json("--prices", prices, busy)
    page = ok(run_cli("report", "--now", NOW, "--prices", prices, busy)).stdout.decode()
    tips = [html.unescape(tip) for tip in re.findall(r'<g class="cost-bar" data-turn="\d+" data-usd="[^"]*" data-tip="([^"]*)"', page)]
    calls = report["calls"]
    assert len(tips) == len(calls)
    for call, tip in zip(calls, tips):
        assert call["usd"] == pytest.approx(sum(call["tokens"][part] * rates[part] for part in PART_NAMES) / 1e6, abs=1e-6)
        shown = dict(line.rsplit(" ", 1) for line in tip.split("\n")[1:] if line.rsplit(" ", 1)[0] in PART_LABELS.values())
        for part in PART_NAMES:
            if call["tokens"][part]:
                exact = call["tokens"][part] * rates[part] / 1e6
                assert shown[PART_LABELS[part]] in {_usd(exact), _usd(exact + 5e-7), _usd(exact - 5e-7)}, (part, tip)


def test_first_and_last_activity_are_the_times_not_the_strings(tmp_path: Path) -> None:
    # Compared as text, "yesterday" would be the last activity and a stamp in another zone out of order.
    lines = busy_session().to_bytes().splitlines()
    objs = [json.loads(line) for line in lines]
    objs[1]["timestamp"] = "yesterday"
    objs[2]["timestamp"] = "2026-05-04T23:30:00.000-02:00"  # 01:30 the next day in UTC: the latest
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(json.dumps(obj).encode() + b"\n" for obj in objs))
    [report] = report_json(path)
    stamps = [obj["timestamp"] for obj in objs if isinstance(obj.get("timestamp"), str) and obj["timestamp"] != "yesterday"]
    assert report["last_activity"] == "2026-05-04T23:30:00.000-02:00"
    assert report["first_activity"] == min(stamp for stamp in stamps if stamp.endswith("Z"))


def test_the_advised_command_runs_on_a_file_named_like_an_option(tmp_path: Path) -> None:
    import shlex

    busy_session().write(tmp_path / "-s.jsonl")
    [report] = report_json("--", "-s.jsonl", cwd=tmp_path)
    words = shlex.split(report["advice"]["command"])
    assert words[-1] == "./-s.jsonl"
    ok(run_cli(*words[1:], cwd=tmp_path))
    assert json_of("count", "--json", tmp_path / "-s.jsonl")["tokens"] == next(run["tokens_after"] for run in report["dry_runs"] if run["stage"] == words[1])


def test_the_advised_command_does_what_the_dry_run_measured(tmp_path: Path) -> None:
    import shlex

    given = "my project/busy session.jsonl"  # a path as a person types it, relative, with spaces
    busy_session().write(tmp_path / given)
    [report] = report_json(given, cwd=tmp_path)
    advice = report["advice"]
    runs = {run["stage"]: run for run in report["dry_runs"]}
    stage = advice["stage"]
    assert stage in runs and runs[stage]["cache"]["clear"]
    words = shlex.split(advice["command"])
    assert words[:2] == ["ctxpipe", stage] and words[-5:] == ["--ledger", f"{given}.ledger", "-o", given, given]
    assert advice["command"] in report["recommendation"] and "`" not in report["recommendation"]
    assert str(tmp_path) not in advice["command"]
    original = (tmp_path / given).read_bytes()
    # Run as printed, in the folder the report was made from: the file then counts what the dry run said.
    ok(run_cli(*words[1:], cwd=tmp_path))
    assert json_of("count", "--json", tmp_path / given)["tokens"] == runs[stage]["tokens_after"]
    # What it removed is in the ledger beside the file (not a .jsonl a session list would show): expand puts it back.
    assert ok(run_cli("expand", "--ledger", f"{given}.ledger", given, cwd=tmp_path)).stdout == original
    # A file read past a bad line (--on-error skip) is one the command must read so too.
    damaged = tmp_path / "damaged.jsonl"
    lines = busy_session().to_bytes().splitlines(keepends=True)
    damaged.write_bytes(b"".join([*lines[:3], b'{"type": "user", oops\n', *lines[3:]]))
    [skipping] = report_json("--on-error", "skip", damaged.name, cwd=tmp_path)
    words = shlex.split(skipping["advice"]["command"])
    assert words[2:-5][-2:] == ["--on-error", "skip"]
    ok(run_cli(*words[1:], cwd=tmp_path))
    assert json_of("count", "--json", damaged)["tokens"] == next(run["tokens_after"] for run in skipping["dry_runs"] if run["stage"] == words[1])
    # From stdin there is no file to name: the stage as a filter, with the same flags.
    piped = json.loads(ok(run_cli("report", "--json", "--now", NOW, stdin=busy_session().to_bytes())).stdout)
    assert piped["advice"]["command"] == " ".join(shlex.split(advice["command"])[:-5])


def test_a_compaction_side_call_is_labelled_not_a_session_everywhere(tmp_path: Path) -> None:
    from test_compaction_files import NAME, project, side_call

    path = side_call().write(tmp_path / NAME)
    [report] = report_json(path)
    warned = json.loads(run_cli("warn", "--json", path).stdout)
    assert warned["kind"] == report["kind"] == report["warn"]["kind"] == "compaction" and warned["level"] == "blocking"
    assert report["advice"] == {"stage": None, "command": None, "why": report["recommendation"]}
    assert "not a session" in report["recommendation"] and "blocking" not in report["recommendation"]
    page = ok(run_cli("report", "--now", NOW, path)).stdout.decode()
    assert 'id="level" class="level level-unknown side-call" data-value="not a session">not a session<' in page
    assert 'class="level level-blocking"' not in page and 'id="side-call"' in page
    out = tmp_path / "pages"
    ok(run_cli("report", "--now", NOW, "--out-dir", out, project(tmp_path / "projects")))
    index = (out / "index.html").read_text()
    [row] = [row for row in re.findall(r'<tr class="session[^"]*">.*?</tr>', index) if "acompact" in row]
    assert 'class="session side-call"' in row and ">not a session<" in row and "level-blocking" not in row and "blocking<" not in row


def test_what_fills_the_window_adds_up_to_the_window(busy: Path) -> None:
    [report] = report_json(busy)
    count, thresholds = report["count"], report["warn"]["thresholds"]
    parts = {part["part"]: part["tokens"] for part in report["window"]}
    assert list(parts) == ["baseline", "messages", "free", "autocompact_buffer"]
    assert parts["baseline"] == count["baseline_tokens"] > 0 and parts["messages"] == count["tokens"] - count["baseline_tokens"]
    assert parts["free"] == thresholds["autocompact"] - count["tokens"] and parts["autocompact_buffer"] == count["context_window"] - thresholds["autocompact"]
    assert sum(parts.values()) == count["context_window"]
    assert [part["percent"] for part in report["window"]] == [round(100 * tokens / count["context_window"], 1) for tokens in parts.values()]
    # A count over the window: no free space, and the parts add up to the count.
    [over] = report_json("--window", "60000", busy)
    parts = {part["part"]: part["tokens"] for part in over["window"]}
    assert over["count"]["tokens"] > 60_000 and parts["free"] == parts["autocompact_buffer"] == 0
    assert sum(parts.values()) == over["count"]["tokens"]


def test_the_largest_results_name_their_file_and_inputs_are_json(busy: Path) -> None:
    from ctxpipe.report.data import excerpt

    [report] = report_json(busy)
    reads = [row for row in report["largest"] if row["tool"] == "Read"]
    assert len(reads) >= 5
    for row in reads:  # module_N.py's result holds handler_N_…: the file named is the one read
        number = re.fullmatch(r"/home/dev/app/module_(\d+)\.py", row["subject"])
        assert number and row["excerpt"].startswith(f"def handler_{number[1]}_")
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls  -la\n/tmp", "flag": True, "none": None}}
    assert excerpt(call) == '{"command": "ls -la\\n/tmp", "flag": true, "none": null}'  # JSON, not a Python repr


def test_the_index_groups_sessions_by_project_with_titles_and_the_total_cost(tmp_path: Path) -> None:
    tree = tmp_path / "projects"
    titled = busy_session(reads=3)
    titled.lines.append({"type": "custom-title", "customTitle": "Tighten <the> limits", "sessionId": "s"})
    titled.write(tree / "-home-dev-app" / "one.jsonl")
    busy_session(reads=2).write(tree / "-home-dev-app" / "one" / "subagents" / "agent-a1.jsonl")
    busy_session(reads=4).write(tree / "-home-dev-api" / "two.jsonl")
    out = tmp_path / "pages"
    ok(run_cli("report", "--now", NOW, "--out-dir", out, "projects", cwd=tmp_path))
    index = (out / "index.html").read_text()
    rows = report_json(tree)
    assert str(tmp_path) not in index  # every path relative to the folder given
    groups = re.findall(r'<tr class="project" data-project="([^"]*)"><th colspan="\d">[^<]*· (\d+) sessions? · \$([\d.,]+)</th></tr>', index)
    assert sorted((name, int(count)) for name, count, _ in groups) == [("-home-dev-api", 1), ("-home-dev-app", 2)]
    names = re.findall(r'data-col="file" data-value="([^"]*)"', index)
    assert sorted(names) == ["one.jsonl", "one/subagents/agent-a1.jsonl", "two.jsonl"]
    assert "Tighten &lt;the&gt; limits" in index and [row["title"] for row in rows if row["file"].endswith("one.jsonl")] == ["Tighten <the> limits"]
    total = float(re.search(r'id="total-usd" data-value="([^"]+)"', index)[1])  # type: ignore[index]
    assert total == pytest.approx(sum(row["cost"]["usd"] for row in rows)) and total > 0
    assert re.search(r'id="project-count" data-value="2"', index)


def test_a_folder_s_progress_shows_on_a_terminal_only(tmp_path: Path) -> None:
    import pty
    import subprocess
    import sys

    tree = tmp_path / "projects"
    for number in range(3):
        busy_session(reads=2).write(tree / "-home-dev-app" / f"s{number}.jsonl")
    leader, follower = pty.openpty()
    try:  # stderr on a terminal: the batch's progress bar (compact's), counting the files
        done = subprocess.run(
            [sys.executable, "-m", "ctxpipe", "report", "--now", NOW, "--out-dir", str(tmp_path / "a"), str(tree)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=follower,
            env=child_env({"COLUMNS": "100"}),
            timeout=120,
        )
    finally:
        os.close(follower)
    shown = drain_pty(leader).decode()
    assert done.returncode == 0 and "reporting" in shown and "3/3" in shown
    piped = ok(run_cli("report", "--now", NOW, "--out-dir", tmp_path / "b", tree))
    assert b"reporting" not in piped.stderr and piped.stderr.count(b"\n") == 1  # only the line naming the index


def test_a_session_s_place_in_the_index(tmp_path: Path) -> None:
    from ctxpipe.report.batch import place

    projects = tmp_path / "projects"
    (projects / "-home-dev-app" / "s1" / "subagents").mkdir(parents=True)
    app = str(projects / "-home-dev-app")
    # Below ~/.claude/projects: the project folder, a subagent under its session's project.
    assert place(f"{app}/s1.jsonl", [str(projects)]) == ("-home-dev-app", "s1.jsonl")
    assert place(f"{app}/s1/subagents/agent-a.jsonl", [str(projects)]) == ("-home-dev-app", "s1/subagents/agent-a.jsonl")
    # A project folder given itself: its own name; a file given by name: as given, in no project.
    assert place(f"{app}/s1/subagents/agent-a.jsonl", [app + "/"]) == ("-home-dev-app", "s1/subagents/agent-a.jsonl")
    assert place("elsewhere/s2.jsonl", [str(projects), "elsewhere/s2.jsonl"]) == ("", "elsewhere/s2.jsonl")
