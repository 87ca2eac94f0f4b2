"""``indexer_qk_rope_quant_and_cache`` on torch tensors: the oracle's op (FP8 and FP4 modes,
every front-end variant of the envelope), computed on the tensors' device.

The arguments are checked by the oracle's own ``check_call`` (same rules, same messages), fed
shape-and-dtype stand-ins for the large tensors and host copies of the small ones whose values
it checks (slot_mapping, positions, norm weights). The computation is the oracle's general
path (its fast path is a CPU reorganisation of the same bytes).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import GROUP, HEAD_DIM
from mxgate.oracle.layouts import POISON
from mxgate.oracle.ops.frontend import FrontEnd
from mxgate.oracle.ops.indexer_checks import Call, check_call
from mxgate.twin import layouts
from mxgate.twin.host import device_of, host_copy, output_stand_in, stand_in
from mxgate.twin.ops import frontend, quant
from mxgate.twin.ops.f32math import Arith
from mxgate.twin.scales import f32_const, mul32


CHUNK_ELEMENTS = 1 << 26  # Q elements per pass: float32 temporaries of 256 MB, few launches
_K_CHUNK_ROWS = 1 << 16

class IndexerOutputs(NamedTuple):
    """The five outputs (the caller's tensors where given). FP8 mode has no scale buffers."""

    q_out: torch.Tensor
    weights_out: torch.Tensor
    kv_cache: torch.Tensor
    q_scale_out: torch.Tensor | None
    kv_cache_scale: torch.Tensor | None


def _bits16(t: torch.Tensor) -> torch.Tensor:
    """A 2-byte tensor's storage as int16 (bf16 / fp16 bit patterns)."""
    return t.view(torch.int16)


def indexer_qk_rope_quant_and_cache(
    q: torch.Tensor, q_out: torch.Tensor | None, weights: torch.Tensor, weights_out: torch.Tensor | None,
    k: torch.Tensor, kv_cache: torch.Tensor | None, slot_mapping: torch.Tensor, norm_weight: torch.Tensor,
    norm_bias: torch.Tensor, positions: torch.Tensor, cos_cache: torch.Tensor, sin_cache: torch.Tensor,
    epsilon: float, quant_block_size: int, scale_fmt: str | None, weights_scale: float,
    preshuffle: bool = False, is_neox: bool = True, compute_all_q_rope: bool = False,
    q_scale_out: torch.Tensor | None = None, kv_cache_scale: torch.Tensor | None = None, *,
    profile: str | _profiles.Profile = "gfx950", variant: str | FrontEnd | None = None, mode: str | None = None,
    num_blocks: int | None = None, kv_block_size: int | None = None,
) -> IndexerOutputs:
    """The oracle's op on torch tensors (bf16 as torch.bfloat16 or torch.uint16 bit patterns).

    Outputs passed as None come back as fresh POISON-filled tensors on q's device (bf16
    weights_out as torch.uint16 bit patterns); given outputs are written in place.
    """
    tensors = dict(q=q, q_out=q_out, weights=weights, weights_out=weights_out, k=k, kv_cache=kv_cache,
                   slot_mapping=slot_mapping, norm_weight=norm_weight, norm_bias=norm_bias, positions=positions,
                   cos_cache=cos_cache, sin_cache=sin_cache, q_scale_out=q_scale_out, kv_cache_scale=kv_cache_scale)
    device = device_of(tensors)
    outputs = ("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale")
    small = ("slot_mapping", "positions", "norm_weight", "norm_bias")
    proxies = {}
    for name, t in tensors.items():
        if name in outputs:
            proxies[name] = output_stand_in(t, name)
        elif name in small:
            proxies[name] = host_copy(t, name)
        else:
            proxies[name] = stand_in(t, name)
    call = check_call(
        **proxies, epsilon=epsilon, quant_block_size=quant_block_size, scale_fmt=scale_fmt,
        weights_scale=weights_scale, preshuffle=preshuffle, is_neox=is_neox, compute_all_q_rope=compute_all_q_rope,
        profile=profile, variant=variant, mode=mode, num_blocks=num_blocks, kv_block_size=kv_block_size,
    )
    run = _Run(call, tensors, device)
    run.fresh_outputs()
    if call.mode == "fp4":
        run.q_fp4()
        run.k_fp4()
    else:
        run.q_fp8()
        run.k_fp8()
    return IndexerOutputs(run.q_out, run.weights_out, run.kv_cache, run.q_scale_out, run.kv_cache_scale)


class _Run:
    """One validated call on the device: inputs, outputs and the two pipelines."""

    def __init__(self, call: Call, tensors: dict[str, torch.Tensor | None], device: torch.device) -> None:
        self.call = call
        self.device = device
        self.kind = call.kind
        t = call.num_tokens
        raw = (lambda x: _bits16(x)) if call.kind in ("bf16", "fp16") else (lambda x: x)
        self.q = raw(tensors["q"])
        self.k = raw(tensors["k"])
        self.weights = raw(tensors["weights"])
        self.slots = torch.from_numpy(call.slots.copy()).to(device)
        positions = torch.from_numpy(call.positions.copy()).to(device)
        cos_raw = raw(tensors["cos_cache"])
        sin_raw = raw(tensors["sin_cache"])
        self.cos = frontend.to_f32(cos_raw[positions], call.kind) if t else torch.zeros((0, 32), device=device)
        self.sin = frontend.to_f32(sin_raw[positions], call.kind) if t else torch.zeros((0, 32), device=device)
        self.norm_weight = torch.from_numpy(np.array(call.norm_weight, dtype=np.float32)).to(device)
        self.norm_bias = torch.from_numpy(np.array(call.norm_bias, dtype=np.float32)).to(device)
        self.epsilon = f32_const(float(call.epsilon), device)
        self.weights_scale = f32_const(float(call.weights_scale), device)
        self.q_out = tensors["q_out"]
        self.weights_out = tensors["weights_out"]
        self.kv_cache = tensors["kv_cache"]
        self.q_scale_out = tensors["q_scale_out"]
        self.kv_cache_scale = tensors["kv_cache_scale"]
        self.q_rows = (torch.arange(t, device=device) if call.compute_all_q_rope
                       else torch.nonzero(self.slots >= 0).reshape(-1))
        self.k_rows = torch.nonzero(self.slots >= 0).reshape(-1)

    # ---- outputs ---------------------------------------------------------------------------

    def fresh_outputs(self) -> None:
        c = self.call
        t, h, dev = c.num_tokens, c.num_heads, self.device
        fp4 = c.mode == "fp4"
        if self.q_out is None:
            self.q_out = torch.full((t, h, HEAD_DIM // 2 if fp4 else HEAD_DIM), POISON,
                                    dtype=torch.uint8, device=dev)
        if self.weights_out is None:
            dtype = {"bf16": torch.uint16, "fp16": torch.float16, "fp32": torch.float32}[c.kind] if fp4 else torch.float32
            size = torch.tensor([], dtype=dtype).element_size()
            self.weights_out = torch.full((t, h, size), POISON, dtype=torch.uint8, device=dev).view(dtype)[..., 0]
        if self.kv_cache is None:
            if fp4:
                self.kv_cache = layouts.get("aiter-fp4-kv").new_buffer(num_blocks=c.num_blocks, device=dev)
            else:
                name = "aiter-fp8-kv-preshuffle" if c.preshuffle else "aiter-fp8-kv"
                self.kv_cache = layouts.get(name).new_buffer(num_blocks=c.num_blocks, block_size=c.block_size, device=dev)
        if fp4 and self.q_scale_out is None:
            self.q_scale_out = layouts.get("aiter-fp4-q-scale").new_buffer(num_tokens=t, num_heads=h, device=dev)
        if fp4 and self.kv_cache_scale is None:
            self.kv_cache_scale = layouts.get("aiter-fp4-kv-scale").new_buffer(num_blocks=c.num_blocks, device=dev)

    # ---- shared steps ----------------------------------------------------------------------

    def _q_chunks(self):
        """(rows, sel) per chunk of written Q tokens: sel indexes the token axis."""
        rows = self.q_rows
        n = rows.numel()
        per = max(1, CHUNK_ELEMENTS // (self.call.num_heads * HEAD_DIM))
        contiguous = n == self.call.num_tokens
        for start in range(0, n, per):
            stop = min(start + per, n)
            yield (slice(start, stop) if contiguous else rows[start:stop])

    def _q_values(self, sel) -> torch.Tensor:
        """Q's front end for the tokens ``sel``; NaN bits tracked when a NaN reaches the values."""
        c = self.call
        for track in (False, True):
            x = frontend.q_frontend(Arith(track), frontend.to_f32(self.q[sel], c.kind), self.cos[sel], self.sin[sel],
                                    c.is_neox, c.kind, c.variant.fma)
            if track or not bool(torch.isnan(x).any()):
                return x
        raise AssertionError("unreachable")

    def k_values(self, rows: torch.Tensor, variant: FrontEnd | None = None) -> torch.Tensor:
        """The float32 values the K quantizer sees for tokens ``rows`` [n, 128]."""
        c = self.call
        chosen = c.variant if variant is None else variant
        out = []
        for start in range(0, rows.numel(), _K_CHUNK_ROWS):
            part = rows[start:start + _K_CHUNK_ROWS]
            for track in (False, True):
                x = frontend.k_frontend(Arith(track), frontend.to_f32(self.k[part], c.kind), self.norm_weight,
                                        self.norm_bias, self.epsilon, self.cos[part], self.sin[part], c.is_neox,
                                        c.kind, chosen)
                if track or not bool(torch.isnan(x).any()):
                    break
            out.append(x)
        if not out:
            return torch.empty((0, HEAD_DIM), dtype=torch.float32, device=self.device)
        return torch.cat(out)

    def _row_mask(self) -> torch.Tensor:
        c = self.call
        written = torch.ones(c.num_tokens, dtype=torch.bool, device=self.device) if c.compute_all_q_rope else self.slots >= 0
        return torch.where(written, 0, -1).to(torch.int64)

    # ---- FP4 -------------------------------------------------------------------------------

    def q_fp4(self) -> None:
        c = self.call
        t, h = c.num_tokens, c.num_heads
        scales = torch.zeros((t, h, HEAD_DIM // GROUP), dtype=torch.uint8, device=self.device)
        for sel in self._q_chunks():
            packed, e8m0 = quant.quantize_fp4(self._q_values(sel), c.profile)
            self.q_out[sel] = packed
            scales[sel] = e8m0
        layouts.get("aiter-fp4-q-scale").scatter(self.q_scale_out[:t], scales, slots=self._row_mask(), num_heads=h)
        rows = self.q_rows
        _bits_view(self.weights_out)[rows] = _bits_view(self.weights)[rows]

    def k_fp4(self) -> None:
        rows = self.k_rows
        if rows.numel() == 0:
            return
        packed, scales = quant.quantize_fp4(self.k_values(rows), self.call.profile)
        slots = self.slots[rows]
        layouts.get("aiter-fp4-kv").scatter(self.kv_cache, packed, slots=slots)
        layouts.get("aiter-fp4-kv-scale").scatter(self.kv_cache_scale, scales, slots=slots)

    # ---- FP8 -------------------------------------------------------------------------------

    def q_fp8(self) -> None:
        c = self.call
        for sel in self._q_chunks():
            x = self._q_values(sel)
            s = quant.fp8_scale(quant.fmax_amax(x), arithmetic="reciprocal", floor=quant.Q_AMAX_FLOOR,
                                profile=c.profile, use_ue8m0=c.use_ue8m0)
            self.q_out[sel] = quant.fp8_encode(x, s, c.profile)
            w = frontend.to_f32(self.weights[sel], c.kind)
            self.weights_out[sel] = mul32(mul32(w, s), self.weights_scale)

    def k_fp8(self) -> None:
        c = self.call
        rows = self.k_rows
        if rows.numel() == 0:
            return
        x = self.k_values(rows)
        s = quant.fp8_scale(quant.fmax_amax(x), arithmetic="divide", floor=quant.K_AMAX_FLOOR, profile=c.profile,
                            use_ue8m0=c.use_ue8m0)
        codes = quant.fp8_encode(x, s, c.profile)
        name = "aiter-fp8-kv-preshuffle" if c.preshuffle else "aiter-fp8-kv"
        layouts.get(name).scatter(self.kv_cache, codes, s, slots=self.slots[rows])


def _bits_view(t: torch.Tensor) -> torch.Tensor:
    """Same-size integer view, so copies move bits (a bf16 NaN payload included)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])
