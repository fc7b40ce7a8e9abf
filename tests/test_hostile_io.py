"""Odd inputs, failing disks and interrupted runs (issue 10): the I/O contract.

- Inputs that are not regular files (a pipe given as /dev/stdin or /dev/fd/N, a FIFO) are read
  as streams; a folder walk skips them with one warning each, and skips symlinked folders.
- Outputs that are not regular files (/dev/full, /dev/null, a FIFO, /dev/stdout) are written to,
  never renamed over (as root these tests use device nodes of their own: a regression would
  otherwise replace the system's). A failed write (disk full, file too large, closed or full
  stdout, read-only folder) is exit 1 and one `ctxpipe: error:` line, and leaves no partial file,
  backup or ledger record behind.
- --backup never overwrites a backup and is complete before the original is replaced; --out-dir
  name collisions are usage errors before anything is written.
- Ctrl-C is exit 130 without a traceback at any moment; a file truncated while it is read is exit
  1 with one line, not a SIGBUS.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from builders import Session, usage
from helpers import ERROR_PREFIX, child_env, run_cli, usage_error

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
HAS_PROC_MAPS = Path("/proc/self/maps").exists()


# --- transcripts and running -------------------------------------------------------------------


def session(tool_calls: int = 6, result_bytes: int = 2000) -> bytes:
    """A session whose older tool results microcompact --force clears (it keeps the last 5)."""
    built = Session()
    built.user("Please check the build.")
    for number in range(tool_calls):
        tool = built.tool_id()
        built.response([{"type": "tool_use", "id": tool, "name": "Bash", "input": {"command": f"ls {number}"}}], usage(20_000 + number * 10))
        built.tool_result(tool, "x" * result_bytes + f" {number}")
    built.text("Done.", usage(40_000))
    return built.to_bytes()


DATA = session()
STAGE = ["microcompact", "--force", "--now", "2026-06-01T00:00:00Z"]


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(DATA)
    return path


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~40 MB, 20,000 lines: a stage takes a few seconds on it, long enough to interrupt or truncate."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    path.write_bytes(session(tool_calls=10_000, result_bytes=3000))
    return path


def env() -> dict[str, str]:
    full = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    full.pop("CTXPIPE_DEBUG", None)
    return full


def run(*args: object, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    """run_cli with subprocess options of its own (pass_fds, preexec_fn, stdout=…)."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("timeout", 120)
    return subprocess.run([sys.executable, "-m", "ctxpipe", *map(str, args)], env=env(), **kwargs)  # type: ignore[call-overload]


def file_size_limit(limit: int):
    """Writes past `limit` bytes fail with EFBIG (Python ignores SIGXFSZ): a disk that fills up."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def lines(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    return err.splitlines()


def one_error(result: subprocess.CompletedProcess[bytes], *words: str, batch: bool = False) -> str:
    """Exit 1 and exactly one `ctxpipe: error:` line on stderr, containing every word (for a
    compact batch, followed by its summary line)."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    errors = lines(result)
    if batch:
        assert errors[1:] == ["ctxpipe: compact: 1 of 1 files failed"], errors
        errors = errors[:1]
    assert len(errors) == 1 and errors[0].startswith(ERROR_PREFIX), errors
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


def leftovers(folder: Path) -> list[str]:
    """Temporary files an interrupted or failed write would leave (`.NAME.XXXX.tmp`)."""
    return sorted(path.name for path in folder.iterdir() if path.name.endswith(".tmp"))


def count_tokens(result: subprocess.CompletedProcess[bytes]) -> int:
    return int(json.loads(result.stdout)["tokens"])


def feed_fifo(path: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with open(path, "wb") as fifo:
            fifo.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def wait_until_mapped(process: subprocess.Popen[bytes], path: Path | str, timeout: float = 60) -> None:
    """Until `process` has memory-mapped `path` (it is then reading it, or loading that library)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if str(path) in Path(f"/proc/{process.pid}/maps").read_text():
                return
        except (FileNotFoundError, ProcessLookupError):
            break
        if process.poll() is not None:
            break
        time.sleep(0.005)
    pytest.fail(f"{path} was never mapped (exit {process.poll()})")


DEVICES = {"null": (1, 3), "full": (1, 7)}


@pytest.fixture
def device(tmp_path: Path):
    """device("full") -> a path to /dev/full. As root, a node of its own in tmp_path: a regression
    that renames over its output would otherwise replace the system's /dev/full or /dev/null (it
    did). Not as root, the system's: renaming over it is then refused anyway."""

    def make(name: str) -> Path:
        if not IS_ROOT:
            if not Path(f"/dev/{name}").exists():
                pytest.skip(f"needs /dev/{name}")
            return Path(f"/dev/{name}")
        node = tmp_path / "dev" / name
        node.parent.mkdir(exist_ok=True)
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(*DEVICES[name]))
        try:
            os.close(os.open(node, os.O_WRONLY))
        except OSError:
            pytest.skip("device nodes do not work on this file system (nodev)")
        return node

    return make


