"""What a session says happened: the facts the offline summary is written from and the verifier checks.

One reading of the messages (plus the typed input a format keeps outside them, such as Claude
Code's queued prompts) gives: every message the user typed, the files changed, each failure with
the line that names it and whether a later call fixed it, the open work from every source the
session has (todo lists, the task tools, plan files, tracker ids, requests not yet shown done),
the findings and decisions the assistant stated, and what it was doing last. It is linear in the
transcript: every lookup is a dict or set.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .blocks import call_id, content_of, input_of, is_error, is_text, kind_of, name_of, text_of
from .jsonl import as_text
from .model import Message
from .patterns import pattern

EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
# Text Claude Code puts in a user turn that the human did not type.
INJECTED_PREFIXES = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "Caveat:",
    "<system-reminder>",
    "<task-notification>",
    "<ide_selection>",
    "<ide_opened_file>",
    "<ide_diagnostics>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<user-prompt-submit-hook>",
    "<new-diagnostics>",
    "[Request interrupted",
)
REJECTION_REASON = "The user provided the following reason for the rejection:"
DECLINED = ("The user doesn't want to proceed", "The user doesn't want to take this action", "[Request interrupted by user")
DONE_STATES = frozenset({"completed", "complete", "closed", "done", "resolved", "deleted", "cancelled", "canceled", "wontfix"})
PLAN_PATH = pattern(r"(^|/)\.claude/plans/[^/]+\.md$")
NO_OUTPUT = "(no output)"
OPEN_CHECKED = 64  # open failures of one command a later success is checked against (older ones stay open)
LINE_CHARS = 240  # an error line, a finding or a call is cut here: one line each in the summary


def well_formed(text: str) -> str:
    """`text` with each lone surrogate (legal as a JSON escape, not encodable as UTF-8) made U+FFFD:
    a summary quotes transcript text, and what it writes must be valid UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def spaced(text: str) -> str:
    """`text` with each whitespace run made one space, stripped: re.sub(r"\\s+", " ", text).strip()
    (`\\s` and str.split take the same characters, str.isspace's), several times quicker on a long text."""
    return " ".join(text.split())


def folded(text: str, limit: int) -> str:
    """`text` with each whitespace run made one space, stripped: whole when that is at most `limit`
    characters, else a start of it longer than `limit` (a cut at `limit` reads the same). Only as
    much of the text is folded as that needs: a message of megabytes costs its first characters."""
    window = 4 * limit + 64
    while window < len(text):
        # The folded start of the text is the start of the folded text (a run cut at the window's
        # end is one space either way, and stripped): once longer than the limit, it is enough.
        start = spaced(text[:window])
        if len(start) > limit:
            return start
        window *= 4
    return spaced(text)


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    """`text` on one line (whitespace runs become one space), cut at `limit`."""
    flat = folded(text, limit)
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class Typed:
    """A message the user typed: a prompt, a prompt queued while the agent was busy, a slash command
    with arguments, or a shell command typed with `!`."""

    text: str
    source: str  # prompt | queued | command | shell
    position: int  # entry index: typed messages from every source are put in file order


@dataclass
class Failure:
    tool: str
    call: str  # what was called: the command, the file, the tool
    line: str  # the line of the output that names the failure
    position: int
    times: int = 1
    fixed_by: str | None = None  # the later call that succeeded where this one failed
    explanation: str | None = None  # what the assistant concluded about it

    @property
    def resolved(self) -> bool:
        return self.fixed_by is not None


@dataclass
class Task:
    key: str  # the tracker id, the task tool's id, or the todo's text
    text: str
    status: str
    source: str  # todo | task | tracker

    @property
    def state(self) -> str:
        """The status in one spelling: "In Progress" and "in_progress" are one state."""
        return self.status.lower().replace(" ", "_")

    @property
    def open(self) -> bool:
        return self.state not in DONE_STATES


@dataclass
class Request:
    typed: Typed
    done_by: str | None = None  # the first later words of the assistant that say work was done

    @property
    def shown_done(self) -> bool:
        return self.done_by is not None


