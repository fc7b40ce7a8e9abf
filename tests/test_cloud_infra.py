"""The test infrastructure of tests/cloud.py works: a real moto server reached by a child process
through `env` alone, a proxy whose byte counts tell a whole GET from a ranged read, a real Dask
cluster of separate processes, and no process left behind by any of them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud import DaskCluster, S3Server, dask_cluster, pid_alive, read_url, require_dask, require_s3, s3_server, whoami

MB = 1 << 20


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    require_s3()
    with s3_server(counting=True) as server:
        server.make_bucket("infra")
        yield server


@pytest.fixture(scope="module")
def cluster(s3: S3Server) -> Iterator[DaskCluster]:
    require_dask()
    with dask_cluster(workers=2, env=s3.env) as running:
        yield running


def s3fs_client(s3: S3Server) -> Any:
    """An s3fs filesystem in this process, configured explicitly (os.environ stays untouched)."""
    import s3fs

    return s3fs.S3FileSystem(key=s3.env["AWS_ACCESS_KEY_ID"], secret=s3.env["AWS_SECRET_ACCESS_KEY"], endpoint_url=s3.endpoint, skip_instance_cache=True)


CHILD = """
import sys, boto3, s3fs
fs = s3fs.S3FileSystem()  # no arguments: everything comes from the environment
data = fs.cat_file("infra/round/in.bin")
fs.pipe_file("infra/round/by-s3fs.bin", data[::-1])
boto3.client("s3").put_object(Bucket="infra", Key="round/by-boto3.bin", Body=data + b"!")
print(len(data))
"""


def test_a_child_process_round_trips_objects_with_only_env(s3: S3Server) -> None:
    data = os.urandom(4096)
    s3.put("s3://infra/round/in.bin", data)
    # env is the child's WHOLE environment: no PATH, no HOME, nothing inherited.
    done = subprocess.run([sys.executable, "-c", CHILD], env=dict(s3.env), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4096"
    assert s3.get("s3://infra/round/by-s3fs.bin") == data[::-1]
    assert s3.get("s3://infra/round/by-boto3.bin") == data + b"!"


def test_the_proxy_counts_a_whole_get_and_an_upload(s3: S3Server) -> None:
    fs = s3fs_client(s3)
    data = os.urandom(MB)
    s3.reset()
    fs.pipe_file("infra/whole.bin", data)
    assert s3.bytes_sent >= MB
    s3.reset()
    assert fs.cat_file("infra/whole.bin") == data
    assert MB <= s3.bytes_fetched < MB + 16 * 1024  # the body plus a few HTTP headers


def test_a_ranged_read_fetches_far_less_than_the_object(s3: S3Server) -> None:
    fs = s3fs_client(s3)
    data = os.urandom(MB)
    s3.put("s3://infra/ranged.bin", data)
    s3.reset()
    # Keywords: s3fs's cat_file takes version_id as its second positional parameter.
    assert fs.cat_file("infra/ranged.bin", start=-100) == data[-100:]
    assert 100 <= s3.bytes_fetched < 4096
    s3.reset()
    assert fs.cat_file("infra/ranged.bin", start=5000, end=5100) == data[5000:5100]
    assert 100 <= s3.bytes_fetched < 4096


def test_the_helpers_mirror_a_tree_and_are_not_counted(s3: S3Server, tmp_path: Path) -> None:
    files = {"a.jsonl": b'{"x":1}\n', "proj/b.jsonl": b"b" * 3000, "proj/sub/c.jsonl": b"", "proj/sub/d e.jsonl": b"spaced\n"}
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    s3.reset()
    uploaded = s3.upload_tree(tmp_path, "s3://infra/tree")
    assert uploaded == {f"s3://infra/tree/{rel}": len(content) for rel, content in files.items()}
    assert s3.listing("s3://infra/tree/", relative=True) == {rel: len(content) for rel, content in files.items()}
    assert s3.listing("s3://infra/tree/") == uploaded
    assert all(s3.get(url) == files[url.removeprefix("s3://infra/tree/")] for url in uploaded)
    assert (s3.bytes_fetched, s3.bytes_sent) == (0, 0)  # the helpers talk to moto directly


def test_an_s3_server_stops_its_process_and_proxy_even_on_error() -> None:
    require_s3()
    with pytest.raises(RuntimeError, match="boom"), s3_server(counting=True) as server:
        pid, endpoint, direct = server.pid, server.endpoint, server.direct
        assert pid_alive(pid)
        raise RuntimeError("boom")
    assert not pid_alive(pid)
    for url in (endpoint, direct):
        host, _, port = url.removeprefix("http://").partition(":")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=2).close()


def test_a_server_that_rejects_credentials_reports_permission_errors() -> None:
    require_s3()
    with s3_server(reject_credentials=True) as server:
        fs = s3fs_client(server)
        with pytest.raises(PermissionError):
            fs.cat_file("anything/key", start=-10)
        with pytest.raises(PermissionError):
            fs.pipe_file("anything/key", b"x")


def test_the_cluster_runs_a_function_on_two_distinct_worker_processes(cluster: DaskCluster) -> None:
    pids = cluster.worker_pids()
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert set(pids) <= set(cluster.started_pids())
    client = cluster.client
    ran = client.gather([client.submit(whoami, pure=False, workers=[address]) for address in client.nthreads()])
    assert sorted(ran) == pids


def test_the_workers_reach_s3_through_the_env_they_were_given(cluster: DaskCluster, s3: S3Server) -> None:
    data = os.urandom(2048)
    s3.put("s3://infra/for-workers.bin", data)
    assert cluster.client.run(os.getenv, "AWS_ENDPOINT_URL") == dict.fromkeys(cluster.client.nthreads(), s3.endpoint)
    assert list(cluster.client.run(read_url, "s3://infra/for-workers.bin").values()) == [data, data]


def test_a_killed_worker_stays_dead_and_every_process_stops_even_on_error() -> None:
    require_dask()
    with pytest.raises(RuntimeError, match="boom"), dask_cluster(workers=2) as running:
        started = running.started_pids()
        assert all(pid_alive(pid) for pid in started)
        victim, survivor = running.worker_pids()
        running.kill_worker(victim)
        assert not pid_alive(victim)
        assert running.registered_workers() == 1
        assert running.worker_pids() == [survivor]
        assert running.client.submit(whoami, pure=False).result(timeout=30) == survivor
        raise RuntimeError("boom")
    assert [pid for pid in started if pid_alive(pid)] == []
