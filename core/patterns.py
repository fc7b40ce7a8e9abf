"""Regular expressions compiled on first use, so a command starts without compiling the patterns of
stages it does not run (the summary's readers hold dozens)."""

from __future__ import annotations

import re
from typing import Any, cast


class _OnFirstUse:
    def __init__(self, text: str, flags: int) -> None:
        self._text, self._flags = text, flags

    def __getattr__(self, name: str) -> Any:
        # Called only for what the instance does not hold yet: compile once, then keep the compiled
        # pattern's methods on the instance, so later calls cost what they cost on the pattern.
        if name.startswith("_"):  # a copy being made (no __init__ ran): nothing to compile from
            raise AttributeError(name)
        compiled = re.compile(self._text, self._flags)
        for attribute in ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "pattern", "flags", "groupindex"):
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)

    def __reduce__(self) -> tuple[Any, tuple[str, int]]:
        return (re.compile, (self._text, self._flags))  # pickled (or deep-copied) as the compiled pattern


def pattern(text: str, flags: int | re.RegexFlag = 0) -> re.Pattern[str]:
    """re.compile(text, flags), compiled when first used."""
    return cast("re.Pattern[str]", _OnFirstUse(text, int(flags)))
