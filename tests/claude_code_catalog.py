"""Read the model facts Claude Code's native binary carries, to hold ctxpipe's catalog to them.

2.1.332 embeds its JavaScript in the binary. Three pieces are read from it:
- the baked-in model catalog, a JS object literal starting `{"//":"Hand-maintained baked-in model catalog`;
- the set of models whose rough token estimate is len/4 (`new Set(["claude-3-opus",…])`; every other
  model is len/3);
- the fast-mode price table (`function Lb(e){if(e==="claude-fable-5-2"||…)return kF;…}` and the
  objects it returns, `kF={inputTokens:16,…}`).

`ctxpipe_catalog(binary)` turns them into the shape of ctxpipe/core/catalog_data.py; the test compares.
Run as a script to write that module (how catalog_data.py was made; core reads no data file, so the
catalog is Python):

    python tests/claude_code_catalog.py BINARY RELEASE > core/catalog_data.py && ruff format core/catalog_data.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

CATALOG_MARKER = b"Hand-maintained baked-in model catalog"


def js_object_at(data: bytes, start: int) -> str:
    """The JS object literal that opens at `start` (strings may hold braces)."""
    depth, index, in_string, escaped = 0, start, False, False
    while True:
        char = data[index : index + 1]
        if not char:
            raise LookupError("the object literal does not end")
        if in_string:
            if escaped:
                escaped = False
            elif char == b"\\":
                escaped = True
            elif char == b'"':
                in_string = False
        elif char == b'"':
            in_string = True
        elif char == b"{":
            depth += 1
        elif char == b"}":
            depth -= 1
            if depth == 0:
                return data[start : index + 1].decode()
        index += 1


def js_to_python(source: str) -> Any:
    """A minified JS literal (bare keys, !0 and !1, 1e6) as JSON reads it; whole floats become ints."""
    out: list[str] = []
    index = 0
    while index < len(source):
        char = source[index]
        if char == '"':
            end = index + 1
            while source[end] != '"':
                end += 2 if source[end] == "\\" else 1
            out.append(source[index : end + 1])
            index = end + 1
            continue
        key = re.match(r"[A-Za-z_$][\w$]*(?=:)", source[index:])
        if key and out and out[-1][-1:] in "{,":
            out.append(json.dumps(key.group()))
            index += key.end()
            continue
        if source.startswith(("!0", "!1"), index):
            out.append("true" if source[index + 1] == "0" else "false")
            index += 2
            continue
        out.append(char)
        index += 1
    return json.loads("".join(out), parse_float=lambda text: int(float(text)) if float(text).is_integer() else float(text))


def baked_catalog(data: bytes) -> dict[str, Any]:
    marker = data.find(CATALOG_MARKER)
    if marker < 0:
        raise LookupError("no baked-in model catalog in this binary")
    return js_to_python(js_object_at(data, data.rfind(b'{"//"', 0, marker)))


def search_from(data: bytes, anchor: bytes, pattern: bytes, back: int = 0) -> re.Match[bytes] | None:
    """The first match of `pattern` that starts `back` bytes or fewer before an occurrence of the
    literal `anchor` in it: the binary is hundreds of megabytes, and a literal is found by memchr
    where a regular expression would step through every byte."""
    compiled = re.compile(pattern)
    at = data.find(anchor)
    while at >= 0:
        found = compiled.search(data, max(0, at - back), at + len(anchor) + (1 << 16))
        if found is not None and found.start() <= at:
            return found
        at = data.find(anchor, at + 1)
    return None


def four_bytes_per_token(data: bytes) -> list[str]:
    found = search_from(data, b'new Set(["claude-3-opus"', rb'new Set\((\["claude-3-opus"[^\]]*\])\);function \w+\(e\)\{if\(!e\)return 4;')
    if found is None:
        raise LookupError("no bytes-per-token set in this binary")
    return json.loads(found.group(1))


def fast_prices(data: bytes) -> dict[str, dict[str, float]]:
    """{model id: fast-mode prices in the catalog's price names}."""
    found = search_from(data, b'(e){if(e==="claude-', rb'function \w+\(e\)\{(if\(e==="claude-[^}]*?)return\}', back=64)
    if found is None:
        raise LookupError("no fast-mode price table in this binary")
    names = {
        "inputTokens": "input",
        "outputTokens": "output",
        "promptCacheWriteTokens": "cache_write_5m",
        "promptCacheWrite1hTokens": "cache_write_1h",
        "promptCacheReadTokens": "cache_read",
    }
    prices: dict[str, dict[str, float]] = {}
    for models, table in re.findall(rb"if\(((?:e===\"[^\"]+\"(?:\|\|)?)+)\)return (\w+);", found.group(1)):
        literal = search_from(data, table + b"={inputTokens:", rb"[,{ ]" + re.escape(table) + rb"=(\{inputTokens:[^}]*\})", back=1)
        if literal is None:
            raise LookupError(f"no fast-mode prices {table.decode()}")
        row = js_to_python(literal.group(1).decode())
        for model in re.findall(rb'"([^"]+)"', models):
            prices[model.decode()] = {names[key]: value for key, value in row.items() if key in names}
    return prices


def ctxpipe_catalog(binary: Path) -> dict[str, Any]:
    """The catalog as ctxpipe ships it: every model's ids, context, max output and prices."""
    data = binary.read_bytes()
    baked = baked_catalog(data)
    four = set(four_bytes_per_token(data))
    fast = fast_prices(data)
    models = []
    for model in baked["models"]:
        ids = [model["id"]] + [spelling for spelling in model["provider_ids"].values() if spelling]
        row: dict[str, Any] = {
            "id": model["id"],
            "display_name": model["display_name"],
            "ids": list(dict.fromkeys(ids)),
            "context": model.get("context", {}),
            "max_output_tokens": model["max_output_tokens"],
            "pricing": model["pricing"],
            "bytes_per_token": 4 if model["id"] in four else 3,
        }
        if model["id"] in fast:
            row["fast_prices"] = fast[model["id"]]
        models.append(row)
    tiers = {name: {key: value for key, value in tier.items() if key != "web_search"} for name, tier in baked["pricing_tiers"].items()}
    return {"four_bytes_per_token": sorted(four), "pricing_tiers": tiers, "models": models}


def catalog_module(catalog: dict[str, Any], release: str) -> str:
    """core/catalog_data.py's text (before ruff formats it): the catalog as Python literals."""
    return f'''"""The models Claude Code {release} knows, read from its native binary (npm @anthropic-ai/claude-code-linux-x64@{release}):
the baked-in model catalog, the len/4 estimator set and the fast-mode prices. Prices are US dollars per million tokens.

Generated by tests/claude_code_catalog.py from the binary (do not edit); tests/test_catalog.py holds it to it.
"""

from typing import Any

RELEASE = {release!r}
FOUR_BYTES_PER_TOKEN: list[str] = {catalog["four_bytes_per_token"]!r}
PRICING_TIERS: dict[str, dict[str, Any]] = {catalog["pricing_tiers"]!r}
MODELS: list[dict[str, Any]] = {catalog["models"]!r}
'''


if __name__ == "__main__":
    sys.stdout.write(catalog_module(ctxpipe_catalog(Path(sys.argv[1])), sys.argv[2]))
