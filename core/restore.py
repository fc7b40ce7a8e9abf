"""`restore`: after a summary, re-inject what the model needs to carry on.

The file-state view of the history before the last compact boundary is rebuilt the way Claude
Code's FileStateCache would hold it (Read stores content, offset and limit; Edit and Write update
it; partial reads are marked), then the most recently used files come back — at most 5 files,
5,000 tokens each and 50,000 in all, newest first, skipping any whose full read is still in the
kept tail — together with the latest plan (its own item, not a file slot), a plan-mode reminder when the
session ended in plan mode, the invoked skills (5,000 tokens each, 25,000 in all) and the latest todo
list. Memory and rule files never take a slot: Claude Code reloads them itself. Each item is its own
entry with a one-line header saying what it is.

A transcript is untrusted input, so it never chooses what is read from disk: files are read only
under the root the caller gives, or else under the current directory and only when the transcript's
cwd lies in it (a transcript from elsewhere comes back from its own copies). A file is read only as
far as its budget needs: a huge file costs a few kilobytes, not its size in memory.

The disk itself is a port (Workspace) the caller hands in: jobs/ports.Disk is the real one.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .blocks import is_text, is_tool_result, is_tool_use, kind_of
from .count import Reinjection
from .fields import text
from .jsonl import LATEST_TIME, Entry, Joined, as_text
from .model import Message
from .permission_mode import PERMISSION_MODE, permission_mode
from .placeholders import CONTENTLESS_READ_PREFIXES, RESTORED_PREFIX
from .reports import CandidateKind, PlanRow, ReinjectedItem, ReinjectedKind, RestoreExtras
from .setting import setting
from .stage import Outcome, Stage, StageContext
from .tokens import RoughCounter
from .transcript_format import TranscriptFormat, WritableFormat, editor_of

MAX_FILES = 5
MAX_TOKENS_PER_FILE = 5_000
FILES_BUDGET = 50_000
MAX_TOKENS_PER_SKILL = 5_000
SKILLS_BUDGET = 25_000
SKILL_TRUNCATED = "\n\n[... skill content truncated for compaction; use Read on the skill path if you need the full text]"
MEMORY_FILES = ("CLAUDE.md", "CLAUDE.local.md", "MEMORY.md")
PLAN_TRUNCATED = "\n\n[... plan truncated for restoring; use Read on the plan file if you need the full text]"
_SEPARATORS = re.compile(r"[/\\]")


def is_plan_file(path: str) -> bool:
    """Claude Code's plan files: ~/.claude/plans/<slug>.md (any `.claude/plans/` folder)."""
    parts = _SEPARATORS.split(path)
    return len(parts) >= 3 and parts[-3:-1] == [".claude", "plans"] and parts[-1].endswith(".md")


def is_memory_file(path: str) -> bool:
    """Memory and rule files, which Claude Code reloads itself after a compaction (so a restore slot
    spent on them is wasted): CLAUDE.md and CLAUDE.local.md at any depth, MEMORY.md, any project's
    `.claude/rules/*`, and everything in the user's ~/.claude (auto-memory, settings, skills),
    recognised by its shape since the transcript's home need not be ours. A project's own
    `.claude/agents/x.md` or `.claude/settings.json` is ordinary project content and may be restored."""
    parts = _SEPARATORS.split(path)
    if parts[-1] in MEMORY_FILES:
        return True
    for at, part in enumerate(parts[:-1]):
        if part == ".claude" and (parts[at + 1 : at + 2] == ["rules"] or _is_home(parts[:at])):
            return True
    return False


def _is_home(parts: list[str]) -> bool:
    """Whether these leading path parts name a home folder: ~, /home/NAME, /Users/NAME, /root, C:/Users/NAME."""
    named = [part for part in parts if part]
    return (
        named == ["~"]
        or named == ["root"]
        or (len(named) == 2 and named[0] in ("home", "Users"))
        or (len(named) == 3 and named[0].endswith(":") and named[1] == "Users")
    )


@dataclass
class FileState:
    path: str
    content: str | None
    timestamp: str
    offset: int | None = None
    limit: int | None = None
    partial: bool = False
    action: str = "read"


