"""ctxpipe: context-window management for saved AI coding-agent transcripts.

Library use:

    import ctxpipe
    transcript = ctxpipe.read_transcript("session.jsonl")
    messages = ctxpipe.api_messages(transcript)
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = [
    "__version__",
    "api_messages",
    "compact",
    "compact_file",
    "convert",
    "convert_with_report",
    "count_transcript",
    "read_transcript",
    "report_html",
    "run_stage",
    "session_report",
    "validate_transcript",
    "write_transcript",
]


def __getattr__(name: str) -> Any:
    # Loaded on first use, so the command line starts without the library layer it may not need.
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'ctxpipe' has no attribute {name!r}")
