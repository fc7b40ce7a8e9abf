"""The stages, in the seed's pipeline order: the one list the stage commands and `compact` are built from.

snip → microcompact → collapse → summarize → restore, as Claude Code's query loop applies them
(restore re-injects after a summary). `compact` runs every stage marked `in_compact`.
"""

from __future__ import annotations

from . import summarizing
from .core import collapse, microcompact, restore, snip
from .core.stage import Stage

STAGES: tuple[Stage, ...] = (snip.STAGE, microcompact.STAGE, collapse.STAGE, summarizing.STAGE, restore.STAGE)
PIPELINE: tuple[Stage, ...] = tuple(stage for stage in STAGES if stage.in_compact)
BY_NAME: dict[str, Stage] = {stage.name: stage for stage in STAGES}
