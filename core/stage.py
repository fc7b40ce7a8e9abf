"""What every transforming stage shares: the region it may edit, the outcome, and the ledger.

A stage reads a transcript as `prefix` (bytes before the active context, passed through unparsed)
plus `entries` (the active context's region, parsed). It returns a new entry list in which every
entry it did not change is the very same object, so the writer emits its original bytes, and the
ledger can tell changed lines from untouched ones by identity alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

from .errors import CtxpipeError
from .fields import text
from .folds import Fold
from .jsonl import Entry
from .transcript_format import WritableFormat
from .wire import Wire

LEDGER_VERSION = 1


@dataclass
class Outcome:
    """A stage's result: the new region, whether it changed anything, and what it did."""

    entries: list[Entry]
    changed: bool
    note: str  # one line for stderr: what was done, or why nothing was
    # What the stage did, beyond its one line: its own keys of --report-json (None: it has none to
    # give), a report dataclass: one of core.reports.StageExtras for the stages of the registry
    # (tests/test_report_schemas.py holds each to its schema).
    report: Wire | None = None
    removed: list[dict[str, Any]] = field(default_factory=list)  # human-readable: uuid, block, tool_use_id
    notes: list[str] = field(default_factory=list)  # more lines for stderr, after the stage's one line


def line_bytes(entries: Iterable[Entry]) -> list[bytes]:
    """Each entry's bytes as the writer emits them (an unterminated line gets a newline if more follow)."""
    pieces: list[bytes] = []
    for entry in entries:
        if pieces and not pieces[-1].endswith(b"\n"):
            pieces[-1] += b"\n"
        pieces.append(entry.encode() + entry.eol)
    return pieces


def _text(raw: bytes) -> dict[str, str]:
    try:
        return {"raw": raw.decode("utf-8")}
    except UnicodeDecodeError:
        import base64

        return {"b64": base64.b64encode(raw).decode("ascii")}


def holds_exactly(region: bytes | memoryview, pieces: list[bytes]) -> bool:
    """Whether `region` is `pieces` one after another (compared in place: no copy of the region)."""
    at = 0
    for piece in pieces:
        if region[at : at + len(piece)] != piece:
            return False
        at += len(piece)
    return at == len(region)


def ledger_record(
    stage: str,
    prefix: bytes | memoryview,
    before: Sequence[Entry],
    after: Sequence[Entry],
    removed: list[dict[str, Any]],
    region: bytes | memoryview | None = None,
) -> tuple[dict[str, Any], list[bytes]]:
    """The ledger line that lets `expand` rebuild the input from the output, and the output's lines.

    The recipe lists the input's lines in order: a range [a, b] copies output lines a..b-1 (entries
    the stage left alone), an object gives an original line's exact bytes (changed or removed).
    `region` is the input's bytes after the prefix as they really were: when they hold more than
    the entries do (blank lines, a BOM, lines skipped as bad), the recipe keeps them whole.
    """
    output = line_bytes(after)
    position = {id(entry): index for index, entry in enumerate(after)}
    recipe: list[Any] = []
    exact = region is None or holds_exactly(region, line_bytes(before))
    for entry in before if exact else ():
        index = position.get(id(entry))
        # An unterminated last line may have gained a newline in the output: keep its own bytes.
        if index is not None and entry.eol:
            if recipe and isinstance(recipe[-1], list) and recipe[-1][1] == index:
                recipe[-1][1] = index + 1
            else:
                recipe.append([index, index + 1])
        else:
            recipe.append(_text(entry.encode() + entry.eol))
    whole = b"" if region is None else bytes(region)  # used only when the region held more than the entries
    if not exact:
        recipe = [_text(whole)]
    import hashlib  # here: the ledger's digests; counting (statusline's light path) never needs them

    digest_in = hashlib.sha256(prefix)
    for piece in line_bytes(before) if exact else [whole]:
        digest_in.update(piece)
    digest_out = hashlib.sha256(prefix)
    for piece in output:
        digest_out.update(piece)
    record = {
        "ctxpipe_ledger": LEDGER_VERSION,
        "stage": stage,
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "input_sha256": digest_in.hexdigest(),
        "output_sha256": digest_out.hexdigest(),
        "prefix_bytes": len(prefix),
        "removed": removed,
        "recipe": recipe,
    }
    return record, output


def split_lines(data: bytes) -> list[bytes]:
    """Lines with their terminators (the last may have none)."""
    lines = data.split(b"\n")
    pieces = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        pieces.append(lines[-1])
    return pieces


