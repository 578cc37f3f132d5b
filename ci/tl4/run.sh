#!/usr/bin/env bash
# Second CI lane: transformer-lens 4.x WITHOUT sae_lens.
#
# Creates .venv-tl4 (reused when present; TL4_FRESH=1 rebuilds it), installs the project with
# transformer-lens >=4,<5 and torch==2.13.0, checks that sae_lens is absent, then runs the tests
# that must pass there: capture via TransformerBridge, the metrics, the report, sweeps, crash/resume,
# determinism, the property suite and the security checks. Tests that need HookedTransformer carry
# the needs_hooked marker (tests/conftest.py adds it to users of the tiny_model fixture) and are
# deselected here; an unmarked one fails with an ImportError that says to mark it.
#
# Usage: ci/tl4/run.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
VENV="$ROOT/.venv-tl4"
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
T0=$(date +%s)

if [[ "${TL4_FRESH:-0}" == "1" ]]; then rm -rf "$VENV"; fi
if [[ ! -x "$VENV/bin/python" ]]; then
    "$PY" -m venv "$VENV"
    echo '*' > "$VENV/.gitignore"   # keep the lane's venv out of git
fi
PIP="$VENV/bin/pip"
"$PIP" install -q -c ci/tl4/constraints.txt -e . \
    "pytest>=8,<10" "pytest-timeout>=2.3,<3" "hypothesis>=6.100,<7" "psutil>=5.9,<8" \
    "pandas>=2.1,<4"
"$PIP" uninstall -q -y sae-lens sae_lens 2>/dev/null || true
T1=$(date +%s)

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md, importlib.util, sys
tl = md.version("transformer-lens")
assert tl.split(".")[0] == "4", f"expected transformer-lens 4.x, got {tl}"
assert importlib.util.find_spec("sae_lens") is None, "sae_lens must be absent in the TL-4 lane"
import torch
print(f"TL-4 lane: transformer-lens {tl}, torch {torch.__version__}, python {sys.version.split()[0]}, no sae_lens")
PY

# The subset that must pass on TL 4 (files missing in this checkout are skipped, not errors).
TESTS=(
    tests/unit/capture/test_capture.py
    tests/unit/report/test_report.py
    tests/unit/registry/test_registry.py
    tests/unit/metrics/test_capacity.py
    tests/unit/metrics/test_pga.py
    tests/unit/families/interaction/test_interaction.py
    tests/unit/families/sae/test_sae.py
    tests/unit/runtime/test_jobs.py
    tests/unit/runs/test_sweep.py
    tests/unit/commands/test_sweep_cli.py
    tests/unit/metrics/test_spectral.py
    tests/unit/runtime/test_crash_resume.py
    tests/unit/report/test_determinism.py
    tests/unit/metrics/test_properties.py
    tests/unit/house/test_security.py
    tests/unit/house/test_memory.py
    tests/unit/models/test_tl4.py
)
PRESENT=()
for t in "${TESTS[@]}"; do [[ -e "$t" ]] && PRESENT+=("$t"); done
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TL_GEOMETRY_LANE=tl4
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not integration and not needs_hooked" "${PRESENT[@]}" "$@"
RC=$?
set -e
T2=$(date +%s)
echo "TL-4 lane: install/check $((T1 - T0)) s, tests $((T2 - T1)) s, total $((T2 - T0)) s, pytest exit $RC"
exit $RC
