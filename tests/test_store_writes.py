"""The promises of reading and writing in a store, through the library and the CLI, against a real
S3 server (moto, a process).

An output is one object stored at the end; a replacement "only if unchanged" is a condition of the
upload itself (If-Match), so a writer that slips in between the check and the upload is not lost;
a backup is created only where its name is free (If-None-Match). One object under two spellings of
its scheme is one object. Reads ask the store, never a listing cached earlier, and a count whose
object changed under it is an error, not a figure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest
from cloud import require_s3, s3_server

require_s3()

import ctxpipe  # noqa: E402
from ctxpipe.core.errors import (  # noqa: E402
    ChangedMeanwhile,
    CtxpipeError,
    InputError,
)
from ctxpipe.files import atomic, storage  # noqa: E402
from project_sessions import bulky  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    import s3fs

    with s3_server() as server:
        server.make_bucket("writes")
        saved = {key: os.environ.get(key) for key in server.env}
        os.environ.update(server.env)
        s3fs.S3FileSystem.clear_instance_cache()  # fsspec keeps instances: one made for another server would be reused
        try:
            yield server
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def test_an_output_is_stored_only_when_the_block_ends_without_error(s3):
    s3.put("s3://writes/a.jsonl", b"old\n")
    with pytest.raises(RuntimeError):
        with atomic.atomic_file("s3://writes/a.jsonl") as out:
            out.write(b"new, half")
            raise RuntimeError("the stage failed")
    assert s3.get("s3://writes/a.jsonl") == b"old\n"
    with atomic.atomic_file("s3://writes/a.jsonl") as out:
        out.write(b"new\n")
    assert s3.get("s3://writes/a.jsonl") == b"new\n"


def test_a_replacement_if_unchanged_loses_no_writer_in_between(s3, monkeypatch):
    s3.put("s3://writes/b.jsonl", b"read\n")
    read = storage.version("s3://writes/b.jsonl")
    assert read is not None and any(str(part).lower().startswith("etag=") for part in read)
    # Someone writes after the version was read: refused, their object stays.
    s3.put("s3://writes/b.jsonl", b"theirs\n")
    with pytest.raises(ChangedMeanwhile):
        with atomic.atomic_file("s3://writes/b.jsonl", read) as out:
            out.write(b"ours\n")
    assert s3.get("s3://writes/b.jsonl") == b"theirs\n"
    # Someone writes between the last check and the upload: the upload's own condition refuses it.
    read = storage.version("s3://writes/b.jsonl")
    checked = storage.version

    def then_a_writer(url: str):
        found = checked(url)
        s3.put("s3://writes/b.jsonl", b"racer\n")
        return found

    monkeypatch.setattr(storage, "version", then_a_writer)
    with pytest.raises(ChangedMeanwhile):
        with atomic.atomic_file("s3://writes/b.jsonl", read) as out:
            out.write(b"ours\n")
    monkeypatch.setattr(storage, "version", checked)
    assert s3.get("s3://writes/b.jsonl") == b"racer\n"
    # Unchanged: replaced.
    read = storage.version("s3://writes/b.jsonl")
    with atomic.atomic_file("s3://writes/b.jsonl", read) as out:
        out.write(b"ours\n")
    assert s3.get("s3://writes/b.jsonl") == b"ours\n"


def test_backups_never_overwrite_one_another(s3):
    s3.put("s3://writes/c.jsonl", b"original\n")
    s3.put("s3://writes/c.jsonl.bak", b"someone's file\n")
    first = atomic.keep_backup("s3://writes/c.jsonl", ".bak", b"first\n")
    second = atomic.keep_backup("s3://writes/c.jsonl", ".bak", b"second\n")
    assert (first, second) == ("s3://writes/c.jsonl.bak.1", "s3://writes/c.jsonl.bak.2")
    assert s3.get("s3://writes/c.jsonl.bak") == b"someone's file\n"
    assert s3.get(first) == b"first\n" and s3.get(second) == b"second\n"


def test_an_upload_that_fails_is_one_error_naming_the_object(s3):
    with pytest.raises(CtxpipeError, match=r"^s3://no-such-bucket-here/x\.jsonl: cannot write \("):
        with atomic.atomic_file("s3://no-such-bucket-here/x.jsonl") as out:
            out.write(b"data\n")


def cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ctxpipe", *argv], capture_output=True, env={**os.environ, **env}, timeout=120)


@pytest.mark.parametrize("spelling", ["s3a://", "S3://"])
def test_one_object_under_another_spelling_is_never_written_over(s3, spelling):
    session = bulky("/home/dev/app", 7, 80_000)
    s3.put("s3://writes/same/s.jsonl", session)
    assert storage.identity(spelling + "writes/same/s.jsonl") == storage.identity("s3://writes/same/s.jsonl")
    compact = cli("compact", "--out-dir", spelling + "writes/same/", "s3://writes/same/s.jsonl", env=s3.env)
    assert compact.returncode == 2 and b"would replace the input" in compact.stderr, compact.stderr
    report = cli("report", "-o", spelling + "writes/same/s.jsonl", "s3://writes/same/s.jsonl", env=s3.env)
    assert report.returncode == 2 and b"the page would replace it" in report.stderr, report.stderr
    assert s3.get("s3://writes/same/s.jsonl") == session


def test_a_prefix_keeps_the_spelling_given_and_its_tree_is_mirrored(s3, tmp_path):
    session = bulky("/home/dev/app", 8, 60_000)
    s3.put("s3://writes/tree/a/s.jsonl", session)
    s3.put("s3://writes/tree/b/s.jsonl", session)
    found = cli("count", "--json", "s3a://writes/tree/", env=s3.env)
    assert found.returncode == 0, found.stderr
    assert [line.split(b'"file":"')[1].split(b'"')[0] for line in found.stdout.splitlines()[:2]] == [
        b"s3a://writes/tree/a/s.jsonl",
        b"s3a://writes/tree/b/s.jsonl",
    ]
    out = cli("compact", "--out-dir", str(tmp_path / "out"), "s3a://writes/tree/", env=s3.env)
    assert out.returncode == 0, out.stderr
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.jsonl")) == ["a/s.jsonl", "b/s.jsonl"]


def test_a_session_that_grew_after_a_listing_is_read_to_its_new_end(s3):
    short, whole = bulky("/home/dev/app", 9, 40_000), bulky("/home/dev/app", 9, 120_000)
    assert whole.startswith(short[: len(short) // 2])
    s3.put("s3://writes/grow/s.jsonl", short)
    assert [item.size for item in storage.walk("s3://writes/grow/")] == [len(short)]  # a listing, cached by s3fs
    s3.put("s3://writes/grow/s.jsonl", whole)
    assert ctxpipe.count_transcript("s3://writes/grow/s.jsonl") == replace(ctxpipe.count_transcript(whole), file="s3://writes/grow/s.jsonl", kind="main")


def test_an_object_named_like_a_prefix_is_read(s3):
    session = bulky("/home/dev/app", 10, 30_000)
    s3.put("s3://writes/both/s.jsonl", session)
    s3.put("s3://writes/both/s.jsonl/inner.jsonl", session)
    storage.walk("s3://writes/both/")  # the listing calls s.jsonl a folder too
    assert storage.read_whole("s3://writes/both/s.jsonl") == session
    assert ctxpipe.count_transcript("s3://writes/both/s.jsonl").tokens == ctxpipe.count_transcript(session).tokens


def test_a_count_whose_object_changed_under_it_is_an_error(s3, monkeypatch):
    first, second = bulky("/home/dev/app", 11, 300_000), bulky("/home/dev/app", 12, 300_000)
    s3.put("s3://writes/moving/s.jsonl", first)
    fetch = storage.RangedObject._block
    calls = []

    def replaced_midway(self, index):
        calls.append(index)
        if len(calls) == 2:  # after the first request: the object is replaced (same size or not)
            s3.put("s3://writes/moving/s.jsonl", second)
        return fetch(self, index)

    monkeypatch.setattr(storage.RangedObject, "_block", replaced_midway)
    with pytest.raises(InputError, match="changed while being read"):
        ctxpipe.count_transcript("s3://writes/moving/s.jsonl")
    assert len(calls) >= 2


def test_a_missing_bucket_is_named_before_any_work(s3, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "s.jsonl").write_bytes(bulky("/home/dev/app", 13, 30_000))
    result = cli("compact", "--out-dir", "s3://no-such-bucket-here/out/", str(tmp_path / "in"), env=s3.env)
    assert result.returncode == 1
    assert result.stderr.decode() == "ctxpipe: error: s3://no-such-bucket-here/out/: cannot write (no such bucket)\n"
    missing = cli("count", "s3://no-such-bucket-here/projects/", env=s3.env)
    assert missing.returncode == 1 and missing.stderr.decode() == "ctxpipe: error: s3://no-such-bucket-here/projects/: no such bucket\n"
