"""Cost rolled up by day, project or session over many files (`count --by day|project|session`).

Each billed API call counts once, as `count --cost` prices it (core.cost): its tokens by kind and its
dollars go to one group. A call is identified by its message id and request id, so a response that a
resumed or forked session copied into a second file counts once, in the first file of the batch that
holds it (as ccusage counts it); a call without both ids is always counted. A call's day is the date
of its own timestamp in the chosen time zone (a session spanning midnight splits across two days); a
call without a readable timestamp falls on no day ("(no time)") and outside any --since/--until.
A session is its main file and the subagent and compaction side-call files Claude Code wrote for it.
Every group's dollars are the sum of its calls' (each to a millionth of a dollar), rounded to a
millionth; the total adds up the rows, so the rows add up to it exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import NamedTuple

from .fields import moment
from .reports import RollupBy, RollupRow, RollupTotal, TokenParts

PARTS = tuple(part.name for part in fields(TokenParts))  # the kinds of tokens, in order
NO_TIME = "(no time)"  # the day of a call whose timestamp cannot be read
_DATE = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})")  # 20250101 (as ccusage takes it) or 2025-01-01


class RollupCall(NamedTuple):
    """One billed API call, as a rollup needs it."""

    key: str | None  # message id and request id: the same call in another file (None: not known)
    timestamp: str | None
    model: str | None
    tokens: TokenParts
    usd: float | None  # None: no price is known for its model


@dataclass(frozen=True)
class FileCalls:
    """One file's billed calls and what they roll up under."""

    file: str
    session: str  # the session's id (its main file's name without .jsonl)
    session_key: str  # the session within the batch: the folder holding its main file, and its id
    project: str  # the cwd the file records, else its projects folder's name decoded
    main: bool  # the session's main file (its title and project are the session's)
    title: str | None
    calls: list[RollupCall] = field(default_factory=list)
    skipped_lines: int = 0  # bad lines left out (--on-error skip)


def parse_bound(text: str, zone: tzinfo | None = None, end: bool = False) -> datetime:
    """An instant from --since (`end` False) or --until (`end` True): a date (20250101, 2025-01-01)
    is its day in `zone` (None: the machine's local time zone), from its first instant for --since and
    to its last for --until; an ISO 8601 time is that instant (in `zone` when it gives no offset).
    Raises ValueError for anything else. --until's instant is exclusive: the day after, or the time
    given plus a microsecond (the finest a timestamp holds), so that both bounds include what they name."""
    text = text.strip()
    whole = _DATE.fullmatch(text)
    if whole:
        day = date(int(whole[1]), int(whole[2]), int(whole[3]))
        start = _in_zone(datetime(day.year, day.month, day.day), zone)
        return _in_zone(datetime.combine(day + timedelta(days=1), datetime.min.time()), zone) if end else start
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    when = when if when.tzinfo else _in_zone(when, zone)
    return when + timedelta(microseconds=1) if end else when


def zone_named(name: str) -> tzinfo:
    """The time zone of an IANA name (Europe/Paris) or UTC; ValueError when none is known by that name."""
    if name.upper() in ("UTC", "Z"):
        return timezone.utc  # known without the time zone database
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone this machine knows (an IANA name such as Europe/Paris, or UTC)") from None


def _in_zone(naive: datetime, zone: tzinfo | None) -> datetime:
    # astimezone() on a naive time takes it as local time, the daylight saving of that very date included.
    return naive.replace(tzinfo=zone) if zone is not None else naive.astimezone()


@dataclass(frozen=True)
class Window:
    """The calls --since and --until keep: start <= timestamp < end (None: no bound)."""

    start: datetime | None = None
    end: datetime | None = None

    @property
    def bounded(self) -> bool:
        return self.start is not None or self.end is not None

    def holds(self, when: datetime | None) -> bool:
        if when is None:
            return not self.bounded
        return (self.start is None or when >= self.start) and (self.end is None or when < self.end)


def day_of(when: datetime | None, zone: tzinfo | None = None) -> str:
    """The date a call falls on in `zone` (None: local time), as YYYY-MM-DD."""
    return NO_TIME if when is None else when.astimezone(zone).date().isoformat()


@dataclass
class _Group:
    name: str
    project: str | None = None
    title: str | None = None
    usd: float | None = 0.0
    tokens: list[int] = field(default_factory=lambda: [0] * len(PARTS))
    calls: int = 0
    files: set[str] = field(default_factory=set)
    models: list[str] = field(default_factory=list)
    last: datetime | None = None

    def add(self, call: RollupCall, file: str, when: datetime | None) -> None:
        self.usd = None if self.usd is None or call.usd is None else self.usd + call.usd
        for index, part in enumerate(PARTS):
            self.tokens[index] += getattr(call.tokens, part)
        self.calls += 1
        self.files.add(file)
        if call.model and call.model not in self.models:
            self.models.append(call.model)
        if when is not None and (self.last is None or when > self.last):
            self.last = when

    def row(self, by: RollupBy) -> RollupRow:
        session = by == "session"
        return RollupRow(
            by=by,
            group=self.name,
            usd=None if self.usd is None else round(self.usd, 6),
            tokens=TokenParts(**dict(zip(PARTS, self.tokens))),
            api_calls=self.calls,
            files=len(self.files),
            models=self.models,
            project=self.project if session else None,
            **({"title": self.title} if session else {}),
        )


def rollup(files: Sequence[FileCalls], by: RollupBy, zone: tzinfo | None = None, window: Window = Window(), failed: int = 0) -> list[RollupRow | RollupTotal]:
    """The rows of `count --by <by>` over `files` (in the batch's order), then the total row.

    Days come in date order (calls without a time last); projects and sessions in the order of
    their latest call (the most recent last, beside the total)."""
    sessions = {file.session_key: file for file in files if file.main}  # the main file speaks for its session
    seen: set[str] = set()
    groups: dict[str, _Group] = {}
    for file in files:
        session = sessions.get(file.session_key, file)
        for call in file.calls:
            if call.key is not None:
                if call.key in seen:
                    continue
                seen.add(call.key)
            when = moment(call.timestamp)
            if not window.holds(when):
                continue
            if by == "day":
                day = day_of(when, zone)
                group = groups.setdefault(day, _Group(day))
            elif by == "project":
                group = groups.setdefault(session.project, _Group(session.project))
            else:
                title = session.title if session.main else None
                group = groups.setdefault(file.session_key, _Group(session.session, session.project, title))
            group.add(call, file.file, when)
    if by == "day":
        ordered = sorted(groups.values(), key=lambda group: (group.name == NO_TIME, group.name))
    else:
        ordered = sorted(groups.values(), key=lambda group: (group.last is not None, group.last or datetime.min))
    rows: list[RollupRow | RollupTotal] = [group.row(by) for group in ordered]
    figures = [row.usd for row in rows if isinstance(row, RollupRow)]
    totals = [sum(group.tokens[index] for group in ordered) for index in range(len(PARTS))]
    rows.append(
        RollupTotal(
            by=by,
            usd=None if None in figures else round(sum(figure for figure in figures if figure is not None), 6),
            tokens=TokenParts(**dict(zip(PARTS, totals))),
            api_calls=sum(group.calls for group in ordered),
            files=len(files),
            failed=failed,
            groups=len(ordered),
        )
    )
    return rows
