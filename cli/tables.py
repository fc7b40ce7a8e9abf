"""Tables on a terminal, and the lines that name a file: one rule for every one ctxpipe prints.

Left to itself, rich fits a table that is too wide by cutting every cell ("77,4…", "$11.…",
"/home…"): no figure can be read and no two rows told apart. The rule instead:

- a number (tokens, dollars, percentages, line numbers) is never cut or wrapped;
- a name (a file path, a tool or model name) is shortened in the middle: its start and its end (the
  file name) around one ellipsis, never so far that two rows read the same;
- prose (a message, a reason) wraps;
- when the columns still do not fit, whole columns are left out, the least important first (each
  table declares the order once, in its Column list), and a dim line says which.

File paths are named relative to the folder argument they were found in (`display_names`).
Cells come in already made safe (cli/terminal.py's shown_text); shortening only cuts that text.
JSON never comes here, nor does a table on a redirected stdout (it gets JSON); a stage's --report
on a redirected stderr is fitted to COLUMNS (else 80), as rich did before.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .terminal import shown

Kind = Literal["name", "label", "number", "text"]

NAME_MIN = 24  # a name is narrowed to this (a uuid's first part and a file name's end) before a column is left out
LABEL_MAX = 32  # a label is kept whole up to this; longer (a hostile model name), it is shortened like a name
TEXT_MIN = 24  # prose wraps, but not into a sliver
FLOOR = 8  # how narrow a name or prose gets when only the columns that are never left out remain
GAP = 3  # a column's padding (one cell each side) and its separator; the table has one separator fewer


@dataclass(frozen=True)
class Column:
    """A table's column: what it holds (`kind`) and how soon it goes on a narrow terminal.

    `priority` 0: always shown (the row's name and its main figure); otherwise, when the columns do
    not fit, the one with the highest priority is left out first (the rightmost among equals)."""

    header: str
    kind: Kind = "label"
    priority: int = 0


def ellipsis_for(console: Any) -> str:
    # An encoding that cannot hold "…" writes it as "..." (cli/encoding.py): three cells, not one.
    return "..." if console.options.ascii_only else "…"


def shortened(text: str, width: int, ellipsis: str = "…", tail: int | None = None) -> str:
    """`text` in at most `width` cells: whole when it fits, else its start and end around one
    ellipsis. The end keeps the whole last path component when that leaves a third for the start;
    `tail` gives the end's cells instead (a table's rows that would otherwise read the same)."""
    from rich.cells import cell_len

    if cell_len(text) <= width:
        return text
    room = max(0, width - len(ellipsis))
    if tail is None:
        last = text[text.rfind("/") :] if "/" in text else ""
        tail = cell_len(last) if last and cell_len(last) <= room - room // 3 else room - room // 2
    tail = min(tail, room)
    return _first_cells(text, room - tail) + ellipsis + _last_cells(text, tail)


def _first_cells(text: str, cells: int) -> str:
    from rich.cells import get_character_cell_size

    used = 0
    for index, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > cells:
            return text[:index]
    return text


def _last_cells(text: str, cells: int) -> str:
    return _first_cells(text[::-1], cells)[::-1]


def display_names(files: Sequence[str], given: Sequence[str]) -> dict[str, str]:
    """How a table names each file: relative to the folder (or store prefix) argument it was found
    below, a file named directly as it was typed. When that makes two names alike (x.jsonl in two
    folders given), every name keeps its folder argument, as typed, in front."""
    from ..api import below

    found: dict[str, tuple[str, str]] = {}
    for file in files:
        for root in given:
            relative = below(file, root)
            if relative is not None:
                found[file] = (root, relative)
                break
    names = {file: found[file][1] if file in found else file for file in files}
    if len(set(names.values())) < len(set(files)):
        names = {file: _joined(*found[file]) if file in found else file for file in files}
    return names


def _joined(root: str, relative: str) -> str:
    return root.rstrip("/") + "/" + relative


def fitted_name(console: Any, name: str, after: int, style: str = "") -> Any:
    """`name` as a rich Text, made safe and, on a terminal, shortened in the middle so that it and
    `after` more cells fit on one line (never narrower than NAME_MIN): for a line that starts with a
    name. Written to a file (warn --pass-through's stderr), the line keeps the whole name."""
    from rich.text import Text

    if not console.is_terminal:
        return Text(shown(name), style=style)
    return Text(shortened(shown(name), max(NAME_MIN, console.width - after), ellipsis_for(console)), style=style)


def print_failed(console: Any, name: str, style: str = "") -> None:
    """The line of a batch's file that could not be read, `name: failed` (why is on stderr, as the error)."""
    from .terminal import shown_text

    rest = shown_text(": ") + shown_text("failed", "red")
    console.print(fitted_name(console, name, rest.cell_len, style) + rest)


def print_table(console: Any, columns: Sequence[Column], rows: Sequence[Sequence[Any]], whole: str = "--json") -> None:
    """`rows` (cells: str or rich Text, one per column) as a table that fits the console by the rule above;
    `whole`: the option that gives every column, named when some are left out."""
    from rich.table import Table
    from rich.text import Text

    ellipsis = ellipsis_for(console)
    fit = _Fit(columns, [[_plain(row[index]) for row in rows] for index in range(len(columns))], console.width, ellipsis)
    table = Table(show_edge=False, header_style="bold")
    for index in fit.kept:
        column = columns[index]
        table.add_column(
            column.header, justify="right" if column.kind == "number" else "left", width=fit.widths[index], no_wrap=column.kind != "text", overflow="fold"
        )
    for row in rows:
        table.add_row(*(fit.cell(index, row[index]) for index in fit.kept))
    width = console.width
    # Only the columns that are always shown, and they do not fit even so: the table is printed as
    # wide as its figures need (the terminal folds the lines) rather than cut.
    console.width = max(width, fit.needed())
    try:
        console.print(table)
    finally:
        console.width = width
    left_out = [column.header for index, column in enumerate(columns) if index not in fit.kept]
    if left_out:
        console.print(Text(f"not shown on {width} columns: {', '.join(left_out)} (a wider terminal shows them, {whole} has all)", style="dim"))


def _plain(cell: Any) -> str:
    return cell.plain if hasattr(cell, "plain") else str(cell)


class _Fit:
    """Which columns a table shows, the width of each (contents, without padding), and where each
    name column's ellipsis falls (`tails`: the end's cells for the names that would read alike
    otherwise; every other name keeps its own)."""

    def __init__(self, columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int, ellipsis: str) -> None:
        from rich.cells import cell_len

        self.columns, self.cells, self.ellipsis = columns, cells, ellipsis
        headers = [cell_len(column.header) for column in columns]
        natural = [max([headers[index], *(cell_len(cell) for cell in cells[index])]) for index in range(len(columns))]
        self.tails: dict[int, dict[str, int]] = {}
        self.widths = {index: self._least(index, natural[index], headers[index]) for index in range(len(columns))}
        self.kept = list(range(len(columns)))
        while self.needed() > width:
            droppable = [index for index in self.kept if columns[index].priority > 0]
            if not droppable:
                break
            self.kept.remove(max(droppable, key=lambda index: (columns[index].priority, index)))
        excess = self.needed() - width
        for index in self.kept:  # only the columns always shown remain: their names and prose narrower, down to FLOOR
            if excess > 0 and columns[index].kind in ("name", "text"):
                cut = max(0, min(excess, self.widths[index] - max(FLOOR, headers[index])))
                self.widths[index] -= cut
                excess -= cut
                if columns[index].kind == "name":
                    self.tails[index] = self._tails(index, self.widths[index]) or {}
        # Room left: names and prose widen, the most important first (a name only to a width that keeps its rows apart).
        for index in sorted(self.kept, key=lambda index: (columns[index].priority, index)):
            spare = width - self.needed()
            target = self.widths[index] + max(0, min(spare, natural[index] - self.widths[index]))
            if columns[index].kind != "name":
                self.widths[index] = target
                continue
            for wider in range(target, self.widths[index], -1):
                tails = self._tails(index, wider)
                if tails is not None:
                    self.widths[index], self.tails[index] = wider, tails
                    break

    def needed(self) -> int:
        return sum(self.widths[index] for index in self.kept) + GAP * len(self.kept) - 1

    def cell(self, index: int, cell: Any) -> Any:
        kind = self.columns[index].kind
        if kind not in ("name", "label"):
            return cell
        text = _plain(cell)
        short = shortened(text, self.widths[index], self.ellipsis, self.tails.get(index, {}).get(text))
        if short == text:
            return cell
        from rich.text import Text

        return Text(short, style=cell.style if isinstance(cell, Text) else "")

    def _least(self, index: int, natural: int, header: int) -> int:
        """The narrowest column `index` gets before a column is left out."""
        kind = self.columns[index].kind
        if kind == "number":
            return natural
        if kind == "label":
            return min(natural, max(header, LABEL_MAX))
        if kind == "text":
            return min(natural, max(header, TEXT_MIN))
        # A name column: as narrow as NAME_MIN, but no narrower than tells every row's name apart.
        for width in range(min(natural, max(header, NAME_MIN)), natural):
            tails = self._tails(index, width)
            if tails is not None:
                self.tails[index] = tails
                return width
        return natural

    def _tails(self, index: int, width: int) -> dict[str, int] | None:
        """At `width`, the tails that tell the names of column `index` apart: none when each name's
        own does; for the names cut alike, one past the longest end (or start) they share; None
        when that does not either."""
        names = set(self.cells[index])
        alike: dict[str, list[str]] = {}
        for name in names:
            alike.setdefault(shortened(name, width, self.ellipsis), []).append(name)
        if len(alike) == len(names):
            return {}
        groups = [group for group in alike.values() if len(group) > 1]
        room = width - len(self.ellipsis)
        start = max(len(os.path.commonprefix(group)) for group in groups)
        end = max(len(os.path.commonprefix([name[::-1] for name in group])) for group in groups)
        for tail in (end + 1, room - start - 1):
            tails = {name: tail for group in groups for name in group}
            if 0 < tail < room and len({shortened(name, width, self.ellipsis, tails.get(name)) for name in names}) == len(names):
                return tails
        return None