def mount_tmpfs(folder: Path, size: str) -> bool:
    """A small tmpfs at `folder` (root only, where mounting is allowed)."""
    if not IS_ROOT or not shutil.which("mount"):
        return False
    folder.mkdir(exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True).returncode == 0


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


# --- 5: inputs that are not regular files ------------------------------------------------------


def test_a_pipe_given_as_dev_stdin_is_read_like_the_file(transcript: Path) -> None:
    expected = run_cli(*STAGE, transcript)
    assert expected.returncode == 0 and expected.stdout != DATA
    result = run_cli(*STAGE, "/dev/stdin", stdin=DATA)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected.stdout


def test_a_pipe_given_as_dev_fd_n_is_counted_like_the_file(transcript: Path) -> None:
    # What `ctxpipe count <(cat s.jsonl)` hands over: /dev/fd/N, the read end of a pipe.
    expected = count_tokens(run_cli("count", "--json", transcript))
    assert expected > 0
    read_end, write_end = os.pipe()
    threading.Thread(target=lambda: (os.write(write_end, DATA), os.close(write_end)), daemon=True).start()
    try:
        result = run("count", "--json", f"/dev/fd/{read_end}", pass_fds=(read_end,))
    finally:
        os.close(read_end)
    assert result.returncode == 0, result.stderr
    assert count_tokens(result) == expected


def test_a_fifo_given_by_name_is_read_as_a_stream(tmp_path: Path, transcript: Path) -> None:
    expected = run_cli(*STAGE, transcript).stdout
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    feed_fifo(fifo, DATA)
    result = run(*STAGE, fifo)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    feed_fifo(fifo, DATA)
    assert count_tokens(run("count", "--json", fifo)) == count_tokens(run_cli("count", "--json", transcript))


def test_the_library_reads_a_fifo(tmp_path: Path) -> None:
    import ctxpipe

    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    feed_fifo(fifo, DATA)
    assert len(ctxpipe.read_transcript(fifo).entries) == DATA.count(b"\n")


def test_closed_stdin_is_one_error() -> None:
    one_error(run("count", "-", stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0)), "stdin is closed")


# --- 15: folder walks --------------------------------------------------------------------------


