"""Text from a transcript, made safe to show on a terminal.

A transcript is untrusted: a model name, tool name, file path, id or timestamp can hold an escape
sequence (`ESC ]0;title BEL` retitles the window, `ESC [2J` clears it, OSC 8 makes a link), a
carriage return that overwrites what was printed, or a bidi override that shows text in another
order than it reads (Trojan Source). Every human-facing line built from such text goes through
`shown` once, at the point where it is printed. JSON reports keep the true values: JSON escapes
the C0 controls itself, and `json_shown` writes the rest as \\u escapes, which decode to the same.

Rich markup is the other half: the consoles in cli/streams.py interpret no markup, emoji codes or
highlighting, and styled output is built from `rich.text.Text`, so `[link=…]` in a model name is
only text. `shown_text` gives a rich Text that is both, for table cells and styled lines.
"""

from __future__ import annotations

import re
from functools import cache

from . import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

# What JSON writes raw but a terminal acts on: DEL, C1 controls, the bidi marks, embeddings,
# overrides and isolates, the line and paragraph separators; and lone surrogates (legal in JSON
# as escapes, but they cannot be encoded: printing one would crash).
_RAW_IN_JSON = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
# Shown text escapes the C0 controls too (tab and newline included: a message stays one line and
# says what the file holds); JSON escapes those itself.
UNSAFE_CLASS = f"[\x00-\x1f{_RAW_IN_JSON}]"
UNSAFE_IN_JSON_CLASS = f"[{_RAW_IN_JSON}]"
SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


# Every character these classes hold is one str.isprintable refuses (tests/test_terminal_safety.py
# holds the two together), so printable text has nothing to escape: the patterns are compiled only
# when a text may (two classes of wide characters cost the status line's light start about 1 ms).
@cache
def unsafe() -> re.Pattern[str]:
    return re.compile(UNSAFE_CLASS)


@cache
def unsafe_in_json() -> re.Pattern[str]:
    return re.compile(UNSAFE_IN_JSON_CLASS)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def shown(text: object) -> str:
    """`text` as one visible line: each unsafe character written as its escape (ESC as `\\x1b`)."""
    value = text if isinstance(text, str) else str(text)
    return value if value.isprintable() else unsafe().sub(_escape, value)


def json_shown(text: str) -> str:
    """JSON text with the characters of UNSAFE_IN_JSON_CLASS written as \\u escapes: the same values,
    inert on a terminal (and valid UTF-8 when a string holds a lone surrogate)."""
    return text if text.isprintable() else unsafe_in_json().sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def json_shown_bytes(written: bytes) -> bytes:
    """json_shown of JSON written as UTF-8, as UTF-8: the same bytes when there is nothing to
    escape (every character of UNSAFE_IN_JSON_CLASS is DEL or above, so ASCII without DEL holds
    none, and a report of 100,000 findings is not decoded, searched and encoded again)."""
    if written.isascii() and b"\x7f" not in written:
        return written
    return json_shown(written.decode()).encode()


def shown_text(text: object, style: str = "") -> Any:
    """A rich Text of `shown(text)`: never read as markup, whatever it holds."""
    from rich.text import Text

    return Text(shown(text), style=style)
