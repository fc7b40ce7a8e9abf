"""Run a per-file job over many files on every core, keeping the input order."""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
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


_SHARED_FAILURES: Any = None


class _SharedBreaker:
    """The summary circuit breaker, counted across every worker of a batch."""

    limit = 3

    def __init__(self, failures: Any) -> None:
        self.failures_value = failures

    @property
    def failures(self) -> int:
        return int(self.failures_value.value)

    @property
    def open(self) -> bool:
        return self.failures >= self.limit

    def record(self, ok: bool) -> None:
        with self.failures_value.get_lock():
            self.failures_value.value = 0 if ok else self.failures_value.value + 1


def _install(failures: Any) -> None:
    global _SHARED_FAILURES
    _SHARED_FAILURES = failures


def worker_breaker() -> Any:
    """The batch's shared breaker in a worker; the process's own one otherwise."""
    if _SHARED_FAILURES is not None:
        return _SharedBreaker(_SHARED_FAILURES)
    from .commands.summarize import shared_breaker

    return shared_breaker()


def run_all(job: Callable[[Item], Any], items: Sequence[Item], jobs: int, total_bytes: int,
            on_done: Callable[[bool], None] | None = None, shared_breaker: bool = False) -> list[tuple[bool, Any]]:
    """(ok, result or CtxpipeError) for each item, in order; bad input in one file spares the rest."""
    failures = multiprocessing.Value("i", 0) if shared_breaker else None
    if jobs <= 1 or len(items) < 2 or total_bytes < PARALLEL_MIN_BYTES:
        _install(failures)
        results = []
        for item in items:
            results.append(_guarded(job, item))
            if on_done:
                on_done(results[-1][0])
        return results
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    # Forked workers share the parent's heap (typer, pydantic, …); without freezing it, every
    # collection in a worker walks those objects and copies their pages.
    gc.freeze()
    if on_done is None:
        chunk = max(1, len(items) // (jobs * 32))  # small chunks: sessions differ a lot in size
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_install, initargs=(failures,)) as pool:
            return list(pool.map(_guarded, [job] * len(items), items, chunksize=chunk))
    ordered: list[tuple[bool, Any] | None] = [None] * len(items)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_install, initargs=(failures,)) as pool:
        futures = {pool.submit(_guarded, job, item): index for index, item in enumerate(items)}
        for future in as_completed(futures):
            ordered[futures[future]] = future.result()
            on_done(ordered[futures[future]][0])  # type: ignore[index]
    return ordered  # type: ignore[return-value]
