"""The peer tier: other projects' MX implementations run here, each certified against its profile.

* ``torchao-mx-floor`` / ``torchao-mx-rceil``: torchao's ``to_mx(x, torch.float4_e2m1fn_x2, 32,
  mode)`` (the installed torchao, on the CPU): ``mx.quantize``, and ``e8m0.scale`` as to_mx computes
  it for a block whose amax is the given value; ``to_mx(x, torch.float8_e4m3fn, 32, mode)``:
  ``mx.quantize_e4m3fn``.
* ``microxcaling``: microsoft/microxcaling's emulator (``mx/mx_ops.py`` ``_quantize_mx``, the pure
  torch path, ``fp4_e2m1``, block 32, round "nearest") from a checkout named by
  ``MXGATE_MICROXCALING_SRC``, loaded without its package ``__init__`` (mxgate.kernels.sources).
* ``onnx-reference``: ONNX's reference ``Cast`` (``onnx.reference``) where onnx is installed.
* ``onnx-quantizelinear``: ONNX's reference ``QuantizeLinear`` with scale 1.0 and zero point 0, likewise.

What each peer does and where it is wrong: docs/findings/peers.md.
"""

from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np

from mxgate.kernels import sources
from mxgate.kernels.base import AVAILABLE, Availability, Backend, Op, requires
from mxgate.kernels.quiet import foreign_imports, quiet_import
from mxgate.op_table import OpName

