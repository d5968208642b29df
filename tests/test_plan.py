"""`dspbench plan`: candidates from every axis that check() accepts, priced by predict's own model,
ranked with intervals and ties; what-if edits; the emitted sweep as `dspbench sweep` reads it;
impossible requests exit 2 and write nothing."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dspbench.cli import main
from dspbench.cost.hardware import load_profile
from dspbench.cost.model import predict
from dspbench.cost.predict import predicted_record
from dspbench.methods import method_meta
from dspbench.plan import whatif
from dspbench.plan.axes import AXES, CORE, Request, candidates
from dspbench.plan.build import plan
from dspbench.records.config import RunConfig

DONE_WHEN = ["plan", "--model", "stdit-xl", "--frames", "128", "--spatial", "4096", "--mode", "train", "--gpus", "16",
             "--hardware", "h100-ib", "--methods", "dsp,ulysses,ring,megatron_sp,usp,single", "--top", "3"]
ROW_FIELDS = ("method", "sp", "dp", "grad_ckpt", "zero", "score", "score_low", "score_high", "samples_per_s",
              "peak_mem_bytes", "usable_bytes", "comm_share", "exposed_comm_s", "tie", "rank", "config")
ROOT = Path(__file__).resolve().parent.parent
TINY = RunConfig(model="stdit-tiny", frames=8, spatial=16, gpus=4, dtype="fp32", backend="gloo")


def run_json(capsys, argv) -> dict:
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def done_when():
    """The issue's request, priced once for the module (the same document `--json` prints)."""
    request = Request(RunConfig(model="stdit-xl", frames=128, spatial=4096, gpus=16, dtype="bf16", backend="nccl"),
                      ("dsp", "ulysses", "ring", "megatron_sp", "usp", "single"))
    return plan(request, load_profile("h100-ib"))


def test_json_ranks_at_least_20_with_every_field(capsys):
    doc = run_json(capsys, DONE_WHEN[:-4] + ["--top", "3"])     # --methods all (the default)
    rows = doc["rows"]
    assert len(rows) >= 20 and doc["source"] == "predicted"
    for r in rows:
        assert set(ROW_FIELDS) <= set(r), set(ROW_FIELDS) - set(r)
        assert r["score_low"] <= r["score"] <= r["score_high"] and r["peak_mem_bytes"] <= r["usable_bytes"]
        assert r["dp"] * r["sp"] == 16 and 0 <= r["comm_share"] <= 1
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    best = rows[0]
    assert [r["tie"] for r in rows] == [i > 0 and r["score_high"] >= best["score_low"] for i, r in enumerate(rows)]
    assert doc["verdict"].startswith(f"{best['method']} sp {best['sp']} dp {best['dp']}")
    names = lambda r: [r["method"]] + [t["method"] for t in r["twins"]]   # a twin's best is its row
    assert set(doc["best_per_method"]) == {m for r in rows for m in names(r)}
    for m, rank in doc["best_per_method"].items():
        assert m in names(rows[rank - 1]) and all(m not in names(r) for r in rows[:rank - 1])


def test_rows_are_predicts_own_numbers(done_when):
    """No second cost model: each row is `dspbench predict` of its configuration."""
    prof = load_profile("h100-ib")
    for r in done_when["rows"][:3] + done_when["rows"][-2:]:
        cfg = RunConfig(**{**r["config"], "launcher": "env"})
        rec = predicted_record(cfg, prof)
        assert rec["status"] == "predicted"
        assert r["samples_per_s"] == pytest.approx(rec["samples_per_s"], rel=1e-12)
        assert r["peak_mem_bytes"] == rec["predicted_peak_mem_bytes"]
        assert r["exposed_comm_s"] == pytest.approx(rec["predicted_comm_time_s"], rel=1e-12)


def test_pruned_say_why(done_when):
    prof = load_profile("h100-ib")
    kinds = {p["status"] for p in done_when["pruned"]}
    assert kinds == {"oom"}      # every method's check() accepts some degree at this shape
    for p in done_when["pruned"][:20]:
        assert p["peak_mem_bytes"] > p["usable_bytes"] and "predicted OOM" in p["reason"]
        assert not predict(RunConfig(**p["config"]), prof).fits
    assert "single" in done_when["pruned_reasons"]   # no SP (DP only) does not fit 0.5M tokens