@dataclass
class Facts:
    typed: list[Typed] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> last action
    edited: list[str] = field(default_factory=list)  # paths edited or written, in order
    failures: list[Failure] = field(default_factory=list)
    todos: list[Task] = field(default_factory=list)  # the last todo list
    tasks: dict[str, Task] = field(default_factory=dict)  # the task tools' tasks and tracker issues, by id
    plan: tuple[str, str] | None = None  # (where it is, its text): the latest plan
    findings: list[str] = field(default_factory=list)  # what the assistant concluded, decided or explained
    declined: list[str] = field(default_factory=list)  # calls the user turned down
    tools: dict[str, int] = field(default_factory=dict)
    programs: dict[str, int] = field(default_factory=dict)  # "mix test", "git push"… -> commands run
    changes: dict[str, int] = field(default_factory=dict)  # path -> edits and writes
    requests: list[Request] = field(default_factory=list)
    last_text: str | None = None
    last_calls: list[str] = field(default_factory=list)
    last_edit: str | None = None
    earlier_summaries: list[str] = field(default_factory=list)

    @property
    def open_tasks(self) -> list[Task]:
        return [task for task in [*self.todos, *self.tasks.values()] if task.open]

    @property
    def unresolved(self) -> list[Failure]:
        return [failure for failure in self.failures if not failure.resolved]

    @property
    def pending_requests(self) -> list[Request]:
        """Requests with no later sign that the work was done: an earlier request is done once the
        assistant says something is done, fixed, pushed… anywhere after it; the latest only when the
        assistant's last words say so (a "continue until all are done" is not done by one task)."""
        return [request for request in self.requests if not request.shown_done]

    @property
    def in_progress(self) -> str | None:
        """The task marked in progress last (a todo, a task tool's task, a tracker issue)."""
        doing = [task for task in self.open_tasks if task.state in ("in_progress", "active", "doing")]
        return doing[-1].text if doing else None

    @property
    def current(self) -> str | None:
        """What was being worked on last: the task in progress, else the last file changed."""
        return self.in_progress or self.last_edit


# --- typed input ---------------------------------------------------------------------------------

_BARE_COMMAND = pattern(r"^/[\w:.-]+$")
_SHELL = pattern(r"^<bash-input>(?P<command>.*?)</bash-input>", re.S)


def _between(text: str, opening: str, closing: str) -> str | None:
    """The text between the first `opening` and the `closing` after it (str.find: a lazy regex
    rescans to the end from every unclosed opening, which a hostile line can repeat)."""
    start = text.find(opening)
    end = text.find(closing, start + len(opening)) if start >= 0 else -1
    return text[start + len(opening) : end] if end >= 0 else None


def typed_parts(content: Any) -> tuple[str, str] | None:
    """(text, source) of what the human typed in a user turn's content (a string or blocks), or None.

    Blocks Claude Code adds (IDE selections, reminders, tool results) are dropped; a slash command
    counts when it carries arguments ("/review the auth module"), not a bare "/clear".
    """
    texts = [content] if isinstance(content, str) else [text_of(b) for b in content if is_text(b)] if isinstance(content, list) else []
    kept: list[str] = []
    for text in texts:
        if not isinstance(text, str) or not text.strip():
            continue
        stripped = text.strip()
        shell = _SHELL.match(stripped)
        if shell and shell.group("command").strip():
            return "! " + shell.group("command").strip(), "shell"
        if stripped.startswith(("<command-name>", "<command-message>")):
            name, args = (_between(stripped, "<command-name>", "</command-name>") or "").strip(), _between(stripped, "<command-args>", "</command-args>")
            if name and args and args.strip():
                return f"{name if name.startswith('/') else '/' + name} {args.strip()}", "command"
            continue
        if stripped.startswith(INJECTED_PREFIXES) or _BARE_COMMAND.match(stripped):
            continue  # a bare "/compact" (as a queued prompt records it) asks nothing of the model
        kept.append(stripped)
    return ("\n".join(kept), "prompt") if kept else None


# --- failures ------------------------------------------------------------------------------------

