"""Put the collectives a library issues itself (DeepSpeed-Ulysses, ring-flash-attn) in the ledger.

It wraps the library's own c10d entry point for a while; it calls nothing of torch.distributed.
"""
from __future__ import annotations

import threading

from dspbench.methods.comm import ledger
from dspbench.methods.comm.layer import nbytes, phase, stopwatch, size

# ---------------------------------------------------------------- a library's own all-to-alls
_EXTERNAL = threading.local()   # .busy: a recording wrapper is running (outer, nested ones skip)


class record_external_all_to_all:  # noqa: N801 - a context manager, named like one
    """Put the all-to-alls a library issues itself (DeepSpeed-Ulysses) in the ledger.

    `with record_external_all_to_all(owner, tag_for):` replaces `owner.<name>` (default
    `all_to_all_single`; for DeepSpeed, owner is the `deepspeed.comm` module, whose function
    `deepspeed.sequence.layer` looks up at each call) by a wrapper that runs the original, timed
    like our own ops, and records one event per call exactly as `all_to_all_no_grad` does: op
    `all_to_all`, the current phase (`phase()`), the group's size, payload = the input's bytes,
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
                with stopwatch(group, input.device) as w:
                    work = original(output, input, *args, **kwargs)
            finally:
                _EXTERNAL.busy = False
            n = size(group)
            if n > 1:
                ledger.record("all_to_all", phase(), n, nbytes(input), tag_for(), w.elapsed)
            return work

        recorded.__wrapped__ = original
        setattr(self.owner, self.name, recorded)
        return self

    def __exit__(self, *exc) -> None:
        setattr(self.owner, self.name, self._original)


# ---------------------------------------------------------------- ring-flash-attn's own ring
_RING = threading.local()   # .tags: ledger tags of the RingComms the running forward/backward creates


def record_ring_flash_attn(module, kv_tag: str, dkv_tag: str) -> None:
    """Put the ring P2P of ring-flash-attn's `ring_flash_attn` module in the ledger, for the process.

    That module builds a `RingComm` per forward (K, V) and two per backward (K, V, then the dK, dV
    accumulators), each posting `batch_isend_irecv` itself. Its `RingComm` name is replaced by a
    subclass that runs the library's code unchanged and records one `send_recv` event per
    `commit()` (the bytes of the tensors it sends), as `comm_async.RingExchange.start` does; and its
    forward and backward functions by wrappers that say which tags their RingComms get, in the
    order they create them. Timed ledgers time each exchange alone (waited inside the stopwatch;
    the library's own wait then finds nothing left). Idempotent.
    """
    if getattr(module, "_dspbench_recorded", False):
        return
    base = module.RingComm

    class RecordedRingComm(base):
        def __init__(self, process_group):
            super().__init__(process_group)
            tags = getattr(_RING, "tags", None)
            self._tag, self._sent, self._device = (tags.pop(0) if tags else kv_tag), 0, None

        def send_recv(self, to_send, recv_tensor=None):
            self._sent, self._device = self._sent + nbytes(to_send), to_send.device
            return super().send_recv(to_send, recv_tensor)

        def commit(self):
            with stopwatch(self._process_group, self._device) as w:
                super().commit()
                if w.on:
                    for req in self._reqs:
                        req.wait()
                    self._reqs = []   # gloo P2P works must not be waited twice
            if self.world_size > 1:
                ledger.record("send_recv", phase(), self.world_size, self._sent, self._tag, w.elapsed)
            self._sent = 0

    def tagged(fn, tags):
        def run(*args, **kwargs):
            outer, _RING.tags = getattr(_RING, "tags", None), list(tags)
            try:
                return fn(*args, **kwargs)
            finally:
                _RING.tags = outer
        run.__wrapped__ = fn
        return run

    module.RingComm = RecordedRingComm
    module.ring_flash_attn_forward = tagged(module.ring_flash_attn_forward, [kv_tag])
    module.ring_flash_attn_backward = tagged(module.ring_flash_attn_backward, [kv_tag, dkv_tag])
    module._dspbench_recorded = True
