"""The comm layer's asynchronous band: exchanges posted without waiting, so compute can overlap them.

`RingExchange` (ring P2P, methods/ring.py and the calibration's ring probe) and `all_to_all_async`
(a switch posted now, waited later: the dsp_overlap example plugin). Recorded like comm.py's
collectives, one ledger event per exchange with its phase, group size and tag; split from
methods/comm/layer.py, and with it the only modules that call torch.distributed (tests/test_comm.py).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.autograd import Function

from dspbench.methods.comm import ledger
from dspbench.methods.comm.layer import Group, all_to_all_no_grad, nbytes, on_meta, phase, stopwatch, rank, size


class RingExchange:
    """Send tensors to the next rank and receive the previous rank's, asynchronously (ring P2P).

    `start()` posts the sends/receives with batch_isend_irecv so compute can overlap; `wait()`
    returns the received tensors. Each call is one ledger event of the bytes sent.
    """

    def __init__(self, group: Group):
        self.group = group
        self.n = size(group)
        r = rank(group)
        self.next = dist.get_global_rank(group, (r + 1) % self.n) if group is not None else (r + 1) % self.n
        self.prev = dist.get_global_rank(group, (r - 1) % self.n) if group is not None else (r - 1) % self.n

    def start(self, tensors: list[torch.Tensor], tag: str, p2p_tag: int = 0):
        """`tag` labels the ledger event; `p2p_tag` keeps concurrent streams between the same peers apart."""
        recv = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in tensors]
        ops = [dist.P2POp(dist.isend, t.contiguous(), self.next, self.group, p2p_tag) for t in tensors]
        ops += [dist.P2POp(dist.irecv, r, self.prev, self.group, p2p_tag) for r in recv]
        with stopwatch(self.group, tensors[0].device) as w:
            works = [] if on_meta(tensors[0]) else dist.batch_isend_irecv(ops)
            if w.on:   # timed: the exchange is measured alone (gloo P2P works must not be waited twice)
                for wk in works:
                    wk.wait()
                works = []
        ledger.record("send_recv", phase(), self.n, sum(nbytes(t) for t in tensors), tag, w.elapsed)
        return _Pending(works, recv)


class _Pending:
    def __init__(self, works, recv):
        self.works, self.recv = works, recv

    def wait(self) -> list[torch.Tensor]:
        for wk in self.works:
            wk.wait()
        return self.recv


class _PostedAllToAll(Function):
    """forward: post the exchange of an (n, ..) send buffer, return the receive buffer, valid only
    once the handle appended to `works` is waited; backward: the same exchange of the gradient, blocking."""

    @staticmethod
    def forward(ctx, send, group, tag, works):
        ctx.args = (group, tag)
        recv = torch.empty_like(send)
        with stopwatch(group, send.device) as w:
            work = dist.all_to_all_single(recv, send, group=group, async_op=True)
            if w.on:   # timed: the exchange is measured alone, as RingExchange does
                work.wait()
        ledger.record("all_to_all", phase(), size(group), nbytes(send), tag, w.elapsed)
        works.append(work)
        return recv

    @staticmethod
    def backward(ctx, g):
        group, tag = ctx.args
        return all_to_all_no_grad(g, 0, 0, group, tag), None, None, None   # (n, ..) -> (n, ..), rank blocks swapped


def all_to_all_async(x, scatter_dim: int, gather_dim: int, group: Group, tag: str) -> "PendingAllToAll":
    """forward: `all_to_all`, posted without waiting (compute may run until `.wait()` returns the
    result); backward: a blocking all-to-all with dims swapped. One ledger event each, as all_to_all."""
    n = size(group)
    if n == 1:
        return PendingAllToAll(x, x, [], None)
    # (.., d_s, ..) -> (n, .., d_s/n, ..): the send buffer, copied under autograd.
    send = x.unflatten(scatter_dim, (n, x.shape[scatter_dim] // n)).movedim(scatter_dim, 0).contiguous()
    works: list = []
    return PendingAllToAll(send, _PostedAllToAll.apply(send, group, tag, works), works, gather_dim)


class PendingAllToAll:
    def __init__(self, send, recv, works, gather_dim):
        self.send, self.recv, self.works, self.gather_dim = send, recv, works, gather_dim  # send: alive until waited

    def wait(self) -> torch.Tensor:
        for wk in self.works:
            wk.wait()
        self.send, self.works = None, []
        if self.gather_dim is None:
            return self.recv
        # recv[j] came from rank j and holds its slice of the gather dim: j outermost on that dim.
        return self.recv.movedim(0, self.gather_dim).flatten(self.gather_dim, self.gather_dim + 1)
