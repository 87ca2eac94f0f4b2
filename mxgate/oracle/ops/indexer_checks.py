"""Host checks of the indexer op ``indexer_qk_rope_quant_and_cache``: the kernel's rejection rules and messages
(SPEC section 6), dtype and shape checks in the same "<name> must ..." style, and the value
checks the oracle needs to define every output byte. Everything here runs before any output
byte is written; it returns a ``Call`` holding normalised views of the arguments.

NumPy arrays and torch tensors take the same checks and messages (dtypes by name); a tensor
call has every array argument a tensor on q's device. The values checked (slot_mapping,
positions) are small and read on the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import ONE_BYTE_FLOAT_NAMES, allocation, as_array, choice, flag, integer, real, shown
from mxgate.oracle.geometry import GROUP, HEAD_DIM, KV_BLOCK, ROPE_DIM, ROW_BYTES
from mxgate.oracle.ops.frontend import FrontEnd, ScalarKind, get_variant
from mxgate.oracle.xp import device, is_numpy, namespace, to_numpy

Mode = Literal["fp8", "fp4"]
FP8_CACHE_STRIDE = HEAD_DIM + 4  # 128 fp8 bytes + one float32 scale per token, block-planar
_PREFIX = "indexer fused qk cache only supports"


@dataclass
class Call:
    """Validated, normalised arguments. Raw arrays keep their storage (bf16 as uint16 views,
    int16 for tensors); output arrays are uint8 / 16-bit / float32 views of the caller's buffers
    (or fresh ones). slots, positions and the row lists are NumPy (``put`` moves them to the
    arrays' device)."""

    mode: Mode
    num_tokens: int
    num_heads: int
    kind: ScalarKind
    q: np.ndarray
    weights: np.ndarray
    k: np.ndarray
    cos_cache: np.ndarray
    sin_cache: np.ndarray
    slots: np.ndarray  # int64 [T]
    positions: np.ndarray  # int64 [T], clamped where the kernel clamps
    norm_weight: np.ndarray
    norm_bias: np.ndarray
    epsilon: np.float32
    weights_scale: np.float32
    use_ue8m0: bool
    preshuffle: bool
    is_neox: bool
    compute_all_q_rope: bool
    profile: _profiles.Profile
    variant: FrontEnd
    q_out: np.ndarray | None
    weights_out: np.ndarray | None
    kv_cache: np.ndarray | None
    q_scale_out: np.ndarray | None
    kv_cache_scale: np.ndarray | None
    num_blocks: int
    block_size: int
    xp: ModuleType
    device: Any

    def put(self, a: np.ndarray) -> Any:
        """A host array in the call's namespace, on its device (NumPy: ``a`` itself)."""
        return self.xp.asarray(a, device=self.device)

    @property
    def q_rows(self) -> np.ndarray:
        """Tokens whose Q outputs (q_out, q scales, weights_out) are written."""
        if self.compute_all_q_rope:
            return np.arange(self.num_tokens, dtype=np.int64)
        return np.flatnonzero(self.slots >= 0).astype(np.int64)

    @property
    def k_rows(self) -> np.ndarray:
        """Tokens whose K row is written (slot >= 0)."""
        return np.flatnonzero(self.slots >= 0).astype(np.int64)


# ---- small checks -------------------------------------------------------------------------------


def _dtype_name(a: Any) -> str:
    """NumPy's name of the dtype (a tensor's as torch spells it, less the module)."""
    return str(a.dtype).removeprefix("torch.")


_KINDS: dict[str, ScalarKind] = {"uint16": "bf16", "bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _scalar_kind(x: Any, name: str) -> ScalarKind:
    kind = _KINDS.get(_dtype_name(x))
    if kind is None:
        raise TypeError(
            f"{name} must have dtype bfloat16 (ml_dtypes.bfloat16 or uint16 bit patterns), float16 "
            f"or float32, got {_dtype_name(x)}"
        )
    return kind


_KIND_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _raw(x: Any, kind: ScalarKind) -> Any:
    """bf16 as 16-bit patterns (uint16; int16 for tensors, whose uint16 lacks operations on
    some devices); other kinds unchanged."""
    if kind != "bf16":
        return x
    return x.view(np.uint16) if isinstance(x, np.ndarray) else x.view(namespace(x).int16)


def _same_kind(x: object, name: str, kind: ScalarKind) -> Any:
    a = as_array(x, name)
    got = _scalar_kind(a, name)
    if got != kind:
        raise TypeError(f"{name} must have the same dtype as q ({_KIND_NAMES[kind]}), got {_dtype_name(a)}")
    return _raw(a, kind)


def _dtype(x: object, name: str, dtype: type) -> Any:
    a = as_array(x, name)
    if _dtype_name(a) != np.dtype(dtype).name:
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, got {_dtype_name(a)}")
    return a


def _one_byte(x: object, name: str, allowed: str = "uint8 or a float8 dtype") -> Any:
    a = as_array(x, name)
    if _dtype_name(a) != "uint8" and _dtype_name(a) not in ONE_BYTE_FLOAT_NAMES:
        raise TypeError(f"{name} must have a 1-byte dtype ({allowed}), got {_dtype_name(a)}")
    return a.view(namespace(a).uint8)


def _writable(a: Any, name: str) -> None:
    ok = a.flags.c_contiguous and a.flags.writeable if isinstance(a, np.ndarray) else a.is_contiguous()
    if not ok:
        raise ValueError(f"{name} must be C-contiguous and writeable (the op writes into it in place)")


def _one_device(arrays: dict[str, Any]) -> None:
    """Every array argument of q's kind (NumPy arrays or tensors) and on q's device."""
    q = arrays["q"]
    for name, a in arrays.items():
        if a is None:
            continue
        if isinstance(a, np.ndarray) != isinstance(q, np.ndarray):
            raise TypeError(f"{name} must be an array of the kind of q ({type(q).__name__}), got {type(a).__name__}")
        if device(a) != device(q):
            raise ValueError(f"{name} must be on the device of q ({device(q)}), got {device(a)}")


def _shape(a: np.ndarray, name: str, want: tuple[int, ...], doc: str, min_rows: int | None = None) -> None:
    """want[0] is the row count; with min_rows, any count >= min_rows is accepted."""
    rows_ok = a.ndim == len(want) and (a.shape[0] >= min_rows if min_rows is not None else a.shape[0] == want[0])
    if not rows_ok or tuple(a.shape[1:]) != want[1:]:
        rows = f"at least {min_rows}" if min_rows is not None else str(want[0])
        raise ValueError(f"{name} must have shape {doc} with {rows} rows, got {tuple(a.shape)}")


def _poison(call: Call, shape: tuple[int, ...], dtype: str) -> Any:
    """A POISON-filled buffer of the call's namespace and device (dtype by name)."""
    from mxgate.oracle.layouts import POISON

    xp = call.xp
    wanted = getattr(xp, dtype)
    raw = xp.full(shape + (np.dtype(dtype).itemsize,), POISON, dtype=xp.uint8, device=call.device)
    return xp.reshape(raw.view(wanted), shape)


# ---- the check ----------------------------------------------------------------------------------


def check_call(
    *,
    q: object,
    q_out: object,
    weights: object,
    weights_out: object,
    k: object,
    kv_cache: object,
    slot_mapping: object,
    norm_weight: object,
    norm_bias: object,
    positions: object,
    cos_cache: object,
    sin_cache: object,
    epsilon: object,
    quant_block_size: object,
    scale_fmt: object,
    weights_scale: object,
    preshuffle: object,
    is_neox: object,
    compute_all_q_rope: object,
    q_scale_out: object,
    kv_cache_scale: object,
    profile: object,
    variant: object,
    mode: object,
    num_blocks: object,
    kv_block_size: object,
) -> Call:
    """Validate every argument; raise TypeError / ValueError with the kernel's message."""
    from mxgate.oracle import layouts

    prof = _profiles.get(profile)  # type: ignore[arg-type]
    front = get_variant(variant, prof)  # type: ignore[arg-type]

    # ---- which mode -------------------------------------------------------------------------
    mode = choice(mode, "mode", (None, "fp8", "fp4"))
    if mode is None:
        if (q_scale_out is None) != (kv_cache_scale is None):
            raise ValueError("fp4 output needs both q_scale_out and kv_cache_scale")
        chosen: Mode = "fp4" if q_scale_out is not None else "fp8"
    elif mode == "fp8":
        if q_scale_out is not None or kv_cache_scale is not None:
            raise ValueError("mode='fp8' takes no q_scale_out or kv_cache_scale (they select fp4 output)")
        chosen = "fp8"
    else:
        chosen = "fp4"
    fp4 = chosen == "fp4"

    # ---- inputs: types ------------------------------------------------------------------------
    q_arr = as_array(q, "q")
    kind = _scalar_kind(q_arr, "q")
    q_raw = _raw(q_arr, kind)
    k_raw = _same_kind(k, "k", kind)
    weights_raw = _same_kind(weights, "weights", kind)
    cos_raw = _same_kind(cos_cache, "cos_cache", kind)
    sin_raw = _same_kind(sin_cache, "sin_cache", kind)
    slots_given = _dtype(slot_mapping, "slot_mapping", np.int64)
    pos_given = _dtype(positions, "positions", np.int64)
    nw = _dtype(norm_weight, "norm_weight", np.float32)
    nb = _dtype(norm_bias, "norm_bias", np.float32)
    # C float parameters: rounded to float32; a NaN or Inf would turn every row it touches
    # into NaN, which no caller means (the scorers refuse a non-finite weight_scale alike)
    eps32 = real(epsilon, "epsilon")
    ws32 = real(weights_scale, "weights_scale")
    qbs = integer(quant_block_size, "quant_block_size")
    if scale_fmt is not None and not isinstance(scale_fmt, str):
        raise TypeError(f"scale_fmt must be a str or None, got {type(scale_fmt).__name__}")
    pre = flag(preshuffle, "preshuffle")
    neox = flag(is_neox, "is_neox")
    allq = flag(compute_all_q_rope, "compute_all_q_rope")

    # ---- outputs: types ----------------------------------------------------------------------
    q_out_arr = None if q_out is None else _one_byte(q_out, "q_out")
    kv_arr = None if kv_cache is None else _one_byte(kv_cache, "kv_cache")
    qs_arr = None if q_scale_out is None else _one_byte(q_scale_out, "q_scale_out", "uint8 or float8_e8m0fnu")
    ks_arr = None if kv_cache_scale is None else _one_byte(kv_cache_scale, "kv_cache_scale", "uint8 or float8_e8m0fnu")
    wo_arr = None
    if weights_out is not None:
        if fp4:
            wo_arr = _same_kind(weights_out, "weights_out", kind)
        else:
            wo_arr = _dtype(weights_out, "weights_out", np.float32)
    for arr, name in ((q_out_arr, "q_out"), (wo_arr, "weights_out"), (kv_arr, "kv_cache"),
                      (qs_arr, "q_scale_out"), (ks_arr, "kv_cache_scale")):
        if arr is not None:
            _writable(arr, name)
    _one_device({"q": q_arr, "k": k_raw, "weights": weights_raw, "cos_cache": cos_raw, "sin_cache": sin_raw,
                 "slot_mapping": slots_given, "positions": pos_given, "norm_weight": nw, "norm_bias": nb,
                 "q_out": q_out_arr, "weights_out": wo_arr, "kv_cache": kv_arr, "q_scale_out": qs_arr,
                 "kv_cache_scale": ks_arr})
    slots_arr, pos_arr = to_numpy(slots_given), to_numpy(pos_given)  # small: their values are read here

    # ---- the kernel's rejections, in its order -----------------------------------------------
    if k_raw.ndim != 2:
        raise ValueError(f"k must have shape [num_tokens, head_dim], got {tuple(k_raw.shape)}")
    if k_raw.shape[1] != HEAD_DIM:
        raise ValueError(f"{_PREFIX} head_dim={HEAD_DIM}")
    if cos_raw.ndim != 2:
        raise ValueError(f"cos_cache must have shape [max_pos, rope_dim/2], got {tuple(cos_raw.shape)}")
    if cos_raw.shape[1] * 2 != ROPE_DIM:
        raise ValueError(f"{_PREFIX} rope_dim={ROPE_DIM}")
    if q_raw.ndim != 3 or q_raw.shape[2] != HEAD_DIM:
        raise ValueError(f"q must have shape [num_tokens, n_heads, {HEAD_DIM}], got {tuple(q_raw.shape)}")
    if slots_arr.ndim != 1:
        raise ValueError(f"slot_mapping must have shape [num_tokens], got {tuple(slots_arr.shape)}")
    n_tokens = min(k_raw.shape[0], slots_arr.shape[0])
    n_heads = q_raw.shape[1]

    if fp4:
        if qbs != GROUP:
            raise ValueError(f"fp4 {_PREFIX} quant_block_size == {GROUP}")
        if scale_fmt != "ue8m0":
            raise ValueError(f'fp4 output requires scale_fmt="ue8m0", got {scale_fmt}')
        if n_heads % 16 or n_heads == 0:
            raise ValueError(f"fp4 output requires n_heads to be a multiple of 16, got {n_heads}")
        if kv_arr is not None:
            if kv_arr.ndim != 5:
                raise ValueError(
                    "kv_cache must have shape [num_blocks, k_tiles, 4, kv_block_size, 16] in fp4 mode, "
                    f"got {tuple(kv_arr.shape)}"
                )
            if kv_arr.shape[3] != KV_BLOCK:
                raise ValueError(
                    f"fp4 output only supports kv_block_size={KV_BLOCK} (kv_cache.size(3)), got {kv_arr.shape[3]}"
                )
        elif kv_block_size is not None and integer(kv_block_size, "kv_block_size") != KV_BLOCK:
            raise ValueError(
                f"fp4 output only supports kv_block_size={KV_BLOCK} (kv_cache.size(3)), got {kv_block_size}"
            )
        if pre:
            raise ValueError(
                "fp4 output always writes the pa_mqa_logits_fp4 preshuffled layout; "
                "the fp8-only preshuffle flag must be left unset"
            )
        block = KV_BLOCK
    else:
        if qbs != HEAD_DIM:
            raise ValueError(f"{_PREFIX} quant_block_size == head_dim")
        if kv_arr is not None:
            if kv_arr.ndim != 3:
                raise ValueError(
                    f"kv_cache must have shape [num_blocks, cache_block_size, {FP8_CACHE_STRIDE}] in fp8 mode, "
                    f"got {tuple(kv_arr.shape)}"
                )
            block = int(kv_arr.shape[1])
        else:
            block = KV_BLOCK if kv_block_size is None else integer(kv_block_size, "kv_block_size")
        if block <= 0:
            raise ValueError(f"kv_block_size must be > 0, got {block}")
        if pre and block % 16:
            raise ValueError(f"preshuffle requires cache_block_size to be a multiple of 16, got {block}")
    if allq and q_raw.shape[0] != n_tokens:
        raise ValueError("compute_all_q_rope requires q to have exactly num_tokens rows")

    # ---- shapes -------------------------------------------------------------------------------
    t = n_tokens
    _shape(q_raw, "q", (t, n_heads, HEAD_DIM), f"[num_tokens, n_heads={n_heads}, {HEAD_DIM}]", t)
    _shape(weights_raw, "weights", (t, n_heads), f"[num_tokens, n_heads={n_heads}]", t)
    _shape(pos_arr, "positions", (t,), "[num_tokens]", t)
    if sin_raw.shape != cos_raw.shape:
        raise ValueError(
            f"sin_cache must have the shape of cos_cache {tuple(cos_raw.shape)}, got {tuple(sin_raw.shape)}"
        )
    if cos_raw.shape[0] == 0:
        raise ValueError("cos_cache must have at least one row (max_pos >= 1)")
    _shape(nw, "norm_weight", (HEAD_DIM,), f"[{HEAD_DIM}]")
    _shape(nb, "norm_bias", (HEAD_DIM,), f"[{HEAD_DIM}]")
    q_width = ROW_BYTES if fp4 else HEAD_DIM
    if q_out_arr is not None:
        _shape(q_out_arr, "q_out", (t, n_heads, q_width), f"[num_tokens, n_heads={n_heads}, {q_width}]", t)
    if wo_arr is not None:
        _shape(wo_arr, "weights_out", (t, n_heads), f"[num_tokens, n_heads={n_heads}]", t)

    # ---- cache geometry -----------------------------------------------------------------------
    if kv_arr is not None:
        blocks = int(kv_arr.shape[0])
        if num_blocks is not None and integer(num_blocks, "num_blocks") != blocks:
            raise ValueError(f"num_blocks={num_blocks} does not match kv_cache, which has {blocks} blocks")
        if kv_block_size is not None and integer(kv_block_size, "kv_block_size") != block:
            raise ValueError(f"kv_block_size={kv_block_size} does not match kv_cache, whose block size is {block}")
        if fp4:
            want = layouts.get("aiter-fp4-kv").buffer_shape(num_blocks=blocks)
            if tuple(kv_arr.shape) != want:
                raise ValueError(
                    f"kv_cache must have shape {want} ([num_blocks, k_tiles=1, 4, 64, 16]) in fp4 mode, "
                    f"got {tuple(kv_arr.shape)}"
                )
        elif kv_arr.shape[2] != FP8_CACHE_STRIDE:
            raise ValueError(
                f"kv_cache must have shape [num_blocks, cache_block_size, {FP8_CACHE_STRIDE}] in fp8 mode "
                f"(cache_stride = head_dim + 4), got {tuple(kv_arr.shape)}"
            )
    else:
        slots_t = slots_arr[:t]
        fitting = int(slots_t.max()) // block + 1 if slots_t.size and slots_t.max() >= 0 else 1
        blocks = fitting if num_blocks is None else integer(num_blocks, "num_blocks")
        if blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {blocks}")
        subject = f"num_blocks={shown(blocks)}" if num_blocks is not None else f"num_blocks={blocks} (from slot_mapping)"
        if not fp4:
            subject += f", kv_block_size={shown(block)}"
        allocation(blocks * block, ROW_BYTES if fp4 else FP8_CACHE_STRIDE, subject, "a fresh kv_cache")
    if fp4:
        if qs_arr is not None:
            row = layouts.get("aiter-fp4-q-scale").buffer_shape(num_tokens=1, num_heads=n_heads)[1:]
            if qs_arr.ndim != 5 or tuple(qs_arr.shape[1:]) != row or qs_arr.shape[0] < t:
                raise ValueError(
                    f"q_scale_out must have shape [num_tokens, {', '.join(map(str, row))}] "
                    f"(QS_PAD = round_up(n_heads/16, 4)) with at least {t} rows, got {tuple(qs_arr.shape)}"
                )
        if ks_arr is not None:
            want = layouts.get("aiter-fp4-kv-scale").buffer_shape(num_blocks=blocks)
            if tuple(ks_arr.shape) != want:
                raise ValueError(
                    f"kv_cache_scale must have shape {want} ([num_blocks, k_tiles=1, 4, 64], num_blocks of kv_cache), "
                    f"got {tuple(ks_arr.shape)}"
                )

    # ---- values -------------------------------------------------------------------------------
    slots = np.ascontiguousarray(slots_arr[:t])
    total_slots = blocks * block
    if slots.size and slots.max() >= total_slots:
        bad = int(np.flatnonzero(slots >= total_slots)[0])
        raise ValueError(
            f"slot_mapping must be < {total_slots} (kv_cache holds {blocks} blocks of {block}), "
            f"got {int(slots[bad])} at token {bad}"
        )
    valid = np.sort(slots[slots >= 0])
    repeated = valid[1:][valid[1:] == valid[:-1]]
    if repeated.size:
        raise ValueError(
            f"slot_mapping must not repeat a slot >= 0 (two tokens would race on one cache row); "
            f"slot {int(repeated[0])} appears more than once"
        )
    max_pos = int(cos_raw.shape[0])
    pos = np.array(pos_arr[:t], dtype=np.int64)
    clamp = slots < 0  # the kernel clamps only padded tokens
    pos[clamp] = np.clip(pos[clamp], 0, max_pos - 1)
    used = slots >= 0
    out_of_range = used & ((pos < 0) | (pos >= max_pos))
    if np.any(out_of_range):
        bad = int(np.flatnonzero(out_of_range)[0])
        raise ValueError(
            f"positions must lie in [0, {max_pos}) for tokens with slot_mapping >= 0 (the kernel clamps "
            f"only tokens with slot < 0), got {int(pos[bad])} at token {bad}"
        )

    return Call(
        mode=chosen, num_tokens=t, num_heads=n_heads, kind=kind, q=q_raw, weights=weights_raw,
        k=k_raw, cos_cache=cos_raw, sin_cache=sin_raw, slots=slots, positions=pos,
        norm_weight=nw, norm_bias=nb, epsilon=eps32, weights_scale=ws32,
        use_ue8m0=scale_fmt == "ue8m0", preshuffle=pre, is_neox=neox, compute_all_q_rope=allq,
        profile=prof, variant=front, q_out=q_out_arr, weights_out=wo_arr, kv_cache=kv_arr,
        q_scale_out=qs_arr, kv_cache_scale=ks_arr, num_blocks=blocks, block_size=block,
        xp=namespace(q_arr), device=device(q_arr),
    )


def fresh_outputs(call: Call) -> None:
    """Fill in the outputs the caller left as None with POISON-filled buffers (after checks)."""
    from mxgate.oracle import layouts

    t, h = call.num_tokens, call.num_heads
    fp4 = call.mode == "fp4"
    on = {} if is_numpy(call.xp) else {"device": call.device}  # new_buffer: NumPy by default
    if call.q_out is None:
        call.q_out = _poison(call, (t, h, ROW_BYTES if fp4 else HEAD_DIM), "uint8")
    if call.weights_out is None:
        # bf16 results travel as uint16 bit patterns
        dtype = {"bf16": "uint16", "fp16": "float16", "fp32": "float32"}[call.kind] if fp4 else "float32"
        call.weights_out = _poison(call, (t, h), dtype)
    if call.kv_cache is None:
        if fp4:
            call.kv_cache = layouts.get("aiter-fp4-kv").new_buffer(num_blocks=call.num_blocks, **on)
        else:
            name = "aiter-fp8-kv-preshuffle" if call.preshuffle else "aiter-fp8-kv"
            call.kv_cache = layouts.get(name).new_buffer(num_blocks=call.num_blocks, block_size=call.block_size, **on)
    if fp4 and call.q_scale_out is None:
        call.q_scale_out = layouts.get("aiter-fp4-q-scale").new_buffer(num_tokens=t, num_heads=h, **on)
    if fp4 and call.kv_cache_scale is None:
        call.kv_cache_scale = layouts.get("aiter-fp4-kv-scale").new_buffer(num_blocks=call.num_blocks, **on)