_NAMES_FAILURE = (
    (
        3,
        pattern(
            r"\bfatal\b|\berror\b\s*[:\[(]|^\s*(?:\*\*\s*)?\(?\w*(?:Error|Exception)\b|\bpanic(?:ked)?\b|\bE\d{3,4}\b|^\s*E\s|\bFAILED\b|"
            r"\bassert(?:ion)?\b.*\bfailed\b|\bSyntaxError\b|\bTraceback\b(?!.*most recent)|^\d+\) test\b|^[●✕✗×]\s",
            re.I,
        ),
    ),
    (
        2,
        pattern(
            r"\b(?:error|errors|failed|failure|fails|cannot|can't|could not|couldn't|unable|not found|no such|denied|refused|invalid|"
            r"undefined|unknown|missing|not (?:a|an) |timed out|timeout|conflict|rejected|violat\w+|aborted?)\b",
            re.I,
        ),
    ),
    (1, pattern(r"^\[[A-Z]\]\s")),  # a linter's finding: "[D] Nested modules could be aliased…"
)
TELLING_LINES = 3  # distinct lines of the best kind an error keeps ("… / …")
_NOISE = pattern(
    r"^(?:exit code \d+|error: process completed with exit code \d+|command failed with exit code \d+|"
    r"warn(?:ing)?\b.*|\s*[│┃|]\s*$|[-=~^_*#─━]{3,}|at .*:\d+|\s*\d+\s*[│|].*|"
    r"(?:checking|compiling|running|getting|downloading|resolving|fetching|building|installing|collecting|generated|"
    r"analysis took|please report)\b.*|.*(?:\.\.\.|…)|[A-Z][a-z]+(?: [A-Za-z]+){0,2})$",
    re.I,
)
_TAGS = pattern(r"</?(?:tool_use_error|error|stderr|stdout)>")


def failure_line(content: Any) -> str:
    """The line of a failed call's output that names the failure: a fatal/error line first, not
    "Exit code 1", not progress or warnings; a Python traceback's exception line rather than its
    frames. The first such line wins (a compiler's first error is the cause of the rest)."""
    if isinstance(content, list):
        content = "\n".join(as_text(b.get("text", "")) for b in content if isinstance(b, dict))
    text = _TAGS.sub("", as_text(content or "")).replace("\\n", "\n")
    # Each line is cut before it is matched: the patterns scan a line, and a line may be megabytes.
    lines = [stripped for line in text.splitlines() if (stripped := line[: 2 * LINE_CHARS * 4].strip().strip("┃│|↘ ").strip())]
    meaningful = [line for line in lines if not _NOISE.match(line)]
    if "Traceback (most recent call last)" in text:  # the exception is named on the traceback's last line
        raised = [line for line in meaningful if re.match(r"^[\w.]*(?:Error|Exception|Interrupt|Exit)\b", line)]
        if raised:
            return one_line(raised[-1])
    for _, names_it in _NAMES_FAILURE:
        chosen: list[str] = []
        for at, line in enumerate(meaningful):
            if names_it.search(line):
                if line.endswith(":") and at + 1 < len(meaningful):  # "validation failed:" names the failure on the next line
                    line += " " + meaningful[at + 1]
                if line not in chosen:
                    chosen.append(line)
                if len(chosen) == TELLING_LINES:
                    break
        if chosen:
            return one_line(" / ".join(chosen), 2 * LINE_CHARS)
    return one_line(meaningful[0] if meaningful else lines[0] if lines else NO_OUTPUT)


# An error the assistant quotes in its words: an exception with its message, a compiler's coded error, a
# failed test's id. Some errors are known only so (a subagent's report, output the assistant summed up).
_QUOTED_ERROR = pattern(
    r"(?P<error>\b[A-Z][A-Za-z]*(?:Error|Exception)\b: [^\n`]{3,200}|\berror(?:\[[A-Za-z]*\d+\]| TS\d+): [^\n`]{3,200}|"
    r"\bFAILED [\w/.:\[\]-]+(?: - [^\n`]{3,160})?)"
)
SAID = "the assistant's words"  # the call of a failure known only from them


def quoted_errors(text: str) -> list[str]:
    """The errors an assistant's text quotes, each on one line, cut at its sentence's end."""
    found = []
    for match in _QUOTED_ERROR.finditer(text):
        error = re.split(r"(?<=[.!?])\s", match.group("error"), maxsplit=1)[0].rstrip(" .,;:")
        if error not in found:
            found.append(one_line(error))
    return found


def describe_call(name: str, tool_input: Any) -> str:
    if isinstance(tool_input, dict):
        for key in ("file_path", "notebook_path", "command", "pattern", "url", "query", "description", "subject"):
            if isinstance(tool_input.get(key), str):
                return one_line(f"{name} {tool_input[key]}", 200)
    return name


_ASSIGNMENT = pattern(r"^[A-Za-z_]\w*=")
_PATHLIKE = pattern(r"[/\\]|\.\w{1,6}$|::")
_SUBCOMMAND = pattern(r"[a-z][\w:.-]*")


