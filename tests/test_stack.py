"""The target's stack is declared, not sniffed (issue 41): a plan or a prediction reads a profile's
[stack] or --stack, never what is installed here, so it is the same where DeepSpeed and flash-attn
do not import; bad stacks and methods the stack cannot run are exit 2, nothing written; and
`plan --buckets FILE` ranks a weighted shape mix."""
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dspbench.cost.hardware import DEFAULT_STACK, from_dict, load_profile, with_stack
from dspbench.methods import get_method
from dspbench.plan.axes import Request
from dspbench.plan.build import plan
from dspbench.plan.text import render
from dspbench.records.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent
# A finder ahead of every other: the libraries of the stack do not import in this process.
BLOCKED = ("deepspeed", "flash_attn", "ring_flash_attn")
BLOCK = f"""
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(name + " is made unimportable by the test")
sys.meta_path.insert(0, Blocked())
"""
TINY = ["--model", "stdit-tiny", "--frames", "8", "--spatial", "64", "--top", "100"]


def _dspbench(argv: list[str], blocked: bool, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`dspbench ARGV` in a fresh interpreter, the stack's libraries unimportable if `blocked`."""
    code = (BLOCK if blocked else "") + "import sys\nfrom dspbench.cli import main\nsys.exit(main())\n"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def _plan(argv: list[str], blocked: bool) -> dict:
    p = _dspbench(["plan", *argv, "--json"], blocked)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("argv", [
    # the CPU profile's own [stack] (DeepSpeed: ZeRO-1/2 and ulysses_deepspeed rows), every method
    TINY + ["--gpus", "4", "--hardware", "emulated-cpu", "--mem-budget-mib", "512"],
    # a declared stack with flash-attn too: ring_flash ranked though nothing here imports it
    TINY + ["--gpus", "4", "--hardware", "emulated-cpu", "--mem-budget-mib", "512", "--dtype", "bf16",
            "--stack", "deepspeed,flash-attn"],   # bf16: ring-flash-attn trains in bf16 only
    # a GPU datasheet profile prices kernel by kernel: the library methods are traced as their own
    TINY + ["--gpus", "2", "--mode", "infer", "--hardware", "h100-ib",
            "--methods", "ring_flash,ulysses_deepspeed,ring,ulysses,single"],
], ids=["cpu-profile-stack", "declared-flash-attn", "gpu-kernel-trace"])
def test_a_plan_is_the_same_where_the_stack_does_not_import(argv):
    here, blocked = _plan(argv, blocked=False), _plan(argv, blocked=True)
    assert here["rows"] == blocked["rows"]            # row for row, every number
    assert here["pruned"] == blocked["pruned"] and here["verdict"] == blocked["verdict"]
    assert here["stack"] == blocked["stack"]
    methods = {r["method"] for r in here["rows"]} | {t["method"] for r in here["rows"] for t in r.get("twins", [])}
    zero = {r["zero"] for r in here["rows"]}
    if "--stack" in argv:
        assert "ring_flash" in methods
    if "h100-ib" in argv:
        assert {"ring_flash", "ulysses_deepspeed"} <= methods      # [stack] of h100-ib declares both
    else:
        assert zero == {0, 1, 2} and "ulysses_deepspeed" in methods


def test_the_blocker_blocks():
    p = subprocess.run([sys.executable, "-c", BLOCK + "import deepspeed"], capture_output=True, text=True)
    assert p.returncode != 0 and "unimportable by the test" in p.stderr


def test_the_paper_predictions_are_the_same_where_deepspeed_does_not_import():
    """`python -m dspbench.cost.paper` (ZeRO-2 throughout) once stopped without DeepSpeed (`min()` of
    an empty sequence: every ZeRO-2 row pruned by `--sp auto`). Its training rows (scaling at `--sp
    auto`, the smallest and largest GPU count of the first sequence length, both models) and its
    inference table, computed where DeepSpeed, flash_attn and ring_flash_attn do not import, equal the
    committed predictions.json row for row (tests/test_paper_predictions.py holds the whole file to
    the generator run with them; the full run takes minutes, these rows seconds)."""
    code = BLOCK + (
        "import json, sys\nfrom dspbench.cost import paper\n"
        "T, G = paper.SCALING_FRAMES[:1], (paper.SCALING_GPUS[0], paper.SCALING_GPUS[-1])\n"
        "rows = [r for m in ('stdit-xl', 'stdit-3b') for r in paper.scaling(lambda rec: rec, m, T, G)]\n"
        "print(json.dumps({'scaling': rows, 'inference': paper.inference(lambda rec: rec)}))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout)
    committed = json.loads((ROOT / "reports" / "paper_data" / "predictions.json").read_text())
    from dspbench.cost import paper
    first, ends = paper.SCALING_FRAMES[0], {paper.SCALING_GPUS[0], paper.SCALING_GPUS[-1]}
    want = [r for r in committed["scaling"] if r["frames"] == first and r["gpus"] in ends]
    assert len(got["scaling"]) == len(want) > 0
    assert json.loads(json.dumps(got["scaling"])) == want
    assert json.loads(json.dumps(got["inference"])) == committed["inference"]


# ---------------------------------------------------------------- the declared stack itself
def test_profiles_declare_their_stack_and_a_profile_without_one_has_the_ci_venvs():
    h100 = load_profile("h100-ib")
    assert h100.stack == ("deepspeed", "flash-attn") and h100.stack_source == "declared by h100-ib [stack]"
    assert load_profile("emulated-cpu").stack == ("deepspeed",)
    bare = from_dict({"name": "bare"})
    assert bare.stack == DEFAULT_STACK and "default" in bare.stack_source
    assert with_stack(h100, ()).stack == () and with_stack(h100, ()).stack_source == "declared by --stack"
    with pytest.raises(ValueError, match=r"\[stack\] packages: unknown package 'deepspeeed'"):
        from_dict({"name": "typo", "stack": {"packages": ["deepspeeed"]}})


def test_each_method_declares_what_it_requires():
    assert get_method("ring_flash").requires == ("flash-attn",) and get_method("ring_flash").trace_as == "ring"
    assert get_method("ulysses_deepspeed").requires == ("deepspeed",)
    assert get_method("dsp").requires == ()


def test_a_stack_without_a_package_prunes_what_needs_it_and_says_so():
    base = RunConfig(model="stdit-tiny", frames=8, spatial=64, gpus=4, mem_budget_mib=512)
    doc = plan(Request(base, ("dsp", "ring_flash", "ulysses_deepspeed")), with_stack(load_profile("emulated-cpu"), ()))
    assert {r["zero"] for r in doc["rows"]} == {0} and {r["method"] for r in doc["rows"]} == {"dsp"}
    reasons = " ".join(sum(doc["pruned_reasons"].values(), []))
    assert "zero=1 needs deepspeed" in reasons and "ring_flash needs flash-attn" in reasons
    assert "stack: none (torch only) (declared by --stack)" in render(doc, 3).splitlines()


def test_the_header_names_the_stack_and_who_declared_it():
    base = RunConfig(model="stdit-tiny", frames=8, spatial=64, gpus=4, mem_budget_mib=512)
    text = render(plan(Request(base, ("dsp",)), load_profile("emulated-cpu")), 3).splitlines()
    assert "stack: deepspeed (declared by emulated-cpu [stack])" in text


PLAN = ["plan", "--model", "stdit-tiny", "--frames", "8", "--spatial", "64", "--gpus", "4",
        "--hardware", "emulated-cpu", "--mem-budget-mib", "512"]
PREDICT = ["predict", "--model", "stdit-tiny", "--frames", "8", "--spatial", "64", "--gpus", "4", "--sp", "2",
           "--hardware", "h100-ib", "--mode", "infer"]


@pytest.mark.parametrize("argv, words", [
    (PLAN + ["--stack", "deepspeed,flashattn"], "--stack: unknown package 'flashattn'"),
    (PLAN + ["--methods", "dsp,ring_flash", "--stack", "deepspeed"], "--methods ring_flash needs flash-attn"),
    (PREDICT + ["--method", "ring_flash", "--stack", "deepspeed"], "--method ring_flash needs flash-attn"),
    (PREDICT + ["--method", "dsp", "--mode", "train", "--zero", "2", "--stack", "none"], "--zero 2 needs deepspeed"),
    (PREDICT + ["--method", "dsp", "--stack", "torch"], "--stack: unknown package 'torch'"),
])
def test_a_bad_stack_or_a_method_it_cannot_run_is_exit_2_with_one_line(tmp_path, argv, words):
    out = tmp_path / "out"
    p = _dspbench(argv + (["--records-file", str(out / "r.jsonl")] if argv[0] == "predict"
                          else ["--emit-sweep", str(tmp_path / "s.toml"), "--report", str(out)]), blocked=False)
    assert p.returncode == 2, p.stderr
    assert words in p.stderr and "Traceback" not in p.stderr
    assert len([line for line in p.stderr.splitlines() if "error" in line]) == 1
    assert not out.exists() and not (tmp_path / "s.toml").exists()      # nothing written


# ---------------------------------------------------------------- plan --buckets FILE
def _buckets(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "buckets.csv"
    f.write_text(text)
    return f


def test_a_bucketed_plan_ranks_each_candidate_on_its_weighted_step(tmp_path):
    from dspbench.plan.build import plan as build
    f = _buckets(tmp_path, "resolution,frames,weight\n256x256,17,3\n256x384,33,1\n")
    from functools import partial
    from dspbench.models.registry import video_to_tokens
    from dspbench.records.buckets import read_bucket_file
    buckets = tuple(read_bucket_file(f, partial(video_to_tokens, "stdit-tiny")))   # its own VAE: frames kept
    assert buckets == ((17, 256, 3.0), (33, 384, 1.0))
    base = RunConfig(model="stdit-tiny", gpus=4, mem_budget_mib=512)
    prof = load_profile("emulated-cpu")
    mix = build(Request(base, ("dsp", "ulysses", "ring"), buckets=buckets), prof)
    assert mix["request"]["buckets"] == [[17, 256, 3.0], [33, 384, 1.0]]
    assert "buckets 17x256:3, 33x384:1" in mix["workload"]
    alone = [build(Request(replace(base, frames=t, spatial=s), ("dsp", "ulysses", "ring")), prof) for t, s, _ in buckets]
    scores = [r["score"] for r in mix["rows"]]
    assert scores == sorted(scores, reverse=True)
    for row in mix["rows"][:5]:
        steps = [_same(row, doc)["step_time_s"] for doc in alone]
        assert row["bucket_steps_s"] == pytest.approx(steps)
        assert row["step_time_s"] == pytest.approx((3 * steps[0] + steps[1]) / 4)     # the weights' mean
        assert row["score"] == pytest.approx(row["dp"] * base.batch / row["step_time_s"])   # samples/s over the mix
        assert row["step_time_low_s"] <= row["step_time_s"] <= row["step_time_high_s"]


def _same(row: dict, doc: dict) -> dict:
    """The row of `doc` pricing `row`'s configuration (its core axes, its first shard and a2a)."""
    core = ("method", "sp", "grad_ckpt", "zero")
    return next(r for r in doc["rows"] if all(r[k] == row[k] for k in core)
                and row["shard"][0] in r["shard"] and row["a2a"][0] in r["a2a"])


def test_a_bucketed_plan_writes_a_sweep_of_the_mix(tmp_path):
    f = _buckets(tmp_path, "resolution,frames,weight\n256x256,17,3\n256x384,33,1\n")
    sweep = tmp_path / "s.toml"
    p = _dspbench(PLAN + ["--methods", "dsp,ring", "--top", "2", "--buckets", str(f), "--emit-sweep", str(sweep)],
                  blocked=False)
    assert p.returncode == 0, p.stderr
    assert "buckets = [[17, 256, 3.0], [33, 384, 1.0]]" in sweep.read_text()
    assert "plan: stdit-tiny buckets 17x256:3, 33x384:1" in p.stdout


@pytest.mark.parametrize("text, words", [
    ("", "needs the header resolution,frames,weight and at least one row"),
    ("resolution,frames,weight\n", "needs the header resolution,frames,weight and at least one row"),
    ("resolution,frames,weight\n256x250,17,1\n", "row 2"),
    ("resolution,frames,weight\n256x256,17,-1\n", "weight must be > 0"),
    ("T,S\n5,256\n", "needs the header"),
])
def test_an_empty_or_malformed_buckets_file_is_exit_2(tmp_path, text, words):
    f = _buckets(tmp_path, text)
    p = _dspbench(PLAN + ["--buckets", str(f), "--emit-sweep", str(tmp_path / "s.toml")], blocked=False)
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "s.toml").exists()
