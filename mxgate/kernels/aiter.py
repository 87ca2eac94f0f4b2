"""AMD AITER: the HIP op ``indexer_qk_rope_quant_and_cache`` (FP8 and FP4 modes),
``per_1x32_f4_quant_hip`` and the FlyDSL scorers ``flydsl_pa_mqa_logits_fp4`` / ``_prefill``.

Runs only on ROCm gfx950 with the ``aiter`` package. Everywhere else ``available()`` says why
not. The argument tensors the adapter would pass are built by pure functions
(``indexer_call_specs``, ...) so their shapes, dtypes and layouts are tested on any machine.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mxgate.op_table import OpName
from mxgate.kernels.base import Availability, Backend, Op, OutsideContract, kernel_entry, requires, with_own_checks
from mxgate.kernels.torch_bridge import TensorSpec, spec_of, to_numpy, to_torch

# Arguments of indexer_qk_rope_quant_and_cache in AITER's order (PR #5484 adds the last three).
INDEXER_ARGS = (
    "q", "q_out", "weights", "weights_out", "k", "kv_cache", "slot_mapping", "norm_weight", "norm_bias",
    "positions", "cos_cache", "sin_cache", "epsilon", "quant_block_size", "scale_fmt", "weights_scale",
    "preshuffle", "is_neox", "compute_all_q_rope", "q_scale_out", "kv_cache_scale",
)
_BF16_ARGS = {"q", "k", "weights", "weights_out", "cos_cache", "sin_cache"}
_OUTPUTS = ("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale")
_SCALARS = {"epsilon", "quant_block_size", "scale_fmt", "weights_scale", "preshuffle", "is_neox", "compute_all_q_rope"}


def _is_bf16(name: str, array: np.ndarray) -> bool:
    return name in _BF16_ARGS and array.dtype.name in ("bfloat16", "uint16")


def indexer_call_specs(**kwargs: Any) -> list[TensorSpec | tuple[str, object]]:
    """The exact arguments, in order, the adapter passes to AITER's op: a TensorSpec per tensor,
    (name, value) per scalar; optional FP4 outputs omitted when absent (FP8 mode)."""
    unknown = set(kwargs) - set(INDEXER_ARGS)
    if unknown:
        raise TypeError(f"unexpected argument(s) {sorted(unknown)} for indexer_qk_rope_quant_and_cache")
    specs: list[TensorSpec | tuple[str, object]] = []
    for name in INDEXER_ARGS:
        if name not in kwargs or kwargs[name] is None:
            if name in ("q_scale_out", "kv_cache_scale", "compute_all_q_rope", "preshuffle", "is_neox"):
                continue
            raise TypeError(f"indexer_qk_rope_quant_and_cache needs argument {name!r}")
        value = kwargs[name]
        if name in _SCALARS:
            specs.append((name, value))
        else:
            if not isinstance(value, np.ndarray):
                raise TypeError(f"{name} must be a numpy array, got {type(value).__name__}")
            specs.append(spec_of(name, value, bf16=_is_bf16(name, value)))
    return specs


# ---- AITER's real signature and host checks, read from a checkout (never imported) ----------

CACHE_PY = "aiter/ops/cache.py"
CACHE_CU = "csrc/kernels/cache_kernels.cu"
_FP4_OUTPUTS = ("q_scale_out", "kv_cache_scale")
_CHECK = re.compile(r'(?:AITER_CHECK|TORCH_CHECK)\s*\((?:[^"]|"(?:[^"\\]|\\.)*")*?,\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', re.S)


@dataclass(frozen=True)
class RealSignature:
    """``indexer_qk_rope_quant_and_cache`` as one AITER revision declares it.

    params: (name, has a default) in the Python declaration's order (aiter/ops/cache.py);
    host_checks: the messages of the host wrapper's checks (csrc/kernels/cache_kernels.cu),
    empty when the tree has no csrc/ (an installed wheel).
    """

    params: tuple[tuple[str, bool], ...]
    host_checks: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.params)

    @property
    def fp4_mode(self) -> bool:
        return all(name in self.names for name in _FP4_OUTPUTS)


def read_signature(root: Path) -> RealSignature:
    """Parse the declaration with ``ast`` and the host checks with a regular expression."""
    tree = ast.parse((root / CACHE_PY).read_text(encoding="utf-8"), filename=CACHE_PY)
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE]
    if not found:
        raise ValueError(f"{CACHE_PY} declares no indexer_qk_rope_quant_and_cache")
    args = found[0].args
    positional = args.posonlyargs + args.args
    first_default = len(positional) - len(args.defaults)
    params = [(a.arg, i >= first_default) for i, a in enumerate(positional)]
    params += [(a.arg, d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return RealSignature(tuple(params), host_checks(root))


def host_checks(root: Path) -> tuple[str, ...]:
    """Check messages inside the host function ``void indexer_qk_rope_quant_and_cache(``."""
    path = root / CACHE_CU
    if not path.is_file():
        return ()
    text = path.read_text(encoding="utf-8", errors="replace")
    start = text.find("void indexer_qk_rope_quant_and_cache(")
    if start < 0:
        return ()
    body_start = text.index("{", start)
    depth, i = 0, body_start
    while i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            break
        i += 1
    body = text[body_start:i]
    messages = []
    for match in _CHECK.finditer(body):
        parts = re.findall(r'"((?:[^"\\]|\\.)*)"', match.group(1))
        messages.append("".join(parts))
    return tuple(messages)


def fit_call(kwargs: dict[str, Any], signature: RealSignature) -> dict[str, Any]:
    """The keyword arguments, in the revision's order, that its declaration accepts.

    An argument the revision lacks (the FP4 outputs before PR #5484, ``compute_all_q_rope``
    before it was added) is outside what that revision can do: OutsideContract naming it. A
    parameter without default that the call leaves out is a TypeError, as Python would raise.
    """
    given = {k: v for k, v in kwargs.items() if v is not None}
    extra = [k for k in given if k not in signature.names]
    if extra:
        raise OutsideContract(f"this AITER revision's indexer_qk_rope_quant_and_cache has no parameter "
                              f"{', '.join(extra)} ({'FP8 mode only' if not signature.fp4_mode else 'see aiter/ops/cache.py'})")
    missing = [name for name, has_default in signature.params if not has_default and name not in given]
    if missing:
        raise TypeError(f"indexer_qk_rope_quant_and_cache() missing required argument(s): {', '.join(missing)}")
    return {name: given[name] for name in signature.names if name in given}


def aiter_root() -> Path | None:
    """The tree AITER's code is read from: $MXGATE_AITER_SRC, else the installed package's."""
    from mxgate.kernels import sources

    named = os.environ.get("MXGATE_AITER_SRC", "").strip()
    if named:
        return Path(named)
    return sources.installed_root("aiter")


def torch_dtype_names(kwargs: dict[str, Any]) -> dict[str, str]:
    """The torch dtype each tensor argument is passed as (the host checks' dtypes: FP8 mode
    q_out fp8 e4m3fn on gfx950, weights_out fp32; FP4 mode q_out uint8, weights_out q's dtype)."""
    fp4 = kwargs.get("q_scale_out") is not None
    names: dict[str, str] = {}
    for name, value in kwargs.items():
        if not isinstance(value, np.ndarray):
            continue
        if _is_bf16(name, value):
            names[name] = "bfloat16"
        elif name == "q_out" and not fp4:
            names[name] = "float8_e4m3fn"
        else:
            names[name] = str(value.dtype)
    return names


def per_1x32_call_specs(x: np.ndarray) -> list[TensorSpec | tuple[str, object]]:
    """per_1x32_f4_quant_hip(x, scale=None, quant_dtype=fp4x2, shuffle=False) on a 2-D input."""
    if x.ndim != 2 or x.shape[1] % 32:
        raise ValueError(f"x must be 2-D with a multiple of 32 columns, got shape {x.shape}")
    return [spec_of("x", x, bf16=x.dtype.name in ("bfloat16", "uint16")), ("shuffle", False)]


def _gfx_arch() -> str | None:
    import torch

    if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_properties(0).gcnArchName).split(":")[0]


class AiterBackend(Backend):
    description = "AMD AITER HIP op indexer_qk_rope_quant_and_cache, per_1x32_f4_quant_hip, FlyDSL pa_mqa_logits_fp4 (gfx950)"

    def available(self) -> Availability:
        missing = requires("torch")
        if not missing:
            return missing
        if self.device != "cuda":  # settled before torch's import: the device alone tells
            return Availability(False, "AITER's HIP ops run on a ROCm GPU (gfx950) only: "
                                       "use --device cuda on a ROCm machine")
        import torch

        if getattr(torch.version, "hip", None) is None:
            return Availability(False, "torch is not a ROCm build (torch.version.hip is None); AITER's HIP ops need ROCm on gfx950")
        arch = _gfx_arch()
        if arch != "gfx950":
            return Availability(False, f"AITER FP4 ops need gfx950; this GPU is {arch or 'absent'}")
        return requires("aiter")

    def ops(self) -> dict[str, Op]:
        return with_own_checks({
            OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE: Op(OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE, "gfx950", self._indexer),
            OpName.MX_QUANTIZE: Op(OpName.MX_QUANTIZE, "aiter-per1x32", self._per_1x32),
            OpName.PA_MQA_LOGITS_FP4_DECODE: Op(OpName.PA_MQA_LOGITS_FP4_DECODE, "gfx950", self._decode),
            OpName.PA_MQA_LOGITS_FP4_PREFILL: Op(OpName.PA_MQA_LOGITS_FP4_PREFILL, "gfx950", self._prefill),
        })

    def _indexer(self, **kwargs: Any) -> dict[str, np.ndarray]:
        import aiter
        import torch

        indexer_call_specs(**kwargs)  # validates names and types before anything moves
        root = aiter_root()
        if root is not None and (root / CACHE_PY).is_file():
            kwargs = fit_call(kwargs, read_signature(root))  # the revision that will run
        kernel_entry()
        dtypes = torch_dtype_names(kwargs)
        tensors = {
            name: (to_torch(value, "cuda", bf16=_is_bf16(name, value)) if isinstance(value, np.ndarray) else value)
            for name, value in kwargs.items()
            if value is not None
        }
        for name, dtype in dtypes.items():
            if dtype == "float8_e4m3fn":  # the host check: q_out dtype must be fp8
                tensors[name] = tensors[name].view(torch.float8_e4m3fn)
        aiter.indexer_qk_rope_quant_and_cache(**tensors)
        return {name: to_numpy(tensors[name].view(torch.uint8) if dtypes.get(name) == "float8_e4m3fn" else tensors[name])
                for name in _OUTPUTS if name in tensors}

    def _per_1x32(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from aiter.ops.quant import per_1x32_f4_quant_hip

        per_1x32_call_specs(x)
        packed, scale = per_1x32_f4_quant_hip(to_torch(x, "cuda", bf16=x.dtype.name in ("bfloat16", "uint16")), shuffle=False)
        return to_numpy(packed.view(__import__("torch").uint8)), to_numpy(scale.view(__import__("torch").uint8))

    def _decode(self, **kwargs: Any) -> np.ndarray:
        from aiter.ops.flydsl import flydsl_pa_mqa_logits_fp4

        return to_numpy(flydsl_pa_mqa_logits_fp4(**_scorer_tensors(kwargs)))

    def _prefill(self, **kwargs: Any) -> np.ndarray:
        from aiter.ops.flydsl import flydsl_pa_mqa_logits_fp4_prefill

        return to_numpy(flydsl_pa_mqa_logits_fp4_prefill(**_scorer_tensors(kwargs)))


def _scorer_tensors(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (to_torch(value, "cuda", bf16=(name == "weights" and value.dtype.name in ("bfloat16", "uint16"))) if isinstance(value, np.ndarray) else value)
        for name, value in kwargs.items()
    }
