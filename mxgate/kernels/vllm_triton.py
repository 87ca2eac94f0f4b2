"""vLLM's FP4 indexer Triton kernels (Blackwell PTX: cvt.rn.satfinite.e2m1x2).

They need a vLLM install and an NVIDIA GPU of compute capability 10.0 or newer; everywhere else
``available()`` names what is missing. Elements follow the ``cuda-satfinite`` profile.
"""

from __future__ import annotations

from mxgate.kernels.base import AVAILABLE, Availability, Backend, Op, requires

MIN_CAPABILITY = (10, 0)  # Blackwell: the e2m1x2 conversion instructions exist from sm_100


class VllmTritonBackend(Backend):
    description = "vLLM FP4 indexer Triton kernels (Blackwell only)"

    def available(self) -> Availability:
        missing = requires("torch", "triton", "vllm")
        if not missing:
            return missing
        import torch

        if self.device != "cuda" or not torch.cuda.is_available() or getattr(torch.version, "hip", None):
            return Availability(False, "vLLM's FP4 Triton kernels need an NVIDIA GPU (--device cuda)")
        capability = torch.cuda.get_device_capability(0)
        if capability < MIN_CAPABILITY:
            name = torch.cuda.get_device_name(0)
            return Availability(False, f"vLLM's FP4 kernels emit Blackwell PTX (sm_100+); {name} is sm_{capability[0]}{capability[1]}")
        return AVAILABLE

    def ops(self) -> dict[str, Op]:
        # No kernel has been run through this adapter yet: it declares nothing it cannot run.
        return {}
