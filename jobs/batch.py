"""Run a per-file job over many files on every core, keeping the input order."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
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
# A batch's progress: called with the number of files, a context around the run that yields the
# function told of each file done (ok or not), or None for no progress shown.
Progress = Callable[[int], contextlib.AbstractContextManager[Callable[[bool], None] | None]]
# Below this much work, starting workers costs more than it saves: the input's bytes, each file
# counted as at least FILE_COST_BYTES (opening, detecting, counting a short session is that much work).
PARALLEL_MIN_BYTES = 16 << 20
FILE_COST_BYTES = 64 << 10
# Files per message to a worker, at most: a message costs a round trip through the parent; fewer
# files per message towards the end (see _chunks) keep the workers finishing together.
MAX_CHUNK = 16
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
_JOB: Callable[[Any], Any] | None = None  # the batch's job, given to each worker once, when it starts


def _start_worker(failures: Any, job: Callable[[Any], Any]) -> None:
    global _JOB
    _JOB = job
    signal.signal(signal.SIGINT, _worker_interrupted)
    from ..files.atomic import unwind_on_termination

    unwind_on_termination()  # a worker writing a file unwinds on SIGTERM or SIGHUP too: no temporary left
    share(failures)


def _run_chunk(items: Sequence[Any]) -> list[tuple[bool, Any]]:
    """In a worker: the batch's job on each of `items`, in order."""
    job = _JOB
    assert job is not None, "a worker runs chunks only after _start_worker"
    return [_in_worker(job, item) for item in items]


