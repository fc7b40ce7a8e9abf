"""Writing a file so that a crash at any moment leaves either the old file or the new one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .core.errors import CtxpipeError, InputError

BUFFER = 1 << 20


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A temporary file in the target's folder, fsynced and renamed over it when the block ends
    without error (the old file's mode is kept); removed when it does not."""
    target = Path(path)
    if target.is_dir():
        raise InputError(str(path), None, "is a directory, expected an output file path")
    folder = target.parent if str(target.parent) else Path(".")
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise CtxpipeError(f"{path}: cannot write here ({exc.strerror or exc})") from None
    try:
        with os.fdopen(handle, "wb", buffering=BUFFER) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        if target.exists():
            with contextlib.suppress(OSError):
                os.chmod(temp_name, target.stat().st_mode & 0o7777)
        else:
            os.chmod(temp_name, 0o666 & ~_umask())
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
