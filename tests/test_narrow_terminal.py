"""Tables on a narrow terminal (issue 22, case 15): numbers are never cut, file names are relative to
the folder given and shortened in the middle, and whole columns are left out, never digits.

Each command runs as a user runs it, with a pseudo-terminal as the stream that gets the table and
COLUMNS set; what it prints is compared with the figures of the same run's --json."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import Session, usage
from ctxpipe.cli.commands.count import COLUMNS
from ctxpipe.cli.tables import display_names, shortened
from helpers import FIXTURES, ROOT, child_env, drain_pty, run_cli
from rich.cells import cell_len

pytestmark = pytest.mark.skipif(not hasattr(pty, "openpty") or sys.platform == "win32", reason="needs a pseudo-terminal")

WIDTHS = [60, 80, 100, 200]
SGR = re.compile(r"\x1b\[[0-9;]*m")
PROJECT = "-home-me-work-payments-service"
# Two names alike but for their last characters, and two alike but in the middle: rows that a cut
# at the end, or a cut in the middle, would show the same.
MAIN = "3f2a9c1e-7b4d-4e21-9a0b-5c6d7e8f9012"
NAMES = [
    f"{PROJECT}/{MAIN}.jsonl",
    f"{PROJECT}/3f2a9c1e-7b4d-4e21-9a0b-5c6d7e8f9013.jsonl",
    f"{PROJECT}/{MAIN}/subagents/agent-a1b2c3d.jsonl",
    f"{PROJECT}/{MAIN}/subagents/agent-a1b2c3e.jsonl",
    f"{PROJECT}-api-gateway/session-2026-05-04-alpha-of-the-long-common-tail.jsonl",
    f"{PROJECT}-api-gateway/session-2026-05-04-omega-of-the-long-common-tail.jsonl",
]
# (prompt size at the last call, API calls): six-digit figures, dollars from cents to tens.
SIZES = [(177_412, 40), (96_543, 12), (5_021, 1), (43_210, 3), (150_999, 25), (12_345, 2)]


def session(total: int, calls: int) -> Session:
    built = Session()
    for call in range(calls):
        built.user(f"Step {call}: please go on.")
        built.text(f"Done with step {call}.", usage(total, cache_creation=min(total - 60, 120_000)))
    return built


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    root = tmp_path / "projects"
    for name, (total, calls) in zip(NAMES, SIZES):
        session(total, calls).write(root / name)
    return root


def on_terminal(args: list[Any], columns: int, encoding: str = "utf-8", stream: str = "stdout", cwd: Path = ROOT) -> str:
    """`python -m ctxpipe ARGS` with `stream` on a pseudo-terminal of `columns`; what it showed, SGR removed."""
    leader, follower = pty.openpty()
    env = child_env({"COLUMNS": str(columns), "PYTHONIOENCODING": encoding, "ANTHROPIC_API_KEY": ""})
    streams: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: follower}
    try:
        done = subprocess.run([sys.executable, "-m", "ctxpipe", *map(str, args)], stdin=subprocess.DEVNULL, env=env, cwd=cwd, timeout=120, **streams)
    finally:
        os.close(follower)
    out = drain_pty(leader)
    assert done.returncode == 0, out.decode(encoding, "replace")
    text = SGR.sub("", out.decode(encoding).replace("\r\n", "\n"))
    assert "\x1b" not in text  # nothing but ctxpipe's own styles reaches the terminal
    return text


def json_rows(*args: Any, cwd: Path = ROOT) -> list[dict[str, Any]]:
    done = run_cli(*args, "--json", env={"ANTHROPIC_API_KEY": ""}, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def table(text: str, ascii_only: bool = False) -> tuple[list[str], list[list[str]], list[str]]:
    """The first table in `text`: its headers, its rows' cells, and the columns the note says were left out."""
    head, rule, cell = ("|", "+", "|") if ascii_only else ("┃", "╇", "│")
    lines = text.splitlines()
    top = next(index for index, line in enumerate(lines) if head in line)
    assert rule in lines[top + 1]
    headers = [part.strip() for part in lines[top].split(head)]
    rows = []
    for line in lines[top + 2 :]:
        if cell not in line:
            break
        rows.append([part.strip() for part in line.split(cell)])
    after = " ".join(" ".join(lines[top + 2 + len(rows) :]).split())
    left_out = re.search(r"not shown on \d+ columns: (.*?) \(a wider terminal", after)
    return headers, rows, left_out.group(1).split(", ") if left_out else []


