"""click's HelpFormatter and wrap_text, the parts typer's help uses, copied so cli/help.py can replay
a stored help page without importing click or typer; loaded only when a page is shown.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

# --- click's HelpFormatter and wrap_text (typer._click.formatting, BSD-3-Clause, © Pallets), the parts typer's help uses ---

_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def _term_len(text: str) -> int:
    return len(_ANSI.sub("", text))


class _TextWrapper(textwrap.TextWrapper):
    def _handle_long_word(self, reversed_chunks: list[str], cur_line: list[str], cur_len: int, width: int) -> None:
        space_left = max(width - cur_len, 1)
        last = reversed_chunks[-1]
        cur_line.append(last[:space_left])
        reversed_chunks[-1] = last[space_left:]

    @contextmanager
    def extra_indent(self, indent: str) -> Iterator[None]:
        initial, subsequent = self.initial_indent, self.subsequent_indent
        self.initial_indent += indent
        self.subsequent_indent += indent
        try:
            yield
        finally:
            self.initial_indent, self.subsequent_indent = initial, subsequent

    def indent_only(self, text: str) -> str:
        return "\n".join(f"{self.subsequent_indent if index else self.initial_indent}{line}" for index, line in enumerate(text.splitlines()))


def _wrap_text(text: str, width: int = 78, initial_indent: str = "", subsequent_indent: str = "", preserve_paragraphs: bool = False) -> str:
    text = text.expandtabs()
    wrapper = _TextWrapper(width, initial_indent=initial_indent, subsequent_indent=subsequent_indent, replace_whitespace=False)
    if not preserve_paragraphs:
        return wrapper.fill(text)
    paragraphs: list[tuple[int, bool, str]] = []
    buffer: list[str] = []
    indent: int | None = None

    def flush() -> None:
        if not buffer:
            return
        if buffer[0].strip() == "\b":
            paragraphs.append((indent or 0, True, "\n".join(buffer[1:])))
        else:
            paragraphs.append((indent or 0, False, " ".join(buffer)))
        del buffer[:]

    for line in text.splitlines():
        if not line:
            flush()
            indent = None
        else:
            if indent is None:
                length = _term_len(line)
                line = line.lstrip()
                indent = length - _term_len(line)
            buffer.append(line)
    flush()
    wrapped = []
    for extra, raw, paragraph in paragraphs:
        with wrapper.extra_indent(" " * extra):
            wrapped.append(wrapper.indent_only(paragraph) if raw else wrapper.fill(paragraph))
    return "\n\n".join(wrapped)


class Formatter:
    def __init__(self, width: int) -> None:
        self.width = width
        self.current_indent = 0
        self.buffer: list[str] = []

    def write(self, string: str) -> None:
        self.buffer.append(string)

    def indent(self) -> None:
        self.current_indent += 2

    def dedent(self) -> None:
        self.current_indent -= 2

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        if prefix is None:
            prefix = "Usage: "
        usage_prefix = f"{prefix:>{self.current_indent}}{prog} "
        text_width = self.width - self.current_indent
        if text_width >= _term_len(usage_prefix) + 20:
            indent = " " * _term_len(usage_prefix)
            self.write(_wrap_text(args, text_width, initial_indent=usage_prefix, subsequent_indent=indent))
        else:
            self.write(usage_prefix)
            self.write("\n")
            indent = " " * (max(self.current_indent, _term_len(prefix)) + 4)
            self.write(_wrap_text(args, text_width, initial_indent=indent, subsequent_indent=indent))
        self.write("\n")

    def write_heading(self, heading: str) -> None:
        self.write(f"{'':>{self.current_indent}}{heading}:\n")

    def write_paragraph(self) -> None:
        if self.buffer:
            self.write("\n")

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(_wrap_text(text, self.width, initial_indent=indent, subsequent_indent=indent, preserve_paragraphs=True))
        self.write("\n")

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        widths: dict[int, int] = {}
        for row in rows:
            for index, column in enumerate(row):
                widths[index] = max(widths.get(index, 0), _term_len(column))
        if len(widths) != 2:
            raise TypeError("Expected two columns for definition list")
        first_col = min(widths[0], col_max) + col_spacing
        for row in rows:
            first, second = (*row, "", "")[:2]
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if _term_len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - _term_len(first)))
            else:
                self.write("\n")
                self.write(" " * (first_col + self.current_indent))
            lines = _wrap_text(second, max(self.width - first_col - 2, 10), preserve_paragraphs=True).splitlines()
            if lines:
                self.write(f"{lines[0]}\n")
                for line in lines[1:]:
                    self.write(f"{'':>{first_col + self.current_indent}}{line}\n")
            else:
                self.write("\n")
