"""What the reports add to a record read by dspbench.records.io (which upgrades schema 1: source,
the oracle error as a float): an `outcome` in which a prediction that fits reads `ok`, so a
predicted OOM and a measured OOM share an outcome and differ by source; the ZeRO stage and CFG
defaults of records older than those fields; and one label for a status with its source."""
from __future__ import annotations

SOURCES = ("measured", "predicted", "synthetic", "published")   # published: cited, not run here (cost/published.py)


def normalise(rec: dict) -> dict:
    status = rec.get("status")
    if rec.get("source") not in SOURCES:      # io.upgrade sets it; a hand-written record may not
        rec["source"] = "predicted" if status == "predicted" else "measured"
    rec["outcome"] = "ok" if status == "predicted" else status
    rec["zero"] = rec.get("zero") or 0
    rec["cfg"] = bool(rec.get("cfg") or False)
    rec["cfg_parallel"] = bool(rec.get("cfg_parallel") or False)
    # eager unless a record says compiled (predict --compiled, a published torch.compile column)
    rec["software"] = "compiled" if rec.get("compiled") else "eager"
    return rec


def status_label(outcome: str, source: str) -> str:
    """'oom' for a measured OOM, 'predicted oom' for the cost model's, 'published ok' for a cited
    number: never confused."""
    return outcome if source == "measured" else f"{source} {outcome}"
