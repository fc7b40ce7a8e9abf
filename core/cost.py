"""What a session's API calls cost: every billed call once, by the part of the prompt it paid for.

A call is one API response: Claude Code writes a response over several lines with the same
message id, and its usage once per line, so each response counts once, from its last line (as the
context count takes it). Every branch and sidechain the file holds was billed and counts; synthetic
error lines were never sent and do not. Cache writes are split by their TTL when the usage says so
(`cache_creation.ephemeral_1h_input_tokens`); otherwise they are 5-minute writes, the default.
Prices come from the model catalog (core.catalog), --prices before it: a call whose whole prompt is
over the model's long-prompt threshold is billed at that rate, a fast-mode call (usage.speed) at the
model's fast rate, and a call served by US-only inference at 1.1 times, as Claude Code 2.1.332 does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .catalog import Prices
from .count import usage_prompt, usage_tokens
from .fields import text
from .jsonl import Entry
from .model import Message
from .prices import price_of
from .reports import CallRow, CostReport, DollarParts, PricesReport, TokenParts

MILLION = 1_000_000
# A main-chain call rebuilt the cache when it read less than half of what the main chain's call before
# it had in its prompt, and wrote that much again instead (an expired cache, a compaction, or an edit
# high in the prompt).
REBUILT_SHARE = 0.5
# Claude Code 2.1.332 prices a call served by US-only inference (usage.inference_geo "us") at 1.1 times the list.
US_INFERENCE = 1.1


def token_parts(usage: dict[str, object]) -> TokenParts:
    """A usage record's tokens by how they are billed."""
    written = usage_tokens(usage, "cache_creation_input_tokens")
    split = usage.get("cache_creation")
    hour = min(usage_tokens(split, "ephemeral_1h_input_tokens"), written) if isinstance(split, dict) else 0
    return TokenParts(
        input=usage_tokens(usage, "input_tokens"),
        cache_write_5m=written - hour,
        cache_write_1h=hour,
        cache_read=usage_tokens(usage, "cache_read_input_tokens"),
        output=usage_tokens(usage, "output_tokens"),
    )


def inference_scale(usage: dict[str, object]) -> float:
    """What the call's list prices are multiplied by: US_INFERENCE for US-only inference, else 1."""
    return US_INFERENCE if usage.get("inference_geo") == "us" else 1.0


def billed_rate(usage: dict[str, object], prices: Prices) -> Prices:
    """The rate a call was billed at: fast mode's when usage.speed says so (and the model has one),
    else the long-prompt rate when its whole prompt is over the model's threshold."""
    if usage.get("speed") == "fast" and prices.fast is not None:
        return prices.fast
    return prices.for_prompt(usage_prompt(usage))


def dollars(tokens: TokenParts, rate: Prices, scale: float = 1.0) -> DollarParts:
    """Each part's tokens at `rate` (already chosen for the call), times `scale` (US-only inference)."""
    return DollarParts(
        input=tokens.input * rate.input * scale / MILLION,
        cache_write_5m=tokens.cache_write_5m * rate.cache_write_5m * scale / MILLION,
        cache_write_1h=tokens.cache_write_1h * rate.cache_write_1h * scale / MILLION,
        cache_read=tokens.cache_read * rate.cache_read * scale / MILLION,
        output=tokens.output * rate.output * scale / MILLION,
    )


def prices_report(prices: Prices) -> PricesReport:
    """A model's list prices as a report shows them (a long prompt's and fast mode's rates apart)."""
    return PricesReport(
        input=prices.input, cache_write_5m=prices.cache_write_5m, cache_write_1h=prices.cache_write_1h, cache_read=prices.cache_read, output=prices.output
    )


def _usd(parts: DollarParts) -> float:
    """The parts' sum, added in their order."""
    return sum((parts.input, parts.cache_write_5m, parts.cache_write_1h, parts.cache_read, parts.output))


def _total_tokens(parts: Sequence[TokenParts]) -> TokenParts:
    return TokenParts(
        input=sum(p.input for p in parts),
        cache_write_5m=sum(p.cache_write_5m for p in parts),
        cache_write_1h=sum(p.cache_write_1h for p in parts),
        cache_read=sum(p.cache_read for p in parts),
        output=sum(p.output for p in parts),
    )


