#!/usr/bin/env bash
# The long learning run on one GPU machine (issue #14): configs/gpu-smollm2.yaml for loop.steps steps, then
# the evaluation of the final model against the base model on the test split. One device call may last 10 minutes,
# so the run is started detached and watched by later calls, which must follow each other closely (the
# machine is given back after 30 s idle, with the run on it).
#
#   bench/gpu_learning.sh start RUN_DIR GGUF [key=value ...]   # train, then eval; returns at once
#   bench/gpu_learning.sh watch RUN_DIR SECONDS [OUT]          # wait up to SECONDS; copy results to OUT
#
# The judge runs without the sandbox (judge.sandbox.kind=none): the GPU machine has no bubblewrap.
set -euo pipefail
cmd=${1:?start or watch}
run_dir=${2:?RUN_DIR}

case "$cmd" in
start)
  gguf=${3:?GGUF}
  shift 3
  mkdir -p "$run_dir"
  cat >"$run_dir/job.sh" <<JOB
set -x
python3 -m codefu train --config configs/gpu-smollm2.yaml --run-dir $run_dir \\
  trainer.model=$gguf judge.sandbox.kind=none $* || exit
python3 -m codefu eval --model $run_dir/model --baseline $gguf --dataset starter \\
  --split-file codefu/data/starter/split.json --split test --n 16 --k 1,4,16 --max-new-tokens 160 \\
  --temperature 0.6 --device cuda --dtype bfloat16 --batch-size 320 --sandbox none \\
  --out $run_dir/test-eval.json
JOB
  setsid nohup bash -c "bash $run_dir/job.sh; echo \$? > $run_dir/job.rc" >"$run_dir/job.log" 2>&1 </dev/null &
  echo "started: $run_dir/job.sh (log $run_dir/job.log)"
  ;;
watch)
  seconds=${3:?SECONDS}
  out=${4:-}
  end=$((SECONDS + seconds))
  while [ ! -e "$run_dir/job.rc" ] && [ $SECONDS -lt $end ]; do sleep 5; done
  if [ -n "$out" ]; then
    for f in metrics.jsonl test-eval.json job.log job.rc job.sh config.yaml report.html; do
      [ -e "$run_dir/$f" ] && cp "$run_dir/$f" "$out/"
    done
  fi
  [ -e "$run_dir/metrics.jsonl" ] && echo "steps done: $(wc -l <"$run_dir/metrics.jsonl")"
  tail -n 5 "$run_dir/job.log"
  [ -e "$run_dir/job.rc" ] && echo "finished, rc $(cat "$run_dir/job.rc")" || echo "running"
  ;;
*)
  echo "unknown command: $cmd (start or watch)" >&2
  exit 2
  ;;
esac
