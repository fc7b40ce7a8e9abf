"""A fact of every line of a file, gathered line by line (core.jsonl.folded folds one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

State = TypeVar("State")


def _as_it_is(state: Any) -> Any:
    return state


@dataclass(frozen=True)
class Fold(Generic[State]):
    """`step(state, entry)` is the state after one more line, from a fresh `start()`; a step may
    update the state it is given and returns it. A state kept for a file's lines is gone on from as
    `resume(state)` (a copy, when the steps update in place), so that it stays as it was kept.

    A LineIndex built with a fold folds it over the lines its build parses to check them: a reader
    asking for it (folded) parses no line again. A small module of its own: the rules declare
    one, and the status line imports them without the JSONL reader."""

    key: str
    start: Callable[[], State]
    step: Callable[[State, Any], State]  # (state, a core.jsonl.Entry): jsonl imports this module
    resume: Callable[[State], State] = _as_it_is
