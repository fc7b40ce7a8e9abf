"""`ctxpipe expand`: put back what stages removed, from their ledger."""

from __future__ import annotations

from .. import streams
from ..flags import with_options
from ..options import InputPath, LedgerToRead, Output


@with_options()  # no bundle: its parameters declared without typer, as every command's
def expand(
    ledger: LedgerToRead,
    path: InputPath = None,
    output: Output = None,
) -> None:
    """Rebuild the transcript a chain of stages started from, byte for byte.

    Each stage run with --ledger FILE (and compact's) appended what it removed; expand undoes
    those runs newest first, checking each against the exact bytes it produced (records for other
    files are skipped). After `ctxpipe microcompact --force --ledger undo.jsonl s.jsonl >
    small.jsonl`, the example gives s.jsonl back.

    Example:  ctxpipe expand --ledger undo.jsonl small.jsonl > s-again.jsonl
    """
    from ...api import expand as undo

    streams.stdin_twice(path, ledger, "--ledger")
    guard = streams.rewrite_guard(output, path)
    with streams.one_transcript(path, "expand"):
        original, undone = undo(path, ledger)
    with streams.open_output(output, if_version=guard) as out:
        out.write(original)
    streams.note(f"expand: undid {undone} stage run{'s' if undone != 1 else ''}")
