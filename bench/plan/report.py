"""`plan --report DIR`: the plan document as DIR/plan.json, rendered by the reports stage
(reports/plan_report.py reads the JSON; it imports nothing that prices)."""
from __future__ import annotations

import json
from pathlib import Path

from dspbench.records.io import write_atomic


def write_report(doc: dict, folder: str) -> Path:
    from dspbench.reports.plan_report import render
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "plan.json", json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
    return render(out)
