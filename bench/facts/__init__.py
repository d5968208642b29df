"""A configuration read against the models and methods: its command-line form (args: the flags
generated from RunConfig's declarations, model references resolved, --video to T and S, an unset
--shard to the dim the SP degree pads least: shard), its names
checked, what it cannot run and why, and its record assembled with the model's facts, the
padding and the derived metrics (build).

Owns: build_record (the one place every record, measured, predicted or failed, is assembled),
unsupported_reason, the CLI form of a RunConfig.
May import: records, methods, models. Imported by the stages that make records: run, cost, slurm,
calibrate, plan.
"""
