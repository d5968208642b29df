"""Render a report, a list of blocks, to Markdown (figures linked) and self-contained HTML.

Blocks are plain tuples so both writers see the same content:
("h1"|"h2"|"p", text), ("list", [text]), ("code", text), ("table", Table),
("figure", title, {"png": path, "svg": path} | None, [notes]).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

NO_DATA = "(no data for this table in the sweep)"
CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}pre{background:#f6f6f6;padding:.6em;overflow:auto}
.note{color:#555;font-size:13px}"""


def markdown(blocks: list, out_dir: Path) -> str:
    parts = []
    for b in blocks:
        kind = b[0]
        if kind == "h1":
            parts.append(f"# {b[1]}")
        elif kind == "h2":
            parts.append(f"## {b[1]}")
        elif kind == "p":
            parts.append(b[1])
        elif kind == "list":
            parts.append("\n".join(f"- {x}" for x in b[1]) or "- (none)")
        elif kind == "code":
            parts.append(f"```\n{b[1]}\n```")
        elif kind == "table":
            t = b[1]
            files = f"[CSV](tables/{t.name}.csv), [LaTeX](tables/{t.name}.tex)"
            if t.empty:
                parts.append(f"### {t.title}\n\n{NO_DATA}")
                continue
            notes = "\n".join(f"_{n}_" for n in t.notes)
            parts.append(f"### {t.title}\n\n{t.markdown()}\n\n{notes}\n\nFiles: {files}".rstrip())
        elif kind == "figure":
            _, title, paths, notes = b
            body = (f"![{title}]({paths['png'].relative_to(out_dir).as_posix()}) "
                    f"([SVG]({paths['svg'].relative_to(out_dir).as_posix()}))") if paths else ""
            parts.append("\n\n".join(x for x in (f"### {title}", body, *[f"_{n}_" for n in notes]) if x))
    return "\n\n".join(parts) + "\n"


def _svg_inline(path: Path) -> str:
    """The SVG element alone (no XML prolog or DOCTYPE), its ids prefixed with the file's name:
    several SVGs share one HTML document, where ids are global."""
    text = path.read_text()
    text = text[text.index("<svg"):]
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    if not ids:
        return text
    pat = re.compile(r'(\bid="|#)(' + "|".join(map(re.escape, sorted(ids, key=len, reverse=True))) + r')(?=["\)])')
    return pat.sub(lambda m: f"{m.group(1)}{path.stem}-{m.group(2)}", text)


def _inline(text: str) -> str:
    """Escape, then render `code` spans (the only inline markup the report's text uses)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def html_page(blocks: list, title: str) -> str:
    parts = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2"):
            parts.append(f"<{kind}>{_inline(b[1])}</{kind}>")
        elif kind == "p":
            parts.append(f"<p>{_inline(b[1])}</p>")
        elif kind == "list":
            parts.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in b[1]) + "</ul>")
        elif kind == "code":
            parts.append(f"<pre>{html.escape(b[1])}</pre>")
        elif kind == "table":
            t = b[1]
            notes = "".join(f'<p class="note">{_inline(n)}</p>' for n in t.notes)
            body = f"<p><em>{NO_DATA}</em></p>" if t.empty else t.html() + notes
            parts.append(f"<h3>{html.escape(t.title)}</h3>{body}")
        elif kind == "figure":
            _, ftitle, paths, notes = b
            svg = _svg_inline(paths["svg"]) if paths else ""
            notes_html = "".join(f'<p class="note">{_inline(n)}</p>' for n in notes)
            parts.append(f"<figure><h3>{html.escape(ftitle)}</h3>{svg}{notes_html}</figure>")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")
