"""`collapse`: fold repeated identical tool results into a pointer to the latest copy.

When a later result in the active context carries exactly what an earlier one did (the same file
read again with nothing changed, the same `git status` twice), the earlier copy becomes a short
stub naming the tool, its input and the later call. The latest copy stays whole: it is the one
most likely to survive a later summary. Claude Code's own "file unchanged since last read" stub is
never counted as a copy, so the full result it refers to is never folded away. A shell command
that only reads a file (`cat`, `sed -n '1,80p'`, `nl -ba`, `head`, `tail`: Codex reads files so) is
the same read whichever shell tool ran it and with whatever call options (read_key).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .blocks import call_id, content_of, input_of, is_tool_use
from .count import Estimates, calibrate
from .fields import iso
from .fields import text as field_text
from .jsonl import Entry, as_text, dumps
from .microcompact import ToolCall, counted_by_anchor, tool_calls
from .placeholders import PLACEHOLDER, STUB_PREFIX, STUB_TAIL, UNCHANGED_STUB
from .reports import CollapseExtras, Fold, ToolFigures
from .setting import no_marker
from .stage import Outcome, Stage, StageContext
from .tokens import PiecesCounter, block_texts
from .transcript_format import WritableFormat

INPUT_KEYS = ("file_path", "notebook_path", "path", "command", "pattern", "url", "query")
# Shell commands that only print (part of) a file: the same one run twice is the same read, whichever
# tool ran it and with whatever options of the call (a timeout, a justification).
READERS = ("cat", "nl", "sed", "head", "tail")
SHELLS = ("bash", "sh", "zsh")
_SED_PRINT = re.compile(r"\d+(?:,\d+)?p|\$p")
_NOT_A_PLAIN_READ = re.compile(r"[|;&<>`$\n]|\$\(")  # a pipe, a chain, a redirection, a substitution


def shell_line(tool_input: Any) -> str | None:
    """The command line a shell tool ran: Claude Code's Bash and Codex's shell_command
    ({"command": "..."}), Codex's shell ({"command": ["bash", "-lc", "..."]}, or a bare argv) and
    exec_command ({"cmd": "..."})."""
    if not isinstance(tool_input, dict):
        return None
    command = tool_input.get("command", tool_input.get("cmd"))
    if isinstance(command, str):
        return command
    if isinstance(command, list) and command and all(isinstance(word, str) for word in command):
        if len(command) == 3 and command[0].rsplit("/", 1)[-1] in SHELLS and command[1] in ("-c", "-lc"):
            return str(command[2])
        return shlex.join(command)
    return None


def read_key(tool_input: Any) -> tuple[str, ...] | None:
    """A shell command that only reads a file (`cat F`, `sed -n '1,80p' F`, `nl -ba F`, `head -n 40 F`):
    the folder it ran in and its words, so that the same read is one read in any tool; None for
    anything else."""
    line = shell_line(tool_input)
    if line is None or _NOT_A_PLAIN_READ.search(line.replace("$p", "")):
        return None
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if not words or words[0] not in READERS:
        return None
    operands, rest = [], iter(words[1:])
    for word in rest:
        if word in ("-n", "-c"):
            next(rest, None)  # head -n 40, tail -c 100: the option's value
        elif not word.startswith("-"):
            operands.append(word)
    if words[0] == "sed":
        if "-n" not in words[1:] or not any(_SED_PRINT.fullmatch(word) for word in words):
            return None  # sed that prints what it edits is not a read
        operands = [word for word in words[1:] if not word.startswith("-") and not _SED_PRINT.fullmatch(word)]
    if not operands:
        return None  # reads its standard input
    folder = tool_input.get("workdir") if isinstance(tool_input, dict) else None
    return (folder if isinstance(folder, str) else "", *words)


def describe_input(tool_input: Any) -> str:
    line = shell_line(tool_input)
    if line is not None:
        return line
    if isinstance(tool_input, dict):
        for key in INPUT_KEYS:
            if isinstance(tool_input.get(key), str):
                extra = [f"{k}={as_text(tool_input[k])}" for k in ("offset", "limit") if k in tool_input]
                return str(tool_input[key]) + (f" ({', '.join(extra)})" if extra else "")
    text = dumps(tool_input).decode()
    return text if len(text) <= 120 else text[:117] + "..."


def stub(name: str, tool_input: Any, later: str) -> str:
    return f"{STUB_PREFIX} {name} {describe_input(tool_input)}" + STUB_TAIL.format(later=later)


def _content_key(block: dict[str, Any]) -> str | None:
    content = content_of(block)
    text = content if isinstance(content, str) else dumps(content).decode()
    if text.startswith((UNCHANGED_STUB, STUB_PREFIX)) or text == PLACEHOLDER:
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def collapse(entries: list[Entry], transcript_format: WritableFormat, settings: CollapseSettings, now: datetime) -> Outcome:
    """Fold the earlier copies of repeated results; `now` dates the marker."""
    messages = transcript_format.messages(entries)
    inputs: dict[str, Any] = {str(call_id(block)): input_of(block) for message in messages for block in message.content if is_tool_use(block)}
    groups: dict[tuple[str, bytes, str], list[ToolCall]] = {}
    order: dict[str, int] = {}
    # Where Claude Code answered a read with its "file unchanged" stub, by the read's signature: the
    # full copy before such a stub is the one it points back to, and is never folded.
    unchanged: dict[bytes, list[int]] = {}
    for number, call in enumerate(tool_calls(messages)):
        order[call.id] = number
        if call.result is None:
            continue
        message, index = call.result
        read = read_key(inputs.get(call.id))
        signature = dumps(["read", *read]) if read is not None else dumps(inputs.get(call.id), sort_keys=True)
        content = content_of(message.content[index])
        if isinstance(content, str) and content.startswith(UNCHANGED_STUB):
            unchanged.setdefault(signature, []).append(number)
        key = _content_key(message.content[index])
        if key is None:
            continue
        groups.setdefault(("" if read is not None else call.name, signature, key), []).append(call)
    estimates = Estimates(messages, PiecesCounter())
    calibration = calibrate(estimates)
    counter = PiecesCounter()
    by_entry: dict[int, dict[int, dict[str, Any]]] = {}
    folded: list[Fold] = []
    removed: list[dict[str, Any]] = []
    saved = 0
    holders = []
    for (_, signature, _), calls in groups.items():
        if len(calls) < 2:
            continue
        survivor = calls[-1]
        stubs = unchanged.get(signature, [])
        for call, following in zip(calls, calls[1:]):
            if any(order[call.id] < stub_at < order[following.id] for stub_at in stubs):
                continue  # a "file unchanged" stub after it refers to this very copy
            name = call.name
            if call.result is None:  # never: only answered calls are grouped
                continue
            message, index = call.result
            block = message.content[index]
            text = stub(name, inputs.get(call.id), survivor.id)
            texts, flat = block_texts(block)
            if sum(len(t) for t in texts) + (len(text) + 1 if flat else 0) <= len(text):
                continue  # the stub would not be shorter
            position, block_index = message.refs[index]
            replaced = dict(block)
            replaced["content"] = text
            by_entry.setdefault(position, {})[block_index] = replaced
            tokens = max(0, round(calibration.slope * (sum(counter.count_many(texts)) - counter.count(text))) + flat)
            saved += tokens
            holders.append(message)
            folded.append(Fold(tool_use_id=call.id, tool=name, survivor=survivor.id, tokens=tokens))
            removed.append({"uuid": field_text(entries[position].obj, "uuid"), "block": block_index, "tool_use_id": call.id, "tool": name})
    if not folded:
        return Outcome(entries, False, "nothing to fold: no tool result repeats a later one exactly")
    result = list(entries)
    for position, blocks in by_entry.items():
        result[position] = transcript_format.replace_blocks(entries[position], blocks)
    counted = counted_by_anchor(messages, holders, [fold.tokens for fold in folded])
    metadata = {"stage": "collapse", "tokensSaved": counted, "foldedToolIds": [fold.tool_use_id for fold in folded]}
    if not settings.no_marker:
        marker = transcript_format.marker(result, "ctxpipe_collapse", "Repeated tool results folded", "ctxpipeMetadata", metadata, iso(now))
        if marker is not None:
            result.append(marker)
    per_tool: dict[str, ToolFigures] = {}
    for fold in folded:
        figures = per_tool.setdefault(fold.tool, ToolFigures(results=0, tokens=0))
        figures.results += 1
        figures.tokens += fold.tokens
    report = CollapseExtras(stage="collapse", folded=len(folded), removed_estimate=saved, tokens_saved=counted, by_tool=per_tool, folds=folded)
    return Outcome(result, True, f"folded {len(folded)} repeated result{'s' if len(folded) != 1 else ''}", report, removed)


# --- the stage, declared once ----------------------------------------------------------------------


@dataclass(frozen=True)
class CollapseSettings:
    """collapse's settings as the command line spells them (see core.setting.Flag)."""

    no_marker: bool = no_marker()


def run(entries: list[Entry], transcript_format: WritableFormat, settings: CollapseSettings, context: StageContext) -> Outcome:
    return collapse(entries, transcript_format, settings, context.now)


STAGE = Stage(
    "collapse",
    CollapseSettings,
    run,
    """Fold a tool result that a later call repeated exactly into a pointer to the later copy.

    Same tool, same input, same result (a file read again with nothing changed, the same `git
    status` twice): the earlier copy becomes a stub naming the tool, its input and the later call.
    The latest copy stays whole. A result that differs (the file changed in between) is never
    folded, nor is a full read that Claude Code's "file unchanged" stub points back to.

    Example:  ctxpipe microcompact session.jsonl | ctxpipe collapse --report > smaller.jsonl
    """,
)
