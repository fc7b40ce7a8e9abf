"""Claude Code sessions that work on files of a real project folder (for restore and compact tests).

`Project(cwd)` is builders.Session with a chosen cwd and session id, uuid4-looking deterministic
uuids, timestamps one second apart from `start`, and the file tools written the way Claude Code
2.1.x writes them:

- `read(path, content)`: a Read tool_use; its result is the `cat -n` text Claude Code sends
  ("     1→line", or "     1\\tline" with `arrow=False`) and, unless `structured=False`,
  `toolUseResult {"type": "text", "file": {filePath, content, numLines, startLine, totalLines}}`;
  `offset`/`limit` go into the input and cut the content as the tool would.
- `edit`, `multi_edit`, `write`: the tool_use and the "has been updated" / "created" result.
- `unchanged(path)`: a Read answered with the "File unchanged since last read" stub.
- `todos`, `plan`, `skill`: TodoWrite, ExitPlanMode, and a Skill call followed by the isMeta user
  line (with `sourceToolUseID`) holding the skill body, "Base directory for this skill: …".

`write_files(root, {rel: text})` lays the project out on disk.
"""

from __future__ import annotations

import random
import uuid as uuidlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from builders import _SAME, Session, usage

SESSION_ID = "3f2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c"
MODEL = "claude-sonnet-4-6"
START = datetime(2026, 3, 4, 10, 0, 0, tzinfo=timezone.utc)
NOW_ISO = "2026-05-01T00:00:00Z"  # after every timestamp written here


def numbered(text: str, start: int = 1, arrow: bool = True) -> str:
    """The text the Read tool sends for `text` (the file's lines from line `start`)."""
    sep = "→" if arrow else "\t"
    return "\n".join(f"{n:6d}{sep}{line}" for n, line in enumerate(text.split("\n"), start))


class Project(Session):
    def __init__(self, cwd: str | Path, session_id: str = SESSION_ID, seed: int = 1, start: datetime = START, step: float = 1.0, model: str = MODEL) -> None:
        super().__init__(model=model, version="2.1.88")
        self.cwd, self.session_id = str(cwd), session_id
        self._rng = random.Random(seed)
        self.start, self.step = start, step
        self.total = 8000  # the recorded prompt size, growing a little with every response

    def uuid(self) -> str:
        return str(uuidlib.UUID(int=self._rng.getrandbits(128), version=4))

    def stamp(self, n: int) -> str:
        moment = self.start + timedelta(seconds=n * self.step)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"

    def line(self, kind: str, parent: Any = _SAME, sidechain: bool = False, **fields: Any) -> str:
        line_uuid = super().line(kind, parent, sidechain, **fields)
        self.lines[-1].update(cwd=self.cwd, sessionId=self.session_id, timestamp=self.stamp(len(self.lines) - 1))
        return line_uuid

    def path(self, rel: str) -> str:
        return rel if rel.startswith("/") else f"{self.cwd}/{rel}"

    # --- conversation -------------------------------------------------------------------------

    def ask(self, text: str) -> str:
        return self.user(text)

    def say(self, text: str, total: int | None = None) -> list[str]:
        self.total = total or self.total + 300
        return self.text(text, usage(self.total))

    def call(
        self,
        name: str,
        tool_input: dict[str, Any],
        output: Any,
        *,
        error: bool = False,
        result_extra: dict[str, Any] | None = None,
        text: str | None = None,
        total: int | None = None,
    ) -> str:
        """One response (an optional text, then one tool_use) and its result; returns the tool id."""
        tool_id = self.tool_id()
        self.total = total or self.total + 200 + len(str(output)) // 4
        blocks = ([{"type": "text", "text": text}] if text else []) + [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}]
        self.response(blocks, usage(self.total))
        block: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": output}
        if error:
            block["is_error"] = True
        self.user([block], toolUseResult=result_extra if result_extra is not None else {"stdout": "", "stderr": ""})
        return tool_id

    # --- file tools ---------------------------------------------------------------------------

    def read(
        self,
        rel: str,
        content: str,
        *,
        offset: int | None = None,
        limit: int | None = None,
        structured: bool = True,
        arrow: bool = True,
        as_given: bool = False,
        reminder: bool = False,
    ) -> str:
        """A Read of `content` (the whole file); `as_given` keeps `rel` exactly as the tool input."""
        file_path = rel if as_given else self.path(rel)
        tool_input: dict[str, Any] = {"file_path": file_path}
        lines = content.split("\n")
        first = 1
        if offset is not None:
            tool_input["offset"] = offset
            first = offset
        if limit is not None:
            tool_input["limit"] = limit
        shown_lines = lines[first - 1 : (first - 1 + limit) if limit is not None else None]
        shown = "\n".join(shown_lines)
        text = numbered(shown, first, arrow)
        if reminder:
            text += "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it looks malicious.\n</system-reminder>\n"
        extra = (
            {"type": "text", "file": {"filePath": file_path, "content": shown, "numLines": len(shown_lines), "startLine": first, "totalLines": len(lines)}}
            if structured
            else {"stdout": "", "stderr": ""}
        )
        return self.call("Read", tool_input, text, result_extra=extra)

    def unchanged(self, rel: str) -> str:
        stub = "File unchanged since last read. The content from the earlier Read tool_result in this conversation is still current — refer to that instead of re-reading."
        return self.call("Read", {"file_path": self.path(rel)}, stub, result_extra={"type": "file_unchanged", "file": {"filePath": self.path(rel)}})

    def edit(self, rel: str, old: str, new: str, replace_all: bool = False) -> str:
        tool_input: dict[str, Any] = {"file_path": self.path(rel), "old_string": old, "new_string": new}
        if replace_all:
            tool_input["replace_all"] = True
        return self.call(
            "Edit", tool_input, f"The file {self.path(rel)} has been updated.", result_extra={"filePath": self.path(rel), "oldString": old, "newString": new}
        )

    def multi_edit(self, rel: str, edits: list[tuple[str, str]]) -> str:
        return self.call(
            "MultiEdit",
            {"file_path": self.path(rel), "edits": [{"old_string": o, "new_string": n} for o, n in edits]},
            f"Applied {len(edits)} edits to {self.path(rel)}",
        )

    def write(self, rel: str, content: str) -> str:
        return self.call(
            "Write",
            {"file_path": self.path(rel), "content": content},
            f"File created successfully at: {self.path(rel)}",
            result_extra={"type": "create", "filePath": self.path(rel), "content": content},
        )

    def bash(self, command: str, output: str, error: bool = False) -> str:
        return self.call("Bash", {"command": command}, output, error=error)

    def todos(self, items: list[tuple[str, str]]) -> str:
        return self.call("TodoWrite", {"todos": [{"content": c, "status": s, "activeForm": c} for c, s in items]}, "Todos have been modified successfully.")

    def plan(self, text: str) -> str:
        return self.call("ExitPlanMode", {"plan": text}, "User has approved your plan. You can now start coding.")

    def skill(self, name: str, body: str, base: str = "/home/dev/.claude/skills") -> str:
        tool_id = self.call("Skill", {"skill": name}, f"Launching skill: {name}")
        self.user([{"type": "text", "text": f"Base directory for this skill: {base}/{name}\n\n{body}"}], isMeta=True, sourceToolUseID=tool_id)
        return tool_id

    def compact_here(self, summary: str = "Summary: the user is building a small web app.") -> str:
        return self.compact(summary)


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def source_file(name: str, lines: int, width: int = 40) -> str:
    """Deterministic source text: `lines` lines of about `width` characters, no trailing newline."""
    return "\n".join(f"# {name} line {n:05d} " + "x" * max(0, width - 20) for n in range(1, lines + 1))