def odd_tree(tmp_path: Path) -> Path:
    """A project folder holding one session and things named *.jsonl that are not session files."""
    tree = tmp_path / "projects" / "-home-dev-app"
    tree.mkdir(parents=True)
    (tree / "s.jsonl").write_bytes(DATA)
    os.mkfifo(tree / "fifo.jsonl")
    (tree / "broken.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "other.jsonl").write_bytes(DATA)
    (tree / "linked-folder").symlink_to(outside)
    return tree.parent


def test_count_of_a_folder_skips_a_fifo_and_says_so(tmp_path: Path) -> None:
    tree = odd_tree(tmp_path)
    result = run("count", "--json", tree, timeout=60)
    assert result.returncode == 0, result.stderr
    counted = [row["file"] for row in map(json.loads, result.stdout.splitlines()) if row.get("file")]
    assert counted == [str(tree / "-home-dev-app" / "s.jsonl")]  # not the file behind the symlinked folder
    warnings = lines(result)
    assert any("fifo.jsonl: skipped: a FIFO" in line for line in warnings), warnings
    assert any("broken.jsonl: skipped: a broken symbolic link" in line for line in warnings), warnings
    assert any("linked-folder: skipped: a symbolic link to a folder" in line for line in warnings), warnings
    assert all(line.startswith("ctxpipe: warning: ") for line in warnings), warnings


def test_compact_of_a_folder_skips_a_fifo(tmp_path: Path) -> None:
    tree = odd_tree(tmp_path)
    out = tmp_path / "out"
    result = run("compact", "--engine", "offline", "--json", "--out-dir", out, tree, timeout=60)
    assert result.returncode == 0, result.stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == ["-home-dev-app/s.jsonl"]
    assert any("fifo.jsonl: skipped" in line for line in lines(result))


def test_a_symlink_to_a_session_is_counted_once(tmp_path: Path, transcript: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "link.jsonl").symlink_to(transcript)
    result = run("count", "--json", folder, transcript)
    assert result.returncode == 0, result.stderr
    rows = [row for row in map(json.loads, result.stdout.splitlines()) if row.get("file")]
    assert [row["file"] for row in rows] == [str(folder / "link.jsonl")]
    assert any(f"{transcript}: skipped: the same file as" in line for line in lines(result))


# --- 13: outputs that are not regular files, and failing writes --------------------------------


def test_output_to_dev_full_is_one_error_and_the_device_stays(transcript: Path, device) -> None:
    full = device("full")
    one_error(run(*STAGE, transcript, "-o", full), str(full), "No space left")
    assert stat.S_ISCHR(os.stat(full).st_mode)  # renaming over it (as root) once replaced the device node


@pytest.mark.parametrize("argv", [STAGE, ["count", "--json"], ["convert", "--to", "anthropic"], ["validate"]], ids=lambda a: a[0])
def test_stdout_to_dev_full_is_one_error(transcript: Path, argv: list[str], device) -> None:
    with open(device("full"), "wb") as full:
        one_error(run(*argv, transcript, stdout=full), "No space left")


def test_closed_stdout_is_one_error(transcript: Path) -> None:
    one_error(run(*STAGE, transcript, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1)), "stdout is closed")


def test_closed_stdout_is_fine_when_the_output_goes_to_a_file(tmp_path: Path, transcript: Path) -> None:
    result = run(*STAGE, transcript, "-o", tmp_path / "out.jsonl", stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == run_cli(*STAGE, transcript).stdout


def test_closed_stderr_keeps_stdout_clean(transcript: Path) -> None:
    # print(file=None) writes to stdout: the stage's note must not end up in the transcript.
    result = run(*STAGE, transcript, stderr=subprocess.DEVNULL, preexec_fn=lambda: os.close(2))
    assert result.returncode == 0
    assert result.stdout == run_cli(*STAGE, transcript).stdout


# /proc/self/fd/1 and /dev/fd/1 name stdout as /dev/stdout does (tested on those: a regression
# renaming over /dev/stdout as root would replace the system's link).
@pytest.mark.parametrize("name", ["null", "/proc/self/fd/1", "/dev/fd/1"])
def test_output_to_a_device_path_is_written_through(transcript: Path, tmp_path: Path, device, name: str) -> None:
    null = device("null")
    target = null if name == "null" else name
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"kept\n")
    with open(log, "ab") as appended:  # `>> log`: writing stdout through its name must not truncate it
        result = run(*STAGE, transcript, "-o", target, "--report-json", null, stdout=appended)
    assert result.returncode == 0, result.stderr
    expected = b"" if name == "null" else run_cli(*STAGE, transcript).stdout
    assert log.read_bytes() == b"kept\n" + expected
    assert stat.S_ISCHR(os.stat(null).st_mode)


