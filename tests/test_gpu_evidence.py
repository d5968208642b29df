"""docs/gpu-evidence.md's table is what the generator writes from the committed GPU records (a changed
cost model shows up here as a changed page, to regenerate and read: python -m dspbench.cost.evidence)."""
from dspbench.cost import evidence


def test_the_page_is_what_the_generator_writes():
    assert evidence.DOC.read_text() == evidence.render(), "run: python -m dspbench.cost.evidence"


def test_every_row_is_a_measured_gpu_record():
    rows = evidence.table()
    assert len(rows) == 8 and all(r["measured_s"] > 0 for r in rows)
    for r in evidence.measured_points():
        assert r["source"] == "measured" and r["environ"]["devices"][0].endswith("H200") and r["backend"] == "nccl"


def test_published_points_are_tabled_by_split_and_never_as_measured():
    from dspbench.cost import evidence_published as ep
    rows = ep.table()
    assert len(rows) == 22 and {r["split"] for r in rows} == {"tune", "holdout"}
    text = ep.markdown(rows)
    tune, held = text.split("### Held-out points")
    assert "### Tuning points" in tune and "| compiled |" not in tune and "| SP2 |" not in tune
    assert "| eager | 1 GPU | 1 | 6.71 |" in tune and "| compiled | 1 GPU | 1 | 4.30 |" in held
    assert "measured" not in text                        # published numbers are never called measurements
    for r in ep.published_points():
        assert r["source"] == "published" and r["environ"]["hostnames"] == ["published"]


def test_a_ratios_only_source_is_judged_relative_to_its_own_1_gpu_row():
    from dspbench.cost import evidence_published as ep
    step = [r for r in ep.table() if r["model"] == "step-video-t2v"]
    base = next(r for r in step if r["gpus"] == 1)
    assert base["ratio"] is None                          # the base: 1 by construction, not judged
    for r in step:
        if r is not base:
            want = (base["published_s"] / r["published_s"]) / (base["pred_s"] / r["pred_s"])
            assert abs(r["ratio"] - want) < 1e-12


def test_ordering_check_counts_a_pair_predicted_the_wrong_way():
    from dspbench.cost.evidence_published import orderings
    row = lambda cfg, pub, pred, gpus=4: {"citation": "c", "software": "eager", "gpus": gpus, "model": "m",
                                          "configuration": cfg, "published_s": pub, "pred_s": pred}
    rows = [row("a", 1.0, 2.0), row("b", 1.5, 1.0), row("c", 1.04, 0.1), row("d", 9.0, 1.0, gpus=2)]
    pairs, wrong = orderings(rows)
    # a-b (50% apart, wrong), b-c (44%, wrong: c faster published, predicted faster: right), a-c within 5%
    assert pairs == 2 and len(wrong) == 1 and "a published faster than b" in wrong[0]
