"""The record contract every stage shares: what a configuration is (config: RunConfig, its run_id and
each field's command-line declaration), what a record holds and how it is written and read (io), the
environment it carries (environ), a bucketed workload's mix (buckets), and the argparse types of
numbers with a range that every command's flags use (argtypes).

Owns: RunConfig and its run_id, the record schema and its version, append/read of JSONL records.
May import: nothing of ours but the root package (its version). What needs the models or methods (the
CLI form with model references, names checked, records assembled) is facts/, one stage up.
Imported by every stage; reports import only `dspbench.records.io` and `records.buckets`.
"""