def _chunks(count: int, workers: int) -> list[range]:
    """The positions 0..count-1 in consecutive runs, each a share of what is left (guided): large
    while much is left (few round trips), single files at the end (the workers finish together)."""
    runs: list[range] = []
    start = 0
    while start < count:
        size = max(1, min(MAX_CHUNK, (count - start) // (4 * workers)))
        runs.append(range(start, start + size))
        start += size
    return runs


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


@contextlib.contextmanager
def beside(work: Callable[[], Any]) -> Iterator[Callable[[], Any]]:
    """`work()` on a process forked from this one while this one goes on with its own share of a
    job: the block gets a function that waits for its answer (pickled back through a pipe), or None
    when the process could not give one (killed, out of memory, an error): the caller then does that
    work itself, and an error is raised where it is reported. Leaving the block before asking (an
    error, Ctrl-C) stops the process. Where there is no fork, the block gets None at once."""
    if not hasattr(os, "fork"):
        yield lambda: None
        return
    import pickle

    answer_read, answer_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other process: it never returns, and ends by os._exit (no atexit, no buffered output)
        status = 1
        try:
            os.close(answer_read)
            signal.signal(signal.SIGINT, _worker_interrupted)  # Ctrl-C: ends quietly, the parent reports it
            view = memoryview(pickle.dumps(work(), pickle.HIGHEST_PROTOCOL))
            while view:
                view = view[os.write(answer_write, view) :]
            status = 0
        except KeyboardInterrupt:
            status = INTERRUPTED
        except BaseException:  # the parent does the work again and reports what goes wrong
            status = 1
        finally:
            os._exit(status)
    os.close(answer_write)
    waited = False

    def answered() -> Any:
        nonlocal waited
        chunks = []
        while data := os.read(answer_read, 1 << 20):
            chunks.append(data)
        waited = True
        _, status = os.waitpid(pid, 0)
        if status != 0:
            return None
        try:
            return pickle.loads(b"".join(chunks))
        except Exception:
            return None

    try:
        yield answered
    finally:
        if not waited:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        os.close(answer_read)


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
    sizes: Iterable[int],
    progress: Progress | None = None,
    shared_breaker: bool = False,
) -> list[tuple[bool, Any]]:
    """(ok, result or CtxpipeError) for each item, in order; bad input in one file spares the rest.
    `sizes`: the items' bytes, read only as far as the choice of workers needs them."""
    with progress(len(items)) if progress else contextlib.nullcontext(None) as on_done:
        return _run_all(job, items, runner, sizes, on_done, shared_breaker)


def _run_all(
    job: Callable[[Item], Any],
    items: Sequence[Item],
    runner: Runner,
    sizes: Iterable[int],
    on_done: Callable[[bool], None] | None,
    shared_breaker: bool,
) -> list[tuple[bool, Any]]:
    if runner.executor == "dask":
        from .dask_executor import run_on_dask

        return run_on_dask(functools.partial(_guarded, job), items, runner.scheduler, runner.workers, on_done, shared_breaker)
    jobs = runner.workers
    failures = _shared_count() if shared_breaker else None
    if jobs <= 1 or len(items) < 2 or _little(len(items), sizes):
        in_order: list[tuple[bool, Any]] = []
        with shared(failures):
            for item in items:
                in_order.append(_guarded(job, item))
                if on_done:
                    on_done(in_order[-1][0])
        return in_order
    # Forked workers share the parent's heap (typer, pydantic, …); without freezing it, every
    # collection in a worker walks those objects and copies their pages. Unfrozen after the batch
    # (unless the caller had frozen a heap of its own): a library caller's process would otherwise
    # never collect those objects again, and every later gc.get_freeze_count walks them all.
    froze = not gc.get_freeze_count()
    if froze:
        gc.freeze()
    try:
        if hasattr(os, "fork"):
            return _run_forked(job, items, min(jobs, len(items)), on_done, failures)
        return _run_pool(job, items, jobs, on_done, failures)
    finally:
        if froze:
            gc.unfreeze()


def _run_pool(job: Callable[[Any], Any], items: Sequence[Any], jobs: int, on_done: Callable[[bool], None] | None, failures: Any) -> list[tuple[bool, Any]]:
    """_run_forked where there is no fork: a process pool whose workers start afresh."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # The job goes to each worker once, as it starts; the workers stay for the whole batch and take
    # the files in chunks, so a file costs the parent one item sent and one result received.
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=multiprocessing.get_context(), initializer=_start_worker, initargs=(failures, job))
    results: list[tuple[bool, Any]] = [(False, None)] * len(items)  # each put in place as its chunk comes back
    with _stopped_cleanly(pool):
        chunks = {pool.submit(_run_chunk, items[run.start : run.stop]): run for run in _chunks(len(items), jobs)}
        for future in as_completed(chunks):
            for index, result in zip(chunks[future], future.result()):
                results[index] = result
                if on_done:
                    on_done(result[0])
    return results


RUN_NUMBER = 4  # bytes: a run's number on the task pipe (a read this small from a pipe is never split)
LENGTH = 8  # bytes: the length before each worker's answer on its result pipe


def _run_forked(job: Callable[[Any], Any], items: Sequence[Any], workers: int, on_done: Callable[[bool], None] | None, failures: Any) -> list[tuple[bool, Any]]:
    """The items on `workers` processes forked from this one: they have the job and the items
    already (nothing is sent but a run's number), take the runs of _chunks from one task pipe as
    they come free, and send back each run's results, pickled, on a pipe of their own.

    No multiprocessing or concurrent.futures: importing them and starting their pool's threads
    cost a batch of short files more than it saves."""
    import pickle
    import select

    runs = _chunks(len(items), workers)
    tasks_read, tasks_write = os.pipe()
    pids: dict[int, int] = {}  # result pipe -> its worker's process id
    try:
        for _ in range(workers):
            results_read, results_write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: it never returns
                os.close(tasks_write)
                os.close(results_read)
                for other in pids:
                    os.close(other)
                _work(job, items, runs, tasks_read, results_write, failures)
            os.close(results_write)
            pids[results_read] = pid
        os.close(tasks_read)
        tasks_read = -1
        sent = 0

        def send(count: int) -> None:
            """The next `count` run numbers on the task pipe, closed after the last run (the workers then end)."""
            nonlocal sent, tasks_write
            upto = min(len(runs), sent + count)
            os.write(tasks_write, b"".join(number.to_bytes(RUN_NUMBER, "little") for number in range(sent, upto)))
            sent = upto
            if sent == len(runs):
                os.close(tasks_write)
                tasks_write = -1

        send(2 * workers)  # a few runs queued ahead of each worker, one more as each answer comes: the pipe never fills
        results: list[tuple[bool, Any]] = [(False, None)] * len(items)
        received = 0
        pending = {fd: bytearray() for fd in pids}
        poll = select.poll()
        for fd in pending:
            poll.register(fd, select.POLLIN)
        while pending:
            for fd, _ in poll.poll():
                data = os.read(fd, 1 << 20)
                if not data:
                    # A worker ends once the task pipe is closed, so before that it died (killed, out
                    # of memory): no more runs are sent, the others finish theirs, and the run it held is missing.
                    poll.unregister(fd)
                    del pending[fd]
                    if tasks_write >= 0:
                        os.close(tasks_write)
                        tasks_write = -1
                    continue
                held = pending[fd]
                held += data
                while len(held) >= LENGTH and len(held) >= LENGTH + (size := int.from_bytes(held[:LENGTH], "little")):
                    number, answers = pickle.loads(held[LENGTH : LENGTH + size])
                    del held[: LENGTH + size]
                    received += 1
                    for index, result in zip(runs[number], answers):
                        results[index] = result
                        if on_done:
                            on_done(result[0])
                    if tasks_write >= 0:
                        send(1)
        if received < len(runs):
            raise CtxpipeError("a worker process ended abruptly (see above); files written so far are complete, the others unchanged")
        return results
    except BaseException:
        for pid in pids.values():  # Ctrl-C: the workers may not have had it (sent to this process only)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGINT)
        raise
    finally:
        for fd in (tasks_read, tasks_write, *pids):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        for pid in pids.values():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _work(job: Callable[[Any], Any], items: Sequence[Any], runs: Sequence[range], tasks: int, results: int, failures: Any) -> None:
    """A forked worker's life: each run whose number it reads from `tasks`, the job on its items,
    their results written to `results`; then it ends by os._exit, so that nothing it has of the
    parent's (atexit handlers, buffered output) runs twice."""
    import pickle

    status = 1
    try:
        _start_worker(failures, job)
        while record := os.read(tasks, RUN_NUMBER):
            number = int.from_bytes(record, "little")
            answer = pickle.dumps((number, _run_chunk(items[runs[number].start : runs[number].stop])), pickle.HIGHEST_PROTOCOL)
            view = memoryview(len(answer).to_bytes(LENGTH, "little") + answer)
            while view:
                view = view[os.write(results, view) :]
        status = 0
    except KeyboardInterrupt:
        status = INTERRUPTED
    finally:
        os._exit(status)


def _little(count: int, sizes: Iterable[int]) -> bool:
    """Whether `count` files of these sizes are less work than starting workers costs: each counted
    as at least FILE_COST_BYTES, the sizes read (a stat each) only until the batch is big enough."""
    total = count * FILE_COST_BYTES
    for size in sizes:
        if total >= PARALLEL_MIN_BYTES:
            return False
        total += size
    return total < PARALLEL_MIN_BYTES


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
