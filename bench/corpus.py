"""Build (or reuse) the benchmark corpus from the real transcripts in ../shared/corpus.

    python bench/corpus.py            # build everything, print what is there

Shapes, all under the data dir (default bench/.data/, env CTXPIPE_BENCH_DATA):

- big.jsonl   one Claude Code file >= 200 MiB: the Claude Code corpus files concatenated,
              repeated an even number of times;
- half.jsonl  the first half of big.jsonl (half the copies), for the memory-growth check;
- huge.jsonl  big.jsonl repeated 5 times (about 1 GiB), for the stages' memory targets;
              built only when a bench asks for it;
- tree/       a ~/.claude/projects layout: <encoded-cwd>/<session-id>.jsonl, >= 500 sessions
              and >= 200 MiB, each a byte copy of one corpus main session (plus its
              <session-id>/subagents/agent-<id>.jsonl files), named with fresh uuid5s.
- short/      the same layout with 800 short main sessions: each the first 20 to 60 lines of a
              corpus main session (a session that ended there), byte for byte.

Everything is a byte copy: nothing inside a line is rewritten, so identity conversion must
reproduce the inputs exactly. Outputs are deterministic, so a cached file or tree is reused
when every expected file has the expected size.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

MiB = 1024 * 1024
BIG_MIN_BYTES = 200 * MiB
TREE_MIN_BYTES = 200 * MiB
TREE_MIN_SESSIONS = 500
SHORT_SESSIONS = 800
SHORT_LINES = range(20, 61)  # lines per short session, in turn

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
# Fixed namespace so session ids are the same on every machine and every rebuild.
TREE_NAMESPACE = uuid.UUID("6f1c1d0e-8a43-4c55-9a2e-5b1f3c0de001")
# Corpus file names flatten the repository path with "__"; subagent files keep their
# original `<session-id>/subagents/agent-<id>.jsonl` path inside that name.
SUBAGENT_RE = re.compile(r"__(?P<session>[0-9a-f-]{36})__subagents__(?P<agent>agent-.+\.jsonl)$")


@dataclass(frozen=True)
class Session:
    """One Claude Code main session in the source corpus, with its subagent files."""

    path: Path
    encoded_cwd: str
    subagents: tuple[tuple[str, Path], ...]  # (agent file name, source path)

    @property
    def size(self) -> int:
        return self.path.stat().st_size + sum(p.stat().st_size for _, p in self.subagents)


@dataclass(frozen=True)
class Corpus:
    claude_files: tuple[Path, ...]  # every Claude Code file, mains and subagents, sorted
    sessions: tuple[Session, ...]  # main sessions, sorted by path


def data_dir() -> Path:
    return Path(os.environ.get("CTXPIPE_BENCH_DATA") or BENCH_DIR / ".data")


def corpus_dir() -> Path:
    return Path(os.environ.get("CTXPIPE_CORPUS") or REPO_ROOT.parent / "shared" / "corpus")


def _first_record(path: Path) -> dict[str, object]:
    with path.open("rb") as f:
        value = orjson.loads(f.readline())
    return value if isinstance(value, dict) else {}


def _is_codex_rollout(path: Path) -> bool:
    # Codex rollouts wrap every line as {"timestamp", "type", "payload"}; Claude Code lines
    # never carry "payload" at the top level.
    return "payload" in _first_record(path)


def _encoded_cwd(path: Path) -> str:
    """Claude Code's project folder name: the session's cwd with every non-alphanumeric
    character replaced by "-" (/Users/a/b.c -> -Users-a-b-c)."""
    with path.open("rb") as f:
        for line in f:
            record = orjson.loads(line)
            cwd = record.get("cwd") if isinstance(record, dict) else None
            if isinstance(cwd, str) and cwd:
                return re.sub(r"[^A-Za-z0-9]", "-", cwd)
    return "-bench-unknown-project"


def load_corpus() -> Corpus:
    root = corpus_dir()
    files = sorted(root.rglob("*.jsonl")) if root.is_dir() else []
    claude = [p for p in files if not _is_codex_rollout(p)]
    if not claude:
        sys.exit(
            f"bench: no Claude Code transcripts found under {root}\n"
            "bench: expected the shared corpus at ../shared/corpus next to the repository; "
            "set CTXPIPE_CORPUS to its location"
        )
    subagents: dict[str, list[tuple[str, Path]]] = {}
    mains: list[Path] = []
    for p in claude:
        m = SUBAGENT_RE.search(p.name)
        if m:
            subagents.setdefault(m["session"], []).append((m["agent"], p))
        else:
            mains.append(p)
    sessions = tuple(Session(p, _encoded_cwd(p), tuple(subagents.get(p.stem.rsplit("__", 1)[-1], ()))) for p in mains)
    return Corpus(tuple(claude), sessions)


# ---------------------------------------------------------------------------------------
# big.jsonl / half.jsonl


def _copies(corpus: Corpus) -> int:
    unit = sum(p.stat().st_size for p in corpus.claude_files)
    n = -(-BIG_MIN_BYTES // unit)  # ceiling division
    return n + (n % 2)  # even, so half.jsonl is exactly half of big.jsonl


@contextlib.contextmanager
def written(dest: Path) -> Iterator[BinaryIO]:
    """A file to write `dest` through: it becomes `dest` only once whole, so a half-written file
    never looks cached."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    with tmp.open("wb") as out:
        yield out
    os.replace(tmp, dest)


