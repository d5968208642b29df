"""The one-GPU check (check.sh: every CUDA path in a few minutes, rehearsed on CPU in CI) and its
one-page summary (summary.py).

May import: records, cost.
"""
