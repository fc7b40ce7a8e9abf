"""Finding session files in the folders Claude Code writes them to.

    ~/.claude/projects/<encoded-cwd>/<session-id>.jsonl                     main session
    ~/.claude/projects/<encoded-cwd>/agent-<id>.jsonl                        subagent, 2.0.x
    ~/.claude/projects/<encoded-cwd>/<session-id>/subagents/agent-<id>.jsonl subagent, 2.1.x

1.0.x subagents live inside the main file (isSidechain lines), so every layout is covered by
taking every *.jsonl below a folder and telling subagent files by their `agent-` name.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .core.errors import InputError

Kind = Literal["main", "subagent"]


@dataclass(frozen=True)
class SessionFile:
    path: Path
    kind: Kind
    shown: str  # the path as the user should see it

    @property
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0


def kind_of(path: Path) -> Kind:
    return "subagent" if path.name.startswith("agent-") else "main"


def find_sessions(paths: Iterable[str], subagents: bool = True,
                  on_skip: Callable[[str, str], None] | None = None) -> list[SessionFile]:
    """Files as given, and every session file below each folder, in a stable order, each once.

    Below a folder only regular files are taken (a symbolic link to one counts): a FIFO named
    *.jsonl would block the reader forever. Symbolic links to folders are not followed, so the walk
    stays in the tree given. A file given by name is taken whatever it is (a FIFO is read as a
    stream). `on_skip(path, why)` hears about each thing left out.
    """
    skip = on_skip or (lambda shown, why: None)
    found: list[SessionFile] = []
    seen: dict[str, str] = {}  # real path -> the path it was first found as

    def take(file: Path, shown: str) -> None:
        real = os.path.realpath(file)
        if real in seen:
            if seen[real] != shown:
                skip(shown, f"the same file as {seen[real]}")
            return
        seen[real] = shown
        found.append(SessionFile(file, kind_of(file), shown))

    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            for root, folders, files in os.walk(path, onerror=lambda exc: skip(str(exc.filename), exc.strerror or str(exc))):
                folders.sort()
                for name in folders:
                    if os.path.islink(os.path.join(root, name)):
                        skip(os.path.join(root, name), "a symbolic link to a folder (not followed)")
                for name in sorted(files):
                    if name.endswith(".jsonl"):
                        file = Path(root) / name
                        why = _not_regular(file)
                        if why:
                            skip(str(file), why)
                        elif subagents or kind_of(file) == "main":
                            take(file, str(file))
        elif path.exists():
            take(path, given)
        else:
            raise InputError(given, None, "no such file or folder")
    return found


_KINDS = [(stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")]


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
