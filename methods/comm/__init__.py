"""Communication: the only package that calls torch.distributed, and the ledger that records it.

layer (every recorded collective, its autograd conjugate pairs and the public wrappers methods
call), async_ops (exchanges posted without waiting: the ring's P2P, an overlapped all-to-all), p2p (swaps
with named neighbours: CFG parallelism's peer, a patch-parallel convolution's halo), raw
(unrecorded collectives for benchmarks and calibration), dtensor (torch's own context parallel,
recorded), fake_world (a fake process group for tracing one rank), external (a library's own collectives put in the ledger) and ledger (bytes per op,
phase, tag and rank). Method specs live one level up, in methods/.

May import: torch, and within methods/ nothing (models neither): methods import it.
"""