def _fix_keys(name: str, tool_input: Any) -> list[tuple[str, frozenset[str]]]:
    """What a later success must match to count as fixing a failure: (key, targets) pairs.

    The key is the same file with the same kind of tool (a Read of a file does not fix a failed
    Edit of it), the same program and subcommand for a command ("mix test", "git push"), else the
    tool. A command chain gives one pair per command (`mix compile && mix credo x.ex`: either may
    be what failed, and a chain that succeeded ran them all). A command's targets are its file
    arguments and inline code (`-c "import x"`): a success fixes a failure when either names no
    target (`pytest -q` after `pytest tests/x.py`) or they share one (`pytest tests/y.py` does not
    fix `pytest tests/x.py`).
    """
    if isinstance(tool_input, dict):
        path = tool_input.get("file_path") or tool_input.get("notebook_path")
        if isinstance(path, str):
            return [(f"{'edit' if name in EDIT_TOOLS else name}:{path}", frozenset())]
        command = tool_input.get("command")
        if isinstance(command, str):
            pairs = []
            for words in _commands(command):
                words = [w for w in words if not _ASSIGNMENT.match(w)]  # FOO=1 make → make
                if not words or words[0] in ("cd", "pushd", "popd", "export", "source", ".", "set"):
                    continue
                rest = [w for w in words[1:] if not w.startswith(("-", "2>", ">", "&"))]
                subcommand = rest[:1] if rest and _SUBCOMMAND.fullmatch(rest[0]) else []  # `git push`, not `pytest tests/x.py`
                code_flags = ("-c", "-e", "--eval") + (("-m",) if words[0].startswith("python") else ())  # `python -m pytest`; not `git commit -m`
                inline = {words[at + 1] for at, w in enumerate(words[:-1]) if w in code_flags}
                targets = {w for w in rest[len(subcommand) :] if _PATHLIKE.search(w)} | inline
                pairs.append(("cmd:" + " ".join(words[:1] + subcommand), frozenset(targets)))
            return pairs
    return [(f"tool:{name}", frozenset())]


