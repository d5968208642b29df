"""Put the collectives a library issues itself (DeepSpeed-Ulysses, ring-flash-attn) in the ledger,
and DeepSpeed ZeRO's engine's own in an engine ledger beside it.

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

    module.RingComm = RecordedRingComm
    module.ring_flash_attn_forward = _while_set(module.ring_flash_attn_forward, _RING, "tags", lambda: [kv_tag])
    module.ring_flash_attn_backward = _while_set(module.ring_flash_attn_backward, _RING, "tags",
                                                 lambda: [kv_tag, dkv_tag])
    module._dspbench_recorded = True


# ---------------------------------------------------------------- DeepSpeed ZeRO's own collectives
# The engine's collectives (bench/run/zero.py) go through deepspeed.comm, never through our layer. They
# are recorded apart from the method's ledger, into an engine ledger, under the phase of the engine
# call that issued them: `bwd` (engine.backward: the gradient reduction) and `step` (engine.step: the
# gradient norm and the updated parameters' all-gather). Tags name what the engine moves.
ENGINE_TAGS = {("bwd", "all_reduce"): "zero_grads", ("bwd", "reduce_scatter"): "zero_grads",
               ("bwd", "reduce"): "zero_grads", ("step", "all_reduce"): "zero_norm",
               ("step", "all_gather"): "zero_params"}
# deepspeed.comm name -> (our op, the parameter holding nccl-tests' size S, the leading parameters in
# DeepSpeed's order). S: the input of all_reduce, reduce, broadcast and reduce_scatter, the gathered
# output of all_gather (a list for `all_gather`). The order is spelled out because DeepSpeed's
# `timed_op` wrapper hides the signatures (*args, **kwargs).
_ENGINE_OPS = {
    "all_reduce": ("all_reduce", "tensor", ("tensor", "op", "group")),
    "reduce": ("reduce", "tensor", ("tensor", "dst", "op", "group")),
    "broadcast": ("broadcast", "tensor", ("tensor", "src", "group")),
    "all_gather_into_tensor": ("all_gather", "output_tensor", ("output_tensor", "tensor", "group")),
    "all_gather": ("all_gather", "tensor_list", ("tensor_list", "tensor", "group")),
    "reduce_scatter_tensor": ("reduce_scatter", "tensor", ("output_tensor", "tensor", "op", "group")),
}
_ENGINE_STATE = threading.local()   # .phase: "bwd" | "step" inside those engine calls; .busy: recording


def _sized(value) -> tuple:
    """(payload bytes, device) of a tensor or a list of them (all_gather's output list)."""
    tensors = value if isinstance(value, (list, tuple)) else [value]
    return sum(nbytes(t) for t in tensors), tensors[0].device


def _engine_wire(op: str, payload: int, n: int) -> int:
    if op in ("reduce", "broadcast"):     # a ring reduce or broadcast: every rank forwards S once
        return payload
    return ledger.wire_bytes(op, payload, n)


class engine_ledger:  # noqa: N801 - a context manager, named like one
    """`with engine_ledger() as eng:` collects the ZeRO engine's collectives (recorded by the
    wrappers `record_engine_collectives` installs) into `eng`, a Ledger of its own, timed like our
    ops when the method's active ledger is timed."""

    def __enter__(self) -> ledger.Ledger:
        self.previous = getattr(_ENGINE_STATE, "ledger", None)
        _ENGINE_STATE.ledger = ledger.Ledger()
        return _ENGINE_STATE.ledger

    def __exit__(self, *exc) -> None:
        _ENGINE_STATE.ledger = self.previous


def _record_engine_call(name: str, original):
    op, size_arg, params = _ENGINE_OPS[name]

    def recorded(*args, **kwargs):
        led, ph = getattr(_ENGINE_STATE, "ledger", None), getattr(_ENGINE_STATE, "phase", None)
        if led is None or ph is None or getattr(_ENGINE_STATE, "busy", False):
            return original(*args, **kwargs)
        bound = {**dict(zip(params, args)), **kwargs}
        group, (payload, device) = bound.get("group"), _sized(bound[size_arg])
        _ENGINE_STATE.busy = True
        try:
            with stopwatch(group, device) as w:
                work = original(*args, **kwargs)
                if w.on and kwargs.get("async_op") and work is not None:
                    work.wait()
        finally:
            _ENGINE_STATE.busy = False
        n = size(group)
        if n > 1:
            tag = ENGINE_TAGS.get((ph, op), "zero_other")
            led.add(ledger.Event(op, ph, n, payload, _engine_wire(op, payload, n), tag, w.elapsed))
        return work

    recorded.__wrapped__ = original
    return recorded


def record_engine_collectives(engine, ds_comm) -> None:
    """Record the collectives DeepSpeed's ZeRO engine issues itself (see engine_ledger).

    Wraps `ds_comm`'s (the `deepspeed.comm` module, which the ZeRO optimizer looks its functions up
    in at each call) collectives once for the process, and this engine's `backward` and `step` so
    that a call knows its phase. all_to_all_single is left alone: DeepSpeed-Ulysses' own
    all-to-alls are the method's (record_external_all_to_all), even inside engine.backward."""
    if not getattr(ds_comm, "_dspbench_engine_recorded", False):
        for name in _ENGINE_OPS:
            if hasattr(ds_comm, name):
                setattr(ds_comm, name, _record_engine_call(name, getattr(ds_comm, name)))
        ds_comm._dspbench_engine_recorded = True
    for method, ph in (("backward", "bwd"), ("step", "step")):
        setattr(engine, method, _while_set(getattr(engine, method), _ENGINE_STATE, "phase", lambda ph=ph: ph))


def _while_set(fn, state: threading.local, attr: str, value):
    """`fn` wrapped to run with `state.<attr>` = value() (fresh per call), the outer value put back."""
    def run(*args, **kwargs):
        outer = getattr(state, attr, None)
        setattr(state, attr, value())
        try:
            return fn(*args, **kwargs)
        finally:
            setattr(state, attr, outer)
    run.__wrapped__ = fn
    return run
