"""Counts kept between runs of `count` over files, as git's index keeps what `git status` found.

A file whose size, modification and change times, inode and device are what they were when it was
counted, counted again with the same options by the same ctxpipe code, gives the same FileCount: it
is read back instead of worked out again. Everything else the count depends on is in the key: the
options (budget settings, prices and the environment's overrides are in them), the source of the
modules that count (their sizes and times: a changed or upgraded ctxpipe misses) and Python's
version (the kept objects are pickled). A count with tiktoken is not kept (another package's code
gives it). A file changed less than RACY seconds before it was looked at is not kept.

The counts of the files of one project folder are one file under $XDG_CACHE_HOME/ctxpipe/count (a count of
one session loads its project's counts only), written whole and renamed into place; a file that is
not ours (another owner, writable by others, unreadable, of another key) is ignored and replaced.
Deleting the folder loses nothing but time.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.statusline import cache_folder, cache_name

if TYPE_CHECKING:
    from ..files.sessions import Kind, SessionFile
    from .count import CountOptions, FileCount

FORMAT = 1  # of the kept files: another number misses
SUFFIX = ".counts"
MAX_FILE_BYTES = 64 << 20  # a kept folder's counts are some 700 bytes a file
MAX_PER_FOLDER = 20_000  # counts a folder's file keeps, the latest first
MAX_FILES = 2_000  # kept files in the folder; the oldest go first
# Where the code that counts lives: the package's own modules, the rooms a count runs through.
_PACKAGE = Path(__file__).resolve().parent.parent
_COUNTING_ROOMS = ("core", "formats", "files", "jobs")

# A file changed less than this long (seconds) before it was looked at is not kept: a write in the
# same tick of its file system's clock would leave its times as they were (FAT's tick is 2 s; only a
# session being written is that fresh, and it is counted again each time).
RACY = 2.0

Stamp = tuple[int, int, int, int, int]  # size, modification time (ns), inode, change time (ns), device
Entry = tuple[Stamp, str, str, "FileCount", float]  # stamp, kind, shown, the count, when it was kept


def stamp_of(path: str) -> Stamp | None:
    """The state a kept count is valid for, or None where none is kept (not a regular file, gone)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns, info.st_dev


def project_folder(path: str) -> str:
    """The folder whose files' counts are kept together: a session's, or for a subagent's file in
    Claude Code 2.1's layout (<project>/<session-id>/subagents/agent-<id>.jsonl), its project's."""
    folder = os.path.dirname(path)
    return os.path.dirname(os.path.dirname(folder)) if os.path.basename(folder) == "subagents" else folder


def code_stamp(package: Path = _PACKAGE) -> str:
    """The sizes and times of every module a count may run (the package's root and its counting
    rooms): about 90 files, a third of a millisecond."""
    found: list[str] = []
    folders = [package / room for room in _COUNTING_ROOMS]
    for folder, recurse in [(package, False)] + [(folder, True) for folder in folders]:
        for path, info in _modules(folder, recurse):
            found.append(f"{path}:{info.st_size}:{info.st_mtime_ns}")
    found.sort()
    return cache_name("\n".join(found))


def _modules(folder: Path, recurse: bool) -> Iterator[tuple[str, os.stat_result]]:
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return
    for entry in entries:
        if entry.name.endswith(".py"):
            yield entry.path, entry.stat()
        elif recurse and entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
            yield from _modules(Path(entry.path), True)


def options_key(options: CountOptions) -> str | None:
    """Everything a count depends on but the file's bytes, as one string; None for a count not kept."""
    if options.tokenizer.startswith("tiktoken:"):
        return None
    # threads: how tiktoken spreads its work, never a figure.
    return json.dumps([FORMAT, list(sys.version_info[:3]), code_stamp(), repr(replace(options, threads=1))])


def default_folder() -> str:
    return cache_folder(os.environ.get("XDG_CACHE_HOME"), os.path.expanduser("~"), "count")


