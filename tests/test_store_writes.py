"""The write promises in a store, through the library, against a real S3 server (moto, a process).

An output is one object stored at the end; a replacement "only if unchanged" is a condition of the
upload itself (If-Match), so a writer that slips in between the check and the upload is not lost;
a backup is created only where its name is free (If-None-Match).
"""

from __future__ import annotations

import os

import pytest
from cloud import require_s3, s3_server

require_s3()

from ctxpipe import atomic, storage  # noqa: E402
from ctxpipe.core.errors import ChangedMeanwhile, CtxpipeError  # noqa: E402


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
