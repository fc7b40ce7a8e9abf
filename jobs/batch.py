"""Run a per-file job over many files on every core, keeping the input order."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.errors import CtxpipeError, InternalError
from .breaker import share, shared

if TYPE_CHECKING:
    from concurrent.futures import Executor

# multiprocessing and concurrent.futures are imported where a batch needs them: a command on one
# small file (most runs) never starts a worker, and the two cost about as much as its whole start-up.

Item = TypeVar("Item")
# Below this much input, starting workers costs more than it saves.
PARALLEL_MIN_BYTES = 16 << 20
INTERRUPTED = 128 + signal.SIGINT  # a worker stopped by Ctrl-C exits as the shell reports it (130, cli.status.ExitStatus)


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _guarded(job: Callable[[Any], Any], item: Any) -> tuple[bool, Any]:
    """(True, result), or (False, the error) for the file `item` names (a path, or a tuple that
    starts with one): one file that breaks a stage is one error row, the batch goes on."""
    try:
        return True, job(item)
    except CtxpipeError as exc:
        return False, exc
    except Exception as exc:  # a bug, not bad input: reported with its type, never silently
        return False, InternalError.of(str(item[0] if isinstance(item, tuple) else item), exc)


_BUSY = False  # a worker is running a job


def _start_worker(failures: Any) -> None:
    signal.signal(signal.SIGINT, _worker_interrupted)
    from ..files.atomic import unwind_on_termination

    unwind_on_termination()  # a worker writing a file unwinds on SIGTERM or SIGHUP too: no temporary left
    share(failures)


def _worker_interrupted(signum: int, frame: Any) -> None:
    # Ctrl-C (from the terminal, or passed on by the parent): a worker between files just ends; one
    # in a file unwinds it first (see _in_worker). Quietly: the parent reports the interrupt.
    if _BUSY:
        raise KeyboardInterrupt
    os._exit(INTERRUPTED)


def _in_worker(job: Callable[[Any], Any], item: Any) -> tuple[bool, Any]:
    """_guarded in a worker process: on Ctrl-C the job unwinds (its `with` blocks remove what it
    was writing), then the worker ends."""
    global _BUSY
    _BUSY = True
    try:
        return _guarded(job, item)
    except KeyboardInterrupt:
        os._exit(INTERRUPTED)
    finally:
        _BUSY = False


def target_path(path: str | Path, given: Sequence[str], out_dir: str) -> str:
    """Where --out-dir puts the result for `path`: a file of a folder given at the same place below
    DIR (the tree is mirrored), a file given by name as DIR/NAME. Either side may be in a store."""
    from ..files import storage

    for root in given:
        relative = storage.below(str(path), root)
        if relative is not None:
            return storage.join(out_dir, storage.safe_relative(relative, str(path)))
    return storage.join(out_dir, storage.safe_relative(os.path.basename(str(path)), str(path)))


@dataclass(frozen=True)
class Runner:
    """Where a batch's files are processed: `jobs` local worker processes (0: one per core), or a
    Dask cluster (`executor` "dask": the one at `scheduler`, else a local one of `jobs` workers)."""

    jobs: int = 0
    executor: str = "local"
    scheduler: str | None = None

    @property
    def workers(self) -> int:
        return self.jobs or default_jobs()


def for_workers(path: str, runner: Runner) -> str:
    """`path` as the batch's workers must open it: on a Dask cluster a local path is made absolute,
    since a worker's working folder is its own (a store URL is the same everywhere)."""
    from ..files import storage

    if runner.executor != "dask" or storage.is_remote(path):
        return path
    return os.path.abspath(os.path.expanduser(storage.local_path(path)))


def run_all(
    job: Callable[[Item], Any],
    items: Sequence[Item],
    runner: Runner,
    total_bytes: int,
    on_done: Callable[[bool], None] | None = None,
    shared_breaker: bool = False,
) -> list[tuple[bool, Any]]:
    """(ok, result or CtxpipeError) for each item, in order; bad input in one file spares the rest."""
    if runner.executor == "dask":
        from .dask_executor import run_on_dask

        return run_on_dask(functools.partial(_guarded, job), items, runner.scheduler, runner.workers, on_done, shared_breaker)
    jobs = runner.workers
    failures = _shared_count() if shared_breaker else None
    if jobs <= 1 or len(items) < 2 or total_bytes < PARALLEL_MIN_BYTES:
        results = []
        with shared(failures):
            for item in items:
                results.append(_guarded(job, item))
                if on_done:
                    on_done(results[-1][0])
        return results
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    # Forked workers share the parent's heap (typer, pydantic, …); without freezing it, every
    # collection in a worker walks those objects and copies their pages.
    gc.freeze()
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_start_worker, initargs=(failures,))
    with _stopped_cleanly(pool):
        if on_done is None:
            chunk = max(1, len(items) // (jobs * 32))  # small chunks: sessions differ a lot in size
            return list(pool.map(_in_worker, [job] * len(items), items, chunksize=chunk))
        done: dict[int, tuple[bool, Any]] = {}
        futures = {pool.submit(_in_worker, job, item): index for index, item in enumerate(items)}
        for future in as_completed(futures):
            done[futures[future]] = result = future.result()
            on_done(result[0])
        return [done[index] for index in range(len(items))]


def _shared_count() -> Any:
    """The breaker's failure count, shared with the workers a batch may fork."""
    import multiprocessing

    return multiprocessing.Value("i", 0)


@contextlib.contextmanager
def _stopped_cleanly(pool: Executor) -> Iterator[None]:
    """Shut a pool down: on Ctrl-C without starting what is still queued; a worker that died (killed,
    out of memory, a file truncated under it) is one error, not a traceback."""
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool

    try:
        yield
    except BrokenProcessPool:
        pool.shutdown(wait=True, cancel_futures=True)
        raise CtxpipeError("a worker process ended abruptly (see above); files written so far are complete, the others unchanged") from None
    except BaseException:
        for worker in multiprocessing.active_children():  # for when only this process got the Ctrl-C
            if worker.pid is not None:  # None: not started yet
                with contextlib.suppress(OSError):
                    os.kill(worker.pid, signal.SIGINT)
        pool.shutdown(wait=True, cancel_futures=True)  # once: a second call can race the pool's own thread
        raise
    pool.shutdown(wait=True)
