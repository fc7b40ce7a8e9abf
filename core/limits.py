"""Bounds on the values an untrusted transcript or settings file may give, declared once.

Apart from core.fields (the typed reads of a line's fields) so that the status line's light path can
check a figure without loading what those reads need (datetime, for times).
"""

from __future__ import annotations

# No count a transcript records comes near this; anything above it is garbage, not a figure.
MAX_COUNT = 10**15
