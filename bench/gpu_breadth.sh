#!/usr/bin/env bash
# Issue #42's breadth screen on one GPU machine: the bundled model trained with each candidate setting
# (one seed each, all at once: a 135M model leaves the GPU mostly idle), every run validated on the
# starter set's validation split; the choice is read there, never on the test split.
# One device call may last 10 minutes, so the runs start detached and later calls watch them.
#
#   bench/gpu_breadth.sh start ROOT GGUF STEPS        # returns at once
#   bench/gpu_breadth.sh watch ROOT SECONDS [OUT]     # wait up to SECONDS; copy the records to OUT
#
# Each candidate is `python bench/learning.py --seeds 0 --split validation` with its overrides; the
# transformers engine, because the native engine sizes its KV cache from the whole GPU's free memory and
# several runs at once would take each other's. The judge runs without the sandbox (no bubblewrap there).
# The GPU image lacks Ray and gguf: `../shared/tools/gpu-wheels.sh gguf` fills .whl/ with both (carry it).
set -euo pipefail
cmd=${1:?start or watch}
root=${2:?ROOT}

declare -A CANDIDATES=(
  [baseline]=""
  [clip-higher]="trainer.clip_high=0.28"
  [entropy]="trainer.entropy_coef=0.002"
  [kl]="trainer.kl_coef=0.05"
)

case "$cmd" in
start)
  gguf=${3:?GGUF}
  steps=${4:?STEPS}
  mkdir -p "$root"
  common="trainer.model=$gguf judge.sandbox.kind=none rollout.engine=transformers rollout.batch_size=128
    data.prompts_per_step=16 rollout.n=8 trainer.mini_batch_size=64 loop.steps=$steps loop.val_every=20
    loop.save_every=1000 resources.judge_cpus=3"
  for name in "${!CANDIDATES[@]}"; do
    # shellcheck disable=SC2086
    setsid nohup bash -c "python3 bench/learning.py --config configs/gpu-smollm2.yaml --seeds 0 \
      --split validation --k 1,8,16 --device cuda --sandbox none --eval-batch-size 512 \
      --runs $root/$name --name breadth-$name --out $root/$name.json -- $common ${CANDIDATES[$name]}; \
      echo \$? > $root/$name.rc" >"$root/$name.log" 2>&1 </dev/null &
    echo "started $name (log $root/$name.log)"
  done
  ;;
watch)
  seconds=${3:?SECONDS}
  out=${4:-}
  end=$((SECONDS + seconds))
  done_all() { for name in "${!CANDIDATES[@]}"; do [ -e "$root/$name.rc" ] || return 1; done; }
  while ! done_all && [ $SECONDS -lt $end ]; do sleep 5; done
  for name in "${!CANDIDATES[@]}"; do
    metrics="$root/$name/seed0/metrics.jsonl"
    echo "$name: $([ -e "$metrics" ] && wc -l <"$metrics" || echo 0) steps, rc $(cat "$root/$name.rc" 2>/dev/null || echo running)"
    tail -n 2 "$root/$name.log"
    if [ -n "$out" ]; then
      [ -e "$root/$name.json" ] && cp "$root/$name.json" "$out/breadth-$name.json"
      [ -e "$metrics" ] && cp "$metrics" "$out/breadth-$name.metrics.jsonl"
    fi
  done
  ;;
*)
  echo "unknown command: $cmd (start or watch)" >&2
  exit 2
  ;;
esac
