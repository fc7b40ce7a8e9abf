"""Finding session files in the folders Claude Code writes them to.

    ~/.claude/projects/<encoded-cwd>/<session-id>.jsonl                     main session
    ~/.claude/projects/<encoded-cwd>/agent-<id>.jsonl                        subagent, 2.0.x
    ~/.claude/projects/<encoded-cwd>/<session-id>/subagents/agent-<id>.jsonl subagent, 2.1.x

1.0.x subagents live inside the main file (isSidechain lines), so every layout is covered by
taking every *.jsonl below a folder and telling subagent files by their `agent-` name.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
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


def find_sessions(paths: Iterable[str], subagents: bool = True) -> list[SessionFile]:
    """Files as given, and every session file below each folder, in a stable order."""
    found: list[SessionFile] = []
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            for root, folders, files in os.walk(path):
                folders.sort()
                for name in sorted(files):
                    if name.endswith(".jsonl"):
                        file = Path(root) / name
                        if subagents or kind_of(file) == "main":
                            found.append(SessionFile(file, kind_of(file), str(file)))
        elif path.exists():
            found.append(SessionFile(path, kind_of(path), given))
        else:
            raise InputError(given, None, "no such file or folder")
    return found
