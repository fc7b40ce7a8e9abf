"""Writing outputs so that a crash at any moment leaves either the old file or the new one.

A regular file (or a new path) is written to a temporary file in its folder, fsynced and renamed
over it. A symbolic link stays a link: the file it points to is the one replaced. What is not a
regular file — a device (/dev/null, /dev/full), a FIFO, /dev/stdout, /dev/fd/N — is written to
directly: renaming over it would replace the device node or the pipe with a file. Every failure
(disk full, file too large, read-only folder) is one CtxpipeError naming the output, and nothing
partial is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import io
import itertools
import os
import re
import signal
import stat
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO, NoReturn, cast

from ..core.errors import ChangedMeanwhile, CtxpipeError, InputError
from . import storage

BUFFER = 1 << 20
# Paths naming a descriptor this process already has: written through a copy of it, so a shell's
# `>> log` keeps appending (opening the path again would truncate the file behind it).
# Temporary files being written now: a process about to end without unwinding (files/inputs.py's
# handler for a file truncated under its map) removes them first.
TEMPORARY: set[str] = set()
_DESCRIPTOR_PATH = re.compile(r"/dev/(?:(?P<std>stdout|stderr)|fd/(?P<fd>\d+))|/proc/self/fd/(?P<proc>\d+)")


def write_error(name: str, exc: OSError, what: str = "cannot write") -> CtxpipeError:
    return CtxpipeError(f"{name}: {what} ({exc.strerror or exc})")


class _Sink(io.FileIO):
    """The descriptor under an output's buffer. A failed write becomes one CtxpipeError naming the
    output; every write after it is dropped, so closing (which flushes the buffer) cannot fail
    again, nor print 'Exception ignored' at exit."""

    def __init__(self, descriptor: int, shown: str, closefd: bool = True, pipe_errors: bool = False) -> None:
        super().__init__(descriptor, "wb", closefd=closefd)
        self.shown = shown
        self.failed = False
        self.pipe_errors = pipe_errors  # stdout: a reader that went away stays a BrokenPipeError (a quiet exit)

    def write(self, data: Any) -> int:
        if self.failed:
            return memoryview(data).nbytes
        try:
            return super().write(data)
        except BrokenPipeError:
            self.failed = True
            if self.pipe_errors:
                raise
            raise write_error(self.shown, BrokenPipeError(32, "the reader went away")) from None
        except OSError as exc:
            self.failed = True
            raise write_error(self.shown, exc) from None


def writer(descriptor: int, shown: str, closefd: bool = True, pipe_errors: bool = False) -> BinaryIO:
    """A buffered binary output on `descriptor` whose failures name `shown`."""
    return cast(BinaryIO, io.BufferedWriter(_Sink(descriptor, shown, closefd, pipe_errors), BUFFER))


def _close_quietly(out: BinaryIO) -> None:
    with contextlib.suppress(Exception):
        out.close()


def _direct_descriptor(path: str | os.PathLike[str]) -> int | None:
    """A descriptor to write `path` through when it must not be replaced; None for a file to replace."""
    named = _DESCRIPTOR_PATH.fullmatch(str(path))
    if named:
        number = 1 if named["std"] == "stdout" else 2 if named["std"] else int(named["fd"] or named["proc"])
        if number in (1, 2) and (sys.stdout if number == 1 else sys.stderr) is None:
            raise CtxpipeError(f"{path}: {'stdout' if number == 1 else 'stderr'} is closed")
        try:
            return os.dup(number)
        except OSError:
            raise CtxpipeError(f"{path}: not open in this process") from None
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # a new file (or one we cannot see: creating it will say why)
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        raise InputError(str(path), None, "is a directory, expected an output file path")
    try:
        return os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise write_error(str(path), exc, "cannot open") from None


@contextlib.contextmanager
def atomic_file(
    path: str | os.PathLike[str], if_version: tuple[object, ...] | None = None, durable: bool = True, like: str | None = None
) -> Iterator[BinaryIO]:
    """An output for `path`, there only when the block ends without error (see the module doc). An
    object in a store is stored whole at the end (storage.replaced). With `if_version` (what
    storage.version said when the file was read), the file is replaced only if it is still that
    version, else ChangedMeanwhile and the file is left as it is. `durable=False` skips the fsync, for
    a cache whose reader checks what it reads (and the folder's, for the new name): while the system
    runs the file is still old or new, never partial; after a crash it may be empty or the old one.
    `like`: the file the output is made from; a new output gets its read and write permissions (as
    `cp` gives them), so a transcript only its owner may read does not come out readable by all."""
    shown = str(path)
    if storage.is_remote(shown):
        with storage.replaced(shown, if_version) as remote:
            yield remote
        return
    path = storage.local_path(shown)
    descriptor = _direct_descriptor(path)
    if descriptor is not None:
        out = writer(descriptor, shown)
        try:
            yield out
            out.flush()
        except BaseException:
            _close_quietly(out)
            raise
        _close_quietly(out)
        return
    target = os.path.realpath(path)  # a link's own file is the one replaced
    folder = os.path.dirname(target)
    handle, temp_name, out = _temporary(folder, os.path.basename(target), shown, "cannot write here")
    try:
        yield out
        out.flush()
        if durable:
            _sync(handle, shown)
        _copy_owner_and_mode(target, temp_name, like)
        out.close()
        if if_version is not None and storage.version(shown) != if_version:  # e.g. a session still being written
            raise ChangedMeanwhile(shown)
        try:
            os.replace(temp_name, target)
        except OSError as exc:
            raise write_error(shown, exc, "cannot replace") from None
    except BaseException:
        _close_quietly(out)
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    finally:
        TEMPORARY.discard(temp_name)
    if durable:
        sync_folder(folder)


def make_folder(folder: str) -> None:
    """The folder an output goes in, made when missing (one that cannot be is one error naming it);
    in a store, its backend and bucket checked (storage.check_bucket)."""
    if not folder:
        return
    if storage.is_remote(folder):
        storage.check_bucket(folder)
        return
    try:
        os.makedirs(storage.local_path(folder), exist_ok=True)
    except OSError as exc:
        raise write_error(folder, exc, "cannot create the folder") from None


# The signals that end a run without Ctrl-C: a closed terminal, `kill` (those this platform has).
TERMINATION = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def unwind_on_termination() -> None:
    """SIGTERM and SIGHUP end the process as Ctrl-C does: by unwinding, so every `with` block removes
    its temporary file (a half-written output or backup) on the way out; exit 128 + the signal."""
    for number in TERMINATION:
        signal.signal(number, _terminated)


def _terminated(signum: int, frame: Any) -> NoReturn:
    for number in TERMINATION:  # a second signal while unwinding ends it at once
        signal.signal(number, signal.SIG_DFL)
    # Removed here too: a signal between a temporary's creation and the `try` that guards it.
    for temp_name in list(TEMPORARY):
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
    raise SystemExit(128 + signum)


def _temporary(folder: str | os.PathLike[str], name: str, shown: str, failure: str) -> tuple[int, str, BinaryIO]:
    """A new temporary file beside `name` in `folder` (removed on a signal until it is renamed)."""
    # Created and registered with SIGTERM and SIGHUP held back: a signal in between would find a
    # file no one removes (it is delivered right after, and then removes it).
    import tempfile  # here: every command loads this module (unwind_on_termination), few write a file

    # The temporary name is the target's with 14 bytes more (".", ".", 8 random, ".tmp"): a long
    # target's part in it is cut so that it stays within a file name's 255 bytes.
    while len(os.fsencode(name)) > 255 - 14:
        name = name[:-1]
    held = _hold_termination()
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
        TEMPORARY.add(temp_name)
    except OSError as exc:
        raise write_error(shown, exc, failure) from None
    finally:
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return handle, temp_name, writer(handle, shown)


def _hold_termination() -> Any:
    """Block SIGTERM and SIGHUP; the mask before, to restore (None where signals cannot be masked)."""
    if not TERMINATION or not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, TERMINATION)


def _sync(descriptor: int, shown: str) -> None:
    try:
        os.fsync(descriptor)
    except OSError as exc:
        raise write_error(shown, exc) from None


def sync_folder(folder: str | os.PathLike[str]) -> None:
    """Make a rename or a new name in `folder` survive a crash (where the system allows it)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _copy_owner_and_mode(target: str, temp_name: str, like: str | None = None) -> None:
    """The replacement keeps the old file's permissions (and owner, when we may set it); a new file
    gets the usual 0666 less the umask, and no more than `like`'s read and write permissions."""
    try:
        old = os.stat(target)
    except OSError:
        mode = 0o666 & ~_umask()
        if like is not None and not storage.is_remote(like):
            with contextlib.suppress(OSError, ValueError):
                mode &= os.stat(storage.local_path(like)).st_mode
        os.chmod(temp_name, mode)
        return
    with contextlib.suppress(OSError):
        if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
            os.chown(temp_name, old.st_uid, old.st_gid)
    with contextlib.suppress(OSError):
        os.chmod(temp_name, old.st_mode & 0o7777)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def keep_backup(path: str, suffix: str, data: Any) -> str:
    """Keep `data` (the original's bytes) as PATH+SUFFIX, or PATH+SUFFIX.1, .2, … when that name is
    taken: written whole and fsynced under a temporary name first, then given a name that is not
    in use (a hard link cannot take over an existing file), so no backup is ever overwritten and
    none is ever half-written. Returns the name used. In a store: an object created only where the
    name is free (a store that cannot promise that refuses the backup)."""
    base = path + suffix
    if storage.is_remote(base):
        return _remote_backup(base, data)
    base = storage.local_path(base)
    path = storage.local_path(path)
    folder = os.path.dirname(base) or "."
    handle, temp_name, out = _temporary(folder, os.path.basename(base), base, "cannot write the backup here")
    try:
        out.write(data)
        out.flush()
        _sync(handle, base)
        import shutil

        with contextlib.suppress(OSError):
            shutil.copystat(path, temp_name)  # the original's mode and times
        out.close()
        name = _claim_name(temp_name, base)
    finally:
        _close_quietly(out)
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        TEMPORARY.discard(temp_name)
    sync_folder(folder)
    return name


def _backup_names(base: str) -> Iterator[str]:
    """BASE, then BASE.1, BASE.2, …: the names a backup may take, in order."""
    yield base
    for number in itertools.count(1):
        yield f"{base}.{number}"


def _remote_backup(base: str, data: Any) -> str:
    return next(name for name in _backup_names(base) if storage.create_new(name, data))


def _claim_name(temp_name: str, base: str) -> str:
    for name in _backup_names(base):
        try:
            os.link(temp_name, name)
            return name
        except FileExistsError:
            continue
        except OSError as exc:
            if os.path.lexists(name):
                continue
            if exc.errno is None or not _no_hard_links(exc):
                raise write_error(name, exc) from None
            # A file system without hard links: a rename, checked just before (a small race).
            try:
                os.rename(temp_name, name)
            except OSError as rename_exc:
                raise write_error(name, rename_exc) from None
            return name
    raise AssertionError("unreachable")


def _no_hard_links(exc: OSError) -> bool:
    return exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS)
