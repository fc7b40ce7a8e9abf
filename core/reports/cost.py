"""What a session's API calls cost (count --cost, report)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..wire import Wire

if TYPE_CHECKING:  # annotations only
    from .parts import PricesReport


@dataclass(kw_only=True, slots=True)
class TokenParts(Wire):
    """Tokens of the API calls by how they are billed."""

    input: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    output: int


@dataclass(kw_only=True, slots=True)
class DollarParts(Wire):
    """US dollars by the same parts as TokenParts."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float


@dataclass(kw_only=True, slots=True)
class CostReport(Wire):
    """What the API calls recorded in one transcript cost (`count --cost`; `report --json`'s cost).

    Every billed call counts once: every branch and sidechain the file holds, a response split over
    several lines once (its usage from its last line), synthetic error lines never."""

    usd: float | None  # None when a call's model has no known price (unpriced_models; --prices FILE adds one)
    usd_by_part: DollarParts  # the priced calls
    tokens: TokenParts
    api_calls: int
    cache_hit_rate: float | None  # cache reads / every prompt token; None with no prompt at all
    cache_rebuilds: int  # main-chain calls that wrote most of their prompt to the cache again
    models: list[str]
    prices_per_mtok: dict[str, PricesReport]  # by model: its list prices
    long_context_calls: int  # calls over the model's long-prompt threshold, priced at its long-context rate
    fast_calls: int  # fast-mode calls (usage.speed "fast"), priced at the model's fast rate
    unpriced_models: list[str]


@dataclass(kw_only=True, slots=True)
class CallRow(Wire):
    """One API call: a point of the timeline (when `main`) and a row of the cost per turn."""

    turn: int  # 1-based, in file order, over every billed call
    line: int | None
    timestamp: str | None
    model: str | None
    main: bool  # on the main chain (the timeline); False: a sidechain or an abandoned branch
    prompt_tokens: int  # input + cache writes + cache reads: the context size the call was sent
    output_tokens: int
    tokens: TokenParts
    usd: float | None  # None: no price is known for its model
    cache_hit_rate: float | None  # this call's cache reads / its prompt
    cache_rebuilt: bool
