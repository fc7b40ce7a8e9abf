"""Full-tokenization throughput: `ctxpipe count` with a real tiktoken encoding vs tiktoken itself.

Baseline: tiktoken's own `encode_ordinary_batch` on both cores over every text block of the tree's
transcripts, texts extracted beforehand (only the encoding is timed). ctxpipe: `count --full --by
block --tokenizer tiktoken:<enc> --no-calibrate` over the same tree, timed end to end (reading,
parsing, building the context, tokenizing). Both are reported as tokens per second; the target is
ctxpipe ≥ 0.8× tiktoken's throughput. A report, never a timed test.

    python bench/throughput.py [--encoding o200k_base]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import corpus  # bench/corpus.py
import orjson
from ctxpipe.core.tokens import block_texts
from ctxpipe.files.sessions import find_sessions
from ctxpipe.jobs.tokenizers import tiktoken_encoding


def texts_of(paths: list[Path]) -> list[str]:
    texts: list[str] = []
    for path in paths:
        with open(path, "rb") as handle:
            for line in handle:
                obj = orjson.loads(line)
                message = obj.get("message")
                if obj.get("type") in ("user", "assistant") and isinstance(message, dict):
                    content = message.get("content")
                    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
                    for block in blocks:
                        if isinstance(block, dict):
                            texts += [text for text in block_texts(block)[0] if text]
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", default="o200k_base", choices=("cl100k_base", "o200k_base"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tree = corpus.ensure_tree()
    files = [f.path for f in find_sessions([str(tree)])]
    encoding = tiktoken_encoding(args.encoding)
    texts = texts_of(files)
    baseline = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        tokens = sum(len(ids) for ids in encoding.encode_ordinary_batch(texts, num_threads=2))
        baseline.append((tokens, time.perf_counter() - started))
    base_tokens, base_seconds = min(baseline, key=lambda item: item[1])
    started = time.perf_counter()
    single_tokens = sum(len(encoding.encode_ordinary(text)) for text in texts)
    single_seconds = time.perf_counter() - started
    ctxpipe = str(Path(sys.executable).parent / "ctxpipe")
    command = [ctxpipe, "count", "--json", "--full", "--by", "block", "--tokenizer", f"tiktoken:{args.encoding}", "--no-calibrate", str(tree)]
    runs = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        output = subprocess.run(command, capture_output=True, check=True).stdout
        seconds = time.perf_counter() - started
        rows = [json.loads(line) for line in output.splitlines()]
        counted = sum(
            item["tokens"] - (2000 * item["blocks"] if item["key"] in ("image", "document") else 0)
            for row in rows
            if not row.get("total")
            for item in row["breakdown"]
        )
        runs.append((counted, seconds))
    tool_tokens, tool_seconds = min(runs, key=lambda item: item[1])
    base_rate, tool_rate = base_tokens / base_seconds, tool_tokens / tool_seconds
    print(f"tiktoken encode_ordinary_batch (2 threads): {base_tokens:,} tokens in {base_seconds:.3f} s = {base_rate / 1e6:.2f} M tokens/s")
    print(
        f"tiktoken encode_ordinary, one thread:        {single_tokens:,} tokens in {single_seconds:.3f} s = {single_tokens / single_seconds / 1e6:.2f} M tokens/s (for reference)"
    )
    print(f"ctxpipe count --full --by block (2 workers): {tool_tokens:,} tokens in {tool_seconds:.3f} s = {tool_rate / 1e6:.2f} M tokens/s (end to end)")
    ratio = tool_rate / base_rate
    print(f"ratio {ratio:.2f}x  target >= 0.8x  {'PASS' if ratio >= 0.8 else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
