"""The report's section on the paper's protocol (each method at its minimum SP) and its claims."""
from __future__ import annotations

import random

import pandas as pd

from dspbench.micro.synth_records import CPU_ENV, make_record
from dspbench.records.config import RunConfig
from dspbench.records.io import append_record
from dspbench.reports import claims, derive
from dspbench.reports.collect import load_sweep


def _row(method, frames, sp, nodes, sps, status="ok"):
    return {"source": "measured", "hardware": "cpu", "model": "stdit-tiny", "gpus": 4, "mem_budget_mib": 64,
            "frames": frames, "spatial": 256, "method": method, "status": status, "sp": sp, "nodes": nodes,
            "samples_per_s": sps, "why": ""}


def _rows():
    return pd.DataFrame([
        _row("dsp", 8, 1, 1, 10.0), _row("ulysses", 8, 1, 1, 10.0), _row("ring", 8, 1, 1, 10.0),
        _row("dsp", 16, 2, 1, 5.0), _row("ulysses", 16, 2, 1, 4.5), _row("ring", 16, 2, 1, 4.0),
        _row("dsp", 32, 4, 2, 2.0), _row("ulysses", 32, 4, 2, 1.6), _row("ring", 32, 4, 2, 0.5),
        _row("dsp", 64, None, None, float("nan"), "unsupported"),
        _row("ring", 64, None, None, float("nan"), "unsupported"),
    ])


def test_claims_are_checked_on_the_rows_with_their_evidence():
    text = claims.claims(_rows())
    assert text[0] == ("DSP ahead of Ulysses: holds, at 2 of 2 lengths with SP > 1 (DSP / Ulysses 1.11 to 1.25).")
    ring = next(t for t in text if t.startswith("Ring"))
    assert ring == ("Ring Attention falls off once its SP crosses nodes: DSP / Ring Attention 1.25 with SP inside "
                    "a node, 4.00 across nodes.")
    assert text[-1] == "Longest sequence that ran, per method: DSP 8K tokens, Ulysses 8K tokens, Ring Attention 8K tokens."


def test_claims_say_when_they_do_not_hold():
    rows = _rows()
    rows.loc[(rows["method"] == "ulysses") & (rows["frames"] == 32), "samples_per_s"] = 3.0   # Ulysses faster
    rows.loc[(rows["method"] == "ring") & (rows["frames"] == 32), "samples_per_s"] = 2.0      # ring keeps up
    text = claims.claims(rows)
    assert text[0].startswith("DSP ahead of Ulysses: holds in part, at 1 of 2 lengths")
    assert any(t.startswith("Ring Attention does not fall off once its SP crosses nodes: DSP / Ring Attention 1.25")
               for t in text)


def test_two_ulysses_implementations_count_as_one_length():
    """DeepSpeed's Ulysses beside the native one: still 2 lengths; a length counts as ahead only when DSP
    beats both there."""
    rows = pd.concat([_rows(), pd.DataFrame([_row("ulysses_deepspeed", 16, 2, 1, 5.5),
                                             _row("ulysses_deepspeed", 32, 4, 2, 1.5)])], ignore_index=True)
    text = claims.claims(rows)
    assert text[0] == ("DSP ahead of Ulysses: holds in part, at 1 of 2 lengths with SP > 1 "
                       "(DSP / Ulysses 0.91 to 1.33).")


def test_the_table_gives_each_methods_sp_and_span_and_ratios_within_one_row():
    t = claims.table(_rows(), "protocol_0", "title")
    d = t.display.set_index("T x S")
    assert d.loc["16 x 256", "DSP"] == "5 (SP 2, 1 node)" and d.loc["32 x 256", "Ring Attention"] == "0.5 (SP 4, 2 nodes)"
    assert d.loc["32 x 256", "DSP / Ring Attention"] == "4.00" and d.loc["8 x 256", "DSP / Ulysses"] == "1.00"
    assert d.loc["64 x 256", "DSP"] == "unsupported" and d.loc["64 x 256", "DSP / Ulysses"] == "—"
    oom = _rows()
    oom.loc[oom["frames"] == 64, "why"] = "no SP degree fits dsp: sp=4: predicted OOM: 57 MiB > 48 MiB"
    oom.loc[(oom["method"] == "ring") & (oom["frames"] == 64), "status"] = "oom"
    oom["failed"], oom["repeats"] = 0, 1
    oom.loc[(oom["method"] == "ulysses") & (oom["frames"] == 32), ["failed", "repeats"]] = [1, 3]
    d = claims.table(oom, "protocol_0", "title").display.set_index("T x S")
    assert d.loc["64 x 256", "DSP"] == "no SP fits" and d.loc["64 x 256", "Ring Attention"] == "OOM"
    assert d.loc["32 x 256", "Ulysses"] == "1.6 (SP 4, 2 nodes; 1 of 3 repeats failed)"
    assert d.loc["16 x 256", "budget"] == "64 MiB"


def _record(method, frames, sp, sps, auto=True, nodes=1):
    cfg = RunConfig(method=method, model="stdit-tiny", frames=frames, spatial=64, gpus=4, sp=sp, sp_auto=auto,
                    mem_budget_mib=64)
    rec = make_record(cfg, random.Random(0), flops_per_s=1e9, bytes_per_s=1e8, env=CPU_ENV)
    hosts = ["n0", "n0", "n1", "n1"]
    rec.update(source="measured", step_time_median_s=1 / sps, samples_per_s=sps * cfg.dp / cfg.dp,
               placement={"rank_hosts": hosts, "nodes": 2, "sp_group_nodes": nodes, "dp_group_nodes": 1})
    return rec


def test_the_section_appears_only_for_sp_auto_records_and_beside_paper_scale(tmp_path):
    for rec in (_record("dsp", 8, 2, 4.0), _record("ulysses", 8, 2, 3.0), _record("ring", 8, 4, 1.0, nodes=2)):
        append_record(tmp_path / "a.jsonl", rec)
    runs = derive.enrich(load_sweep(tmp_path).runs)
    blocks = claims.blocks(runs)
    kinds = [b[0] for b in blocks]
    assert kinds[0] == "h2" and kinds.count("table") == 2       # ours, then the paper-scale prediction
    ours = blocks[1][1]
    assert "emulated memory 64 MiB per rank" in ours.title
    row = ours.display.iloc[0]
    assert row["Ring Attention"].endswith("(SP 4, 2 nodes)") and row["DSP / Ring Attention"] == "4.00"
    listed = blocks[3][1]
    assert listed[0].startswith("DSP ahead of Ulysses: holds, at 1 of 1")
    assert blocks[-3][1].title.startswith("Predicted at paper scale")
    assert any("Ring Attention falls off once its SP crosses nodes" in t for t in blocks[-1][1])

    fixed = tmp_path / "fixed"
    for rec in (_record("dsp", 8, 2, 4.0, auto=False), _record("ulysses", 8, 2, 3.0, auto=False)):
        append_record(fixed / "a.jsonl", rec)
    assert claims.blocks(derive.enrich(load_sweep(fixed).runs)) == []
