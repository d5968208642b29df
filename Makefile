# dspbench: the two commands of the README, each doing its own set-up on a fresh clone.
#   make demo   the main job on the embedded default (local CPU sweep on gloo, ending in a report)
#   make test   the test suite
# torch is pinned for a CPU machine; on a GPU machine override it, e.g.
#   make test TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev
PY := $(VENV)/bin/python

.PHONY: venv demo test test-fast bench clean

$(VENV)/.installed: pyproject.toml examples/dsp_overlap/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_SPEC)
	DS_BUILD_OPS=0 $(PY) -m pip install -q -e ".[$(EXTRAS)]"
	$(PY) -m pip install -q -e examples/dsp_overlap
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(VENV)/bin/dspbench sweep cpu_smoke --results results/cpu_smoke
	$(VENV)/bin/dspbench sweep status results/cpu_smoke
	$(VENV)/bin/dspbench report results/cpu_smoke

test: venv
	$(PY) -m pytest -q

test-fast: venv
	$(PY) -m pytest -q -m "not slurm and not deepspeed" -x

bench: venv
	$(VENV)/bin/dspbench bench-switch --world 4 --sizes-mib 4 16 64

clean:
	rm -rf $(VENV) build *.egg-info
