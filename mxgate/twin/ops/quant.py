"""The indexer op's two back ends on torch tensors: the oracle's ``ops.quant`` (FP4: E2M1 +
e8m0 per 32 with the kernel's fmaxf amax for NaN / Inf groups; FP8: e4m3 + a float32 scale per
row of 128)."""

from __future__ import annotations

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats.e4m3 import max_value
from mxgate.oracle.ops.quant import FP4_GROUP, K_AMAX_FLOOR, Q_AMAX_FLOOR
from mxgate.twin._bits import ABS32, EXP32, bits_f32, f32_bits, pow2_f32
from mxgate.twin.formats.e2m1 import encode_e2m1, pack_nibbles
from mxgate.twin.formats.e4m3 import encode_e4m3
from mxgate.twin.quantize import quantize_mx
from mxgate.twin.scales import div32, e8m0_scale, f32_const, fp8_token_scale, mul32, ue8m0_round

__all__ = ["FP4_GROUP", "K_AMAX_FLOOR", "Q_AMAX_FLOOR", "fmax_amax", "fp8_encode", "fp8_scale", "quantize_fp4"]

_SATURATE = {"nan": False, "saturate": True, "satfinite": "satfinite"}


def fmax_amax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """max |x| over ``dim`` ignoring NaN (fmaxf); float32. All-NaN gives NaN (0x7FC00000)."""
    mag = f32_bits(x) & ABS32
    nan = mag > EXP32
    top = torch.where(nan, torch.zeros_like(mag), mag).amax(dim=dim)
    all_nan = nan.all(dim=dim)
    return bits_f32(torch.where(all_nan, torch.full_like(top, 0x7FC00000), top))


def quantize_fp4(x: torch.Tensor, profile: _profiles.Profile) -> tuple[torch.Tensor, torch.Tensor]:
    """x float32 [..., 128] -> (packed uint8 [..., 64], e8m0 uint8 [..., 4]) under ``profile``:
    quantize_mx, then groups holding NaN or Inf (byte 0xFF) redone as the kernel does."""
    packed, e8m0 = quantize_mx(x, profile, FP4_GROUP)
    flagged = torch.nonzero(e8m0.reshape(-1) == 0xFF).reshape(-1)
    if flagged.numel():
        groups = x.contiguous().reshape(-1, FP4_GROUP)[flagged]
        mag = f32_bits(groups) & ABS32
        has_inf = (mag == EXP32).any(dim=1)
        amax = fmax_amax(groups)
        amax = torch.where(torch.isnan(amax), torch.zeros_like(amax), amax)  # all NaN: the floor decides
        scale = e8m0_scale(amax, profile)
        scale = torch.where(has_inf, torch.full_like(scale, 0xFF), scale)
        finite_codes = encode_e2m1(groups, profile, scale=scale[:, None])
        inv_2_128 = pow2_f32(torch.tensor(-128, device=x.device))
        inf_codes = encode_e2m1(mul32(groups, inv_2_128), profile)
        codes = torch.where(has_inf[:, None], inf_codes, finite_codes)
        packed.reshape(-1, FP4_GROUP // 2)[flagged] = pack_nibbles(codes)
        e8m0.reshape(-1)[flagged] = scale
    return packed, e8m0


def fp8_scale(amax: torch.Tensor, *, arithmetic: str, floor: float, profile: _profiles.Profile,
              use_ue8m0: bool) -> torch.Tensor:
    """Per-row float32 scale (the oracle's ``fp8_scale``); an Inf scale stays Inf."""
    floor_t = f32_const(floor, amax.device)
    floored = torch.where(torch.isnan(amax), floor_t, torch.maximum(amax, floor_t))  # fmaxf
    s = fp8_token_scale(floored, max_value(profile.fp8_variant), arithmetic=arithmetic, amax_floor=floor)
    if use_ue8m0:
        finite = torch.isfinite(s)
        where = torch.nonzero(finite.reshape(-1)).reshape(-1)
        s = s.clone()
        if where.numel():
            s.reshape(-1)[where] = ue8m0_round(s.reshape(-1)[where], profile.ue8m0_rounding)
    return s


def fp8_encode(x: torch.Tensor, scale: torch.Tensor, profile: _profiles.Profile) -> torch.Tensor:
    """cvt_fp8(fl(x * fl(1/scale))) per row: x float32 [..., 128], scale [...]."""
    inv = div32(torch.ones_like(scale), scale)
    y = mul32(x, inv[..., None])
    return encode_e4m3(y, profile.fp8_variant, _SATURATE[profile.fp8_overflow])