def _commands(command: str) -> list[list[str]]:
    """The words of each command a shell line runs, quotes respected: split at `&&`, `||`, `;`,
    `&` and newlines; of a pipeline only its first command (the one doing the work); redirections
    (`2>&1`, `> out.txt`) dropped. Falls back to whitespace when the quoting is unbalanced."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace, lexer.whitespace_split = " \t\r", True
    try:
        tokens = list(lexer)
    except ValueError:
        return [command.split()]
    commands: list[list[str]] = [[]]
    piped = skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token in ("&&", "||", ";", "&", "\n", ";;"):
            commands.append([])
            piped = False
        elif token == "|":
            piped = True
        elif token and set(token) <= set("<>&"):  # a redirection: drop it and its target (and a "2" before it)
            skip = True
            if commands[-1] and commands[-1][-1].isdigit():
                commands[-1].pop()
        elif not piped and token not in ("(", ")"):
            commands[-1].append(token)
    return [words for words in commands if words]


def _fixes(success: frozenset[str], failure: frozenset[str]) -> bool:
    return not success or not failure or bool(success & failure)


# --- open work -----------------------------------------------------------------------------------

_TRACKER_CALL = pattern(r"\b(?P<tool>bd|beads|br)\s+(?P<verb>create|new|update|close|done|reopen|show|start|claim|edit)\b(?P<rest>[^;&|\n]*)")
_GH_CALL = pattern(r"\bgh\s+issue\s+(?P<verb>close|reopen|view|edit|develop)\s+#?(?P<id>\d+)\b")
_TRACKER_ID = pattern(r"(?<![\w./-])([a-z][a-z0-9_]*-[a-z0-9]{2,}(?:\.\d+)*)(?![\w/-])")
_STATUS_FLAG = pattern(r"--status[= ]\s*['\"]?(?P<status>[\w-]+)")
_SHOWN_STATE = pattern(r"\[[^\]]*?\b(?P<state>open|closed|in[_ ]progress|blocked|deferred|done)\s*\]|\bstatus:\s*(?P<field>[\w-]+)", re.I)
_CREATED = pattern(r"\bcreated (?:issue|task)?:?\s*(?P<id>[a-z][a-z0-9_]*-[a-z0-9]{2,}(?:\.\d+)*)", re.I)
_TASK_CREATED = pattern(r"#(?P<id>\d+)")
_TASK_LINE = pattern(r"^[ \t]*#?(?P<id>\d+)[.:)]?[ \t]*\[(?P<status>[\w ]+)\][ \t]*(?P<subject>.+)$", re.M)
_QUOTED = pattern(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")


def _tracker_update(tasks: dict[str, Task], command: str, result: str | None) -> None:
    """Tracker issues (beads `bd`, GitHub issues) the command worked on, with their last known state."""
    for call in _TRACKER_CALL.finditer(command):
        # Ids come before the flags (`bd update ID --add-label needs-review`): a flag's value is no id.
        verb, rest = call.group("verb"), re.split(r"\s-", " " + _QUOTED.sub(" ", call.group("rest")), maxsplit=1)[0]
        ids = _TRACKER_ID.findall(rest)
        if verb in ("create", "new") and result:
            ids = [match.group("id") for match in _CREATED.finditer(result)] or ids
        status = {"close": "closed", "done": "closed", "reopen": "open", "start": "in_progress", "claim": "in_progress", "create": "open", "new": "open"}.get(
            verb
        )
        flag = _STATUS_FLAG.search(call.group("rest"))
        if flag:
            status = flag.group("status")
        elif "--claim" in call.group("rest"):
            status = "in_progress"
        for tracker_id in ids:
            task = tasks.setdefault(tracker_id, Task(tracker_id, tracker_id, "open", "tracker"))
            if verb == "show" and result:
                first = next((line for line in result.splitlines() if tracker_id in line), None)
                if first is None:  # "No issue found", or output filtered down to other lines
                    continue
                title = re.sub(r"\s*\[[^\]]*\]\s*$", "", first.split(tracker_id, 1)[1]).strip(" ·:-–—\t")
                title = re.sub(r"^\[[^\]]*\]\s*[·:–—-]?\s*", "", title)  # "[EPIC] · Title" → "Title"
                if title:
                    task.text = f"{tracker_id}: {one_line(title, 160)}"
                shown = _SHOWN_STATE.search(result[:2000])
                if shown and task.status in ("open", "seen"):
                    task.status = (shown.group("state") or shown.group("field")).lower().replace(" ", "_")
            elif status:
                task.status = status.lower()
    for call in _GH_CALL.finditer(command):
        key = f"#{call.group('id')}"
        task = tasks.setdefault(key, Task(key, f"GitHub issue {key}", "open", "tracker"))
        task.status = {"close": "closed", "reopen": "open"}.get(call.group("verb"), task.status)


def _task_tool(tasks: dict[str, Task], name: str, tool_input: dict[str, Any], result: str | None) -> None:
    """Claude Code 2.1's task tools: TaskCreate makes a task (its result names the id), TaskUpdate
    changes it, TaskList's result is the whole list."""
    if name == "TaskCreate":
        subject = one_line(as_text(tool_input.get("subject") or tool_input.get("description") or ""), 200)
        found = _TASK_CREATED.search(result or "")
        key = f"task {found.group('id') if found else len(tasks) + 1}"
        tasks[key] = Task(key, subject, "pending", "task")
    elif name == "TaskUpdate":
        key = f"task {as_text(tool_input.get('taskId', '')).lstrip('#')}"
        task = tasks.setdefault(key, Task(key, key, "pending", "task"))
        if isinstance(tool_input.get("subject"), str):
            task.text = one_line(tool_input["subject"], 200)
        if isinstance(tool_input.get("status"), str):
            task.status = tool_input["status"]
    elif name == "TaskList" and result:
        for line in _TASK_LINE.finditer(result):
            key = f"task {line.group('id')}"
            tasks[key] = Task(key, one_line(line.group("subject"), 200), line.group("status").strip(), "task")


# --- findings ------------------------------------------------------------------------------------

