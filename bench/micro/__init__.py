"""Micro-benchmarks: the DSP switch against its baselines (switch), the ledger's cost (ledger), the
ring's low-precision error (ring_error), and a report built from synthetic records (report_speed,
synth_records: records marked `source = synthetic`, never mistaken for measurements).

May import: run (spawn, steps, measure), records, methods, models, reports (report_speed only),
cost.hardware (synth_records: the device table's peak, for MFU).
"""
