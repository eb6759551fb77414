#!/usr/bin/env bash
# Self-repair turns in lock-step against asynchronous turns (rollout.async_turns, issue #20) on one GPU
# with the bundled model: the same two-turn training steps (configs/gpu-smollm2.yaml, rollout.turns=2,
# seed 0) run once each way; compare the steps' phases (generate, judge_tail, judge, train) after the
# first. Started detached (a device call may last 10 minutes); watch with
# `bench/gpu_learning.sh watch RUN_DIR SECONDS` (the runs' metrics: RUN_DIR/{lockstep,async}/metrics.jsonl).
#
#   bench/gpu_async_turns.sh RUN_DIR GGUF [STEPS] [key=value ...]
#
# The judge runs without the sandbox (judge.sandbox.kind=none): the GPU machine has no bubblewrap.
set -euo pipefail
run_dir=${1:?RUN_DIR}
gguf=${2:?GGUF}
steps=${3:-6}
shift $(($# < 3 ? $# : 3))
mkdir -p "$run_dir"
cat >"$run_dir/job.sh" <<JOB
set -x
overrides="trainer.model=$gguf judge.sandbox.kind=none loop.val_every=0 loop.save_every=0 \\
  loop.keep_final_state=false rollout.turns=2 loop.steps=$steps $*"
for mode in lockstep async; do
  async=\$([ \$mode = async ] && echo true || echo false)
  python3 -m codefu train --config configs/gpu-smollm2.yaml --run-dir $run_dir/\$mode \$overrides \\
    rollout.async_turns=\$async || exit
done
JOB
setsid nohup bash -c "bash $run_dir/job.sh; echo \$? > $run_dir/job.rc" >"$run_dir/job.log" 2>&1 </dev/null &
echo "started: $run_dir/job.sh (log $run_dir/job.log)"
