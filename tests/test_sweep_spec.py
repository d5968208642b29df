"""Sweep specs without running anything: strict validation, expansion, unsupported points, the plan
and its dry-run table, resume decisions, the requeue bookkeeping of a job. Milliseconds to seconds."""
import pickle
from dataclasses import replace
import re

import pytest
from helpers import every_field_set, tiny_sweep, write_spec

from dspbench.cli import main
from dspbench.facts.args import add_run_args, config_from_args
from dspbench.records.config import RunConfig
from dspbench.slurm.job import SweepJob, Task, rank_command
from dspbench.slurm.plan import expand, make_plan
from dspbench.slurm.spec import SpecError, load_sweep

TINY = tiny_sweep()


# ---------------------------------------------------------------- strict validation
@pytest.mark.parametrize("extra, where, key", [
    ("[[grid]]\nframez = [4]\n", "[[grid]] #1", "'framez'"),
    ("[[grid]]\nmethod = ['dsp']\nzip = { gpus = [2], spz = [2] }\n", "[[grid]] #1 zip", "'spz'"),
    ("[cluster]\npartitoin = 'x'\n", "[cluster]", "'partitoin'"),
    ("[bogus]\nx = 1\n", "", "'bogus'"),
    ("[[grid]]\nlauncher = ['env']\n", "[[grid]] #1", "'launcher'"),     # the executor decides
])
def test_unknown_keys_are_errors_naming_file_and_key(tmp_path, extra, where, key):
    path = write_spec(tmp_path, TINY + extra)
    with pytest.raises(SpecError, match="unknown") as e:
        load_sweep(str(path))
    assert str(path) in str(e.value) and where in str(e.value) and key in str(e.value)


@pytest.mark.parametrize("extra, key", [
    ("[[grid]]\ngpus = [2, 'four']\n", "gpus must be int, got str 'four'"),
    ("[[grid]]\ngpus = 2\n", "gpus must be a non-empty list"),
    ("[[grid]]\ncheck = [1]\n", "check must be bool, got int"),
    ("[[grid]]\nframes = [true]\n", "frames must be int, got bool"),
    ("[cluster]\ntime_min = '60'\n", "time_min must be int, got str"),
    ("[cluster]\nsetup = 'module load x'\n", "setup must be list[str]"),
])
def test_wrong_types_are_errors_naming_file_and_key(tmp_path, extra, key):
    path = write_spec(tmp_path, TINY + extra)
    with pytest.raises(SpecError, match=re.escape(key)) as e:
        load_sweep(str(path))
    assert str(path) in str(e.value)


def test_wrong_type_in_fixed_and_sweep_tables(tmp_path):
    path = write_spec(tmp_path, TINY.replace("frames = 4", "frames = '4'"))
    with pytest.raises(SpecError, match=r"\[fixed\]: frames must be int, got str '4'"):
        load_sweep(str(path))
    path = write_spec(tmp_path, TINY.replace('cluster = "local"', 'cluster = "local"\nrepeats = "3"'))
    with pytest.raises(SpecError, match=r"\[sweep\]: repeats must be int"):
        load_sweep(str(path))


def test_cluster_profile_file_is_strict_too(tmp_path):
    prof = write_spec(tmp_path, "partition = 'gpu'\ngpus_per_nod = 8\n", "mycluster.toml")
    path = write_spec(tmp_path, TINY.replace('cluster = "local"', 'cluster = "mycluster.toml"'))
    with pytest.raises(SpecError, match="unknown key 'gpus_per_nod'") as e:
        load_sweep(str(path))
    assert str(prof) in str(e.value)


@pytest.mark.parametrize("grid, message", [
    ("zip = { gpus = [2, 4], sp = [2] }", "equal lengths"),
    ("frames = [8]", "frames is set both in [fixed] and in the grid"),
    ("mode = ['training']", "point (mode=training): mode must be one of"),
    ("seed = [0]\ncheck = [true, false]", "share run_id"),      # check is not part of the run_id
    ("sp = ['auto']", 'needs [sweep] hardware'),
])
def test_inconsistent_grids_are_errors(tmp_path, grid, message):
    path = write_spec(tmp_path, TINY + "[[grid]]\n" + grid + "\n")
    with pytest.raises(SpecError) as e:
        expand(load_sweep(str(path)))
    assert message in str(e.value) and str(path) in str(e.value)


