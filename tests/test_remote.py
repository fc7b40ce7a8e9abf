"""Object-storage paths end to end (issue 14): the CLI, run as a child process against a real S3
server (moto, on 127.0.0.1), held to the same CLI run on a local copy of the same tree.

One tree of sessions in the three layouts files/sessions.py describes (1.0.x inline sidechains, 2.0.x
agent-*.jsonl beside the session, 2.1.x <session>/subagents/agent-*.jsonl with a compaction
side-call) is written to a local folder and uploaded to s3://bkt/projects/. Every remote run must
give what the local run gives: the same rows (only `file` differs, and it is the URL), the same
output bytes at the same relative keys. count must read a small fraction of each object (measured
through a byte-counting proxy), and every store failure is one error line naming the URL.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import Session, simple, usage
from cloud import HOST, S3Server, free_port, require_s3, s3_server
from helpers import CLEAN_ENV, child_env, error_line, ok, run_cli
from project_sessions import NOW_ISO, Project, bulky, source_file
from zygote import Run, Zygote

require_s3()

BUCKET = "bkt"
PROJECTS = f"s3://{BUCKET}/projects/"
# compact at a fixed time, restore from the transcript (no summary is due: a summary names the
# transcript by its path or URL, so its bytes differ by nature; see the summarize stage's test).
COMPACT = ("--now", NOW_ISO, "--source", "transcript")

SID_OLD = "10101010-1010-4010-8010-101010101010"
SID_MID = "20202020-2020-4020-8020-202020202020"
SID_NEW = "30303030-3030-4030-8030-303030303030"
SID_QUIET = "40404040-4040-4040-8040-404040404040"
OLD = f"-home-dev-old/{SID_OLD}.jsonl"  # 1.0.x: the subagent's lines inline, a compact boundary
MID = f"-home-dev-mid/{SID_MID}.jsonl"  # 2.0.x: the subagent in agent-<id>.jsonl beside it
MID_AGENT = "-home-dev-mid/agent-4f1e2d3c.jsonl"
NEW = f"-home-dev-app/{SID_NEW}.jsonl"  # 2.1.x: subagents in <session>/subagents/
NEW_AGENT = f"-home-dev-app/{SID_NEW}/subagents/agent-a1b2c3d.jsonl"
NEW_SIDE_CALL = f"-home-dev-app/{SID_NEW}/subagents/agent-acompact-70d8e7.jsonl"
QUIET = f"-home-dev-app/{SID_QUIET}.jsonl"  # nothing to compact: never rewritten
KINDS = {OLD: "main", MID: "main", MID_AGENT: "subagent", NEW: "main", NEW_AGENT: "subagent", NEW_SIDE_CALL: "compaction", QUIET: "main"}


# --- the tree ------------------------------------------------------------------------------------


def reads(p: Project, first: int, count: int) -> None:
    for n in range(first, first + count):
        p.read(f"src/m{n}.py", source_file(f"m{n}", 40))
        p.say(f"Read m{n}.")


def old_layout() -> bytes:
    """A 1.0.x session: a subagent's lines inline (isSidechain), then a compaction and more work."""
    p = Project("/home/dev/old", session_id=SID_OLD, seed=10)
    p.version = "1.0.51"
    p.ask("Find where the configuration is loaded.")
    reads(p, 0, 5)
    task = p.tool_id()
    p.response([{"type": "tool_use", "id": task, "name": "Task", "input": {"description": "find config", "prompt": "Find the config loader."}}], usage(p.total))
    start = p.user("Find the config loader.", parent=p.last, sidechain=True)
    p.text("It is src/config.py, load().", usage(3000), sidechain=True, parent=start)
    p.tool_result(task, "It is src/config.py, load().")
    p.compact_here()
    reads(p, 5, 5)
    p.ask("Thanks.")
    p.say("Done.")
    return p.to_bytes()


