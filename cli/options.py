"""Option types shared by every command, so each flag is spelled and documented once."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypedDict, cast

from ..api import NAMES, STDIN
from ..core.jsonl import OnError as ReadErrors
from . import declare

if TYPE_CHECKING:
    from ..api import Executor as Place


class OnErrorChoice(str, Enum):
    fail = "fail"
    skip = "skip"


class SourceChoice(str, Enum):
    """restore --source (and compact's): where a restored file's content comes from."""

    disk = "disk"
    transcript = "transcript"
    auto = "auto"


def iso_time(value: Optional[str]) -> Optional[str]:
    """Checks a time option when the command line is parsed; the value stays the string given."""
    from ..core.fields import moment

    if value is not None and moment(value) is None:
        raise declare.BadParameter(f"{value!r} is not an ISO 8601 time, such as 2026-05-04T10:00:00Z")
    return value


def parse_now(value: str | None) -> datetime:
    """--now as a time (iso_time checked it when the command line was parsed), or the clock's."""
    from ..core.fields import moment

    return moment(iso_time(value)) or datetime.now(timezone.utc)


def rollup_bound(value: Optional[str]) -> Optional[str]:
    """Checks --since and --until when the command line is parsed: a date or an ISO 8601 time."""
    if value is not None:
        from ..core.rollup import parse_bound

        try:
            parse_bound(value)
        except (ValueError, OverflowError):
            raise declare.BadParameter(f"{value!r} is not a date (20260504, 2026-05-04) or an ISO 8601 time (2026-05-04T10:00:00Z)") from None
    return value


def time_zone(value: Optional[str]) -> Optional[str]:
    """Checks --timezone when the command line is parsed: a time zone this machine knows."""
    if value is not None:
        from ..core.rollup import zone_named

        try:
            zone_named(value)
        except ValueError as exc:
            raise declare.BadParameter(str(exc)) from None
    return value


def readable_file(value: Optional[str]) -> Optional[str]:
    """Checks, when the command line is parsed, that a file option names a file that can be read
    (one that cannot is bad input, as a transcript that cannot be read is: exit 1)."""
    if value is not None:
        from ..api import open_file

        open_file(value).close()
    return value


def existing_folder(value: Optional[str]) -> Optional[str]:
    """Checks a folder option (restore's --root): a folder that is there, so a misspelt one is not
    taken quietly for a root nothing lies under."""
    if value is not None and not os.path.isdir(value):
        raise declare.BadParameter(f"{value!r} is not a folder" if os.path.lexists(value) else f"no folder {value!r}")
    return value


def percentage(value: Optional[float]) -> Optional[float]:
    """Checks a percentage option: above 0, at most 100."""
    if value is not None and not 0 < value <= 100:
        raise declare.BadParameter(f"{value:g} is not a percentage above 0 and at most 100")
    return value


def claude_code_rules(value: Optional[str]) -> Optional[str]:
    """Checks --rules: a Claude Code release ctxpipe knows the rules of, or latest."""
    if value is not None:
        from ..core.rules import known_rules

        try:
            known_rules(value)
        except ValueError as exc:
            raise declare.BadParameter(str(exc)) from None
    return value


def price_table(value: Optional[str]) -> Any:
    """--prices FILE read when the command line is parsed: the user's table before the list prices;
    a file that cannot be read or is not a table is bad input."""
    if value is None:
        return None
    import orjson

    from ..api import read_side_file
    from ..core.errors import InputError
    from ..core.prices import prices_from

    data = read_side_file(value, "a price table")
    try:
        return prices_from(orjson.loads(data))
    except (ValueError, TypeError) as exc:
        raise InputError(value, None, f"not a price table: {exc}") from None


def choice_enum(name: str, values: Iterable[str]) -> type[Enum]:
    """A str Enum of `values`, so typer lists and checks them (made at run time from a registry:
    mypy reads only literal members, hence the cast)."""
    return cast("type[Enum]", Enum(name, {value.replace("-", "_"): value for value in values}, type=str))


# A class statement, so it can annotate options: its members come from the registry at run time, and
# mypy reads only literal members (hence the ignore).
FormatChoice = Enum("FormatChoice", {name.replace("-", "_"): name for name in NAMES}, type=str)  # type: ignore[misc]

InputPath = Annotated[
    Optional[str],
    declare.Argument(
        help="One transcript: a file or a store URL; '-' or nothing reads stdin. A folder is refused, naming the command that takes one.", show_default=False
    ),
]
InputPaths = Annotated[
    Optional[list[str]],
    declare.Argument(help="Transcript files, folders searched for sessions, or store URLs; '-' or nothing reads stdin.", show_default=False),
]
Format = Annotated[
    Optional[FormatChoice],
    declare.Option("--format", "-f", help="Input format; detected from the content when left out.", show_default=False),
]
OnError = Annotated[
    OnErrorChoice,
    declare.Option("--on-error", help="fail: stop at the first bad line. skip: leave bad lines out and count them on stderr."),
]
Output = Annotated[
    Optional[str],
    declare.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.", show_default=False),
]
Unbuffered = Annotated[bool, declare.Option("--unbuffered", "-u", help="Flush every output line at once (for tail -f pipes).")]
Json = Annotated[bool, declare.Option("--json", help="JSON Lines output (also the default when stdout is not a terminal).")]
# report writes its page to a pipe too: JSON only when asked.
FactsJson = Annotated[bool, declare.Option("--json", help="The pages' facts as JSON Lines on stdout instead of HTML (a page is written to a pipe too).")]


def format_name(choice: Optional[Enum]) -> Optional[str]:
    return None if choice is None else str(choice.value)


Ledger = Annotated[
    Optional[str], declare.Option("--ledger", help="Append what the run removed or changed to FILE, so `ctxpipe expand` can put it back.", show_default=False)
]
# expand reads the ledger the stages appended to (required there: it is what expand undoes).
LedgerToRead = Annotated[str, declare.Option("--ledger", help="The ledger file the stages appended to.", show_default=False)]
ReportJson = Annotated[Optional[str], declare.Option("--report-json", help="Write what the stage did to FILE as JSON.", show_default=False)]
Report = Annotated[bool, declare.Option("--report", help="Print what the stage did on stderr, in detail.")]
Now = Annotated[
    Optional[str], declare.Option("--now", help="The current time (ISO 8601) for time-based decisions and markers.", show_default=False, callback=iso_time)
]
Jobs = Annotated[int, declare.Option("--jobs", "-j", help="Worker processes for many files (0: one per core).", min=0)]


class ExecutorChoice(str, Enum):
    """--executor: where a batch's files are processed."""

    local = "local"
    dask = "dask"


Executor = Annotated[
    ExecutorChoice,
    declare.Option(
        "--executor",
        help="local: --jobs worker processes on this machine. dask: one task per file on a Dask cluster (--scheduler; needs ctxpipe[dask]).",
    ),
]
Scheduler = Annotated[
    Optional[str],
    declare.Option(
        "--scheduler",
        help="The Dask scheduler for --executor dask (tcp://HOST:PORT; default: $DASK_SCHEDULER_ADDRESS, else a local cluster of --jobs workers).",
        show_default=False,
    ),
]
Subagents = Annotated[bool, declare.Option("--subagents/--no-subagents", help="Include subagent files found in folders.")]
OutDir = Annotated[
    Optional[str],
    declare.Option(
        "--out-dir",
        help="Write each result here: a file given by name as DIR/NAME, the files of a folder given at the same place below DIR. "
        "Two results for one path, or one over an input, is a usage error before anything is written.",
        show_default=False,
    ),
]
Cost = Annotated[bool, declare.Option("--cost", help="Add what the session's API calls cost so far, by part, and its cache hit rate (reads every line).")]
Explain = Annotated[bool, declare.Option("--explain", help="Say on stderr where each figure came from, and any override that was ignored and why.")]


# --- bundles: options that go together, expanded into a command's parameters by flags.with_options ----


@dataclass(frozen=True)
class Reading:
    """How transcripts are read: their format (detected when left out) and what a bad line does."""

    input_format: Format = None
    on_error: OnError = OnErrorChoice.fail

    @property
    def format(self) -> Optional[str]:
        return format_name(self.input_format)

    @property
    def errors(self) -> ReadErrors:
        """--on-error as the readers take it: "fail" or "skip"."""
        return "skip" if self.on_error is OnErrorChoice.skip else "fail"


class RunOn(TypedDict):
    """A batch's keyword arguments for the api's batch functions (count_many, …)."""

    jobs: int
    executor: Place
    scheduler: str | None
    subagents: bool


@dataclass(frozen=True)
class Batch:
    """Many transcripts: files and folders searched for sessions, on worker processes."""

    paths: InputPaths = None
    jobs: Jobs = 0
    subagents: Subagents = True
    executor: Executor = ExecutorChoice.local
    scheduler: Scheduler = None

    def __post_init__(self) -> None:
        # Checked as the command line is read, whatever the command then does with it (stdin, one file).
        if self.scheduler and self.executor is not ExecutorChoice.dask:
            raise declare.BadParameter("--scheduler goes with --executor dask", param_hint="--scheduler")

    @property
    def run_on(self) -> RunOn:
        """Where the api's batch functions (count_many, …) find and run the files."""
        return {"jobs": self.jobs, "executor": self.executor.value, "scheduler": self.scheduler, "subagents": self.subagents}

    @property
    def from_stdin(self) -> bool:
        """No path, or only `-`: one transcript on stdin."""
        return not self.paths or self.paths == [STDIN]

    @property
    def one_transcript(self) -> bool:
        """stdin, or one path that is not a folder (a batch command then works as a filter)."""
        from ..api import is_folder

        paths = self.paths or []
        return self.from_stdin or (len(paths) == 1 and not is_folder(paths[0]))
