"""Text a command prints and then ends on (help, --version): a closed pipe is quiet, any other
failure to write one line on stderr and exit 1, never a traceback. Light: the paths that answer
before anything loads use it."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn


def say_and_exit(text: str, to: Any, status: int = 0) -> NoReturn:
    """`text` on `to` (sys.stdout or sys.stderr), then exit with `status`."""
    if to is None:  # a stream closed before the run: nothing can be said there
        raise SystemExit(1 if status == 0 else status)

    def write() -> None:
        to.write(text)
        to.flush()

    write_and_exit(write, to, status)


def write_and_exit(write: Callable[[], None], to: Any, status: int = 0) -> NoReturn:
    """`write()` to the stream `to`, then exit with `status`; a failure to write ends as say_and_exit says."""
    try:
        write()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError):
            from .terminal import shown

            where = f"{exc.filename}: " if exc.filename else ""
            if sys.stderr is not None:
                print(f"ctxpipe: error: {shown(where + (exc.strerror or str(exc)))}", file=sys.stderr)
            status = 1
        detach(to)
    raise SystemExit(status)


def detach(stream: Any) -> None:
    """Point the stream's descriptor at /dev/null, so the interpreter's final flush cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
