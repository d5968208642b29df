"""Read result records (JSON lines) for reports, without importing the harness.

Reports read what records carry and nothing else (no methods, models or bench imports: a test
walks the imports), so this is the reports' own tolerant reader of bench/run/record.py's format:
corrupt or truncated lines and unknown schema versions come back as "file:line: ..." problems.

`normalise` fills the fields older records lack, the same way everywhere:
- `source`: measured | predicted | synthetic; absent = measured, except a record whose status is
  `predicted` (the cost model's, before the field existed);
- `outcome`: the run's status with `predicted` read as `ok` (a prediction that fits), so a
  predicted OOM and a measured OOM share an outcome and differ by source;
- `oracle_max_abs_err`: a float, the max over parts; an old dict value moves to `oracle_errors`;
- `zero` (ZeRO stage) 0 and `cfg` (classifier-free guidance) False when absent.
"""
from __future__ import annotations

import math
import os

try:                 # 5-6x faster on 10,000 records (the reports extra installs it)
    from orjson import JSONDecodeError, loads
except ImportError:  # pragma: no cover - the standard library parses the same JSON
    from json import JSONDecodeError, loads

SCHEMA_VERSIONS = (1, 2)          # the versions whose fields this reader knows
SOURCES = ("measured", "predicted", "synthetic")


def read_records(path: str | os.PathLike) -> tuple[list[dict], list[str]]:
    """(records, problems); each record gains `_line`, its 1-based line number in the file."""
    records, problems = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = loads(line)
            except (JSONDecodeError, ValueError) as e:
                problems.append(f"{path}:{lineno}: corrupt record skipped ({_msg(e)})")
                continue
            if not isinstance(rec, dict) or "run_id" not in rec or "status" not in rec:
                problems.append(f"{path}:{lineno}: not a dspbench record (no run_id/status), skipped")
                continue
            if rec.get("schema_version") not in SCHEMA_VERSIONS:
                problems.append(f"{path}:{lineno}: schema_version {rec.get('schema_version')!r} not in "
                                f"{SCHEMA_VERSIONS}, skipped")
                continue
            rec["_line"] = lineno
            records.append(normalise(rec))
    return records, problems


def _msg(e: Exception) -> str:
    """The parser's reason without its position (the file:line says where): json and orjson alike."""
    return getattr(e, "msg", None) or str(e).split(":")[0]


def normalise(rec: dict) -> dict:
    status = rec.get("status")
    src = rec.get("source")
    if src not in SOURCES:
        src = "predicted" if status == "predicted" else "measured"
    rec["source"] = src
    rec["outcome"] = "ok" if status == "predicted" else status
    err = rec.get("oracle_max_abs_err")
    if isinstance(err, dict):      # schema 1: the per-part detail in the same field
        rec.setdefault("oracle_errors", err)
        rec["oracle_max_abs_err"] = _max_leaf(err)
    rec["zero"] = rec.get("zero") or 0
    rec["cfg"] = bool(rec.get("cfg") or False)
    return rec


# the error parts of a schema-1 oracle dict (it also carries facts such as depth and shape)
ERROR_PARTS = ("output", "grads", "input_grad", "param_grads")


def _max_leaf(d: dict) -> float | None:
    vals = [float(d[k]) for k in ERROR_PARTS
            if isinstance(d.get(k), (int, float)) and not math.isnan(d[k])]
    return max(vals) if vals else None


def status_label(outcome: str, source: str) -> str:
    """'oom' for a measured OOM, 'predicted oom' for the cost model's: never confused."""
    return outcome if source == "measured" else f"{source} {outcome}"
