"""How much a per-method term could add to tau here, at most: a diagnosis, not a validation.

For each shape, each row's prediction is corrected by its method's (and ZeRO stage's) median
log(measured / predicted) relative to its shape's median, taken over the OTHER nine shapes (leave
one shape out), and tau-b recomputed. The correction is fitted on this validation's own
measurements, so these shapes would no longer be held out for it; it bounds what `calibrate
--methods`, which measures that term on a calibration shape, could add.
    python results/plan-validation/quiet/per_method_loo.py
"""
import math
import statistics
from pathlib import Path

from dspbench.plan.check import compare, kendall_tau
from dspbench.records.io import read_dir

HERE = Path(__file__).parent


def key(config: str) -> str:
    zero = config.split("ZeRO-")[1][0]
    return config.split()[0] + ("" if zero == "0" else f" ZeRO-{zero}")


def residuals(rows: list[dict]) -> dict:
    logs = {key(r["config"]): math.log(r["measured"] / r["predicted"]) for r in rows}
    mid = statistics.median(logs.values())
    return {k: v - mid for k, v in logs.items()}


def main() -> None:
    import json
    shapes = {}
    for folder in sorted(HERE.glob("*-stdit-tiny-*")):
        doc = json.loads((folder / "plan.json").read_text())
        shapes[folder.name] = compare(doc, read_dir(folder / "results")[0])["rows"]
    before, after = [], []
    print("| shape | tau-b as predicted | tau-b, per-method term from the other nine shapes |\n|---|---|---|")
    for name, rows in shapes.items():
        pooled = {}
        for other, orows in shapes.items():
            if other != name:
                for k, v in residuals(orows).items():
                    pooled.setdefault(k, []).append(v)
        term = {k: statistics.median(v) for k, v in pooled.items()}
        measured = [r["measured"] for r in rows]
        t0 = kendall_tau([r["predicted"] for r in rows], measured)
        t1 = kendall_tau([r["predicted"] * math.exp(term.get(key(r["config"]), 0.0)) for r in rows], measured)
        before.append(t0)
        after.append(t1)
        print(f"| {name} | {t0:.2f} | {t1:.2f} |")
    print(f"| mean | {statistics.fmean(before):.2f} | {statistics.fmean(after):.2f} |")


if __name__ == "__main__":
    main()
