"""The cost model: alpha-beta comm, link levels, memory/OOM, --sp auto, predicted records."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from dspbench.cost.autosp import resolve_sp, resolved
from dspbench.records.config import RunConfig
from dspbench.cost.comm import group_link
from dspbench.cost.tiers import op_time
from dspbench.cost.model import predict
from dspbench.cost.hardware import Link, available_profiles, load_profile
from dspbench.methods import Dims
from dspbench.methods.comm.ledger import untag
from dspbench.models import Shape, get_config
from dspbench.cost.predict import predicted_record

XL = dict(model="stdit-xl", dtype="bf16", grad_ckpt=True, backend="nccl", launcher="slurm")
OPS = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv")


def test_profiles_load_with_sources():
    names = available_profiles()
    assert {"h800-nvlink", "h100-ib", "a100-ib", "h200-ib"} <= set(names)
    for n in names:
        p = load_profile(n)
        assert p.flops("bf16") > 0 and p.usable_bytes > 0
        for key in ("device.memory_gb", "compute.peak_flops", "link.intra.bw_GBps", "link.inter.bw_GBps"):
            assert key in p.sources, (n, key)


DOCUMENTS = ("datasheet", "whitepaper", "paper", "guide", "specification")


def source_problem(src: str) -> str | None:
    """Why a profile value's source is not a real one: a placeholder, or neither a stated
    assumption with its reason nor a document and the table in it."""
    s = src.strip().lower()
    if s.startswith("assumption:"):
        return None if len(s) >= len("assumption:") + 20 else "an assumption without its reason"
    if any(d in s for d in DOCUMENTS) and "table" in s:
        return None
    if s.startswith("measured"):    # a measurement names its committed raw data
        import re
        from pathlib import Path
        files = re.findall(r"results/[\w./-]+\.jsonl?", src)   # raw data: JSON, or JSON-lines records
        root = Path(__file__).resolve().parent.parent
        return None if files and all((root / f).is_file() for f in files) else "a measurement naming no committed results file"
    return "cites no document and table"


@pytest.mark.parametrize("name", available_profiles())
def test_every_profile_value_cites_a_real_source(name):
    import tomllib
    from dspbench.cost.hardware import PROFILE_DIR
    raw = tomllib.loads((PROFILE_DIR / f"{name}.toml").read_text())
    # a sku's facts cite the device table (tests/test_devices.py checks they are not restated here)
    values = [f"{sec}.{k}" for sec in ("device", "compute", "overlap") for k in raw.get(sec, {}) if k not in ("name", "sku")]
    values += [f"link.{lvl}.{k}" for lvl, t in raw.get("link", {}).items() for k in t]
    sources = raw["sources"]
    assert not [v for v in values if v not in sources], "values without a source"
    bad = {k: (src, source_problem(src)) for k, src in sources.items() if source_problem(src)}
    assert not bad, bad


@pytest.mark.parametrize("src", ["h800-nvlink0", "h100-ib1", "TODO", "NVIDIA datasheet", "assumption: tbd"])
def test_placeholder_sources_are_rejected(src):
    assert source_problem(src) is not None


@pytest.mark.parametrize("op", OPS)
def test_op_time_monotonic_in_bytes_and_bandwidth(op):
    slow, fast = Link(alpha_s=1e-5, bw_GBps=10), Link(alpha_s=1e-5, bw_GBps=100)
    sizes = [2**k for k in range(12, 30, 3)]
    times = [op_time(slow, op, s * 8, 8) for s in sizes]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all(op_time(fast, op, s * 8, 8) < op_time(slow, op, s * 8, 8) for s in sizes)


def test_sp_group_spanning_nodes_pays_inter_node_link():
    prof = load_profile("h100-ib")
    assert group_link(prof, Dims(sp=8, dp=2), "sp") is prof.intra
    assert group_link(prof, Dims(sp=16, dp=1), "sp") is prof.inter
    assert group_link(prof, Dims(sp=8, dp=2), "dp") is prof.inter        # DP crosses nodes
    assert group_link(prof, Dims(sp=4, dp=2), "dp") is prof.intra        # whole world in one node
    cfg = RunConfig(method="dsp", frames=128, spatial=4096, gpus=16, sp=16, **XL)
    one_node = replace(prof, gpus_per_node=16)
    assert predict(cfg, prof).comm_total_s > 5 * predict(cfg, one_node).comm_total_s


@pytest.mark.parametrize("m", ["dsp", "ulysses", "ring", "megatron_sp", "usp"])   # usp: 2 x 2 sub-groups
def test_predicted_comm_bytes_equal_what_the_ledger_measures(m):
    """The prediction against bytes the ledger records from the model's real collectives (on the fake
    process group: tests/fake_tasks.py), not against the formula the prediction is built from."""
    from fake_tasks import fake_step
    cfg = RunConfig(method=m, model="stdit-tiny", frames=4, spatial=16, gpus=4, sp=4)
    measured = untag(fake_step(m, get_config("stdit-tiny"), Shape(1, 4, 16), 4)[0])
    assert measured and predict(cfg, load_profile("h800-nvlink")).comm_wire == pytest.approx(measured)


def test_dsp_moves_fewest_bytes_and_is_fastest_when_comm_matters():
    prof = load_profile("h800-nvlink")
    preds = {m: predict(RunConfig(method=m, frames=64, spatial=4096, gpus=8, sp=8, **XL), prof)
             for m in ("dsp", "ulysses", "ring", "megatron_sp")}
    wire = {m: sum(p.comm_wire.values()) for m, p in preds.items()}
    assert min(wire, key=wire.get) == "dsp"
    assert min(preds, key=lambda m: preds[m].step_s) == "dsp"


def test_memory_parts_and_oom():
    prof = load_profile("h100-ib")
    base = RunConfig(method="dsp", frames=1024, spatial=4096, gpus=64, **XL)
    p8, p16 = predict(replace(base, sp=8, zero=2), prof), predict(replace(base, sp=16, zero=2), prof)
    assert not p8.fits and p16.fits
    assert p16.mem["activations"] == pytest.approx(p8.mem["activations"] / 2)
    no_ckpt = predict(replace(base, sp=16, grad_ckpt=False, zero=2), prof)
    assert no_ckpt.mem["activations"] > 5 * p16.mem["activations"]
    z0, z2 = predict(replace(base, sp=16, zero=0), prof), predict(replace(base, sp=16, zero=2), prof)
    assert z0.mem["optimizer"] > z2.mem["optimizer"] and z2.mem["grads"] < z0.mem["grads"]
    assert z2.mem["weights"] == z0.mem["weights"]            # ZeRO-2 keeps whole weights
    assert predict(replace(base, sp=16, method="ring", zero=2), prof).mem["comm_buffers"] > p16.mem["comm_buffers"]


def test_sp_auto_known_cases():
    prof = load_profile("h100-ib")
    xl = RunConfig(method="dsp", frames=1024, spatial=4096, gpus=64, sp="auto", **XL)
    assert resolve_sp(replace(xl, zero=2), prof) == 16
    assert resolve_sp(RunConfig(method="dsp", frames=128, spatial=4096, gpus=8, sp="auto", zero=2, **XL), prof) == 2
    # 3B at 4M tokens needs SP 32: Ulysses and Megatron-SP split 16 heads, so they cannot.
    big = RunConfig(method="ulysses", model="stdit-3b", frames=1024, spatial=4096, gpus=64, sp="auto",
                    dtype="bf16", grad_ckpt=True, backend="nccl", zero=2)
    assert resolve_sp(replace(big, method="dsp"), prof) == 32
    reason = resolve_sp(big, prof)
    assert isinstance(reason, str) and "heads" in reason and "OOM" in reason
    tiny = RunConfig(method="dsp", gpus=2, sp="auto")
    assert resolved(tiny, "h100-ib") == (replace(tiny, sp=1, sp_auto=True), None)
    assert replace(tiny, sp=1, sp_auto=True).run_id() == replace(tiny, sp=1).run_id()   # the same measurement
    assert "--hardware" in resolved(tiny, None)[1]


def test_run_with_sp_auto_and_no_hardware_is_unsupported():
    from dspbench.run.harness import run_config
    rec = run_config(RunConfig(method="dsp", gpus=2, sp="auto"))
    assert rec["status"] == "unsupported" and "--hardware" in rec["error"]


def test_run_with_sp_auto_runs_at_the_smallest_degree_that_fits(tmp_path):
    """A profile whose memory lies between the predicted peaks at sp=1 and sp=2: the run gets sp=2."""
    from dspbench.cli import main
    from dspbench.cost.profile_toml import dumps
    cfg = RunConfig(method="dsp", model="stdit-tiny", frames=8, spatial=64, gpus=2, sp=1, warmup=0, iters=1)
    peak = {sp: predict(replace(cfg, sp=sp), load_profile("h100-ib")).mem["peak"] for sp in (1, 2)}
    assert peak[2] < peak[1]
    raw = dict(load_profile("h100-ib").raw)
    raw["device"] = {**raw["device"], "memory_gb": (peak[1] + peak[2]) / 2 / 1e9, "usable_memory_fraction": 1.0,
                     "reserved_gb": 0.0}
    (tmp_path / "small.toml").write_text(dumps(raw))
    out = tmp_path / "r.jsonl"
    assert main(["run", "--method", "dsp", "--model", "stdit-tiny", "--frames", "8", "--spatial", "64", "--gpus", "2",
                 "--sp", "auto", "--hardware", str(tmp_path / "small.toml"), "--warmup", "0", "--iters", "1",
                 "--threads", "1", "--records-file", str(out)]) == 0
    rec = json.loads(out.read_text().splitlines()[-1])
    assert rec["status"] == "ok" and (rec["sp"], rec["dp"]) == (2, 1) and rec["sp_auto"] is True


def test_an_emulated_memory_budget_decides_sp_auto_and_fails_a_run_that_exceeds_it(tmp_path):
    """`mem_budget_mib` replaces the device's memory in the model (sp = auto fits against it) and is
    enforced on the measured peak: a run whose ranks add more is `oom`, with its measurements."""
    from dspbench.facts.build import Outcome
    from dspbench.run.harness import over_budget
    cfg = RunConfig(method="dsp", model="stdit-tiny", frames=64, spatial=256, gpus=4, sp="auto")
    prof = load_profile("emulated-cpu")
    runtime = prof.reserved_bytes / 2**20       # the CPU runtime's share comes off the budget
    assert runtime > 50
    peak = {sp: predict(replace(cfg, sp=sp), prof).mem["peak"] / 2**20 + runtime for sp in (1, 2, 4)}
    budget = int((peak[2] + peak[4]) / 2)
    assert resolve_sp(replace(cfg, mem_budget_mib=budget), "emulated-cpu") == 4
    assert resolve_sp(replace(cfg, mem_budget_mib=int(peak[1]) + 1), "emulated-cpu") == 1
    why = resolve_sp(replace(cfg, mem_budget_mib=int(peak[4]) - 1), "emulated-cpu")
    assert f"usable of the emulated budget of {int(peak[4]) - 1} MiB" in why and "sp=4: predicted OOM" in why
    assert replace(cfg, sp=4, mem_budget_mib=budget).run_id() != replace(cfg, sp=4).run_id()
    ok = Outcome("ok", None, {"mem_run_bytes": 50 * 2**20, "step_time_median_s": 1.0})
    small = replace(cfg, sp=4, mem_budget_mib=40)
    assert over_budget(replace(small, mem_budget_mib=0), ok) is ok and over_budget(replace(small, mem_budget_mib=64), ok) is ok
    oom = over_budget(small, ok)
    assert oom.status == "oom" and oom.metrics is ok.metrics
    assert oom.error == "measured 50.0 MiB added per rank > the emulated budget of 40 MiB"
    with pytest.raises(ValueError, match="mem_budget_mib must be >= 0"):
        replace(small, mem_budget_mib=-1).validate()
    from dspbench.cli import main        # a real run under a 1 MiB budget: measured, then oom
    out = tmp_path / "r.jsonl"
    assert main(["run", "--model", "stdit-tiny", "--frames", "4", "--spatial", "64", "--mem-budget-mib", "1",
                 "--warmup", "0", "--iters", "1", "--threads", "1", "--records-file", str(out)]) != 0
    rec = json.loads(out.read_text().splitlines()[-1])
    assert rec["status"] == "oom" and rec["mem_budget_mib"] == 1 and rec["mem_run_bytes"] > 2**20
    assert rec["error"].startswith("measured ") and rec["step_time_median_s"] > 0


def test_predict_json_has_every_run_record_field(capsys, tmp_path):
    from dspbench.cli import main
    from dspbench.run.harness import run_config
    run = run_config(RunConfig(method="single", model="stdit-tiny", frames=2, spatial=16, warmup=0, iters=1))
    assert run["status"] == "ok"
    rc = main(["predict", "--method", "dsp", "--gpus", "2", "--sp", "2", "--hardware", "h100-ib", "--json",
               "--records-file", str(tmp_path / "p.jsonl")])
    assert rc == 0
    cap = capsys.readouterr()
    rec = json.loads(cap.out)               # stdout is one JSON document, nothing after it
    assert rec["status"] == "predicted" and "<RESULT>" in cap.err and "<RESULT>" not in cap.out
    assert set(run) <= set(rec), set(run) - set(rec)
    for k in ("predicted_comm_time_s", "predicted_compute_time_s", "predicted_peak_mem_bytes",
              "step_time_median_s", "samples_per_s", "tokens_per_s", "comm", "comm_wire_bytes"):
        assert rec[k] is not None, k
    assert rec["step_time_median_s"] == pytest.approx(
        rec["predicted_comm_time_s"] + rec["predicted_compute_time_s"] + rec["predicted_optimizer_time_s"])


def test_predicted_oom_and_unsupported_records():
    prof = load_profile("h800-nvlink")
    oom = predicted_record(RunConfig(method="dsp", frames=1024, spatial=4096, gpus=2, sp=2, **XL), prof)
    assert oom["status"] == "oom" and "predicted OOM" in oom["error"] and oom["step_time_median_s"] is None
    bad = predicted_record(RunConfig(method="ulysses", frames=64, spatial=4096, gpus=32, sp=32, **XL), prof)
    assert bad["status"] == "unsupported" and "heads" in bad["error"]


def test_calibration_table_wins_for_its_group_size_and_interpolates():
    from dspbench.cost.tiers import op_time
    from dspbench.cost.hardware import Link
    link = Link(alpha_s=1e-3, bw_GBps=1.0, ranks=4,
                time_s_op={"all_to_all": [[1000, 0.010], [3000, 0.030], [2000, 0.015]]})
    assert op_time(link, "all_to_all", 2000, 4) == pytest.approx(0.015)           # measured point
    assert op_time(link, "all_to_all", 2500, 4) == pytest.approx(0.0225)          # between points
    assert op_time(link, "all_to_all", 4000, 4) == pytest.approx(0.045)           # last segment's slope
    assert op_time(link, "all_to_all", 1500, 4) == pytest.approx(0.0125)
    alpha_beta = 1e-3 * 7 + 2000 * 7 / 8 / 1e9                                     # other group size
    assert op_time(link, "all_to_all", 2000, 8) == pytest.approx(alpha_beta)
    assert op_time(link, "all_gather", 2000, 4) == pytest.approx(1e-3 * 3 + 2000 * 3 / 4 / 1e9)


@pytest.mark.parametrize("method", ["ring", "ulysses", "usp", "megatron_sp"])
def test_cfg_costs_what_a_batch_of_two_costs(method):
    """Classifier-free guidance is cond + uncond as one batch of 2: the same work, bytes and overlap."""
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.predict import predicted_record
    from dspbench.records.config import RunConfig
    base = dict(method=method, model="full3d-14b", frames=21, spatial=3600, gpus=16, sp=16, mode="sample",
                sample_steps=50, dtype="bf16", backend="nccl", shard="S")
    two = predicted_record(RunConfig(batch=2, **{**base, "sp": 8 if method != "ring" else 16}), load_profile("h100-ib"))
    cfg = predicted_record(RunConfig(batch=1, cfg=True, **{**base, "sp": 8 if method != "ring" else 16}),
                           load_profile("h100-ib"))
    assert cfg["comm_wire_bytes"] == two["comm_wire_bytes"]
    assert cfg["step_time_median_s"] == pytest.approx(two["step_time_median_s"], rel=1e-9)


# both kernel-priced paths: a GPU's rate tables and a calibrated CPU's [kernels]
@pytest.mark.parametrize("profile_name", ["h100-ib", "results/plan-validation/mechanism-r4/profile-200mbit/tiers-profile.toml"])
def test_a_fit_question_prices_memory_and_comm_as_a_full_prediction_without_tracing_kernels(profile_name, monkeypatch):
    prof = load_profile(profile_name)
    cfg = RunConfig(method="ulysses", model="stdit-tiny", frames=16, spatial=256, sp=2, gpus=4, mode="train")
    full = predict(cfg, prof)
    import dspbench.cost.gpu_compute as gpu_compute
    import dspbench.cost.rank_trace as rank_trace
    sp_auto = resolve_sp(replace(cfg, sp="auto"), prof)

    def no_trace(*a, **k):
        raise AssertionError("a fit question traced the rank's kernels")
    monkeypatch.setattr(rank_trace, "rank_kernels", no_trace)
    monkeypatch.setattr(gpu_compute, "rank_kernels", no_trace)
    fit = predict(cfg, prof, memory_only=True)
    assert fit.compute_s == 0.0 and fit.mem == full.mem and fit.fits == full.fits
    assert fit.comm_s == full.comm_s and fit.usable_bytes == full.usable_bytes
    assert resolve_sp(replace(cfg, sp="auto"), prof) == sp_auto        # --sp auto asks fit alone: no trace
    with pytest.raises(AssertionError, match="traced"):                 # and the guard would see one
        predict(cfg, prof)
