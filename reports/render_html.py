"""The report as one self-contained HTML page: headline first, a table of contents, sortable
tables that scroll in their own box, figures inlined as SVG with a title and description.

No CDN, no fonts, no network: the page is one file (plus links to its own tables, figures and
the raw records) that works offline. The sorting script is a few lines, inline.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from dspbench.reports import html_table
from dspbench.reports.html_table import inline_markup

CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222;
line-height:1.4}h1{font-size:1.5em;margin:.3em 0}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
.banner{background:#fff3cd;border:2px solid #c89b00;padding:.6em 1em;font-weight:600}
.headline{border:2px solid #D55E00;border-radius:6px;padding:.4em 1em;margin:.6em 0;background:#fffaf6}
.headline h2{margin-top:.2em;border:0}.facts{font-size:13px;color:#444}
.tw{overflow-x:auto;max-width:100%;margin:.5em 0}table{border-collapse:collapse;font-size:13px}
caption{text-align:left;font-weight:600;padding:.3em 0;caption-side:top}
caption .const{font-weight:400;color:#555;margin-left:.6em;white-space:nowrap}
th,td{border:1px solid #ccc;padding:3px 6px;white-space:nowrap}th{background:#f3f3f3;cursor:pointer}
th.n,td.n{text-align:right}th.t,td{text-align:left}td.n{font-variant-numeric:tabular-nums}
th[data-dir=asc]::after{content:" \\25B2"}th[data-dir=desc]::after{content:" \\25BC"}
.fig{overflow-x:auto;max-width:100%}.fig svg{max-width:100%;min-width:640px;height:auto}
table.kv td{white-space:normal;min-width:12em}
figure{margin:1em 0}figcaption{font-size:14px}pre{background:#f6f6f6;padding:.6em;overflow:auto}
.note,.files{color:#555;font-size:13px;margin:.2em 0}.empty{color:#777;font-size:14px}
nav.toc{font-size:14px;columns:2 16em}nav.toc a{display:block}details{margin:.5em 0}
@media (max-width:600px){nav.toc{columns:1}}"""

SORT_JS = """document.querySelectorAll('table.sortable th').forEach(function(th){
th.addEventListener('click',function(){var t=th.closest('table'),b=t.tBodies[0],
i=Array.prototype.indexOf.call(th.parentNode.children,th),num=th.classList.contains('n'),
dir=th.dataset.dir==='asc'?'desc':'asc';t.querySelectorAll('th').forEach(function(h){delete h.dataset.dir});
th.dataset.dir=dir;var rows=Array.prototype.slice.call(b.rows);rows.sort(function(x,y){
var a=x.cells[i],c=y.cells[i],r;if(num){var p=parseFloat(a.dataset.v),q=parseFloat(c.dataset.v);
if(isNaN(p)&&isNaN(q))r=0;else if(isNaN(p))return 1;else if(isNaN(q))return -1;else r=p-q;}
else r=a.textContent.localeCompare(c.textContent);return dir==='asc'?r:-r;});
rows.forEach(function(r){b.appendChild(r);});});});"""


def slug(text: str, used: set) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    base, i = s, 2
    while s in used:
        s, i = f"{base}-{i}", i + 1
    used.add(s)
    return s


def svg_inline(path: Path, title: str, desc: str) -> str:
    """The SVG element alone (no XML prolog), ids prefixed with the file's name (ids are global
    in one HTML document), with an accessible title and description."""
    text = path.read_text()
    text = text[text.index("<svg"):]
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    if ids:
        pat = re.compile(r'(\bid="|#)(' + "|".join(map(re.escape, sorted(ids, key=len, reverse=True)))
                         + r')(?=["\)])')
        text = pat.sub(lambda m: f"{m.group(1)}{path.stem}-{m.group(2)}", text)
        text = re.sub(r'aria-labelledby="([^"]*)"', lambda m: 'aria-labelledby="' + " ".join(
            f"{path.stem}-{t}" if t in ids else t for t in m.group(1).split()) + '"', text, count=1)
    return add_title(text, title, desc, path.stem)


def add_title(svg: str, title: str, desc: str, stem: str) -> str:
    """Insert <title>/<desc> as the svg element's first children (screen readers, tooltips)."""
    if "<title" in svg[:2000]:
        return svg
    end = svg.index(">", svg.index("<svg")) + 1
    head = svg[:end].replace("<svg", f'<svg role="img" aria-labelledby="{stem}-t {stem}-d"', 1)
    return (f'{head}<title id="{stem}-t">{html.escape(title)}</title>'
            f'<desc id="{stem}-d">{html.escape(desc)}</desc>{svg[end:]}')


