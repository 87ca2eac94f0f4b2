"""Profiles of peer implementations run by the peer tier (docs/findings/peers.md).

Registered with mxgate.oracle.profiles whenever that module is imported (its last lines import
this one). The golden vectors carry results for profiles.vector_names() only, so a profile
added here changes no vector file.
"""

from __future__ import annotations

from mxgate.oracle import profiles as _profiles

_TORCH_PROBED = "the torch backend probes its own casts at start and declares the profile that matches"

# torch's eager float8_e4m3fn casts saturate from 2.13 on (pytorch#178817) and did not before; the
# bf16 NaN differs by device. Every (overflow, bf16 NaN) pair the backend can probe has a profile.
TORCH_CUDA_SATURATING = _profiles.register(_profiles.derive(
    "torch-cuda-saturating",
    "torch >= 2.13 CUDA casts: float8_e4m3fn saturates finite overflow and Inf, bf16 NaN is 0x7FFF",
    unverify=_profiles.Unverified("bf16_nan", "SPEC 1.4: the CUDA bf16 NaN of torch 2.13 is not measured here "
                                  "(0x7FFF was measured with torch 2.11)"),
    fp8_overflow="saturate",
    bf16_nan="canonical",
    notes=_TORCH_PROBED + ".",
    evidence="read: pytorch#178817 (eager saturation from 2.13); the CPU cast of torch 2.13 measured here",
))
TORCH_CPU_NONSATURATING = _profiles.register(_profiles.derive(
    "torch-cpu-nonsaturating",
    "torch <= 2.12 CPU casts: float8_e4m3fn overflow and Inf give NaN (0x7F/0xFF), bf16 NaN is 0xFFFF",
    unverify=_profiles.Unverified("bf16_nan", "SPEC 1.4: the CPU bf16 NaN before torch 2.13 is not measured here"),
    bf16_nan="all_ones",
    notes=_TORCH_PROBED + ".",
    evidence="read: pytorch#178817 (eager casts did not saturate before 2.13)",
))

# (float8_e4m3fn overflow rule, bf16 NaN rule) -> the torch profile with those fields
TORCH_CAST_PROFILES: dict[tuple[str, str], str] = {
    ("saturate", "all_ones"): "torch-cpu",
    ("nan", "canonical"): "torch-cuda",
    ("saturate", "canonical"): TORCH_CUDA_SATURATING.name,
    ("nan", "all_ones"): TORCH_CPU_NONSATURATING.name,
}
