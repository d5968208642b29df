"""The one-GPU check (check.sh: every CUDA path in a few minutes, rehearsed on CPU in CI) and its
one-page summary (summary.py), and `dspbench replay` (replay.py: one rank's kernels timed on this
device beside their prediction).

May import: records, cost, facts.
"""
