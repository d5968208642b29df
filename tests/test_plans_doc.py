"""docs/plans.md is exactly what `python -m dspbench.plan.paper` writes today, and its rows are
`dspbench plan`'s own verdicts."""
from pathlib import Path

from dspbench.cost.hardware import load_profile
from dspbench.plan import paper
from dspbench.plan.build import plan

ROOT = Path(__file__).resolve().parent.parent


def test_plans_page_is_what_the_generator_writes():
    profile = load_profile(paper.PROFILE)
    rows = [paper.row(s, r, profile) for s, r in paper.cases()]
    got = paper.markdown(rows)
    assert got == (ROOT / "docs" / "plans.md").read_text(), "docs/plans.md drifted: python -m dspbench.plan.paper"
    setups = {r["setup"] for r in rows}
    assert {"ICML weak scaling", "ICML strong scaling", "full3d 720p training", "full3d 720p sampling"} <= setups
    full3d = [r for r in rows if r["model"] == "full3d-14b"]
    assert full3d and all("dsp" in r["absent"] for r in full3d)      # DSP does not apply to full 3-D attention
    setup, request = paper.cases()[0]
    assert plan(request, profile)["verdict"] == rows[0]["verdict"]
