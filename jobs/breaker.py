"""The summary circuit breaker of a run (the commands and the library): after 3 failed summaries in a row the model is not asked again.

One per process; while a batch runs (jobs/batch.run_all with shared_breaker), one count shared by all
its worker processes, so a batch stops asking a model that is down whichever worker saw the failures.
Light on purpose: count's batches import this module, and core.summarize_engines costs ~90 ms to import.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

# A multiprocessing.Value("i") (or dask_executor.ClusterFailures) while a batch shares its count. A
# context variable, not a global: a Dask worker runs several tasks at once, each in its own thread.
_SHARED_FAILURES: contextvars.ContextVar[Any] = contextvars.ContextVar("ctxpipe_shared_failures", default=None)
_PROCESS: Any = None  # the process's own core Breaker, made on first use


class SharedBreaker:
    """core.summarize_engines.Breaker's interface (limit, open, record), counted in shared memory."""

    def __init__(self, failures: Any, limit: int) -> None:
        self.failures_value = failures
        self.limit = limit

    @property
    def failures(self) -> int:
        return int(self.failures_value.value)

    @property
    def open(self) -> bool:
        return self.failures >= self.limit

    def record(self, ok: bool) -> None:
        with self.failures_value.get_lock():
            self.failures_value.value = 0 if ok else self.failures_value.value + 1


# Any, not Breaker: the shared one has Breaker's interface without being one, which keeps the costly
# core.summarize_engines import out of this module (a Protocol in the core would let both be typed).
def breaker() -> Any:
    """The breaker a summary reports to: the batch's shared one inside a batch, the process's own one otherwise."""
    global _PROCESS
    from ..core.summarize_engines import BREAKER_LIMIT, Breaker

    failures = _SHARED_FAILURES.get()
    if failures is not None:
        return SharedBreaker(failures, BREAKER_LIMIT)
    if _PROCESS is None:
        _PROCESS = Breaker()
    return _PROCESS


def share(failures: Any) -> None:
    """From now on in this thread, breaker() counts in `failures` (None: in the process's own breaker)."""
    _SHARED_FAILURES.set(failures)


@contextlib.contextmanager
def shared(failures: Any) -> Iterator[None]:
    """breaker() counts in `failures` while the block runs (a batch run here, a task on a Dask worker)."""
    token = _SHARED_FAILURES.set(failures)
    try:
        yield
    finally:
        _SHARED_FAILURES.reset(token)