_GROUP = 32
_MAGNITUDES = np.float32([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


class NotACode(ValueError):
    """The peer returned a value that no E2M1 code stands for (its bytes cannot be judged). A known
    finding may expect exactly this raise (known_findings.KNOWN_FAULTS); nothing else."""


def values_to_codes(values: np.ndarray) -> np.ndarray:
    """E2M1 codes of float32 values that are E2M1 values (sign bit kept: -0.0 gives 0x8); a value
    outside the grid raises NotACode, so a peer that emits one fails instead of being rounded here."""
    v = np.asarray(values, np.float32)
    magnitude = np.abs(v)
    index = np.searchsorted(_MAGNITUDES, magnitude)
    index = np.minimum(index, _MAGNITUDES.size - 1)
    exact = _MAGNITUDES[index] == magnitude
    if not exact.all():
        bad = v[~exact].ravel()[0]
        raise NotACode(f"the peer returned {float(bad)!r} (bits {np.float32(bad).view(np.uint32):#010x}), "
                         "which is no E2M1 value")
    return (index.astype(np.uint8) | (np.signbit(v).astype(np.uint8) << 3)).astype(np.uint8)


def _pack(codes: np.ndarray) -> np.ndarray:
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def _non_finite(x: np.ndarray) -> str | None:
    if not np.isfinite(np.asarray(x, np.float32)).all():
        return ("microxcaling emulates in float: a NaN or Inf element makes its block NaN (and an Inf element "
                "stays Inf), which no E2M1 code or e8m0 byte represents")
    return None


# ---- torchao to_mx ---------------------------------------------------------------------------------


class TorchaoMxBackend(Backend):
    """torchao's to_mx in one ScaleCalculationMode, on the CPU."""

    def __init__(self, device: str = "cpu", mode: str = "floor") -> None:
        super().__init__(device)
        self.mode = mode
        self.description = (f"torchao prototype.mx_formats to_mx(x, float4_e2m1fn_x2 | float8_e4m3fn, 32, {mode.upper()}) "
                            "on the CPU (mx.quantize, mx.quantize_e4m3fn; e8m0.scale of a block with that amax)")

    def available(self) -> Availability:
        if self.device != "cpu":
            return Availability(False, "the torchao peer runs to_mx on the CPU only (on CUDA RCEIL may compile to PTX)")
        missing = requires("torch", "torchao")
        if not missing:
            return missing
        try:
            self._to_mx()
        except Exception as error:  # torchao versions move to_mx around
            return Availability(False, f"torchao's to_mx is not importable: {error}")
        return AVAILABLE

    def _to_mx(self) -> tuple[Any, Any]:
        with foreign_imports():  # torchao prints a line per CUDA extension it cannot load
            from torchao.prototype.mx_formats.config import ScaleCalculationMode
            from torchao.prototype.mx_formats.mx_tensor import to_mx
        return to_mx, ScaleCalculationMode(self.mode)

    def _run(self, x: np.ndarray, element: str = "float4_e2m1fn_x2") -> tuple[np.ndarray, np.ndarray]:
        """to_mx's (element bytes, e8m0 bytes): packed E2M1 pairs, or one e4m3fn byte per element."""
        torch = quiet_import("torch")
        to_mx, mode = self._to_mx()
        x32 = np.ascontiguousarray(x, np.float32)
        flat = torch.from_numpy(x32.reshape(-1, x32.shape[-1]).copy())
        scale, data = to_mx(flat, getattr(torch, element), _GROUP, mode)
        data = data.view(torch.uint8).numpy()
        data = data.reshape(x32.shape[:-1] + (data.shape[-1],))
        return data, scale.view(torch.uint8).numpy().reshape(x32.shape[:-1] + (x32.shape[-1] // _GROUP,))

    def ops(self) -> dict[str, Op]:
        profile = f"torchao-{self.mode}"

        def scale_of_amax(amax: np.ndarray) -> np.ndarray:
            a = np.ascontiguousarray(amax, np.float32)
            blocks = np.zeros((a.size, _GROUP), np.float32)
            blocks[:, 0] = a.ravel()
            return self._run(blocks)[1].reshape(a.shape)

        return {
            OpName.MX_QUANTIZE: Op(OpName.MX_QUANTIZE, profile, self._run),
            OpName.E8M0_SCALE: Op(OpName.E8M0_SCALE, profile, scale_of_amax,
                                  note="to_mx on a block holding the amax and 31 zeros"),
            OpName.MX_QUANTIZE_E4M3FN: Op(OpName.MX_QUANTIZE_E4M3FN, profile, lambda x: self._run(x, "float8_e4m3fn")),
        }


# ---- ONNX reference Cast and QuantizeLinear --------------------------------------------------------


def _onnx_node_bytes(x: np.ndarray, node_type: str, to_name: str) -> np.ndarray:
    """The bytes of one ONNX node (opset 23) run by onnx.reference's ReferenceEvaluator on float32
    ``x``: ``Cast`` to ``to_name``, or ``QuantizeLinear`` to that type with scale 1.0 and zero point 0
    (so that it is an encoder like Cast, and any difference is QuantizeLinear's own arithmetic).
    saturate=1 on both (QuantizeLinear's reference reads it for float8 outputs only)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    to = getattr(TensorProto, to_name)
    x32 = np.ascontiguousarray(x, np.float32)
    if node_type == "Cast":
        node = helper.make_node("Cast", ["x"], ["y"], to=to, saturate=1)
        initializers = []
    elif node_type == "QuantizeLinear":
        node = helper.make_node("QuantizeLinear", ["x", "scale", "zero_point"], ["y"], saturate=1)
        # scalars: per-tensor quantization; the zero point's type is the output type
        initializers = [helper.make_tensor("scale", TensorProto.FLOAT, [], [1.0]),
                        helper.make_tensor("zero_point", to, [], [0.0])]
    else:
        raise ValueError(f"node_type must be 'Cast' or 'QuantizeLinear'; got {node_type!r}")
    graph = helper.make_graph([node], node_type.lower(), [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", to, None)], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    with np.errstate(invalid="ignore"):  # a signalling NaN input raises the flag in QuantizeLinear's x / scale
        y = ReferenceEvaluator(model).run(None, {"x": x32.ravel()})[0]
    return np.asarray(y).view(np.uint8).reshape(x32.shape)


class OnnxReferenceBackend(Backend):
    description = "onnx.reference ReferenceEvaluator Cast to FLOAT4E2M1 and FLOAT8E4M3FN, saturate=1 (opset 23)"
    node_type = "Cast"
    profile = "onnx"

    def available(self) -> Availability:
        if self.device != "cpu":
            return Availability(False, "ONNX's reference evaluator runs on the CPU only")
        return requires("onnx")

    def _encoder(self, to_name: str) -> Callable[[np.ndarray], np.ndarray]:
        node_type = self.node_type
        return lambda x: _onnx_node_bytes(x, node_type, to_name)

    def ops(self) -> dict[str, Op]:
        return {
            OpName.E2M1_ENCODE: Op(OpName.E2M1_ENCODE, self.profile, self._encoder("FLOAT4E2M1")),
            OpName.E4M3FN_ENCODE: Op(OpName.E4M3FN_ENCODE, self.profile, self._encoder("FLOAT8E4M3FN")),
        }


class OnnxQuantizeLinearBackend(OnnxReferenceBackend):
    """QuantizeLinear as an encoder: x / 1.0, then for FLOAT4E2M1 ``+ zero_point`` (which turns -0.0
    into +0) and ml_dtypes' cast; for float8 the reference adds no zero point, so it is Cast's bytes."""

    description = ("onnx.reference ReferenceEvaluator QuantizeLinear to FLOAT4E2M1 and FLOAT8E4M3FN, scale 1.0, "
                   "zero point 0, saturate=1 (opset 23)")
    node_type = "QuantizeLinear"
    profile = "onnx-quantizelinear"


# ---- microxcaling ----------------------------------------------------------------------------------

MICROXCALING_ENV = "MXGATE_MICROXCALING_SRC"
_MX_MODULES = {"formats": "mx.formats", "specs": "mx.specs", "elemwise_ops": "mx.elemwise_ops", "mx_ops": "mx.mx_ops"}

MICROXCALING_SPEC = sources.ProjectSpec(
    project="microxcaling",
    package="mx",
    distribution="microxcaling",
    env_var=MICROXCALING_ENV,
    modules=_MX_MODULES,
    required=tuple(_MX_MODULES),
    stubs=lambda context: {},
    hint="a microsoft/microxcaling checkout (the folder holding mx/)",
)


def _elements_of_quantize_mx(mx_ops: types.ModuleType, run: Callable[[], Any]) -> np.ndarray:
    """The E2M1 values _quantize_mx computes before it multiplies them back by the scale: the output
    of its one call of _quantize_elemwise_core, recorded while ``run`` calls _quantize_mx. The
    product is not what the codes are: 6 * 2^126 overflows to Inf where the element is 6."""
    core = mx_ops._quantize_elemwise_core
    recorded: list[Any] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        out = core(*args, **kwargs)
        recorded.append(out.detach().clone())
        return out

    mx_ops._quantize_elemwise_core = record
    try:
        run()
    finally:
        mx_ops._quantize_elemwise_core = core
    if len(recorded) != 1:
        raise RuntimeError(f"_quantize_mx called _quantize_elemwise_core {len(recorded)} times, not once")
    return recorded[0].numpy().astype(np.float32)


class MicroxcalingBackend(Backend):
    description = ("microsoft/microxcaling's emulator: mx_ops._quantize_mx (fp4_e2m1, block 32, round 'nearest', "
                   "custom_cuda=False) and elemwise_ops._quantize_elemwise_core; needs " + MICROXCALING_ENV)

    def _source(self) -> sources.Source:
        import os

        if not os.environ.get(MICROXCALING_ENV, "").strip():
            # the installed package "mx" is an unrelated project: only a named checkout counts
            raise sources.SourceError(MICROXCALING_SPEC.not_found())
        return sources.locate(MICROXCALING_SPEC)

    def available(self) -> Availability:
        if self.device != "cpu":
            return Availability(False, "the microxcaling peer runs its pure-torch path on the CPU only")
        missing = requires("torch")
        if not missing:
            return missing
        try:
            self._source()
        except sources.SourceError as error:
            return Availability(False, str(error))
        return AVAILABLE

    def _modules(self) -> dict[str, types.ModuleType]:
        loaded = sources.load(self._source(), sources.StubContext("interpret", self.device), import_first=("torch",))
        return loaded.modules

    def origin(self) -> str:
        return self._source().origin

    def ops(self) -> dict[str, Op]:
        m = self._modules()
        formats, mx_ops, elemwise = m["formats"], m["mx_ops"], m["elemwise_ops"]
        fmt = formats.ElemFormat.fp4_e2m1
        ebits, mbits, emax, max_norm, _ = formats._get_format_params(fmt)

        def quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            torch = quiet_import("torch")
            x32 = np.ascontiguousarray(x, np.float32)
            rows = x32.reshape(-1, x32.shape[-1] // _GROUP, _GROUP)
            a = torch.from_numpy(rows.copy())
            elements = _elements_of_quantize_mx(mx_ops, lambda: mx_ops._quantize_mx(
                a, 8, fmt, shared_exp_method="max", axes=[-1], block_size=_GROUP, round="nearest",
                flush_fp32_subnorms=False, custom_cuda=False))
            # The scale _quantize_mx divides by (it returns only the dequantized values): its own
            # _shared_exponents, offset by the format's emax and clipped at -127 as _quantize_mx does.
            shared = mx_ops._shared_exponents(a, method="max", axes=[-1], ebits=0).numpy() - emax
            byte = (np.maximum(shared, -127) + 127).astype(np.int64)
            codes = values_to_codes(elements.reshape(rows.shape))
            packed = _pack(codes)
            return (packed.reshape(x32.shape[:-1] + (x32.shape[-1] // 2,)),
                    byte.astype(np.uint8).reshape(x32.shape[:-1] + (x32.shape[-1] // _GROUP,)))

        def encode(x: np.ndarray) -> np.ndarray:
            torch = quiet_import("torch")
            x32 = np.ascontiguousarray(x, np.float32)
            out = elemwise._quantize_elemwise_core(torch.from_numpy(x32.copy()), mbits, ebits, max_norm,
                                                   round="nearest", saturate_normals=True, allow_denorm=True)
            return values_to_codes(out.numpy())

        return {
            OpName.MX_QUANTIZE: Op(OpName.MX_QUANTIZE, "microxcaling", quantize, outside_contract=_non_finite),
            OpName.E2M1_ENCODE: Op(OpName.E2M1_ENCODE, "microxcaling", encode, outside_contract=_non_finite),
        }
