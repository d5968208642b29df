"""`dspbench calibrate --from-records DIR`: the compute efficiency a cluster's own records achieved,
from the H200 records committed in results/gpu-h200 (measured there): one-rank records only, the
median hardware FLOPs utilisation; another device or a dirty tree is refused unless --force."""
import json
import shutil
import statistics
from pathlib import Path

from dspbench.cli import main
from dspbench.cost.hardware import load_profile

GPU = Path(__file__).resolve().parent.parent / "results" / "gpu-h200"


def one_rank_hfu() -> list[float]:
    out = []
    for f in GPU.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r.get("source") == "measured" and r["status"] == "ok" and r["world_size"] == 1 and r.get("hfu"):
                out.append(r["hfu"])
    return out


def test_the_efficiency_is_the_median_utilisation_of_one_rank_records(tmp_path):
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--from-records", str(GPU), "--base", "h200-ib", "--name", "h200-rec", "--output", str(out)]) == 0
    prof = load_profile(str(out))
    assert prof.efficiency == round(statistics.median(one_rank_hfu()), 4) and prof.kind == "calibrated"
    assert "one-rank record(s) in" in prof.sources["compute.efficiency"]


def test_another_device_or_a_dirty_tree_is_refused_unless_forced(tmp_path, capsys):
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--from-records", str(GPU), "--base", "a100-ib", "--output", str(out)]) == 2
    assert "another device (NVIDIA H200)" in capsys.readouterr().err and not out.exists()
    dirty = tmp_path / "dirty"
    dirty.mkdir()
    lines = []
    for line in (GPU / "sample_wan.jsonl").read_text().splitlines():
        r = json.loads(line)
        r["environ"]["git_dirty"] = True
        lines.append(json.dumps(r))
    (dirty / "r.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["calibrate", "--from-records", str(dirty), "--base", "h200-ib", "--output", str(out)]) == 2
    assert "dirty tree" in capsys.readouterr().err and not out.exists()
    assert main(["calibrate", "--from-records", str(dirty), "--base", "h200-ib", "--output", str(out), "--force"]) == 0
    assert out.exists()