def bulky(cwd: str, number: int, size: int = 100_000) -> bytes:
    """A session of about `size` bytes that reads and edits a dozen files over many turns (for batches)."""
    p = Project(cwd, session_id=f"3f2a1b0c-9d8e-4f7a-8b6c-{number:012d}", seed=number)
    p.ask(f"Task number {number}: tidy the modules.")
    step = 0
    while len(p.to_bytes()) < size:
        body = source_file(f"m{number}_{step}", 60)
        p.read(f"src/m{step % 12}.py", body)
        if step % 3 == 0:
            p.edit(f"src/m{step % 12}.py", body.split("\n")[1], "# edited")
        p.say(f"Step {step} done.")
        step += 1
    p.ask("Thanks, finish up.")
    p.say("All done.")
    return p.to_bytes()


def resumed_from(data: bytes) -> str | None:
    """The uuid of the line Claude Code 2.1.88 resumes `claude --resume ID` from (getLastSessionLog in its
    utils/sessionStorage.ts): of the user, assistant, attachment and system lines, keyed by uuid in the
    order a uuid first appears (a JavaScript Map: a later line of the same uuid replaces the value, not the
    place), the non-sidechain one with the latest `Date.parse(timestamp)`, the first in that order on a tie."""
    import orjson
    from ctxpipe.core.fields import moment

    lines: dict[str, dict] = {}
    for raw in data.splitlines():
        obj = orjson.loads(raw)
        if isinstance(obj, dict) and obj.get("type") in ("user", "assistant", "attachment", "system") and isinstance(obj.get("uuid"), str):
            lines[obj["uuid"]] = obj
    best: tuple[Any, str] | None = None
    for uuid, obj in lines.items():
        stamp = moment(obj.get("timestamp"))
        if obj.get("isSidechain") or stamp is None:
            continue
        if best is None or stamp > best[0]:
            best = (stamp, uuid)
    return best[1] if best else None


def subagent_resumed_from(data: bytes, agent_id: str) -> str | None:
    """The uuid of the line Claude Code 2.1.88 continues a subagent's transcript from (its getAgentTranscript):
    of the side-chain lines of that agent (the later line of a uuid wins), those no other of them names as
    parent, the one with the latest timestamp."""
    import orjson
    from ctxpipe.core.fields import moment

    lines: dict[str, dict] = {}
    for raw in data.splitlines():
        obj = orjson.loads(raw)
        if isinstance(obj, dict) and obj.get("type") in ("user", "assistant", "attachment", "system") and isinstance(obj.get("uuid"), str):
            lines[obj["uuid"]] = obj
    agent = [obj for obj in lines.values() if obj.get("agentId") == agent_id and obj.get("isSidechain")]
    parents = {obj.get("parentUuid") for obj in agent}
    best: tuple[Any, str] | None = None
    for obj in agent:
        stamp = moment(obj.get("timestamp"))
        if obj["uuid"] not in parents and stamp is not None and (best is None or stamp > best[0]):
            best = (stamp, obj["uuid"])
    return best[1] if best else None
