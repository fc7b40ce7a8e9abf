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
    return estimate_with_flats(blocks, counter)[0]


def estimate_with_flats(blocks: list[dict[str, Any]], counter: TextCounter) -> tuple[list[int], list[int]]:
    """The estimate of every block and the flat part of it (images), in one walk (block_texts's
    figures), with all their texts sent to the counter in one batch."""
    owners: list[int] = []
    texts: list[str] = []
    flats: list[int] = []
    for number, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") == "text":
            # block_texts's first case, inline: a text block is the commonest, and a call per block
            # is most of the walk's time on a line of many blocks.
            value = block.get("text")
            texts.append(value if isinstance(value, str) else "")
            owners.append(number)
            flats.append(0)
            continue
        block_text, block_flat = block_texts(block)
        texts += block_text
        owners += [number] * len(block_text)
        flats.append(block_flat)
    totals = list(flats)
    for owner, tokens in zip(owners, counter.count_many(texts) if texts else []):
        totals[owner] += tokens
    return totals, flats


PIECE = re.compile(r" ?[A-Za-z]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s")  # what the pieces estimator counts
# Every character outside ASCII that str.isspace (and so `\s`) takes, in the Unicode of Python 3.11 (a test
# holds the list to the running Python's), and their UTF-8: found in the bytes, quicker than in the text.
WIDE_BLANKS = "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_WIDE_BLANK = re.compile(b"|".join(re.escape(char.encode()) for char in WIDE_BLANKS))
_BY_CLASS_FROM = 96  # characters: below about this many the regex is quicker


def _byte_codes(code: Callable[[str], int]) -> bytes:
    """A bytes.translate table giving each ASCII byte its character's code; a byte of a wider
    character's UTF-8 is neither letter, digit nor blank (code of "\x80": other)."""
    return bytes(code(chr(byte) if byte < 128 else "\x80") for byte in range(256))


def _word_code(char: str) -> int:
    return 0 if char.isspace() or (char.isascii() and char.isdigit()) else 1 if char.isascii() and char.isalpha() else 2


# `\s` of a str pattern is str.isspace, which in ASCII also takes \x1c-\x1f. Per byte: a letter 1, an
# other character 2 (a change between them starts a piece); a space 1, another blank 3 (bit 1: not a
# space); a solid (not blank) character 1; digits kept, every other byte a space.
_WORDS = _byte_codes(_word_code)
_BLANKS = _byte_codes(lambda char: (3 if char != " " else 1) if char.isspace() else 0)
_SOLID = _byte_codes(lambda char: 0 if char.isspace() else 1)
_DIGITS_APART = bytes(byte if 48 <= byte <= 57 else 32 for byte in range(256))
# The three codes in one byte (one translate and one int for a text): the word code in bits 0-1, the
# blank code in bits 2-3, solid in bit 4; each is taken out with a mask of its bits in every byte.
_CODES = bytes(words | blanks << 2 | solid << 4 for words, blanks, solid in zip(_WORDS, _BLANKS, _SOLID))
_MASKS: dict[int, tuple[int, int]] = {}  # bits -> (bytes long, those bits in every byte): grown as longer texts come


def _every_byte(bits: int, size: int) -> int:
    """`bits` in each of at least `size` bytes, as an int (an AND is as long as its shorter side)."""
    length, mask = _MASKS.get(bits, (0, 0))
    if length < size:
        length = max(size, 2 * length, 4096)
        mask = int.from_bytes(bytes([bits]) * length, "big")
        _MASKS[bits] = (length, mask)
    return mask


def count_pieces(text: str) -> int:
    """How many times PIECE matches in `text`, the same figure as the regex gives.

    The regex costs one match per piece (most of a count's time); the pieces follow from where the
    character classes change, which a few passes over the bytes tell: a run of letters or of other
    characters is one piece (with the space before it), a run of digits one per three, a run of
    blanks one piece before the last blank ahead of a solid character, and that last one too unless
    it is a space (which joins the next piece); blanks that end the text are one piece. A blank
    outside ASCII would span several bytes: such a text, and a short one, goes to the regex.
    """
    if len(text) < _BY_CLASS_FROM:
        return PIECE.subn("", text)[1]
    data = text.encode("utf-8", "surrogatepass")  # one byte per ASCII character; wider ones are "other"
    if not text.isascii() and _WIDE_BLANK.search(data):
        return PIECE.subn("", text)[1]

    codes = int.from_bytes(data.translate(_CODES), "big")  # a byte per character; the next one is 8 bits lower
    two_bits = _every_byte(3, len(data))
    words, blanks = codes & two_bits, (codes >> 2) & two_bits
    solid_ahead = ((codes >> 4) & _every_byte(1, len(data))) << 8  # bit 0: the next character is solid
    pieces = (words & ~(words >> 8)).bit_count()  # where a run of letters or of others starts
    pieces += (blanks & solid_ahead & (blanks >> 8)).bit_count()  # blanks (two or more) before a solid character
    pieces += (blanks & (solid_ahead << 1)).bit_count()  # a blank not a space just before one
    pieces += blanks & 1  # blanks that end the text
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
        # A short text that comes again (a line may repeat one block a hundred thousand times) is
        # counted once; a long one is sampled, cheaper than hashing it whole.
        known: dict[str, int] = {}
        counts: list[int] = []
        for text in texts:
            if len(text) > self.SAMPLE:
                counts.append(self.count(text))
                continue
            found = known.get(text)
            if found is None:
                found = known[text] = count_pieces(text)
            counts.append(found)
        return counts
