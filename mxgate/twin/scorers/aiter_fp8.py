"""AITER's FP8 paged MQA logits scorer on torch tensors: the oracle's ``pa_mqa_logits_fp8`` and
``pa_mqa_logits_fp8_scored`` (mxgate.oracle.scorers.aiter_fp8), same arguments, same bits,
computed on the tensors' device.

The arguments go through the oracle's own ``check_call`` (shape-and-dtype stand-ins for q_fp8,
kv_cache, weights and out; host copies of context_lens and block_tables, whose values it
checks). The computation is the oracle's ``score_chunk`` step for step: the 32-dim group dots
as exact float64 matmuls of e4m3 values, the float32 qk under ``qk_accum``, the K scale, relu,
weight and ``head_order``; the value as one correctly rounded float64 and the bound with its
heads summed left to right. Cells the oracle evaluates in plain IEEE float64 (a NaN qk, a
non-finite K scale, a row with a non-finite weight) and cells whose float32 result is NaN (their
bits follow x86 NumPy's NaN propagation, which a GPU does not) are handed to the oracle's
``score_chunk`` on the host, only their tokens, and patched into the device result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from mxgate import oracle
from mxgate.oracle.geometry import GROUP
from mxgate.oracle.scorers import aiter_fp8 as oracle_fp8
from mxgate.oracle.scorers import arithmetic as oar
from mxgate.oracle.scorers.aiter_fp8 import LSB, MAX_INT, Fp8Call, check_call, score_chunk
from mxgate.oracle.scorers.common import GROUPS, KSTEPS, ScoredLogits
from mxgate.twin import layouts
from mxgate.twin.formats import decode_e4m3
from mxgate.twin.host import device_of, host_copy, output_stand_in, stand_in
from mxgate.twin.scorers import arithmetic as ar

# (row, head, token) cells per pass: float64 temporaries of 32 MB each, a few hundred MB in all
CELLS_PER_CHUNK = 1 << 22

_LARGE = ("q_fp8", "kv_cache", "weights")
_INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64}


def pa_mqa_logits_fp8(q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                      context_lens: torch.Tensor, block_tables: torch.Tensor, max_seq_len: int | None = None, *,
                      next_n: int | None = None, preshuffle: bool = False, variant: str = "fn",
                      out: torch.Tensor | None = None, qk_accum: str = KSTEPS, head_order: str = "sequential",
                      **launch: object) -> torch.Tensor:
    """The oracle's ``pa_mqa_logits_fp8`` (emulated order) on tensors -> float32 [B*next_n,
    max_seq_len] on q_fp8's device; ``out`` (float32, contiguous) is written in its window cells
    only and returned."""
    tensors = dict(q_fp8=q_fp8, kv_cache=kv_cache, weights=weights, context_lens=context_lens,
                   block_tables=block_tables, out=out)
    call, device = _checked(tensors, max_seq_len, next_n, preshuffle, variant, qk_accum, head_order, GROUPS, True,
                            launch)
    return _Run(call, tensors, device, with_bound=False).score().emulated


def pa_mqa_logits_fp8_scored(q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                             context_lens: torch.Tensor, block_tables: torch.Tensor,
                             max_seq_len: int | None = None, *, next_n: int | None = None, preshuffle: bool = False,
                             variant: str = "fn", qk_accum: str = KSTEPS, head_order: str = "sequential",
                             bound_model: str = GROUPS, emulate: bool = True, **launch: object) -> ScoredLogits:
    """The oracle's ``pa_mqa_logits_fp8_scored`` on tensors: a ScoredLogits whose value, bound,
    window and emulated fields are tensors on q_fp8's device."""
    tensors = dict(q_fp8=q_fp8, kv_cache=kv_cache, weights=weights, context_lens=context_lens,
                   block_tables=block_tables, out=None)
    call, device = _checked(tensors, max_seq_len, next_n, preshuffle, variant, qk_accum, head_order, bound_model,
                            emulate, launch)
    return _Run(call, tensors, device, with_bound=True).score()