def test_a2a_conventions_are_priced_apart_and_merge_only_where_equal(done_when):
    """The reference all-to-all pays its extra copies (bench/cost/comm.py): a method with all-to-alls
    gets a row per convention, one without (ring) one row listing both."""
    prof = load_profile("h100-ib")
    by = {}
    for r in done_when["rows"]:
        by.setdefault(r["method"], set()).update(r["a2a"])
    dsp = next(r for r in done_when["rows"] if r["method"] == "dsp")
    cfg = RunConfig(**dsp["config"])
    assert predict(replace(cfg, a2a="list"), prof).step_s > predict(replace(cfg, a2a="single"), prof).step_s
    assert any(r["a2a"] == ["single", "list"] for r in done_when["rows"] if r["method"] == "ring")
    assert by["dsp"] == {"single", "list"} and [a.field for a in AXES if not a.priced_apart] == []


def test_candidates_are_the_axes_product():
    req = Request(TINY, ("dsp", "ulysses", "single"))
    got = candidates(req)
    # dsp, ulysses at sp 2, 4 and single at sp 1; x ckpt 2 x zero 3 x shard 2 x a2a 2 x cfg 1
    assert len(got) == (2 * 2 + 1) * 2 * 3 * 2 * 2
    assert all((c.method == "single") == (c.sp == 1) for c in got)
    assert len(candidates(replace(req, lean=True))) == len(got)     # every axis is priced apart now
    sample = candidates(Request(replace(TINY, mode="sample"), ("dsp",)))
    assert {(c.grad_ckpt, c.zero) for c in sample} == {(False, 0)}
    assert CORE == ("method", "sp", "grad_ckpt", "zero")


def test_what_if_bandwidth_drop_changes_the_ranking(done_when, capsys):
    doc = run_json(capsys, DONE_WHEN + ["--what-if", "link.inter=1GB/s"])
    order = lambda d: [tuple(r[k] for k in CORE) for r in d["rows"]]
    assert order(doc) != order(done_when)
    assert doc["what_if"]["flipped"] and doc["what_if"]["top_as_profiled"] != doc["what_if"]["top"]
    by = lambda d: {tuple(r[k] for k in CORE): r for r in d["rows"]}
    before, after = by(done_when), by(doc)
    assert all(after[k]["exposed_comm_s"] >= before[k]["exposed_comm_s"] for k in before if k in after)


def test_what_if_grid_prints_the_crossover(capsys):
    argv = ["plan", "--model", "stdit-tiny", "--frames", "8", "--spatial", "16", "--gpus", "4", "--hardware", "h100-ib",
            "--methods", "dsp,megatron_sp", "--what-if-grid", "link.intra=0.01,1,50,450"]
    doc = run_json(capsys, argv)
    grid = [0.01, 1, 50, 450]
    assert [c["what_if"] for c in doc["crossover"]] == [{"link.intra.bw_GBps": bw} for bw in grid]
    # at SP 2 x DP 2 on a tiny grid the gradient all-reduce dominates a crawling link, and Megatron-SP's
    # tensor-parallel weights leave it fewer bytes to move; once the link moves a GB/s the step is
    # host-bound and Megatron-SP's 33 collective launches a step (DSP issues 9) cost more than its
    # bytes save: the winner changes once, between 0.01 and 1 GB/s
    assert [c["winner"] for c in doc["crossover"]] == ["megatron_sp", "dsp", "dsp", "dsp"]
    for c in doc["crossover"]:
        loser = "dsp" if c["winner"] == "megatron_sp" else "megatron_sp"
        assert c["best"][c["winner"]] == c["score"] > c["best"][loser]
    assert main(argv) == 0 and "crossover (--what-if-grid)" in capsys.readouterr().out


def test_what_if_parsing():
    assert whatif.parse("link.inter=400Gb/s") == ("link.inter.bw_GBps", 50.0)
    assert whatif.parse("link.inter=200Mbit/s") == ("link.inter.bw_GBps", pytest.approx(0.025))
    assert whatif.parse("compute.efficiency=0.5") == ("compute.efficiency", 0.5)
    prof = whatif.apply(load_profile("h100-ib"), [whatif.parse("link.inter=25GB/s")])
    assert prof.inter.bw_GBps == 25 and prof.intra.bw_GBps == 450
    # a calibrated level's measured tables would win over a new bandwidth: the edit drops them
    tiers = load_profile(str(ROOT / "results" / "tiers" / "tiers-profile.toml"))
    assert tiers.inter.time_s_op and tiers.inter.busbw_GBps
    edited = whatif.apply(tiers, [whatif.parse("link.inter=1Gbit/s")])
    assert not edited.inter.time_s_op and not edited.inter.busbw_GBps and edited.inter.bw_GBps == 0.125
    assert tiers.span.time_s_op and not edited.span.time_s_op     # the node-spanning table crossed that link
    assert edited.intra == tiers.intra and edited.gpus_per_node == tiers.gpus_per_node
    for bad in ("link.inter=fast", "link.inter=5furlongs/s", "nope=1", "device.memory_gb"):
        with pytest.raises(ValueError, match="--what-if"):
            whatif.parse(bad)


