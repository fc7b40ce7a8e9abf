"""Every exit code ctxpipe uses, in one place."""

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # bad input or a failed operation
    USAGE = 2  # bad flags or arguments
    NOT_A_SESSION = 6  # compact: the one input is a compaction side-call, nothing to compact
    INTERRUPTED = 130
