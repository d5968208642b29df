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
