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

# setuptools prints a banner on every editable install; it says nothing about this project.
PIP := PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q --disable-pip-version-check

$(VENV)/.installed: pyproject.toml examples/dsp_overlap/pyproject.toml
	@echo "make: creating $(VENV): $(TORCH_SPEC), dspbench[$(EXTRAS)] and the example plugin (minutes, once)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) --upgrade pip
	@$(PIP) $(TORCH_SPEC)
	@DS_BUILD_OPS=0 $(PIP) -e ".[$(EXTRAS)]"
	@$(PIP) -e examples/dsp_overlap
	@touch $@

venv: $(VENV)/.installed

demo: venv
	@echo "make demo: the cpu_smoke sweep (every method on stdit-tiny, gloo), its status, then its report"
	@$(VENV)/bin/dspbench sweep cpu_smoke --results results/cpu_smoke
	@$(VENV)/bin/dspbench sweep status results/cpu_smoke
	@$(VENV)/bin/dspbench report results/cpu_smoke

test: venv
	@echo "make test: the whole suite (SLURM tests skip unless slurm/local_cluster.sh is up)"
	@$(PY) -m pytest -q

test-fast: venv
	$(PY) -m pytest -q -m "not slurm and not deepspeed" -x

bench: venv
	@echo "make bench: the DSP switch micro-benchmark at 4, 16, 64 MiB per rank"
	@$(VENV)/bin/dspbench bench-switch --world 4 --sizes-mib 4 16 64

clean:
	rm -rf $(VENV) build *.egg-info