def _concat_order(files: tuple[Path, ...]) -> tuple[Path, ...]:
    """The corpus's files in the order big.jsonl holds them: the subagents' files first, then the
    main sessions (each group in path order). A concatenation is no session: read from its end it is
    the thread of its last main session, as it was before a side chain that names its agent (what
    only an agent's own file holds) was read as a file's thread, not a compaction side-call's."""
    return tuple(sorted(files, key=lambda p: SUBAGENT_RE.search(p.name) is None))


def _unit(corpus: Corpus) -> bytes:
    """One copy of the corpus as big.jsonl repeats it (~8 MB: fine to hold in memory)."""
    return b"".join(p.read_bytes() for p in _concat_order(corpus.claude_files))


TAIL_CHECKED = 1 << 16  # bytes: a built file's end, compared with what it should be (the order of its parts)


def _holds(dest: Path, size: int, tail: bytes) -> bool:
    """Whether `dest` is `size` bytes long and ends with `tail`."""
    if not (dest.is_file() and dest.stat().st_size == size):
        return False
    with dest.open("rb") as f:
        f.seek(size - len(tail))
        return f.read() == tail


def _write_concat(dest: Path, unit: bytes, copies: int) -> None:
    with written(dest) as out:
        for _ in range(copies):
            out.write(unit)