def _figure(b, used: set) -> tuple[str, str]:
    _, title, paths, notes, caption = (*b, "")[:5]
    anchor = slug("fig " + title, used)
    if not paths:     # a figure the data cannot support: one line
        return anchor, f'<p class="empty" id="{anchor}">{html.escape(title)}: {inline_markup(" ".join(notes))}</p>'
    svg = svg_inline(paths["svg"], title, caption or title)
    links = " · ".join(f'<a href="figures/{paths[e].name}">{e.upper()}</a>' for e in ("png", "svg"))
    notes_html = "".join(f'<p class="note">{inline_markup(n)}</p>' for n in notes)
    return anchor, (f'<figure id="{anchor}"><div class="fig">{svg}</div><figcaption><b>{html.escape(title)}.'
                    f"</b> {inline_markup(caption)} <span class=\"files\">Full size: {links}</span>"
                    f"</figcaption>{notes_html}</figure>")


def _section_empty(blocks: list) -> bool:
    for b in blocks:
        k = b[0]
        if k == "table" and not b[1].empty or k == "figure" and b[2] or k in ("p", "code", "kv", "details",
                                                                               "headline", "raw"):
            return False
        if k == "list" and b[1]:
            return False
    return True


def _sections(blocks: list) -> list[tuple[str | None, list]]:
    out: list = [(None, [])]
    for b in blocks:
        if b[0] == "h2":
            out.append((b[1], []))
        else:
            out[-1][1].append(b)
    return out


def page(blocks: list, title: str, rel_root: str) -> str:
    used: set = set()
    toc, parts = [], []
    for name, body in _sections(blocks):
        if name is not None:
            anchor = slug(name, used)
            if _section_empty(body):          # empty sections collapse to one line
                parts.append(f'<p class="empty" id="{anchor}"><b>{html.escape(name)}</b>: none.</p>')
                continue
            toc.append(f'<a href="#{anchor}">{html.escape(name)}</a>')
            parts.append(f'<h2 id="{anchor}">{inline_markup(name)}</h2>')
        for b in body:
            parts.append(_block(b, used, rel_root, toc))
    nav = f'<nav class="toc" id="contents"><b>Contents</b>{"".join(toc)}</nav>'
    if "<!--toc-->" in parts:
        parts[parts.index("<!--toc-->")] = nav
    else:
        parts.insert(1, nav)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(parts) + f"\n<script>{SORT_JS}</script>\n</body></html>\n")


def _block(b, used: set, rel_root: str, toc: list) -> str:
    kind = b[0]
    if kind == "h1":
        return f"<h1>{inline_markup(b[1])}</h1>"
    if kind == "toc":
        return "<!--toc-->"
    if kind == "banner":
        return f'<p class="banner" role="alert">{inline_markup(b[1])}</p>'
    if kind == "raw":            # HTML built by the report itself (the headline box)
        return b[1]
    if kind == "p":
        return f"<p>{inline_markup(b[1])}</p>"
    if kind == "list":
        return "<ul>" + "".join(f"<li>{inline_markup(x)}</li>" for x in b[1]) + "</ul>"
    if kind == "code":
        return f"<pre>{html.escape(b[1])}</pre>"
    if kind == "kv":
        rows = "".join(f"<tr><th class=\"t\">{html.escape(k)}</th><td>{inline_markup(v)}</td></tr>" for k, v in b[1])
        return f'<div class="tw"><table class="kv">{rows}</table></div>'
    if kind == "details":
        return f"<details><summary>{html.escape(b[1])}</summary><pre>{html.escape(b[2])}</pre></details>"
    if kind == "table":
        t = b[1]
        anchor = slug("table " + t.name, used)
        if t.empty:
            return f'<p class="empty" id="{anchor}"><b>{html.escape(t.title)}</b>: no data in this sweep.</p>'
        toc.append(f'<a href="#{anchor}" style="padding-left:1em">{html.escape(t.title)}</a>')
        return html_table.render(t, rel_root, anchor)
    if kind == "figure":
        anchor, out = _figure(b, used)
        if b[2]:
            toc.append(f'<a href="#{anchor}" style="padding-left:1em">{html.escape(b[1])}</a>')
        return out
    raise ValueError(f"unknown block {kind!r}")
