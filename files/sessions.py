"""Finding session files in the folders Claude Code writes them to.

    ~/.claude/projects/<encoded-cwd>/<session-id>.jsonl                     main session
    ~/.claude/projects/<encoded-cwd>/agent-<id>.jsonl                        subagent, 2.0.x
    ~/.claude/projects/<encoded-cwd>/<session-id>/subagents/agent-<id>.jsonl subagent, 2.1.x
    ~/.claude/projects/<encoded-cwd>/<session-id>/subagents/agent-acompact-<hex>.jsonl
                                                              compaction side-call, 2.1.x

1.0.x subagents live inside the main file (isSidechain lines), so every layout is covered by
taking every *.jsonl below a folder and telling subagent files by their `agent-` name.

The compaction side-call is the request Claude Code made to write a summary (a prompt and the
summary, `agentId: "acompact-…"` on every line). It is not a session: nothing resumes it, so it is
labelled, never alarmed on, never compacted.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from ..core.errors import InputError
from ..core.jsonl import BOM, ParsedLines
from . import storage

if TYPE_CHECKING:  # pathlib loads where a folder is searched: the status line reads one file
    from pathlib import Path

Kind = Literal["main", "subagent", "compaction"]
COMPACTION_AGENT = "acompact-"  # the agentId prefix of Claude Code's compaction side-call
COMPACTION_NOTE = "a compaction side-call (the request Claude Code made to write a summary), not a session"
# Claude Code writes agentId on every line of a side file; a few leading lines without one (blank,
# damaged) do not hide it, and a main session (which has none) is not read further than this.
FIRST_LINES = 16


@dataclass(frozen=True)
class SessionFile:
    path: Path | str  # a str: an object in a store (a URL)
    kind: Kind
    shown: str  # the path as the user should see it
    listed_size: int | None = None  # as the store's listing gave it

    @property
    def size(self) -> int:
        if self.listed_size is not None or isinstance(self.path, str):
            return self.listed_size or 0
        try:
            return self.path.stat().st_size
        except OSError:
            return 0


def kind_of(path: str | os.PathLike[str]) -> Kind:
    """What the file's name says (the name alone: nothing is read)."""
    name = os.path.basename(path)
    if name.startswith("agent-" + COMPACTION_AGENT):
        return "compaction"
    return "subagent" if name.startswith("agent-") else "main"


def kind_read(buffer: Any, named: Kind | None, parsed: ParsedLines | None = None) -> Kind | None:
    """The kind once the file's bytes are at hand: a name that says nothing (a main-session name, a
    renamed file, stdin as None) gives way to the lines' own `agentId` when it is a compaction's.
    `parsed`: objects of lines a reader parsed already, by where each starts (not searched again)."""
    if named in ("subagent", "compaction"):
        return named
    return kind_given(named, _first_agent_id(buffer, parsed))


def kind_given(named: Kind | None, first_agent_id: str) -> Kind | None:
    """kind_read from the top-level agentId of the first of the FIRST_LINES lines that has one
    ("" when none does), for a reader that meets the lines one by one."""
    if named in ("subagent", "compaction"):
        return named
    return "compaction" if first_agent_id.startswith(COMPACTION_AGENT) else named


def is_compaction(buffer: Any, path: str | None) -> bool:
    """Whether the input (`path` None or "-": stdin) is a compaction side-call, by its name or its lines."""
    return kind_read(buffer, None if path in (None, "-") else kind_of(str(path))) == "compaction"


def _first_agent_id(buffer: Any, parsed: ParsedLines | None = None) -> str:
    """The top-level agentId of the first of the first lines that has one ("" when none does)."""
    start = 0
    bom = buffer[:3] == BOM  # a reader parses the first line past it; the parse below fails on it
    for _ in range(FIRST_LINES):
        end = buffer.find(b"\n", start)
        stop = len(buffer) if end < 0 else end
        known = parsed.get(start) if parsed and (start or not bom) else None
        if known is not None and not isinstance(known.get("agentId"), str):
            pass  # parsed already, without one: the parse below would find none either (or fail), so no search
        elif buffer.find(b'"agentId"', start, stop) >= 0:  # progress lines nest one under data: only the top level counts
            try:
                entry = orjson.loads(bytes(buffer[start:stop]))
            except orjson.JSONDecodeError:
                entry = None
            if isinstance(entry, dict) and isinstance(entry.get("agentId"), str):
                return str(entry["agentId"])
        if end < 0:
            break
        start = end + 1
    return ""