def test_invalid_toml_names_the_file(tmp_path):
    path = write_spec(tmp_path, TINY + "[[grid]\n")
    with pytest.raises(SpecError, match="invalid TOML") as e:
        load_sweep(str(path))
    assert str(path) in str(e.value)


def test_unknown_sweep_name_lists_the_shipped_ones():
    with pytest.raises(FileNotFoundError, match="cpu_smoke.*paper_v1_fig3"):
        load_sweep("no_such_sweep")


# ---------------------------------------------------------------- expansion
@pytest.mark.parametrize("name, points", [
    ("cpu_smoke", 20),             # single on 1 rank + 8 SP methods x SP 2, 4 + dsp infer x SP 2, 4 + torch_cp infer SP 2
    ("paper_v1_fig3", 108),        # (6 methods + 3 with a2a = list) x SP 2/4/8 x 4 (T, S)
    ("paper_icml_scaling", 48),    # 6 methods x (4 weak + 5 strong), the 64-GPU point shared
    ("paper_inference", 21),       # (single + 6 methods on 8 GPUs) x 3 repeats
    ("plugin_vs_dsp", 18),         # dsp, dsp_overlap, ulysses x SP 2, 4 x 3 repeats
    ("full3d_smoke", 6),           # 6 methods on full3d-joint-tiny (DSP recorded not applicable)
    ("cfg_parallel_smoke", 7),     # 5 methods x CFG parallel at SP 2 + (dsp, ulysses) CFG batch at SP 4
    ("cfg_parallel_cpu", 12),      # (dsp, ulysses) x (CFG parallel at SP 2, CFG batch at SP 4) x 3 repeats
    ("full3d_wan", 240),           # 4 models x 480p/720p x 9 methods x 3 repeats + 2 x 4 methods T-sharded (padded) x 3
    ("buckets_smoke", 39),         # 3 buckets x (11 methods at SP 2 + single, dsp at SP 1)
    ("multinode_smoke", 12),       # 6 methods x SP 2 (inside a node), 4 (across both) on 2 x 2
    ("multinode_2x4", 18),         # 6 methods x SP 2, 4 (inside a node), 8 (across both) on 2 x 4
])
def test_shipped_sweeps_expand(name, points):
    cfgs = expand(load_sweep(name))
    assert len(cfgs) == points == len({c.run_id() for c in cfgs})


def test_every_point_has_the_run_id_of_its_config_and_repeats_differ(tmp_path):
    path = write_spec(tmp_path, TINY.replace('cluster = "local"', 'cluster = "local"\nrepeats = 2')
                     + "[[grid]]\nmethod = ['dsp', 'ring']\nzip = { gpus = [2, 4], sp = [2, 4] }\n")
    cfgs = expand(load_sweep(str(path)))
    assert len(cfgs) == 2 * 2 * 2
    # repeat-major: every configuration once, then every one again (a busy minute spoils one repeat
    # of several configurations, not all repeats of one)
    assert [c.repeat for c in cfgs] == [0, 0, 0, 0, 1, 1, 1, 1]
    # repeat 1 is repeat 0's order rotated by half (2 of 4): each configuration at another place
    assert [replace(c, repeat=0).run_id() for c in cfgs[4:]] == [c.run_id() for c in cfgs[2:4] + cfgs[:2]]
    first = RunConfig(method="dsp", model="stdit-tiny", frames=4, spatial=16, gpus=2, sp=2, warmup=0, iters=1)
    assert cfgs[0].run_id() == first.run_id() != cfgs[4].run_id()
    assert expand(load_sweep(str(path))) == cfgs          # stable


