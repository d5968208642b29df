"""Reports: one sweep's records (results/<sweep>/) -> tidy DataFrame -> derived metrics -> tables
(Markdown, CSV, LaTeX), seaborn figures (PNG, SVG), index.md and a self-contained index.html.

    from dspbench.reports import build_report
    build_report("results/my-sweep")            # -> results/my-sweep/report/index.html

Imports are lazy so `import dspbench.reports` stays cheap (pandas/matplotlib load on first use).
"""
from __future__ import annotations

__all__ = ["analyse", "build_report", "load_sweep"]


def __getattr__(name):
    if name in ("analyse", "build_report"):
        from dspbench.reports import report
        return getattr(report, name)
    if name == "load_sweep":
        from dspbench.reports.collect import load_sweep
        return load_sweep
    raise AttributeError(name)
