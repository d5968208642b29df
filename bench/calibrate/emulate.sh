#!/usr/bin/env bash
# The emulated-cluster validation (docs/cost-model.md): netns + veth + bridge + tc tbf, gloo.
# Usage: bench/calibrate/emulate.sh [dspbench emulate flags...], e.g. --rate 200mbit --repeats 3
# `dspbench emulate` tears its namespaces down itself; the trap below is a second net for a
# killed Python (it removes only namespaces named dspb-*, which only this tool creates).
set -euo pipefail
PY="${PYTHON:-python}"
cleanup() { "$PY" -c 'from dspbench.calibrate.netns import teardown_all; teardown_all()' || true; }
trap cleanup EXIT
"$PY" -m dspbench.cli emulate "$@"
