"""What ``analyze`` prints for a person, one module per command; here what they share.

The commands (:mod:`analyzer.cli.app`) call the jobs for data and hand it to
these printers: :mod:`.summary` (``analyze FILES...``: the summary and its on-call
block), :mod:`.replay`, :mod:`.reports` (``export``, ``forget``, ``sync``),
:mod:`.progress` (bars and the ingest's lines on stderr). Log text is untrusted:
every string from the data goes through :mod:`analyzer.core.safetext`
(credentials redacted, control characters escaped) or :func:`shown_text`
(already-redacted text: controls escaped), and is never read as rich markup.

rich is imported when something is drawn, not with this package: JSON on stdout
and the lines on stderr need none of it, and a re-run that finds nothing new
(``analyze s3/ --db X --json``) should not wait for it.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from analyzer.core.safetext import printable, terminal_text
from analyzer.core.scrub import scrub_strings

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.table import Table as RichTable


def safe_markup(value: Any) -> str:
    """Log text for a rich string: credentials redacted, controls escaped, never read as markup."""
    return escape(terminal_text(value))


def escape(text: str) -> str:
    """rich's markup escape: log and metric text is untrusted, never read it as markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def Table(*args: Any, **kwargs: Any) -> "RichTable":  # noqa: N802 - stands for rich's class
    """A rich ``Table`` (rich imported on first use) that stacks when it does not fit.

    The table is laid out by rich for the width it gets (cells wrap at words); when
    that layout would be wider than the width, or would cut a header or cell with an
    ellipsis, the table is printed row by row instead (the first cell, then each other
    column's header and cell on the same line), so a class, model, pod or rung name is
    never cut to fit. Mark the columns that hold names ``no_wrap=True``.
    """
    return _stacking_table_class()(*args, **kwargs)


@lru_cache(maxsize=None)
def _stacking_table_class() -> type:
    from rich.segment import Segment
    from rich.table import Table as RichTable
    from rich.text import Text

    class StackingTable(RichTable):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.cells: list[tuple[Any, ...]] = []
            self._as_laid_out = False

        def add_row(self, *cells: Any, **kwargs: Any) -> None:
            self.cells.append(cells)
            super().add_row(*cells, **kwargs)

        def fits(self, console: Any, options: Any) -> bool:
            """Whether rich's layout at this width keeps every line inside it and cuts no word.

            Rendered once and looked at (public rich API): rich may squeeze a column
            below its longest word and end it with "…" or fold it across lines, or run
            past the width.
            """
            self._as_laid_out = True
            try:
                lines = list(Segment.split_lines(console.render(self, options)))
            finally:
                self._as_laid_out = False
            if any(Segment.get_line_length(line) > options.max_width for line in lines):
                return False
            source = [_as_text(c).plain for c in [*(c.header for c in self.columns), *(c for r in self.cells for c in r)]
                      if c is not None]
            rendered = "\n".join("".join(seg.text for seg in line) for line in lines)
            if rendered.count("…") > sum(text.count("…") for text in source):
                return False
            # every word whole: rich folds a word wider than its column across lines
            return all(word in rendered for text in source for word in text.split())

        def __rich_console__(self, console: Any, options: Any) -> Any:
            if self._as_laid_out:
                yield from super().__rich_console__(console, options)
                return
            # The title is a sentence: printed as one (unbroken into a pipe), not wrapped at the table's width.
            title, self.title = self.title, None
            try:
                if title:
                    yield _as_text(title)
                if self.fits(console, options):
                    yield from super().__rich_console__(console, options)
                    return
            finally:
                self.title = title
            yield from self.stacked(console, options)

        def stacked(self, console: Any, options: Any) -> Any:
            """Each row as its first cell, then ``header cell; header cell ...`` beside it,
            wrapped under itself (a hanging indent) when the first cells are short enough."""
            headers = [str(c.header) for c in self.columns]
            firsts = [_as_text(row[0]) for row in self.cells]
            rests = []
            for row in self.cells:
                rest = Text()
                for i, (header, cell) in enumerate((h, c) for h, c in zip(headers[1:], row[1:]) if c not in (None, "")):
                    rest += Text("; " if i else "") + Text(f"{header} ") + _as_text(cell)
                rests.append(rest)
            if max((t.cell_len for t in firsts), default=0) + 4 <= options.max_width // 2:
                grid = RichTable.grid(padding=(0, 0, 0, 2))
                grid.add_column(no_wrap=True)
                grid.add_column()
                for first, rest in zip(firsts, rests):
                    grid.add_row(Text("  ") + first, rest)
                yield grid
                return
            for first, rest in zip(firsts, rests):
                yield Text("  ") + first + Text(": ") + rest

    def _as_text(cell: Any) -> Text:
        # Strings here are rich markup the printer escaped already; Text objects are plain.
        return cell if isinstance(cell, Text) else Text.from_markup("" if cell is None else str(cell))

    return StackingTable


def make_console(**kwargs: Any) -> "Console":
    """A rich console that reports a closed pipe as ``BrokenPipeError``.

    Rich's own handling exits with 1; the command line ends a closed pipe
    (``analyze ... | head -1``) quietly with 0.
    """
    return _console_class()(**kwargs)


@lru_cache(maxsize=None)
def _console_class() -> type:
    from rich.console import Console

    class PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError()

    return PipeAwareConsole


def on_terminal() -> bool:
    """Whether stdout is a terminal (else a pipe or a file)."""
    return sys.stdout.isatty()


def pct(rate: float) -> str:
    """A rate as a percentage with one decimal."""
    return f"{rate * 100:.1f}%"



def shown_text(text: Any, limit: int | None = None) -> str:
    """Text for the terminal that needs no redaction (already redacted, or a path): control
    characters shown escaped (:func:`analyzer.core.safetext.printable`), None as ``-``, cut to
    ``limit`` characters with ``…``.

    Escape sequences (``\\x1b]0;...``), carriage returns, bidirectional overrides
    and zero-width characters are written out visibly, so a model name or error
    text can neither retitle the window nor rewrite what was printed before it.
    The caller still escapes rich markup (or prints it as a rich ``Text``).
    """
    if text is None:
        return "-"
    s = printable(text)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    return s


def safe_text(value: Any, limit: int | None = None) -> str:
    """Log text (a path, a reason, a pod name) for a rich string: :func:`shown_text`, markup escaped."""
    return escape(shown_text(value, limit))



def print_json(doc: Any) -> None:
    """``--json``: the document on stdout, indented, times and the like as text, a newline at the end;
    every string scrubbed of credentials (:func:`analyzer.core.scrub.scrub_strings`)."""
    sys.stdout.write(json.dumps(scrub_strings(doc), indent=2, default=str) + "\n")


def warn(text: str) -> None:
    """``analyze: warning: TEXT`` on stderr; ``text`` is log text (pod names, paths), shown safe."""
    print(f"analyze: warning: {terminal_text(text)}", file=sys.stderr)