def _checked(tensors: dict[str, Any], max_seq_len: int | None, next_n: int | None, preshuffle: bool, variant: str,
             qk_accum: str, head_order: str, bound_model: str, emulate: bool,
             launch: dict) -> tuple[Fp8Call, torch.device]:
    """The oracle's checks on host stand-ins -> (its checked call, the tensors' device)."""
    for name in _LARGE:
        if not isinstance(tensors[name], torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(tensors[name]).__name__}")
    out = tensors["out"]
    if out is not None and not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch tensor, got {type(out).__name__}")
    device = device_of({k: t for k, t in tensors.items() if t is not None}, "q_fp8")
    proxies = {name: _stand_in(tensors[name], name) for name in _LARGE}
    proxies["context_lens"] = host_copy(tensors["context_lens"], "context_lens")
    proxies["block_tables"] = host_copy(tensors["block_tables"], "block_tables")
    # a strided out keeps its zero-stride stand-in, so the oracle names it (not C-contiguous)
    out_proxy = None if out is None else (output_stand_in(out, "out") if out.is_contiguous() else _stand_in(out, "out"))
    call = check_call(proxies["q_fp8"], proxies["kv_cache"], proxies["weights"], proxies["context_lens"],
                      proxies["block_tables"], max_seq_len, next_n, preshuffle, variant, out_proxy, qk_accum,
                      head_order, bound_model, emulate, launch)
    return call, device


def _stand_in(t: torch.Tensor, name: str) -> np.ndarray:
    """host.stand_in, and for a dtype it does not list (int8, bool, ...) NumPy's own spelling of
    it, so the oracle's dtype check names the dtype in its own words."""
    try:
        return stand_in(t, name)
    except TypeError:
        try:
            dtype = torch.empty(0, dtype=t.dtype).numpy().dtype
        except TypeError:
            raise TypeError(f"{name} has dtype {t.dtype}, which the op does not take") from None
        return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape=tuple(t.shape), strides=(0,) * t.dim(),
                                               writeable=False)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A float tensor's storage as same-width integers (copies move bits, NaN payloads kept)."""
    return t.view(_INT_VIEW[t.dtype])


