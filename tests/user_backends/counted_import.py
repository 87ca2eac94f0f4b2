"""A right backend that notes each import of itself (one line per process) in the markers folder."""

import os

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel

if os.environ.get("DISHONEST_MARKERS"):
    with open(os.path.join(os.environ["DISHONEST_MARKERS"], "imports"), "a", encoding="utf-8") as _log:
        _log.write(f"{os.getpid()}\n")

Backend = backend_from_functions("counted", kernel("e2m1.encode", lambda x: oracle.encode_e2m1(x, "gfx950"),
                                                   profile="gfx950"))
