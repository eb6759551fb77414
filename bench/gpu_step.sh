#!/usr/bin/env bash
# The GRPO step on one GPU at several response caps (bench/loop.py), started detached so that it may
# outlast one device call (10 minutes; a 7B step is 1-2.5 minutes, the first ones compile), and watched by
# later calls, which must follow each other closely (the machine is given back after 30 s idle).
#
#   bench/gpu_step.sh start RUN_DIR ARCH CONFIG [key=value ...]   # returns at once
#   bench/gpu_step.sh watch RUN_DIR SECONDS [OUT]                  # wait up to SECONDS; copy results to OUT
#
# ARCH: qwen2.5-1.5b or qwen2.5-7b (a random-init model, made once in /tmp/random-ARCH);
# CAPS (default "4096 8192"), STEPS (2) and WARMUP (2) from the environment (PROFILE_STEP=N: bench/loop.py's
# --profile-step, its tables copied out by watch); DATA: codefu-easy's
# train.parquet (default .gpudata/codefu-easy/train.parquet, a folder to carry). Ray processes left on the
# GPU by an earlier run that was killed are ended first.
set -euo pipefail
cmd=${1:?start or watch}
run_dir=${2:?RUN_DIR}

case "$cmd" in
start)
  arch=${3:?ARCH}
  config=${4:?CONFIG}
  shift 4
  data=${DATA:-.gpudata/codefu-easy/train.parquet}
  mkdir -p "$run_dir"
  # anchored: only processes whose command line begins so (Ray's workers name themselves "ray::..."), not
  # a shell whose command line merely mentions them (an unanchored pattern killed the calling shell once)
  pkill -9 -f '^ray::' || true
  pkill -9 -f '^[^ ]*raylet' || true
  pkill -9 -f '^[^ ]*gcs_server' || true
  cat >"$run_dir/job.sh" <<JOB
set -x
export PYTHONUNBUFFERED=1
[ -e /tmp/random-$arch/config.json ] || python3 bench/make_random_model.py /tmp/random-$arch $arch || exit
for cap in ${CAPS:-4096 8192}; do
  python3 bench/loop.py --model /tmp/random-$arch --config $config --max-new-tokens \$cap \\
    --steps ${STEPS:-2} --warmup ${WARMUP:-2} ${PROFILE_STEP:+--profile-step $PROFILE_STEP} \\
    --out $run_dir/loop-\$cap.json data.train=$data $* \\
    >$run_dir/loop-\$cap.log 2>&1 || exit
done
JOB
  setsid nohup bash -c "bash $run_dir/job.sh; echo \$? > $run_dir/job.rc" >"$run_dir/job.log" 2>&1 </dev/null &
  echo "started: $run_dir/job.sh (log $run_dir/job.log)"
  ;;
watch)
  seconds=${3:?SECONDS}
  out=${4:-}
  end=$((SECONDS + seconds))
  while [ ! -e "$run_dir/job.rc" ] && [ $SECONDS -lt $end ]; do sleep 5; done
  for log in "$run_dir"/loop-*.log; do
    [ -e "$log" ] || continue
    echo "== $log"
    grep '^{"step"' "$log" || true
    tail -n 3 "$log"
  done
  if [ -n "$out" ]; then
    mkdir -p "$out"
    cp "$run_dir"/loop-* "$run_dir"/job.* "$out"/ 2>/dev/null || true
    for table in "$run_dir"/loop-*-profile/*.txt; do  # flat: only two folders down come back from a call
      [ -e "$table" ] && cp "$table" "$out/$(basename "$(dirname "$table")")-$(basename "$table")"
    done
  fi
  [ -e "$run_dir/job.rc" ] && echo "finished, rc $(cat "$run_dir/job.rc")" || echo "running"
  ;;
*)
  echo "unknown command: $cmd (start or watch)" >&2
  exit 2
  ;;
esac