def agent_file(cwd: str, session_id: str, agent: str, seed: int, turns: int = 4) -> bytes:
    """A subagent's own file: sidechain lines, each with its agentId."""
    p = Project(cwd, session_id=session_id, seed=seed)
    p.ask("Look through the modules.")
    reads(p, 0, turns)
    for line in p.lines:
        line.update(isSidechain=True, agentId=agent)
    return p.to_bytes()


def mid_layout() -> bytes:
    p = Project("/home/dev/mid", session_id=SID_MID, seed=20)
    p.version = "2.0.76"
    p.ask("Tidy the modules.")
    reads(p, 0, 8)
    return p.to_bytes()


def side_call() -> bytes:
    """Claude Code's compaction side-call: the summary request, agentId acompact-… on every line."""
    s = Session()
    prompt = s.user("Your task is to create a detailed summary of the conversation so far.", parent=None, sidechain=True, agentId="acompact-70d8e7")
    s.response([{"type": "text", "text": "<summary>1. Primary Request…</summary>"}], usage(60_000, output=2000), sidechain=True, parent=prompt)
    s.lines[-1]["agentId"] = "acompact-70d8e7"
    return s.to_bytes()


def layouts() -> dict[str, bytes]:
    quiet = simple(20_000)
    for line in quiet.lines:
        line["sessionId"] = SID_QUIET
    return {
        OLD: old_layout(),
        MID: mid_layout(),
        MID_AGENT: agent_file("/home/dev/mid", SID_MID, "4f1e2d3c", 21),
        NEW: bulky("/home/dev/app", 30, 120_000),
        NEW_AGENT: agent_file("/home/dev/app", SID_NEW, "a1b2c3d", 31, turns=6),
        NEW_SIDE_CALL: side_call(),
        QUIET: quiet.to_bytes(),
        "-home-dev-app/notes.txt": b"not a session\n",  # not *.jsonl: never taken
    }


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def local_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def remote_tree(s3: S3Server, prefix: str) -> dict[str, bytes]:
    return {rel: s3.get(prefix + rel) for rel in s3.listing(prefix, relative=True)}


class Tree:
    def __init__(self, s3: S3Server, local: Path, files: dict[str, bytes], zygote: Zygote) -> None:
        self.s3, self.local, self.files, self.zygote = s3, local, files, zygote

    def remote(self, *args: str | Path, env: dict[str, str] | None = None) -> Run:
        """`ctxpipe ARGS` in a child process that reaches the S3 server through its environment only:
        forked from a zygote that imported the store's client once (test_a_forked_run_is_python_dash_m)."""
        return self.zygote.run(args, cwd=Path.cwd(), env=remote_env(self.s3, env), audit=False, timeout=120)

    def locally(self, *args: str | Path) -> Any:
        """The same command on the local copy (in this process: nothing here touches the store)."""
        return run_cli(*args, env=CLEAN_ENV)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server(counting=True) as server:
        server.make_bucket(BUCKET)
        yield server


def remote_env(s3: S3Server, env: dict[str, str] | None = None) -> dict[str, str]:
    """A remote run's environment: the clean one, the server's AWS_* settings, then `env`."""
    return s3.child_env(child_env(CLEAN_ENV)) | (env or {})