def find_sessions(
    paths: Iterable[str],
    subagents: bool = True,
    on_skip: Callable[[str, str], None] | None = None,
    on_missing: Callable[[InputError], None] | None = None,
    keep_missing: bool = False,
) -> list[SessionFile]:
    """Files as given, and every session file below each folder, in a stable order, each once.

    Below a folder only regular files are taken (a symbolic link to one counts): a FIFO named
    *.jsonl would block the reader forever. Symbolic links to folders are not followed, so the walk
    stays in the tree given. A file given by name is taken whatever it is (a FIFO is read as a
    stream). `on_skip(path, why)` hears about each thing left out. A path that names nothing
    raises InputError, or with `on_missing` is handed to it and the others are still searched; with
    `keep_missing` it stays in the list in its place, as a file of the kind its name says, so a batch
    fails on it there as on any file it cannot read (a failed row, the other files still done).
    """

    skip = on_skip or (lambda shown, why: None)
    found: list[SessionFile] = []
    seen: dict[str, str] = {}  # real path -> the path it was first found as

    def take(file: Path, shown: str, real: str | None = None) -> None:
        real = real or os.path.realpath(file)
        if real in seen:
            if seen[real] != shown:
                skip(shown, f"the same file as {seen[real]}")
            return
        seen[real] = shown
        found.append(SessionFile(file, kind_of(file), shown))

    for given in paths:
        try:
            in_store = _find_one(given, subagents, take, skip, {file.path for file in found})
            for file in in_store:  # one object however its URL is spelt (s3://, s3a://, S3://)
                same = storage.identity(str(file.path))
                if same in seen:
                    if seen[same] != file.shown:
                        skip(file.shown, f"the same object as {seen[same]}")
                    continue
                seen[same] = file.shown
                found.append(file)
        except InputError as exc:
            if keep_missing:
                found.append(SessionFile(given if storage.is_remote(given) else _local(given), kind_of(given), given))
                continue
            if on_missing is None:
                raise
            on_missing(exc)
    return found


Take = Callable[["Path", str, "str | None"], None]


def _find_one(given: str, subagents: bool, take: Take, skip: Callable[[str, str], None], taken: set[Path | str]) -> list[SessionFile]:
    """The store's objects for `given` (returned); a local file or folder's files go to `take` (which
    knows each file's real path, so a file reached twice is taken once)."""
    if storage.is_remote(given):
        return _find_in_store(given, subagents, taken)
    path = _local(given)
    if path.is_dir():
        _walk(str(path), os.path.realpath(path), subagents, take, skip)
    elif path.exists():
        take(path, given, None)
    else:
        raise InputError(given, None, "no such file or folder")
    return []


def _local(given: str) -> Path:
    """A local path as given (`~`, `file://`) as the file system names it."""
    from pathlib import Path

    return Path(storage.local_path(given)).expanduser()


def _walk(folder: str, real: str, subagents: bool, take: Take, skip: Callable[[str, str], None]) -> None:
    """The session files below `folder` (whose real path is `real`) to `take`, in os.walk's order
    (a folder's files by name, then its folders by name, each whole), never into a symbolic link.

    What the folder listing tells is not asked again: a name that is no link has its real path
    beside its folder's, and a regular file that is no link is one without a stat.
    """
    from pathlib import Path

    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        skip(str(exc.filename), exc.strerror or str(exc))
        return
    folders = []
    for entry in entries:
        try:
            is_folder = entry.is_dir()
        except OSError:
            is_folder = False
        if is_folder:
            if entry.is_symlink():
                skip(entry.path, "a symbolic link to a folder (not followed)")
            else:
                folders.append(entry)
        elif entry.name.endswith(".jsonl"):
            file = Path(entry.path)
            if entry.is_file(follow_symlinks=False):
                why = None
                real_file: str | None = os.path.join(real, entry.name)
            else:
                why, real_file = _not_regular(file), None
            if why:
                skip(entry.path, why)
            elif subagents or kind_of(entry.name) == "main":
                take(file, entry.path, real_file)
    for entry in folders:
        _walk(entry.path, os.path.join(real, entry.name), subagents, take, skip)