def test_each_repeat_runs_the_configurations_at_other_places_in_its_job(tmp_path):
    """A plan's emitted sweep lists its rows in predicted order, one job per repeat: a fixed order
    would confound a job's cold start or drift with the predicted rank. Rotated, every configuration
    leads its job in at most one repeat and takes a different place in each."""
    grids = "".join(f"[[grid]]\nmethod = ['dsp']\nseed = [{s}]\n" for s in range(6))
    spec = load_sweep(str(write_spec(tmp_path, TINY.replace('cluster = "local"', 'cluster = "local"\nrepeats = 4')
                                     .replace("[sweep]", "[sweep]\nconfigs_per_job = 6") + grids)))
    plan = make_plan(spec, "slurm", {}, set())
    assert [len(j.configs) for j in plan.jobs] == [6] * 4
    orders = [[c.seed for c in job.configs] for job in plan.jobs]
    assert [o[0] for o in orders] == [0, 1, 3, 4]                         # offsets r * 6 // 4
    assert all(sorted(o) == list(range(6)) for o in orders)
    places = {s: {o.index(s) for o in orders} for s in range(6)}
    assert all(len(p) == 4 for p in places.values())                      # never the same place twice
    assert expand(spec) == expand(spec)                                   # resumes keep one order


def test_paper_sweeps_hold_the_paper_settings():
    fig3 = expand(load_sweep("paper_v1_fig3"))
    assert {(c.frames, c.spatial) for c in fig3} == {(64, 4096), (128, 4096), (256, 4096), (128, 9216)}
    assert {(c.gpus, c.sp) for c in fig3} == {(2, 2), (4, 4), (8, 8)}
    assert {(c.model, c.dtype, c.backend, c.mode, c.zero) for c in fig3} == {("stdit-xl", "bf16", "nccl", "train", 2)}
    assert {c.method for c in fig3 if c.a2a == "list"} == {"dsp", "ulysses", "ulysses_all"}
    icml = expand(load_sweep("paper_icml_scaling"))
    assert {c.frames * c.spatial for c in icml} == {2 ** 19, 2 ** 20, 2 ** 21, 2 ** 22}   # 0.5M-4M tokens
    # the paper's protocol: each method at its minimum SP that fits (resolved by the plan)
    assert {c.gpus for c in icml} == {8, 16, 32, 64, 128} and {c.zero for c in icml} == {2}
    assert load_sweep("paper_icml_scaling").fixed["sp"] == "auto"
    assert any(c.sp < c.gpus for c in icml)                  # the rest of the GPUs do data parallelism
    inference = expand(load_sweep("paper_inference"))
    assert {(c.frames, c.spatial, c.mode, c.cfg) for c in inference} == {(80, 1024, "sample", True)}
    assert {c.gpus for c in inference} == {1, 8}


# ---------------------------------------------------------------- plan
def test_points_a_method_cannot_run_become_unsupported_not_jobs(tmp_path):
    path = write_spec(tmp_path, TINY + "[[grid]]\nmethod = ['ulysses', 'ring']\nzip = { gpus = [3], sp = [3] }\n")
    plan = make_plan(load_sweep(str(path)), "slurm", {}, set())
    assert [c.method for c in plan.todo] == ["ring"]    # T=4 does not divide by 3: ring pads it (--pad auto)
    assert [c.method for c, _ in plan.unsupported] == ["ulysses"]
    assert "heads=4 is not divisible by the SP degree 3" in plan.unsupported[0][1]
    never = write_spec(tmp_path, TINY + "pad = 'never'\n[[grid]]\nmethod = ['ulysses', 'ring']\n"
                                 "zip = { gpus = [3], sp = [3] }\n", "never.toml")
    plan = make_plan(load_sweep(str(never)), "slurm", {}, set())
    assert [c.method for c, _ in plan.unsupported] == ["ulysses", "ring"] and plan.jobs == []


def test_nccl_points_are_unsupported_locally_without_gpus():
    plan = make_plan(load_sweep("paper_inference"), "local", {}, set())
    if plan.todo:
        pytest.skip("this machine has CUDA devices")
    assert len(plan.unsupported) == 21 and "CUDA devices" in plan.unsupported[0][1]