@dataclass
class Candidate:
    kind: CandidateKind
    name: str
    text: str | None
    tokens: int
    chosen: bool = False
    reason: str = ""
    header: str = ""
    disk_skipped: bool = False  # disk was wanted, but no folder may be read (see disk_root)

    def row(self) -> PlanRow:
        """Its row of `restore --plan`, and its item of restore's report."""
        return PlanRow(kind=self.kind, name=self.name, tokens=self.tokens, chosen=self.chosen, reason=self.reason)


def tokens_of(text: str) -> int:
    return RoughCounter().count(text)


def normalise(path: str, cwd: str | None) -> str:
    """One spelling per file: absolute, no `.`/`..`, no doubled slashes."""
    if not posixpath.isabs(path) and cwd:
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path)


NUMBERED = re.compile(r"^\s*\d+(?:\t|\u2192)")


def _strip_line_numbers(text: str) -> str:
    """Read results come as `cat -n` output (a number, then a tab, or an arrow in Claude Code 2.x,
    followed by an injected <system-reminder>); the file's text is what follows the number."""
    text = text.split("\n\n<system-reminder>", 1)[0]
    lines = text.split("\n")
    if lines and all((not line) or NUMBERED.match(line) for line in lines[:50]):
        return "\n".join(NUMBERED.sub("", line, count=1) for line in lines)
    return text


Part = tuple[Sequence[Message], Sequence[Entry]]  # messages and the entries they index


def file_states(parts: Sequence[Part], cwd: str | None) -> dict[str, FileState]:
    """The files the transcript touched, as its last action left them (a Read, Edit or Write):
    `parts` in order, the history and then the active context (a session that went on after its
    compaction touched files since). A tool call seen in an earlier part (the kept tail's copies of
    the history's lines) is not replayed again."""
    states: dict[str, FileState] = {}
    calls: dict[str, tuple[str, dict[str, Any], str]] = {}
    replayed: set[str] = set()
    for messages, entries in parts:
        fresh: set[str] = set()
        for message in messages:
            stamp = (text(entries[message.entries[-1]].obj, "timestamp") or "") if message.entries else ""
            for index, block in enumerate(message.content):
                kind = kind_of(block)
                if kind == "tool_use" and isinstance(block.get("input"), dict):
                    calls[str(block.get("id"))] = (str(block.get("name")), block["input"], stamp)
                    continue
                call = str(block.get("tool_use_id"))
                if kind != "tool_result" or call not in calls or block.get("is_error") or call in replayed:
                    continue
                fresh.add(call)
                name, tool_input, _ = calls[call]
                raw_path = tool_input.get("file_path") or tool_input.get("notebook_path")
                if not isinstance(raw_path, str):
                    continue
                path = normalise(raw_path, cwd)
                position = message.refs[index][0] if index < len(message.refs) else None
                structured = entries[position].obj.get("toolUseResult") if position is not None else None
                if name == "Read":
                    content = _read_content(block, structured)
                    if content is not None and content.startswith(CONTENTLESS_READ_PREFIXES):
                        continue  # a stub, or a result cleared or folded since, is no content seen: the earlier state stays
                    offset, limit = tool_input.get("offset"), tool_input.get("limit")
                    states[path] = FileState(path, content, stamp, offset, limit, partial=offset is not None or limit is not None)
                elif name == "Write" and isinstance(tool_input.get("content"), str):
                    states[path] = FileState(path, tool_input["content"], stamp, action="written")
                elif name in ("Edit", "MultiEdit"):
                    state = states.get(path)
                    content = _replay(state.content if state else None, name, tool_input)
                    if state is not None and state.partial:  # still the lines the read showed, where they start
                        states[path] = FileState(path, content, stamp, state.offset, state.limit, partial=True, action="edited")
                    else:
                        states[path] = FileState(path, content, stamp, partial=state is None, action="edited")
        replayed |= fresh
    return states


def _read_content(block: dict[str, Any], structured: Any) -> str | None:
    """What a Read showed: the structured result's file content, else its `cat -n` text unnumbered."""
    if isinstance(structured, dict) and isinstance(structured.get("file"), dict):
        content = structured["file"].get("content")
        if isinstance(content, str):
            return content
    result = block.get("content")
    return _strip_line_numbers(result) if isinstance(result, str) else None


