#!/usr/bin/env bash
# Issue #44's one-GPU figure: bench/loop.py's workload (a random-init model of Qwen2.5-1.5B's shapes, the
# 4k cap) in loop.mode sync (colocated: rollout and training take turns on the GPU, today's default), in
# one_step_off (split on the one GPU: the trainer and the engine each a share, the next step sampled while
# this one trains) and in async (the same, and new weights reach the engine mid-generation), and with
# partial rollouts (loop.over_provision 0.5: april colocated in sync mode, april_async split in async),
# one after the other in one session on one card. One device call may last 10 minutes, so the runs start detached and
# later calls watch them.
#
#   bench/gpu_modes.sh start ROOT [STEPS [MODES]]  # returns at once; STEPS measured steps per mode (3),
#                                                # MODES e.g. "sync april" (default: sync
#                                                # one_step_off async; also april, april_async)
#   bench/gpu_modes.sh watch ROOT SECONDS [OUT]  # wait up to SECONDS; copy the records to OUT
#
# The engine's KV cache takes rollout.gpu_memory_fraction of the card: 0.85 colocated (the trainer's
# optimizer state leaves the GPU while it decodes), 0.45 split (the trainer keeps its state beside it).
# The GPU image lacks Ray: `../shared/tools/gpu-wheels.sh` fills .whl/ (carry it); set CODEFU_COMMIT.
# DATA: codefu-easy's train.parquet (default .gpudata/codefu-easy/train.parquet, a folder to carry: the
# ../shared beside the checkout does not travel to the GPU machine).
set -euo pipefail
cmd=${1:?start or watch}
root=${2:?ROOT}

case "$cmd" in
start)
  steps=${3:-3}
  modes=${4:-sync one_step_off async}
  data=${DATA:-.gpudata/codefu-easy/train.parquet}
  [ -e "$data" ] || { echo "no $data: carry it (DATA=PATH names another)" >&2; exit 2; }
  mkdir -p "$root"
  split="resources.colocate=false resources.gpus_per_rank=0.5 resources.gpus_per_rollout_worker=0.5 \
    rollout.gpu_memory_fraction=0.45"
  declare -A OVERRIDES=(
    [sync]=""
    [one_step_off]="loop.mode=one_step_off $split"
    [async]="loop.mode=async loop.max_staleness=1 $split"
    [april]="loop.over_provision=0.5"
    [april_async]="loop.mode=async loop.max_staleness=2 loop.over_provision=0.5 $split"
  )
  runs=""
  for mode in $modes; do
    runs+="python3 bench/loop.py --model $root/r15 --config configs/gpu-1.5b.yaml --max-new-tokens 4096 \
      --warmup 1 --steps $steps --no-parts --out $root/$mode.json data.train=$data ${OVERRIDES[$mode]}; "
  done
  setsid nohup bash -c "set -e; python3 bench/make_random_model.py $root/r15 qwen2.5-1.5b; $runs
    echo 0 > $root/rc" >"$root/log" 2>&1 </dev/null &
  echo "started $modes (log $root/log)"
  ;;
watch)
  seconds=${3:?SECONDS}
  out=${4:-}
  end=$((SECONDS + seconds))
  while [ ! -e "$root/rc" ] && [ $SECONDS -lt $end ] && pgrep -f "bench/(loop|make_random_model).py" >/dev/null; do
    sleep 5
  done
  grep -E '"step"|summary|Error|error' "$root/log" | tail -n 12 || true
  [ -e "$root/rc" ] && echo "done" || { pgrep -f bench/loop.py >/dev/null && echo running || echo "stopped (see log)"; }
  if [ -n "$out" ]; then
    for f in sync.json one_step_off.json async.json april.json april_async.json log; do [ -e "$root/$f" ] && cp "$root/$f" "$out/gpu-modes-$f"; done
  fi
  ;;
*)
  echo "unknown command: $cmd (start or watch)" >&2
  exit 2
  ;;
esac