_NARRATION = pattern(
    r"^(?:(?:ok(?:ay)?|good|great|perfect|excellent|now|next|first|then|alright|all right|sure)[,.!]?\s+)*"
    r"(?:let me|let's|i'll|i will|i'm going to|i am going to|i need to|i should|i want to|i'd like to|time to|going to|"
    r"let us|we'll|we need to|now i|checking|looking|reading|running|searching)\b",
    re.I,
)
_CONCLUDES = pattern(
    r"\b(?:because|since the|caused by|due to|the (?:issue|problem|bug|cause|reason|fix|error|culprit) (?:is|was)|turns out|"
    r"root cause|instead of|switched|decided|chose|choosing|opted|went with|so that|therefore|which means|this means|"
    r"fails? (?:because|when|with)|works now|now works|now passes?|fixed|resolved|the solution|the approach|"
    r"doesn't work|does not work|won't work|can't|cannot|isn't|is not|wasn't|must|requires?|expects?|confirmed|"
    r"likely|probably|known|conflict|comes from|causes?|is what|bug|workaround|trade-?off|the (?:compile |test )?error was|"
    r"all \d+ tests pass|tests? pass(?:es|ed)?|committed|pushed)\b",
    re.I,
)
_STATUS = pattern(r"^(?:all \d+ |the )?(?:\d+ )?(?:tests?|checks?)\b.*\bpass|\b(?:committed|pushed|is done|credo clean)\b", re.I)
_DONE = pattern(
    r"\b(?:done|complete[d]?|finished|implemented|all (?:\d+ )?(?:tests?|checks?) pass(?:ed|es)?|committed and pushed|"
    r"pushed|closed|is (?:now )?in place|fixed|resolved|ready for review|now (?:\w+ )?(?:passes|uses|reads|works|returns|handles|"
    r"supports|calls|shows|runs)|i(?:'ve| have) (?:added|updated|created|written|changed|removed|renamed|moved|made|set up|wired)|"
    r"(?:has|have) been (?:added|updated|created|written|changed|removed|fixed|implemented))\b",
    re.I,
)
_EXPLAINS = pattern(
    r"\b(?:because|due to|caused by|the (?:issue|problem|bug|cause|reason|error|culprit) (?:is|was|here)|turns out|means|"
    r"false positive|instead|doesn't|does not|isn't|is not|wasn't|missing|expects?|requires?|must)\b",
    re.I,
)
# …unless the same words say more is to come ("the time parser is done; the zone parser is next").
_MORE_TO_DO = pattern(r"\b(?:next|remaining|still|left to|not|never|no longer|cannot|unable|failed to|moving on|now (?:the|let|i)|then i|todo)\b|n't\b", re.I)


def says_done(text: str) -> bool:
    """Whether the assistant's words say the work asked for is done."""
    return bool(_DONE.search(text)) and not _MORE_TO_DO.search(text)


_SENTENCE = pattern(r"(?<=[.!?])\s+(?=[A-Z`*\"'(])|\n+")


def findings_of(text: str) -> list[str]:
    """The sentences of an assistant's text that conclude, decide or explain; narration ("Let me…",
    "Now I'll…") and lead-ins to a tool call (ending in ':') are dropped."""
    kept = []
    for sentence in _SENTENCE.split(text):
        sentence = sentence.replace("**", "").replace("__", "").strip().lstrip("-*•> ").strip()  # markdown emphasis is no content
        if len(sentence) < 12 or sentence.endswith(":") or sentence.startswith(("```", "|", "#")) or _NARRATION.match(sentence):
            continue
        if _CONCLUDES.search(sentence):
            kept.append(one_line(sentence, 300))
    return kept


_PLAN_STEP = pattern(r"^\s*(?:[-*+]|\d+[.)])\s*\[ \]\s+(?P<step>\S.*?)\s*$", re.M)


def plan_steps(plan_text: str) -> list[str]:
    """The steps a plan file still has open: its unchecked checklist items (`- [ ] step`)."""
    return list(dict.fromkeys(one_line(match.group("step"), 300) for match in _PLAN_STEP.finditer(plan_text)))


def _plan_after(plan: tuple[str, str] | None, path: str, name: str, tool_input: dict[str, Any]) -> tuple[str, str] | None:
    """The plan file's text after a Write or an Edit of it (an Edit applies to the text the session wrote)."""
    if name == "Write" and isinstance(tool_input.get("content"), str):
        return path, tool_input["content"]
    old, new = tool_input.get("old_string"), tool_input.get("new_string")
    if plan is not None and plan[0] == path and isinstance(old, str) and isinstance(new, str) and old in plan[1]:
        return path, plan[1].replace(old, new) if tool_input.get("replace_all") else plan[1].replace(old, new, 1)
    return plan if plan is not None and plan[0] == path else (path, "")


# --- the walk ------------------------------------------------------------------------------------


