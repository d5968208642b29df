"""The dtypes a configuration names (RunConfig.dtype: records/config.DTYPES) as torch dtypes, and
their size: stated once for the model, the methods' byte formulas, the memory model and the runs."""
from __future__ import annotations

import torch

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def dtype_size(dtype) -> int:
    """Bytes per element of a dtype given by name ("bf16") or as a torch dtype."""
    return (TORCH_DTYPES[dtype] if isinstance(dtype, str) else dtype).itemsize
