"""Settings of the training engine that runs measure and the cost model prices: DeepSpeed ZeRO's
communication buckets (run/zero.py configures the engine with them; cost/comm.py and cost/memory.py
price their traffic and their memory). Stated here once, below both stages."""

# Reduce/all-gather bucket, elements: torch DDP's default bucket (bucket_cap_mb=25) in fp32. DeepSpeed's
# own default (5e8 elements, 2 GB in fp32) would dwarf every CPU test model's state.
BUCKET_ELEMS = 25 * 2**20 // 4
