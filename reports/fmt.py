"""A report table: numbers for CSV, formatted strings for Markdown, LaTeX and HTML.

Own writers rather than pandas' to_markdown/to_latex: those need optional packages (tabulate,
jinja2) and their output drifts between versions, which would break the golden tests.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

MAX_DISPLAY_ROWS = 60   # longer tables are cut in md/html (CSV and LaTeX keep every row)


@dataclass
class Table:
    name: str                    # file stem
    title: str
    data: pd.DataFrame           # machine-readable (CSV)
    display: pd.DataFrame        # strings, human units (md, tex, html)
    notes: list[str] = field(default_factory=list)
    links: list | None = None    # per display row: the raw record's path (relative to the results)

    @property
    def empty(self) -> bool:
        return self.display.empty

    def markdown(self, max_rows: int | None = MAX_DISPLAY_ROWS) -> str:
        d, cut = _cut(self.display, max_rows)
        esc = lambda s: str(s).replace("|", "\\|")
        lines = ["| " + " | ".join(esc(c) for c in d.columns) + " |",
                 "|" + "|".join("---" for _ in d.columns) + "|"]
        lines += ["| " + " | ".join(esc(v) for v in row) + " |" for row in d.itertuples(index=False)]
        return "\n".join(lines) + cut

    def latex(self) -> str:
        d = self.display
        cols = "l" * len(d.columns)
        body = [" & ".join(_tex(c) for c in d.columns) + r" \\", r"\midrule"]
        body += [" & ".join(_tex(v) for v in row) + r" \\" for row in d.itertuples(index=False)]
        return "\n".join([r"\begin{table}[ht]", r"\centering", rf"\caption{{{_tex(self.title)}}}",
                          rf"\begin{{tabular}}{{{cols}}}", r"\toprule", *body, r"\bottomrule",
                          r"\end{tabular}", r"\end{table}"]) + "\n"

    def write(self, folder: Path) -> dict[str, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        paths = {ext: folder / f"{self.name}.{ext}" for ext in ("md", "csv", "tex")}
        paths["md"].write_text(f"## {self.title}\n\n{self.markdown(None)}\n")
        self.data.to_csv(paths["csv"], index=False, float_format="%.10g")
        paths["tex"].write_text(self.latex())
        return paths


def _cut(d: pd.DataFrame, max_rows: int | None) -> tuple[pd.DataFrame, str]:
    if max_rows is None or len(d) <= max_rows:
        return d, ""
    return d.head(max_rows), f"\n\n({len(d) - max_rows} more rows in the CSV file)"


_TEX = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
        "±": r"$\pm$", "×": r"$\times$", "→": r"$\rightarrow$", "✓": "yes", "✗": "NO"}


_TEX_TABLE = str.maketrans(_TEX)


def _tex(v) -> str:
    return str(v).translate(_TEX_TABLE)


# ---------------------------------------------------------------- number formatting
def missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x, digits: int = 3) -> str:
    """Significant digits, never scientific notation for report-sized numbers."""
    if missing(x):
        return "—"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    return f"{x:.{max(0, digits - 1 - mag)}f}"


def mib(x) -> str:
    """MiB to 3 significant digits: tiny CPU models move KiB per layer, large ones GiB per step."""
    return "—" if missing(x) else num(x / 2**20)


def gib(x) -> str:
    return "—" if missing(x) else num(x / 2**30)


def pct(x, digits: int = 1) -> str:
    return "—" if missing(x) else f"{100 * x:.{digits}f}%"


def times(x, digits: int = 2) -> str:
    return "—" if missing(x) else f"{x:.{digits}f}×"


def spread(med, lo, hi, n, f=num, bound=None) -> str:
    """The one way a spread is shown: 'median [min–max]' over n > 1 repeats, else 'x (n=1)'."""
    if missing(med):
        return "—"
    if missing(n) or int(n) <= 1:
        return f"{f(med)} (n=1)"
    b = bound or f
    return f"{f(med)} [{b(lo)}–{b(hi)}]"


def ratio_spread(med, lo, hi, n) -> str:
    return spread(med, lo, hi, n, times, lambda x: "—" if missing(x) else f"{x:.2f}")
