"""How often the gate catches a kernel that is wrong on one call in twenty (truly random, so
every run differs): N runs of ``mxgate check`` per tier and op, each from a scratch directory,
counting the runs that exit 1.

    python benchmarks/flaky_catch_rate.py --runs 100 --tier default --tier quick

The planted kernels are tests/user_backends/dishonest_backends.py's ``flaky_e2m1`` and
``flaky_mx`` (e2m1.encode and mx.quantize, each wrong on a call with probability 0.05).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

USER_BACKENDS = Path(__file__).resolve().parent.parent / "tests" / "user_backends"
BACKENDS = {"e2m1.encode": "dishonest_backends:flaky_e2m1", "mx.quantize": "dishonest_backends:flaky_mx"}


def one_run(backend: str, tier: str) -> int:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(USER_BACKENDS), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory(prefix="mxgate-flaky-") as scratch:
        done = subprocess.run([sys.executable, "-m", "mxgate", "check", "--backend", backend, "--tier", tier],
                              cwd=scratch, env=env, capture_output=True, text=True)
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--tier", action="append", choices=("quick", "default"), default=None)
    parser.add_argument("--op", action="append", choices=tuple(BACKENDS), default=None)
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    args = parser.parse_args()
    for tier in args.tier or ["default"]:
        for op in args.op or list(BACKENDS):
            with ThreadPoolExecutor(args.jobs) as pool:
                codes = list(pool.map(lambda _: one_run(BACKENDS[op], tier), range(args.runs)))
            caught = sum(code == 1 for code in codes)
            other = sorted({code for code in codes if code not in (0, 1)})
            print(f"{op} tier {tier}: caught in {caught} of {args.runs} runs"
                  + (f" (other exit statuses: {other})" if other else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
