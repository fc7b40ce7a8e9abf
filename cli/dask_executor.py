"""--executor dask: a batch's files as tasks on a Dask cluster, one file per task.

The cluster is the one at --scheduler (or DASK_SCHEDULER_ADDRESS), else a local one started for
the run (a worker process per --jobs). Each task runs the very per-file job the local executor runs
(batch._guarded: a bad file is an error row); results come back as they finish, for the same
progress bar, table and JSON. A worker lost mid-task is Dask's to handle: its tasks run again
elsewhere, and since every output is written whole (atomic.py, storage.replaced), a task cut short
leaves no half-written output. The LLM circuit breaker is shared through the scheduler (a Dask
Variable and Lock), so the whole cluster stops asking a model that is down.

Paths are opened by the workers: local ones relative to the workers' working folder. With a
cluster on other machines, give store URLs (s3://…) or absolute paths on a file system they share.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..breaker import shared
from ..core.errors import CtxpipeError

SCHEDULER_VARIABLE = "DASK_SCHEDULER_ADDRESS"
CONNECT_TIMEOUT = "20s"


class ClusterFailures:
    """The breaker's failure count (the interface of a multiprocessing.Value: value, get_lock) kept
    on the scheduler, so every worker of the batch counts in it."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def value(self) -> int:
        from distributed import Variable

        return int(Variable(self.name).get(timeout=CONNECT_TIMEOUT) or 0)

    @value.setter
    def value(self, number: int) -> None:
        from distributed import Variable

        Variable(self.name).set(number)

    def get_lock(self) -> Any:
        from distributed import Lock

        return Lock(self.name)


def _task(item: Any, guarded_job: Callable[[Any], tuple[bool, Any]], breaker: str | None) -> tuple[bool, Any]:
    """On a worker: the job on one item, guarded as the local executor guards it (batch._guarded)."""
    with shared(ClusterFailures(breaker) if breaker else None):
        return guarded_job(item)


def _named(item: Any) -> str:
    return str(item[0] if isinstance(item, tuple) else item)


@contextlib.contextmanager
def _client(scheduler: str | None, workers: int) -> Iterator[Any]:
    """A client of the cluster at `scheduler` (else DASK_SCHEDULER_ADDRESS), else of a local one
    started for the run with `workers` worker processes, closed at the end."""
    try:
        import distributed
    except ImportError:
        raise CtxpipeError("--executor dask needs the dask extra: pip install 'ctxpipe[dask]'") from None
    address = scheduler or os.environ.get(SCHEDULER_VARIABLE) or None
    if address:
        named = f"--scheduler {address}" if scheduler else f"{SCHEDULER_VARIABLE}={address}"  # where the address came from
        try:
            client = distributed.Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise CtxpipeError(f"{named}: cannot connect to the Dask scheduler ({' '.join(str(exc).split()) or type(exc).__name__})") from None
        with contextlib.closing(client):
            yield client
        return
    # dashboard_address: the scheduler's HTTP server (health, metrics) on a free loopback port; the
    # default, :8787, listens on every interface and, when taken, prints a UserWarning on stderr.
    cluster = distributed.LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        scheduler_port=0,
        dashboard_address="127.0.0.1:0",
        scheduler_kwargs={"dashboard": False},
        silence_logs=logging.ERROR,
    )
    with contextlib.closing(cluster), contextlib.closing(distributed.Client(cluster)) as client:
        yield client


def run_on_dask(
    guarded_job: Callable[[Any], tuple[bool, Any]],
    items: Sequence[Any],
    scheduler: str | None,
    workers: int,
    on_done: Callable[[bool], None] | None,
    shared_breaker: bool,
) -> list[tuple[bool, Any]]:
    """(ok, result or CtxpipeError) for each item, in order, each item a task on the cluster
    (`guarded_job(item)` gives the pair; batch.run_all passes its _guarded job)."""
    from distributed import Variable, as_completed

    with _client(scheduler, workers) as client:
        breaker = None
        if shared_breaker:
            breaker = f"ctxpipe-breaker-{uuid.uuid4().hex}"
            Variable(breaker, client=client).set(0)
        futures = client.map(_task, items, guarded_job=guarded_job, breaker=breaker, pure=False)
        position = {future.key: index for index, future in enumerate(futures)}
        done: dict[int, tuple[bool, Any]] = {}
        try:
            for future in as_completed(futures):
                index = position[future.key]
                try:
                    done[index] = future.result()
                except Exception as exc:  # the task itself failed on every try (its workers were lost)
                    done[index] = (False, CtxpipeError(f"{_named(items[index])}: not processed on the cluster ({type(exc).__name__}: {exc})"))
                if on_done:
                    on_done(done[index][0])
        except BaseException:
            client.cancel(futures)
            raise
        finally:
            if breaker:
                with contextlib.suppress(Exception):
                    Variable(breaker, client=client).delete()
    return [done[index] for index in range(len(items))]
