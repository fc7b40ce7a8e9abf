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

from ctxpipe import api
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


def sessions(folder: Path, age: float = 60.0) -> Path:
    """Copies of the fixture sessions in `folder`/project, modified `age` seconds ago (a file changed
    less than count_cache.RACY ago is not kept)."""
    project = folder / "project"
    project.mkdir(parents=True)
    for name in SESSIONS:
        target = project / name
        shutil.copyfile(FIXTURES / name, target)
        aged(target, age)
    return project


def aged(path: Path, age: float = 60.0) -> None:
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


def test_a_second_run_reads_no_file_and_prints_the_same_bytes(tmp_path: Path) -> None:
    project = sessions(tmp_path)
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


def test_a_changed_file_is_counted_again(tmp_path: Path) -> None:
    project = sessions(tmp_path)
    cache = tmp_path / "cache"
    count_opening(cache, str(project))
    grown = project / "basic.jsonl"
    last = json.loads(grown.read_bytes().splitlines()[-1])
    last.update(uuid="appended-line", parentUuid=last.get("uuid"), message={"role": "user", "content": "one more question " * 40})
    last["type"] = "user"
    with grown.open("ab") as out:
        out.write(json.dumps(last).encode() + b"\n")
    aged(grown)
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


def test_other_options_are_other_counts(tmp_path: Path) -> None:
    project = sessions(tmp_path)
    cache = tmp_path / "cache"
    count_opening(cache, str(project))
    narrow, opened = count_opening(cache, "--window", "50000", str(project))
    assert sorted(opened) == sorted(SESSIONS)
    assert {json.loads(line).get("context_window") for line in narrow.splitlines()} == {50000, None}  # None: the total
    # Each options' counts are kept apart: both are read back now.
    assert count_opening(cache, "--window", "50000", str(project)) == (narrow, [])
    assert count_opening(cache, str(project))[1] == []


def test_a_file_changed_just_now_is_not_kept(tmp_path: Path) -> None:
    project = sessions(tmp_path)
    # Changed within RACY of the look (here: its time a minute ahead of the clock, so however slowly
    # the run starts): a write in the same tick of the file system's clock could follow unseen.
    aged(project / "basic.jsonl", -60.0)
    cache = tmp_path / "cache"
    count_opening(cache, str(project))
    assert count_opening(cache, str(project))[1] == ["basic.jsonl"]


def test_a_count_that_skipped_lines_is_kept_with_its_warning(tmp_path: Path) -> None:
    project = sessions(tmp_path)
    bad = project / "bad.jsonl"
    bad.write_bytes((FIXTURES / "basic.jsonl").read_bytes() + b"{not json\n")
    aged(bad)
    cache = tmp_path / "cache"
    first = count_run(cache, "--on-error", "skip", str(project))
    second = count_run(cache, "--on-error", "skip", str(project))
    assert first[0] == 0 and b"bad.jsonl: skipped 1 bad line" in first[2]
    assert first[:3] == second[:3] and second[3] == []
    # --on-error fail: other options (every file counted), and the error it ends in is not kept.
    for expected in (sorted([*SESSIONS, "bad.jsonl"]), ["bad.jsonl"]):
        code, _, err, opened = count_run(cache, str(project))
        assert code == 1 and b"bad.jsonl:17: invalid JSON" in err and sorted(opened) == expected


def test_what_is_not_kept(tmp_path: Path) -> None:
    project = sessions(tmp_path)
    bad = project / "bad.jsonl"
    bad.write_bytes((FIXTURES / "basic.jsonl").read_bytes() + b"{not json\n")
    aged(bad)
    cache = tmp_path / "cache"
    for _ in range(2):
        result = run_cli("count", "--json", "--jobs", "1", str(bad), env={"XDG_CACHE_HOME": str(cache)})
        assert result.returncode == 1 and b"bad.jsonl:" in result.stderr
    assert not (cache / "ctxpipe" / "count").exists()  # an error is no count to keep
    options = CountOptions(tokenizer="tiktoken:cl100k_base")
    assert count_cache.CountCache.for_options(options, str(cache)) is None  # tiktoken's code is not ours to stamp


def test_kept_files_that_are_not_ours_are_ignored_and_replaced(tmp_path: Path) -> None:
    project = sessions(tmp_path)
    cache = tmp_path / "cache"
    expected, _ = count_opening(cache, str(project))
    [kept] = (cache / "ctxpipe" / "count").iterdir()
    for spoil in (b"", b"garbage", kept.read_bytes()[:-40]):
        kept.write_bytes(spoil)
        out, opened = count_opening(cache, str(project))
        assert out == expected and sorted(opened) == sorted(SESSIONS)
        assert count_opening(cache, str(project)) == (expected, [])  # replaced by a good one
    # A folder others may enter (or write) is not trusted: what it holds may not be this user's.
    (cache / "ctxpipe" / "count").chmod(0o755)
    assert sorted(count_opening(cache, str(project))[1]) == sorted(SESSIONS)
    # Another key's file under this one's name: not read (the key is checked, not only the name).
    (cache / "ctxpipe" / "count").chmod(0o700)
    kept_for = count_cache.CountCache.for_options(CountOptions(window=1234), str(cache / "ctxpipe" / "count"))
    assert kept_for is not None
    batch = api.count_many([project], CountOptions(window=1234), jobs=1, cache=cache / "ctxpipe" / "count")
    assert {result.result.window for result in batch.files if result.result} == {1234}
    [other] = [path for path in (cache / "ctxpipe" / "count").iterdir() if path != kept]
    shutil.copyfile(other, kept)
    assert sorted(count_opening(cache, str(project))[1]) == sorted(SESSIONS)


def test_the_library_keeps_counts_only_when_asked(tmp_path: Path) -> None:
    project = sessions(tmp_path)
    folder = tmp_path / "kept"
    plain = api.count_many([project], jobs=1)
    assert not folder.exists()
    first = api.count_many([project], jobs=1, cache=folder)
    second = api.count_many([project], jobs=1, cache=folder)
    assert [ok_row(r) for r in plain.files] == [ok_row(r) for r in first.files] == [ok_row(r) for r in second.files]
    assert len(list(folder.iterdir())) == 1


def ok_row(result: api.FileResult[api.FileCount]) -> object:
    assert result.result is not None, result.error
    return result.result.count_report().to_wire()


def test_the_code_stamp_follows_the_modules(tmp_path: Path) -> None:
    package = tmp_path / "package"
    for room in ("", *count_cache._COUNTING_ROOMS):
        (package / room).mkdir(parents=True, exist_ok=True)
        (package / room / "module.py").write_text("x = 1\n")
    (package / "tests").mkdir()
    (package / "tests" / "test_module.py").write_text("x = 1\n")
    first = count_cache.code_stamp(package)
    (package / "tests" / "test_module.py").write_text("x = 22\n")  # not a counting room
    assert count_cache.code_stamp(package) == first
    (package / "core" / "module.py").write_text("x = 2\n")
    os.utime(package / "core" / "module.py", ns=(0, 0))
    assert count_cache.code_stamp(package) != first
