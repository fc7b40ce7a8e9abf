"""Real Claude Code lines, many of them, for timing `validate` against `convert` on the same lines.

    python bench/schema_lines.py          # build (or reuse) both files and print where they are

Shapes, under the data dir (bench/.data/, env CTXPIPE_BENCH_DATA), built from every Claude Code
file of the corpus (../shared/corpus, env CTXPIPE_CORPUS), concatenated and repeated:

- schema-valid.jsonl    200,000 lines that keep to the schema (the corpus lines as they are);
- schema-failing.jsonl  100,000 lines of which every one breaks the schema, in one of a few ways
                        in turn (a timestamp in epoch milliseconds, a token count or isSidechain
                        as a string, a content block without its required field), so validate
                        explains an error on every line.

Copy k of the corpus gets its own uuids, message ids and tool ids (a suffix on each), so the
structural checks see one long file of distinct sessions rather than the same lines repeated:
what validate finds beyond the schema is what it finds in the corpus. Deterministic: the same
corpus gives the same bytes, and a file with the expected number of lines is reused.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import corpus  # bench/corpus.py
import orjson

VALID_LINES = 200_000
FAILING_LINES = 100_000

_UUID = re.compile(rb'"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-)([0-9a-f]{12})"')
_IDS = re.compile(rb'"((?:toolu|msg|req|call)_[A-Za-z0-9]+)"')


def _corpus_lines() -> list[bytes]:
    lines: list[bytes] = []
    for path in corpus.load_corpus().claude_files:
        lines += [raw for raw in path.read_bytes().splitlines() if raw.strip()]
    return lines


def _copy(lines: list[bytes], k: int) -> Iterator[bytes]:
    """Copy k of the corpus lines, with ids of its own (uuids keep their shape)."""
    suffix = b"%06x" % k
    for raw in lines:
        raw = _UUID.sub(lambda m: b'"' + m[1] + m[2][:6] + suffix + b'"', raw)
        yield _IDS.sub(lambda m: b'"' + m[1] + b"x" + suffix + b'"', raw)


def _first_block(obj: dict[str, Any]) -> dict[str, Any] | None:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") in ("text", "tool_use", "tool_result", "thinking"):
                return block
    return None


def _break(raw: bytes, k: int) -> bytes:
    """The line with one schema error, of the kind a writer that changed a field would make (which
    one turns with k; each falls back to the next). The values are the line's own, so they vary
    from line to line as they would."""
    obj = orjson.loads(raw)
    message = obj.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    block = _first_block(obj)
    way = k % 4
    if way == 0 and isinstance(usage, dict) and "input_tokens" in usage:
        usage["input_tokens"] = str(usage["input_tokens"])  # "123": not an integer
    elif way == 1 and block is not None:
        required = {"text": "text", "tool_use": "input", "tool_result": "tool_use_id", "thinking": "signature"}[block["type"]]
        block.pop(required, None)  # a block without its required field
    elif way == 2 and isinstance(obj.get("isSidechain"), bool):
        obj["isSidechain"] = str(obj["isSidechain"]).lower()  # "false": a string where a boolean belongs
    else:
        obj["timestamp"] = _epoch_ms(obj.get("timestamp"), k)  # epoch milliseconds: not a string
    return orjson.dumps(obj)


def _epoch_ms(stamp: Any, k: int) -> int:
    try:
        return int(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 1_767_225_600_000 + k


def _lines(unit: list[bytes], count: int, failing: bool) -> Iterator[bytes]:
    made = 0
    k = 0
    while True:
        for raw in _copy(unit, k):
            if made == count:
                return
            yield (_break(raw, made) if failing else raw) + b"\n"
            made += 1
        k += 1


def _ensure(name: str, count: int, failing: bool) -> Path:
    dest = corpus.data_dir() / name
    if dest.is_file():
        with dest.open("rb") as handle:
            if sum(1 for _ in handle) == count:
                return dest
    print(f"bench: writing {dest} ({count:,} lines)", file=sys.stderr)
    unit = _corpus_lines()
    with corpus.written(dest) as out:
        out.writelines(_lines(unit, count, failing))
    return dest


def ensure_valid() -> Path:
    return _ensure("schema-valid.jsonl", VALID_LINES, failing=False)


def ensure_failing() -> Path:
    return _ensure("schema-failing.jsonl", FAILING_LINES, failing=True)


def main() -> int:
    for path in (ensure_valid(), ensure_failing()):
        print(f"{path} ({path.stat().st_size / corpus.MiB:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
