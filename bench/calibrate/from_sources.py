"""`dspbench calibrate --from-nccl-tests LOG ... / --from-records DIR`: a profile from what a
cluster's owners already have, nothing measured here. Logs give the links (from_logs.py), records
the compute terms (from_records.py); either alone keeps the base profile's other values. Bad
input exits 2 naming file:line, and nothing is written.
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

from dspbench.calibrate.nccl_tests import LogError
from dspbench.cost.hardware import dumps, from_dict, load_profile


def build(args) -> tuple[dict, list[str]]:
    """(profile dict, notes) from the flags; LogError / FileNotFoundError on bad input."""
    if args.from_nccl_tests:
        from dspbench.calibrate.from_logs import profile_from_logs
        d, notes = profile_from_logs(args.from_nccl_tests, args.name, args.base)
    else:
        d, notes = _records_base(args), []
    if args.from_records:
        from dspbench.calibrate.from_records import apply_records
        notes += apply_records(d, args.from_records, args.force)
    from_dict(d)            # what predict and plan will load: fails here, before anything is written
    return d, notes


def _records_base(args) -> dict:
    """The base for --from-records alone: --base, else the datasheet of the records' GPU."""
    from dspbench.calibrate.from_logs import DATASHEETS, gpu_key
    from dspbench.calibrate.from_records import read
    name = args.base
    if not name:
        devices = {d for _, r in read(Path(args.from_records)) for d in (r.get("environ") or {}).get("devices") or []}
        keys = {gpu_key(d) for d in devices}
        if len(keys) != 1 or next(iter(keys)) not in DATASHEETS:
            raise LogError(f"{args.from_records}:0: records ran on {sorted(devices)}: pass --base PROFILE")
        name = DATASHEETS[keys.pop()]
    d = copy.deepcopy(load_profile(name).raw)
    d["name"] = args.name
    d["description"] = f"{name}"
    return d


def cmd_from_sources(args) -> int:
    try:
        d, notes = build(args)
    except (LogError, FileNotFoundError) as e:
        print(f"dspbench calibrate: error: {e}", file=sys.stderr)
        return 2
    for n in notes:
        print(f"dspbench calibrate: note: {n}", file=sys.stderr)
    out = Path(args.output or f"results/profiles/{args.name}.toml")
    out.parent.mkdir(parents=True, exist_ok=True)
    what = " ".join(filter(None, [f"--from-nccl-tests {' '.join(args.from_nccl_tests)}" if args.from_nccl_tests
                                  else "", f"--from-records {args.from_records}" if args.from_records else ""]))
    out.write_text(dumps(d, f"Written by `dspbench calibrate {what}`; every value's origin is in [sources]."))
    print(f"profile written to {out}")
    return 0
