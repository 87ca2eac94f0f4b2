#!/usr/bin/env bash
# The CI job of a kernel repository: certify the backend in my_kernel.py (beside this script in
# mxgate's docs; at the root of your repository in yours) with mxgate's conformance gate.
#
# mxgate is not published on a package index yet: MXGATE names a wheel built from a checkout of
# mxgate (pip wheel --no-deps -w dist PATH_TO_MXGATE), or the checkout itself. Pin the checkout's
# commit or keep the wheel: the gate's verdicts are part of your CI contract.
set -euo pipefail
: "${MXGATE:?set MXGATE to an mxgate wheel or checkout}"
python3 -m pip install --quiet "$MXGATE"
python3 -m pip install --quiet ml_dtypes  # what my_kernel.py itself imports
PYTHONPATH=. mxgate check --backend my_kernel:Backend --tier default --junitxml mxgate.xml --json mxgate.json
