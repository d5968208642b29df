"""The record contract every stage shares: what a configuration is (config, args), what a record
holds and how it is written and read (io), the environment it carries (environ), and how a
configuration and its outcome become one record (build).

Owns: RunConfig and its run_id, the record schema and its version, append/read of JSONL records.
May import: dspbench.models and dspbench.methods (build only: model facts and method constraints).
Imported by every stage; reports import only `dspbench.records.io` (records, nothing that runs).
"""
