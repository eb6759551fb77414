#!/usr/bin/env bash
# A few steps of the loop on one GPU with a random-init model (bench/make_random_model.py), for A/B
# measurements of the step and its parts (offload, critic, ...). Prints one summary line per step.
#
#   [CONFIG=configs/gpu-7b.yaml] bench/gpu_loop_ab.sh MODEL_DIR OUT_DIR NAME [key=value ...]
#   (from the repository root; the config defaults to configs/gpu-1.5b.yaml; later key=value win)
#
# The workload: configs/gpu-1.5b.yaml on the starter problems (char-level tokenizer: long prompts), 1,024
# new tokens per response (a random model rarely stops), no dynamic sampling, no sandbox (the GPU machine
# has no bubblewrap), no validation or checkpoints.
set -euo pipefail
model=${1:?MODEL_DIR}
out=${2:?OUT_DIR}
name=${3:?NAME}
shift 3
mkdir -p "$out"
rm -rf "/tmp/runs/$name"
if ! python3 -m codefu train --config "${CONFIG:-configs/gpu-1.5b.yaml}" --run-dir "/tmp/runs/$name" \
  trainer.model="$model" judge.sandbox.kind=none data.train=starter data.val=null data.max_prompt_tokens=null \
  algo.dynamic_sampling=false rollout.max_new_tokens=1024 loop.steps=3 loop.val_every=0 \
  loop.save_every=0 loop.keep_final_state=false "$@" >"$out/$name.log" 2>&1; then
  tail -40 "$out/$name.log"
  exit 1
fi
cp "/tmp/runs/$name/metrics.jsonl" "$out/$name.metrics.jsonl"
python3 - "$out/$name.metrics.jsonl" "$name" <<'PY'
import json, sys
keys = ["timing/step_s", "timing/generate_s", "timing/judge_s", "timing/train_s", "timing/critic_s",
        "timing/sync_s", "timing/offload_s", "timing/reload_s", "memory/optimizer_offloaded_gb",
        "rollout/kv_cache_tokens", "rollout/decode_batch_mean", "rollout/preemptions", "perf/tokens"]
for line in open(sys.argv[1]):
    row = json.loads(line)
    shown = " ".join(f"{k.split('/')[1]}={row[k]:.4g}" for k in keys if k in row)
    print(f"{sys.argv[2]} step {row['step']}: {shown}")
PY
