"""Communication volume per layer (paper Table 3 form): measured ledger bytes beside the formula.

Measured: a record's `comm_tagged` {"tag/op.phase": wire bytes per rank per step}. Per layer:
drop the model-exit gather and gradient syncs (methods.volume.NOT_PER_LAYER), divide by depth
(stdit3 depth already counts spatial+temporal pairs) and, in `sample` mode, by the forward passes.
Analytic: the record's `comm_formula` (the formula of the code that ran it, which the ledger was
checked against), reduced the same way; reports never recompute it with today's methods. The paper counts whole tensors
moved per device: paper = wire * N/(N-1) (methods/volume.py), shown as a multiple of M, the bytes
of one activation (B, T, S, C), next to Table 3's formula.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dspbench.reports.meta import table3

NOT_PER_LAYER = ("seq_gather", "grad_sync", "dp_grad_sync", "cfg_exchange")   # == methods.volume (torch-free here)
CFG_EXCHANGE = "cfg_exchange/send_recv.fwd"   # CFG parallelism's per-step exchange (methods/spec.py)
KEY = ("method", "model", "frames", "spatial", "batch", "sp", "mode", "dtype", "grad_ckpt",
       "shard", "sample_steps", "depth", "hidden", "zero", "cfg", "cfg_parallel", "hardware", "source")
_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def per_layer(tagged, phase: str, layers: float) -> float:
    """Layer-internal wire bytes of one phase, per layer."""
    if not isinstance(tagged, dict):
        return np.nan
    return sum(v for k, v in tagged.items()
               if k.split("/", 1)[0] not in NOT_PER_LAYER and k.endswith(f".{phase}")) / layers


def per_op_per_layer(tagged, layers: float) -> dict[str, float]:
    """{'op.phase': bytes per layer} of layer-internal traffic (for the stacked figure)."""
    out: dict[str, float] = {}
    for k, v in (tagged or {}).items():
        tag, opphase = k.split("/", 1) if "/" in k else ("", k)
        if tag not in NOT_PER_LAYER:
            out[opphase] = out.get(opphase, 0.0) + v / layers
    return out


def _passes(row) -> float:
    return float(row["sample_steps"]) if row["mode"] == "sample" else 1.0


def volume_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per measured configuration with SP > 1 (first repeat: bytes do not vary)."""
    df = runs[runs["status"].isin(["ok", "predicted"]) & (runs["sp"] > 1)]
    df = df[df["comm_tagged"].map(lambda t: isinstance(t, dict)).astype(bool)]
    df = df.sort_values("repeat").drop_duplicates([k for k in KEY if k in df], keep="first")
    if "comm_formula" not in df:
        df = df.assign(comm_formula=None)
    rows = [_row(r._asdict()) for r in df[list(KEY) + ["comm_tagged", "comm_formula"]].itertuples(index=False)]
    cols = list(KEY) + ["layers", "M_bytes", "fwd_measured", "fwd_formula", "bwd_measured",
                        "bwd_formula", "match", "paper_fwd_xM", "table3", "table3_xM", "cfg_exchange_per_step",
                        "note"]
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["model", "mode", "frames", "spatial", "batch", "sp", "method"]).reset_index(drop=True)


def _row(r) -> dict:
    layers = float(r["depth"]) * _passes(r)
    n = int(r["sp"])
    M = float(r["batch"] * r["frames"] * r["spatial"] * r["hidden"] * _DTYPE_BYTES.get(r["dtype"], np.nan))
    # the formula covers the whole step, as the ledger does (sample mode: every forward pass)
    formula = r["comm_formula"] if isinstance(r["comm_formula"], dict) else None
    why = None if formula is not None else "the record carries no comm_formula (written before schema 2)"
    out = {k: r[k] for k in KEY}
    out.update(layers=layers, M_bytes=M, note=why or "",
               fwd_measured=per_layer(r["comm_tagged"], "fwd", layers),
               bwd_measured=per_layer(r["comm_tagged"], "bwd", layers),
               fwd_formula=per_layer(formula, "fwd", layers) if formula is not None else np.nan,
               bwd_formula=per_layer(formula, "bwd", layers) if formula is not None else np.nan)
    # bytes == formula exactly (the project's contract): np.isclose's default rtol let a few bytes in
    # half a MiB pass. The same integer totals divided by the same layers give the same float.
    exact = dict(rtol=0.0, atol=0.0)
    out["match"] = bool(formula is not None and np.isclose(out["fwd_measured"], out["fwd_formula"], **exact)
                        and np.isclose(out["bwd_measured"], out["bwd_formula"], equal_nan=True, **exact))
    out["paper_fwd_xM"] = out["fwd_measured"] * n / (n - 1) / M
    name, factor = table3(r["method"])
    out["table3"], out["table3_xM"] = name, factor(n) if factor else np.nan
    # CFG parallelism adds one exchange per sampling step, not per layer: E = the noise prediction
    # (B·C_in·T·S·patch bytes) each rank sends its peer; both sides of the match count it
    out["cfg_exchange_per_step"] = np.nan
    if r.get("cfg_parallel"):
        out["cfg_exchange_per_step"] = (r["comm_tagged"] or {}).get(CFG_EXCHANGE, 0) / _passes(r)
        if formula is not None:
            out["match"] = out["match"] and formula.get(CFG_EXCHANGE) == r["comm_tagged"].get(CFG_EXCHANGE)
    return out