def test_emitted_sweep_is_what_sweep_accepts(tmp_path, capsys):
    from dspbench.slurm.plan import expand
    from dspbench.slurm.spec import load_sweep
    out = tmp_path / "plan.toml"
    doc = run_json(capsys, DONE_WHEN + ["--emit-sweep", str(out), "--cluster", "gpu8"])
    cfgs = expand(load_sweep(str(out)))
    chosen = sorted(set(range(1, 4)) | set(doc["best_per_method"].values()))
    want = {RunConfig(**doc["rows"][i - 1]["config"]).run_id() for i in chosen}
    assert {c.run_id() for c in cfgs} == want
    assert main(["sweep", str(out), "--dry-run"]) == 0
    assert f"{len(want)} points" in capsys.readouterr().out


@pytest.mark.parametrize("argv, why", [
    (["--model", "stdit-nope"], "unknown model"),
    (["--gpus", "12"], "not a whole number of h100-ib's nodes of 8"),
    (["--frames", "4096", "--methods", "dsp,ulysses"], "nothing fits"),
    (["--methods", "dsp,nope"], "unknown method"),
    (["--what-if", "link.warp=9"], "--what-if"),
])
def test_impossible_requests_exit_2_and_write_nothing(tmp_path, capsys, argv, why):
    sweep, report = tmp_path / "s.toml", tmp_path / "rep"
    base = dict(zip(DONE_WHEN[1::2], DONE_WHEN[2::2]))
    base.update(dict(zip(argv[0::2], argv[1::2])))
    full = ["plan"] + [x for kv in base.items() for x in kv] + ["--emit-sweep", str(sweep), "--report", str(report)]
    assert main(full) == 2
    err = capsys.readouterr().err
    assert why in err
    assert not sweep.exists() and not report.exists() and not list(tmp_path.iterdir())
    if why == "nothing fits":   # each method with its reasons
        assert "  dsp: predicted OOM" in err and "  ulysses: predicted OOM" in err


def test_sample_mode_ranks_by_seconds_per_video(capsys):
    doc = run_json(capsys, ["plan", "--model", "stdit-tiny", "--frames", "8", "--spatial", "16", "--gpus", "4",
                            "--mode", "sample", "--cfg", "--hardware", "h100-ib", "--methods", "dsp,ulysses,single"])
    assert doc["metric"] == "seconds per video" and doc["request"]["cfg"] is True
    steps = [r["step_time_s"] for r in doc["rows"]]
    assert steps == sorted(steps) and all(r["config"]["cfg"] for r in doc["rows"])


def test_report_renders_table_figures_and_banner(tmp_path, capsys):
    out = tmp_path / "rep"
    argv = ["plan", "--model", "stdit-tiny", "--frames", "8", "--spatial", "16", "--gpus", "4", "--hardware", "h100-ib",
            "--methods", "dsp,ulysses,single", "--report", str(out)]
    assert main(argv) == 0
    md = (out / "index.md").read_text()
    assert "**Every number here is predicted**" in md and "## Ranked" in md and "## Best per method" in md
    assert "![frontier](frontier.png)" in md and "![crossover](crossover.png)" in md
    for name in ("frontier", "crossover"):
        assert (out / f"{name}.png").stat().st_size > 1000 and (out / f"{name}.svg").is_file()
    doc = json.loads((out / "plan.json").read_text())
    assert {p["gpus"] for p in doc["explore"]["frontier"]} == {1, 2, 4, 8, 16}
    assert len(doc["explore"]["crossover"]) == 16 and all(c["winner"] for c in doc["explore"]["crossover"])
    # each method's look travels in the plan (reports may not import methods) and draws its lines
    assert doc["method_meta"] == {m: method_meta(m) for m in ("dsp", "ulysses", "single")}
    assert doc["method_meta"]["ulysses"]["colour"].lower() in (out / "frontier.svg").read_text()
    (out / "index.md").unlink()
    assert main(["report", str(out)]) == 0 and (out / "index.md").read_text() == md


