"""The `context_management` request parameter that makes the Anthropic API clear context server-side.

Beta `context-management-2025-06-27` lets a Messages API request carry
`context_management: {"edits": [...]}`; the server then clears old tool uses
(`clear_tool_uses_20250919`) and old thinking (`clear_thinking_20251015`) before the model sees the
prompt, and with beta `compact-2026-01-12` summarises it (`compact_20260112`). This module turns
what a transcript shows (the tools it uses, whether it thinks, its size, its autocompact threshold)
and the user's choices into that fragment, with a line of explanation for every value. Pure: no I/O.

Defaults mirror what ctxpipe does offline: clearing starts at the autocompact threshold, the 5 most
recent tool uses are kept (microcompact's keep-recent), and tools whose results must never be cleared
(Task/Agent subagent reports, MCP tools) are excluded. The thinking edit comes first in the list:
the API rejects `clear_thinking_20251015` placed after another edit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from .blocks import is_thinking, is_tool_use, name_of
from .model import Message
from .setting import setting

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"

DEFAULT_KEEP_TOOL_USES = 5  # microcompact's keepRecent
DEFAULT_COMPACT_TRIGGER = 150_000  # the API's own default for compact_20260112
API_DEFAULT_TRIGGER = 100_000  # the API's default for clear_tool_uses_20250919, used when autocompact is off

SUBAGENT_TOOLS = frozenset({"Task", "Agent"})
MCP_PREFIX = "mcp__"

ThinkingKeep = Union[int, Literal["all"]]


@dataclass(frozen=True)
class ApiEditsOptions:
    """What the user asked for; None means "derive it from the transcript". Each field carries its
    `ctxpipe api-edits` flag (core.setting.setting): the command's options are built from them."""

    trigger_tokens: int | None = setting(
        None, "--trigger", "Clear tool uses once the prompt reaches N input tokens (default: the transcript's autocompact threshold).", min=1
    )
    trigger_tool_uses: int | None = setting(None, "--trigger-tool-uses", "Clear once the prompt holds N tool uses, instead of a token trigger.", min=1)
    keep: int | None = setting(None, "--keep", "Keep the N most recent tool uses (default 5, as microcompact).", min=1)  # None: DEFAULT_KEEP_TOOL_USES
    # The server's parameter (the API's default when left out), not microcompact's --clear-at-least.
    clear_at_least: int | None = setting(None, "--clear-at-least", "Clear only if at least N input tokens go (worth a cache break).", min=1)
    exclude_tools: tuple[str, ...] = setting(  # added to the derived ones
        (),
        "--exclude-tool",
        "Never clear this tool's uses (repeatable; Task/Agent and mcp__ tools in the transcript are excluded already).",
        metavar="NAME",
        repeatable=True,
    )
    clear_tool_inputs: bool = setting(False, "--clear-tool-inputs", "Clear the inputs of cleared tool uses too.")
    clear_tool_inputs_for: tuple[str, ...] = setting(
        (), "--clear-tool-inputs-for", "Clear the inputs of this tool's cleared uses (repeatable).", metavar="NAME", repeatable=True
    )
    thinking: bool | None = setting(  # None: when the transcript has thinking
        None, "--thinking", "Add or leave out the thinking edit (default: when the transcript has thinking blocks).", off="--no-thinking"
    )
    thinking_keep: ThinkingKeep = setting(
        "all", "--thinking-keep", "Thinking to keep: 'all' (as Claude Code sends) or the N most recent assistant turns.", metavar="all|N", parse="turns"
    )
    compact: bool = setting(False, "--compact", "Add the server-side compaction edit (beta compact-2026-01-12).")
    compact_trigger: int | None = setting(  # None: DEFAULT_COMPACT_TRIGGER
        None, "--compact-trigger", "Compact once the prompt reaches N input tokens (default 150,000).", min=1
    )
    compact_instructions: str | None = setting(None, "--compact-instructions", "Extra instructions for the server's summary.", metavar="TEXT")
    pause_after_compaction: bool = setting(False, "--pause-after-compaction", "Stop the response after the compaction block.")

    def __post_init__(self) -> None:
        for name in ("trigger_tokens", "trigger_tool_uses", "clear_at_least"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        if self.trigger_tokens is not None and self.trigger_tool_uses is not None:
            raise ValueError("give a trigger in input tokens or in tool uses, not both")
        if self.keep is not None and self.keep < 1:
            raise ValueError(f"keep must be at least 1 (the most recent tool use is never cleared), not {self.keep}")
        if self.clear_tool_inputs and self.clear_tool_inputs_for:
            raise ValueError("clear_tool_inputs clears every tool's inputs; do not also name tools")
        if self.thinking_keep != "all" and (isinstance(self.thinking_keep, bool) or not isinstance(self.thinking_keep, int) or self.thinking_keep < 1):
            raise ValueError(f"thinking_keep must be 'all' or a number of turns of at least 1, not {self.thinking_keep!r}")
        if self.compact_trigger is not None and self.compact_trigger < 1:
            raise ValueError(f"compact_trigger must be at least 1, not {self.compact_trigger}")


@dataclass(frozen=True)
class ApiEdits:
    """The request fragment, and why each value was chosen."""

    request: dict[str, Any]
    explanations: tuple[str, ...] = field(default_factory=tuple)

    @property
    def betas(self) -> list[str]:
        return list(self.request["betas"])

    @property
    def edits(self) -> list[dict[str, Any]]:
        return list(self.request["context_management"]["edits"])


def parse_thinking_keep(text: str) -> ThinkingKeep:
    """'all' or a whole number of turns ≥ 1; ValueError otherwise."""
    cleaned = text.strip().lower()
    if cleaned == "all":
        return "all"
    try:
        turns = int(cleaned)
    except ValueError:
        raise ValueError(f"expected 'all' or a number of turns, not {text!r}") from None
    if turns < 1:
        raise ValueError(f"the number of thinking turns to keep must be at least 1, not {turns}")
    return turns


def never_cleared(tool_names: Iterable[str]) -> list[str]:
    """The tools of `tool_names` whose results must survive: subagent reports and MCP tools, sorted."""
    return sorted({name for name in tool_names if name in SUBAGENT_TOOLS or name.startswith(MCP_PREFIX)})


def transcript_facts(messages: Sequence[Message]) -> tuple[tuple[str, ...], int]:
    """The tool names used in `messages` (first use first, once each) and the number of thinking blocks."""
    names: dict[str, None] = {}
    thinking = 0
    for message in messages:
        if message.role != "assistant":
            continue
        for block in message.content:
            if is_tool_use(block):
                name = name_of(block)
                if name is not None:
                    names.setdefault(name, None)
            elif is_thinking(block):
                thinking += 1
    return tuple(names), thinking


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def build_api_edits(
    options: ApiEditsOptions = ApiEditsOptions(),
    *,
    tool_names: Sequence[str] = (),
    thinking_blocks: int = 0,
    tokens: int | None = None,
    model: str | None = None,
    autocompact_threshold: int | None = None,
) -> ApiEdits:
    """The `{"betas": [...], "context_management": {"edits": [...]}}` fragment for one transcript.

    `tool_names`, `thinking_blocks`, `tokens` and `model` describe the transcript's active context;
    `autocompact_threshold` is its autocompact level (None when autocompact is off).
    """
    explain: list[str] = []
    context = f"{tokens:,} tokens" if tokens is not None else "an unknown number of tokens"
    explain.append(f"active context: {context}, model {model or 'unknown'}, tools used: {', '.join(tool_names) or 'none'}")
    edits: list[dict[str, Any]] = []
    kept = DEFAULT_KEEP_TOOL_USES if options.keep is None else options.keep

    # --- clear_thinking_20251015: first in the list, as the API requires ------------------------
    if options.thinking is None:
        with_thinking = thinking_blocks > 0
        why = (
            f"the active context holds {thinking_blocks} thinking block{'s' if thinking_blocks != 1 else ''}"
            if with_thinking
            else "the active context holds no thinking blocks (--thinking adds it)"
        )
    else:
        with_thinking = options.thinking
        why = "--thinking" if with_thinking else "--no-thinking"
    if with_thinking:
        keep: Any = "all" if options.thinking_keep == "all" else {"type": "thinking_turns", "value": options.thinking_keep}
        edits.append({"type": CLEAR_THINKING, "keep": keep})
        explain.append(f"{CLEAR_THINKING}: {why}; listed first, as the API requires when edits are combined")
        if keep == "all":
            explain.append('  keep "all": every thinking block stays (what Claude Code sends; the cached prefix is never broken)')
        else:
            explain.append(
                f"  keep {options.thinking_keep} thinking turn{'s' if options.thinking_keep != 1 else ''}: older thinking is cleared (--thinking-keep)"
            )
    else:
        explain.append(f"{CLEAR_THINKING} left out: {why}")
        if options.thinking_keep != "all":
            explain.append(f"  note: keeping {options.thinking_keep} thinking turns has no effect without the thinking edit")

    # --- clear_tool_uses_20250919 -----------------------------------------------------------------
    edit: dict[str, Any] = {"type": CLEAR_TOOL_USES}
    explain.append(f"{CLEAR_TOOL_USES}: clear old tool uses and results server-side")
    if options.trigger_tool_uses is not None:
        edit["trigger"] = {"type": "tool_uses", "value": options.trigger_tool_uses}
        explain.append(f"  trigger {options.trigger_tool_uses:,} tool uses: --trigger-tool-uses")
        if options.trigger_tool_uses <= kept:
            explain.append(f"  note: with {kept} tool uses kept, a trigger of {options.trigger_tool_uses} tool uses leaves nothing to clear when it fires")
    else:
        if options.trigger_tokens is not None:
            value, source = options.trigger_tokens, "--trigger"
        elif autocompact_threshold is not None:
            value, source = autocompact_threshold, f"the autocompact threshold for {model or 'an unknown model'}, where Claude Code would compact"
        else:
            value, source = API_DEFAULT_TRIGGER, "autocompact is off, so the API's own default"
        edit["trigger"] = {"type": "input_tokens", "value": value}
        explain.append(f"  trigger {value:,} input tokens: {source}")
        if tokens is not None:
            if tokens >= value:
                explain.append(f"  note: the active context ({tokens:,}) is already past the trigger; the next request clears")
            else:
                explain.append(f"  the active context ({tokens:,}) is {value - tokens:,} tokens below the trigger")
    edit["keep"] = {"type": "tool_uses", "value": kept}
    keep_source = "--keep" if options.keep is not None else "the default, as microcompact keeps the 5 most recent"
    explain.append(f"  keep the {kept} most recent tool use{'s' if kept != 1 else ''}: {keep_source}")
    if options.clear_at_least is not None:
        edit["clear_at_least"] = {"type": "input_tokens", "value": options.clear_at_least}
        explain.append(f"  clear_at_least {options.clear_at_least:,} input tokens: --clear-at-least (clear only when it is worth a cache break)")
        trigger = edit["trigger"]
        if trigger["type"] == "input_tokens" and options.clear_at_least >= trigger["value"]:
            explain.append(
                f"  note: clearing at least {options.clear_at_least:,} of a {trigger['value']:,}-token prompt can never happen; the edit will not fire"
            )
    derived = never_cleared(tool_names)
    excluded = _unique([*derived, *options.exclude_tools])
    if excluded:
        edit["exclude_tools"] = excluded
        if derived:
            explain.append(f"  exclude_tools {', '.join(derived)}: used in the transcript and never cleared (subagent reports, MCP tools)")
        if options.exclude_tools:
            explain.append(f"  exclude_tools {', '.join(_unique(options.exclude_tools))}: --exclude-tool")
    else:
        explain.append("  no exclude_tools: the transcript uses no Task/Agent or mcp__ tools, and no --exclude-tool was given")
    if options.clear_tool_inputs:
        edit["clear_tool_inputs"] = True
        explain.append("  clear_tool_inputs true: --clear-tool-inputs (the inputs of cleared tool uses go too)")
    elif options.clear_tool_inputs_for:
        edit["clear_tool_inputs"] = _unique(options.clear_tool_inputs_for)
        explain.append(f"  clear_tool_inputs {', '.join(edit['clear_tool_inputs'])}: --clear-tool-inputs-for")
    edits.append(edit)

    # --- compact_20260112 -------------------------------------------------------------------------
    betas = [CONTEXT_MANAGEMENT_BETA]
    if options.compact:
        compact_at = DEFAULT_COMPACT_TRIGGER if options.compact_trigger is None else options.compact_trigger
        compact: dict[str, Any] = {"type": COMPACT, "trigger": {"type": "input_tokens", "value": compact_at}}
        source = "--compact-trigger" if options.compact_trigger is not None else "the API's own default, written out"
        explain.append(f"{COMPACT}: --compact; needs beta {COMPACT_BETA}")
        explain.append(f"  trigger {compact_at:,} input tokens: {source}")
        if options.compact_instructions is not None:
            compact["instructions"] = options.compact_instructions
            explain.append("  instructions: --compact-instructions")
        if options.pause_after_compaction:
            compact["pause_after_compaction"] = True
            explain.append("  pause_after_compaction: --pause-after-compaction (the response stops after the compaction block)")
        trigger = edit["trigger"]
        if trigger["type"] == "input_tokens" and compact_at <= trigger["value"]:
            explain.append(f"  note: compaction at {compact_at:,} comes before tool clearing at {trigger['value']:,}, so it acts first")
        edits.append(compact)
        betas.append(COMPACT_BETA)
    explain.append(f"betas: {', '.join(betas)}")
    return ApiEdits({"betas": betas, "context_management": {"edits": edits}}, tuple(explain))


__all__ = [
    "API_DEFAULT_TRIGGER",
    "COMPACT_BETA",
    "CONTEXT_MANAGEMENT_BETA",
    "DEFAULT_COMPACT_TRIGGER",
    "DEFAULT_KEEP_TOOL_USES",
    "ApiEdits",
    "ApiEditsOptions",
    "build_api_edits",
    "never_cleared",
    "parse_thinking_keep",
    "transcript_facts",
]