def _total_dollars(parts: Sequence[DollarParts]) -> DollarParts:
    """Each part's sum, added in the calls' order."""
    return DollarParts(
        input=sum((p.input for p in parts), 0.0),
        cache_write_5m=sum((p.cache_write_5m for p in parts), 0.0),
        cache_write_1h=sum((p.cache_write_1h for p in parts), 0.0),
        cache_read=sum((p.cache_read for p in parts), 0.0),
        output=sum((p.output for p in parts), 0.0),
    )


def _rounded(parts: DollarParts) -> DollarParts:
    """Each part to a millionth of a dollar."""
    return DollarParts(
        input=round(parts.input, 6),
        cache_write_5m=round(parts.cache_write_5m, 6),
        cache_write_1h=round(parts.cache_write_1h, 6),
        cache_read=round(parts.cache_read, 6),
        output=round(parts.output, 6),
    )


def _hit_rate(read: int, prompt: int) -> float | None:
    return round(read / prompt, 4) if prompt else None


@dataclass
class SessionCost:
    calls: list[CallRow]
    report: CostReport


def session_cost(calls: Sequence[Message], entries: Sequence[Entry], main: Collection[int], table: Sequence[tuple[str, Prices]] = ()) -> SessionCost:
    """The cost of `calls` (a format's `api_calls`, in file order). `main`: the entry positions of the
    main chain (history included); a call whose last line is among them is drawn on the timeline.
    A call of a model no price is known for counts its tokens but makes the total unknown (None)."""
    rows: list[CallRow] = []
    spent: list[DollarParts] = []  # each priced call's dollars by part
    priced: dict[str, PricesReport] = {}
    unpriced: list[str] = []
    models: list[str] = []
    long_calls = fast_calls = rebuilds = 0
    previous = 0  # the prompt of the main chain's call before
    for turn, call in enumerate(calls, 1):
        usage = call.usage or {}
        parts = token_parts(usage)
        prompt = usage_prompt(usage)
        model = call.model
        if model and model not in models:
            models.append(model)
        prices = price_of(model, table)
        cost: float | None = None
        if prices is None:
            unpriced += [] if (model or "(no model)") in unpriced else [model or "(no model)"]
        else:
            rate = billed_rate(usage, prices)
            long_calls += rate is prices.long_context
            fast_calls += rate is prices.fast
            if (model or "") not in priced:  # the list prices (a long prompt's and fast mode's rates apart)
                priced[model or ""] = prices_report(prices)
            part_costs = dollars(parts, rate, inference_scale(usage))
            spent.append(part_costs)
            cost = round(_usd(part_costs), 6)
        last = entries[call.entries[-1]] if call.entries else None
        on_main = bool(call.entries) and call.entries[-1] in main
        # Only the main chain is one prompt growing call by call: each subagent (sidechain) starts a prompt of its own.
        written = parts.cache_write_5m + parts.cache_write_1h
        rebuilt = on_main and previous > 0 and parts.cache_read < REBUILT_SHARE * previous and written >= REBUILT_SHARE * previous
        rebuilds += rebuilt
        previous = prompt if on_main else previous
        rows.append(
            CallRow(
                turn=turn,
                line=(last.line or None) if last else None,
                timestamp=text(last.obj, "timestamp") if last else None,
                model=model,
                main=on_main,
                prompt_tokens=prompt,
                output_tokens=parts.output,
                tokens=parts,
                usd=cost,
                cache_hit_rate=_hit_rate(parts.cache_read, prompt),
                cache_rebuilt=rebuilt,
            )
        )
    tokens = _total_tokens([row.tokens for row in rows])
    prompt_total = tokens.input + tokens.cache_write_5m + tokens.cache_write_1h + tokens.cache_read
    usd = _total_dollars(spent)
    report = CostReport(
        usd=round(_usd(usd), 6) if not unpriced else None,
        usd_by_part=_rounded(usd),
        tokens=tokens,
        api_calls=len(rows),
        cache_hit_rate=_hit_rate(tokens.cache_read, prompt_total),
        cache_rebuilds=rebuilds,
        models=models,
        prices_per_mtok=priced,
        long_context_calls=long_calls,
        fast_calls=fast_calls,
        unpriced_models=unpriced,
    )
    return SessionCost(rows, report)