def _replay(content: str | None, name: str, tool_input: dict[str, Any]) -> str | None:
    """`content` after an Edit or MultiEdit; None when the edit cannot be replayed on it."""
    edits = tool_input.get("edits") if name == "MultiEdit" else [tool_input]
    for edit in edits if isinstance(edits, list) else []:
        old, new = (edit.get("old_string"), edit.get("new_string")) if isinstance(edit, dict) else (None, None)
        if content is not None and isinstance(old, str) and isinstance(new, str) and old in content:
            content = content.replace(old, new) if edit.get("replace_all") else content.replace(old, new, 1)
        else:
            content = None  # the edit cannot be replayed on what the history showed
    return content


@dataclass(frozen=True)
class PlanState:
    path: str | None  # the plan file, when the history names one (2.0.x ExitPlanMode plans have none)
    text: str | None  # its latest content as the history shows it; None when an edit cannot be replayed
    via: str  # what last set it: "ExitPlanMode", "Write", "Edit", "Read"


def latest_plan(parts: Sequence[Part], cwd: str | None) -> PlanState | None:
    """The session's latest plan: the last ExitPlanMode plan or plan-file Write/Edit/Read, edits
    replayed on what came before, over `parts` in order (file_states). ExitPlanMode counts at its
    call, approved or not (the plan file holds it either way); its 2.1.x result names the file
    (`toolUseResult.filePath`)."""
    plan: PlanState | None = None
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    replayed: set[str] = set()
    for messages, entries in parts:
        fresh: set[str] = set()
        for message in messages:
            for index, block in enumerate(message.content):
                kind = kind_of(block)
                if kind == "tool_use" and isinstance(block.get("input"), dict):
                    call, name, tool_input = str(block.get("id")), str(block.get("name")), block["input"]
                    if call in replayed:
                        continue
                    fresh.add(call)
                    calls[call] = (name, tool_input)
                    if name == "ExitPlanMode" and isinstance(tool_input.get("plan"), str):
                        plan = PlanState(plan.path if plan else None, tool_input["plan"], "ExitPlanMode")
                    continue
                call = str(block.get("tool_use_id"))
                if kind != "tool_result" or call not in calls or call in replayed:
                    continue
                name, tool_input = calls[call]
                position = message.refs[index][0] if index < len(message.refs) else None
                structured = entries[position].obj.get("toolUseResult") if position is not None else None
                if name == "ExitPlanMode":
                    named = structured.get("filePath") if isinstance(structured, dict) else None
                    if plan is not None and isinstance(named, str) and is_plan_file(named):
                        plan = PlanState(normalise(named, cwd), plan.text, plan.via)
                    continue
                raw_path = tool_input.get("file_path")
                if block.get("is_error") or not isinstance(raw_path, str) or not is_plan_file(raw_path):
                    continue
                path = normalise(raw_path, cwd)
                before = plan.text if plan is not None and plan.path in (path, None) else None
                if name == "Write" and isinstance(tool_input.get("content"), str):
                    plan = PlanState(path, tool_input["content"], "Write")
                elif name in ("Edit", "MultiEdit"):
                    plan = PlanState(path, _replay(before, name, tool_input), "Edit")
                elif name == "Read":
                    content = _read_content(block, structured)
                    if content is not None and not content.startswith(CONTENTLESS_READ_PREFIXES):
                        plan = PlanState(path, content, "Read")
        replayed |= fresh
    return plan


def disk_root(settings: RestoreSettings, cwd: str | None, workspace: Workspace | None) -> tuple[str | None, str]:
    """The folder files may be read from, or None and why none may: the caller's --root, else the
    current directory when the transcript's cwd is in it (never a folder the transcript names)."""
    if workspace is None:  # a caller that handed in no disk (a StageContext built without one)
        return None, "no workspace was handed in; --root DIR reads them"
    if settings.root is not None:
        return settings.root, ""
    here = workspace.here()
    if here is None:
        return None, "the current directory is gone; --root DIR reads them"
    if settings.allow_outside_root:
        return here, ""  # asked to read anywhere: the root only resolves relative paths
    if not cwd or not posixpath.isabs(cwd):
        return None, "the transcript names no project folder (cwd); --root DIR reads them"
    if not workspace.holds(here, cwd):
        return None, f"the transcript's project {cwd} is not the current directory; --root DIR reads them"
    return here, ""


