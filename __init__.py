"""ctxpipe: context-window management for saved AI coding-agent transcripts.

Library use:

    import ctxpipe
    transcript = ctxpipe.read_transcript("session.jsonl")
    messages = ctxpipe.api_messages(transcript)
    counted = ctxpipe.count_many(["~/.claude/projects/"], jobs=4)   # a batch: local workers, or executor="dask"

The names below are ctxpipe.api's (its docstring says more); `ctxpipe.api` also re-exports the
lower-level names the command line uses.
"""

from __future__ import annotations

from .files import dataclass_code
from .files.dataclass_code import TYPE_CHECKING

if TYPE_CHECKING:  # typing is not loaded on the status line's light path (core/records.py)
    from typing import Any

# Before any module of ours defines a dataclass: their generated methods load instead of compiling.
dataclass_code.install()

__version__ = "0.1.0"
__all__ = [
    "__version__",
    "api_messages",
    "compact",
    "compact_file",
    "context_management",
    "convert",
    "convert_with_report",
    "count_transcript",
    "expand",
    "read_transcript",
    "report_html",
    "run_stage",
    "session_report",
    "validate_transcript",
    "warn_transcript",
    "write_transcript",
    "compact_many",
    "count_many",
    "report_many",
    "rollup_many",
    "session_files",
    "validate_many",
    "status_line",
    "refresh_status_savings",
    "StatusFigures",
    "StatusOptions",
    "BatchResult",
    "CompactBatch",
    "CompactOptions",
    "CountBatch",
    "CountOptions",
    "FileResult",
    "NotASession",
    "ReportBatch",
    "ReportOptions",
    "ReportedFile",
    "ValidatedFile",
]


def __getattr__(name: str) -> Any:
    # Loaded on first use: `import ctxpipe` stays as light as the package itself (the API loads what a job needs).
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'ctxpipe' has no attribute {name!r}")