class CountCache:
    """The kept counts for one options key, loaded a folder at a time as files are looked up."""

    def __init__(self, key: str, folder: str) -> None:
        self.key, self.folder = key, folder
        self._loaded: dict[str, dict[str, Entry]] = {}  # kept file -> absolute path -> entry
        self._changed: set[str] = set()
        self._files: dict[str, str] = {}  # project folder -> its kept file

    @classmethod
    def for_options(cls, options: CountOptions, folder: str | None = None) -> CountCache | None:
        key = options_key(options)
        return None if key is None else cls(key, folder or default_folder())

    def _file(self, path: str) -> str:
        folder = project_folder(path)
        kept = self._files.get(folder)
        if kept is None:
            kept = self._files[folder] = os.path.join(self.folder, cache_name(f"{self.key}\n{folder}") + SUFFIX)
        return kept

    def _entries(self, kept: str) -> dict[str, Entry]:
        if kept not in self._loaded:
            self._loaded[kept] = _read(kept, self.key)
        return self._loaded[kept]

    def get(self, path: str, kind: Kind, shown: str, stamp: Stamp | None) -> FileCount | None:
        """The kept count of `path` when it was kept for this state, kind and name, else None."""
        if stamp is None:
            return None
        absolute = os.path.abspath(path)
        entry = self._entries(self._file(absolute)).get(absolute)
        if entry is None or entry[0] != stamp or entry[1] != kind or entry[2] != shown:
            return None
        return entry[3]

    def put(self, path: str, kind: Kind, shown: str, stamp: Stamp | None, counted: FileCount, looked: float) -> None:
        """Keep `counted`, the count of `path` in the state `stamp` taken at `looked` (epoch seconds),
        unless the file had changed less than RACY before."""
        if stamp is None or looked - stamp[1] / 1e9 < RACY:
            return
        absolute = os.path.abspath(path)
        kept = self._file(absolute)
        self._entries(kept)[absolute] = (stamp, kind, shown, counted, looked)
        self._changed.add(kept)

    def save(self) -> None:
        """Write the folders' counts that changed (whole, then renamed); a cache that cannot be
        written is no error: the next run counts again."""
        if not self._changed:
            return
        import pickle

        from ..core.errors import CtxpipeError
        from ..files.atomic import atomic_file

        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            if not _private(os.stat(self.folder)):
                return  # never read (see _read): not written either
            for kept in sorted(self._changed):
                entries = self._loaded[kept]
                if len(entries) > MAX_PER_FOLDER:  # the latest kept first
                    entries = dict(sorted(entries.items(), key=lambda item: item[1][4], reverse=True)[:MAX_PER_FOLDER])
                with atomic_file(kept, durable=False) as out:
                    out.write(pickle.dumps({"key": self.key, "entries": entries}, pickle.HIGHEST_PROTOCOL))
        except (OSError, CtxpipeError):
            return
        finally:
            self._changed.clear()
        _prune(self.folder)


def _read(kept: str, key: str) -> dict[str, Entry]:
    """The entries of a kept file made for `key`; none for a missing file or one that is not ours."""
    import pickle

    try:
        if not _private(os.stat(os.path.dirname(kept))):
            return {}
        with open(kept, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not (stat.S_ISREG(info.st_mode) and _owned(info)) or info.st_size > MAX_FILE_BYTES:
                return {}
            data = handle.read(MAX_FILE_BYTES + 1)
        found = pickle.loads(data)
    except Exception:  # missing, unreadable, cut short, of another version: counted again
        return {}
    if not isinstance(found, dict) or found.get("key") != key or not isinstance(found.get("entries"), dict):
        return {}
    entries: dict[str, Entry] = found["entries"]
    return entries


def _owned(info: os.stat_result) -> bool:
    owner = getattr(os, "getuid", None)
    return owner is None or info.st_uid == owner()


def _private(info: os.stat_result) -> bool:
    """A folder of this user's that nobody else may enter: what it holds was written by this user (a
    pickle is code to whoever wrote it)."""
    return stat.S_ISDIR(info.st_mode) and _owned(info) and not info.st_mode & 0o077


def _prune(folder: str) -> None:
    """Past MAX_FILES kept files (options and folders no longer counted), the oldest go."""
    try:
        with os.scandir(folder) as listing:
            kept = [entry for entry in listing if entry.name.endswith(SUFFIX)]
        if len(kept) <= MAX_FILES:
            return
        kept.sort(key=lambda entry: entry.stat().st_mtime_ns)
        for entry in kept[: len(kept) - MAX_FILES]:
            os.unlink(entry.path)
    except OSError:
        pass


def lookup(cache: CountCache, found: list[SessionFile]) -> tuple[list[FileCount | None], list[Stamp | None], float]:
    """The kept count of each file (None: to count), the state of each, and when they were looked at."""
    looked = time.time()  # before the stamps: each file was as its stamp says at least this late
    stamps = [stamp_of(str(item.path)) if isinstance(item.path, Path) else None for item in found]
    return [cache.get(str(item.path), item.kind, item.shown, stamp) for item, stamp in zip(found, stamps)], stamps, looked
