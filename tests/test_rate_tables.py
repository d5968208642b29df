"""The kernel rate tables (bench/cost/rates/<gpu>.toml, issue 40 item 1) keep their schema: one
table per GPU kind of the list, each naming a devices.toml key; every entry says its kind and its
source, a derived one its formula; attention curves rise in length and stay under the chip's peak."""
import re
import tomllib
from pathlib import Path

import pytest

from dspbench.cost.hardware import devices

RATES_DIR = Path(__file__).resolve().parent.parent / "bench" / "cost" / "rates"
GPU_KINDS = ("h100-sxm", "h100-pcie", "h800-sxm", "h200-sxm", "h20", "a100-sxm-80", "l40s", "l40", "l20", "rtx4090")
KINDS = {"published", "measured", "derived", "datasheet"}
ARCHS = {"ampere", "ada", "hopper"}
IMPLS = {"fa2", "fa3", "cudnn", "sdpa_flash", "sdpa_efficient", "math"}
PASSES = {"fwd", "fwd_bwd"}
HEAD_DIMS = {64, 128, 256}
TOP_KEYS = {"gpu", "arch", "sms", "boost_clock_ghz", "source", "gemm", "attention", "conv", "memory", "launch"}


def load(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def tables() -> dict[str, dict]:
    return {p.stem: load(p) for p in sorted(RATES_DIR.glob("*.toml"))}


def entry_problems(where: str, e: dict) -> list[str]:
    """What is wrong with one sourced entry: its kind, its source, a derived one's formula."""
    bad = []
    if e.get("kind") not in KINDS:
        bad.append(f"{where}: kind {e.get('kind')!r} is not one of {sorted(KINDS)}")
    if len(str(e.get("source", "")).strip()) < 20:
        bad.append(f"{where}: no source")
    if e.get("kind") == "derived" and len(str(e.get("formula", "")).strip()) < 10:
        bad.append(f"{where}: derived without a formula")
    if e.get("kind") == "published" and not any(m in e.get("source", "") for m in ("http", "github:", ".com", ".org", "arXiv")):
        bad.append(f"{where}: published but its source names no address")
    return bad


def sections(t: dict) -> list[tuple[str, dict]]:
    out = [(f"gemm.{dt}", t["gemm"][dt]) for dt in ("bf16", "fp16", "fp32")]
    out += [("conv.bf16", t["conv"]["bf16"]), ("memory", t["memory"]), ("launch", t["launch"])]
    return out + [(f"attention[{i}]", e) for i, e in enumerate(t["attention"])]


def table_problems(name: str, t: dict) -> list[str]:
    """Every schema violation of one GPU's table (an empty list: the table is well formed)."""
    missing = TOP_KEYS - set(t)
    if missing:
        return [f"{name}: missing {sorted(missing)}"]
    bad = []
    if t["gpu"] != name:
        bad.append(f"{name}: gpu = {t['gpu']!r} is not its file name")
    if t["gpu"] not in devices():
        bad.append(f"{name}: gpu {t['gpu']!r} is not a devices.toml key")
    if t["arch"] not in ARCHS:
        bad.append(f"{name}: arch {t['arch']!r}")
    if not (isinstance(t["sms"], int) and t["sms"] > 0 and 0.5 < t["boost_clock_ghz"] < 3.5):
        bad.append(f"{name}: sms / boost_clock_ghz out of range")
    for where, e in sections(t):
        bad += entry_problems(f"{name} {where}", e)
    bad += gemm_problems(name, t)
    bad += attention_problems(name, t)
    return bad


def gemm_problems(name: str, t: dict) -> list[str]:
    bad = []
    peaks = devices().get(t["gpu"], {}).get("peak_flops", {})
    for dt in ("bf16", "fp16", "fp32"):
        g = t["gemm"][dt]
        if not (0 < g["tflops"] * 1e12 <= peaks.get(dt, 0)):
            bad.append(f"{name} gemm.{dt}: {g['tflops']} TFLOP/s is not within (0, peak]")
        if not g.get("half_flops", 0) > 0:
            bad.append(f"{name} gemm.{dt}: half_flops must be > 0")
    if not 0 < t["conv"]["bf16"]["tflops"] * 1e12 <= peaks.get("bf16", 0):
        bad.append(f"{name} conv.bf16 out of (0, peak]")
    if not 0 < t["memory"]["hbm_efficiency"] <= 1:
        bad.append(f"{name} memory.hbm_efficiency out of (0, 1]")
    if not 0 < t["launch"]["device_gap_s"] < 1e-3:
        bad.append(f"{name} launch.device_gap_s out of (0, 1 ms)")
    return bad


def attention_problems(name: str, t: dict) -> list[str]:
    bad, seen = [], set()
    peak = devices().get(t["gpu"], {}).get("peak_flops", {})
    for i, e in enumerate(t["attention"]):
        where = f"{name} attention[{i}] ({e.get('impl')} d{e.get('head_dim')} causal={e.get('causal')} {e.get('pass')})"
        if e.get("impl") not in IMPLS or e.get("pass") not in PASSES or e.get("head_dim") not in HEAD_DIMS:
            bad.append(f"{where}: impl / pass / head_dim outside the schema")
            continue
        if not isinstance(e.get("causal"), bool) or e.get("dtype") not in ("bf16", "fp16") or not e.get("flops_convention"):
            bad.append(f"{where}: causal, dtype or flops_convention missing")
        if e["impl"] == "fa3" and t["arch"] != "hopper":
            bad.append(f"{where}: FlashAttention-3 needs wgmma (Hopper); {t['arch']} has none")
        key = (e["impl"], e["head_dim"], e["causal"], e["pass"], e.get("dtype"))
        if key in seen:
            bad.append(f"{where}: a second entry for {key}")
        seen.add(key)
        pts = e.get("points", [])
        lengths = [p[0] for p in pts]
        if not pts or any(len(p) != 2 for p in pts) or lengths != sorted(set(lengths)):
            bad.append(f"{where}: points must be [length, TFLOP/s] pairs, lengths strictly increasing")
        elif any(p[0] <= 0 or not 0 < p[1] * 1e12 <= peak.get(e.get("dtype"), 0) for p in pts):
            bad.append(f"{where}: a point is not positive or exceeds the dense {e.get('dtype')} peak")
    return bad


def test_every_gpu_kind_has_a_table_and_no_table_is_for_another_kind():
    assert sorted(tables()) == sorted(GPU_KINDS)


@pytest.mark.parametrize("name", GPU_KINDS)
def test_a_table_keeps_the_schema(name):
    assert table_problems(name, load(RATES_DIR / f"{name}.toml")) == []


@pytest.mark.parametrize("name", GPU_KINDS)
def test_a_table_has_the_default_kernels_of_its_arch(name):
    """what SDPA runs on this arch (flash = FA2's kernel, efficient, math), both passes, cuDNN's forward (sm80+), FA3 on Hopper"""
    t = load(RATES_DIR / f"{name}.toml")
    have = {(e["impl"], e["pass"]) for e in t["attention"] if e["head_dim"] == 128 and not e["causal"]}
    need = {(i, p) for i in ("fa2", "sdpa_flash", "sdpa_efficient", "math") for p in PASSES} | {("cudnn", "fwd")}
    if t["arch"] == "hopper":
        need |= {("fa3", "fwd")}
    assert need <= have, sorted(need - have)


def test_the_check_catches_each_kind_of_defect():
    """the schema check is not vacuous: each defect planted in a good table is reported"""
    good = load(RATES_DIR / "h100-sxm.toml")
    assert table_problems("h100-sxm", good) == []
    defects = {
        "no source": lambda t: t["gemm"]["bf16"].pop("source"),
        "derived without a formula": lambda t: next(e for e in t["attention"] if e["kind"] == "derived").pop("formula"),
        "kind": lambda t: t["memory"].update(kind="guessed"),
        "strictly increasing": lambda t: t["attention"][0]["points"].reverse(),
        "exceeds the dense": lambda t: t["attention"][0]["points"][-1].__setitem__(1, 5000.0),
        "not a devices.toml key": lambda t: t.update(gpu="h100-sxn"),
        "a second entry": lambda t: t["attention"].append(dict(t["attention"][0])),
        "names no address": lambda t: next(e for e in t["attention"] if e["kind"] == "published").update(source="I remember this number well enough"),
    }
    for phrase, plant in defects.items():
        t = load(RATES_DIR / "h100-sxm.toml")
        plant(t)
        assert any(phrase in p for p in table_problems("h100-sxm", t)), phrase
    ada = load(RATES_DIR / "l40s.toml")
    ada["attention"].append({**ada["attention"][0], "impl": "fa3"})
    assert any("wgmma" in p for p in table_problems("l40s", ada))


def test_derived_hopper_rates_follow_their_chip_not_one_fraction_of_peak():
    """H20 is tensor-peak-bound where H100 is instruction-bound: FA2 reaches a larger share of H20's peak"""
    frac = {}
    for g in ("h100-sxm", "h20"):
        t = load(RATES_DIR / f"{g}.toml")
        e = next(e for e in t["attention"] if (e["impl"], e["head_dim"], e["causal"], e["pass"]) == ("fa2", 128, False, "fwd"))
        frac[g] = e["points"][-1][1] * 1e12 / devices()[g]["peak_flops"][e["dtype"]]
    assert frac["h100-sxm"] < 0.4 < 0.55 < frac["h20"]


REF = re.compile(r"^([\w-]+)\.toml's (\w+) head_dim (\d+) causal (true|false) (fwd|fwd_bwd) entry")


def rederived(e: dict, t: dict, all_tables: dict) -> list | None:
    """An entry derived from another table's entry, recomputed from that entry by its own formula
    (None where the entry is not of the two re-derivable forms)."""
    m = REF.match(e["source"])
    if not m or not e.get("formula", "").startswith(("1/r(L) = 1/G + max(", "standard attention = cuBLAS GEMMs")):
        return None
    ref_t = all_tables[m[1]]
    key = (m[2], int(m[3]), m[4] == "true", m[5])
    ref = next(x for x in ref_t["attention"] if (x["impl"], x["head_dim"], x["causal"], x["pass"]) == key and x["dtype"] == e["dtype"])
    g_ref, g_x = ref_t["gemm"]["bf16"]["tflops"], t["gemm"]["bf16"]["tflops"]
    if e["formula"].startswith("standard"):
        bw = devices()[m[1]]["hbm_TBps"] / devices()[t["gpu"]]["hbm_TBps"]
        return [[l, 1 / (max(1 / v - 1 / g_ref, 0) * bw + 1 / g_x)] for l, v in ref["points"]]
    s = (ref_t["sms"] * ref_t["boost_clock_ghz"]) / (t["sms"] * t["boost_clock_ghz"])
    return [[l, 1 / (1 / g_x + max(1 / v - 1 / g_ref, 0) * s)] for l, v in ref["points"]]


@pytest.mark.parametrize("name", GPU_KINDS)
def test_derived_entries_equal_their_formula_over_their_inputs(name):
    """a derived rate is recomputed from the entry it names: a changed input without the derived
    entry regenerated (a stale copy) fails here; sdpa_flash is fa2's kernel, so equals fa2"""
    all_tables = tables()
    t = all_tables[name]
    by_key = {(e["impl"], e["head_dim"], e["causal"], e["pass"], e["dtype"]): e for e in t["attention"]}
    checked = 0
    for e in t["attention"]:
        want = rederived(e, t, all_tables)
        if e["impl"] == "sdpa_flash" or (e["impl"] == "cudnn" and t["arch"] != "hopper" and want is None):
            want = by_key[("fa2", e["head_dim"], e["causal"], e["pass"], e["dtype"])]["points"]
        if want is None:
            continue
        checked += 1
        assert [p[0] for p in e["points"]] == [p[0] for p in want], (e["impl"], e["head_dim"], e["pass"])
        assert [p[1] for p in e["points"]] == pytest.approx([p[1] for p in want], abs=0.051), (e["impl"], e["head_dim"], e["causal"], e["pass"])
    assert checked >= 10
