"""How a setting is spelled on the command line: a settings dataclass's fields carry their flag, in
neutral terms (the core does not import the CLI library). The CLI builds each stage's command, and
api-edits', from them, and `compact` builds its options from the stages it runs, so a flag has one
name, help text and range wherever it appears. Apart from core/stage.py so that a command that runs
no stage (count's --prices) declares its options without loading the stages' machinery."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Flag:
    """How a setting is spelled on the command line."""

    name: str  # "--keep-recent"
    help: str
    short: str | None = None  # "-m"
    off: str | None = None  # a boolean's negative form ("--no-verify"): `--verify/--no-verify`
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()  # the only values accepted
    # What the text given becomes, when it is not the field's plain type (the CLI checks and converts
    # it while parsing): "time" (ISO 8601 → datetime), "file" (a readable file), "names" (a comma
    # list → frozenset), "span" ("A..B" → a pair), "prices" (a price table file → the table), "folder" (a folder that is there),
    # "percentage" (above 0, at most 100), "turns" ("all" or a whole number ≥ 1 → "all" or the number).
    parse: str | None = None
    metavar: str | None = None  # what the help shows for the value ("NAME"); None: its type's
    # Given once per value (`--exclude-tool A --exclude-tool B`): the field, a tuple, holds every value, in order.
    repeatable: bool = False


FLAG = "ctxpipe_flag"


def setting(default: Any, name: str, help: str, **spelling: Any) -> Any:
    """A settings field with its flag: `keep_recent: int = setting(5, "--keep-recent", "…", min=0)`."""
    return field(default=default, metadata={FLAG: Flag(name, help, **spelling)})


def flag_of(item: Any) -> Flag | None:
    """The flag of a dataclass field (None: the field is set by the program, not on the command line)."""
    found = item.metadata.get(FLAG)
    return found if isinstance(found, Flag) else None


def no_marker() -> Any:
    """The --no-marker setting, one spelling for every stage that appends a record of what it did."""
    return setting(
        False, "--no-marker", "Do not append the record saying what was cleared, folded or snipped (microcompact_boundary, ctxpipe_collapse, snip_boundary)."
    )


def out_of_range(settings: Any) -> tuple[str, str] | None:
    """(flag, why) for the first field of a settings dataclass whose value its flag would refuse on
    the command line (below its min, above its max, not one of its choices), else None: a library
    caller's settings are held to the flags' own ranges."""
    from dataclasses import fields, is_dataclass

    if not is_dataclass(settings):
        return None
    for item in fields(settings):
        flag = flag_of(item)
        value = getattr(settings, item.name)
        if flag is None or value is None or flag.parse is not None:
            continue
        if flag.choices and value not in flag.choices:
            return flag.name, f"{value!r} is not one of {', '.join(flag.choices)}"
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and flag.min is not None and value < flag.min:
            return flag.name, f"{value!r} is below {flag.min:g}"
        if number and flag.max is not None and value > flag.max:
            return flag.name, f"{value!r} is above {flag.max:g}"
    return None