def test_check_matches_records_by_run_id_and_ranks_them(done_when):
    from dspbench.plan.check import compare, kendall_tau, kendall_tau_a
    assert kendall_tau([3, 2, 1], [30, 20, 10]) == 1 and kendall_tau([3, 2, 1], [10, 20, 30]) == -1
    assert kendall_tau([3, 2, 1], [20, 30, 10]) == pytest.approx(1 / 3)
    # a tie the plan declares (two rows priced the same) is left out, not counted as a miss:
    # 5 concordant pairs of 5 the prediction orders, 6 the measurement orders -> 5 / sqrt(30) (scipy's tau-b)
    assert kendall_tau([3, 2, 2, 1], [40, 30, 20, 10]) == pytest.approx(5 / 30 ** 0.5)
    assert kendall_tau_a([3, 2, 2, 1], [40, 30, 20, 10]) == pytest.approx(5 / 6)
    assert kendall_tau([3, 2, 2, 1], [10, 30, 20, 40]) == pytest.approx(-5 / 30 ** 0.5)
    assert kendall_tau([1, 1], [2, 3]) is None
    rows = []
    for r in done_when["rows"]:            # three rows with distinct predictions (a tie counts as neither)
        if len(rows) < 3 and all(r["score"] < x["score"] for x in rows):
            rows.append(r)
    # stand-in measurements (a unit test of the matching): rank 2 measured fastest, 10% ahead of rank 1
    recs = [{"run_id": RunConfig(**r["config"]).run_id(), "status": "ok", "source": "measured",
             "samples_per_s": speed} for r, speed in zip(rows, (1.0, 1.1, 0.5))]
    recs.append({**recs[0], "status": "error"})
    got = compare(done_when, recs)
    assert got["measured"] == 3 and got["gap"] == pytest.approx(0.1)
    assert got["top"].startswith(rows[0]["method"]) and got["fastest"].startswith(rows[1]["method"])
    assert got["kendall_tau"] == pytest.approx(1 / 3)


def test_emitted_sweep_repeats_and_check_takes_every_repeat(tmp_path, capsys):
    """`--repeats N` measures each configuration N times (one run_id per repeat); check matches all of
    them to the plan's row (ranked at repeat 0) and scores the median."""
    from dspbench.plan.check import compare
    from dspbench.slurm.plan import expand
    from dspbench.slurm.spec import load_sweep
    out = tmp_path / "plan.toml"
    argv = ["plan", "--model", "stdit-tiny", "--frames", "8", "--spatial", "16", "--gpus", "4", "--hardware", "h100-ib",
            "--methods", "dsp,ulysses", "--top", "1", "--emit-sweep", str(out), "--repeats", "3"]
    doc = run_json(capsys, argv)
    assert "--repeats 3" in doc["command"]
    cfgs = expand(load_sweep(str(out)))
    chosen = sorted({1} | set(doc["best_per_method"].values()))
    assert len(cfgs) == 3 * len(chosen) and {c.repeat for c in cfgs} == {0, 1, 2}
    assert {replace(c, repeat=0, launcher="local").run_id() for c in cfgs} == \
        {RunConfig(**doc["rows"][i - 1]["config"]).run_id() for i in chosen}
    speeds = {0: (1.0, 3.0, 2.0), 1: (5.0, 4.0, 6.0)}       # per chosen row, per repeat
    recs = [{**c.to_dict(), "run_id": c.run_id(), "status": "ok", "source": "measured",
             "samples_per_s": speeds[chosen.index(next(i for i in chosen if RunConfig(
                 **doc["rows"][i - 1]["config"]).run_id() == replace(c, repeat=0).run_id()))][c.repeat],
             "step_time_median_s": 0.1, "comm_time_s": {"all_to_all.fwd": 0.01}}
            for c in cfgs]
    got = compare(doc, recs)
    assert [(x["repeats"], x["measured"], x["measured_min"], x["measured_max"]) for x in got["rows"]] == \
        [(3, 2.0, 1.0, 3.0), (3, 5.0, 4.0, 6.0)]
    assert got["rows"][0]["measured_comm_s"] == pytest.approx(0.01) and got["gap"] == pytest.approx(1.5)
    with pytest.raises(SystemExit) as refused:     # argparse's refusal of a count below 1 (records/argtypes.py)
        main(["plan"] + argv[1:-2] + ["--repeats", "0"])
    assert refused.value.code == 2