@dataclass(frozen=True)
class DiskRead:
    text: str | None  # None: not read (`why` says why)
    why: str
    size: int = 0  # the file's size in bytes
    complete: bool = True  # False: `text` is only the start, enough to tell it is over `max_chars`


class Workspace(Protocol):
    """restore's port to the files on disk (jobs/ports.Disk reads the real ones). The transcript
    names the paths, so the port resolves links before it judges a path to be inside a folder."""

    def here(self) -> str | None:
        """The current directory; None when it is gone."""
        ...

    def holds(self, folder: str, path: str) -> bool:
        """Whether `path` lies in `folder`, links resolved in both (False for a name no file can have)."""
        ...

    def read(self, path: str, root: str, allow_outside: bool, max_chars: int | None = None) -> DiskRead:
        """The file's text if it is under `root` (links resolved) and a regular file, decoded as UTF-8
        with universal newlines; with `max_chars`, at most that many characters are read; else why not."""
        ...


def chars_for(tokens: int) -> int:
    """Characters enough to tell a text is over `tokens` rough tokens: a character is at least one
    UTF-16 unit, and the rough count rounds units / 4."""
    return 4 * tokens + 4


def _numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{number:6d}\t{line}" for number, line in enumerate(text.split("\n"), start))


def plan_restore(
    history: Sequence[Message],
    history_entries: Sequence[Entry],
    tail: Sequence[Message],
    settings: RestoreSettings,
    cwd: str | None,
    plan_mode: bool = False,
    workspace: Workspace | None = None,
    tail_entries: Sequence[Entry] = (),
) -> list[Candidate]:
    """Every candidate, chosen or not and why, in the order they would be written. The files, the plan
    and the todo list are as the history and then the active context (`tail`, indexing `tail_entries`)
    last left them. `plan_mode`: the session ended in plan mode, so a reminder follows the plan.
    `workspace`: the disk (see disk_root)."""
    parts: list[Part] = [(history, history_entries), (tail, tail_entries)]
    states = file_states(parts, cwd)
    stubbed = {
        str(block.get("tool_use_id"))
        for message in tail
        for block in message.content
        if is_tool_result(block) and as_text(block.get("content", "")).startswith(CONTENTLESS_READ_PREFIXES)
    }
    visible = set()
    for message in tail:
        for block in message.content:
            if is_tool_use(block) and block.get("name") == "Read" and isinstance(block.get("input"), dict):
                tool_input = block["input"]
                if str(block.get("id")) in stubbed:
                    continue  # a read answered by the "unchanged" stub, or cleared since, shows nothing: restore the file
                if isinstance(tool_input.get("file_path"), str) and tool_input.get("offset") is None and tool_input.get("limit") is None:
                    visible.add(normalise(tool_input["file_path"], cwd))
    root, no_disk = disk_root(settings, cwd, workspace) if settings.source != "transcript" else (None, "")
    candidates: list[Candidate] = []
    used = 0
    chosen_files = 0
    for state in sorted(states.values(), key=lambda s: s.timestamp, reverse=True):
        name = state.path
        shown = _shown(name, cwd)
        candidate = Candidate("file", shown, None, 0)
        candidates.append(candidate)
        if is_plan_file(name):
            candidate.reason = "a plan file: the latest plan comes back as its own item"
            continue
        if is_memory_file(name):
            candidate.reason = "a memory or rule file: Claude Code reloads it itself"
            continue
        if name in visible:
            candidate.reason = "its full read is still in the kept tail"
            continue
        if chosen_files >= settings.max_files:
            candidate.reason = f"only the {settings.max_files} most recent files come back"
            continue
        text, origin, about, cut = None, "", "", None
        if settings.source in ("disk", "auto"):
            if root is None or workspace is None:
                origin, candidate.disk_skipped = f"not reading files from disk: {no_disk}", True
            else:
                read = workspace.read(name, root, settings.allow_outside_root, chars_for(settings.max_tokens_per_file))
                text, origin, cut = read.text, read.why, None if read.complete else read
        if text is None and settings.source in ("transcript", "auto"):
            if state.content is not None:
                text, origin = state.content, "as last seen in the transcript"
        if text is None:
            candidate.reason = origin or "no content known"
            continue
        tokens = tokens_of(text)
        if cut is not None:
            # Only the start was read: the whole file's tokens, scaled from its size.
            tokens, about = max(tokens, round(tokens * cut.size / max(1, len(text.encode("utf-8"))))), "about "
        candidate.tokens = tokens
        lines = text.count("\n") + 1
        if tokens > settings.max_tokens_per_file or used + min(tokens, settings.max_tokens_per_file) > settings.files_budget:
            over = "over the per-file budget" if tokens > settings.max_tokens_per_file else "over the total budget"
            candidate.text = (
                f"The file {shown} was read before the conversation was summarized, but at {about}{tokens:,} tokens it is "
                f"{over} for restoring. Use the Read tool to see it again."
            )
            candidate.header = f"[restored file reference] {shown} ({about}{tokens:,} tokens, {over}; use Read)"
            candidate.tokens = tokens_of(candidate.text)
            candidate.chosen, candidate.reason = True, f"{over}: its path comes back with a note"
        else:
            from_transcript = origin.startswith("as last seen")
            partial = " partial view," if state.partial and from_transcript else ""
            first = int(state.offset) if from_transcript and isinstance(state.offset, int) and state.offset > 0 else 1
            candidate.text = _numbered(text, first)
            candidate.header = f"[restored file] {shown} (lines {first}-{first + lines - 1},{partial} {tokens:,} tokens, {origin})"
            candidate.chosen, candidate.reason = True, origin
        used += candidate.tokens
        chosen_files += 1
    plan = latest_plan(parts, cwd)
    if plan is not None:
        candidates.append(_plan_candidate(plan, settings, root, cwd, workspace))
    if plan_mode:
        candidates.append(_plan_mode_candidate(plan))
    candidates += _todos([*history, *tail])
    candidates += _skills(history, history_entries)
    return candidates


