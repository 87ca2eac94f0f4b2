"""A backend whose import takes seconds (as importing torch and a source tree does on a busy
runner) and whose op raises at once: the op's verdict must be its own, not a timeout."""

import time

time.sleep(float(__import__("os").environ.get("SLOW_IMPORT_SECONDS", "6")))

from mxgate.kernels.functions import backend_from_functions, kernel  # noqa: E402


def _raises(x):
    raise ValueError("planted ValueError after a slow import")


Backend = backend_from_functions("slow-import", kernel("e2m1.encode", _raises, profile="gfx950"))
