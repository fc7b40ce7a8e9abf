"""Model prices: the catalog's, or a user's --prices table consulted first, and the --prices and
--horizon options that declare them once for every command that prices a call (count --cost,
audit, report, microcompact --cache-aware). Apart from core/cache.py's cost model, which only
microcompact and report's dry runs load."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .catalog import Prices, catalog
from .setting import setting

PRICE_PARTS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
# What a cache-aware decision prices a model at when neither --prices nor the catalog knows it.
FALLBACK_PRICES = Prices(3.0, 3.75, 6.0, 0.30, 15.0)
PriceTable = tuple[tuple[str, Prices], ...]  # a user's --prices: (model fragment, prices), first match wins


MAX_HORIZON = 1_000  # turns: far past any session's cache lifetime (a break pays within a few turns or never)


@dataclass(frozen=True)
class Pricing:
    """--prices, declared once: count --cost, report, microcompact --cache-aware (see core.setting.Flag)."""

    prices: PriceTable | None = setting(
        None,
        "--prices",
        "A JSON price table {model fragment: {input, cache_write_5m, cache_write_1h, cache_read, output[, long_context]}} in $/MTok, before the model catalog's.",
        parse="prices",
    )


@dataclass(frozen=True)
class CacheModel(Pricing):
    """Whether a prompt-cache break pays for itself: microcompact --cache-aware, report's dry runs."""

    # At most MAX_HORIZON: each dry run lists a figure a turn (a horizon of a hundred million took minutes and gigabytes).
    horizon: int = setting(
        5, "--horizon", "The turns within which a prompt-cache break must pay for itself (for --cache-aware, and report's dry runs).", min=1, max=MAX_HORIZON
    )


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
