import sys, collections, torch
torch.set_num_threads(1)
from dspbench.records.config import RunConfig
from dspbench.cost.hardware import load_profile
from dspbench.cost.gpu_compute import model_calls, trace_key
from dspbench.cost.rank_trace import rank_kernels
from dspbench.cost.cpu_kernels import work_s, per_kernel_s, memory_class
from dspbench.gpu.replay import time_kernel
prof = load_profile(sys.argv[1])
model, T, S = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for m in sys.argv[5].split(','):
    shard = "T"
    cfg = RunConfig(method=m, model=model, frames=T, spatial=S, gpus=4, sp=2, mode="train", shard=shard)
    rk = rank_kernels(trace_key(cfg))
    s = per_kernel_s(prof, "train")
    byop = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    tot_m = tot_p = 0
    for k, n in rk.items():
        meas = time_kernel(k, "cpu", 7)
        pred = s + work_s(k, prof)
        key = k.kind if k.kind != "memory" else f"mem:{k.op}:{memory_class(k)}"
        e = byop[key]; e[0] += n; e[1] += n*meas; e[2] += n*pred; e[3] += n*k.bytes
        tot_m += n*meas; tot_p += n*pred
    print(f"== {m}: kernels {rk.count}, measured {tot_m*1e3:.1f} ms, predicted {tot_p*1e3:.1f} ms, collectives {dict(rk.collectives)}")
    for key, (n, mm, pp, b) in sorted(byop.items(), key=lambda kv: -kv[1][1])[:14]:
        print(f"  {key:45s} calls {n:6.0f} meas {mm*1e3:7.2f} pred {pp*1e3:7.2f} MB {b/1e6:8.1f}")
