"""The permission mode a Claude Code session was in: a fold over its lines (core.folds), which a file
read in place folds while it is checked and keeps at each change, so that the mode at any line is
known without parsing the lines above it again (restore's last mode, the mode a compaction ran in).

A small module: Claude Code's format folds it for `count`, which most commands import."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .folds import Fold
from .jsonl import Entry, folded

PermissionState = tuple[str | None, Mapping[str, str]]  # the mode so far; the plan tools called, by id


def _permission_step(state: PermissionState, entry: Entry) -> PermissionState:
    obj, (mode, plan_tools) = entry.obj, state
    if obj.get("type") in ("user", "permission-mode") and isinstance(obj.get("permissionMode"), str):
        mode = obj["permissionMode"]
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None  # (a step per line of the history: no calls per block)
        if kind == "tool_use" and block.get("name") in ("EnterPlanMode", "ExitPlanMode"):
            plan_tools = {**plan_tools, str(block.get("id")): str(block.get("name"))}  # a new map: a step keeps the state it was given
        elif kind == "tool_result" and plan_tools and not block.get("is_error") and str(block.get("tool_use_id")) in plan_tools:
            mode = "plan" if plan_tools[str(block.get("tool_use_id"))] == "EnterPlanMode" else "default"
    # The same state when nothing changed (a mode recorded again is no change): a state is kept per change.
    return state if mode == state[0] and plan_tools is state[1] else (mode, plan_tools)


def _no_mode() -> PermissionState:
    return None, {}


# Claude Code 2.1.x records the mode on typed user lines (`permissionMode`) and on `permission-mode`
# lines; an approved ExitPlanMode leaves plan mode and an EnterPlanMode enters it, even when no
# prompt recorded the change afterwards.
PERMISSION_MODE: Fold[PermissionState] = Fold("permission mode", _no_mode, _permission_step, prefixes=True)


def permission_mode(entries: Sequence[Entry]) -> str | None:
    """The permission mode the session was last in (PERMISSION_MODE)."""
    return folded(entries, PERMISSION_MODE)[0]