def _find_in_store(given: str, subagents: bool, taken: set[Path | str]) -> list[SessionFile]:
    """The object `given`, or every session object below the prefix `given` (the same rule as a
    folder: every *.jsonl, subagents told by their name), in name order, none twice."""
    one = storage.info(given)
    if one is not None:
        return [] if given in taken else [SessionFile(given, kind_of(given), given, one.size)]
    objects = storage.walk(given) if storage.is_folder(given) else []
    if not objects:
        raise InputError(given, None, storage.missing(given))
    return [
        SessionFile(item.url, kind_of(item.url), item.url, item.size)
        for item in objects
        if item.url.endswith(".jsonl") and item.url not in taken and (subagents or kind_of(item.url) == "main")
    ]


_KINDS = [
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
]


def _not_regular(file: Path) -> str | None:
    """Why `file` is not a session file to read (None when it is a regular file, or a link to one)."""
    try:
        mode = file.stat().st_mode
    except OSError as exc:
        return "a broken symbolic link" if file.is_symlink() else exc.strerror or str(exc)
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    return f"{kind}, not a regular file"


def session_place(path: str, kind: Kind, recorded_session: str | None = None) -> tuple[str, str]:
    """(the session a file belongs to, the folder holding that session's main file), from where Claude
    Code writes it: `<session>/subagents/agent-*.jsonl` belong to `<session>`; a 2.0.x `agent-*.jsonl`
    beside the main files belongs to the session its lines record (`recorded_session`); any other file
    is a session of its own, named by its file name without .jsonl."""
    parent, name = posixpath.split(path)
    if posixpath.basename(parent) == "subagents" and kind != "main":
        session_folder = posixpath.dirname(parent)
        return posixpath.basename(session_folder), posixpath.dirname(session_folder)
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    if kind != "main" and recorded_session:
        return recorded_session, parent
    return stem, parent


def decoded_project(folder: str) -> str:
    """The project a projects folder stands for: Claude Code names it after the session's cwd with
    every character but a letter or digit turned into '-', which cannot be undone in general. Each
    '-' is read as '/' or kept as '-' as the folders on this machine say (the longest existing folder
    first); past the last one that exists, the rest is kept as it is. A name not starting with '-' (not
    an encoded path) or a folder in a store is its own name."""
    name = posixpath.basename(folder.rstrip("/"))
    if not name.startswith("-") or storage.is_remote(folder):
        return name
    parts = name[1:].split("-")
    found, index = "", 0
    while index < len(parts):
        for stop in range(len(parts), index, -1):
            candidate = f"{found}/{'-'.join(parts[index:stop])}"
            if os.path.isdir(candidate):
                found, index = candidate, stop
                break
        else:
            return f"{found}/{'-'.join(parts[index:])}"
    return found or "/"


def first_recorded(buffer: Any, key: str) -> str | None:
    """The first non-empty top-level string `key` among the file's lines (bytes or an mmap): found by a
    byte search for the quoted key, only the lines that hold it parsed."""
    marker = f'"{key}"'.encode()
    start = 0
    while (hit := buffer.find(marker, start)) >= 0:
        line = buffer.rfind(b"\n", 0, hit) + 1
        stop = buffer.find(b"\n", hit)
        stop = len(buffer) if stop < 0 else stop
        try:
            entry = orjson.loads(bytes(buffer[line:stop]))
        except orjson.JSONDecodeError:
            entry = None
        value = entry.get(key) if isinstance(entry, dict) else None
        if isinstance(value, str) and value:
            return value
        start = stop + 1
    return None
