#!/usr/bin/env bash
# Learning results over seeds on one GPU machine (issues #42, #44, #45): bench/learning.py in one or more
# arms run side by side, each evaluated with the base model on a split of the starter set. Arms (each runs
# its seeds at once; the evaluations run together once an arm's seeds have trained):
#   full          configs/cpu.yaml's recipe (30 steps x 32 samples; sync, colocated, full fine-tuning): #42
#   one_step_off  the same, sampled one step ahead on the same card (split placement): #44's parity
#   lora          adapters of rank 32 at 10x the learning rate (2e-4): #45's parity
#   lora_lr1e-4, lora_lr5e-4, lora_alpha64, lora_rank64 (alpha 64 too: the same scaling)
#                 LoRA's candidates for tuning (read them with SPLIT=validation, never on test)
#   gpu200        configs/gpu-smollm2.yaml's 200 steps at 32 prompts x 8 samples, a checkpoint every 100, the
#                 native engine: the setup of the 2026-12-01 run, 4.0 s a step, 200 steps in 15.7 minutes on
#                 an H200 (x 16 samples took 8-11 s a step: it does not fit a session). #42's GPU goal; the
#                 only arm and seed of its start (SEEDS=0 K=1,16)
# ~10 minutes for three seeds of the CPU recipe on an H100 (2026-12-07: six runs at once, 10-12 minutes).
# The bundled model's GGUF (98 MB) comes in two halves in later calls: the runs wait until GGUF exists.
# One device call may last 10 minutes, so the runs start detached and later calls watch them.
#
#   [SEEDS=0,1,2] [SPLIT=test] [K=1,8] bench/gpu_seeds.sh start ROOT GGUF "ARMS"  # returns at once
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
  seeds=${SEEDS:-0,1,2}
  split=${SPLIT:-test}
  k=${K:-1,8}
  lora32="resources.gpus_per_rank=1 trainer.lora.rank=32"
  declare -A OVERRIDES=(
    [full]="resources.gpus_per_rank=1"
    [one_step_off]="loop.mode=one_step_off resources.colocate=false resources.gpus_per_rank=0.5 \
      resources.gpus_per_rollout_worker=0.5"
    [lora]="$lora32 trainer.lr=2e-4"
    [lora_lr1e-4]="$lora32 trainer.lr=1e-4"
    [lora_lr5e-4]="$lora32 trainer.lr=5e-4"
    [lora_alpha64]="$lora32 trainer.lr=2e-4 trainer.lora.alpha=64"
    [lora_rank64]="resources.gpus_per_rank=1 trainer.lora.rank=64 trainer.lora.alpha=64 trainer.lr=2e-4"
    [gpu200]="rollout.n=8 loop.save_every=100"
  )
  n_seeds=$(echo "$seeds" | tr ',' ' ' | wc -w)
  # its native engine takes rollout.gpu_memory_fraction of the card less what others hold when it starts:
  # engines started together on one card (other seeds, other arms) would leave each other nothing
  if [[ " $arms " == *" gpu200 "* ]] && { [ "$n_seeds" != 1 ] || [ "$arms" != gpu200 ]; }; then
    echo "gpu200 runs alone, one seed per start (SEEDS=0 ... \"gpu200\"): got SEEDS=$seeds, arms $arms" >&2
    exit 2
  fi
  r=$(printf %q "$root")
  g=$(printf %q "$gguf")
  jobs=""
  for arm in $arms; do
    [ -n "${OVERRIDES[$arm]+x}" ] || { echo "unknown arm: $arm (${!OVERRIDES[*]})" >&2; exit 2; }
    config=configs/cpu.yaml
    if [ "$arm" = gpu200 ]; then config=configs/gpu-smollm2.yaml; fi
    rm -f "$root/$arm-$split.json"  # an earlier start's record of this arm and split
    q=$(printf '%q ' --config "$config" --seeds "$seeds" --parallel "$n_seeds" --split "$split" --k "$k")
    jobs+="(python3 bench/learning.py $q --device cuda --sandbox none --eval-batch-size 256 --runs $r/$arm \
      --out $r/$arm-$split.json -- trainer.model=$g rollout.device=cuda judge.sandbox.kind=none \
      ${OVERRIDES[$arm]} >$r/$arm.log 2>&1; echo \$? >$r/$arm.rc) & "
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
      for f in "$root/$arm"-*.json "$root/$arm.rc" "$root/$arm"/base-*-eval.json "$root/$arm"/seed*.out; do
        if [ -e "$f" ]; then cp "$f" "$out/$arm/"; fi
      done
      for d in "$root/$arm"/seed*/; do
        [ -d "$d" ] || continue
        for f in "$d"metrics.jsonl "$d"*-eval.json; do
          if [ -e "$f" ]; then cp "$f" "$out/$arm/$(basename "$d").$(basename "$f")"; fi
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
    for d in "$root/$arm"/seed*/; do
      if [ -e "$d/metrics.jsonl" ]; then echo "   $(basename "$d"): $(wc -l <"$d/metrics.jsonl") steps"; fi
    done
  done
  if [ -e "$root/rc" ]; then echo "done"; else echo "running"; fi
  ;;
*)
  echo "unknown command: $cmd (start or watch)" >&2
  exit 2
  ;;
esac
