"""`count` over files keeps each file's count (jobs/count_cache.py) and reads it back while the file, the
options and ctxpipe's code are as they were: the same bytes out as counting again, and the files not read.

What a run opened is told by an audit hook in a child process (`open` events of the session files)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ctxpipe import api
from ctxpipe.core.statusline import FINE_RACY, RACY, racy_window, settled
from ctxpipe.jobs import count_cache
from ctxpipe.jobs.count import CountOptions
from helpers import child_env, run_cli

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code"
SESSIONS = ("basic.jsonl", "compacted.jsonl", "parallel.jsonl", "repeats.jsonl", "sidechain.jsonl")

# Runs `ctxpipe ARGV` in this child and prints, after its output, the .jsonl files it opened.
OPENS = textwrap.dedent(
    """\
    import atexit, json, sys
    opened = set()
    def hook(event, args):
        if event == "open" and isinstance(args[0], str) and args[0].endswith(".jsonl"):
            opened.add(args[0])
    sys.addaudithook(hook)
    atexit.register(lambda: sys.stderr.write("OPENED " + json.dumps(sorted(opened)) + "\\n"))
    from ctxpipe.cli.entry import main
    sys.argv = ["ctxpipe", *json.loads(sys.argv[1])]
    main()
    """
)


# Each test's own copy of the sessions (a test changes its files), made before any test runs and
# then left alone for a tick of the file system's clock (core.statusline.racy_window): a file is kept
# only once both its times are that old, and a file's change time cannot be set back.
PROJECTS = ("reads", "changed", "options", "skipped", "not-kept", "not-ours", "library", "racy", "swapped", "crafted", "restamped")


@pytest.fixture(scope="module")
def aged_projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("aged")
    projects = {}
    for name in PROJECTS:
        project = projects[name] = root / name / "project"
        project.mkdir(parents=True)
        for session in SESSIONS:
            shutil.copyfile(FIXTURES / session, project / session)
        if name in ("skipped", "not-kept"):
            (project / "bad.jsonl").write_bytes((FIXTURES / "basic.jsonl").read_bytes() + b"{not json\n")  # line 17
    time.sleep(max(racy_window(count_cache.stamp_of(str(path)) or (0, 0, 0, 0)) for path in root.glob("*/project/*.jsonl")) + 0.1)
    return projects


def aged(path: Path, age: float = 60.0) -> None:
    """Its modification time put `age` seconds back (its change time stays now)."""
    then = time.time() - age
    os.utime(path, (then, then))


def count_opening(cache: Path, *argv: str) -> tuple[bytes, list[str]]:
    """stdout of `ctxpipe count --json --jobs 1 ARGV` with its kept counts in `cache`, and the .jsonl files it opened."""
    code, out, err, opened = count_run(cache, *argv)
    assert code == 0, err.decode()
    return out, opened


def count_run(cache: Path, *argv: str) -> tuple[int, bytes, bytes, list[str]]:
    """count_opening's exit status, stdout, stderr and opened files."""
    done = subprocess.run(
        [sys.executable, "-c", OPENS, json.dumps(["count", "--json", "--jobs", "1", *argv])],
        capture_output=True,
        env=child_env({"XDG_CACHE_HOME": str(cache)}),
        timeout=120,
    )
    marker = done.stderr.rindex(b"OPENED ")
    return done.returncode, done.stdout, done.stderr[:marker], [os.path.basename(name) for name in json.loads(done.stderr[marker + 7 :])]


