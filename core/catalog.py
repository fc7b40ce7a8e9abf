"""The models Claude Code knows, declared once (catalog_data.py, read from Claude Code 2.1.332's binary).

Windows, output reserves, thresholds, prices, the rough estimator and the status line read a model
here. A model is found under any id a transcript records: the catalog id, the first-party API id
(dated or not), the Bedrock, Vertex and gateway spellings, and any of them with `[1m]`. There is no
substring matching: `claude-opus-4` must not price `claude-opus-4-8`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

ONE_MILLION_SUFFIX = re.compile(r"\[1m\]", re.IGNORECASE)
# How a spelling differs from the catalog's ids: a region prefix (Bedrock's "us." and kin), a
# version suffix ("-v1:0", "-v2"), a date ("-20250929", "@20250929").
_SPELLING_PARTS = (
    re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\."),
    re.compile(r"-v\d+(?::\d+)?$"),
    re.compile(r"(?:-|@)\d{8}$"),
)


LONG_CONTEXT = 200_000  # where a price table names no threshold: Anthropic's long-context rate starts above it

# ctxpipe's addition, not Claude Code's: Anthropic bills a request of these models whose prompt is over
# 200,000 tokens at this rate, the whole request (its pricing page). Claude Code's catalog has no such
# rate, so its cost.total_cost_usd is lower for those requests.
ANTHROPIC_LONG_CONTEXT: dict[str, dict[str, float]] = {
    "claude-sonnet-4-0": {"above_prompt_tokens": 200000, "input": 6, "cache_write_5m": 7.5, "cache_write_1h": 12, "cache_read": 0.6, "output": 22.5},
    "claude-sonnet-4-5": {"above_prompt_tokens": 200000, "input": 6, "cache_write_5m": 7.5, "cache_write_1h": 12, "cache_read": 0.6, "output": 22.5},
    "claude-sonnet-4-6": {"above_prompt_tokens": 200000, "input": 6, "cache_write_5m": 7.5, "cache_write_1h": 12, "cache_read": 0.6, "output": 22.5},
    "claude-opus-4-6": {"above_prompt_tokens": 200000, "input": 10, "cache_write_5m": 12.5, "cache_write_1h": 20, "cache_read": 1, "output": 37.5},
}


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens. `long_context`: the rate of a request whose prompt is over
    `long_context_above` tokens (all of it); `fast`: the rate of a fast-mode request (usage.speed)."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float
    long_context: Prices | None = None
    long_context_above: int = LONG_CONTEXT
    fast: Prices | None = None

    def for_prompt(self, prompt_tokens: int) -> Prices:
        """The rate one request is billed at: its whole prompt decides."""
        return self.long_context if self.long_context is not None and prompt_tokens > self.long_context_above else self

    def as_dict(self) -> dict[str, float]:
        return {
            "input": self.input,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "cache_read": self.cache_read,
            "output": self.output,
        }


@dataclass(frozen=True)
class CatalogModel:
    """One model: its context, its output limits, its prices."""

    id: str
    display_name: str
    ids: tuple[str, ...]
    window: int  # the default window (200,000 where the catalog gives none)
    native_1m: bool  # 1M with no suffix
    maximum_window: int | None  # 1M only with [1m] or the 1M beta
    supports_1m_suffix: bool
    max_output: tuple[int, int]  # (default, upper)
    prices: Prices
    bytes_per_token: int  # Claude Code 2.1.332's rough estimate, len / this (carried, not applied yet: README)


@dataclass(frozen=True)
class Catalog:
    release: str  # the Claude Code release the catalog was read from
    models: tuple[CatalogModel, ...]
    by_spelling: dict[str, CatalogModel]

    def find(self, model: str | None) -> CatalogModel | None:
        """The catalog's model for a recorded id, or None for a model it does not know."""
        name = canonical_spelling(model)
        if not name:
            return None
        found = self.by_spelling.get(name)
        for part in _SPELLING_PARTS:
            if found is not None:
                break
            name = part.sub("", name)
            found = self.by_spelling.get(name)
        return found


def canonical_spelling(model: str | None) -> str:
    """The id without `[1m]`, lower-case, trimmed (how the catalog is keyed)."""
    return ONE_MILLION_SUFFIX.sub("", model or "").strip().lower()


def asks_for_1m(model: str | None) -> bool:
    return bool(model) and ONE_MILLION_SUFFIX.search(model or "") is not None


def _rate(row: dict[str, Any]) -> Prices:
    return Prices(row["input"], row["cache_write_5m"], row["cache_write_1h"], row["cache_read"], row["output"])


def _prices(tier: dict[str, Any], fast: dict[str, Any] | None, long_context: dict[str, Any] | None) -> Prices:
    """A model's prices: its tier, the tier's long-prompt rate (or Anthropic's long-context rate
    that Claude Code leaves out), and its fast-mode rate."""
    longer = tier.get("long_prompt") or long_context
    return replace(
        _rate(tier),
        long_context=_rate(longer) if longer else None,
        long_context_above=longer["above_prompt_tokens"] if longer else LONG_CONTEXT,
        fast=_rate(fast) if fast else None,
    )


@cache
def catalog() -> Catalog:
    from . import catalog_data  # on first use: a count that names no model (the status line's light path) never loads it

    tiers = catalog_data.PRICING_TIERS
    models = []
    for row in catalog_data.MODELS:
        context = row["context"]
        models.append(
            CatalogModel(
                id=row["id"],
                display_name=row["display_name"],
                ids=tuple(row["ids"]),
                window=int(context.get("window", 200_000)),
                native_1m=bool(context.get("native_1m", False)),
                maximum_window=context.get("maximum_window"),
                supports_1m_suffix=bool(context.get("supports_1m_suffix", False)),
                max_output=(row["max_output_tokens"]["default"], row["max_output_tokens"]["upper"]),
                prices=_prices(tiers[row["pricing"]], row.get("fast_prices"), ANTHROPIC_LONG_CONTEXT.get(row["id"])),
                bytes_per_token=row["bytes_per_token"],
            )
        )
    by_spelling: dict[str, CatalogModel] = {}
    for model in models:
        for spelling in model.ids:
            by_spelling.setdefault(canonical_spelling(spelling), model)
    return Catalog(catalog_data.RELEASE, tuple(models), by_spelling)
