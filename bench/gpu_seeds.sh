#!/usr/bin/env bash
# Learning results over 3 seeds on one GPU machine (issues #42, #44, #45): bench/learning.py for the CPU
# default's recipe (configs/cpu.yaml) with its roles on the GPU, in one or more arms run side by side, each
# evaluated with the base model on the starter set's test split:
#   full          the recipe as it is (sync, colocated, full fine-tuning): #42's result
#   one_step_off  the same, sampled one step ahead on the same card (split placement): #44's parity
#   lora          adapters of rank 32 at 10x the learning rate: #45's parity
# Each arm runs its 3 seeds at once (~10 minutes for the three on an H100 in 2026-12-07's session); the
# evaluations run together once the arm's seeds have trained. The bundled model's GGUF (98 MB) comes in two
# halves in later calls: the runs wait until GGUF exists. One device call may last 10 minutes, so the runs
# start detached and later calls watch them.
#
#   bench/gpu_seeds.sh start ROOT GGUF "ARMS"  # returns at once; e.g. "full one_step_off"
#   bench/gpu_seeds.sh watch ROOT SECONDS [OUT] # wait up to SECONDS, copying records and per-seed files to
#                                               # OUT every 30 s (a call cut off keeps the last copy)
#
# GGUF must appear whole: join the halves beside it and `mv` the result into place (a rename is atomic).
# The GPU image lacks Ray and bubblewrap: `../shared/tools/gpu-wheels.sh` fills .whl/ (carry it); the judge
# runs without the sandbox. Set CODEFU_COMMIT (the image has no git).
set -euo pipefail
cmd=${1:?start or watch}
root=${2:?ROOT}

case "$cmd" in
start)
  gguf=${3:?GGUF}
  arms=${4:-full}
  mkdir -p "$root"
  rm -f "$root/rc" "$root"/*.rc  # a finished earlier start's
  declare -A OVERRIDES=(
    [full]="resources.gpus_per_rank=1"
    [one_step_off]="loop.mode=one_step_off resources.colocate=false resources.gpus_per_rank=0.5 \
      resources.gpus_per_rollout_worker=0.5"
    [lora]="resources.gpus_per_rank=1 trainer.lora.rank=32 trainer.lr=2e-4"
  )
  r=$(printf %q "$root")
  g=$(printf %q "$gguf")
  jobs=""
  for arm in $arms; do
    [ -n "${OVERRIDES[$arm]+x}" ] || { echo "unknown arm: $arm (full, one_step_off, lora)" >&2; exit 2; }
    jobs+="(python3 bench/learning.py --config configs/cpu.yaml --seeds 0,1,2 --parallel 3 --device cuda \
      --sandbox none --eval-batch-size 256 --runs $r/$arm --out $r/$arm.json -- trainer.model=$g \
      rollout.device=cuda judge.sandbox.kind=none ${OVERRIDES[$arm]} >$r/$arm.log 2>&1; echo \$? >$r/$arm.rc) & "
  done
  setsid nohup bash -c "while [ ! -e $g ]; do sleep 2; done; $jobs wait; touch $r/rc" \
    >"$root/log" 2>&1 </dev/null &
  echo "started $arms (waiting for $gguf; logs $root/ARM.log)"
  ;;
watch)
  seconds=${3:?SECONDS}
  out=${4:-}
  copy_out() {
    for log in "$root"/*.log; do
      [ -e "$log" ] || continue
      arm=$(basename "$log" .log)
      mkdir -p "$out/$arm"
      cp "$log" "$out/$arm/"
      for f in "$root/$arm.json" "$root/$arm.rc" "$root/$arm/base-test-eval.json"; do
        if [ -e "$f" ]; then cp "$f" "$out/$arm/"; fi
      done
      for seed in 0 1 2; do
        for f in metrics.jsonl test-eval.json; do
          if [ -e "$root/$arm/seed$seed/$f" ]; then cp "$root/$arm/seed$seed/$f" "$out/$arm/seed$seed.$f"; fi
        done
      done
    done
  }
  end=$((SECONDS + seconds))
  next_copy=$((SECONDS + 30))
  while [ ! -e "$root/rc" ] && [ $SECONDS -lt $end ]; do
    sleep 5
    if [ -n "$out" ] && [ $SECONDS -ge $next_copy ]; then copy_out; next_copy=$((SECONDS + 30)); fi
  done
  if [ -n "$out" ]; then copy_out; fi
  for log in "$root"/*.log; do
    [ -e "$log" ] || continue
    arm=$(basename "$log" .log)
    status=running
    if [ -e "$root/$arm.rc" ]; then status="exit $(cat "$root/$arm.rc")"; fi
    echo "== $arm ($status): $(tail -n 2 "$log" | tr '\n' ' ')"
    for seed in 0 1 2; do
      d=$root/$arm/seed$seed
      if [ -e "$d/metrics.jsonl" ]; then echo "   seed $seed: $(wc -l <"$d/metrics.jsonl") steps"; fi
    done
  done
  if [ -e "$root/rc" ]; then echo "done"; else echo "running"; fi
  ;;
*)
  echo "unknown command: $cmd (start or watch)" >&2
  exit 2
  ;;
esac
