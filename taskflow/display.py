"""Results that stay plain lists but render readably in Jupyter.

``Taskflow(...)(texts)`` returns a :class:`Results`: a ``list`` subclass, so
it compares equal to plain lists, serialises with ``json.dumps`` and pickles,
while ``_repr_html_`` asks the task to draw it (a table, highlighted spans...).
Every string that reaches the HTML goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
from typing import Any, Callable, Iterable, Sequence

__all__ = ["Results", "html_table", "html_spans", "html_words", "overlapped", "progress_bar"]

_STYLE = "border-collapse:collapse;font-family:sans-serif;font-size:13px"
_CELL = "border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top"
# One colour per label, stable across calls; the palette repeats for many labels.
_PALETTE = ["#fde68a", "#bfdbfe", "#bbf7d0", "#fecaca", "#ddd6fe", "#fbcfe8", "#c7d2fe", "#fed7aa"]


class Results(list):
    """A list of task results with an HTML view for notebooks."""

    def __init__(self, items: Iterable[Any] = (), render: Callable[[list], str] | None = None):
        super().__init__(items)
        self._render = render

    def _repr_html_(self) -> str:
        if not self:   # an empty cell in a notebook reads as "nothing happened"
            return "<p style='font-family:sans-serif'><i>no results</i></p>"
        if self._render is None:
            return html_table([r if isinstance(r, dict) else {"result": r} for r in self])
        return self._render(list(self))

    def __reduce__(self):
        # Pickle as a plain list: the renderer belongs to a live task.
        return (list, (list(self),))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return html.escape(str(value))


def html_table(rows: Sequence[dict], columns: Sequence[str] | None = None,
               format_cell: Callable[[str, Any], str] | None = None) -> str:
    """A small HTML table; ``format_cell(column, value)`` may return ready HTML (escape it yourself)."""
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    head = "".join(f"<th style='{_CELL}'>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column, "")
            shown = format_cell(column, value) if format_cell else None
            cells.append(f"<td style='{_CELL}'>{shown if shown is not None else _cell(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table style='{_STYLE}'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def label_colour(label: str, labels: list[str]) -> str:
    if label not in labels:
        labels.append(label)
    return _PALETTE[labels.index(label) % len(_PALETTE)]


def html_spans(text: str, spans: Iterable[tuple[int, int, str]], labels: list[str] | None = None) -> str:
    """``text`` with each ``(start, end, label)`` span highlighted and labelled.

    Spans are taken in the order given, so put the most important first: a span
    that overlaps one already taken is not drawn (:func:`overlapped` says which).
    """
    labels = [] if labels is None else labels
    parts, cursor = [], 0
    for start, end, label in sorted(_kept(spans), key=lambda s: s[0]):
        parts.append(html.escape(text[cursor:start]))
        colour = label_colour(label, labels)
        parts.append(
            f"<mark style='background:{colour};padding:0 2px;border-radius:3px'>{html.escape(text[start:end])}"
            + (f"<sub style='font-size:9px;margin-left:2px'>{html.escape(label)}</sub>" if label else "")
            + "</mark>"
        )
        cursor = end
    parts.append(html.escape(text[cursor:]))
    return "<div style='font-family:sans-serif;line-height:1.9'>" + "".join(parts).replace("\n", "<br>") + "</div>"


def _kept(spans: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    kept: list[tuple[int, int, str]] = []
    for start, end, label in spans:
        if end > start and all(end <= s or start >= e for s, e, _ in kept):
            kept.append((start, end, label))
    return kept


def overlapped(spans: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The spans :func:`html_spans` does not draw, because an earlier one overlaps them."""
    spans = list(spans)
    kept = set(_kept(spans))
    return [span for span in spans if span not in kept and span[1] > span[0]]


def html_words(text: str, words: Iterable[tuple[str, str | None]], labels: list[str] | None = None,
               skip: Iterable[str] = ("w",)) -> str:
    """``text`` with its consecutive ``(word, label)`` pairs highlighted (``label`` None: boundaries only)."""
    spans, start, skip = [], 0, set(skip)
    for word, label in words:
        if label not in skip and word.strip():
            spans.append((start, start + len(word), label or ""))
        start += len(word)
    return html_spans(text, spans, labels)


def progress_bar(**options):
    """A tqdm bar: the notebook widget where ipywidgets is installed, else the text bar (tqdm.auto
    without ipywidgets warns "IProgress not found" into every notebook cell)."""
    try:
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm import tqdm
    return tqdm(**options)