@pytest.fixture(scope="module")
def zygote(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """A warm interpreter for the remote runs: it imported ctxpipe, then what a first remote count
    imported (s3fs, aiobotocore, aiohttp: about 0.35 s a process), and forks a child for each run."""
    folder = tmp_path_factory.mktemp("zygote")
    forks = Zygote(folder)
    forks.ask({"import": sorted(forks.imported_by(["count", "--json", f"s3://{BUCKET}/"], cwd=folder, env=remote_env(s3), timeout=120))})
    yield forks
    forks.close()


@pytest.fixture(scope="module")
def tree(s3: S3Server, zygote: Zygote, tmp_path_factory: pytest.TempPathFactory) -> Tree:
    base = tmp_path_factory.mktemp("remote")
    files = layouts()
    write_tree(base / "projects", files)
    s3.upload_tree(base / "projects", PROJECTS)
    # A sibling whose name starts with "proj" and with "projects": no walk below a prefix may take it.
    old = {f"-home-dev-gone/{SID_OLD}.jsonl": files[OLD]}
    write_tree(base / "projects-old", old)
    s3.upload_tree(base / "projects-old", f"s3://{BUCKET}/projects-old/")
    return Tree(s3, base / "projects", files, zygote)


def rows(result: Any) -> list[dict[str, Any]]:
    ok(result)
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def under(value: Any, bases: dict[str, str]) -> Any:
    """`value` with every string that starts with one of `bases` (a folder or prefix, "/"-ended)
    starting with its token instead: a local run's rows and a remote run's then read the same."""
    if isinstance(value, dict):
        return {key: under(item, bases) for key, item in value.items()}
    if isinstance(value, list):
        return [under(item, bases) for item in value]
    if isinstance(value, str):
        for base, token in bases.items():
            if value.startswith(base):
                return token + value[len(base) :]
    return value


def by_relative(found: list[dict[str, Any]], root: str | Path, **more: str | Path) -> dict[str, Any]:
    """The rows by their file relative to `root` (the total row as "(total)"), every path below
    `root` (or below each folder of `more`, named by its key) written relative to it."""
    bases = {str(root).rstrip("/") + "/": "<root>/"} | {str(base).rstrip("/") + "/": f"<{name}>/" for name, base in more.items()}
    out: dict[str, Any] = {}
    for row in found:
        if row.get("total"):  # the batch's total row (file null)
            out["(total)"] = row
            continue
        assert str(row["file"]).startswith(str(root).rstrip("/") + "/"), (row["file"], root)
        rel = row["file"][len(str(root).rstrip("/")) + 1 :]
        assert rel not in out, rel
        out[rel] = under(row, bases)
    return out


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two JSON values differ, for a failure message that says it."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in sorted(set(a) | set(b)) for d in differences(a.get(key), b.get(key), f"{where}.{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for n, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{n}]")]
    return [] if a == b else [f"{where}: {a!r:.200} != {b!r:.200}"]


def one_error(result: Any, url: str, *words: str) -> str:
    """Exit 1, one line `ctxpipe: error: <url>: …`, no traceback, nothing on stdout."""
    line = error_line(result, *words)
    assert line.startswith(f"ctxpipe: error: {url}: "), line
    return line


# --- 1. count, warn and discovery ------------------------------------------------------------------


@pytest.mark.parametrize("flags", [(), ("--full",), ("--by", "tool", "--cost")], ids=["tail", "full", "by-tool-cost"])
def test_count_of_a_prefix_equals_count_of_the_local_copy(tree: Tree, flags: tuple[str, ...]) -> None:
    remote = by_relative(rows(tree.remote("count", "--json", *flags, PROJECTS)), PROJECTS)
    local = by_relative(rows(tree.locally("count", "--json", *flags, tree.local)), tree.local)
    assert remote.pop("(total)") == local.pop("(total)")
    assert sorted(remote) == sorted(KINDS), "the same files found, in every layout, and nothing else"
    assert {rel: row["kind"] for rel, row in remote.items()} == KINDS
    for rel in KINDS:
        assert remote[rel] == local[rel], rel
    assert remote[NEW]["tokens"] > 0 and remote[OLD]["tokens"] > 0
    if "--by" in flags:
        assert remote[NEW]["breakdown"] and remote[NEW]["cost"], "the breakdown and the cost are there to compare"


def test_count_without_subagents_and_of_one_object(tree: Tree) -> None:
    remote = by_relative(rows(tree.remote("count", "--json", "--no-subagents", PROJECTS)), PROJECTS)
    local = by_relative(rows(tree.locally("count", "--json", "--no-subagents", tree.local)), tree.local)
    assert remote == local
    assert sorted(remote) == sorted([*(rel for rel, kind in KINDS.items() if kind == "main"), "(total)"])
    # One object given by name is itself (its kind told by its name, its file the URL given).
    [one] = rows(tree.remote("count", "--json", PROJECTS + NEW_SIDE_CALL))
    assert one["file"] == PROJECTS + NEW_SIDE_CALL and one["kind"] == "compaction"


def test_a_prefix_takes_only_the_names_below_it(tree: Tree) -> None:
    """s3://bkt/projects (no slash) is the folder projects/, never projects-old/; s3://bkt/proj is no
    folder at all (a key prefix is not a folder), so it is a missing path."""
    without_slash = rows(tree.remote("count", "--json", f"s3://{BUCKET}/projects"))
    assert sorted(row["file"] for row in without_slash if not row.get("total")) == sorted(PROJECTS + rel for rel in KINDS)
    one_error(tree.remote("count", "--json", f"s3://{BUCKET}/proj"), f"s3://{BUCKET}/proj", "no such file")
    both = rows(tree.remote("count", "--json", f"s3://{BUCKET}/projects-old/", PROJECTS))
    files = [row["file"] for row in both if not row.get("total")]
    assert files[0] == f"s3://{BUCKET}/projects-old/-home-dev-gone/{SID_OLD}.jsonl"
    assert sorted(files[1:]) == sorted(PROJECTS + rel for rel in KINDS)


def test_warn_on_one_object_equals_warn_on_the_file(tree: Tree) -> None:
    remote = tree.remote("warn", "--json", PROJECTS + NEW)
    local = tree.locally("warn", "--json", tree.local / NEW)
    assert remote.returncode == local.returncode
    assert b"Traceback" not in remote.stderr
    [r] = [json.loads(line) for line in remote.stdout.splitlines()]
    [lo] = [json.loads(line) for line in local.stdout.splitlines()]
    assert r.pop("file") == PROJECTS + NEW and lo.pop("file") == str(tree.local / NEW)
    assert r == lo


def test_a_missing_key_or_prefix_is_one_error_line(tree: Tree) -> None:
    for url in (PROJECTS + "-home-dev-app/nope.jsonl", f"s3://{BUCKET}/nothing-here/"):
        one_error(tree.remote("count", "--json", url), url, "no such file")


# --- 2. compact ------------------------------------------------------------------------------------


def test_compact_out_dir_in_the_store_writes_what_a_local_run_writes(tree: Tree, tmp_path: Path) -> None:
    local_out = tmp_path / "local-out"
    local = tree.locally("compact", *COMPACT, "--json", "--out-dir", local_out, tree.local)
    expected = local_tree(local_out)
    assert expected, "the local run wrote outputs to compare with"
    assert any(expected[rel] != tree.files[rel] for rel in expected), "compact changed something"
    assert sorted(expected) == sorted(rel for rel, kind in KINDS.items() if kind != "compaction")

    out = f"s3://{BUCKET}/out/"
    remote = tree.remote("compact", *COMPACT, "--json", "--out-dir", out, PROJECTS)
    assert remote_tree(tree.s3, out) == expected
    remote_rows = by_relative(rows(remote), PROJECTS, out=out)
    assert remote_rows == by_relative(rows(local), tree.local, out=local_out)
    assert remote_rows[NEW]["output"] == f"<out>/{NEW}", "the output is named by its URL"
    # The inputs are untouched.
    assert remote_tree(tree.s3, PROJECTS) == tree.files

    # A local tree to the store, and the store to a local folder: the same bytes again.
    mixed = f"s3://{BUCKET}/from-local/"
    ok(tree.remote("compact", *COMPACT, "--out-dir", mixed, tree.local))
    assert remote_tree(tree.s3, mixed) == expected
    ok(tree.remote("compact", *COMPACT, "--out-dir", tmp_path / "to-local", PROJECTS))
    assert local_tree(tmp_path / "to-local") == expected


def versions(s3: S3Server, url: str) -> list[str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    listed = s3.client.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", [])
    return [v["VersionId"] for v in listed if v["Key"] == key]


def test_compact_in_place_in_the_store_keeps_every_backup(tree: Tree, tmp_path: Path) -> None:
    s3 = tree.s3
    s3.make_bucket("inplace")
    # A versioned bucket: every PUT is a new version, so "not rewritten" is seen, not guessed.
    s3.client.put_bucket_versioning(Bucket="inplace", VersioningConfiguration={"Status": "Enabled"})
    prefix = "s3://inplace/p/"
    for rel in (NEW, QUIET):
        s3.put(prefix + rel, tree.files[rel])
    ok(tree.locally("compact", *COMPACT, "--out-dir", tmp_path / "expected", tree.local))
    expected = (tmp_path / "expected" / NEW).read_bytes()
    assert expected != tree.files[NEW]

    first = tree.remote("compact", *COMPACT, "--json", "--in-place", "--backup", ".orig", prefix)
    ok(first)
    assert s3.get(prefix + NEW) == expected, "replaced by the bytes a local run writes"
    assert s3.get(prefix + NEW + ".orig") == tree.files[NEW], "the backup holds the original"
    assert s3.get(prefix + QUIET) == tree.files[QUIET]
    assert len(versions(s3, prefix + QUIET)) == 1, "an unchanged file is not rewritten"
    assert prefix + QUIET + ".orig" not in s3.listing(prefix), "nor backed up"

    # The original again, compacted again: the new backup takes .orig.1, .orig is never overwritten.
    s3.put(prefix + NEW, tree.files[NEW])
    s3.put(prefix + NEW + ".orig", b"an older backup\n")
    ok(tree.remote("compact", *COMPACT, "--in-place", "--backup", ".orig", prefix + NEW))
    assert s3.get(prefix + NEW) == expected
    assert s3.get(prefix + NEW + ".orig") == b"an older backup\n"
    assert s3.get(prefix + NEW + ".orig.1") == tree.files[NEW]
    assert len(versions(s3, prefix + QUIET)) == 1


STAGES = [
    ("microcompact", "--now", NOW_ISO),
    ("collapse", "--now", NOW_ISO),
    ("snip", "--keep-last", "4", "--now", NOW_ISO),
    ("summarize", "--engine", "offline", "--keep-last", "2", "--now", NOW_ISO),
    ("restore", "--source", "transcript", "--now", NOW_ISO),
]
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def canonical(data: bytes, path: str) -> bytes:
    """`data` with the transcript's path written as <transcript> and every uuid numbered in order of
    appearance: a summary names its transcript, and the uuids of the lines written are drawn from
    their content, so two runs that differ only in where the transcript is read compare equal."""
    data = data.replace(path.encode(), b"<transcript>")
    numbers: dict[bytes, bytes] = {}
    return UUID.sub(lambda m: numbers.setdefault(m.group(0), b"uuid-%d" % len(numbers)), data)


def post_tokens(data: bytes) -> tuple[bytes, list[int]]:
    """`data` with the compact boundary's postTokens taken out, and their values: the summary's
    size depends on how long the transcript's name is."""
    found = [int(n) for n in re.findall(rb'"postTokens":(\d+)', data)]
    return re.sub(rb'"postTokens":\d+', b'"postTokens":_', data), found


@pytest.mark.parametrize("stage", STAGES, ids=[s[0] for s in STAGES])
def test_each_stage_reads_and_writes_the_store_as_a_local_run(tree: Tree, stage: tuple[str, ...]) -> None:
    local = ok(tree.locally(*stage, tree.local / OLD))
    assert local.stdout
    out = f"s3://{BUCKET}/stages/{stage[0]}.jsonl"
    remote = ok(tree.remote(*stage, PROJECTS + OLD, "-o", out))
    assert remote.stdout == b""
    written = tree.s3.get(out)
    if stage[0] != "summarize":
        assert written == local.stdout
        return
    # The summary tells where the full transcript is: the URL, as given (it was once made into a
    # local path, "<cwd>/s3:/bkt/…", that names nothing).
    assert f"read the full transcript at: {PROJECTS + OLD}".encode() in written
    assert str(tree.local / OLD).encode() in local.stdout
    assert written != tree.files[OLD]
    remote_bytes, remote_tokens = post_tokens(canonical(written, PROJECTS + OLD))
    local_bytes, local_tokens = post_tokens(canonical(local.stdout, str(tree.local / OLD)))
    assert remote_bytes == local_bytes
    assert len(remote_tokens) == len(local_tokens) == 1 and abs(remote_tokens[0] - local_tokens[0]) <= 40, (remote_tokens, local_tokens)


# --- 3. report and validate ------------------------------------------------------------------------


def test_report_pages_in_the_store_mirror_the_tree(tree: Tree) -> None:
    pages = f"s3://{BUCKET}/pages/"
    ok(tree.remote("report", "--now", NOW_ISO, "--out-dir", pages, PROJECTS))
    written = tree.s3.listing(pages, relative=True)
    # Every session file gets its page (the compaction side-call too, labelled as one), NAME.html.
    assert sorted(written) == sorted([*(os.path.splitext(rel)[0] + ".html" for rel in KINDS), "index.html"]), written
    index = tree.s3.get(pages + "index.html").decode()
    links = {link.removeprefix("./") for link in re.findall(r'href="([^"#]+)"', index)}
    assert links, "the index links to the pages"
    for link in links:
        assert "://" not in link and not link.startswith("/"), f"a relative link: {link}"
    assert {link for link in links if link.endswith(".html")} == {rel for rel in written if rel != "index.html"}
    for rel in written:
        assert tree.s3.get(pages + rel).lstrip().lower().startswith(b"<!doctype html")


def test_report_and_validate_json_equal_the_local_runs(tree: Tree) -> None:
    for command in (("report", "--now", NOW_ISO, "--json"), ("validate", "--json")):
        remote = by_relative(rows(tree.remote(*command, PROJECTS)), PROJECTS)
        local = by_relative(rows(tree.locally(*command, tree.local)), tree.local)
        if command[0] == "report":
            for rel in remote:
                summary_near(remote[rel], local[rel])
                advice_near(remote[rel], local[rel], {PROJECTS: "<root>/", str(tree.local).rstrip("/") + "/": "<root>/"})
        assert remote == local, (command[0], differences(remote, local))
        assert set(KINDS) <= set(remote), command[0]


def summary_near(remote: dict[str, Any], local: dict[str, Any]) -> None:
    """The summarize dry run's figures of two report rows: within a few tokens (the summary names
    the transcript, by a path or a URL of another length), then set equal to compare the rest."""
    pairs = [(r, lo) for r, lo in zip(remote.get("dry_runs") or [], local.get("dry_runs") or []) if r.get("stage") == lo.get("stage") == "summarize"]
    for r, lo in pairs:
        for key in ("tokens_after", "tokens_freed"):
            if isinstance(r.get(key), int):
                assert abs(r[key] - lo[key]) <= 40, (key, r[key], lo[key])
                r[key] = lo[key]
        cache_r, cache_lo = r.get("cache") or {}, lo.get("cache") or {}
        for key in cache_r:
            if isinstance(cache_r[key], (int, float)) and not isinstance(cache_r[key], bool) and cache_r[key] != cache_lo.get(key):
                assert abs(cache_r[key] - cache_lo[key]) <= max(40, abs(cache_lo[key]) * 0.01), (key, cache_r[key], cache_lo[key])
                cache_r[key] = cache_lo[key]
            elif isinstance(cache_r[key], str) and cache_r[key] != cache_lo.get(key):  # a sentence quoting those figures
                assert re.sub(r"[\d.]+", "#", cache_r[key]) == re.sub(r"[\d.]+", "#", str(cache_lo.get(key))), (key, cache_r[key], cache_lo.get(key))
                cache_r[key] = cache_lo[key]


def advice_near(remote: dict[str, Any], local: dict[str, Any], bases: dict[str, str]) -> None:
    """The advice of two report rows: its command names the file as given (a URL, a path) and its
    sentence may quote the summary's figures (a few tokens apart): alike once the paths are written
    the same and the figures masked, then set equal to compare the rest."""

    def masked(text: str) -> str:
        for base, token in bases.items():
            text = text.replace(base, token)
        return re.sub(r"[\d.,]+", "#", text)

    pairs = [(remote, local, "recommendation")]
    if isinstance(remote.get("advice"), dict) and isinstance(local.get("advice"), dict):
        pairs += [(remote["advice"], local["advice"], key) for key in ("command", "why")]
    for r, lo, key in pairs:
        if isinstance(r.get(key), str) and isinstance(lo.get(key), str):
            assert masked(r[key]) == masked(lo[key]), (key, r[key], lo[key])
            r[key] = lo[key]


# --- 4. count reads little -------------------------------------------------------------------------


def test_count_fetches_a_small_fraction_of_the_objects(tree: Tree) -> None:
    """Three sessions of ~3 MB: count reads each one's end (and its first lines), not the whole;
    count --full reads every byte (which shows the proxy counts what is read)."""
    s3 = tree.s3
    big = f"s3://{BUCKET}/big/"
    for n in range(3):
        s3.put(f"{big}-home-dev-app/{n:08d}-0000-4000-8000-000000000000.jsonl", bulky("/home/dev/app", 100 + n, 3_000_000))
    total = sum(s3.listing(big).values())

    def fetched(*flags: str) -> tuple[int, list[dict[str, Any]]]:
        s3.reset()
        found = rows(tree.remote("count", "--json", *flags, big))
        return s3.bytes_fetched, found

    tail, tail_rows = fetched()
    full, full_rows = fetched("--full")
    share = tail / total
    print(f"count fetched {tail:,} of {total:,} bytes ({share:.1%}); count --full fetched {full:,} ({full / total:.1%})")
    assert share < 0.25, share
    assert full > 0.95 * total, "the counter sees every byte a full read fetches"
    assert [row["tokens"] for row in tail_rows] == [row["tokens"] for row in full_rows]
    assert len(tail_rows) == 4  # three files and the total


# --- 5. errors -------------------------------------------------------------------------------------


def test_missing_bucket_and_failed_writes_are_one_line_and_leave_the_old_object(tree: Tree) -> None:
    one_error(tree.remote("count", "--json", "s3://no-such-bucket/x.jsonl"), "s3://no-such-bucket/x.jsonl")
    # An output that cannot be stored: one line naming it, exit 1.
    target = "s3://no-such-bucket/out.jsonl"
    one_error(tree.remote("microcompact", "--now", NOW_ISO, PROJECTS + NEW, "-o", target), target)
    # A run that fails after it began writing its output leaves the object that was there.
    old = f"s3://{BUCKET}/kept/out.jsonl"
    tree.s3.put(old, b"the old object\n")
    broken = f"s3://{BUCKET}/kept/broken.jsonl"
    tree.s3.put(broken, tree.files[NEW] + b'{"type": "user", "message": \n')
    result = tree.remote("microcompact", "--now", NOW_ISO, broken, "-o", old)
    error_line(result, broken)
    assert tree.s3.get(old) == b"the old object\n"


class RefusingProxy:
    """A TCP proxy to the S3 server that relays every request but uploads: a connection on which a
    PUT begins is cut at once (the upload fails on the wire, as when the network drops)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://").rsplit(":", 1)
        self.listener = socket.create_server((HOST, 0))
        self.endpoint = f"http://{HOST}:{self.listener.getsockname()[1]}"
        self.refused = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection((self.upstream[0], int(self.upstream[1])))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if requests and data.startswith(b"PUT "):  # botocore sends a request's head in one piece
                    self.refused += 1
                    break
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


def test_a_failed_upload_leaves_the_old_object(tree: Tree) -> None:
    """Every upload is cut on the wire: the output, and an in-place file and its backup, stay as they were."""
    s3 = tree.s3
    old = f"s3://{BUCKET}/refused/out.jsonl"
    source = f"s3://{BUCKET}/refused/{SID_NEW}.jsonl"
    s3.put(old, b"the old object\n")
    s3.put(source, tree.files[NEW])
    proxy = RefusingProxy(s3.direct)
    try:
        cut = {"AWS_ENDPOINT_URL": proxy.endpoint, "AWS_ENDPOINT_URL_S3": proxy.endpoint, "AWS_MAX_ATTEMPTS": "1"}
        one_error(tree.remote("microcompact", "--now", NOW_ISO, source, "-o", old, env=cut), old, "cannot write")
        in_place = tree.remote("compact", *COMPACT, "--in-place", "--backup", ".orig", source, env=cut)
    finally:
        proxy.close()
    assert proxy.refused >= 2, "the uploads were tried, and cut"
    # A batch: the file's error line (the backup is written first, and it is what failed), then the tally.
    assert in_place.returncode == 1 and b"Traceback" not in in_place.stderr
    assert in_place.stderr.decode().splitlines() == [
        in_place.stderr.decode().splitlines()[0],
        "ctxpipe: compact: 1 of 1 files failed",
    ]
    assert in_place.stderr.decode().startswith(f"ctxpipe: error: {source}.orig: cannot write the backup (")
    assert s3.get(old) == b"the old object\n"
    assert s3.get(source) == tree.files[NEW]
    assert not [url for url in s3.listing(f"s3://{BUCKET}/refused/") if url.endswith(".orig")]


@pytest.mark.parametrize("command", [("count", "--json", PROJECTS), ("count", "--json", PROJECTS + "gone.jsonl"), ("report", "--json", PROJECTS + NEW)])
def test_a_forked_run_is_python_dash_m(tree: Tree, command: tuple[str, ...]) -> None:
    """A run forked from the zygote gives what `python -m ctxpipe` gives, byte for byte (a module
    reading the environment as it is imported would read the zygote's: none of them may)."""
    forked = tree.remote(*command)
    real = subprocess.run([sys.executable, "-m", "ctxpipe", *command], capture_output=True, stdin=subprocess.DEVNULL, env=remote_env(tree.s3), timeout=120)
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr), forked.stderr.decode()
    assert forked.stdout or forked.stderr, "the run printed nothing: it compared nothing"


def test_bad_credentials_are_one_line() -> None:
    with s3_server(reject_credentials=True) as s3:
        url = "s3://bkt/projects/x.jsonl"
        done = subprocess.run([sys.executable, "-m", "ctxpipe", "count", "--json", url], capture_output=True, env=remote_env(s3), timeout=120)
    one_error(done, url)


def test_a_server_that_is_down_is_one_line_and_quick(tree: Tree) -> None:
    closed = f"http://{HOST}:{free_port()}"
    url = PROJECTS + NEW
    started = time.monotonic()
    result = tree.remote("count", "--json", url, env={"AWS_ENDPOINT_URL": closed, "AWS_ENDPOINT_URL_S3": closed, "AWS_MAX_ATTEMPTS": "1"})
    one_error(result, url)
    assert time.monotonic() - started < 30


def test_gs_without_gcsfs_names_the_extra(tree: Tree) -> None:
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed here: the missing-extra message cannot be seen")
    url = "gs://bucket/projects/x.jsonl"
    one_error(tree.remote("count", "--json", url), url, "ctxpipe[gcs]")


def test_audit_of_a_prefix_equals_audit_of_the_local_copy(tree: Tree) -> None:
    """audit reads a store's objects as count does: the same rows as on the local copy, the URL as the file."""
    remote = rows(tree.remote("audit", "--json", PROJECTS))
    local = rows(tree.locally("audit", "--json", tree.local))

    def keyed(found: list[dict[str, Any]], root: str) -> dict[tuple[str, int | None], dict[str, Any]]:
        return {(row["file"].removeprefix(root).lstrip("/"), row.get("line")): {**row, "file": None} for row in found}

    assert keyed(remote, PROJECTS) == keyed(local, str(tree.local))
    assert sorted(rel for rel, line in keyed(remote, PROJECTS) if line is None) == sorted(KINDS), "a total per session"
    assert any(line is not None and rel == OLD for rel, line in keyed(remote, PROJECTS)), "the old layout's compact boundary is audited"
