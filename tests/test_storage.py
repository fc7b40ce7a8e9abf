"""files/storage.py without a server: paths, the ranged buffer against bytes, missing extras, file:// URLs.

The ranged buffer is held to Python's own bytes methods on fsspec's in-memory file system (a real
fsspec backend, in this process), with blocks made small so that every read crosses blocks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from ctxpipe.core.errors import InputError
from ctxpipe.files import storage
from ctxpipe.files.inputs import mapped
from ctxpipe.jobs.count import CountOptions, count_buffer
from hypothesis import given, settings
from hypothesis import strategies as st

fsspec = pytest.importorskip("fsspec", reason="fsspec is a dependency of ctxpipe: reinstall the project")

from project_sessions import bulky  # noqa: E402


def memory_object(data: bytes) -> str:
    url = f"memory://ctxpipe-tests/{uuid.uuid4().hex}.jsonl"
    fsspec.filesystem("memory").pipe_file(url, data)
    return url


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(storage, "BLOCK", 7)
    monkeypatch.setattr(storage, "MAX_RUN", 4)
    monkeypatch.setattr(storage, "CACHED_BLOCKS", 9)  # room for two runs and a block, as the real sizes have


NEEDLES = [b"\n", b'"agentId"', b"ab", b"abc", b"x"]


@settings(max_examples=150, deadline=None)
@given(data=st.binary(min_size=0, max_size=200).map(lambda b: b.replace(b"q", b"\n")), cuts=st.lists(st.integers(-5, 210), min_size=2, max_size=2))
def test_a_ranged_object_reads_as_its_bytes(data, cuts):
    old = storage.BLOCK, storage.MAX_RUN, storage.CACHED_BLOCKS
    storage.BLOCK, storage.MAX_RUN, storage.CACHED_BLOCKS = 7, 4, 5
    try:
        ranged = storage.RangedObject(memory_object(data))
        low, high = cuts
        assert len(ranged) == len(data)
        assert ranged[low:high] == data[low:high]
        assert ranged[:] == data
        for needle in NEEDLES + [data[3:6] or b"z"]:
            assert ranged.find(needle, low, high) == data.find(needle, low, high), (needle, low, high)
            assert ranged.rfind(needle, low, high) == data.rfind(needle, low, high), (needle, low, high)
            assert ranged.find(needle) == data.find(needle)
            assert ranged.rfind(needle, low) == data.rfind(needle, low)
    finally:
        storage.BLOCK, storage.MAX_RUN, storage.CACHED_BLOCKS = old


def test_count_on_a_ranged_object_equals_count_on_the_file_and_reads_only_its_ends(tmp_path, small_blocks, monkeypatch):
    monkeypatch.setattr(storage, "BLOCK", 4096)
    monkeypatch.setattr(storage, "MAX_RUN", 8)
    monkeypatch.setattr(storage, "CACHED_BLOCKS", 64)
    data = bulky("/home/dev/app", 1, 1_500_000)
    assert len(data) > 1 << 20
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    ranged = storage.RangedObject(memory_object(data))
    remote = count_buffer(ranged, "s.jsonl", CountOptions()).count_report()
    with mapped(str(path)) as buffer:
        local = count_buffer(buffer, "s.jsonl", CountOptions()).count_report()
    assert remote == local
    assert ranged.fetched < len(data) / 4, (ranged.fetched, len(data))
    # a walk back from the end fetches more blocks per request as it goes on
    assert ranged.requests < ranged.fetched / 4096


def test_a_walk_grows_its_requests(small_blocks):
    data = bytes(range(256)) * 4
    ranged = storage.RangedObject(memory_object(data))
    position = len(data)
    while position > 0:  # one block at a time from the end, as iter_lines_reversed does
        position = max(0, position - 7)
        assert ranged[position : position + 7] == data[position : position + 7]
    assert ranged.fetched == len(data)  # every block once
    assert ranged.requests < len(data) / 7 / 2  # runs of 1, 2, 4, 4, … blocks


def test_an_object_that_changes_under_a_read_is_bad_input(small_blocks):
    url = memory_object(b"0123456789" * 10)
    ranged = storage.RangedObject(url)
    fsspec.filesystem("memory").pipe_file(url, b"short")
    with pytest.raises(InputError, match="changed while being read"):
        ranged[90:100]


def test_paths():
    assert storage.is_remote("s3://bucket/key") and storage.is_remote("GS://b/k") and storage.is_remote("az://c/p")
    assert not storage.is_remote("file:///tmp/x") and not storage.is_remote("/tmp/s3://x") and not storage.is_remote("relative/path")
    assert storage.local_path("file:///tmp/a%20b.jsonl") == "/tmp/a b.jsonl"
    assert storage.local_path("file://localhost/tmp/x") == "/tmp/x"
    with pytest.raises(InputError, match="on this machine"):
        storage.local_path("file://otherhost/tmp/x")
    assert storage.join("s3://b/out/", "p/a.jsonl") == "s3://b/out/p/a.jsonl"
    assert storage.join("s3://b/out", "a.jsonl") == "s3://b/out/a.jsonl"
    assert storage.below("s3://b/in/p/a.jsonl", "s3://b/in/") == "p/a.jsonl"
    assert storage.below("s3://b/input/a.jsonl", "s3://b/in") is None  # a prefix of the name is not a folder
    assert storage.below("s3://b/in", "s3://b/in") is None
    assert storage.with_suffix("s3://b/x.y/a.jsonl", ".html") == "s3://b/x.y/a.html"
    assert storage.identity("s3://b/k") == "s3://b/k"


def test_local_paths_below_a_folder(tmp_path):
    (tmp_path / "in" / "p").mkdir(parents=True)
    assert storage.below(str(tmp_path / "in" / "p" / "a.jsonl"), str(tmp_path / "in")) == "p/a.jsonl"
    assert storage.below(str(tmp_path / "other.jsonl"), str(tmp_path / "in")) is None
    assert storage.join(str(tmp_path / "out"), "p/a.jsonl") == str(tmp_path / "out" / "p" / "a.jsonl")


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ctxpipe", *argv], capture_output=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize(
    "url, extra",
    [("gs://bucket/projects/", "gcs"), ("az://container/projects/a.jsonl", "azure"), ("abfs://c/p/", "azure")],
)
def test_a_missing_backend_is_one_line_naming_the_extra(url, extra):
    backend = {"gcs": "gcsfs", "azure": "adlfs"}[extra]
    if subprocess.run([sys.executable, "-c", f"import {backend}"], capture_output=True).returncode == 0:
        pytest.skip(f"{backend} is installed here: the missing-extra message cannot be seen")
    result = run("count", url)
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.decode() == f"ctxpipe: error: {url}: {url.split(':')[0]}:// paths need the {extra} extra: pip install 'ctxpipe[{extra}]'\n"


def test_an_unknown_scheme_is_one_line():
    result = run("count", "nosuchstore://a/b.jsonl")
    assert result.returncode == 1
    assert result.stderr.decode() == "ctxpipe: error: nosuchstore://a/b.jsonl: unknown storage scheme nosuchstore://\n"


def test_file_urls_are_local_paths(tmp_path):
    data = bulky("/home/dev/app", 2, 60_000)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a b.jsonl").write_bytes(data)
    plain = run("count", "--json", str(tmp_path / "in" / "a b.jsonl"))
    url = "file://" + str(tmp_path / "in" / "a%20b.jsonl")
    through_url = run("count", "--json", url)
    assert through_url.returncode == 0, through_url.stderr
    assert plain.stdout.replace(str(tmp_path / "in" / "a b.jsonl").encode(), b"X") == through_url.stdout.replace(url.encode(), b"X")
    out = run("microcompact", "--force", "--now", "2026-01-01T00:00:00Z", "-o", "file://" + str(tmp_path / "out.jsonl"), url)
    assert out.returncode == 0, out.stderr
    expected = run("microcompact", "--force", "--now", "2026-01-01T00:00:00Z", str(tmp_path / "in" / "a b.jsonl")).stdout
    assert (tmp_path / "out.jsonl").read_bytes() == expected != data
    assert not os.path.exists("file:")


@pytest.mark.parametrize("key", ["a/../../../escaped.jsonl", "a//b.jsonl", "./a.jsonl", "a/./b.jsonl", "..", "a/\0.jsonl"])
def test_a_key_that_would_climb_out_of_the_out_dir_is_refused(key, tmp_path):
    from ctxpipe.jobs.batch import target_path

    url = f"s3://bucket/projects/{key}"
    with pytest.raises(InputError, match="cannot be given a place below --out-dir") as raised:
        target_path(url, ["s3://bucket/projects/"], str(tmp_path / "out"))
    assert raised.value.source == url
    assert target_path("s3://bucket/projects/p/a.jsonl", ["s3://bucket/projects/"], str(tmp_path / "out")) == str(tmp_path / "out" / "p" / "a.jsonl")
    assert target_path("s3://bucket/projects/p/a.jsonl", ["s3://bucket/projects/p/a.jsonl"], "s3://b2/out/") == "s3://b2/out/a.jsonl"


def test_one_object_given_under_two_spellings_is_found_once() -> None:
    # As a file reached twice on disk: once, and the second name is said to be the same object.
    from ctxpipe.files.sessions import find_sessions

    url = memory_object(b'{"type":"user","message":{"role":"user","content":"hi"}}\n')
    folder = url.rsplit("/", 1)[0]
    other = url.replace("memory://", "memory:///")
    skipped: list[tuple[str, str]] = []
    found = find_sessions([folder + "/", other], on_skip=lambda shown, why: skipped.append((shown, why)))
    assert [file.shown for file in found if file.shown.endswith(url.rsplit("/", 1)[1])] == [url]
    assert (other, f"the same object as {url}") in skipped
