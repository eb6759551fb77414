#!/usr/bin/env bash
# The whole CPU test suite, in two tiers: the default tier (`python3 -m pytest -q`, what a developer runs
# after each change: ~15 minutes on 2 cores, bench/tiers.py measures it) and the slow tier (`-m slow`: whole training runs, the
# real-model guard, multi-host launches). Arguments go to both, e.g. `scripts/test.sh -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pytest -q "$@"
python3 -m pytest -q -m slow "$@"