def test_resume_skips_ok_unsupported_failed_and_queued_and_retry_reruns_failures(tmp_path):
    path = write_spec(tmp_path, TINY + "[[grid]]\nmethod = ['dsp']\nseed = [0, 1, 2, 3, 4]\n")
    spec = load_sweep(str(path))
    ids = [c.run_id() for c in expand(spec)]
    states = {ids[0]: "ok", ids[1]: "unsupported", ids[2]: "timeout"}
    plan = make_plan(spec, "local", states, in_flight={ids[3]})
    assert [c.run_id() for c in plan.todo] == [ids[4]]
    assert plan.skipped["already failed (timeout; --retry-failed reruns)"] == 1
    retry = make_plan(spec, "local", states, in_flight={ids[3]}, retry_failed=True)
    assert [c.run_id() for c in retry.todo] == [ids[2], ids[4]]


def test_jobs_pack_configs_of_one_shape_and_multi_node_shapes(tmp_path):
    tiny = TINY.replace("frames = 4", "frames = 32").replace("spatial = 16", "spatial = 32")
    path = write_spec(tmp_path, tiny.replace('cluster = "local"', 'cluster = "gpu8"\nconfigs_per_job = 2')
                     + "[[grid]]\nmethod = ['dsp']\nseed = [0, 1, 2]\nzip = { gpus = [4, 32], sp = [4, 32] }\n"
                     + "[cluster]\nsignal_delay_s = 60\n")
    plan = make_plan(load_sweep(str(path)), "slurm", {}, set())
    shapes = [(j.shape.nodes, j.shape.tasks_per_node, len(j.configs)) for j in plan.jobs]
    assert shapes == [(1, 4, 2), (1, 4, 1), (4, 8, 2), (4, 8, 1)]


def test_slurm_plans_reject_what_a_job_cannot_hold(tmp_path):
    base = TINY.replace('cluster = "local"', 'cluster = "gpu8"').replace("frames = 4", "frames = 12")
    base += "[[grid]]\nmethod = ['ring']\n"
    with pytest.raises(SpecError, match="gpus=12 does not fill whole nodes of gpus_per_node=8"):
        make_plan(load_sweep(str(write_spec(tmp_path, base + "gpus = [12]\nsp = [12]\n"))), "slurm", {}, set())
    long = base.replace("timeout_s = 60", "timeout_s = 7200") + "gpus = [2]\nsp = [2]\n"
    with pytest.raises(SpecError, match="timeout_s=7200 .* does not fit in a job"):
        make_plan(load_sweep(str(write_spec(tmp_path, long))), "slurm", {}, set())


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    results = tmp_path / "results"
    assert main(["sweep", "paper_icml_scaling", "--executor", "slurm", "--dry-run", "--no-fit-check",
                 "--results", str(results)]) == 0
    out = capsys.readouterr().out
    # sp = "auto": every point resolves to its minimum SP on h100-ib, but for Megatron-SP at the
    # longest sequence on 128 GPUs: its gathered inputs do not fit at SP 16, and heads=16 caps its SP
    # (megatron_lm, which keeps shards and gathers again in the backward, fits there)
    assert "48 points" in out and "to run: 47, unsupported (recorded, not run): 1" in out
    assert "1 x megatron_sp: no SP degree fits megatron_sp on 128 x h100-ib" in out
    assert "| 32 | 4 x 8 | 12 | 3 | 192.0 |" in out           # 4 nodes x 8 GPUs x 2 h x 3 jobs
    assert "| total | 84 nodes | 47 | 13 | 1344.0 |" in out
    assert not results.exists()


def test_cli_errors_are_reported_with_exit_code_2(tmp_path, capsys):
    path = write_spec(tmp_path, TINY + "[[grid]]\nbogus = [1]\n")
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert f"dspbench sweep: error: {path}: [[grid]] #1: unknown key 'bogus'" in capsys.readouterr().err


