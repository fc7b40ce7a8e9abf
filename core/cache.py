"""Is clearing worth breaking the prompt cache? A cost model for `microcompact --cache-aware`.

Changing a block of the prompt invalidates the cache from that block on: the next request writes
everything after it to the cache again (cache-write price) instead of reading it (cache-read price).
Clearing pays when the smaller prompt of the following turns saves more than that one-off write
costs. When the cache has expired anyway (idle longer than its TTL), the whole prompt is written
again either way, so clearing always pays: that is Claude Code's time-based trigger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .catalog import Prices
from .count import usage_tokens, usage_total
from .fields import moment
from .jsonl import Entry
from .model import Message
from .prices import FALLBACK_PRICES, PriceTable, price_of
from .reports import CacheDecisionReport, PricesReport


@dataclass(frozen=True)
class CachePolicy:
    clear_at_least: int = 10_000  # tokens: smaller savings are not worth a cache break
    horizon: int = 5  # further turns over which the break must pay for itself
    prices: PriceTable = ()
    model: str | None = None

    def prices_for(self, model: str | None) -> Prices:
        return price_of(self.model or model, self.prices) or FALLBACK_PRICES


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
