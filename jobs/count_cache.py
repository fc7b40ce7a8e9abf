"""Counts kept between runs of `count` over files, as git's index keeps what `git status` found.

A file whose size, modification and change times, inode and device are what they were when it was
counted, counted again with the same options by the same ctxpipe code, gives the same FileCount: it
is read back instead of worked out again. Everything else the count depends on is in the key: the
options (budget settings, prices and the environment's overrides are in them), the sources of the
modules that count (their sizes and times: an edit or an upgrade misses; an install without sources
keeps nothing), orjson's version (it parses the lines) and Python's (the
kept objects are pickled). A count with tiktoken is not kept (another package's code gives it), nor
one made on a Dask cluster (its workers run their own install). A file changed less than a tick of
its file system's clock before it was looked at (core.statusline.racy_window: 2 s where times are
kept to the second, 50 ms where they are finer) is not kept.

The counts of the files of one project folder are one file under $XDG_CACHE_HOME/ctxpipe/count,
written whole and renamed into place (a folder's counts are loaded together: a count of several
files, or of every line of one, is what keeping them saves). The folder is trusted only when this
user owns it and nobody else may enter it: it is opened once, and the files read, written (this
user's only) and renamed relative to it, never through a link or a path looked up again. A kept file
is unpickled into ctxpipe's own records only (a pickle may name any callable). A count is kept only
when the file is as it was before it was counted. A file that is not ours (unreadable, cut short, of
another key, holding anything else) is ignored and replaced. Deleting the folder loses nothing but time.
"""

from __future__ import annotations

import contextlib
import enum
import io
import json
import os
import pickle
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..core.jsonl import no_cycle_collection
from ..core.statusline import cache_folder, cache_name, settled

if TYPE_CHECKING:
    from ..files.sessions import Kind, SessionFile
    from .count import CountOptions, FileCount

FORMAT = 3  # of the kept files: another number misses
SUFFIX = ".counts"
MAX_FILE_BYTES = 64 << 20  # a kept folder's counts are some 600 bytes a file
MAX_PER_FOLDER = 20_000  # counts a folder's file keeps, the latest first
MAX_FILES = 2_000  # kept files in the folder; the oldest go first
# Where the code that counts lives: the package's own modules, the rooms a count runs through.
_PACKAGE = Path(__file__).resolve().parent.parent
_PACKAGE_NAME = __name__.partition(".")[0]
_COUNTING_ROOMS = ("core", "formats", "files", "jobs")
# Opened without following a link, and without waiting on a FIFO put where a kept file was.
NO_LINK = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


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


def code_stamp(package: Path = _PACKAGE) -> str | None:
    """The sizes, times and inodes of the sources of every module a count may run (the package's root
    and its counting rooms: about 90 files, a third of a millisecond); None without sources to stamp."""
    found: list[str] = []
    folders = [package / room for room in _COUNTING_ROOMS]
    for folder, recurse in [(package, False)] + [(folder, True) for folder in folders]:
        for path, info in _modules(folder, recurse):
            # The change time too: an edit that keeps the size and puts the old modification time back
            # (cp -p, rsync -t, a build that clamps times) still moves it, and the inode when replaced.
            found.append(f"{path}:{info.st_size}:{info.st_mtime_ns}:{info.st_ino}:{info.st_ctime_ns}")
    if not found:
        return None
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
    code = code_stamp()
    if code is None or options.tokenizer.startswith("tiktoken:"):
        return None
    # threads: how tiktoken spreads its work, never a figure.
    return json.dumps([FORMAT, orjson.__version__, list(sys.version_info[:3]), code, repr(replace(options, threads=1))])


def default_folder() -> str | None:
    return cache_folder(os.environ.get("XDG_CACHE_HOME"), os.path.expanduser("~"), "count")


