"""Errors the core raises; the CLI turns each into one line on stderr and an exit code."""

from __future__ import annotations


class CtxpipeError(Exception):
    """A failure the user can act on: the message is shown as is, without a traceback."""


# Why a folder cannot be read where one transcript is expected (a command's filter input says more: cli/streams.one_transcript).
IS_A_FOLDER = "is a directory, expected a file"
CHANGED = "changed while being read"  # a file cut short (or an object replaced) while a command read it


class InputError(CtxpipeError):
    """Bad input, located at a file and (when known) a line."""

    def __init__(self, source: str, line: int | None, what: str) -> None:
        self.source = source
        self.line = line
        self.what = what
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {what}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, int | None, str]]:
        # Raised in worker processes: it must travel back through pickle.
        return (InputError, (self.source, self.line, self.what))


class ChangedMeanwhile(InputError):
    """A file or object that changed between being read and being replaced: left as it is now."""

    def __init__(
        self, source: str, line: int | None = None, what: str = "changed while being rewritten (is a program still writing it?); left as it was"
    ) -> None:
        super().__init__(source, line, what)

    def __reduce__(self) -> tuple[type[ChangedMeanwhile], tuple[str, int | None, str]]:  # the same triple, its own class
        return (ChangedMeanwhile, (self.source, self.line, self.what))


class UnsupportedError(CtxpipeError):
    """An operation the chosen format or command cannot perform."""


class InternalError(CtxpipeError):
    """An exception no stage expected, met while processing one file: a bug in ctxpipe, reported
    for that file (with the exception's type, so it can be fixed) while a batch goes on."""

    def __init__(self, source: str | None, error: str) -> None:
        self.source = source
        self.error = error
        where = f"{source}: " if source is not None else ""
        super().__init__(f"{where}internal error ({error}); this is a bug in ctxpipe, please report it with the file")

    @classmethod
    def of(cls, source: str | None, exc: BaseException) -> InternalError:
        detail = str(exc)
        detail = detail if len(detail) <= 200 else detail[:197] + "..."
        return cls(source, f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__)

    def __reduce__(self) -> tuple[type[InternalError], tuple[str | None, str]]:
        return (InternalError, (self.source, self.error))


class SettingsError(CtxpipeError):
    """Settings that do not go together (a usage error on the command line: exit 2)."""

    def __init__(self, flag: str, what: str) -> None:
        self.flag = flag
        self.what = what
        super().__init__(f"{flag}: {what}")

    def __reduce__(self) -> tuple[type[SettingsError], tuple[str, str]]:
        return (SettingsError, (self.flag, self.what))
