"""Render a report, a list of blocks, to Markdown (figures linked); render_html.py writes the
self-contained HTML from the same blocks.

Blocks are plain tuples so both writers see the same content:
("h1"|"h2"|"p"|"banner", text), ("list", [text]), ("code", text), ("table", Table),
("kv", [(key, value)]), ("details", summary, text), ("raw", html, markdown), ("toc",),
("figure", title, {"png": path, "svg": path} | None, [notes], caption).
"""
from __future__ import annotations

from pathlib import Path

NO_DATA = "(no data for this table in the sweep)"


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
        elif kind == "banner":
            parts.append(f"> **{b[1]}**")
        elif kind == "raw":
            parts.append(b[2])
        elif kind == "kv":
            parts.append("| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in b[1]))
        elif kind == "details":
            parts.append(f"<details><summary>{b[1]}</summary>\n\n```\n{b[2]}\n```\n</details>")
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
            _, title, paths, notes, caption = (*b, "")[:5]
            body = (f"![{title}]({paths['png'].relative_to(out_dir).as_posix()}) "
                    f"([SVG]({paths['svg'].relative_to(out_dir).as_posix()}))") if paths else ""
            parts.append("\n\n".join(x for x in (f"### {title}", body, caption, *[f"_{n}_" for n in notes]) if x))
    return "\n\n".join(parts) + "\n"