def gather(messages: Sequence[Message], side_inputs: Iterable[tuple[int, str | list[Any]]] = ()) -> Facts:
    """Every fact of `messages`; `side_inputs` are (position, content) of typed input the format keeps
    outside its messages (Claude Code's queued prompts), put in order by position."""
    facts = Facts()
    calls: dict[str, tuple[str, Any]] = {}
    by_key: dict[tuple[str, str], Failure] = {}  # (call, line) -> its failure: a repeat is counted, not listed twice
    open_by_fix: dict[str, list[tuple[Failure, frozenset[str]]]] = {}  # fix key -> open failures and the targets they named
    declined_seen: set[str] = set()
    queued = sorted(((position, parts) for position, content in side_inputs if (parts := typed_parts(content))), key=lambda item: item[0])
    next_queued = 0
    seen_findings: set[str] = set()
    edited: set[str] = set()  # facts.edited as a set: a list lookup per edit would be quadratic

    waiting: list[Request] = []  # requests not yet shown done: each leaves once, so the walk stays linear
    said_open: list[Failure] = []  # failures known only from the assistant's words, not yet said fixed

    reply: list[str] = []  # the assistant's latest words since the latest typed message

    def add_typed(typed: Typed) -> None:
        reply.clear()
        facts.typed.append(typed)
        facts.requests.append(Request(typed))
        waiting.append(facts.requests[-1])

    for message in messages:
        position = message.entries[0] if message.entries else -1
        while next_queued < len(queued) and queued[next_queued][0] < position:
            where, (text, _) = queued[next_queued]
            add_typed(Typed(text, "queued", where))
            next_queued += 1
        if message.compact_summary:
            facts.earlier_summaries.append("\n".join(text_of(b) or "" for b in message.content if is_text(b)).strip())
            continue
        if message.role == "user" and not message.meta:
            parts = typed_parts(message.content)
            if parts:
                add_typed(Typed(parts[0], parts[1], position))
        for block in message.content:
            kind = kind_of(block)
            if kind == "tool_use":
                name, tool_input = name_of(block) or "", input_of(block)
                calls[str(call_id(block))] = (name, tool_input)
                facts.tools[name] = facts.tools.get(name, 0) + 1
                facts.last_calls = (facts.last_calls + [describe_call(name, tool_input)])[-5:]
                if not isinstance(tool_input, dict):
                    continue
                path = tool_input.get("file_path") or tool_input.get("notebook_path")
                if isinstance(path, str):
                    action = "read" if name == "Read" else "written" if name == "Write" else "edited" if name in EDIT_TOOLS else name
                    earlier = facts.files.get(path, "")
                    if action == "read" and earlier.startswith(("edited", "written")):
                        action = f"{earlier.split(' ')[0]}, then read"  # a read must not hide a change
                    facts.files[path] = action
                    if name in EDIT_TOOLS:
                        facts.changes[path] = facts.changes.get(path, 0) + 1
                        if path not in edited:
                            edited.add(path)
                            facts.edited.append(path)
                        facts.last_edit = path
                        if PLAN_PATH.search(path):
                            facts.plan = _plan_after(facts.plan, path, name, tool_input)
                if isinstance(tool_input.get("command"), str):
                    for key, _ in _fix_keys(name, tool_input):
                        program = key.removeprefix("cmd:")
                        facts.programs[program] = facts.programs.get(program, 0) + 1
                if name == "TodoWrite" and isinstance(tool_input.get("todos"), list):
                    facts.todos = [
                        Task(as_text(t.get("content", "")), one_line(as_text(t.get("content", "")), 300), as_text(t.get("status", "") or "pending"), "todo")
                        for t in tool_input["todos"]
                        if isinstance(t, dict) and t.get("content")
                    ]
            elif kind == "tool_result":
                name, tool_input = calls.get(str(call_id(block)), ("?", None))
                content = content_of(block)
                result = (
                    content
                    if isinstance(content, str)
                    else "\n".join(as_text(b.get("text", "")) for b in content if isinstance(b, dict))
                    if isinstance(content, list)
                    else ""
                )
                if isinstance(tool_input, dict):
                    if name.startswith("Task") and name not in ("Task", "TaskOutput"):
                        _task_tool(facts.tasks, name, tool_input, result)
                    if isinstance(tool_input.get("command"), str) and not is_error(block):
                        _tracker_update(facts.tasks, tool_input["command"], result)
                if name == "ExitPlanMode" and isinstance(tool_input, dict) and isinstance(tool_input.get("plan"), str) and not is_error(block):
                    facts.plan = ("the plan presented with ExitPlanMode", tool_input["plan"])  # approved: a rejected plan is no plan
                keys = _fix_keys(name, tool_input)
                if is_error(block):
                    if result.lstrip().startswith(DECLINED):
                        declined = describe_call(name, tool_input)
                        if declined not in declined_seen:
                            declined_seen.add(declined)
                            facts.declined.append(declined)
                        reason = result.partition(REJECTION_REASON)[2].strip()
                        if reason:  # typed by the user when declining: a message like any other
                            add_typed(Typed(reason, "prompt", position))
                        continue
                    failure = Failure(name, describe_call(name, tool_input), failure_line(content), position)
                    known = by_key.get((failure.call, failure.line))
                    if known is not None:
                        known.times += 1
                        if known.resolved:  # it came back after a fix: open again
                            known.fixed_by = None
                            for key, targets in keys:
                                open_by_fix.setdefault(key, []).append((known, targets))
                        continue
                    by_key[(failure.call, failure.line)] = failure
                    facts.failures.append(failure)
                    for key, targets in keys:
                        open_by_fix.setdefault(key, []).append((failure, targets))
                else:
                    for key, targets in keys:
                        if key not in open_by_fix:
                            continue
                        still_open = []
                        for failure, named in open_by_fix.pop(key):
                            if failure.resolved:
                                continue  # fixed through another command of its chain
                            if _fixes(targets, named):
                                failure.fixed_by = describe_call(name, tool_input)
                            else:
                                still_open.append((failure, named))
                        if still_open:  # only the latest few are checked again: a success costs a bounded time
                            open_by_fix[key] = still_open[-OPEN_CHECKED:]
            elif kind == "text" and message.role == "assistant":
                text = (text_of(block) or "").strip()
                if not text:
                    continue
                facts.last_text = text
                reply[:] = [text]
                done = says_done(text)
                if done:  # an error known from the assistant's words is fixed when its words say so
                    for failure in said_open:
                        failure.fixed_by = one_line(text, 160)
                    said_open.clear()
                for error in quoted_errors(text) if not done else []:
                    normal = error.lower()
                    if any(normal in known.line.lower() or known.line.lower() in normal for known in facts.failures[-OPEN_CHECKED:]):
                        continue  # a failure a call showed already, or this one again
                    said = Failure("assistant", SAID, error, position)
                    facts.failures.append(said)
                    said_open.append(said)
                if waiting and done:
                    for request in waiting:
                        request.done_by = text
                    waiting.clear()
                found = findings_of(text)
                for finding in found:
                    if finding not in seen_findings:
                        seen_findings.add(finding)
                        facts.findings.append(finding)
                for failure in facts.failures[-3:]:  # the assistant's first words after a failure, if they explain it
                    if failure.explanation is None and failure.position <= position:
                        failure.explanation = next((f for f in found if _EXPLAINS.search(f)), "")
    while next_queued < len(queued):
        where, (text, _) = queued[next_queued]
        add_typed(Typed(text, "queued", where))
        next_queued += 1
    _drop_echoed_queue(facts)
    if facts.requests:
        facts.requests[-1].done_by = reply[0] if reply and says_done(reply[0]) else None
    return facts


