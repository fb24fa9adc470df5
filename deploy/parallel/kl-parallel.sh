#!/usr/bin/env bash
# kl-parallel.sh — one kldeval evaluation split into N shards on one machine
# (GNU parallel; xargs -P when parallel is not installed), then merged.
#
#   deploy/parallel/kl-parallel.sh N JOBS OUT_DIR KL_FLAGS...
#   e.g. deploy/parallel/kl-parallel.sh 8 4 run1 --ref f16.gguf --arm q4.gguf --threads 2
#
# JOBS shards run at once (give each --threads cores/JOBS). Writes
# OUT_DIR/part-K.kldpart, OUT_DIR/shard-K.out and OUT_DIR/merged.json and
# prints the merged report. Environment: KLDEVAL (the binary), KLD_SHARD_MODE.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 4 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
n=$1 jobs=$2 out=$3
shift 3
kldeval=${KLDEVAL:-$(cd "$here/../.." && pwd)/build/kldeval}
mode=${KLD_SHARD_MODE:-mod}
mkdir -p "$out"
shard() { # K KL_FLAGS...
  local k=$1
  shift
  "$kldeval" kl "$@" --quiet --shard "$k/$n" --shard-mode "$mode" \
    --partial "$out/part-$k.kldpart" >"$out/shard-$k.out" 2>&1 ||
    { echo "shard $k/$n failed: see $out/shard-$k.out" >&2; return 1; }
}
export -f shard
export kldeval n mode out
if command -v parallel >/dev/null; then
  parallel --halt now,fail=1 -j "$jobs" shard {} "$@" ::: $(seq 0 $((n - 1)))
else
  seq 0 $((n - 1)) | xargs -P "$jobs" -I{} bash -c 'shard "$@"' _ {} "$@"
fi
parts=()
for ((k = 0; k < n; k++)); do parts+=("$out/part-$k.kldpart"); done
"$kldeval" merge "${parts[@]}" --json "$out/merged.json"