def expand(data: bytes, records: Sequence[dict[str, Any]]) -> tuple[bytes, int]:
    """Undo the recorded stages, newest first; returns the original bytes and how many were undone.

    A record applies only to the exact bytes it produced (its output_sha256), so a ledger shared by
    several files or runs is safe: records for other outputs are skipped.
    """
    import hashlib

    undone = 0
    for record in reversed(records):
        if record.get("ctxpipe_ledger") != LEDGER_VERSION:
            continue
        if hashlib.sha256(data).hexdigest() != record.get("output_sha256"):
            continue
        try:
            rebuilt = _rebuilt(data, record)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):  # binascii.Error is a ValueError
            raise CtxpipeError(f"the ledger's {text(record, 'stage') or 'unnamed'} record is damaged: it cannot rebuild its input") from None
        if hashlib.sha256(rebuilt).hexdigest() != record["input_sha256"]:
            raise CtxpipeError(f"the ledger's {text(record, 'stage') or 'unnamed'} record did not rebuild its input (the ledger is damaged)")
        data = rebuilt
        undone += 1
    return data, undone


def _rebuilt(data: bytes, record: dict[str, Any]) -> bytes:
    """The input a record's recipe rebuilds from the output it produced."""
    import base64

    prefix_size = int(record["prefix_bytes"])
    prefix, lines = data[:prefix_size], split_lines(data[prefix_size:])
    # A recipe copies each output line at most once: checked before anything is built, so a tampered
    # ledger (one range repeated a million times) is refused instead of growing the input a million fold.
    copied = 0
    for item in record["recipe"]:
        if isinstance(item, list):
            first, last = item
            if not (isinstance(first, int) and isinstance(last, int) and 0 <= first <= last <= len(lines)):
                raise ValueError("a range outside the output")
            copied += last - first
    if copied > len(lines):
        raise ValueError("the recipe copies more lines than the output has")
    pieces = [prefix]
    for item in record["recipe"]:
        if isinstance(item, list):
            pieces.extend(lines[item[0] : item[1]])
        elif "raw" in item:
            pieces.append(item["raw"].encode("utf-8"))
        else:
            pieces.append(base64.b64decode(item["b64"]))
    return b"".join(pieces)


def read_ledger(data: bytes, source: str) -> list[dict[str, Any]]:
    from .errors import InputError

    records = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InputError(source, number, f"not a ledger line: {exc.msg}") from None
        if not isinstance(record, dict) or "ctxpipe_ledger" not in record:
            raise InputError(source, number, "not a ctxpipe ledger record")
        records.append(record)
    return records


# --- a stage, declared once ------------------------------------------------------------------------
#
# A stage is its settings (a frozen dataclass whose fields carry their command-line spelling,
# core/setting.py) and a run function.


@dataclass(frozen=True)
class StageContext:
    """What a stage needs besides its settings: the run's clock, what the caller knows of the file,
    and what it may call outside the process."""

    now: datetime
    # Tokens of a candidate output as `count` finds them, prefix included (jobs/count.Measure).
    measure: Any = None
    transcript_path: str | None = None  # the file read, when it is one (session notes are looked for beside it)
    # The entries before earlier stages of the same run cleared anything (same positions).
    original: Sequence[Entry] | None = None
    # The autocompact threshold and whether it fired unforced (known to `compact`).
    threshold: int | None = None
    trigger: str = "manual"
    # The entries above the active context, parsed (restore reads the history a summary replaced).
    history: Sequence[Entry] = ()
    # restore --from: (messages, entries) of the transcript as it was before its summary.
    earlier: Any = None
    # core.summarize_engines.Breaker (None: the process's own, breaker.breaker(), made when a summary asks for it).
    breaker: Any = None
    api_key: str | None = None  # the summary model's key (never printed)
    base_url: str | None = None
    progress: Callable[[str], None] | None = None
    rules: str | None = None  # --rules: the Claude Code release whose rules apply, over the session's version (core.rules)
    # The disk restore reads files from (core.restore.Workspace; jobs/ports.DISK). None: nothing is read from it.
    workspace: Any = None


StageRun = Callable[[list[Entry], WritableFormat, Any, StageContext], Outcome]  # a stage edits: it gets the format's editor too


@dataclass(frozen=True)
class Stage:
    """One transforming stage: its name, settings type, run function and help."""

    name: str
    settings: type
    run: StageRun
    help: str
    in_compact: bool = True  # `compact` runs it (snip needs a range only a person can choose)
    # When `compact` runs it: "always", "over threshold" (at or above the autocompact threshold,
    # above --target-tokens, or forced: the summary) or "after a summary" (only when one was written).
    runs: str = "always"
    # Whether it reads every line, numbered, rather than the active context only.
    every_line: Callable[[Any], bool] = lambda _settings: False
    # Whether the lines above the active context that it reads (context.history) may be read in
    # place and passed through unparsed, when they would be written back exactly as they were read.
    history_in_place: bool = False
    # The facts of every line above the active context it asks for (core.jsonl.folded): folded while
    # those lines are read in place and checked, so that none is parsed again for them.
    history_folds: tuple[Fold[Any], ...] = ()
    # What a spinner says while it runs on a terminal (None: it is quick, no spinner), e.g. "summarizing".
    progress: str | None = None
    # Settings that do not go together raise core.errors.SettingsError here, before any input is read.
    check: Callable[[Any], None] = lambda _settings: None