def _shown(path: str, cwd: str | None) -> str:
    return posixpath.relpath(path, cwd) if cwd and path.startswith(cwd.rstrip("/") + "/") else path


def truncated(text: str, cap: int, marker: str) -> str:
    """`text` if it is within `cap` rough tokens, else its head and `marker`, within `cap` in all."""
    if tokens_of(text) <= cap:
        return text
    cut = max(0, cap * 4 - len(marker))
    # A character may be two UTF-16 units: shed four characters per token still over.
    while cut and (over := tokens_of(text[:cut] + marker) - cap) > 0:
        cut = max(0, cut - 4 * over)
    return text[:cut] + marker


def _plan_candidate(plan: PlanState, settings: RestoreSettings, root: str | None, cwd: str | None, workspace: Workspace | None) -> Candidate:
    """The latest plan, its own item beside the file slots (Claude Code's plan_file_reference): the
    plan file from disk when it is under the root, else the history's last copy of it; at most the
    per-file token cap."""
    name = _shown(plan.path, cwd) if plan.path else "latest plan"
    candidate = Candidate("plan", name, None, 0)
    text, origin = None, ""
    if plan.path is not None and settings.source in ("disk", "auto"):
        if root is None or workspace is None:
            origin, candidate.disk_skipped = "not reading files from disk", True
        else:
            read = workspace.read(plan.path, root, settings.allow_outside_root, chars_for(settings.max_tokens_per_file))
            text, origin = read.text, read.why
    # A plan with no file (a 2.0.x ExitPlanMode) exists only in the transcript, whatever --source says.
    if text is None and (settings.source != "disk" or plan.path is None) and plan.text is not None:
        text, origin = plan.text, f"the latest {plan.via} in the transcript"
    if text is None:
        candidate.reason = origin or f"its last {plan.via} cannot be replayed on what the history showed"
        return candidate
    whole = truncated(text, settings.max_tokens_per_file, PLAN_TRUNCATED)
    cut = f", truncated to {settings.max_tokens_per_file:,} tokens" if whole != text else ""
    candidate.text, candidate.tokens = whole, tokens_of(whole)
    candidate.header = f"[restored plan] {name} ({candidate.tokens:,} tokens, {origin}{cut})"
    candidate.chosen, candidate.reason = True, origin + cut
    return candidate


