"""--executor dask: a batch's files as tasks on a Dask cluster, one file per task.

The cluster is the one at --scheduler (or DASK_SCHEDULER_ADDRESS), else a local one started for
the run (a worker process per --jobs). Each task runs the very per-file job the local executor runs
(batch._guarded: a bad file is an error row); results come back as they finish, for the same
progress bar, table and JSON. A worker lost mid-task is Dask's to handle: its tasks run again
elsewhere, and since every output is written whole (files/atomic.py, files/storage.replaced), a task cut short
leaves no half-written output. The LLM circuit breaker is shared through the scheduler (a Dask
Variable and Lock), so the whole cluster stops asking a model that is down.

Paths are opened by the workers: local ones relative to the workers' working folder. With a
cluster on other machines, give store URLs (s3://…) or absolute paths on a file system they share.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..core.errors import CtxpipeError
from .breaker import shared

SCHEDULER_VARIABLE = "DASK_SCHEDULER_ADDRESS"
# How long to wait for a scheduler, its workers and its variables: Dask's own setting, so a user sets it
# where Dask users do (DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s, or a Dask config file).
CONNECT_TIMEOUT_SETTING = "distributed.comm.timeouts.connect"


def _connect_timeout() -> str:
    _distributed()  # its import loads Dask's distributed settings
    import dask.config

    return str(dask.config.get(CONNECT_TIMEOUT_SETTING))


class ClusterFailures:
    """The breaker's failure count (the interface of a multiprocessing.Value: value, get_lock) kept
    on the scheduler, so every worker of the batch counts in it."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def value(self) -> int:
        return int(_distributed().Variable(self.name).get(timeout=_connect_timeout()) or 0)

    @value.setter
    def value(self, number: int) -> None:
        _distributed().Variable(self.name).set(number)

    def get_lock(self) -> Any:
        return _distributed().Lock(self.name)


def _task(item: Any, guarded_job: Callable[[Any], tuple[bool, Any]], breaker: str | None) -> tuple[bool, Any]:
    """On a worker: the job on one item, guarded as the local executor guards it (batch._guarded)."""
    with shared(ClusterFailures(breaker) if breaker else None):
        return guarded_job(item)


def _named(item: Any) -> str:
    return str(item[0] if isinstance(item, tuple) else item)


def _distributed() -> Any:
    """The distributed package, or the one error line that names the extra to install."""
    try:
        import distributed
    except ImportError:
        raise CtxpipeError("--executor dask needs the dask extra: pip install 'ctxpipe[dask]'") from None
    return distributed


@contextlib.contextmanager
def _client(scheduler: str | None, workers: int) -> Iterator[tuple[Any, str]]:
    """(a client, how to name the cluster) for the cluster at `scheduler` (else
    DASK_SCHEDULER_ADDRESS), else for a local one started for the run with `workers` worker
    processes; closed at the end. Dask's own log lines are kept off stderr meanwhile: what goes
    wrong is said once, by ctxpipe."""
    distributed = _distributed()
    address = scheduler or os.environ.get(SCHEDULER_VARIABLE) or None
    with _quiet():
        if address:
            named = f"--scheduler {address}" if scheduler else f"{SCHEDULER_VARIABLE}={address}"  # where the address came from
            try:
                client = distributed.Client(address, timeout=_connect_timeout())
            except (OSError, TimeoutError, ValueError) as exc:
                raise CtxpipeError(f"{named}: cannot connect to the Dask scheduler ({_one_line(exc)})") from None
            with contextlib.closing(client):
                _wait_for_workers(client, named)
                yield client, named
            return
        # Its nannies set variables for the workers they start (PYTHONHASHSEED, OMP_NUM_THREADS, …) in
        # this process's environment: a library caller's environment is given back as it was.
        environment = dict(os.environ)
        with _interrupts_ignored():  # the workers inherit it: a Ctrl-C is the parent's to handle (it closes the cluster)
            # dashboard_address: the scheduler's HTTP server (health, metrics) on a free loopback port; the
            # default, :8787, listens on every interface and, when taken, prints a UserWarning on stderr.
            cluster = distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                scheduler_port=0,
                dashboard_address="127.0.0.1:0",
                scheduler_kwargs={"dashboard": False},
                silence_logs=logging.CRITICAL,
            )
        try:
            with contextlib.closing(cluster), contextlib.closing(distributed.Client(cluster)) as client:
                yield client, "the local Dask cluster"
        finally:
            os.environ.clear()
            os.environ.update(environment)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # Dask's loggers each have their own level and handler (distributed.client logs a lost
    # scheduler with a traceback): every one of them is silenced, and restored after.
    names = ["distributed"] + [name for name in logging.root.manager.loggerDict if name.startswith("distributed.")]
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _wait_for_workers(client: Any, named: str) -> None:
    """A scheduler without workers would hold the batch forever: give them the connect timeout to join."""
    try:
        client.wait_for_workers(1, timeout=_connect_timeout())
    except (TimeoutError, OSError) as exc:
        raise CtxpipeError(f"{named}: the Dask scheduler has no workers ({_one_line(exc)})") from None


def _lost(client: Any, exc: BaseException) -> bool:
    """Whether a task failed because the client lost its scheduler (not because of the task)."""
    return client.status not in ("running", "newly-created") or "connection-lost" in str(exc) or isinstance(exc, OSError)


def run_on_dask(
    guarded_job: Callable[[Any], tuple[bool, Any]],
    items: Sequence[Any],
    scheduler: str | None,
    workers: int,
    on_done: Callable[[bool], None] | None,
    shared_breaker: bool,
) -> list[tuple[bool, Any]]:
    """(ok, result or CtxpipeError) for each item, in order, each item a task on the cluster
    (`guarded_job(item)` gives the pair; batch.run_all passes its _guarded job). A task whose
    workers were all lost is an error row; a scheduler lost mid-batch ends the batch with one error."""
    distributed = _distributed()
    Variable, as_completed = distributed.Variable, distributed.as_completed

    with _client(scheduler, workers) as (client, named):
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
                except Exception as exc:
                    if _lost(client, exc):
                        # Only what came back is known: a file whose result was on its way may be written too.
                        raise CtxpipeError(
                            f"{named}: lost the Dask scheduler after {len(done)} of {len(items)} files came back; "
                            "the others may or may not have been written (every output present is complete)"
                        ) from None
                    # The task itself failed on every try (e.g. each worker that ran it was lost).
                    done[index] = (False, CtxpipeError(f"{_named(items[index])}: not processed on the cluster ({type(exc).__name__}: {_one_line(exc)})"))
                if on_done:
                    on_done(done[index][0])
        except BaseException:
            with contextlib.suppress(Exception):
                client.cancel(futures)
            raise
        finally:
            if breaker:
                with contextlib.suppress(Exception):
                    Variable(breaker, client=client).delete()
    return [done[index] for index in range(len(items))]
