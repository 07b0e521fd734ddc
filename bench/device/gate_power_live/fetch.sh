#!/usr/bin/env bash
# Fetch the wheels of wheels.txt into .whl/ (git-ignored through .git/info/exclude) for the lent GPU
# machine (CPython 3.12, x86-64), from the index this machine's pip is configured for. Then, on the
# device (the run tool, carry [".whl"]), from the repository root:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#     .whl/*.whl && export PYTHONPATH=/tmp/site || exit
#   . bench/device/gate_power_live/setup.sh; python3 bench/device/gate_power_live/probe.py
#   . bench/device/gate_power_live/measure.sh m1 2 330 450     # TAG, runs per cell, stop after s, timeout s
# and render the merged trials here with bench/gate_power_live.py --table-from.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
mkdir -p .whl
grep -v '^#' bench/device/gate_power_live/wheels.txt | while read -r want; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 \
    --platform manylinux1_x86_64 -d .whl "$want"
done
du -sh .whl
