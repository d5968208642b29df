"""Round trip through --nccl-tests-out on the emulated network (2 namespaces, 200 Mbit/s veths)."""
import json, sys
from pathlib import Path
from dspbench.calibrate.netns import Cluster
from dspbench.calibrate.emulate import run_ranks
from dspbench.calibrate.from_logs import profile_from_logs
from dspbench.cost.hardware import from_dict, load_profile

out = Path(sys.argv[1])
with Cluster(2, "200mbit", subnet="10.77.27", prefix="n27-") as c:
    argv = ["calibrate", "--launcher", "env", "--gpus", "2", "--gpus-per-node", "1", "--sizes", "64K,256K,1M",
            "--iters", "3", "--warmup", "1", "--model", "stdit-tiny", "--frames", "4", "--spatial", "16",
            "--threads", "1", "--compute-iters", "1", "--overlap-repeats", "1", "--force",
            "--output", str(out / "direct.toml"), "--nccl-tests-out", str(out / "logs")]
    res = run_ranks(c, argv, timeout=900)
    print(res[0].stdout[-3000:]); print(res[0].stderr[-2000:], file=sys.stderr)
d, notes = profile_from_logs([str(p) for p in sorted((out / "logs").glob("*.log"))], "rt", base="emulated-cpu")
a, b = load_profile(str(out / "direct.toml")), from_dict(d)
rows = []
for tier in ("intra", "inter"):
    la, lb = getattr(a, tier), getattr(b, tier)
    for op in sorted(la.busbw_GBps):
        dt = max(abs(x[1] - y[1]) for x, y in zip(la.time_s_op[op], lb.time_s_op.get(op, [])) ) if op in lb.time_s_op else None
        rows.append((tier, op, la.busbw_GBps[op], lb.busbw_GBps.get(op), la.alpha_s_op[op], lb.alpha_s_op.get(op), dt))
for r in rows:
    print("%s %-15s busbw %.6g %.6g alpha %.6g %.6g max|dt| %s" % r)
print("notes", notes)
