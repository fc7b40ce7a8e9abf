"""Where results are written (a review of the writes, session 54): --out-dir never writes through a
symbolic link already in the output tree, and `-o` never names the transcript read (only --in-place
rewrites it, checking that nothing wrote to it meanwhile)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import FIXTURES, run_cli

SESSION = (FIXTURES / "claude-code" / "repeats.jsonl").read_bytes()
COMPACT = ["compact", "--force", "--keep-last", "2", "--engine", "offline"]


def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    given, out, outside = tmp_path / "in", tmp_path / "out", tmp_path / "outside"
    for folder in (given / "sub", out, outside):
        folder.mkdir(parents=True)
    (given / "a.jsonl").write_bytes(SESSION)
    (given / "sub" / "b.jsonl").write_bytes(SESSION)
    (outside / "victim.jsonl").write_bytes(b"victim\n")
    return given, out, outside


@pytest.mark.parametrize("link", ["file", "folder"])
def test_compact_out_dir_does_not_write_through_a_link_in_it(tmp_path: Path, link: str) -> None:
    given, out, outside = tree(tmp_path)
    if link == "file":
        (out / "a.jsonl").symlink_to(outside / "victim.jsonl")
    else:
        (out / "sub").symlink_to(outside)
    done = run_cli(*COMPACT, "--out-dir", str(out), str(given), env={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 2 and b"symbolic link in the output folder" in done.stderr and b"Traceback" not in done.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["victim.jsonl"] and (outside / "victim.jsonl").read_bytes() == b"victim\n"
    assert not (out / "sub" / "b.jsonl").exists() or link == "folder"  # nothing written anywhere: refused before the first file
    os.unlink(out / ("a.jsonl" if link == "file" else "sub"))
    assert run_cli(*COMPACT, "--out-dir", str(out), str(given), env={"ANTHROPIC_API_KEY": ""}).returncode == 0  # the link gone: written
    assert (out / "sub" / "b.jsonl").is_file() and not (out / "sub").is_symlink()


def test_report_out_dir_does_not_write_through_a_link_in_it(tmp_path: Path) -> None:
    given, out, outside = tree(tmp_path)
    (out / "index.html").symlink_to(outside / "victim.jsonl")
    done = run_cli("report", "--out-dir", str(out), str(given))
    assert done.returncode == 2 and b"symbolic link in the output folder" in done.stderr
    assert (outside / "victim.jsonl").read_bytes() == b"victim\n"


@pytest.mark.parametrize(
    "argv",
    [["microcompact", "--force"], ["collapse"], COMPACT, ["expand", "--ledger", "{ledger}"]],
    ids=["microcompact", "collapse", "compact", "expand"],
)
@pytest.mark.parametrize("name", ["same", "hard-link"])
def test_output_over_the_transcript_read_is_refused(tmp_path: Path, argv: list[str], name: str) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes(SESSION)
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes(b"")
    output = session if name == "same" else tmp_path / "linked.jsonl"
    if name == "hard-link":
        os.link(session, output)
    args = [str(ledger) if arg == "{ledger}" else arg for arg in argv]
    done = run_cli(*args, "-o", str(output), str(session), env={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 1 and b"is the transcript read: give --in-place" in done.stderr, done.stderr
    assert session.read_bytes() == SESSION and done.stderr.count(b"\n") == 1
    other = tmp_path / "other.jsonl"
    assert run_cli(*args, "-o", str(other), str(session), env={"ANTHROPIC_API_KEY": ""}).returncode == 0 and other.exists()


def test_results_of_a_private_transcript_stay_private(tmp_path: Path) -> None:
    """A transcript only its owner may read gives results only its owner may read (as `cp` does):
    the `-o` file, an --out-dir tree's files, and the ledger (it holds what the stages removed)."""
    session = tmp_path / "s.jsonl"
    session.write_bytes(SESSION)
    session.chmod(0o600)
    out, ledger, tree_out = tmp_path / "o.jsonl", tmp_path / "ledger.jsonl", tmp_path / "tree"
    assert run_cli("microcompact", "--force", "--ledger", str(ledger), "-o", str(out), str(session)).returncode == 0
    assert run_cli(*COMPACT, "--out-dir", str(tree_out), str(session), env={"ANTHROPIC_API_KEY": ""}).returncode == 0
    for written in (out, ledger, tree_out / "s.jsonl"):
        assert written.stat().st_mode & 0o777 == 0o600, written
    session.chmod(0o644)
    public = tmp_path / "public.jsonl"
    assert run_cli("microcompact", "--force", "-o", str(public), str(session)).returncode == 0
    assert public.stat().st_mode & 0o777 == 0o644 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
