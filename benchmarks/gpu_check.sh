#!/usr/bin/env bash
# ε, PGA and AGOP on CUDA and on the CPU: times, CUDA peaks and max differences (issues 24, 34).
# One short command for a machine with a GPU (under ~8 minutes on an H200): SmolLM2-135M on both
# devices, then the scaled random-init 1 B models of the SmolLM2 and Gemma-3 families on CUDA only
# (--cuda-only: their CPU half takes many minutes). Without CUDA it prints "no CUDA, skipped" and
# runs SmolLM2's CPU half. GPU_CHECK_MODELS overrides the list (names: python -m benchmarks.gpu_check
# --help); extra arguments go to every run.
#   bash benchmarks/gpu_check.sh [--n-null 30] [--n-probes 16] [--cpu-only] [--small]
#   GPU_CHECK_MODELS="scaled-smollm2-0.5b" bash benchmarks/gpu_check.sh --small
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then PY=.venv/bin/python; fi
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  models="${GPU_CHECK_MODELS:-smollm2 scaled-smollm2-1b scaled-gemma3-1b}"
else
  echo "no CUDA, skipped the GPU half; the CPU half follows"
  models="${GPU_CHECK_MODELS:-smollm2}"
fi
for m in $models; do
  extra=()
  case "$m" in scaled-*1b) extra=(--cuda-only) ;; esac
  timeout "${GPU_CHECK_TIMEOUT:-900}" "$PY" -m benchmarks.gpu_check --model "$m" "${extra[@]}" "$@"
done