class CountCache:
    """The kept counts for one options key, loaded a project folder at a time as files are looked up."""

    def __init__(self, key: str, folder: str) -> None:
        self.key, self.folder = key, folder
        self._loaded: dict[str, dict[str, Entry]] = {}  # kept file's name -> absolute path -> entry
        self._changed: set[str] = set()
        self._names: dict[str, str] = {}  # project folder -> its kept file's name
        self._folder_fd: int | None = None  # the folder, opened once it is found private
        self._opened = False
        self._given: set[int] = set()  # the kept counts handed out (by id)

    @classmethod
    def for_options(cls, options: CountOptions, folder: str | None = None) -> CountCache | None:
        key = options_key(options)
        folder = folder or default_folder()
        return None if key is None or folder is None else cls(key, folder)  # no home folder: nothing kept

    def close(self) -> None:
        if self._folder_fd is not None:
            os.close(self._folder_fd)
            self._folder_fd = None

    def _name(self, path: str) -> str:
        folder = project_folder(path)
        name = self._names.get(folder)
        if name is None:
            name = self._names[folder] = cache_name(f"{self.key}\n{folder}") + SUFFIX
        return name

    def _private_folder(self) -> int | None:
        """The folder, opened, when this user owns it and nobody else may enter it; else None."""
        if not self._opened:
            self._opened = True
            self._folder_fd = open_private(self.folder)
        return self._folder_fd

    def _entries(self, name: str) -> dict[str, Entry]:
        if name not in self._loaded:
            folder = self._private_folder()
            self._loaded[name] = {} if folder is None else _read(folder, name, self.key)
        return self._loaded[name]

    def get(self, path: str, kind: Kind, shown: str, stamp: Stamp | None) -> FileCount | None:
        """The kept count of `path` when it was kept for this state, kind and name, else None. A file
        asked for again gets a copy: two rows of one file are two counts, as counted."""
        if stamp is None:
            return None
        from .count import FileCount

        absolute = os.path.abspath(path)
        entry = self._entries(self._name(absolute)).get(absolute)
        if not (isinstance(entry, tuple) and len(entry) == 5 and entry[0] == stamp and entry[1] == kind and entry[2] == shown):
            return None
        counted = entry[3]
        if not isinstance(counted, FileCount):
            return None
        if id(counted) in self._given:
            import copy

            return copy.deepcopy(counted)
        self._given.add(id(counted))
        return counted

    def put(self, path: str, kind: Kind, shown: str, stamp: Stamp | None, counted: FileCount, looked: float) -> None:
        """Keep `counted`, the count of `path` in the state `stamp` taken at `looked` (epoch seconds),
        unless the file had changed (either time) less than a tick before (core.statusline.settled)."""
        if stamp is None or not settled(stamp, looked):
            return
        if stamp_of(path) != stamp:
            return  # changed while it was counted: the count is of bytes the stamp does not describe
        absolute = os.path.abspath(path)
        name = self._name(absolute)
        self._entries(name)[absolute] = (stamp, kind, shown, counted, looked)
        self._changed.add(name)

    def save(self) -> None:
        """Write the project folders' counts that changed (whole, then renamed; the folder made
        private first); a cache that cannot be written is no error: the next run counts again."""
        if not self._changed:
            return
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            if self._private_folder() is None:
                self._folder_fd = open_private(self.folder)  # missing when the counts were looked up, made now
            if self._folder_fd is None:
                return  # never read (see _open_private): not written either
            for name in sorted(self._changed):
                entries = self._loaded[name]
                if len(entries) > MAX_PER_FOLDER:  # the latest kept first
                    entries = dict(sorted(entries.items(), key=lambda item: item[1][4], reverse=True)[:MAX_PER_FOLDER])
                _write(self._folder_fd, name, pickle.dumps({"key": self.key, "entries": entries}, pickle.HIGHEST_PROTOCOL))
            _prune(self._folder_fd)
        except OSError:
            return
        finally:
            self._changed.clear()


