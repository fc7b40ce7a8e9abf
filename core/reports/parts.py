"""Parts shared by several reports (schemas/report-defs.schema.json) and the cost model's."""

from __future__ import annotations

from dataclasses import dataclass

from ..wire import Wire


@dataclass(kw_only=True, slots=True)
class FailedFile(Wire):
    """A batch's row for a file that could not be read (the others were), in every command's --json
    that takes several inputs: count, warn, validate, audit, compact."""

    file: str
    error: str  # the one-line message stderr gives, without the file's name (the line in it, when known)

    @classmethod
    def of(cls, file: str, error: Exception) -> FailedFile:
        """The row of `file` (as the batch names it) for the error that stopped it."""
        from ..errors import InputError

        if isinstance(error, InputError):
            return cls(file=file, error=f"line {error.line}: {error.what}" if error.line is not None else error.what)
        return cls(file=file, error=str(error).removeprefix(f"{file}: "))


@dataclass(kw_only=True, slots=True)
class ToolFigures(Wire):
    """One tool's row of `by_tool`: results cleared or folded, and their estimated tokens (a stage adds them up)."""

    results: int
    tokens: int


@dataclass(kw_only=True, slots=True)
class PricesReport(Wire):
    """Dollars per million tokens."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float


@dataclass(kw_only=True, slots=True)
class CacheDecisionReport(Wire):
    """microcompact --cache-aware: whether clearing pays for the cache break (core.cache.CacheDecision)."""

    clear: bool
    reason: str
    tokens_freed: int
    prompt_tokens: int
    kept_prefix_tokens: int
    cache_warm: bool
    ttl_minutes: int
    horizon: int
    cost_keep_usd: float
    cost_clear_usd: float
    break_even_turn: int | None
    prices_per_mtok: PricesReport