def _drop_echoed_queue(facts: Facts) -> None:
    """A queued prompt that a later line repeats (a user line or attachment written when the queue
    was drained) is one message: the later one is kept."""

    if all(typed.source != "queued" for typed in facts.typed):
        return  # nothing queued (most sessions): no text to fold
    normal = [spaced(typed.text) for typed in facts.typed]
    last_seen: dict[str, int] = {}
    for typed, text in zip(facts.typed, normal):
        last_seen[text] = max(typed.position, last_seen.get(text, -1))
    echoed = {id(t) for t, text in zip(facts.typed, normal) if t.source == "queued" and last_seen[text] > t.position}
    if echoed:
        facts.typed = [t for t in facts.typed if id(t) not in echoed]
        facts.requests = [r for r in facts.requests if id(r.typed) not in echoed]


def chosen_findings(findings: Sequence[str], explanations: int = 25, statuses: int = 5) -> list[str]:
    """The findings worth a summary's room, in order: every explanation or decision (the latest
    `explanations`), and only the latest few progress reports ("All 31 tests pass.")."""
    status = [f for f in findings if _STATUS.search(f)]
    keep = set(status[-statuses:]) | set([f for f in findings if not _STATUS.search(f)][-explanations:])
    return [f for f in findings if f in keep]
