"""The command line's side of a batch: the session files below the paths given, with a warning for
each file left out and a usage error when none is found (the run itself is the api's: count_many, …)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..api import SessionFile


def find_inputs(paths: Sequence[str], subagents: bool) -> list[SessionFile]:
    """The session files below `paths`, with one warning per file left out; none at all is a usage
    error. A path that names nothing stays in its place: the batch fails on it there, as on any file
    it cannot read (its error line, a failed row, the other files still done, exit 1)."""
    from ..api import STDIN, session_files
    from . import declare, streams
    from .metavars import PATHS

    if STDIN in paths:  # stdin alone is one transcript; among files it would be a file named "-"
        raise declare.BadParameter("- (stdin) is one transcript on its own: give it alone, or name files and folders", param_hint=PATHS)
    files = session_files(paths, subagents, on_skip=lambda shown, why: streams.warn(f"{shown}: skipped: {why}"), keep_missing=True)
    if not files:
        # The error printer escapes what a terminal would act on (cli/app.py): the paths go in as given.
        where = ", ".join(str(path) for path in paths[:3]) + (f" (and {len(paths) - 3} more)" if len(paths) > 3 else "")
        raise declare.BadParameter(f"no session files (*.jsonl) found in {where}", param_hint=PATHS)
    return files
