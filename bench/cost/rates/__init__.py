"""Kernel rate tables, one TOML file per GPU kind (the key of bench/cost/devices.toml): what GEMMs,
attention kernels (per implementation x head dim x causal x pass, over sequence length),
convolutions, memory streams and kernel launches achieve on that GPU, each entry with its kind
(published / measured / derived / datasheet) and its source, a derived one with its formula.

Data only: no code imports from here; the cost model reads the files as package data. The
schema and the sourcing rules are in docs/cost-model.md, "Kernel rate tables";
tests/test_rate_tables.py checks them.
"""
