"""``mxgate sweep``: every float32 input through an element encoder.

Without --device: the oracle's E2M1 encoder against an independent reference on the host.
With --device cpu|cuda --backend NAME: the backend's encoder (e2m1, e4m3fn or e4m3fnuz) on all
2^32 inputs, judged on the device by the torch twin under the op's profile (or --profile).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from mxgate.op_table import OpName
from mxgate.tools.sweep import AGAINST, TOTAL, CHUNK_BITS, sweep_e2m1

if TYPE_CHECKING:
    from mxgate.kernels.isolation import BackendFault

CHUNKS = TOTAL >> CHUNK_BITS
DEVICE_CHUNK_BITS = 28  # inputs per step of a device sweep
DEVICE_CHUNKS = TOTAL >> DEVICE_CHUNK_BITS
ENCODERS = {"e2m1": OpName.E2M1_ENCODE, "e4m3fn": OpName.E4M3FN_ENCODE, "e4m3fnuz": OpName.E4M3FNUZ_ENCODE}
EPILOG = f"""exit status:
  0    no mismatch on the inputs swept (differences by design, the NaN rule against
       ml_dtypes, are counted apart and do not fail)
  1    mismatches: the oracle and the reference disagree, or (--device) the backend and
       the twin do (examples are printed); with --device also a backend that failed to
       load, or an encoder that raised, crashed its worker, hung past --timeout or forged
       its worker's reply (the backend runs in a worker process of its own, as in check)
  2    bad usage, said in one line before any work: unknown profile or backend, --chunks
       outside [1, {CHUNKS}] (with --device: [1, 2^(32 - --chunk-bits)]), --chunk-bits
       outside [16, 28], --workers < 1, --against ml_dtypes without ml_dtypes installed,
       --device without --backend or torch, --device cuda without a CUDA device, e4m3
       without --device
  3    an internal error of mxgate (a bug; --debug shows the traceback)
  5    --device: the backend (or its encoder) cannot run here; the reason is printed
  141  standard output was closed before the summary was written
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("sweep", help="exhaustive sweep of an element encoder over all 2^32 float32 inputs",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("format", choices=tuple(ENCODERS), help="the element encoder to sweep (e4m3: --device only)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="judge a backend's encoder on this device with the torch twin")
    parser.add_argument("--backend", default=None, help="--device: the backend whose encoder is swept")
    parser.add_argument("--chunk-bits", type=int, default=DEVICE_CHUNK_BITS,
                        help=f"--device: 2^N inputs per step, N in [16, 28] (default {DEVICE_CHUNK_BITS}; less device memory)")
    parser.add_argument("--profile", default=None,
                        help="oracle profile (see `mxgate profiles`; default gfx950, with --device the op's own)")
    parser.add_argument("--against", choices=AGAINST, default="exact-table", help="independent reference")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: available cores)")
    parser.add_argument(
        "--chunks", type=int, default=None, help=f"only the first N (1 to {CHUNKS}) of the {CHUNKS} chunks of 2^{CHUNK_BITS} inputs"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="--device: per-call limit of the backend's sweep calls (default 300); past it the "
                             "sweep fails")
    parser.add_argument("--startup-timeout", type=float, default=None, metavar="SECONDS",
                        help="--device: limit on loading the backend in its worker (default 600)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.device is not None or args.backend is not None:
        return _device_sweep(args)
    if args.format != "e2m1":
        raise ValueError(f"{args.format}: the host sweep covers e2m1; sweep a backend's {args.format} encoder with --device")
    if args.profile is None:
        args.profile = "gfx950"
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.chunks is not None and not 1 <= args.chunks <= CHUNKS:
        raise ValueError(f"--chunks must lie in [1, {CHUNKS}] (chunks of 2^{CHUNK_BITS} inputs), got {args.chunks}")
    chunks = None if args.chunks is None else range(args.chunks)
    result = sweep_e2m1(args.profile, args.against, args.workers, chunks, progress=not args.quiet)
    print(result.summary(), flush=True)  # a closed pipe shows here, not at interpreter exit
    return 1 if result.mismatches else 0


def _device_sweep(args: argparse.Namespace) -> int:
    from mxgate import kernels
    from mxgate.oracle import profiles
    from mxgate.tools.optional import require, require_installed

    if args.device is None or args.backend is None:
        raise ValueError("--device and --backend go together: the device sweep judges a backend's encoder")
    if not 16 <= args.chunk_bits <= DEVICE_CHUNK_BITS:
        raise ValueError(f"--chunk-bits must lie in [16, {DEVICE_CHUNK_BITS}], got {args.chunk_bits}")
    most = TOTAL >> args.chunk_bits
    if args.chunks is not None and not 1 <= args.chunks <= most:
        raise ValueError(f"--chunks must lie in [1, {most}] (chunks of 2^{args.chunk_bits} inputs), got {args.chunks}")
    if args.profile is not None:
        profiles.get(args.profile)  # an unknown profile is a usage error before any work
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton backends run on the CPU interpreted
    purpose = "mxgate sweep --device (the twin runs on torch)"
    if args.device == "cuda":
        if not require("torch", purpose).cuda.is_available():
            raise ValueError("--device cuda: torch sees no CUDA device here")
    else:  # the sweep runs in the backend's worker: this process need not import torch
        require_installed("torch", purpose)

    from mxgate.conformance.plugin import resolve_timeouts
    from mxgate.kernels import isolation

    kernels.check_name(args.backend)
    call, startup = resolve_timeouts(args.timeout, args.startup_timeout)
    op_name = ENCODERS[args.format]
    try:
        backend = isolation.load(args.backend, args.device, timeout=call, startup_timeout=startup)
    except isolation.BackendFault as fault:
        _not_torch(fault, purpose)
        print(f"mxgate sweep: fail: {args.backend}: {fault.cause}", flush=True)
        return 1
    try:
        return _judge_sweep(args, backend, op_name)
    except isolation.BackendFault as fault:
        _not_torch(fault, purpose)
        print(f"mxgate sweep: fail: {args.backend} {op_name}: {fault.cause}", flush=True)
        return 1
    finally:
        backend.close()


def _not_torch(fault: BackendFault, purpose: str) -> None:
    """A fault that an import error ended (the twin's sweep imports torch in the worker): a
    torch that no fresh interpreter can import is the installation's (usage, status 2), not the
    backend's."""
    from mxgate.tools.optional import require_importable

    if "ImportError" in fault.cause or "ModuleNotFoundError" in fault.cause:
        require_importable("torch", purpose)


def _judge_sweep(args: argparse.Namespace, backend, op_name: str) -> int:
    status = backend.available()
    if status and not backend.implements(op_name):
        print(f"mxgate sweep: not supported here: {args.backend} has no {op_name} "
              f"(its ops: {', '.join(sorted(map(str, backend.ops())))})", flush=True)
        return 5
    status = backend.available_for(op_name) if status else status
    if not status:
        print(f"mxgate sweep: not supported here: {args.backend} {op_name} on {args.device}: {status.reason}", flush=True)
        return 5
    op = backend.op(op_name)
    profile = args.profile or op.profile
    chunks = list(range(TOTAL >> args.chunk_bits if args.chunks is None else args.chunks))
    fmt = "e2m1" if args.format == "e2m1" else args.format
    from mxgate.twin.sweep import sweep_op

    result = backend.device_sweep(op_name, profile, fmt, chunks, args.chunk_bits, sweep=sweep_op)
    print(f"{args.backend} {op_name} on {args.device}: {result.summary()}", flush=True)
    return 1 if result.mismatches else 0
