"""ctxpipe's hooks in a Claude Code settings object: added, found and taken out again, nothing else touched.

Claude Code reads `hooks` from its settings files as {event: [{"matcher"?: str, "hooks": [{"type":
"command", "command": str, "timeout"?: seconds}]}]}. ctxpipe adds one group per event it serves,
each running `PROGRAM hook NAME`; a hook is ctxpipe's when its command runs `ctxpipe hook NAME` (by
that name or as `python -m ctxpipe`), so install finds its own entries again (a second install changes
nothing; a new PROGRAM replaces the old one's, in a command that is only that: `plain`) and uninstall
takes out only those, with the groups, events and `hooks` object it leaves empty.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Mapping
from typing import Any

# Claude Code's hook event -> the `ctxpipe hook` command that serves it.
HOOKS: dict[str, str] = {
    "PreCompact": "pre-compact",
    "SessionStart": "session-start",
    "PostCompact": "post-compact",
    "UserPromptSubmit": "prompt",
}
TIMEOUT_SECONDS = 60  # Claude Code's own default is 60 too; a compaction waits on the hook
_OURS = re.compile(r"(?:^|[\s/\\\"'])(?:ctxpipe|-m ctxpipe)(?:\.exe)?[\"']? hook (?P<name>[a-z-]+)\b")


def hook_command(program: str, name: str) -> str:
    """What a settings file runs for hook `name`: `program` is how this ctxpipe is started (quoted)."""
    return f"{program} hook {name}"


def ours(hook: Any) -> str | None:
    """The `ctxpipe hook` name a settings hook entry runs, or None when it is not ctxpipe's."""
    command = hook.get("command") if isinstance(hook, Mapping) else None
    found = _OURS.search(command) if isinstance(command, str) else None
    return found.group("name") if found and found.group("name") in HOOKS.values() else None


# A token made only of these is a shell operator: a pipeline, a list, a redirection, a subshell.
_SHELL_OPERATORS = frozenset("|&;<>()")


def plain(command: str, name: str) -> bool:
    """Whether `command` is only ctxpipe's hook `name` with its options: a program that is ctxpipe
    (`…ctxpipe` or `… -m ctxpipe`) then `hook NAME`, quoting that parses, no shell operator, variable
    or substitution. Only such a command is ctxpipe's to rewrite; one the user made more of (`sh -c
    '… || true'`, `bash -lc "…"`, `nice`, `VAR=1 …`, a redirection) is left as it is."""
    if "$" in command or "`" in command:
        return False
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote
        return False
    if any(token and set(token) <= _SHELL_OPERATORS for token in tokens) or "hook" not in tokens:
        return False
    at = tokens.index("hook")
    program, rest = tokens[:at], tokens[at + 1 :]
    if not rest or rest[0] != name:
        return False
    if len(program) == 1:
        return program[0].replace("\\", "/").rsplit("/", 1)[-1] in ("ctxpipe", "ctxpipe.exe")
    # An interpreter, its own flags, then `-m ctxpipe`.
    return len(program) >= 3 and program[-2:] == ["-m", "ctxpipe"] and all(flag.startswith("-") for flag in program[1:-2])


def malformed(settings: Mapping[str, Any]) -> str | None:
    """What in `settings` install could only overwrite, losing what it holds (a `hooks` that is not an
    object, an event's value that is not a list), or None. null is no hooks: nothing to lose."""
    hooks = settings.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, Mapping):
        return f'"hooks" is a {type(hooks).__name__}, not an object of events'
    for event in HOOKS:
        groups = hooks.get(event)
        if groups is not None and not isinstance(groups, list):
            return f'"hooks"."{event}" is a {type(groups).__name__}, not a list of hook groups'
    return None


def _groups(settings: Mapping[str, Any], event: str) -> list[Any]:
    hooks = settings.get("hooks")
    groups = hooks.get(event) if isinstance(hooks, Mapping) else None
    return groups if isinstance(groups, list) else []


def with_ctxpipe(settings: Mapping[str, Any], program: str) -> dict[str, Any]:
    """`settings` with ctxpipe's hook on every event it serves (its own earlier entries replaced in
    place when plain; see `malformed` for what the caller refuses first)."""
    result = copy.deepcopy(dict(settings))
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        hooks = result["hooks"] = {}
    for event, name in HOOKS.items():
        wanted = {"type": "command", "command": hook_command(program, name), "timeout": TIMEOUT_SECONDS}
        groups = hooks.get(event)
        if not isinstance(groups, list):
            groups = hooks[event] = []
        placed = False
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                continue
            for index, entry in enumerate(entries):
                if ours(entry) == name:
                    if not placed and plain(str(entry["command"]), name):
                        entries[index] = _renewed(entry, wanted)
                    placed = True  # one the user wrapped stays as written: the event has ctxpipe's hook
        if not placed:
            groups.append({"hooks": [wanted]})
    return result


def _renewed(entry: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """ctxpipe's entry `entry` run by the program `wanted` names, keeping what the user gave it: the
    options after `hook NAME` (--block-when) and its own timeout."""
    command = str(entry.get("command", ""))
    found = _OURS.search(command)
    options = command[found.end() :] if found else ""
    renewed = {**entry, **wanted, "command": str(wanted["command"]) + options}
    if "timeout" in entry:
        renewed["timeout"] = entry["timeout"]
    return renewed


def without_ctxpipe(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` with every ctxpipe hook taken out, and what that leaves empty."""
    result = copy.deepcopy(dict(settings))
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        return result
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list) or not any(ours(entry) for entry in entries):
                kept_groups.append(group)
                continue
            left = [entry for entry in entries if not ours(entry)]
            if left:
                kept_groups.append({**group, "hooks": left})
        if kept_groups:
            hooks[event] = kept_groups
        elif groups:  # emptied by us (an event the user left empty stays as it was)
            del hooks[event]
    if not hooks and "hooks" in settings and settings["hooks"]:
        del result["hooks"]
    return result


def installed(settings: Mapping[str, Any]) -> dict[str, str]:
    """event -> the command of ctxpipe's hook there, for the events that have one."""
    found = {}
    for event in HOOKS:
        for group in _groups(settings, event):
            entries = group.get("hooks") if isinstance(group, Mapping) else None
            for entry in entries if isinstance(entries, list) else []:
                if ours(entry):
                    found[event] = str(entry["command"])
    return found