def test_output_to_a_fifo_is_written_into_it(tmp_path: Path, transcript: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = run(*STAGE, transcript, "-o", fifo)
    reader.join(30)
    assert result.returncode == 0, result.stderr
    assert received == [run_cli(*STAGE, transcript).stdout]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert leftovers(tmp_path) == []


def test_a_full_disk_leaves_the_old_output_and_no_temporary_file(tmp_path: Path, transcript: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old\n")
    result = run(*STAGE, transcript, "-o", out, preexec_fn=file_size_limit(4096))
    one_error(result, str(out), "cannot write", "File too large")
    assert out.read_bytes() == b"old\n"
    assert leftovers(tmp_path) == []


def test_a_full_tmpfs_leaves_nothing(tmp_path: Path, transcript: Path) -> None:
    disk = tmp_path / "disk"
    if not mount_tmpfs(disk, "8k"):
        pytest.skip("cannot mount a tmpfs here (needs root); the RLIMIT_FSIZE test covers a full disk")
    try:
        result = run(*STAGE, transcript, "-o", disk / "out.jsonl")
        one_error(result, "out.jsonl", "No space left")
        assert list(disk.iterdir()) == []
    finally:
        unmount(disk)


def test_a_ledger_record_is_whole_or_absent(tmp_path: Path, transcript: Path) -> None:
    ledger = tmp_path / "undo.jsonl"
    ledger.write_bytes(b"")
    first = run(*STAGE, "--ledger", ledger, transcript, "-o", tmp_path / "first.jsonl")
    assert first.returncode == 0, first.stderr
    before = ledger.read_bytes()
    assert before.count(b"\n") == 1
    # The next record crosses the size limit: it must not stay half-written.
    result = run(*STAGE, "--ledger", ledger, transcript, "-o", tmp_path / "second.jsonl", preexec_fn=file_size_limit(len(before) + 100))
    one_error(result, str(ledger), "ledger")
    assert ledger.read_bytes() == before
    assert not (tmp_path / "second.jsonl").exists()


def test_a_ledger_record_is_taken_back_when_the_output_fails(tmp_path: Path, transcript: Path, device) -> None:
    ledger = tmp_path / "undo.jsonl"
    ledger.write_bytes(b"")
    one_error(run(*STAGE, "--ledger", ledger, transcript, "-o", device("full")), "No space left")
    assert ledger.read_bytes() == b""


# --- 19: an empty ledger -----------------------------------------------------------------------


def test_a_run_that_changes_nothing_writes_an_empty_ledger_that_expand_accepts(tmp_path: Path, transcript: Path) -> None:
    ledger = tmp_path / "undo.jsonl"
    same = run_cli("collapse", "--now", "2026-06-01T00:00:00Z", "--ledger", ledger, transcript, "-o", tmp_path / "out.jsonl")
    assert same.returncode == 0, same.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == DATA  # collapse has nothing to fold here
    assert ledger.read_bytes() == b""
    expanded = run_cli("expand", "--ledger", ledger, tmp_path / "out.jsonl")
    assert expanded.returncode == 0, expanded.stderr
    assert expanded.stdout == DATA


# --- 6: --backup -------------------------------------------------------------------------------


def compact_in_place(path: Path, *extra: object, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return run("compact", "--engine", "offline", "--now", "2026-06-01T00:00:00Z", "--json", "--in-place", *extra, path, **kwargs)


def test_backup_is_the_original_and_is_never_overwritten(tmp_path: Path, transcript: Path) -> None:
    first = compact_in_place(transcript, "--backup", ".bak")
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "s.jsonl.bak").read_bytes() == DATA
    after_first = transcript.read_bytes()
    assert after_first != DATA
    # A second run that changes the file again: .bak holds the original still, .bak.1 the first result.
    second = compact_in_place(transcript, "--backup", ".bak", "--keep-recent", "2")
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "s.jsonl.bak").read_bytes() == DATA
    assert (tmp_path / "s.jsonl.bak.1").read_bytes() == after_first
    assert json.loads(second.stdout)["backup"] == str(tmp_path / "s.jsonl.bak.1")
    assert any("kept the original as" in line and "s.jsonl.bak.1" in line for line in lines(second))
    assert os.stat(tmp_path / "s.jsonl.bak").st_mode == os.stat(transcript).st_mode
    assert leftovers(tmp_path) == []


def test_a_backup_that_cannot_be_written_leaves_the_original(tmp_path: Path, transcript: Path) -> None:
    result = compact_in_place(transcript, "--backup", ".bak", preexec_fn=file_size_limit(len(DATA) // 2))
    one_error(result, "s.jsonl.bak", "File too large", batch=True)
    assert transcript.read_bytes() == DATA
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_a_backup_into_a_read_only_folder_leaves_the_original(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    if IS_ROOT:  # root writes through permissions: a read-only mount instead
        if not mount_tmpfs(folder, "1m"):
            pytest.skip("cannot mount a tmpfs here")
    else:
        folder.mkdir()
    try:
        (folder / "s.jsonl").write_bytes(DATA)
        if IS_ROOT:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        else:
            folder.chmod(0o555)
        result = compact_in_place(folder / "s.jsonl", "--backup", ".bak")
        assert "cannot write the backup here" in one_error(result, "s.jsonl.bak", batch=True)
        assert (folder / "s.jsonl").read_bytes() == DATA
        assert sorted(p.name for p in folder.iterdir()) == ["s.jsonl"]
    finally:
        if IS_ROOT:
            unmount(folder)
        else:
            folder.chmod(0o755)


@pytest.mark.parametrize("suffix", ["", "/x"])
def test_a_backup_suffix_must_be_a_suffix(transcript: Path, suffix: str) -> None:
    usage_error(compact_in_place(transcript, "--backup", suffix), "--backup")
    assert transcript.read_bytes() == DATA


def test_in_place_leaves_a_file_that_was_written_to_meanwhile(tmp_path: Path, transcript: Path) -> None:
    # A session still being written (Claude Code appending): its new lines must not be lost.
    from messages_server import MessagesServer, Reply

    appended = b'{"type":"user","appended":true}\n'
    with MessagesServer() as server:
        server.enqueue(Reply.timeout(seconds=2))  # the summary takes a while
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctxpipe",
                "compact",
                "--force",
                "--engine",
                "llm",
                "--base-url",
                server.url,
                "--keep-last",
                "1",
                "--now",
                "2026-06-01T00:00:00Z",
                "--json",
                "--in-place",
                transcript,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env() | {"ANTHROPIC_API_KEY": "test-key"},
        )
        deadline = time.monotonic() + 60
        while not server.message_requests() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        assert server.message_requests(), process.communicate()[1]
        with open(transcript, "ab") as agent:
            agent.write(appended)
        _, err = process.communicate(timeout=60)
    result = subprocess.CompletedProcess(process.args, process.returncode, b"", err)
    one_error(result, str(transcript), "changed while being compacted", batch=True)
    assert transcript.read_bytes() == DATA + appended
    assert leftovers(tmp_path) == []


# --- symbolic and hard links under --in-place --------------------------------------------------


def test_in_place_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "s.jsonl").write_bytes(DATA)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real / "s.jsonl")
    result = compact_in_place(link, "--backup", ".bak")
    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert (real / "s.jsonl").read_bytes() != DATA
    assert (tmp_path / "link.jsonl.bak").read_bytes() == DATA
    assert leftovers(real) == [] and leftovers(tmp_path) == []


def test_in_place_on_a_hard_link_splits_it_with_a_warning(tmp_path: Path, transcript: Path) -> None:
    other = tmp_path / "other.jsonl"
    os.link(transcript, other)
    result = compact_in_place(transcript)
    assert result.returncode == 0, result.stderr
    assert transcript.read_bytes() != DATA
    assert other.read_bytes() == DATA  # replaced atomically, so the other name keeps the old content
    assert any("other hard link" in line for line in lines(result)), result.stderr


# --- 7: --out-dir collisions, and a folder without a destination ------------------------------


def two_of_a_name(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "a" / "s.jsonl", tmp_path / "b" / "s.jsonl"
    for path in (first, second):
        path.parent.mkdir()
        path.write_bytes(DATA)
    return first, second


def test_two_inputs_for_one_output_are_a_usage_error_before_anything_is_written(tmp_path: Path) -> None:
    first, second = two_of_a_name(tmp_path)
    out = tmp_path / "out"
    usage_error(run("compact", "--engine", "offline", "--out-dir", out, first, second), "would both be written to", str(out / "s.jsonl"))
    assert not out.exists()


def test_their_common_folder_is_mirrored(tmp_path: Path) -> None:
    two_of_a_name(tmp_path)
    out = tmp_path / "out"
    result = run("compact", "--engine", "offline", "--json", "--out-dir", out, tmp_path / "a", tmp_path / "b")
    usage_error(result, "would both be written to")  # two folders mirrored into one place still collide
    result = run("compact", "--engine", "offline", "--json", "--out-dir", out, tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.jsonl")) == ["a/s.jsonl", "b/s.jsonl"]


def test_an_output_over_an_input_is_a_usage_error(tmp_path: Path, transcript: Path) -> None:
    usage_error(run("compact", "--engine", "offline", "--out-dir", tmp_path, transcript), "would replace the input", "--in-place")
    assert transcript.read_bytes() == DATA


def test_the_same_file_twice_is_compacted_once(tmp_path: Path, transcript: Path) -> None:
    out = tmp_path / "out"
    result = run("compact", "--engine", "offline", "--json", "--out-dir", out, transcript, f"{tmp_path}/./s.jsonl")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1
    assert any("the same file as" in line for line in lines(result))


def test_a_folder_without_out_dir_or_in_place_is_a_usage_error(tmp_path: Path, transcript: Path) -> None:
    usage_error(run("compact", tmp_path), "--out-dir", "--in-place")
    usage_error(run("compact", transcript, transcript), "--out-dir", "--in-place")


# --- 14: Ctrl-C --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stage_seconds(big: Path, tmp_path_factory: pytest.TempPathFactory) -> float:
    """How long the stage runs on `big` once its input is mapped, on this machine today."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", *STAGE, big, "-o", tmp_path_factory.mktemp("timing") / "out.jsonl"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
    )
    wait_until_mapped(process, big)
    start = time.monotonic()
    assert process.wait(timeout=120) == 0
    return time.monotonic() - start


def test_the_commands_the_tests_start_take_ctrl_c_as_from_a_terminal() -> None:
    """The Ctrl-C tests below judge ctxpipe only if its process takes SIGINT: started from a shell
    script's background job (`python -m pytest &`), the suite would have it ignored, and every child
    would inherit that (tests/conftest.py gives the suite a handler instead)."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    child = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=child_env(), timeout=60)
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    assert child.stdout == b"True\n", child.stderr.decode()


@pytest.mark.skipif(not HAS_PROC_MAPS, reason="watches /proc/PID/maps to interrupt while the input is being read")
@pytest.mark.parametrize("moment", [0.0, 0.1, 0.25, 0.4, 0.55, 0.7])
def test_ctrl_c_mid_stage_exits_130_quietly_and_leaves_the_files(tmp_path: Path, big: Path, stage_seconds: float, moment: float) -> None:
    # `moment`: how far into the stage, as a share of its usual run time (reading, editing, writing).
    # On a busy machine the run may be quicker than measured and end before the signal: then again,
    # earlier; the last try (right after the input is mapped) must be interrupted.
    out = tmp_path / "out.jsonl"
    original = big.read_bytes()
    for delay in (moment * stage_seconds, moment * stage_seconds / 3, 0.0):
        out.write_bytes(b"old\n")
        process = subprocess.Popen([sys.executable, "-m", "ctxpipe", *STAGE, big, "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env())
        wait_until_mapped(process, big)
        time.sleep(delay)
        finished = process.poll() is not None
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
        # Too late: the output was already in place when the signal came (the exit is then 0, or 130
        # when it came between the rename and the end); try earlier.
        if not (finished or (process.returncode in (0, 130) and out.read_bytes() != b"old\n" and delay)):
            break
    assert process.returncode == 130, (process.returncode, err)
    assert b"Traceback" not in err and b"Error" not in err, err
    assert out.read_bytes() == b"old\n"
    assert leftovers(tmp_path) == []
    assert big.read_bytes() == original


@pytest.mark.skipif(not HAS_PROC_MAPS, reason="watches /proc/PID/maps to interrupt while ctxpipe's modules load")
def test_ctrl_c_while_loading_exits_130_quietly(transcript: Path) -> None:
    # orjson's shared library is mapped when the command line's modules are being imported.
    process = subprocess.Popen([sys.executable, "-m", "ctxpipe", *STAGE, transcript], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env())
    wait_until_mapped(process, "orjson")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, (process.returncode, err)
    assert b"Traceback" not in err, err


@pytest.mark.skipif(not HAS_PROC_MAPS, reason="watches /proc to interrupt while workers are compacting")
def test_ctrl_c_in_a_parallel_batch_stops_the_workers_and_leaves_no_temporary_file(tmp_path: Path, big: Path) -> None:
    tree = tmp_path / "projects"
    for name in ("a", "b", "c"):
        (tree / name).mkdir(parents=True)
        os.link(big, tree / name / "s.jsonl")  # 120 MB in all: enough for the batch to use its workers
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", "compact", "--engine", "offline", "--jobs", "2", "--json", "--out-dir", out, tree],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env(),
    )
    deadline = time.monotonic() + 60
    workers: list[str] = []
    while time.monotonic() < deadline and process.poll() is None:
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        workers = children.read_text().split() if children.exists() else []
        if any(str(tree) in Path(f"/proc/{pid}/maps").read_text() for pid in workers if Path(f"/proc/{pid}/maps").exists()):
            break
        time.sleep(0.01)
    else:
        pytest.fail(f"no worker started compacting (exit {process.poll()})")
    process.send_signal(signal.SIGINT)  # the parent only: it passes the interrupt on
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, (process.returncode, err)
    assert b"Traceback" not in err, err
    time.sleep(0.5)
    assert [pid for pid in workers if Path(f"/proc/{pid}").exists()] == []
    assert [p.name for p in out.rglob("*") if p.name.endswith(".tmp")] == []


# --- 16: a file truncated while it is read -----------------------------------------------------


@pytest.mark.skipif(not HAS_PROC_MAPS, reason="watches /proc/PID/maps to truncate the input while it is mapped")
@pytest.mark.parametrize("argv", [["count", "--json", "--full"], STAGE], ids=["count", "microcompact"])
def test_a_file_truncated_while_read_is_one_error(tmp_path: Path, big: Path, argv: list[str]) -> None:
    victim = tmp_path / "victim.jsonl"
    shutil.copyfile(big, victim)
    out = tmp_path / "out" / "result.jsonl"
    out.parent.mkdir()
    extra = ["-o", out] if argv == STAGE else []
    process = subprocess.Popen([sys.executable, "-m", "ctxpipe", *argv, victim, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env())
    wait_until_mapped(process, victim)
    os.truncate(victim, 1000)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1, (process.returncode, err)  # was 135 (SIGBUS), without a word
    assert err.decode().splitlines() == [f"{ERROR_PREFIX}{victim}: changed while being read"]
    assert list(out.parent.iterdir()) == []  # no temporary output left behind


CUT_UNDER_THE_READER = """
import os, sys
from ctxpipe.core.errors import InputError
from ctxpipe.core.jsonl import LineIndex, iter_buffer_spans
from ctxpipe.files.inputs import guard_truncation, mapped

path, cut, reader = sys.argv[1], int(sys.argv[2]), sys.argv[3]
guard_truncation(lambda name: f"{name}: a fault", 1)
try:
    with mapped(path) as buffer:
        lines = LineIndex(buffer, path)  # where every line is, each parsed once
        os.truncate(path, cut)  # inside the second line: the rest of the map's first page reads as zeros
        if reader == "by-position":
            lines[1]
        else:  # the first page read in one pass, as a reader ahead of the cut reads it
            for _ in iter_buffer_spans(buffer[:4096], path):
                pass
except InputError as exc:
    print(exc)
"""


@pytest.mark.parametrize("reader", ["by-position", "in-one-pass"])
def test_a_file_cut_short_under_a_line_being_read_is_changed_not_binary(tmp_path: Path, reader: str) -> None:
    """A line found whole, then read again after the file was cut short inside the map's first page:
    the bytes past the new end read as zeros (no fault: see the test above), which a reader took for a
    line of binary data (the race behind a rare failure of that test), or, read again by position,
    for an object that was not one. What happened is the file changing."""
    session = Session()
    session.user("Cut me short.")
    for turn in range(3000):  # over a MiB: mapped, not read whole
        session.text(f"Reply {turn} " + "padding " * 40, usage(2000 + turn, output=20))
    victim = session.write(tmp_path / "victim.jsonl")
    first = victim.read_bytes().index(b"\n") + 1
    assert victim.read_bytes().index(b"\n", first) < 4096 < victim.stat().st_size - (1 << 20)
    done = subprocess.run([sys.executable, "-c", CUT_UNDER_THE_READER, victim, str(first + 10), reader], capture_output=True, env=env(), timeout=60)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.decode().splitlines() == [f"{victim}: changed while being read"]


CUT_UNDER_A_WORKER = """
import os, sys
from ctxpipe.files.inputs import arm_truncation_guard, guard_truncation, mapped

path = sys.argv[1]
guard_truncation(lambda name: f"{name}: changed while being read", 3)
arm_truncation_guard()  # as count_many does before its workers fork
worker = os.fork()
if worker == 0:
    with mapped(path, ranged=True) as buffer:  # a file of a few hundred KiB: mapped, the guard being armed
        os.truncate(path, 1000)
        bytes(buffer[-10:])  # a page past the new end: SIGBUS
    os._exit(0)
print(os.waitstatus_to_exitcode(os.waitpid(worker, 0)[1]))
"""


def test_a_file_cut_short_under_a_forked_workers_map_is_one_message(tmp_path: Path) -> None:
    """A batch of counts arms the guard once, before its workers fork, and maps the files above
    ENDS_READ_NOT_MAPPED: the handler the worker inherits names the file and ends it with the
    guard's status, not a bare SIGBUS (exit -7)."""
    from ctxpipe.files.inputs import ENDS_READ_NOT_MAPPED, READ_NOT_MAPPED

    victim = tmp_path / "victim.jsonl"
    line = b'{"type":"user","message":{"role":"user","content":"' + b"x" * 1000 + b'"}}\n'
    victim.write_bytes(line * (2 * ENDS_READ_NOT_MAPPED // len(line)))
    assert ENDS_READ_NOT_MAPPED < victim.stat().st_size < READ_NOT_MAPPED
    done = subprocess.run([sys.executable, "-c", CUT_UNDER_A_WORKER, victim], capture_output=True, env=env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == ["3"]  # the worker's exit status: the guard's
    assert done.stderr.decode().splitlines() == [f"{victim}: changed while being read"]


# --- SIGTERM and SIGHUP (issue 22, case 14) ----------------------------------------------------------


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGHUP"])
def test_a_termination_signal_inside_a_write_removes_its_temporary_file(tmp_path: Path, signal_name: str) -> None:
    """The signal unwinds the write as Ctrl-C does: no half-written hidden file is left, the target is untouched."""
    from ctxpipe.files.atomic import atomic_file, unwind_on_termination

    number = getattr(signal, signal_name)
    target = tmp_path / "s.jsonl"
    target.write_bytes(b"original\n")
    before = {name: signal.getsignal(getattr(signal, name)) for name in ("SIGTERM", "SIGHUP")}
    try:
        unwind_on_termination()
        with pytest.raises(SystemExit) as ended:
            with atomic_file(target) as out:
                out.write(b"half of the new")
                os.kill(os.getpid(), number)
        assert ended.value.code == 128 + number
    finally:
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)
    assert sorted(os.listdir(tmp_path)) == ["s.jsonl"] and target.read_bytes() == b"original\n"


def test_sigterm_during_compact_in_place_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A real run, killed the moment its first temporary file (the backup's, then the output's)
    appears: no `.*.tmp` is left, and the session is either as it was or wholly compacted."""
    session = Session(version="2.1.88")
    for turn in range(1500):
        session.user(f"question {turn} " + "x" * 400)
        session.text(f"answer {turn} " + "y" * 400, usage(10_000 + turn))
    original = session.to_bytes()
    path = tmp_path / "s.jsonl"
    caught = 0
    for _ in range(5):
        path.write_bytes(original)
        for left in tmp_path.glob("s.jsonl.bak*"):
            left.unlink()
        command = [sys.executable, "-m", "ctxpipe", "compact", "--in-place", "--backup", ".bak", "--force", "--engine", "offline", str(path)]
        child = subprocess.Popen(command, stderr=subprocess.PIPE, env=child_env(None))
        while child.poll() is None:
            if any(name.endswith(".tmp") for name in os.listdir(tmp_path)):
                child.send_signal(signal.SIGTERM)
                caught += 1
                break
        _, err = child.communicate(timeout=120)
        assert child.returncode in (0, 128 + signal.SIGTERM), err
        assert [name for name in os.listdir(tmp_path) if name.endswith(".tmp")] == [], os.listdir(tmp_path)
        now = path.read_bytes()
        assert now == original or b"compact_boundary" in now
        for backup in tmp_path.glob("s.jsonl.bak*"):
            assert backup.read_bytes() == original
    assert caught > 0  # at least one run was signalled while it wrote


@pytest.mark.parametrize("given", ["path", "stdin"])
def test_an_endless_stream_of_short_binary_lines_is_refused_at_once(given: str) -> None:
    # /dev/urandom has a newline every 256 bytes or so: no line is long, but nearly every one holds
    # a NUL. It is refused at the first, not read on until the disk is full.
    if not os.path.exists("/dev/urandom"):
        pytest.skip("no /dev/urandom here")
    if given == "path":
        result = run("count", "/dev/urandom", timeout=30)
    else:
        with open("/dev/urandom", "rb") as endless:
            result = run("count", stdin=endless, timeout=30)
    assert result.returncode == 1 and b"binary data, not a JSONL transcript" in result.stderr, result.stderr
