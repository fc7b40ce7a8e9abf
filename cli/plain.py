"""Option values in their plain spellings (a whole number, a decimal number, a choice's exact value),
converted as typer's own converter converts them, without typer or pydantic: cli/coercion.py gives
typer these, and cli/direct.py uses them to run a command line without typer. Anything else is
NOT_PLAIN: only typer's converter can say what it is (a value, or the error).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

_WHOLE = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
NOT_PLAIN = object()  # not a plain spelling: typer's converter decides


def _number(kind: type, value: Any) -> Any:
    if isinstance(value, bool):
        return NOT_PLAIN
    if kind is int:
        if isinstance(value, int):
            return value
        if not (isinstance(value, str) and _WHOLE.fullmatch(value)):
            return NOT_PLAIN
        try:
            return int(value)
        except ValueError:  # more digits than int() reads (sys.get_int_max_str_digits): typer's converter says so
            return NOT_PLAIN
    if isinstance(value, (int, float)):
        return float(value)
    return float(value) if isinstance(value, str) and _DECIMAL.fullmatch(value) else NOT_PLAIN


def plain_value(annotation: Any, low: Any, high: Any, value: Any) -> Any:
    """`value` as typer's converter would give it, or NOT_PLAIN where only that converter can say."""
    if annotation is str:
        return value if isinstance(value, str) else NOT_PLAIN
    if annotation is bool:
        return value if isinstance(value, bool) else NOT_PLAIN
    if annotation in (int, float):
        number = _number(annotation, value)
        if number is NOT_PLAIN or (low is not None and number < low) or (high is not None and number > high):
            return NOT_PLAIN
        return number
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if isinstance(value, annotation):
            return value
        return next((member for member in annotation if isinstance(value, str) and member.value == value), NOT_PLAIN)
    if getattr(annotation, "__origin__", None) is list and getattr(annotation, "__args__", None) == (str,):
        return list(value) if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value) else NOT_PLAIN
    return NOT_PLAIN


def handled(annotation: Any) -> bool:
    if annotation in (str, bool, int, float):
        return True
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return True
    return getattr(annotation, "__origin__", None) is list and getattr(annotation, "__args__", None) == (str,)
