#!/usr/bin/env bash
# ε, PGA and AGOP of SmolLM2-135M on CUDA and on the CPU: times and max differences (issue 24).
# One short command for a machine with a GPU (under ~5 minutes on an H200); without CUDA it prints
# "no CUDA, skipped" and runs the CPU half. Extra arguments go to python -m benchmarks.gpu_check.
#   bash benchmarks/gpu_check.sh [--n-null 30] [--n-probes 16] [--cpu-only] [--small]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then PY=.venv/bin/python; fi
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA, skipped the GPU half; the CPU half follows"
fi
exec timeout "${GPU_CHECK_TIMEOUT:-900}" "$PY" -m benchmarks.gpu_check "$@"
