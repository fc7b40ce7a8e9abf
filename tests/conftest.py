"""pytest configuration; the shared helpers live in helpers.py (tests/ is on pythonpath)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _interrupts_as_they_were() -> Iterator[None]:
    """A test that runs the command line's own entry point in this process (main() with no argv)
    leaves SIGINT ignored, as the real process does once its outcome is decided; a child started
    by a later test would inherit that and ignore Ctrl-C. Put back what the worker had."""
    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not before:
        signal.signal(signal.SIGINT, before)