# ---------------------------------------------------------------- job bookkeeping
def test_rank_command_maps_every_field_onto_dspbench_run():
    import argparse
    cfg = every_field_set()
    argv = rank_command(cfg, "r.jsonl")
    p = argparse.ArgumentParser()
    add_run_args(p)
    assert config_from_args(p.parse_args(argv[4:])) == cfg


def test_checkpoint_requeues_itself_with_the_configs_not_yet_recorded(tmp_path):
    from dspbench.facts.build import build_record
    from dspbench.facts.build import Outcome
    from dspbench.records.io import append_record
    cfgs = [RunConfig(method="single", seed=s, launcher="env") for s in range(3)]
    job = SweepJob(str(tmp_path), [c.to_dict() for c in cfgs], signal_delay_s=60)
    job._task = Task("7", 0, "127.0.0.1", tmp_path / "records" / "7.jsonl", tmp_path / "logs", False)
    append_record(job._task.records, build_record(cfgs[1], Outcome("error", "boom")))
    delayed = job.checkpoint()
    again = pickle.loads(pickle.dumps(delayed.function))     # what submitit writes for the requeue
    assert isinstance(again, SweepJob) and again.results == job.results and again.signal_delay_s == 60
    assert [RunConfig.from_dict(d).seed for d in again.configs] == [0, 2]


# ---------------------------------------------------------------- sp = "auto" (the paper's protocol)
AUTO = """
[sweep]
name = "auto"
cluster = "local"
hardware = "h100-ib"
[fixed]
model = "stdit-xl"
spatial = 4096
mode = "train"
dtype = "bf16"
backend = "nccl"
sp = "auto"
[[grid]]
method = ["dsp", "megatron_sp"]
zip = { gpus = [8, 8], frames = [16, 1024] }
"""


def test_sp_auto_resolves_per_point_with_the_sweeps_hardware(tmp_path):
    from dspbench.cost.autosp import resolve_sp
    from dspbench.slurm.plan import make_plan
    spec = load_sweep(str(write_spec(tmp_path, AUTO)))
    cfgs = expand(spec)
    assert len(cfgs) == 4 and all(isinstance(c.sp, (int, str)) for c in cfgs)
    for c in cfgs:
        want = resolve_sp(replace(c, sp="auto"), "h100-ib")
        assert c.sp == (want if isinstance(want, int) else "auto")
    short = [c for c in cfgs if c.frames == 16]
    assert all(isinstance(c.sp, int) and c.sp >= 1 for c in short)          # 64k tokens fit somewhere
    plan = make_plan(spec, "local", {}, set())
    # nothing fits at 4M tokens on 8 GPUs: unsupported with the cost model's reasons, not an error
    long = [(c, r) for c, r in plan.unsupported if c.frames == 1024]
    assert len(long) == 2 and all("no SP degree fits" in r for _, r in long)


def test_sp_auto_without_hardware_or_with_an_unknown_one_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match='needs \\[sweep\\] hardware'):
        expand(load_sweep(str(write_spec(tmp_path, AUTO.replace('hardware = "h100-ib"\n', "")))))
    with pytest.raises(SpecError, match="hardware.*no hardware profile 'nope'"):
        load_sweep(str(write_spec(tmp_path, AUTO.replace('"h100-ib"', '"nope"'), "b.toml")))


def test_the_2x4_sweep_plans_one_job_of_two_nodes_of_four(tmp_path, capsys):
    """multinode_2x4 runs on `local_cluster.sh up --nodes 2 --ranks-per-node 4`: every point is one 8-rank
    allocation of 2 nodes x 4 tasks; the head-splitting methods cannot split stdit-tiny's 4 heads 8 ways."""
    assert main(["sweep", "multinode_2x4", "--executor", "slurm", "--dry-run", "--no-fit-check",
                 "--results", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "to run: 15, unsupported (recorded, not run): 3" in out
    assert "| 8 | 2 x 4 | 15 | 1 |" in out
    for m in ("ulysses", "megatron_sp", "megatron_lm"):
        assert f"1 x {m}: {m} splits attention heads: heads=4 is not divisible by the SP degree 8" in out
