#!/usr/bin/env bash
# Self-repair on one GPU (issue #20) with the bundled model: pass@1 after each of 2 turns on the starter
# test split before and after a short training with rollout.turns=2, and the step time of two-turn
# steps against one-turn steps of the same config (configs/gpu-smollm2.yaml). Started detached (a device
# call may last 10 minutes); later calls watch it (bench/gpu_learning.sh watch RUN_DIR SECONDS OUT).
#
#   bench/gpu_self_repair.sh RUN_DIR GGUF [STEPS] [key=value ...]
#
# The judge runs without the sandbox (judge.sandbox.kind=none): the GPU machine has no bubblewrap.
set -euo pipefail
run_dir=${1:?RUN_DIR}
gguf=${2:?GGUF}
steps=${3:-10}
shift $(($# < 3 ? $# : 3))
mkdir -p "$run_dir"
cat >"$run_dir/job.sh" <<JOB
set -x
overrides="trainer.model=$gguf judge.sandbox.kind=none loop.val_every=0 loop.save_every=0 \\
  loop.keep_final_state=false $*"
heldout="--dataset starter --split-file codefu/data/starter/split.json --split test --n 16 --k 1,2 \\
  --max-new-tokens 160 --temperature 0.6 --engine native --device cuda --dtype bfloat16 --batch-size 320 \\
  --sandbox none --turns 2"
python3 -m codefu eval --model $gguf \$heldout --out $run_dir/base-turns2.json || exit
python3 -m codefu train --config configs/gpu-smollm2.yaml --run-dir $run_dir/one-turn \$overrides loop.steps=3 \\
  || exit
python3 -m codefu train --config configs/gpu-smollm2.yaml --run-dir $run_dir/two-turn \$overrides \\
  loop.steps=$steps rollout.turns=2 || exit
python3 -m codefu eval --model $run_dir/two-turn/model \$heldout --baseline $run_dir/base-turns2.json \\
  --out $run_dir/trained-turns2.json
JOB
setsid nohup bash -c "bash $run_dir/job.sh; echo \$? > $run_dir/job.rc" >"$run_dir/job.log" 2>&1 </dev/null &
echo "started: $run_dir/job.sh (log $run_dir/job.log)"