def _from_host(a: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(device)


class _Run:
    """One checked call on the device: the inputs in the oracle's shapes and the results."""

    def __init__(self, call: Fp8Call, tensors: dict[str, Any], device: torch.device, *, with_bound: bool) -> None:
        self.call = call
        self.device = device
        self.with_bound = with_bound
        self.emulate = call.emulate
        rows, H, D = call.q.shape
        self.rows, self.heads, self.head_dim = rows, H, D
        q = tensors["q_fp8"]
        self.q = (q if q.dtype == torch.uint8 else q.view(torch.uint8)).reshape(rows, H, D)
        self.kv = tensors["kv_cache"].reshape(call.kv.shape)
        self.weights = tensors["weights"]
        self.out = tensors["out"]
        self.layout = layouts.get(call.layout.name)

    def score(self) -> ScoredLogits:
        c = self.call
        rows, width, dev = self.rows, c.width, self.device
        end = _from_host(c.end.astype(np.int64), dev)
        self.window = torch.arange(width, device=dev)[None, :] < end[:, None]
        self.emu = None
        if self.emulate:
            self.emu = (self.out if self.out is not None
                        else torch.full((rows, width), -math.inf, dtype=torch.float32, device=dev))
        self.value = torch.full((rows, width), -math.inf, dtype=torch.float64, device=dev) if self.with_bound else None
        self.bound = torch.zeros((rows, width), dtype=torch.float64, device=dev) if self.with_bound else None
        self.qv = decode_e4m3(self.q, c.variant).to(torch.float64)  # [rows, H, D]
        nn, H = c.next_n, self.heads
        bsz = c.kv.shape[1]
        for b in range(c.context_lens.shape[0]):
            T = int(c.context_lens[b])
            if T == 0:
                continue
            t = np.arange(T)
            slots = c.block_tables[b, t // bsz] * bsz + t % bsz
            data, ks = self.layout.gather(self.kv, slots=_from_host(slots, dev), num_blocks=c.kv.shape[0],
                                          block_size=bsz, head_dim=self.head_dim)
            kvals = decode_e4m3(data, c.variant).to(torch.float64)  # [T, D]
            r0 = b * nn
            chunk = max(64, CELLS_PER_CHUNK // (nn * H))
            for lo in range(0, T, chunk):
                hi = min(lo + chunk, T)
                self._chunk(r0, lo, hi, data[lo:hi], kvals[lo:hi], ks[lo:hi])
        if not self.with_bound:
            return ScoredLogits(None, None, self.window, self.emu, c.qk_accum, c.bound_model)  # type: ignore[arg-type]
        return ScoredLogits(self.value, self.bound, self.window, self.emu, c.qk_accum, c.bound_model)

    def _chunk(self, r0: int, lo: int, hi: int, codes: torch.Tensor, kvals: torch.Tensor, ks: torch.Tensor) -> None:
        c = self.call
        rows = slice(r0, r0 + c.next_n)
        w = self.weights[rows]
        res = chunk_scores(self.qv[rows], kvals, ks, w, c.variant, c.qk_accum, c.head_order, c.bound_model,
                           self.emulate, self.with_bound)
        win = self.window[rows, lo:hi]
        special = res["special"] & win
        if bool(special.any()):
            self._patch_on_host(rows, codes, ks, w, special, res)
        for name in ("emu", "value", "bound"):
            target = getattr(self, name)
            if target is not None:
                dst = _bits(target[rows, lo:hi])
                dst[win] = _bits(res[name])[win]

    def _patch_on_host(self, rows: slice, codes: torch.Tensor, ks: torch.Tensor, w: torch.Tensor,
                       special: torch.Tensor, res: dict[str, torch.Tensor]) -> None:
        """The oracle's score_chunk on the host for the tokens holding special cells; its
        results replace the device's in those cells."""
        c = self.call
        cols = torch.nonzero(special.any(dim=0)).reshape(-1)
        qv = oracle.decode_e4m3(self.q[rows].cpu().numpy(), c.variant).astype(np.float64)
        kv = oracle.decode_e4m3(codes[cols].cpu().numpy(), c.variant).astype(np.float64)
        host = score_chunk(qv, kv, ks[cols].cpu().numpy(), w.detach().cpu().numpy(), c.variant, c.qk_accum,
                           c.head_order, c.bound_model, self.emulate, self.with_bound)
        sel = special[:, cols]
        for name, got in zip(("emu", "value", "bound"), host):
            if got is None:
                continue
            mine = _bits(res[name])
            mine[:, cols] = torch.where(sel, _bits(_from_host(got, self.device)), mine[:, cols])


def chunk_scores(qv: torch.Tensor, kv: torch.Tensor, ks: torch.Tensor, w: torch.Tensor, variant: str,
                 qk_accum: str, head_order: str, bound_model: str, emulate: bool,
                 with_bound: bool) -> dict[str, torch.Tensor | None]:
    """The oracle's ``score_chunk`` on tensors: qv float64 [n, H, D], kv float64 [Tc, D], ks
    float32 [Tc], w float32 [n, H] -> emu float32, value and bound float64 [n, Tc] (None where
    not asked for) and special bool [n, Tc], the cells whose bits only the oracle on the host
    gives (anything may stand there in the other results)."""
    n, H, D = qv.shape
    Tc = kv.shape[0]
    G = D // GROUP
    parts = [ar.exact_matmul(qv[:, :, g * GROUP:(g + 1) * GROUP].reshape(n * H, GROUP),
                             kv[:, g * GROUP:(g + 1) * GROUP].T).reshape(n, H, Tc) for g in range(G)]
    qk = parts[0]
    for p in parts[1:]:
        qk = qk + p  # exact: every partial sum is a multiple of 2^-20 below 2^43
    special = torch.zeros((n, Tc), dtype=torch.bool, device=qv.device)
    out: dict[str, torch.Tensor | None] = {"emu": None, "value": None, "bound": None}
    if emulate:
        if qk_accum == KSTEPS:
            qk32 = qk.to(torch.float32)
        else:
            qk32 = torch.zeros((n, H, Tc), dtype=torch.float32, device=qv.device)
            for p in parts:
                qk32 += p.to(torch.float32)
        o = (qk32 + 0.0) * ks[None, None, :]
        relu = torch.maximum(o, torch.zeros((), dtype=torch.float32, device=qv.device)) + 0.0
        emu = ar.head_sum(relu * w[:, :, None], head_order)
        out["emu"] = emu
        special |= torch.isnan(emu)  # a NaN's bits are NumPy's on the host
    if with_bound:
        value, bound, bad = _value_and_bound(qv, kv, ks, w, parts, qk, variant, bound_model)
        out["value"], out["bound"] = value, bound
        special |= bad
    out["special"] = special
    return out


def _value_and_bound(qv: torch.Tensor, kv: torch.Tensor, ks: torch.Tensor, w: torch.Tensor,
                     parts: list[torch.Tensor], qk: torch.Tensor, variant: str,
                     bound_model: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Value and bound of ``score_chunk`` for the cells of finite qk, K scale and weights
    (-> value, bound, and the mask of the other cells, which the host evaluates)."""
    n, H, D = qv.shape
    Tc = kv.shape[0]
    G = D // GROUP
    lsb = LSB[variant]
    nan = torch.isnan(qk)
    # NumPy's sign(ks) on the scales the device keeps; a NaN scale (its cells go to the host)
    # takes 0 so every weighted-sum term stays an integer
    sgn = torch.where(ks > 0, 1.0, torch.where(ks < 0, -1.0, 0.0)).to(torch.float64)
    zero = torch.zeros((), dtype=torch.float64, device=qv.device)
    a = torch.maximum(torch.where(nan, 0.0, qk) * sgn[None, None, :] * math.ldexp(1.0, 2 * lsb), zero)
    a_bits = (D * MAX_INT[variant] ** 2).bit_length()
    mw, fw, wfin = ar.f32_parts(w)
    y = ar.weighted_sum_f64(a, a_bits, mw, fw) * math.ldexp(1.0, -2 * lsb)
    aks = ks.to(torch.float64).abs()
    value = y * aks[None, :]
    bad = nan.any(dim=1) | ~torch.isfinite(ks)[None, :] | ~wfin.all(dim=1)[:, None]
    r = a * math.ldexp(1.0, -2 * lsb) * aks[None, None, :]
    wabs = w.to(torch.float64).abs()
    if bound_model == GROUPS:
        group_abs = parts[0].abs()
        for p in parts[1:]:
            group_abs = group_abs + p.abs()  # exact, as the sum of the group dots
        delta = oar.qk_delta(bound_model, qk_abs=None, group_abs=group_abs, groups=G, tile_abs=None, k_tiles=1,
                             dim_abs=None, head_dim=D)
    elif bound_model == KSTEPS:
        delta = oar.qk_delta(bound_model, qk_abs=qk.abs(), group_abs=None, groups=G, tile_abs=None, k_tiles=1,
                             dim_abs=None, head_dim=D)
    else:
        dabs = ar.exact_matmul(qv.abs().reshape(n * H, D), kv.abs().T).reshape(n, H, Tc)
        delta = oar.qk_delta(bound_model, qk_abs=None, group_abs=None, groups=G, tile_abs=None, k_tiles=1,
                             dim_abs=dabs, head_dim=D)
    aks3 = aks[None, None, :]
    delta_o = aks3 * (1 + oar.U) * delta + oar.U * aks3 * qk.abs() + oar.ETA
    R = ar.weighted_heads(wabs, r)
    Do = ar.weighted_heads(wabs, torch.where(nan, 0.0, delta_o))
    bound = oar.fp8_bound(R=R, Do=Do, value=value, heads=H, scale=R + Do, xp=torch)
    bound = torch.where(bad, math.inf, bound)
    return value, bound, bad


# oracle function -> its twin (the oracle's ops alias pa_mqa_logits_fp8_exact is the scored one)
COUNTERPARTS: dict[Callable[..., Any], Callable[..., Any]] = {
    oracle_fp8.pa_mqa_logits_fp8: pa_mqa_logits_fp8,
    oracle_fp8.pa_mqa_logits_fp8_scored: pa_mqa_logits_fp8_scored,
}