def assert_fits(text: str, columns: int) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= columns, f"{cell_len(line)} cells on a {columns}-column terminal: {line!r}"


def assert_named(shown: str, name: str, ellipsis: str = "…") -> None:
    """`shown` is `name`, or its start and end around one ellipsis."""
    if shown == name:
        return
    assert shown.count(ellipsis) == 1, (shown, name)
    head, tail = shown.split(ellipsis)
    assert head and tail and name.startswith(head) and name.endswith(tail), (shown, name)


def usd(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def count_cells(row: dict[str, Any]) -> dict[str, str]:
    """What each column of `count --cost` shows for a JSON row: every figure whole."""
    if row.get("total"):
        return {
            "tokens": f"{row['tokens']:,}",
            "exact": f"{row['exact_tokens']:,}",
            "estimated": f"{row['estimated_tokens']:,}",
            "messages": f"{row['messages']:,}",
            "cost": usd(row["usd"]),
        }
    return {
        "kind": row["kind"],
        "model": row["model"],
        "window": f"{row['context_window']:,}",
        "tokens": f"{row['tokens']:,}",
        "exact": f"{row['exact_tokens']:,}",
        "estimated": f"{row['estimated_tokens']:,}",
        "baseline": (f"+{row['baseline_tokens']:,}" if row["baseline_in_total"] else f"({row['baseline_tokens']:,})"),
        "used": f"{row['percent_of_window']}%",
        "messages": f"{row['messages']:,}",
        "cost": usd(row["cost"]["usd"]),
        "cache hit": f"{100 * row['cost']['cache_hit_rate']:.1f}%",
        "title": row["title"] or "",
    }


@pytest.mark.parametrize("columns", WIDTHS)
def test_count_cost_over_a_folder_keeps_every_figure_whole(projects: Path, columns: int) -> None:
    rows = json_rows("count", "--cost", projects)
    text = on_terminal(["count", "--cost", projects], columns)
    assert_fits(text, columns)
    headers, cells, left_out = table(text)
    every = [column.header for column in COLUMNS if column.header != "re-injected"]  # nothing was re-injected here
    assert sorted(headers + left_out) == sorted(every) and not set(headers) & set(left_out)
    assert {"file", "tokens"} <= set(headers)
    # Whole columns go, the least important first (count declares the order once).
    priority = {column.header: column.priority for column in COLUMNS}
    assert all(priority[shown] <= priority[gone] for shown in headers for gone in left_out), (headers, left_out)
    if columns == 200:
        assert left_out == []
    if columns <= 100:
        assert left_out  # the case of the issue: 13 columns do not fit, so some go
    assert len(cells) == len(rows) == len(NAMES) + 1
    names = [shown[0] for shown in cells]
    assert len(set(names)) == len(names)  # every row told apart
    for shown, row in zip(cells, rows):
        expected = count_cells(row)
        for header, cell in zip(headers, shown):
            if header == "file":
                assert_named(cell, "total" if row.get("total") else os.path.relpath(row["file"], projects))
            else:
                assert cell == expected.get(header, ""), (header, cell, row)
    assert str(projects) not in text  # named relative to the folder given


def test_the_json_and_a_pipe_keep_the_paths_and_figures_as_they_were(projects: Path) -> None:
    piped = run_cli("count", "--cost", projects, env={"COLUMNS": "60"})
    assert piped.returncode == 0
    rows = [json.loads(line) for line in piped.stdout.splitlines()]
    assert rows == json_rows("count", "--cost", projects)
    assert sorted(row["file"] for row in rows if not row.get("total")) == sorted(str(projects / name) for name in NAMES)


def test_an_ascii_terminal_gets_three_dots_and_the_same_figures(projects: Path) -> None:
    rows = json_rows("count", "--cost", projects)
    text = on_terminal(["count", "--cost", projects], 60, encoding="ascii")
    assert_fits(text, 60)
    headers, cells, left_out = table(text, ascii_only=True)
    assert left_out and "…" not in text
    for shown, row in zip(cells, rows):
        expected = count_cells(row)
        for header, cell in zip(headers, shown):
            if header == "file":
                assert_named(cell, "total" if row.get("total") else os.path.relpath(row["file"], projects), "...")
            else:
                assert cell == expected.get(header, ""), (header, cell)


def test_a_file_named_directly_is_shown_as_typed(projects: Path) -> None:
    typed = f"projects/{NAMES[0]}"
    text = on_terminal(["count", "--cost", typed, f"projects/{NAMES[1]}"], 80, cwd=projects.parent)
    _, cells, _ = table(text)
    assert_named(cells[0][0], typed)
    assert cells[0][0].startswith("projects/")


def test_two_folders_holding_the_same_name_keep_the_folder_in_front(tmp_path: Path) -> None:
    files = [str(tmp_path / "a" / "s.jsonl"), str(tmp_path / "b" / "s.jsonl"), str(tmp_path / "b" / "t.jsonl")]
    for file in files:
        session(1000, 1).write(Path(file))
    assert display_names(files, [str(tmp_path / "a"), str(tmp_path / "b")]) == {
        files[0]: f"{tmp_path}/a/s.jsonl",
        files[1]: f"{tmp_path}/b/s.jsonl",
        files[2]: f"{tmp_path}/b/t.jsonl",
    }
    assert display_names(files[1:], [str(tmp_path / "b") + "/"]) == {files[1]: "s.jsonl", files[2]: "t.jsonl"}
    assert display_names(["-"], []) == {"-": "-"}


def test_a_name_is_shortened_in_the_middle() -> None:
    name = "-home-me-work-payments-service/3f2a9c1e-7b4d/subagents/agent-a1b2c3d.jsonl"
    for width in range(8, len(name)):
        short = shortened(name, width)
        assert cell_len(short) <= width and short.count("…") == 1
        assert_named(short, name)
    assert shortened(name, 40) == "-home-me-work-payme…/agent-a1b2c3d.jsonl"  # the file name kept whole, with the start
    assert shortened(name, len(name)) == name
    assert shortened(name, 20, "...") == "-home-me...c3d.jsonl"
    wide = "漢字漢字漢字漢字漢字/漢字.jsonl"
    assert all(cell_len(shortened(wide, width)) <= width for width in range(8, 30))


def test_count_timeline_fits_and_names_its_labels_whole(projects: Path) -> None:
    for columns in (60, 100):
        text = on_terminal(["count", "--timeline", projects / NAMES[0]], columns)
        assert_fits(text, columns)
        for label in ("warning 147K", "autocompact 167K", "blocking 177K"):
            assert label in text
        assert f"{177_412:,}" in text


def test_count_by_and_top_keep_their_figures(projects: Path) -> None:
    (data,) = json_rows("count", "--by", "role", "--top", "3", projects / NAMES[0])
    text = on_terminal(["count", "--by", "role", "--top", "3", projects / NAMES[0]], 40)
    assert_fits(text, 40)
    flat = " ".join(text.split())
    for item in data["breakdown"]:
        assert f" {item['tokens']:,} " in flat
    for item in data["top"]:
        assert f" {item['tokens']:,} " in flat and f" {item['line']} " in flat


@pytest.mark.parametrize("columns", [60, 100])
def test_validate_keeps_line_numbers_and_whole_messages(tmp_path: Path, columns: int) -> None:
    built = session(5000, 700)  # 1,400 lines: four-digit line numbers
    built.user("A reply to a line that is not there.", parent="9f5fc94c-95e1-43f9-b701-1d1cffa159e0")
    path = built.write(tmp_path / "projects" / PROJECT / f"{MAIN}-with-a-dangling-parent-at-its-end.jsonl")
    (report,) = json_rows("validate", tmp_path / "projects")
    assert report["findings"]
    text = on_terminal(["validate", tmp_path / "projects"], columns)
    assert_fits(text, columns)
    first = text.splitlines()[0]
    assert_named(first.split(" (claude-code")[0], os.path.relpath(path, tmp_path / "projects"))
    headers, cells, _ = table(text)
    assert headers[0] == "line" and headers[-1] == "message"
    lines = [row[0] for row in cells if row[0]]
    assert lines == [str(finding["line"]) for finding in report["findings"]]
    # A message wraps; put back together it is the whole message.
    assert "".join("".join(row[-1] for row in cells).split()) == "".join("".join(f["message"] for f in report["findings"]).split())


def test_warn_shortens_the_name_it_was_given_and_keeps_the_figures(projects: Path) -> None:
    path = projects / NAMES[1]  # at 96,543 tokens: level normal, exit 0
    (report,) = json_rows("warn", path)
    text = on_terminal(["warn", path], 60)
    assert_fits(text, 60)
    name = text.split(": ")[0]
    assert_named(name, str(path))
    flat = " ".join(text.split())
    for figure in (f"{report['tokens']:,} tokens", f"{report['context_window']:,};", f"{report['thresholds']['autocompact']:,})"):
        assert figure in flat


def test_a_batch_compact_summary_keeps_before_and_after(projects: Path, tmp_path: Path) -> None:
    deterministic = ("--engine", "offline", "--source", "transcript", "--now", "2026-05-04T12:00:00Z", "--force", "--keep-last", "2")
    rows = json_rows("compact", *deterministic, "--out-dir", tmp_path / "json", projects)
    text = on_terminal(["compact", *deterministic, "--out-dir", tmp_path / "shown", projects], 60)
    assert_fits(text, 60)
    headers, cells, _ = table(text)
    assert headers[:3] == ["file", "before", "after"]
    for shown, row in zip(cells, rows):
        assert_named(shown[0], os.path.relpath(row["file"], projects))
        assert shown[1:3] == [f"{row['tokens_before']:,}", f"{row['tokens_after']:,}"]
    assert len(set(shown[0] for shown in cells)) == len(cells)


def test_restore_plan_drops_columns_not_tokens() -> None:
    path = FIXTURES / "claude-code" / "restore.jsonl"
    rows = json_rows("restore", "--plan", path)
    text = on_terminal(["restore", "--plan", path], 40)
    assert_fits(text, 40)
    headers, cells, left_out = table(text)
    assert {"name", "tokens"} <= set(headers) and left_out
    tokens = headers.index("tokens")
    assert [row[tokens] for row in cells] == [f"{row['tokens']:,}" for row in rows]


def test_a_stage_report_on_a_narrow_stderr() -> None:
    path = FIXTURES / "microcompact" / "force-keep-1.in.jsonl"
    text = on_terminal(["microcompact", "--force", "--keep-recent", "1", "--report", "-o", os.devnull, path], 24, stream="stderr")
    headers, cells, left_out = table(text)
    assert headers == ["tool", "tokens freed"] and left_out == ["results"]
    assert [row[1] for row in cells] == ["54", "32"]


def test_hostile_names_are_escaped_then_shortened(tmp_path: Path) -> None:
    # A file name with a terminal escape, a model name of 300 characters: both stay inert and narrow.
    root = tmp_path / "projects"
    hostile = Session(model="claude-" + "x" * 300 + "-\x1b]0;owned\x07")
    hostile.user("Please check the build.")
    hostile.text("Done.", usage(23_456))
    hostile.write(root / "a\x1b[2Jb-session.jsonl")
    session(12_345, 1).write(root / "plain-session.jsonl")
    rows = json_rows("count", root)
    text = on_terminal(["count", root], 200)  # on_terminal: no raw escape reached the terminal
    assert_fits(text, 200)
    headers, cells, _ = table(text)
    assert "model" in headers
    model = headers.index("model")
    assert cells[0][model] != rows[0]["model"] and cell_len(cells[0][model]) < 120  # shortened: the figures keep their room
    assert_named(cells[0][model], "claude-" + "x" * 300 + "-\\x1b]0;owned\\x07")
    assert_named(cells[0][0], "a\\x1b[2Jb-session.jsonl")
    assert [row[headers.index("tokens")] for row in cells] == [f"{row['tokens']:,}" for row in rows]


def test_a_report_written_to_a_file_keeps_the_whole_name(projects: Path) -> None:
    path = projects / NAMES[1]
    done = run_cli("warn", "--pass-through", path, env={"COLUMNS": "60"})  # stderr is a pipe, not a terminal
    assert done.returncode == 0 and len(str(path)) > 60
    assert done.stderr.decode().startswith(f"{path}: normal")