def open_private(folder: str) -> int | None:
    """`folder` opened (never through a link), when this user owns it and its mode gives nobody else
    any access; else None."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | NO_LINK)
    except OSError:
        return None
    info = os.fstat(descriptor)
    owner = getattr(os, "getuid", None)
    if stat.S_ISDIR(info.st_mode) and (owner is None or info.st_uid == owner()) and not info.st_mode & 0o077:
        return descriptor
    os.close(descriptor)
    return None


def _read(folder: int, name: str, key: str) -> dict[str, Entry]:
    """The entries of the kept file `name` in the open `folder`, made for `key`; none for a missing
    file or one that is not ours."""
    data = read_kept(folder, name, MAX_FILE_BYTES)
    if data is None:
        return {}
    try:
        # A folder's counts are tens of thousands of new objects, none of them garbage: the collector
        # would walk them all again and again (a third of the load).
        with no_cycle_collection():
            found = _KeptCounts(io.BytesIO(data)).load()
    except Exception:  # unreadable, cut short, of another version: counted again
        return {}
    if not isinstance(found, dict) or found.get("key") != key or not isinstance(found.get("entries"), dict):
        return {}
    entries: dict[str, Entry] = found["entries"]
    return entries


def read_kept(folder: int, name: str, limit: int) -> bytes | None:
    """The bytes of `name` in the open `folder` (open_private's): a regular file of at most `limit`
    bytes, never opened through a link nor waited on (a FIFO put there); else None."""
    try:
        descriptor = os.open(name, os.O_RDONLY | NO_LINK, dir_fd=folder)
    except OSError:
        return None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
                return None
            return handle.read(limit + 1)
    except OSError:
        return None


class _KeptCounts(pickle.Unpickler):
    """Unpickles a kept file making nothing but ctxpipe's own records (dataclasses, enums, named
    tuples: what a FileCount holds): a pickle may name any callable, and the folder being this user's
    says who wrote it only as far as the folders above it are this user's too."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith(_PACKAGE_NAME + ".") and "." not in name:
            found = super().find_class(module, name)
            if isinstance(found, type) and (is_dataclass(found) or issubclass(found, (enum.Enum, tuple))) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not kept by count")


def _write(folder: int, name: str, data: bytes) -> None:
    """`data` as the file `name` in the open `folder`: written to a new file there (this user's only),
    then renamed over the old one, both relative to the folder (never a path looked up again: a
    folder swapped for a link meanwhile is not written through). Not synced: a count lost in a crash
    is counted again."""
    temporary = f".{name}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=folder)  # left by a run of this process id that was killed
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_LINK, 0o600, dir_fd=folder)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)  # over a FIFO or a link too: never into it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise


def _prune(folder: int) -> None:
    """Past MAX_FILES kept files (options and folders no longer counted), the oldest go; so do the
    temporary files of runs killed while they wrote, once an hour old."""
    with contextlib.suppress(OSError):
        with os.scandir(folder) as listing:
            entries = list(listing)
        now = time.time()
        for entry in entries:
            if entry.name.endswith(".tmp") and now - entry.stat(follow_symlinks=False).st_mtime > 3600:
                os.unlink(entry.name, dir_fd=folder)
        kept = [entry for entry in entries if entry.name.endswith(SUFFIX)]
        if len(kept) <= MAX_FILES:
            return
        kept.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime_ns)
        for entry in kept[: len(kept) - MAX_FILES]:
            os.unlink(entry.name, dir_fd=folder)


def lookup(cache: CountCache, found: list[SessionFile]) -> tuple[list[FileCount | None], list[Stamp | None], float]:
    """The kept count of each file (None: to count), the state of each, and when they were looked at."""
    looked = time.time()  # before the stamps: each file was as its stamp says at least this late
    stamps = [stamp_of(str(item.path)) if isinstance(item.path, Path) else None for item in found]
    return [cache.get(str(item.path), item.kind, item.shown, stamp) for item, stamp in zip(found, stamps)], stamps, looked
