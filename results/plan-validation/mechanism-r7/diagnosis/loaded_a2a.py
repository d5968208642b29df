import os, sys, time, statistics, torch, torch.distributed as dist, torch.multiprocessing as mp
def work(a, b, n):
    for _ in range(n): a @ b
def run(rank, world, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29731")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    g = groups[rank // 2]
    x = torch.randn(100_000)  # 400 KB
    out = torch.empty_like(x)
    a = torch.randn(160, 160); b = torch.randn(160, 160)
    res = {}
    for label, n_work in (("idle", 0), ("loaded", 1), ("loaded", 1)):
        for _ in range(3): dist.all_to_all_single(out, x, group=g)
        dist.barrier()
        t_work = []; t_coll = []
        for it in range(60):
            t0 = time.perf_counter(); work(a, b, 40 * n_work); t1 = time.perf_counter()
            dist.all_to_all_single(out, x, group=g); t2 = time.perf_counter()
            t_work.append(t1 - t0); t_coll.append(t2 - t1)
        res.setdefault(label, []).append((statistics.median(t_work), statistics.median(t_coll), statistics.mean(t_coll)))
        dist.barrier()
    q.put((rank, res))
    dist.destroy_process_group()
if __name__ == "__main__":
    world = 4; q = mp.get_context("spawn").SimpleQueue()
    ps = [mp.get_context("spawn").Process(target=run, args=(r, world, q)) for r in range(world)]
    [p.start() for p in ps]; out = [q.get() for _ in ps]; [p.join() for p in ps]
    for rank, res in sorted(out):
        print(rank, {k: [tuple(round(v * 1e3, 2) for v in t) for t in vals] for k, vals in res.items()})
