"""The rows of `count --by day|project|session` (schemas/count.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Absent, Wire, sometimes, sometimes_null

if TYPE_CHECKING:  # annotations only
    from .cost import TokenParts


RollupBy = Literal["day", "project", "session"]


@dataclass(kw_only=True, slots=True)
class RollupRow(Wire):
    """A row of `count --by day|project|session --json`: the API calls of one group, each billed call once."""

    by: RollupBy
    group: str  # the day (YYYY-MM-DD in --timezone; "(no time)" for calls without a timestamp), the project, or the session id
    usd: float | None  # None when a call's model has no known price
    tokens: TokenParts
    api_calls: int
    files: int  # the files holding the group's calls
    models: list[str]
    project: str | None = sometimes()  # session rows: the session's project
    title: str | None | Absent = sometimes_null()  # session rows: the session's title (core.titles), null without one


@dataclass(kw_only=True, slots=True)
class RollupTotal(Wire):
    """The last row of `count --by day|project|session --json`: every row added up."""

    by: RollupBy
    group: None = None
    total: Literal[True] = True
    usd: float | None  # the rows' usd added up; None when one is unknown
    tokens: TokenParts
    api_calls: int
    files: int  # the files counted
    failed: int  # the files that could not be read
    groups: int
