"""Token estimators per content block: Claude Code's rough one and the pieces one (the real tiktoken
engine, built from the BPE data its package ships, is jobs/tokenizers.py: core reads no file).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .blocks import FLAT_KINDS, content_of, data_of, input_of, is_tool_result, kind_of, name_of, text_of, thinking_of
from .fields import read_block
from .jsonl import dumps

IMAGE_TOKENS = 2000  # Claude Code's flat estimate for an image or document block


class TextCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def count_many(self, texts: list[str]) -> list[int]: ...


def js_length(text: str) -> int:
    """JavaScript's String.length: UTF-16 code units (an emoji counts 2)."""
    # surrogatepass: a lone surrogate (legal in JSON, \ud83d) is one code unit in JavaScript too.
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


class RoughCounter:
    """Claude Code's roughTokenCountEstimation: Math.round(text.length / 4), in JavaScript terms."""

    name = "rough"

    def count(self, text: str) -> int:
        return math.floor(js_length(text) / 4 + 0.5)  # Math.round rounds halves up, round() to even

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(text) for text in texts]


def block_texts(block: dict[str, Any]) -> tuple[list[str], int]:
    """The texts a block contributes and its flat token cost (images), by Claude Code's rules."""
    kind = kind_of(block)
    if kind == "text":
        return [text_of(block) or ""], 0
    if kind in FLAT_KINDS:
        return [], IMAGE_TOKENS
    if kind == "tool_result":
        content = content_of(block)
        if isinstance(content, str):
            return [content], 0
        texts: list[str] = []
        flat = 0
        # The blocks inside a result, and inside results nested in it, walked without recursion:
        # a hostile line may nest them as deep as a line can be.
        pending = [content]
        while pending:
            inner = pending.pop()
            for value in inner if isinstance(inner, list) else ():
                item = read_block(value)
                if item is None:
                    continue
                if is_tool_result(item) and not isinstance(content_of(item), str):
                    pending.append(content_of(item))
                    continue
                inner_texts, inner_flat = block_texts(item)
                texts += inner_texts
                flat += inner_flat
        return texts, flat
    if kind == "tool_use":
        return [(name_of(block) or "") + dumps(input_of(block) or {}).decode()], 0
    if kind == "thinking":
        return [thinking_of(block) or ""], 0
    if kind == "redacted_thinking":
        return [data_of(block) or ""], 0
    return [dumps(block).decode()], 0


def estimate_blocks(blocks: Iterable[dict[str, Any]], counter: TextCounter) -> int:
    """Token estimate of content blocks: the counter on their texts plus flat image costs."""
    return sum(estimate_each(list(blocks), counter))


def estimate_each(blocks: list[dict[str, Any]], counter: TextCounter) -> list[int]:
    """The estimate of every block, with all their texts sent to the counter in one batch."""
    owners: list[int] = []
    texts: list[str] = []
    totals: list[int] = []
    for number, block in enumerate(blocks):
        block_text, block_flat = block_texts(block)
        texts += block_text
        owners += [number] * len(block_text)
        totals.append(block_flat)
    for owner, tokens in zip(owners, counter.count_many(texts) if texts else []):
        totals[owner] += tokens
    return totals


PIECE = re.compile(r" ?[A-Za-z]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s")  # what the pieces estimator counts
_WIDE_BLANK = re.compile(r"[^\S\x00-\x7f]")  # a blank outside ASCII (a no-break space, U+3000, …)
_BY_CLASS_FROM = 96  # characters: below about this many the regex is quicker


def _ascii_class(test: Callable[[str], bool]) -> bytes:
    """A bytes.translate table: 1 for the ASCII bytes whose character passes `test`, else 0 (a byte
    of a wider character's UTF-8 is neither letter, digit nor blank: 0 for all three)."""
    return bytes(int(byte < 128 and test(chr(byte))) for byte in range(256))


# `\s` of a str pattern is str.isspace, which in ASCII also takes \x1c-\x1f.
_LETTERS = _ascii_class(str.isalpha)
_BLANKS = _ascii_class(str.isspace)
_SOLID = bytes(1 - blank for blank in _BLANKS)
_NOT_SPACE_BLANKS = _ascii_class(lambda char: char.isspace() and char != " ")
_OTHERS = bytes(int(not (letter or blank or digit)) for letter, blank, digit in zip(_LETTERS, _BLANKS, _ascii_class(str.isdigit)))
_DIGITS_APART = bytes(byte if 48 <= byte <= 57 else 32 for byte in range(256))  # digits kept, all else a space


def count_pieces(text: str) -> int:
    """How many times PIECE matches in `text`, the same figure as the regex gives.

    The regex costs one match per piece (most of a count's time); the pieces follow from where the
    character classes change, which a few passes over the bytes tell: a run of letters or of other
    characters is one piece (with the space before it), a run of digits one per three, a run of
    blanks one piece before the last blank ahead of a solid character, and that last one too unless
    it is a space (which joins the next piece); blanks that end the text are one piece. A blank
    outside ASCII would span several bytes: such a text, and a short one, goes to the regex.
    """
    if len(text) < _BY_CLASS_FROM or (not text.isascii() and _WIDE_BLANK.search(text)):
        return PIECE.subn("", text)[1]
    data = text.encode("utf-8", "surrogatepass")  # one byte per ASCII character; wider ones are "other"

    def marks(table: bytes) -> int:
        return int.from_bytes(data.translate(table), "big")  # one bit per byte; the next character is 8 bits lower

    letters, others, blanks, solid = marks(_LETTERS), marks(_OTHERS), marks(_BLANKS), marks(_SOLID)
    pieces = (letters & ~(letters >> 8)).bit_count() + (others & ~(others >> 8)).bit_count()
    last_before_solid = blanks & (solid << 8)
    pieces += (last_before_solid & (blanks >> 8)).bit_count() + (marks(_NOT_SPACE_BLANKS) & (solid << 8)).bit_count()
    pieces += blanks & 1
    return pieces + sum((len(run) + 2) // 3 for run in data.translate(_DIGITS_APART).split())


class PiecesCounter:
    """Counts tiktoken-style pre-tokenizer pieces (PIECE's matches, see count_pieces).

    Close to a real BPE count on code and English (most pieces are one token) at a fraction of the
    cost; the cheap base of calibrated estimates. A long text is counted on three evenly spaced
    samples and scaled: tool results are homogeneous, and this bounds the cost per block.
    """

    name = "pieces"
    SAMPLE = 1024

    def count(self, text: str) -> int:
        size = len(text)
        if size <= 3 * self.SAMPLE:
            return count_pieces(text)
        middle = (size - self.SAMPLE) // 2
        samples = (text[: self.SAMPLE], text[middle : middle + self.SAMPLE], text[-self.SAMPLE :])
        counted = sum(count_pieces(sample) for sample in samples)
        return round(counted * size / (3 * self.SAMPLE))

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(text) for text in texts]
