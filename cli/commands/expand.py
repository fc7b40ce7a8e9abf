"""`ctxpipe expand`: put back what stages removed, from their ledger."""

from __future__ import annotations

from .. import streams
from ..options import InputPath, LedgerToRead, Output


def expand(
    ledger: LedgerToRead,
    path: InputPath = None,
    output: Output = None,
) -> None:
    """Rebuild the transcript a chain of stages started from, byte for byte.

    Each stage run with --ledger FILE appended what it removed; expand undoes those runs newest
    first, checking each against the exact bytes it produced (records for other files are skipped).

    Example:  ctxpipe microcompact --force --ledger undo.jsonl s.jsonl | ctxpipe collapse --ledger undo.jsonl > small.jsonl
              ctxpipe expand --ledger undo.jsonl small.jsonl > s-again.jsonl
    """
    from ...core.errors import CtxpipeError
    from ...core.stage import expand as undo
    from ...core.stage import read_ledger
    from ...files.inputs import mapped
    from ...formats import other_agents, refuse_other_agent

    with mapped(ledger) as ledger_bytes:
        records = read_ledger(bytes(ledger_bytes), ledger)
    source = streams.source_name(path)
    with mapped(path) as buffer:
        # No stage writes another agent's file, so no ledger undoes one: refused as every reader does.
        refuse_other_agent(source, other_agents.examine_buffer(buffer))
        data = bytes(buffer)
    original, undone = undo(data, records)
    if records and not undone:
        raise CtxpipeError(f"{source}: no record in {ledger} was written for this transcript (it may have changed since)")
    with streams.open_output(output) as out:
        out.write(original)
    streams.note(f"expand: undid {undone} stage run{'s' if undone != 1 else ''}")