def _plan_mode_candidate(plan: PlanState | None) -> Candidate:
    """Claude Code's plan_mode attachment, in our words: the session is still planning."""
    where = f" The plan file is {plan.path}; it is the one file you may edit." if plan is not None and plan.path else ""
    text = (
        "The session is in plan mode: the user has not yet approved carrying out a plan. Do not edit files, run commands "
        "that change anything, or commit; explore read-only, write or refine the plan, and call ExitPlanMode to ask the user "
        f"to approve it.{where}"
    )
    return Candidate(
        "plan-mode",
        "plan mode",
        text,
        tokens_of(text),
        True,
        "the session's last permission mode is plan",
        "[restored plan mode] the session is still in plan mode",
    )


def _todos(messages: Sequence[Message]) -> list[Candidate]:
    """The latest TodoWrite list of `messages` (the history, then the active context)."""
    todos = None
    for message in messages:
        for block in message.content:
            if (
                is_tool_use(block)
                and block.get("name") == "TodoWrite"
                and isinstance(block.get("input"), dict)
                and isinstance(block["input"].get("todos"), list)
            ):
                todos = block["input"]["todos"]
    out = []
    if todos:
        text = "\n".join(f"- [{t.get('status', 'pending')}] {t.get('content', '')}" for t in todos if isinstance(t, dict))
        out.append(Candidate("todos", "todo list", text, tokens_of(text), True, "the latest TodoWrite list", f"[restored todo list] {len(todos)} items"))
    return out


def _skills(history: Sequence[Message], entries: Sequence[Entry]) -> list[Candidate]:
    """Skill bodies Claude Code injected (isMeta user lines with sourceToolUseID), newest first."""
    found: list[tuple[str, str]] = []
    for message in history:
        if not message.meta or not message.entries:
            continue
        obj = entries[message.entries[0]].obj
        if not obj.get("sourceToolUseID"):
            continue
        text = "\n".join(str(b.get("text", "")) for b in message.content if is_text(b))
        first = text.split("\n", 1)[0]
        name = first.split(":", 1)[1].strip() if first.startswith("Base directory for this skill:") else first[:60]
        found.append((name, text))
    out, used, full = [], 0, False
    seen: set[str] = set()
    for name, text in reversed(found):
        if name in seen:
            continue  # invoked again later: the newest body is the one that comes back
        seen.add(name)
        text = truncated(text, MAX_TOKENS_PER_SKILL, SKILL_TRUNCATED)
        tokens = tokens_of(text)
        candidate = Candidate("skill", name, text, tokens, header=f"[restored skill] {name} ({tokens:,} tokens)")
        # Claude Code stops at the first skill that would pass the budget: no older one comes back after it.
        full = full or used + tokens > SKILLS_BUDGET
        if full:
            candidate.reason = "over the skills budget"
        else:
            candidate.chosen, candidate.reason = True, "invoked in the history"
            used += tokens
        out.append(candidate)
    return out


def restored_text(candidate: Candidate) -> str:
    return f"{candidate.header}\n{candidate.text}"


def already_restored(tail_entries: Sequence[Entry]) -> bool:
    for entry in tail_entries:
        message = entry.obj.get("message")
        content = message.get("content") if isinstance(message, dict) else entry.obj.get("content")
        if isinstance(content, str) and content.startswith(RESTORED_PREFIX):
            return True
    return False


@dataclass
class RestoreResult:
    candidates: list[Candidate] = field(default_factory=list)
    added: list[dict[str, Any]] = field(default_factory=list)


