"""What the stages of the registry add (Outcome.report is any report: a stage declared elsewhere has its own)."""

from __future__ import annotations

from typing import Union

from .stage_collapse import CollapseExtras
from .stage_microcompact import MicrocompactExtras
from .stage_restore import RestoreExtras
from .stage_snip import SnipExtras
from .stage_summarize import SummarizeExtras

StageExtras = Union[MicrocompactExtras, CollapseExtras, SnipExtras, SummarizeExtras, RestoreExtras]