def ensure_big(corpus: Corpus | None = None) -> tuple[Path, Path]:
    """Return (big.jsonl, half.jsonl), building them if missing or the wrong size."""
    corpus = corpus or load_corpus()
    unit = _unit(corpus)
    copies = _copies(corpus)
    out = data_dir()
    out.mkdir(parents=True, exist_ok=True)
    big, half = out / "big.jsonl", out / "half.jsonl"
    for dest, n in ((big, copies), (half, copies // 2)):
        if not _holds(dest, len(unit) * n, unit[-TAIL_CHECKED:]):
            print(f"bench: writing {dest} ({n} copies, {len(unit) * n / MiB:.0f} MiB)", file=sys.stderr)
            _write_concat(dest, unit, n)
    return big, half


HUGE_COPIES = 5  # of big.jsonl: about 1 GiB


def ensure_huge(corpus: Corpus | None = None) -> Path:
    """Return huge.jsonl (big.jsonl repeated HUGE_COPIES times), building it if missing or the wrong size."""
    big, _ = ensure_big(corpus)
    dest = big.with_name("huge.jsonl")
    size = big.stat().st_size * HUGE_COPIES
    with big.open("rb") as f:
        f.seek(-TAIL_CHECKED, os.SEEK_END)
        tail = f.read()
    if not _holds(dest, size, tail):
        print(f"bench: writing {dest} ({HUGE_COPIES} copies of {big.name}, {size / MiB:.0f} MiB)", file=sys.stderr)
        with written(dest) as out:
            for _ in range(HUGE_COPIES):
                with big.open("rb") as piece:
                    shutil.copyfileobj(piece, out, 16 * MiB)
    return dest


# ---------------------------------------------------------------------------------------
# long-lines.jsonl

LONG_TEXT_BYTES = 16 * MiB  # a tool result as long as the longest Claude Code writes (its requests stay under 32 MB)
MANY_BLOCKS = 100_000  # text blocks in one message


def ensure_long_lines(corpus: Corpus | None = None) -> Path:
    """Return long-lines.jsonl: the corpus's largest main session with its last user line holding a
    16 MiB text and the user line before it 100,000 text blocks (uuids and chain kept): the lines a
    reader of every line comes back to, as long as a real one gets."""
    corpus = corpus or load_corpus()
    source = max((session.path for session in corpus.sessions), key=lambda path: path.stat().st_size)
    dest = data_dir() / "long-lines.jsonl"
    if dest.is_file() and dest.stat().st_mtime >= source.stat().st_mtime and dest.stat().st_size > LONG_TEXT_BYTES:
        return dest
    lines = source.read_bytes().splitlines()
    users = [n for n, line in enumerate(lines) if orjson.loads(line).get("type") == "user"]
    for position, content in ((users[-1], "x" * LONG_TEXT_BYTES), (users[-2], [{"type": "text", "text": "y"}] * MANY_BLOCKS)):
        obj = orjson.loads(lines[position])
        obj["message"] = {**obj.get("message", {}), "content": content}
        lines[position] = orjson.dumps(obj)
    print(f"bench: writing {dest} (from {source.name})", file=sys.stderr)
    with written(dest) as out:
        out.write(b"\n".join(lines) + b"\n")
    return dest


# ---------------------------------------------------------------------------------------
# tree/


def _tree_plan(corpus: Corpus) -> Iterator[tuple[Path, Path]]:
    """Yield (relative destination, source) pairs: main sessions round-robin, until there
    are enough sessions and bytes."""
    sessions, total, i = corpus.sessions, 0, 0
    while i < TREE_MIN_SESSIONS or total < TREE_MIN_BYTES:
        s = sessions[i % len(sessions)]
        sid = str(uuid.uuid5(TREE_NAMESPACE, f"session-{i}"))
        yield Path(s.encoded_cwd) / f"{sid}.jsonl", s.path
        for agent_name, src in s.subagents:
            yield Path(s.encoded_cwd) / sid / "subagents" / agent_name, src
        total += s.size
        i += 1


def _tree_is_complete(tree: Path, plan: list[tuple[Path, Path]]) -> bool:
    for rel, src in plan:
        dest = tree / rel
        if not dest.is_file() or dest.stat().st_size != src.stat().st_size:
            return False
    return True


def ensure_tree(corpus: Corpus | None = None) -> Path:
    """Return the tree/ folder (a ~/.claude/projects lookalike), building it if needed."""
    corpus = corpus or load_corpus()
    plan = list(_tree_plan(corpus))
    tree = data_dir() / "tree"
    if _tree_is_complete(tree, plan):
        return tree
    print(f"bench: writing {tree} ({len(plan)} files)", file=sys.stderr)
    tmp = tree.with_name("tree.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, src in plan:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, tmp / rel)
    shutil.rmtree(tree, ignore_errors=True)
    tmp.rename(tree)
    return tree


# ---------------------------------------------------------------------------------------
# short/


def _short_plan(corpus: Corpus) -> Iterator[tuple[Path, Path, int]]:
    """Yield (relative destination, source, lines): main sessions round-robin, each time cut a
    line longer (SHORT_LINES in turn, fewer where the session itself is shorter)."""
    sessions = corpus.sessions
    for i in range(SHORT_SESSIONS):
        s = sessions[i % len(sessions)]
        lines = SHORT_LINES[(i // len(sessions)) % len(SHORT_LINES)]
        sid = str(uuid.uuid5(TREE_NAMESPACE, f"short-{i}"))
        yield Path(s.encoded_cwd) / f"{sid}.jsonl", s.path, lines


def _head(path: Path, lines: int) -> bytes:
    with path.open("rb") as f:
        return b"".join(line for _, line in zip(range(lines), f))


def ensure_short_tree(corpus: Corpus | None = None) -> Path:
    """Return the short/ folder (800 short sessions in a ~/.claude/projects layout), building it if needed."""
    corpus = corpus or load_corpus()
    plan = list(_short_plan(corpus))
    heads = {(src, n): _head(src, n) for _, src, n in plan}
    tree = data_dir() / "short"
    if all((tree / rel).is_file() and (tree / rel).stat().st_size == len(heads[src, n]) for rel, src, n in plan):
        return tree
    print(f"bench: writing {tree} ({len(plan)} files)", file=sys.stderr)
    tmp = tree.with_name("short.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, src, n in plan:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(heads[src, n])
    shutil.rmtree(tree, ignore_errors=True)
    tmp.rename(tree)
    return tree


def main() -> None:
    corpus = load_corpus()
    big, half = ensure_big(corpus)
    tree = ensure_tree(corpus)
    short = ensure_short_tree(corpus)
    files = [p for p in tree.rglob("*.jsonl")]
    mains = [p for p in files if p.parent.name != "subagents"]
    print(f"{'corpus':<11}{corpus_dir()}  ({len(corpus.claude_files)} Claude Code files, {len(corpus.sessions)} main sessions)")
    for p in (big, half):
        print(f"{p.name:<11}{p}  {p.stat().st_size / MiB:.1f} MiB")
    print(
        f"{'tree/':<11}{tree}  {len(mains)} sessions + {len(files) - len(mains)} subagent files, "
        f"{len({p.parent for p in mains})} projects, "
        f"{sum(p.stat().st_size for p in files) / MiB:.1f} MiB"
    )
    shorts = list(short.rglob("*.jsonl"))
    print(f"{'short/':<11}{short}  {len(shorts)} sessions, {sum(p.stat().st_size for p in shorts) / MiB:.1f} MiB")


if __name__ == "__main__":
    main()
