"""Shared test helpers (import with `from helpers import ...`): run the real CLI in a subprocess, locate fixtures and the shared corpus."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = Path(os.environ.get("CTXPIPE_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_files(kind: str = "claude-code") -> list[Path]:
    """Real transcripts from ../shared/corpus (empty when it is not there)."""
    if not CORPUS.is_dir():
        return []
    files = sorted(CORPUS.glob("*/*.jsonl"))
    codex = [f for f in files if "codex" in f.name]
    return codex if kind == "codex" else [f for f in files if f not in codex]


needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"the shared corpus is not beside this checkout ({CORPUS}); these tests read real transcripts from it"
)


def run_cli(
    *args: str | os.PathLike[str], stdin: bytes | None = b"", env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run `python -m ctxpipe ARGS` as a user would, capturing bytes."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    full_env.pop("CTXPIPE_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "ctxpipe", *map(str, args)],
        input=stdin,
        capture_output=True,
        env=full_env,
        cwd=cwd,
        timeout=120,
    )


# Strict JSON, as a conforming reader takes it (json.loads hooks): no NaN/Infinity, finite numbers.
def no_json_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is out of range")
    return value


DELTAS = {"adjustments"}  # count's adjustments are signed changes, not figures


def bad_token_figures(value: object, where: str = "") -> list[str]:
    """Token figures (keys ending in 'tokens') that are not whole, non-negative numbers."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in DELTAS:
                continue
            if key.endswith("tokens") and item is not None and not (isinstance(item, int) and not isinstance(item, bool) and item >= 0):
                found.append(f"{where}{key}={item!r}")
            found += bad_token_figures(item, f"{where}{key}.")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += bad_token_figures(item, f"{where}{index}.")
    return found