def test_a_second_run_reads_no_file_and_prints_the_same_bytes(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    project = aged_projects["reads"]
    cache = tmp_path / "cache"
    first, opened_first = count_opening(cache, str(project))
    second, opened_second = count_opening(cache, str(project))
    fresh, _ = count_opening(tmp_path / "other-cache", "--no-cache", str(project))
    assert sorted(opened_first) == sorted(SESSIONS)
    assert opened_second == []
    assert first == second == fresh
    assert len(first.splitlines()) == len(SESSIONS) + 1  # and the total
    # --no-cache keeps nothing.
    assert not (tmp_path / "other-cache").exists()
    assert len(list((cache / "ctxpipe" / "count").iterdir())) == 1  # a file for the project's folder
    assert oct((cache / "ctxpipe" / "count").stat().st_mode & 0o777) == "0o700"


def test_a_changed_file_is_counted_again(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    project = aged_projects["changed"]
    cache = tmp_path / "cache"
    count_opening(cache, str(project))
    grown = project / "basic.jsonl"
    last = json.loads(grown.read_bytes().splitlines()[-1])
    last.update(uuid="appended-line", parentUuid=last.get("uuid"), message={"role": "user", "content": "one more question " * 40})
    last["type"] = "user"
    with grown.open("ab") as out:
        out.write(json.dumps(last).encode() + b"\n")
    # The same size, other bytes, the modification time put back: the change time still tells.
    rewritten = project / "repeats.jsonl"
    before = rewritten.stat()
    data = rewritten.read_bytes()
    assert b'"input_tokens":' in data
    changed = data.replace(b'"input_tokens":', b'"input_tokens": ', 1).replace(b", ", b",", 1)
    assert len(changed) == len(data) and changed != data
    rewritten.write_bytes(changed)
    os.utime(rewritten, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert rewritten.stat().st_mtime_ns == before.st_mtime_ns and rewritten.stat().st_size == before.st_size
    again, opened = count_opening(cache, str(project))
    assert sorted(opened) == ["basic.jsonl", "repeats.jsonl"]
    fresh, _ = count_opening(tmp_path / "fresh", str(project))
    assert again == fresh


def test_other_options_are_other_counts(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    project = aged_projects["options"]
    cache = tmp_path / "cache"
    count_opening(cache, str(project))
    narrow, opened = count_opening(cache, "--window", "50000", str(project))
    assert sorted(opened) == sorted(SESSIONS)
    assert {json.loads(line).get("context_window") for line in narrow.splitlines()} == {50000, None}  # None: the total
    # Each options' counts are kept apart: both are read back now.
    assert count_opening(cache, "--window", "50000", str(project)) == (narrow, [])
    assert count_opening(cache, str(project))[1] == []


def test_a_file_changed_just_now_is_not_kept(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    project = aged_projects["racy"]
    # Its modification time a minute ahead of the clock (so however slowly the run starts).
    aged(project / "basic.jsonl", -60.0)
    cache = tmp_path / "cache"
    count_opening(cache, str(project))
    assert sorted(count_opening(cache, str(project))[1]) == ["basic.jsonl"]
    # Put a minute back just after a write (rsync -t, cp -p): the change time is now. Looked at
    # within its file system's tick, it is not kept; a tick later it is.
    session = project / "parallel.jsonl"
    session.write_bytes(session.read_bytes())
    aged(session, 60.0)
    stamp = count_cache.stamp_of(str(session))
    assert stamp is not None
    changed = max(stamp[1], stamp[3]) / 1e9
    kept, _ = kept_name(tmp_path / "kept", session)
    counted = api.count_transcript(session)
    kept.put(str(session), "main", str(session), stamp, counted, changed + racy_window(stamp) / 2)
    assert not kept._changed
    kept.put(str(session), "main", str(session), stamp, counted, changed + racy_window(stamp) + 0.001)
    assert kept._changed
    kept.close()


def test_the_tick_follows_the_times_the_file_system_keeps() -> None:
    # Times kept to the second (ext3, HFS+, FAT: every change time a whole second) wait RACY; finer
    # ones wait FINE_RACY. The change time decides: only the kernel sets it.
    second, fine = (10, 1_700_000_000 * 10**9, 1, 1_700_000_000 * 10**9), (10, 1_700_000_000 * 10**9, 1, 1_700_000_000 * 10**9 + 123_456)
    assert (racy_window(second), racy_window(fine)) == (RACY, FINE_RACY)
    assert not settled(second, 1_700_000_001.5) and settled(second, 1_700_000_000 + RACY)
    assert settled(fine, 1_700_000_000.1) and not settled(fine, 1_700_000_000.01)
    assert not settled(fine, 1_699_999_999.0)  # dated ahead of the moment: never settled


def test_a_count_that_skipped_lines_is_kept_with_its_warning(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    project = aged_projects["skipped"]
    cache = tmp_path / "cache"
    first = count_run(cache, "--on-error", "skip", str(project))
    second = count_run(cache, "--on-error", "skip", str(project))
    assert first[0] == 0 and b"bad.jsonl: skipped 1 bad line" in first[2]
    assert first[:3] == second[:3] and second[3] == []
    # --on-error fail: other options (every file counted), and the error it ends in is not kept.
    for expected in (sorted([*SESSIONS, "bad.jsonl"]), ["bad.jsonl"]):
        code, _, err, opened = count_run(cache, str(project))
        assert code == 1 and b"bad.jsonl:17: invalid JSON" in err and sorted(opened) == expected


def test_what_is_kept_of_one_file(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    session = aged_projects["not-kept"] / "basic.jsonl"
    cache = tmp_path / "cache"
    # The count of one file's end costs less than loading its folder's kept counts: none kept.
    for _ in range(2):
        assert count_opening(cache, str(session))[1] == ["basic.jsonl"]
    assert not (cache / "ctxpipe" / "count").exists()
    # A count that reads every line of it is kept.
    full = count_opening(cache, "--full", str(session))
    assert full[1] == ["basic.jsonl"] and count_opening(cache, "--full", str(session)) == (full[0], [])
    result = run_cli("count", "--json", "--full", "--jobs", "1", str(session.with_name("bad.jsonl")), env={"XDG_CACHE_HOME": str(cache)})
    assert result.returncode == 1 and b"bad.jsonl:17: invalid JSON" in result.stderr


def test_counts_with_tiktoken_are_not_kept(tmp_path: Path) -> None:
    # (Nor those made on a Dask cluster: tests/test_dask.py's cluster runs a task for every file a
    # --jobs run just counted.)
    cache = tmp_path / "cache"
    options = CountOptions(tokenizer="tiktoken:cl100k_base")
    assert count_cache.CountCache.for_options(options, str(cache)) is None  # tiktoken's code is not ours to stamp


def test_kept_files_that_are_not_ours_are_ignored_and_replaced(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    project = aged_projects["not-ours"]
    cache = tmp_path / "cache"
    folder = cache / "ctxpipe" / "count"
    expected, _ = count_opening(cache, str(project))
    [kept] = folder.iterdir()
    for spoil in (b"garbage", kept.read_bytes()[:-40]):
        kept.write_bytes(spoil)
        out, opened = count_opening(cache, str(project))
        assert out == expected and sorted(opened) == sorted(SESSIONS)
        assert count_opening(cache, str(project)) == (expected, [])  # replaced by a good one
    # A FIFO where the kept file was: not waited on.
    kept.unlink()
    os.mkfifo(kept)
    assert count_opening(cache, str(project)) == (expected, sorted(SESSIONS))
    kept.unlink()
    count_opening(cache, str(project))
    # A folder others may enter (or write) is not trusted: what it holds may not be this user's.
    folder.chmod(0o755)
    assert sorted(count_opening(cache, str(project))[1]) == sorted(SESSIONS)
    folder.chmod(0o700)
    # Nor one reached through a link.
    folder.rename(cache / "elsewhere")
    folder.symlink_to(cache / "elsewhere")
    assert sorted(count_opening(cache, str(project))[1]) == sorted(SESSIONS)
    folder.unlink()
    (cache / "elsewhere").rename(folder)
    # Another key's file under this one's name: not read (the key is checked, not only the name).
    batch = api.count_many([project], CountOptions(window=1234), jobs=1, cache=folder)
    assert {result.result.window for result in batch.files if result.result} == {1234}
    [other] = [path for path in folder.iterdir() if path != kept]
    shutil.copyfile(other, kept)
    assert sorted(count_opening(cache, str(project))[1]) == sorted(SESSIONS)


def test_the_library_keeps_counts_only_when_asked(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    project = aged_projects["library"]
    folder = tmp_path / "kept"
    plain = api.count_many([project], jobs=1)
    assert not folder.exists()
    first = api.count_many([project], jobs=1, cache=folder)
    twice = api.count_many([], jobs=1, cache=folder, files=[*api.session_files([project], True)] * 2)
    assert [ok_row(r) for r in plain.files] == [ok_row(r) for r in first.files] == [ok_row(r) for r in twice.files][: len(SESSIONS)]
    assert len(list(folder.iterdir())) == 1
    # A file given twice is two counts, as counted: not one object shared by two rows.
    assert twice.files[0].result is not twice.files[len(SESSIONS)].result


def ok_row(result: api.FileResult[api.FileCount]) -> object:
    assert result.result is not None, result.error
    return result.result.count_report().to_wire()


def test_the_code_stamp_follows_the_modules(tmp_path: Path) -> None:
    package = tmp_path / "package"
    for room in ("", *count_cache._COUNTING_ROOMS):
        (package / room).mkdir(parents=True, exist_ok=True)
        (package / room / "module.pyc").write_bytes(b"")
    (package / "tests").mkdir()
    (package / "tests" / "test_module.py").write_text("x = 1\n")
    assert count_cache.code_stamp(package) is None  # no sources: nothing to stamp, nothing kept
    for room in ("", *count_cache._COUNTING_ROOMS):
        (package / room / "module.py").write_text("x = 1\n")
    first = count_cache.code_stamp(package)
    (package / "tests" / "test_module.py").write_text("x = 22\n")  # not a counting room
    assert count_cache.code_stamp(package) == first
    (package / "core" / "module.py").write_text("x = 2\n")
    os.utime(package / "core" / "module.py", ns=(0, 0))
    second = count_cache.code_stamp(package)
    assert second != first
    # The same size and modification time put back (cp -p, rsync -t): the change time still tells.
    time.sleep(0.01)
    (package / "core" / "module.py").write_text("x = 3\n")
    os.utime(package / "core" / "module.py", ns=(0, 0))
    assert count_cache.code_stamp(package) != second


def kept_name(folder: Path, session: Path) -> tuple[count_cache.CountCache, str]:
    """The library's kept counts in `folder` for the default options, and the name of `session`'s file there."""
    cache = count_cache.CountCache.for_options(CountOptions(), str(folder))
    assert cache is not None
    return cache, cache._name(str(session))


def test_the_kept_file_is_written_in_the_folder_that_was_checked(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    """The folder is opened when the counts are looked up; swapped for a link to another folder before
    they are written, the counts still go to the folder that was checked (never through the link),
    written for this user only."""
    project = aged_projects["swapped"]
    folder, moved, elsewhere = tmp_path / "kept", tmp_path / "moved", tmp_path / "elsewhere"
    folder.mkdir(mode=0o700)
    elsewhere.mkdir()
    cache, name = kept_name(folder, project / SESSIONS[0])
    found = api.session_files([project])
    known, stamps, looked = count_cache.lookup(cache, found)
    assert known == [None] * len(found)
    folder.rename(moved)
    folder.symlink_to(elsewhere)
    try:
        from ctxpipe.jobs.count import count_file

        for item, stamp in zip(found, stamps):
            cache.put(str(item.path), item.kind, item.shown, stamp, count_file(str(item.path), CountOptions(), item.kind, item.shown), looked)
        cache.save()
    finally:
        cache.close()
    assert list(elsewhere.iterdir()) == []
    [kept] = moved.iterdir()
    assert kept.name == name and kept.stat().st_mode & 0o777 == 0o600


def test_a_kept_file_makes_nothing_but_counts(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    """A kept file of the right key whose pickle names another callable (here os.system), or holds
    something else than a count: nothing of it is run, the files are counted again, and it is replaced."""
    import pickle

    project = aged_projects["crafted"]
    folder = tmp_path / "kept"
    expected = [ok_row(r) for r in api.count_many([project], jobs=1).files]
    folder.mkdir(mode=0o700)
    cache, name = kept_name(folder, project / SESSIONS[0])
    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return os.system, (f"touch {marker}",)

    sessions = [str(path) for path in sorted(project.iterdir())]
    stamps = {path: count_cache.stamp_of(path) for path in sessions}
    for planted in (Planted(), "not a count"):
        entries = {path: (stamps[path], "main", path, planted, time.time()) for path in sessions}
        (folder / name).write_bytes(pickle.dumps({"key": cache.key, "entries": entries}))
        batch = api.count_many([project], jobs=1, cache=folder)
        assert [ok_row(r) for r in batch.files] == expected and not marker.exists()
    assert pickle.loads((folder / name).read_bytes())["key"] == cache.key  # replaced by the counts
    cache.close()


def test_a_file_changed_while_it_was_counted_is_not_kept(aged_projects: dict[str, Path], tmp_path: Path) -> None:
    project = aged_projects["restamped"]
    cache, _ = kept_name(tmp_path / "kept", project / SESSIONS[0])
    session = project / SESSIONS[0]
    before = count_cache.stamp_of(str(session))
    counted = api.count_transcript(session)
    with session.open("ab") as grown:
        grown.write((FIXTURES / SESSIONS[0]).read_bytes().splitlines(keepends=True)[-1])
    cache.put(str(session), "main", str(session), before, counted, time.time() + 60)
    assert not cache._changed  # nothing to write: the count was of other bytes than the stamp says
    cache.close()
