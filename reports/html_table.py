"""A Table as HTML that reads at a glance: constant columns in the caption, text left and numbers
right, sortable headers (inline JS in render_html.py), each row linked to its raw record, and the
table's CSV/LaTeX files one click away."""
from __future__ import annotations

import html
import re

from dspbench.reports.fmt import MAX_DISPLAY_ROWS, Table

_NUM = re.compile(r"^[+-]?\d[\d,]*(\.\d+)?(e[+-]?\d+)?(?=$|[\s×%\[(])")   # a number, then a unit or range
# display values that are the same in every row but still worth a column (they are the point)
KEEP = ("method",)


def sort_value(cell: str) -> str | None:
    """The number a cell sorts by ('1.23× [..]' -> 1.23, '4.5%' -> 4.5); None for text."""
    m = _NUM.match(str(cell).strip())
    return m.group(0).replace(",", "") if m else None


def split_constant(t: Table, cols: list) -> tuple[list, list[tuple[str, str]]]:
    """(varying columns, [(column, value)] of columns that hold one value in every row)."""
    d = t.display
    if len(d) < 2:
        return cols, []
    const = [c for c in cols if c not in KEEP and d[c].astype(str).nunique() == 1]
    if len(const) == len(cols):
        const = []
    return [c for c in cols if c not in const], [(str(c), str(d[c].iloc[0])) for c in const]


def render(t: Table, rel_root: str, anchor: str, max_rows: int | None = MAX_DISPLAY_ROWS) -> str:
    """`rel_root`: the results folder as seen from the report (for the record links)."""
    d = t.display
    cols, const = split_constant(t, list(d.columns))
    shown = d if max_rows is None else d.head(max_rows)
    numeric = {c: _numeric(shown[c]) for c in cols}
    links = t.links[:len(shown)] if t.links else None
    head = "".join(f'<th class="{"n" if numeric[c] else "t"}" title="sort">{html.escape(str(c))}</th>'
                   for c in cols) + ('<th class="t">record</th>' if links else "")
    body = []
    for i, row in enumerate(shown[cols].itertuples(index=False)):
        cells = []
        for c, v in zip(cols, row):
            v = str(v)
            if numeric[c]:
                sv = sort_value(v)
                cells.append(f'<td class="n" data-v="{sv or ""}">{html.escape(v)}</td>')
            else:
                cells.append(f"<td>{html.escape(v)}</td>")
        if links:
            cells.append(_record_link(links[i], rel_root))
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = html.escape(t.title) + "".join(
        f' <span class="const">{html.escape(k)} = {html.escape(v)}</span>' for k, v in const)
    more = len(d) - len(shown)
    tail = (f'<p class="note">{more} more rows in the <a href="tables/{t.name}.csv">CSV file</a>.</p>'
            if more > 0 else "")
    files = (f'<p class="files">Files: <a href="tables/{t.name}.csv">CSV</a> · '
             f'<a href="tables/{t.name}.tex">LaTeX</a> · <a href="tables/{t.name}.md">Markdown</a></p>')
    notes = "".join(f'<p class="note">{inline_markup(n)}</p>' for n in t.notes)
    return (f'<div class="tw" id="{anchor}"><table class="sortable"><caption>{cap}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
            f"{tail}{notes}{files}")


def _numeric(col) -> bool:
    vals = [sort_value(v) for v in col]
    return any(v is not None for v in vals) and all(
        v is not None or str(c) in ("—", "", "nan") for v, c in zip(vals, col))


def _record_link(link, rel_root: str) -> str:
    if not link:
        return "<td></td>"
    path, line = link
    href = f"{rel_root}/{path}" if rel_root else path
    return (f'<td><a href="{html.escape(href)}" title="{html.escape(path)}, line {line}">'
            f"line {line}</a></td>")


def inline_markup(text: str) -> str:
    """Escape, then render `code` spans (the only inline markup the report's text uses)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
