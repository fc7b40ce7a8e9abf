"""pytest configuration; the shared helpers live in helpers.py (tests/ is on pythonpath)."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings

# The property tests draw the same examples on every run (derived from each test's name), so a run
# judges the code, not the draw; CTXPIPE_HYPOTHESIS_RANDOM=1 draws new ones, to look for what the
# fixed draws miss (a failing draw is printed whole: keep it as an @example). test_fuzz.py has its
# own switch (CTXPIPE_FUZZ_RANDOM).
settings.register_profile("reproducible", derandomize=True)
settings.register_profile("random", derandomize=False)
settings.load_profile("random" if os.environ.get("CTXPIPE_HYPOTHESIS_RANDOM") else "reproducible")

# A shell script's background job (`python -m pytest &`, nohup) starts with SIGINT ignored, and every
# process it starts inherits that: the tests' commands would then ignore their Ctrl-C. They are run
# as from a terminal instead (a handler, unlike an ignore, is not passed on to a program started).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject's addopts): one worker more than the cores. A worker waits about a sixth of
    its time (servers' deadlines, a killed cluster, a Claude Code answer), and the suite is CPU the rest
    of it: a third worker on two cores takes up those waits (it won each of three alternated pairs of
    runs, docs/development.md#the-suites-time). PYTEST_XDIST_AUTO_NUM_WORKERS, as xdist reads it,
    still decides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1


def pytest_configure(config: pytest.Config) -> None:
    _own_cache_folder()
    _bytecode_beside_pytest(config)
    _no_status_line_server()


def _no_status_line_server() -> None:
    """A `ctxpipe statusline` that works its figures out starts the status line's server, which stays
    10 minutes: hundreds of them, one per test's cache folder, each loading the count's code, would cost
    the suite tens of CPU seconds and outlive it. The runs work their figures out in their own process
    (inherited by every child); tests/test_statusline_server.py turns the server on where it tests it,
    and holds its lines to the ones worked out here."""
    os.environ.setdefault("CTXPIPE_STATUSLINE_SERVER", "0")


def _own_cache_folder() -> None:
    """`count` keeps what it counted under $XDG_CACHE_HOME/ctxpipe/count: the suite's runs keep theirs
    in a folder of the session's (inherited by xdist's workers and every child), not the developer's."""
    if os.environ.get("CTXPIPE_TEST_CACHE_HOME"):  # a worker: the controller made it
        return
    folder = tempfile.mkdtemp(prefix="ctxpipe-test-cache-")
    atexit.register(shutil.rmtree, folder, True)
    os.environ["XDG_CACHE_HOME"] = os.environ["CTXPIPE_TEST_CACHE_HOME"] = folder


def _bytecode_beside_pytest(config: pytest.Config) -> None:
    """With PYTHONDONTWRITEBYTECODE set (as container images often set it), every interpreter the
    suite starts (xdist's workers, every `python -m ctxpipe` child, the Dask workers that run its
    tasks) compiled ctxpipe from source again, and pytest rewrote the test modules and its plugins
    again: ~0.1 s a child, ~10 s a worker. Their bytecode goes instead to pytest's cache folder
    (.pytest_cache/d/pycache, named by PYTHONPYCACHEPREFIX, which children inherit), so the source
    tree stays free of __pycache__ as the setting wants. Runs before xdist starts its workers; a
    PYTHONPYCACHEPREFIX of the developer's own is kept, and `-p no:cacheprovider` turns it off."""
    cache = getattr(config, "cache", None)
    if cache is None or not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    try:
        folder = cache.mkdir("pycache")
    except OSError:  # a read-only checkout: compile as before
        return
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = False


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collected suite (every test item, module and parameter: hundreds of thousands of objects)
    lives until the worker ends and is never garbage: frozen, the cyclic collections that the tests'
    in-process runs set off no longer walk it (about a sixth of an in-process test file's time). A
    test that needs a heap with nothing frozen, as a library caller's is, uses `nothing_frozen`."""
    gc.freeze()


@pytest.fixture
def nothing_frozen() -> Iterator[None]:
    """No object frozen for the test (gc.get_freeze_count() is 0, as in a library caller's process);
    the suite's heap frozen again after it."""
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    yield
    if frozen:
        gc.freeze()


@pytest.fixture(autouse=True)
def _interrupts_as_they_were() -> Iterator[None]:
    """A test that runs the command line's own entry point in this process (main() with no argv)
    leaves SIGINT ignored, as the real process does once its outcome is decided; a child started
    by a later test would inherit that and ignore Ctrl-C. Put back what the worker had."""
    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not before:
        signal.signal(signal.SIGINT, before)
