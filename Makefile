# Two commands for a fresh clone: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
KERNEL := $(VENV)/.gemv-kernel

.PHONY: demo test portability setup clean docs claims

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned: the CPU build of 2.13.0 is on local disk; a looser request pulls CUDA.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	bash scripts/system-deps.sh
	touch $(STAMP)

# glassformer's kernels (src/glassformer/nn/gemv.py: gemv.cpp, attend.cpp, fused.cpp), compiled once
# into the venv; a machine that cannot compile it decodes with PyTorch's GEMMs (the command says so)
$(KERNEL): $(STAMP) src/glassformer/nn/gemv.cpp src/glassformer/nn/attend.cpp src/glassformer/nn/fused.cpp
	$(BIN)/python -m glassformer.nn.gemv
	touch $(KERNEL)

setup: $(STAMP) $(KERNEL)

demo: setup
	$(BIN)/glassformer demo

test: setup
	$(BIN)/python -m pytest -n 2 -q tests
	$(MAKE) portability

# the numerical tests and bench --quick again, ISA capped and oneDNN off (scripts/portability.sh)
portability: setup
	BIN=$(BIN) bash scripts/portability.sh

clean:
	rm -rf $(VENV)

# The documentation site (mkdocs.yml): built offline into site/, warnings as errors; the notebooks
# are executed during the build so their pictures show. tests/test_docs_site.py runs the same build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# docs/claims.md, every row under the full protocol (hours on 2 cores; resumable: rerun to continue).
# `make claims RUNS=docs/claims/runs` takes the committed single runs instead of training them again.
claims: $(STAMP)
	$(BIN)/glassformer ablate all --out runs/ablate --jobs 2 $(if $(RUNS),--runs $(RUNS))
	$(BIN)/python scripts/claims_report.py runs/ablate
