"""The real ports core's stages are handed: the disk restore reads (core.restore.Workspace).

core/ does no I/O of its own (tests/test_core_pure.py); what it needs from the outside world it
asks of a port, and the ones that touch the real world live here (the model's: jobs/llm.py).
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # restore, which calls read(), has loaded it: every stage's run holds a Disk
    from ..core.restore import DiskRead


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class Disk:
    """The files on this machine, as restore may read them (core.restore.Workspace)."""

    def here(self) -> str | None:
        try:
            return os.getcwd()
        except OSError:
            return None

    def holds(self, folder: str, path: str) -> bool:
        try:
            return _inside(os.path.realpath(path), os.path.realpath(folder))
        except ValueError:  # a NUL byte: no folder has such a name
            return False

    def read(self, path: str, root: str, allow_outside: bool, max_chars: int | None = None) -> DiskRead:
        from ..core.restore import DiskRead

        try:
            real_root = os.path.realpath(root)
            real = os.path.realpath(path if os.path.isabs(path) else os.path.join(real_root, path))
        except ValueError:  # a NUL byte: no file has such a name
            return DiskRead(None, "not a file name (it holds a NUL byte)")
        if not _inside(real, real_root) and not allow_outside:
            return DiskRead(None, f"outside the project root {root} (after resolving links); --allow-outside-root reads it")
        try:
            # O_NONBLOCK: opening a FIFO put in the file's place must not wait for a writer.
            descriptor = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            return DiskRead(None, "not on disk")
        except OSError as exc:
            return DiskRead(None, f"unreadable ({exc.__class__.__name__})")
        try:
            with open(descriptor, encoding="utf-8") as handle:
                info = os.fstat(descriptor)
                if not stat.S_ISREG(info.st_mode):
                    return DiskRead(None, "not on disk" if stat.S_ISDIR(info.st_mode) else "not a regular file")
                text = handle.read(-1 if max_chars is None else max_chars + 1)  # characters, decoded a chunk at a time
        except (OSError, UnicodeDecodeError) as exc:
            return DiskRead(None, f"unreadable ({exc.__class__.__name__})")
        complete = max_chars is None or len(text) <= max_chars
        return DiskRead(text if complete else text[:max_chars], "from disk", info.st_size, complete)


DISK = Disk()  # stateless: one is enough
