#!/usr/bin/env bash
# The GPU tier on a CUDA machine with torch and triton but no network: the wheels in WHEEL_DIR
# (sglang, array-api-compat; pure Python, so the cp311 tag does not matter) are unpacked onto
# the path and mxgate runs from the checkout.
# Usage: scripts/gpu_tier.sh WHEEL_DIR OUT_DIR
set -uo pipefail
wheels=${1:?wheel folder}; out=${2:?output folder}
site=$(mktemp -d)
for w in "$wheels"/*.whl; do python3 -m zipfile -e "$w" "$site"; done
export PYTHONPATH="$site:$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/nvidia-smi.txt" 2>&1
python3 -m mxgate.tools.gpu_probe > "$out/gpu_probe.json" 2> "$out/gpu_probe.err"
# the element ops on the card through the gate, and sglang's kernels compiled (its adapter tests;
# the gate judges no sglang op in test_elements, so naming those backends would exit 5)
python3 -m pytest -p no:cacheprovider -q -rs --durations=15 --device cuda \
  --backend oracle --backend torch --backend triton-dot-scaled \
  tests/test_sglang_adapter.py mxgate/conformance/test_elements.py \
  --mxgate-json "$out/gpu_matrix.json" --mxgate-md "$out/gpu_matrix.md" --junitxml "$out/gpu_junit.xml" 2>&1 | tee "$out/gpu_pytest.log"
# the oracle on the card against the oracle on the host: the encoders over all 2^32 inputs, the
# ops, the scorers (4 processes: the host halves of the comparisons overlap the card's work)
python3 -m pytest -p no:cacheprovider -q -rs --durations=15 -n 4 --device cuda -m gpu tests/test_twin.py tests/test_twin_layouts.py tests/test_twin_indexer.py tests/test_twin_scorers_aiter_fp4.py \
  tests/test_twin_scorers_aiter_fp8.py tests/test_twin_scorers_sglang.py tests/test_twin_scorers_vllm.py \
  --junitxml "$out/twin_junit.xml" 2>&1 | tee "$out/twin_pytest.log"
