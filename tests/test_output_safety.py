"""Where results are written (a review of the writes, session 54): --out-dir never writes through a
symbolic link already in the output tree, `-o` naming the transcript read rewrites it only if nothing
wrote to it meanwhile (as --in-place), and a private transcript's results stay private."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import FIXTURES, run_cli

SESSION = (FIXTURES / "claude-code" / "repeats.jsonl").read_bytes()
COMPACT = ["compact", "--force", "--keep-last", "2", "--engine", "offline"]
NOW = ["--now", "2026-12-01T10:00:00.000Z"]  # the lines a stage appends are stamped alike in both runs


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
    [["microcompact", "--force", *NOW], ["collapse", *NOW], [*COMPACT, *NOW], ["expand", "--ledger", "{ledger}"]],
    ids=["microcompact", "collapse", "compact", "expand"],
)
@pytest.mark.parametrize("name", ["same", "hard-link"])
def test_output_over_the_transcript_read_is_written_back(tmp_path: Path, argv: list[str], name: str) -> None:
    """`-o FILE FILE` (what the report advises for a stage) rewrites the file, by its name or another."""
    session = tmp_path / "s.jsonl"
    session.write_bytes(SESSION)
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes(b"")
    output = session if name == "same" else tmp_path / "linked.jsonl"
    if name == "hard-link":
        os.link(session, output)
    args = [str(ledger) if arg == "{ledger}" else arg for arg in argv]
    expected = run_cli(*args, str(session), env={"ANTHROPIC_API_KEY": ""})
    done = run_cli(*args, "-o", str(output), str(session), env={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 0 and output.read_bytes() == expected.stdout, done.stderr


def test_a_transcript_written_to_meanwhile_is_not_written_over(tmp_path: Path) -> None:
    """The guard `-o FILE FILE` takes before the file is read: a line a program appended meanwhile (a
    session still being written) makes the rewrite refused, and the file keeps it."""
    from ctxpipe.cli import streams
    from ctxpipe.core.errors import ChangedMeanwhile

    session, linked, other = tmp_path / "s.jsonl", tmp_path / "linked.jsonl", tmp_path / "o.jsonl"
    session.write_bytes(SESSION)
    os.link(session, linked)
    assert streams.rewrite_guard(str(other), str(session)) is None  # another file: no guard
    assert streams.rewrite_guard(None, str(session)) is None  # stdout
    guard = streams.rewrite_guard(str(linked), str(session))
    assert guard is not None
    appended = SESSION.splitlines(keepends=True)[-1]
    with session.open("ab") as grown:
        grown.write(appended)
    with pytest.raises(ChangedMeanwhile), streams.open_output(str(linked), like=str(session), if_version=guard) as out:
        out.write(b"the compacted session\n")
    assert session.read_bytes() == SESSION + appended and sorted(p.name for p in tmp_path.iterdir()) == ["linked.jsonl", "s.jsonl"]


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


def test_a_stage_rewriting_its_input_checks_it_first(tmp_path: Path) -> None:
    """The command's own wiring of the guard: a line is appended to the session while the stage runs
    (here while summarize waits for the model, as Claude Code would go on writing it): the rewrite
    is refused and the file keeps what was appended."""
    from messages_server import MessagesServer, Reply

    session = tmp_path / "s.jsonl"
    session.write_bytes(SESSION)
    appended = SESSION.splitlines(keepends=True)[-1]

    def answer(body: object) -> Reply:
        with open(session, "ab") as out:
            out.write(appended)
        return Reply.text("<summary>1. Primary Request and Intent: the workers setting.</summary>")

    with MessagesServer() as server:
        server.default_reply = answer
        done = run_cli(
            "summarize",
            "--engine",
            "llm",
            "--no-verify",
            "--keep-last",
            "2",
            "--base-url",
            server.url,
            *NOW,
            "-o",
            str(session),
            str(session),
            env={"ANTHROPIC_API_KEY": "test-key"},
        )
    assert done.returncode == 1 and b"changed while being rewritten" in done.stderr, done.stderr
    assert session.read_bytes() == SESSION + appended


@pytest.mark.parametrize("failure", ["written-to-meanwhile", "interrupted"])
def test_a_replacement_in_place_that_does_not_happen_leaves_no_backup(tmp_path: Path, failure: str) -> None:
    """compact --in-place --backup: when the file is not replaced after all (a program wrote to it
    meanwhile, or the run was stopped), the backup made for it goes too; the file is as it is."""
    from ctxpipe import api
    from ctxpipe.core.errors import InputError

    session = tmp_path / "s.jsonl"
    session.write_bytes(SESSION)
    appended = SESSION.splitlines(keepends=True)[-1]

    def before_write(target: str) -> None:
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".bak")] == ["s.jsonl.bak"]  # made before the write
        if failure == "interrupted":
            raise KeyboardInterrupt
        with open(target, "ab") as grown:
            grown.write(appended)

    from ctxpipe.core.microcompact import MicrocompactSettings
    from ctxpipe.core.summarize import SummarizeSettings

    settings = {"microcompact": MicrocompactSettings(force=True), "summarize": SummarizeSettings("offline", keep_last=2)}
    options = api.CompactOptions(settings, force_summary=True)
    with pytest.raises(KeyboardInterrupt if failure == "interrupted" else InputError):
        api.compact_file(session, None, options, backup=".bak", before_write=before_write)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    assert session.read_bytes() == (SESSION if failure == "interrupted" else SESSION + appended)


def test_in_place_over_a_folder_does_not_rewrite_a_link_to_a_file_outside_it(tmp_path: Path) -> None:
    given, _, outside = tree(tmp_path)
    (outside / "x.jsonl").write_bytes(SESSION)
    (given / "b.jsonl").symlink_to(outside / "x.jsonl")
    done = run_cli(*COMPACT, "--in-place", str(given), env={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 2 and b"outside the folders given" in done.stderr
    assert (outside / "x.jsonl").read_bytes() == SESSION and (given / "a.jsonl").read_bytes() == SESSION  # refused before anything
    # Given by its own name, the link is the user's choice: its file is rewritten.
    assert run_cli(*COMPACT, "--in-place", str(given / "b.jsonl"), env={"ANTHROPIC_API_KEY": ""}).returncode == 0
    assert (outside / "x.jsonl").read_bytes() != SESSION and (given / "b.jsonl").is_symlink()


def test_a_result_may_have_a_name_as_long_as_a_file_name_can_be(tmp_path: Path) -> None:
    """The temporary file beside it has a longer name: cut, so that a 255-byte name is still written."""
    session = tmp_path / "s.jsonl"
    session.write_bytes(SESSION)
    for length in (241, 255):
        output = tmp_path / ("é" * ((length - 6) // 2) + "x" * ((length - 6) % 2) + ".jsonl")
        assert len(os.fsencode(output.name)) == length
        done = run_cli("microcompact", "--force", *NOW, "-o", str(output), str(session))
        assert done.returncode == 0 and output.is_file(), done.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", [["microcompact", "--force"], ["collapse"], ["snip", "--keep-last", "2"], COMPACT])
@pytest.mark.parametrize(
    "clash",
    ["--report-json names the input", "--ledger names the input", "--report-json names the -o file", "--ledger names the -o file", "the two name one file"],
)
def test_a_side_file_never_replaces_the_transcript_or_the_output(tmp_path: Path, command: list[str], clash: str) -> None:
    # --report-json FILE reads like the --report switch: the transcript's path after it would have
    # been replaced by the report, and a ledger written into the session or under the output.
    transcript, out, side = tmp_path / "s.jsonl", tmp_path / "out.jsonl", tmp_path / "side.json"
    transcript.write_bytes(SESSION)
    flag = clash.split()[0] if clash.startswith("--") else "--ledger"
    argv = {
        "--report-json names the input": ["--report-json", str(transcript)],
        "--ledger names the input": ["--ledger", str(transcript)],
        "--report-json names the -o file": ["--report-json", str(out), "-o", str(out)],
        "--ledger names the -o file": ["--ledger", str(out), "-o", str(out)],
        "the two name one file": ["--report-json", str(side), "--ledger", str(tmp_path / "." / "side.json"), "-o", str(out)],
    }[clash]
    done = run_cli(*command, *NOW, *argv, str(transcript), env={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 2 and f"Invalid value for {flag}".encode() in done.stderr, done.stderr.decode()
    assert transcript.read_bytes() == SESSION and not out.exists() and not side.exists() and done.stdout == b""


def test_a_store_backup_not_needed_is_removed_alone_whatever_its_key_holds() -> None:
    """An object's key may hold "[", "*" or "?": removing the backup of a replacement that did not
    happen removes that one object, never the others such a pattern would match."""
    import uuid

    import fsspec
    from ctxpipe import api
    from ctxpipe.core.errors import InputError
    from ctxpipe.core.microcompact import MicrocompactSettings

    folder = f"memory://ctxpipe-tests/{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    session = f"{folder}/s[12].jsonl"
    others = {f"{folder}/s1.jsonl.bak": b"one\n", f"{folder}/s2.jsonl.bak": b"two\n"}
    fs.pipe_file(session, SESSION)
    for url, data in others.items():
        fs.pipe_file(url, data)

    def before_write(target: str) -> None:  # a program wrote to it meanwhile: not replaced
        fs.pipe_file(target, SESSION + SESSION.splitlines(keepends=True)[-1])

    options = api.CompactOptions({"microcompact": MicrocompactSettings(force=True)})
    with pytest.raises(InputError):
        api.compact_file(session, None, options, backup=".bak", before_write=before_write)
    left = sorted(path.rsplit("/", 1)[1] for path in fs.ls(folder, detail=False))
    assert left == ["s1.jsonl.bak", "s2.jsonl.bak", "s[12].jsonl"]
    assert all(fs.cat_file(url) == data for url, data in others.items())


@pytest.mark.parametrize("command", [COMPACT, ["report", *NOW]])
def test_a_fifo_left_where_a_result_goes_is_refused_not_written_into(tmp_path: Path, command: list[str]) -> None:
    given, out, _ = tree(tmp_path)
    name = "a.jsonl" if command is COMPACT else "a.html"
    os.mkfifo(out / name)
    done = run_cli(*command, "--out-dir", str(out), str(given), env={"ANTHROPIC_API_KEY": ""})
    assert done.returncode == 2 and b"is not a regular file" in done.stderr and b"Traceback" not in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [name]  # refused before anything was written


def test_stdin_is_read_once_and_stdout_holds_one_stream(tmp_path: Path) -> None:
    # --from - and --ledger - read stdin, as the transcript does without a path: one of them would
    # read nothing. --report-json - beside a transcript on stdout would break the JSONL stream.
    for argv in (["restore", "--from", "-"], ["restore", "--from", "-", "-"], ["expand", "--ledger", "-"]):
        done = run_cli(*argv, stdin=SESSION)
        assert done.returncode == 2 and b"reads stdin, and so does the transcript" in done.stderr and done.stdout == b"", argv
    done = run_cli("microcompact", "--force", *NOW, "--report-json", "-", stdin=SESSION)
    assert done.returncode == 2 and b"- is stdout, where the transcript goes" in done.stderr and done.stdout == b""
    out = tmp_path / "out.jsonl"
    done = run_cli("microcompact", "--force", *NOW, "--report-json", "-", "-o", str(out), stdin=SESSION)
    assert done.returncode == 0 and done.stdout.lstrip().startswith(b"{") and out.read_bytes().startswith(b'{"')
