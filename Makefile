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

.PHONY: venv demo test test-fast bench bench-compare clean

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
	@echo "make demo: the cpu_smoke sweep (every method on stdit-tiny, gloo), then its report"
	@# the sweep ends with its status (slurm/cli.py): a `sweep status` after it printed the summary twice
	@$(VENV)/bin/dspbench sweep cpu_smoke --results results/cpu_smoke
	@$(VENV)/bin/dspbench report results/cpu_smoke

test: venv
	@echo "make test: the whole suite (SLURM tests skip unless slurm/local_cluster.sh is up)"
	@$(PY) -m pytest -q --durations=30

test-fast: venv
	$(PY) -m pytest -q -m "not slurm and not deepspeed" -x

BENCH_STORE := results/benchmarks

bench: venv
	@echo "make bench: the micro-benchmarks (tests/test_benchmarks.py) timed, saved under $(BENCH_STORE)/"
	@$(PY) -m pytest -q -p no:cacheprovider tests/test_benchmarks.py --benchmark-enable --timeout 1800 \
		--benchmark-storage=file://$(BENCH_STORE) --benchmark-autosave --benchmark-columns=median,iqr,rounds

bench-compare: venv
	@runs=$$(ls $(BENCH_STORE)/*/*.json 2>/dev/null | sort | tail -2); \
	if [ $$(echo "$$runs" | grep -c json) -lt 2 ]; then echo "make bench-compare: needs two saved runs in $(BENCH_STORE) (run make bench twice)"; exit 2; fi; \
	$(VENV)/bin/pytest-benchmark compare $$runs --group-by name --columns median,iqr,rounds; \
	echo "make bench-compare: which runs were noisy (bench/micro/noise.py; goals are judged only on quiet runs)"; \
	$(PY) -m dspbench.micro.noise $$runs

clean:
	rm -rf $(VENV) build *.egg-info
