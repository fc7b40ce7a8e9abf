"""The texts stages put in place of a tool result's content, declared once: the stages write them,
and the count knows a gap holding one no longer shows what the API was sent."""

PLACEHOLDER = "[Old tool result content cleared]"  # Claude Code's own microcompact text, byte for byte
STUB_PREFIX = "[ctxpipe collapse:"  # the start of collapse's pointer to the later copy
STUB_TAIL = " returned exactly what the later call {later} returned; see that result]"  # its end, naming that copy's call
REPLACED_PREFIXES = (PLACEHOLDER, STUB_PREFIX)
UNCHANGED_STUB = "File unchanged since last read."  # Claude Code's answer to a Read of a file it holds unchanged (2.1.x)
# A Read result that shows no file content: the stub, or a result a stage has cleared or folded.
CONTENTLESS_READ_PREFIXES = (UNCHANGED_STUB, *REPLACED_PREFIXES)
RESTORED_PREFIX = "[restored "  # the start of each text restore brings back (core.restore)
# How Claude Code opens a summary (the claude-code and anthropic editors' summary_preamble).
SUMMARY_PREAMBLE = (
    "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation."
)


def survivor_named(text: str) -> str | None:
    """The call whose result a collapse pointer (STUB_PREFIX … STUB_TAIL) points to, or None when
    `text` is not one."""
    before_id, after_id = STUB_TAIL.split("{later}")
    if not text.startswith(STUB_PREFIX) or not text.endswith(after_id):
        return None
    _, found, later = text[: -len(after_id)].rpartition(before_id)
    return later if found and later and " " not in later else None
