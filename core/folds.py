"""A fact of every line of a file, gathered line by line (core.jsonl.folded folds one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

State = TypeVar("State")


def _as_it_is(state: Any) -> Any:
    return state


class Fold(Generic[State]):
    """`step(state, entry)` is the state after one more line (entry: a core.jsonl.Entry, which
    imports this module), from a fresh `start()`; a step may update the state it is given and
    returns it. A state kept for a file's lines is gone on from as `resume(state)` (a copy, when
    the steps update in place), so that it stays as it was kept.

    A LineIndex built with a fold folds it over the lines its build parses to check them: a reader
    asking for it (folded) parses no line again. With `prefixes`, the fold promises that a step
    never changes a state in place and returns the state it was given when the line changes
    nothing: the LineIndex then keeps the state at each change, and answers for any first lines of
    the file (entries[:n]) as well as for all of them. A small module and a plain class (no dataclass to
    build at start-up): the rules declare a fold, and most commands import them. Its functions are
    named ones, not lambdas: a fold pickles, to be handed to a worker process."""

    __slots__ = ("key", "start", "step", "resume", "prefixes")

    def __init__(
        self,
        key: str,
        start: Callable[[], State],
        step: Callable[[State, Any], State],
        resume: Callable[[State], State] = _as_it_is,
        prefixes: bool = False,
    ) -> None:
        self.key, self.start, self.step, self.resume, self.prefixes = key, start, step, resume, prefixes

    def __repr__(self) -> str:
        return f"Fold({self.key!r})"
