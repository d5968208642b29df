"""`dspbench plan`: every method x SP degree x DP x checkpointing x ZeRO stage (x the other axes of
axes.py) that the methods' `check()` accepts, priced by the cost model's `predict` (one model: no
second one here), pruned where memory does not fit (with the reason), ranked with intervals; the
sweep that measures the top of the ranking; what-if edits of the hardware profile; the paper-scale
plans of docs/plans.md.

May import: cost, records, methods, models, slurm (to check an emitted sweep), reports (to render
`plan --report`). Nothing imports it but bench/cli.py.
"""
