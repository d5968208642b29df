"""The cost model: hardware profiles, comm and memory pricing, step-time prediction, `--sp auto`,
`dspbench predict`, and the paper-scale prediction tables (paper.py).

May import: records, methods, models. Never run, calibrate, slurm or reports (run uses cost, not
the reverse).
"""
