"""Every exit code ctxpipe uses, in one place."""

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # bad input or a failed operation
    USAGE = 2  # bad flags or arguments
    INTERRUPTED = 130
