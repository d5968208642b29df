"""Calibration: nccl-tests-style collectives and compute on this machine's ranks (collectives),
fitted into a hardware profile (profile, command: `dspbench calibrate`), and the emulated cluster
of network namespaces (netns, emulate, emulate.sh: `dspbench emulate`).

May import: cost (profiles, pricing), run (spawn, steps, oracle), records, methods, models.
"""
