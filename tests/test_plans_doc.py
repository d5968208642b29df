"""docs/plans.md is exactly what `python -m dspbench.plan.paper` writes today, and its rows are
`dspbench plan`'s own verdicts."""
from pathlib import Path

from dspbench.cost.hardware import load_profile
from dspbench.plan import paper
from dspbench.plan.build import plan

ROOT = Path(__file__).resolve().parent.parent


# regenerating all 22 plans traces every candidate's kernels (about 10 minutes on 2 cores): the test
# regenerates one training and one sampling plan and checks their lines on the page; the whole page is
# `python -m dspbench.plan.paper`, and any pricing change moves these rows too
SAMPLED = (0, 19)     # ICML weak scaling at 16 GPUs; full3d 720p sampling on 8


def test_sampled_plans_on_the_page_are_what_the_generator_writes():
    profile = load_profile(paper.PROFILE)
    cases = paper.cases()
    page = (ROOT / "docs" / "plans.md").read_text()
    assert page.startswith(paper.HEADER.rstrip("\n")), "docs/plans.md drifted: python -m dspbench.plan.paper"
    rows = [paper.row(*cases[i], profile) for i in SAMPLED]
    for r in rows:
        line = paper.markdown([r]).split("\n## Reading")[0].strip().splitlines()[-1]
        assert line in page.splitlines(), f"docs/plans.md drifted ({r['setup']}): python -m dspbench.plan.paper"
    assert {s for s, _ in cases} >= {"ICML weak scaling", "ICML strong scaling", "full3d 720p training",
                                      "full3d 720p sampling"}
    sampling = rows[1]
    assert sampling["model"] == "full3d-14b" and "dsp" in sampling["absent"]   # DSP does not apply to full 3-D
    assert plan(cases[0][1], profile)["verdict"] == rows[0]["verdict"]
    # the page has one table row per case
    assert sum(line.startswith("| stdit") or line.startswith("| full3d") for line in page.splitlines()) == len(cases)