def restore_objects(candidates: Sequence[Candidate], make: Callable[[str, str | None], dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per chosen item, chained after the last line (`make(text, parent) -> obj`)."""
    out: list[dict[str, Any]] = []
    parent: str | None = None
    for candidate in candidates:
        if candidate.chosen and candidate.text is not None:
            obj = make(restored_text(candidate), parent)
            out.append(obj)
            parent = obj.get("uuid")
    return out


# What Claude Code re-injects after its own compaction, by what the compaction restores
# (core.count.Compaction.restores). No todo list: 2.1.88 brings it back only through reminders.
REINJECTED_KINDS: dict[str, frozenset[ReinjectedKind]] = {
    "files, plan and skills": frozenset({"file", "plan", "plan-mode", "skill"}),
    "plan": frozenset({"plan"}),
    "nothing": frozenset(),
}


def reinjection(history: Sequence[Message], history_entries: Sequence[Entry], restores: str, measure: Callable[[str], int]) -> Reinjection:
    """Claude Code's post-compact attachments, rebuilt from the history with its own rules and
    budgets, each file as the history last showed it (nothing is read from disk), and priced with
    `measure` (the count's calibrated estimator)."""
    kinds = REINJECTED_KINDS.get(restores, frozenset())
    if not kinds:
        return Reinjection(0, (), f"the compaction restores {restores}")
    cwd = next((e.obj["cwd"] for e in reversed(history_entries) if isinstance(e.obj.get("cwd"), str)), None)
    # The mode when the compaction ran: what the lines up to the history's last one recorded.
    end = max((p for m in history for p in m.entries), default=-1) + 1
    in_plan_mode = permission_mode(history_entries[:end]) == "plan"
    candidates = plan_restore(history, history_entries, [], RestoreSettings(source="transcript"), cwd, in_plan_mode)
    items = [
        ReinjectedItem(kind=candidate.kind, name=candidate.name, tokens=measure(candidate.text))
        for candidate in candidates
        if candidate.chosen and candidate.text is not None and candidate.kind in kinds
    ]
    assumed = (
        f"Claude Code restored the {restores} its rules choose ({MAX_FILES} files of at most {MAX_TOKENS_PER_FILE:,} tokens, "
        f"{FILES_BUDGET:,} in all; skills {MAX_TOKENS_PER_SKILL:,} each, {SKILLS_BUDGET:,} in all), each file as the history "
        "last showed it"
    )
    return Reinjection(sum(item.tokens for item in items), tuple(items), assumed)


def split_at_boundary(entries: Sequence[Entry], transcript_format: TranscriptFormat) -> tuple[list[Message], list[Message]] | None:
    """(history before the last compaction, active context after it); None without one in the file."""
    return transcript_format.split_at_compaction(entries)


def restore(
    entries: list[Entry],
    transcript_format: TranscriptFormat,
    settings: RestoreSettings,
    when: str,
    original: tuple[list[Message], Sequence[Entry]] | None = None,
    workspace: Workspace | None = None,
    above: Sequence[Entry] = (),
    first_written: Sequence[Entry] | None = None,
) -> tuple[Outcome, list[Candidate]]:
    """The restore stage: (Outcome, candidates). `original` supplies the history from --from;
    `workspace` the disk (None: nothing is read from it); `above` the lines before `entries`, read
    as part of the transcript but not written (the outcome holds `entries` and what was added);
    `first_written` the lines of `entries` before earlier stages of the same run cleared or folded
    tool results in place (compact's microcompact and collapse), at the same positions: the history
    is read as the session saw it, as Claude Code's file cache holds it whatever was cleared since.
    Any format is planned for (restore --plan reads it); only writing what was chosen needs its editor."""
    everything: Sequence[Entry] = Joined(above, entries) if above else entries
    tail = transcript_format.messages(everything)
    if original is not None:
        history, history_entries = original
    else:
        readable = entries
        if first_written is not None and first_written is not entries and len(first_written) <= len(entries):
            readable = [*first_written, *entries[len(first_written) :]]
        as_seen: Sequence[Entry] = Joined(above, readable) if above else readable
        split = split_at_boundary(as_seen, transcript_format)
        if split is None:
            return Outcome(entries, False, "nothing to restore: no compact boundary (summarize first, or give --from ORIGINAL)"), []
        history, history_entries = split[0], as_seen
    cwd = next((e.obj["cwd"] for e in reversed(history_entries) if isinstance(e.obj.get("cwd"), str)), None)
    # The mode the session ended in: the input's last record, else the original's (--from).
    mode = permission_mode(everything) or (permission_mode(history_entries) if original is not None else None)
    candidates = plan_restore(history, history_entries, tail, settings, cwd, mode == "plan", workspace, everything)
    chosen = [c for c in candidates if c.chosen and c.text is not None]
    active_entries = [everything[p] for m in tail for p in m.entries]
    if already_restored(active_entries):
        return Outcome(entries, False, "nothing to restore: this context was restored already"), candidates
    # Files that would have been read from disk: the note says so, once, and why.
    no_disk = f"; not reading files from disk: {disk_root(settings, cwd, workspace)[1]}" if any(c.disk_skipped for c in candidates) else ""
    if not chosen:
        return Outcome(entries, False, "nothing to restore: no file, plan, plan-mode reminder, skill or todo list to bring back" + no_disk), candidates
    added = editor_of(transcript_format).meta_entries(everything, [restored_text(c) for c in chosen], when)
    tokens = sum(c.tokens for c in chosen)
    labels = {
        "file": ("file", "files"),
        "plan": ("plan", "plans"),
        "plan-mode": ("plan-mode reminder", "plan-mode reminders"),
        "skill": ("skill", "skills"),
        "todos": ("todo list", "todo lists"),
    }
    counts = {kind: sum(1 for c in chosen if c.kind == kind) for kind in labels}
    kinds = ", ".join(f"{n} {labels[k][n != 1]}" for k, n in counts.items() if n)
    report = RestoreExtras(
        stage="restore",
        restored=[c.row() for c in chosen],
        tokens=tokens,
        skipped=[c.row() for c in candidates if not c.chosen],
        disk=no_disk.split(": ", 1)[1] if no_disk else None,
    )
    return Outcome(list(entries) + added, True, f"restored {kinds}{no_disk}", report), candidates


# --- the stage, declared once ----------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreSettings:
    """restore's settings as the command line spells them (see core.setting.Flag)."""

    root: str | None = setting(
        None,
        "--root",
        "Restore reads files from disk only under this folder, links resolved (default: the current directory, and only for a transcript whose cwd "
        "is in it; else the transcript's own copies).",
        parse="folder",
    )
    source: str = setting(
        "auto",
        "--source",
        "Where a restored file's content comes from (auto: disk when the file is under the root, else the transcript).",
        choices=("disk", "transcript", "auto"),
    )
    allow_outside_root: bool = setting(
        False, "--allow-outside-root", "Restore reads files outside the root too (a transcript is untrusted input: off by default)."
    )
    # Claude Code's budgets (no flags: the library and the tests may ask for others).
    max_files: int = MAX_FILES
    max_tokens_per_file: int = MAX_TOKENS_PER_FILE
    files_budget: int = FILES_BUDGET


def run(entries: list[Entry], transcript_format: WritableFormat, settings: RestoreSettings, context: StageContext) -> Outcome:
    """The history above the active context (context.history) is read, and left out of the result."""
    from .fields import iso

    outcome, _ = restore(entries, transcript_format, settings, iso(context.now), context.earlier, context.workspace, context.history, context.original)
    return outcome


STAGE = Stage(
    "restore",
    RestoreSettings,
    run,
    """Bring back, after the last summary, what the model needs to carry on.

    From the history before the last compact boundary (or --from ORIGINAL): the most recently used
    files (at most 5, 5,000 tokens each, 50,000 in all, newest first, none whose full read is still
    in the kept tail; a file over budget comes back as its path with a note; memory and rule files —
    CLAUDE.md, MEMORY.md, .claude/rules/*, ~/.claude/… — never take a slot, Claude Code reloads them),
    the latest plan (the plan file, or the last ExitPlanMode plan; its own item, at most 5,000
    tokens), a plan-mode reminder when the session ended in plan mode, the invoked skills (5,000
    tokens each, 25,000 in all) and the latest todo list. Each is its own
    isMeta user entry whose first line says what it is, e.g.
    "[restored file] src/app.py (lines 1-120, 1,850 tokens, from disk)". Files are read from disk
    only under --root (links resolved); without it, only under the current directory and only when
    the transcript's cwd is in it (a transcript is untrusted: it does not choose what is read).

    Example:  ctxpipe summarize session.jsonl | ctxpipe restore --root ~/src/app > resumed.jsonl
    """,
    # It reads the history above the boundary: every line (in place, when they are written back as read).
    every_line=lambda _settings: True,
    history_in_place=True,
    history_folds=(PERMISSION_MODE, LATEST_TIME),  # the session's last mode; the time lines it adds start after
    runs="after a summary",
)
