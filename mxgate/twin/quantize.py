"""quantize_mx of the twin: the fused Triton kernel on CUDA where it applies, else the oracle's
own ``quantize_mx`` on the tensors. Both give the oracle's bytes."""

from __future__ import annotations

import torch

from mxgate.oracle import mx as _oracle_mx
from mxgate.oracle import profiles as _profiles


def quantize_mx(x: torch.Tensor, profile: str | _profiles.Profile = "gfx950", group: int = 32,
                *, fused: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., N] (float32 or bf16) -> (packed uint8 [..., N/2], e8m0 uint8 [..., N/group]).

    fused: None picks the Triton kernel when x is on CUDA and Triton can compile it; True
    insists on it (an error says why it cannot run); False takes the oracle on the tensors.
    """
    if fused is not False:
        from mxgate.twin import fused as _fused

        reason = _fused.unavailable(x, group)
        if reason is None:
            return _fused.quantize_mx(x, profile, group)
        if fused:
            raise RuntimeError(f"fused quantize_mx cannot run here: {reason}")
    return _oracle_mx.quantize_mx(x, profile, group)
