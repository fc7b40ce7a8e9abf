"""Run a per-file job over many files on every core, keeping the input order."""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from ..core.errors import CtxpipeError

Item = TypeVar("Item")
# Below this much input, starting workers costs more than it saves.
PARALLEL_MIN_BYTES = 16 << 20


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _guarded(job: Callable[[Any], Any], item: Any) -> tuple[bool, Any]:
    try:
        return True, job(item)
    except CtxpipeError as exc:
        return False, exc


def run_all(job: Callable[[Item], Any], items: Sequence[Item], jobs: int, total_bytes: int) -> list[tuple[bool, Any]]:
    """(ok, result or CtxpipeError) for each item, in order; bad input in one file spares the rest."""
    if jobs <= 1 or len(items) < 2 or total_bytes < PARALLEL_MIN_BYTES:
        return [_guarded(job, item) for item in items]
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    # Forked workers share the parent's heap (typer, pydantic, …); without freezing it, every
    # collection in a worker walks those objects and copies their pages: twice the run time.
    gc.freeze()
    chunk = max(1, len(items) // (jobs * 8))
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        return list(pool.map(_guarded, [job] * len(items), items, chunksize=chunk))
