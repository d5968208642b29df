"""Put the collectives a library issues itself (DeepSpeed-Ulysses) in the ledger.

It wraps the library's own c10d entry point for a while; it calls nothing of torch.distributed.
"""
from __future__ import annotations

import threading

from dspbench.methods import ledger
from dspbench.methods.comm import _nbytes, _phase, _watch, size

# ---------------------------------------------------------------- a library's own all-to-alls
_EXTERNAL = threading.local()   # .busy: a recording wrapper is running (outer, nested ones skip)


class record_external_all_to_all:  # noqa: N801 - a context manager, named like one
    """Put the all-to-alls a library issues itself (DeepSpeed-Ulysses) in the ledger.

    `with record_external_all_to_all(owner, tag_for):` replaces `owner.<name>` (default
    `all_to_all_single`; for DeepSpeed, owner is the `deepspeed.comm` module, whose function
    `deepspeed.sequence.layer` looks up at each call) by a wrapper that runs the original, timed
    like our own ops, and records one event per call exactly as `_all_to_all` does: op
    `all_to_all`, the current phase (`_phase()`), the group's size, payload = the input's bytes,
    tag = `tag_for()`. It needs the library to call it as (output, input, ..., group=...), like
    torch.distributed.all_to_all_single. Groups of size 1 record nothing, as ours.

    The original is put back on exit. Nesting (last in, first out) is safe: only the innermost
    wrapper records. A library whose backward runs outside any scope the caller holds (DeepSpeed's
    autograd Functions) needs it entered once and kept: `.__enter__()` without an exit.
    """

    def __init__(self, owner, tag_for, name: str = "all_to_all_single"):
        self.owner, self.tag_for, self.name = owner, tag_for, name
        self._original = None

    def __enter__(self) -> "record_external_all_to_all":
        original = self._original = getattr(self.owner, self.name)
        tag_for = self.tag_for

        def recorded(output, input, *args, **kwargs):
            if getattr(_EXTERNAL, "busy", False):   # an inner wrapper is recording this call
                return original(output, input, *args, **kwargs)
            group = kwargs.get("group", args[2] if len(args) > 2 else None)
            _EXTERNAL.busy = True
            try:
                with _watch(group, input.device) as w:
                    work = original(output, input, *args, **kwargs)
            finally:
                _EXTERNAL.busy = False
            n = size(group)
            if n > 1:
                ledger.record("all_to_all", _phase(), n, _nbytes(input), tag_for(), w.elapsed)
            return work

        recorded.__wrapped__ = original
        setattr(self.owner, self.name, recorded)
        return self

    def __exit__(self, *exc) -> None:
        setattr(self.owner, self.name, self._original)
