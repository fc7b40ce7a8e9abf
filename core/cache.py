"""Is clearing worth breaking the prompt cache? A cost model for `microcompact --cache-aware`.

Changing a block of the prompt invalidates the cache from that block on: the next request writes
everything after it to the cache again (cache-write price) instead of reading it (cache-read price).
Clearing pays when the smaller prompt of the following turns saves more than that one-off write
costs. When the cache has expired anyway (idle longer than its TTL), the whole prompt is written
again either way, so clearing always pays: that is Claude Code's time-based trigger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .catalog import Prices, catalog
from .count import usage_tokens, usage_total
from .fields import moment
from .jsonl import Entry
from .model import Message
from .reports import CacheDecisionReport, PricesReport
from .stage import setting

PRICE_PARTS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
# What a cache-aware decision prices a model at when neither --prices nor the catalog knows it.
FALLBACK_PRICES = Prices(3.0, 3.75, 6.0, 0.30, 15.0)
PriceTable = tuple[tuple[str, Prices], ...]  # a user's --prices: (model fragment, prices), first match wins


@dataclass(frozen=True)
class Pricing:
    """--prices, declared once: count --cost, report, microcompact --cache-aware (see core.stage.Flag)."""

    prices: PriceTable | None = setting(
        None,
        "--prices",
        "A JSON price table {model fragment: {input, cache_write_5m, cache_write_1h, cache_read, output[, long_context]}} in $/MTok, before the model catalog's.",
        parse="prices",
    )


@dataclass(frozen=True)
class CacheModel(Pricing):
    """Whether a prompt-cache break pays for itself: microcompact --cache-aware, report's dry runs."""

    horizon: int = setting(5, "--horizon", "The turns within which a prompt-cache break must pay for itself (for --cache-aware, and report's dry runs).", min=1)


@dataclass(frozen=True)
class CachePolicy:
    clear_at_least: int = 10_000  # tokens: smaller savings are not worth a cache break
    horizon: int = 5  # further turns over which the break must pay for itself
    prices: PriceTable = ()
    model: str | None = None

    def prices_for(self, model: str | None) -> Prices:
        return price_of(self.model or model, self.prices) or FALLBACK_PRICES


def price_of(model: str | None, table: Sequence[tuple[str, Prices]] = ()) -> Prices | None:
    """The prices of the first fragment of `table` (--prices) the model's name holds, else the model
    catalog's for the model; None for a model neither knows."""
    name = (model or "").lower()
    if not name:
        return None
    given = next((prices for fragment, prices in table if fragment in name), None)
    if given is not None:
        return given
    known = catalog().find(model)
    return known.prices if known is not None else None


# $1 a token: any price a model has had is far below, and every sum of tokens times prices stays a
# finite number (1e308 $/MTok made a session's cost infinite: "usd": null, "$inf" on the page).
MAX_PRICE = 1_000_000


def prices_from(table: Mapping[str, Mapping[str, Any]]) -> PriceTable:
    """A user's price table ({"model fragment": {"input": …, "cache_write_5m": …, …, optionally
    "long_context": {the same five}}}), consulted before the catalog."""
    if not isinstance(table, Mapping) or not all(isinstance(row, Mapping) for row in table.values()):
        raise ValueError('expected {"model fragment": {"input": …, "cache_write_5m": …, …}}')
    return tuple((str(fragment).lower(), _row(str(fragment), row, nested=True)) for fragment, row in table.items())


