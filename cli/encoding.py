"""Writing to a terminal whatever its encoding: one place.

A terminal under LC_ALL=C or PYTHONIOENCODING=ascii (or latin-1) cannot encode the line-drawing,
dashes, ellipses and symbols ctxpipe prints; Python would stop the command with UnicodeEncodeError.
The standard streams instead write such a character as an ASCII stand-in ("—" as "-", "…" as "...",
"⛁" as "ctx"), and anything else as "?". JSON output is ASCII-safe already where it matters (orjson
writes UTF-8 bytes straight to the descriptor, which does not go through the stream's encoding).
Kept free of rich and typer: the status line imports it.
"""

from __future__ import annotations

import codecs
import io
import sys

from . import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

STAND_IN = "ctxpipe-stand-in"
ASCII_STAND_INS = {
    "—": "-",
    "–": "-",
    "−": "-",
    "…": "...",
    "·": "-",
    "•": "*",
    "→": "->",
    "←": "<-",
    "≥": ">=",
    "≤": "<=",
    "×": "x",
    "✓": "ok",
    "✗": "x",
    "⛁": "ctx",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "━": "-",
    "─": "-",
    "│": "|",
    "┃": "|",
    "╇": "+",
    "┼": "+",
    "┏": "+",
    "┓": "+",
    "┗": "+",
    "┛": "+",
    "┡": "+",
    "┩": "+",
    "└": "+",
    "┘": "+",
    "┌": "+",
    "┐": "+",
    "├": "+",
    "┤": "+",
    "┬": "+",
    "┴": "+",
    "▏": "|",
    "█": "#",
    "▌": "#",
    "░": ".",
}


def _stand_in(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(ASCII_STAND_INS.get(char, "?") for char in text), error.end


codecs.register_error(STAND_IN, _stand_in)


def tolerant(stream: Any) -> Any:
    """`stream`, set to write what its encoding cannot hold as stand-ins (a UTF encoding holds all)."""
    encoding = codecs.lookup(getattr(stream, "encoding", None) or "utf-8").name
    if not encoding.startswith("utf") and isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors=STAND_IN)
    return stream


def tolerant_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            tolerant(stream)
