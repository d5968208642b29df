"""Communication tables: per-layer volume (paper Table 3 form) and time per op."""
from __future__ import annotations

import pandas as pd

from dspbench.reports import fmt
from dspbench.reports.fmt import Table
from dspbench.reports.style import label, order


def volume(vol: pd.DataFrame) -> Table:
    """Measured ledger bytes beside the analytic formula, in our convention and the paper's."""
    data = vol.copy()
    if not data.empty:
        rank = {m: i for i, m in enumerate(order(data["method"]))}
        data = data.assign(_o=data["method"].map(rank)).sort_values(
            ["model", "mode", "dtype", "batch", "frames", "spatial", "sp", "_o"]).drop(columns="_o")
    ok = lambda m: "✓" if m else "✗"
    d = pd.DataFrame({
        "method": data["method"].map(label), "N": data["sp"].astype("Int64"), "model": data["model"],
        "mode": data["mode"], "dtype": data["dtype"], "B": data["batch"], "T": data["frames"],
        "S": data["spatial"], "M (MiB)": data["M_bytes"].map(fmt.mib),
        "fwd measured (MiB)": data["fwd_measured"].map(fmt.mib),
        "fwd formula (MiB)": data["fwd_formula"].map(fmt.mib),
        "bwd measured (MiB)": data["bwd_measured"].map(fmt.mib),
        "bwd formula (MiB)": data["bwd_formula"].map(fmt.mib),
        "ledger = formula": data["match"].map(ok),
        "paper conv. fwd (×M)": data["paper_fwd_xM"].map(lambda x: fmt.num(x, 3)),
        "Table 3 (×M)": [_table3(t, x, e) for t, x, e in
                         zip(data["table3"], data["table3_xM"], data.get("cfg_exchange_per_step", [None] * len(data)))],
    })
    notes = ["Per layer (one spatial + one temporal attention), per rank: wire bytes each rank sends "
             "(nccl-tests convention), excluding the model-exit gather, gradient syncs and the CFG exchange. "
             "Paper convention (Table 3) = wire × N/(N-1), as a multiple of M = B·T·S·C·bytes "
             "(one full activation). Measured = the run's ledger; formula = the method's "
             "`comm_bytes` for the same configuration."]
    bad = data[~data["match"].astype(bool)] if not data.empty else data
    if not bad.empty:
        notes.append(f"{len(bad)} configuration(s) where the ledger differs from the formula: "
                     + "; ".join(f"{r.method} N={r.sp} T={r.frames} S={r.spatial}"
                                 + (f" ({r.note})" if r.note else "") for r in bad.head(5).itertuples()))
    return Table("comm_volume", "Communication volume per layer (paper Table 3 form)", data,
                 d.reset_index(drop=True), notes)


def _table3(name, factor, exchange) -> str:
    """Table 3's per-layer formula; under CFG parallelism plus E, the exchange once per sampling step."""
    text = f"{name} = {fmt.num(factor, 3)}" if name else "—"
    if exchange is not None and exchange == exchange:   # not NaN: a cfg_parallel row
        text += f" + E per step (CFG exchange, {fmt.mib(exchange)} MiB)"
    return text


def per_op_time(runs: pd.DataFrame) -> Table:
    """Bytes, seconds and bus bandwidth per op.phase, summed over each method's runs' first repeat."""
    rows = []
    ok = runs[(runs["status"] == "ok") & (runs["sp"] > 1)]
    ok = ok.sort_values("repeat").drop_duplicates(["method", "model", "mode", "dtype", "batch",
                                                   "frames", "spatial", "gpus", "sp", "shard"])
    for r in ok.itertuples():
        times = r.comm_time_s if isinstance(r.comm_time_s, dict) else {}
        comm = r.comm if isinstance(r.comm, dict) else {}
        for k in sorted(set(times) | set(comm)):
            rows.append({"method": r.method, "gpus": r.gpus, "sp": r.sp, "frames": r.frames,
                         "spatial": r.spatial, "op_phase": k, "bytes": comm.get(k, float("nan")),
                         "seconds": times.get(k, float("nan")),
                         "step_time_s": r.step_time_median_s})
    data = pd.DataFrame(rows, columns=["method", "gpus", "sp", "frames", "spatial", "op_phase",
                                       "bytes", "seconds", "step_time_s"])
    rank = {m: i for i, m in enumerate(order(data["method"]))}
    data = data.assign(_o=data["method"].map(rank)).sort_values(
        ["gpus", "sp", "frames", "spatial", "_o", "op_phase"]).drop(columns="_o").reset_index(drop=True)
    data["busbw_bytes_per_s"] = data["bytes"] / data["seconds"]
    data["share_of_step"] = data["seconds"] / data["step_time_s"]
    d = pd.DataFrame({"method": data["method"].map(label), "GPUs": data["gpus"], "SP": data["sp"],
                      "T": data["frames"], "S": data["spatial"], "op.phase": data["op_phase"],
                      "MiB/rank/step": data["bytes"].map(fmt.mib),
                      "time (ms)": (data["seconds"] * 1e3).map(lambda x: fmt.num(x, 3)),
                      "share of step": data["share_of_step"].map(fmt.pct),
                      "bus bw (GB/s)": (data["busbw_bytes_per_s"] / 1e9).map(lambda x: fmt.num(x, 3))})
    return Table("comm_time", "Communication time and bus bandwidth per op (first repeat)", data, d,
                 ["Times come from a separate instrumented iteration (barrier before each op, each op "
                  "timed alone); bus bandwidth = wire bytes / time for every op (nccl-tests)."])