def _row(fragment: str, row: Mapping[str, Any], nested: bool) -> Prices:
    long_context = row.get("long_context") if nested else None
    if sorted(key for key in row if not (nested and key == "long_context")) != sorted(PRICE_PARTS):
        raise ValueError(f"{fragment!r}: expected exactly the prices {', '.join(PRICE_PARTS)}" + (" (and long_context)" if nested else ""))
    for key in PRICE_PARTS:
        value = row[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_PRICE:
            raise ValueError(f"{fragment!r}: {key} must be a price in dollars per million tokens (a number from 0 to {MAX_PRICE:,})")
    if long_context is not None and not isinstance(long_context, Mapping):
        raise ValueError(f"{fragment!r}: long_context must be an object of the same prices")
    longer = _row(f"{fragment}.long_context", long_context, nested=False) if long_context is not None else None
    input_, write_5m, write_1h, read, output = (float(row[key]) for key in PRICE_PARTS)
    return Prices(input_, write_5m, write_1h, read, output, longer)


@dataclass
class CacheDecision:
    clear: bool
    reason: str
    tokens_freed: int
    prompt_tokens: int
    kept_prefix_tokens: int
    warm: bool
    ttl_minutes: int
    horizon: int
    cost_keep: float
    cost_clear: float
    break_even_turn: int | None
    prices: Prices
    per_turn: list[dict[str, float]] = field(default_factory=list)

    def report(self) -> CacheDecisionReport:
        prices = self.prices
        return CacheDecisionReport(
            clear=self.clear,
            reason=self.reason,
            tokens_freed=self.tokens_freed,
            prompt_tokens=self.prompt_tokens,
            kept_prefix_tokens=self.kept_prefix_tokens,
            cache_warm=self.warm,
            ttl_minutes=self.ttl_minutes,
            horizon=self.horizon,
            cost_keep_usd=round(self.cost_keep, 6),
            cost_clear_usd=round(self.cost_clear, 6),
            break_even_turn=self.break_even_turn,
            prices_per_mtok=PricesReport(
                input=prices.input,
                cache_write_5m=prices.cache_write_5m,
                cache_write_1h=prices.cache_write_1h,
                cache_read=prices.cache_read,
                output=prices.output,
            ),
        )


def costs(prompt: int, freed: int, kept_prefix: int, warm: bool, write: float, read: float, turns: int) -> tuple[list[float], list[float]]:
    """Cumulative dollars over `turns` requests, keeping the results vs clearing them now."""
    million = 1_000_000
    kept_prefix = min(kept_prefix, prompt - freed)
    first_keep = prompt * (read if warm else write)
    first_clear = kept_prefix * (read if warm else write) + (prompt - freed - kept_prefix) * write
    keep, clear = [first_keep / million], [first_clear / million]
    for _ in range(1, turns):
        keep.append(keep[-1] + prompt * read / million)
        clear.append(clear[-1] + (prompt - freed) * read / million)
    return keep, clear


def decide(messages: Sequence[Message], entries: Sequence[Entry], freed: int, kept_prefix: int, policy: CachePolicy, now: datetime) -> CacheDecision:
    response = next((m for m in reversed(messages) if m.role == "assistant" and m.usage), None)
    usage = response.usage if response and response.usage else {}
    prompt = usage_total(usage) if usage else 0
    creation = usage.get("cache_creation")
    creation = creation if isinstance(creation, dict) else {}
    ttl = 60 if usage_tokens(creation, "ephemeral_1h_input_tokens") > 0 else 5
    answered = moment(entries[response.entries[-1]].obj.get("timestamp")) if response else None
    warm = answered is not None and (now - answered).total_seconds() < ttl * 60
    prices = policy.prices_for(response.model if response else None).for_prompt(prompt)
    write = prices.cache_write_1h if ttl == 60 else prices.cache_write_5m
    horizon = max(1, policy.horizon)
    keep, clear = costs(max(prompt, freed), freed, kept_prefix, warm, write, prices.cache_read, horizon)
    break_even = next((turn + 1 for turn in range(horizon) if clear[turn] <= keep[turn]), None)
    per_turn = [{"turn": turn + 1, "keep_usd": round(keep[turn], 6), "clear_usd": round(clear[turn], 6)} for turn in range(horizon)]
    if freed < policy.clear_at_least:
        verdict, reason = False, f"{freed:,} tokens freed is under --clear-at-least {policy.clear_at_least:,}"
    elif break_even is None:
        verdict, reason = False, f"the cache break would not pay for itself within {horizon} turns (${clear[-1]:.4f} vs ${keep[-1]:.4f})"
    else:
        state = "warm" if warm else f"expired (idle over {ttl} min)"
        verdict, reason = True, f"pays for itself by turn {break_even} of {horizon} (cache {state}; ${clear[-1]:.4f} vs ${keep[-1]:.4f} over {horizon} turns)"
    return CacheDecision(verdict, reason, freed, prompt, kept_prefix, warm, ttl, horizon, keep[-1], clear[-1], break_even, prices, per_turn)
