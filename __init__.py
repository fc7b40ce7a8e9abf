"""ctxpipe: context-window management for saved AI coding-agent transcripts.

Library use:

    from ctxpipe import read_transcript, to_api_messages
    transcript = read_transcript("session.jsonl")
"""

from __future__ import annotations

__version__ = "0.1.0"

from .api import api_messages, convert, convert_with_report, read_transcript, validate_transcript, write_transcript

__all__ = ["__version__", "api_messages", "convert", "convert_with_report", "read_transcript", "validate_transcript", "write_transcript"]