def test_summary_recomputes_the_committed_validation_from_its_records(tmp_path, capsys):
    """The README's validation table is generated from the records (plan.summary), so a change to the
    check's statistics shows there; the bar is judged over every shape, not per shape."""
    from dspbench.plan.summary import main as summary, shape_row, verdict
    root = Path(__file__).resolve().parents[1] / "results" / "plan-validation"
    quiet, missed = root / "1gbit-stdit-tiny-T4-S256", root / "1gbit-stdit-tiny-T8-S128"
    row = shape_row(quiet)
    assert row["top"] == row["fastest"] and row["gap"] == 0 and row["measured"] == 14
    assert row["tau"] == pytest.approx(0.88, abs=0.005) and row["tau_a"] == pytest.approx(0.86, abs=0.005)
    assert verdict([row]) == {"shapes": 1, "within": 1, "mean_tau": row["tau"], "mean_tau_a": row["tau_a"],
                              "shapes_at_tau_bar": 1,
                              "mean_repeat_tau": row["repeat_tau"], "mean_single_repeat_tau": row["single_repeat_tau"],
                              "mean_ceiling_tau": row["ceiling_tau"], "pairs_apart": [61, 61]}
    # the noise ceiling: this quiet sweep's repeats allow a perfect predictor about what plan got
    assert 0.8 < row["ceiling_tau"] < 1 and 0 < row["noise_sd"] < 0.1 and row["repeats_for_bar"] == 3
    assert shape_row(missed)["pairs_apart"] == [48, 62]     # pairs predicted >= 10% apart, in the measured order
    assert row["repeat_tau"] == pytest.approx(0.79, abs=0.005)   # this sweep's repeats against each other
    assert summary([str(quiet), str(missed)]) == 0
    out = capsys.readouterr().out
    assert "+52.0%" in out and "within 5%: 1 of 2" in out and "NOT met" in out
    # the stricter bar, per shape: the missed shape's tau-b is under 0.8
    assert shape_row(missed)["tau"] < 0.8 and "tau-b >= 0.8 on every shape: 1 of 2 (NOT met)" in out
    assert "ceiling tau-b | repeats for a ceiling >= 0.8" in out and "noise ceiling" in out
    with pytest.raises(SystemExit) as e:
        summary([str(quiet), str(tmp_path)])
    assert e.value.code == 2 and str(tmp_path) in capsys.readouterr().err


def test_emitted_sweep_takes_iters_and_warmup_and_check_matches_them(tmp_path, capsys):
    """--iters/--warmup set how the emitted sweep measures (more timed steps, less noise); the plan's
    rows carry them, so plan.check still matches the records by run_id."""
    from dspbench.slurm.plan import expand
    from dspbench.slurm.spec import load_sweep
    out = tmp_path / "plan.toml"
    doc = run_json(capsys, ["plan", "--model", "stdit-tiny", "--frames", "8", "--spatial", "16", "--gpus", "4",
                            "--hardware", "h100-ib", "--methods", "dsp", "--top", "1", "--emit-sweep", str(out),
                            "--iters", "20", "--warmup", "3"])
    assert doc["command"].endswith("--warmup 3 --iters 20")
    cfgs = expand(load_sweep(str(out)))
    assert {(c.iters, c.warmup) for c in cfgs} == {(20, 3)}
    assert {replace(c, launcher="local").run_id() for c in cfgs} <= {RunConfig(**r["config"]).run_id() for r in doc["rows"]}


def test_check_sets_the_prediction_beside_the_measurements_own_reproducibility():
    """tau of the prediction against one repeat at a time, and of one repeat against another: a
    measurement that reorders itself bounds how well any prediction can agree with it."""
    from dspbench.plan.check import repeat_tau, single_repeat_tau
    rows = [{"predicted": p, "by_repeat": dict(enumerate(ms))}
            for p, ms in ((4, (40, 40, 10)), (3, (30, 20, 20)), (2, (20, 30, 30)), (1, (10, 10, 40)))]
    # repeats 0 and 1 swap one pair (tau 4/6), 0 and 2 reverse everything (-1), 1 and 2 nearly (-4/6)
    assert repeat_tau(rows) == pytest.approx((4 / 6 - 1 - 4 / 6) / 3)
    assert single_repeat_tau(rows) == pytest.approx((1 + 4 / 6 - 1) / 3)
    assert repeat_tau([{"predicted": 1, "by_repeat": {0: 1}}, {"predicted": 2, "by_repeat": {0: 2}}]) is None


def test_plan_says_which_rows_carry_each_methods_own_term():
    """A profile calibrated with `--methods` prices rows at its SP degrees with each method's term:
    the plan names those degrees; a datasheet profile says it has none."""
    from dataclasses import replace as dc_replace
    from dspbench.cost.hardware import load_profile
    from dspbench.plan.build import method_terms
    datasheet = load_profile("h100-ib")
    assert method_terms(datasheet, "train").startswith("none in this profile")
    calibrated = dc_replace(datasheet, method_overhead_s={4: {"dsp": 0.01}, 2: {"ring": -0.01}})
    assert method_terms(calibrated, "train").startswith("calibrated at SP 2, 4")
    assert method_terms(calibrated, "sample").startswith("none: each method's own term is calibrated on training")
