import json, glob, sys
from dspbench.records.config import RunConfig
from dspbench.cost.gpu_compute import model_calls, trace_key
from dspbench.cost.rank_trace import rank_kernels
rows = []
for d in sorted(glob.glob(sys.argv[1] + '/200mbit-*')):
    plan = json.load(open(d + '/plan.json')); chk = json.load(open(d + '/check.json'))
    byrank = {r['rank']: r for r in plan['rows']}
    for x in chk['rows']:
        r = byrank[x['rank']]; cfg = RunConfig(**r['config'])
        rk = rank_kernels(trace_key(cfg)); calls = sum(n for _, n in rk.collectives) * model_calls(cfg)
        ex = x['measured_step_s'] - x['predicted_step_s']
        rows.append((d.split('-')[2], cfg.method, calls, ex, x['measured_step_s']))
        print(f"{rows[-1][0]:8s} {cfg.method:14s} calls/step {calls:5.0f} excess {ex*1e3:6.1f} ms  meas {x['measured_step_s']*1e3:6.1f}")
# per shape least squares excess = a + b*calls
for shape in sorted({r[0] for r in rows}):
    pts = [(r[2], r[3]) for r in rows if r[0] == shape]
    n = len(pts); mx = sum(p[0] for p in pts)/n; my = sum(p[1] for p in pts)/n
    sxx = sum((p[0]-mx)**2 for p in pts); sxy = sum((p[0]-mx)*(p[1]-my) for p in pts)
    b = sxy/sxx if sxx else float('nan'); a = my - b*mx
    syy = sum((p[1]-my)**2 for p in pts); r2 = sxy*sxy/(sxx*syy) if sxx and syy else float('nan')
    print(f"{shape}: excess = {a*1e3:.1f} ms + {b*1e3:.2f} ms x calls (r^2 {r2:.2f}, n {n})")
