#!/usr/bin/env bash
# kl-parallel.sh — one kldeval evaluation split into N shards on one machine
# (GNU parallel; xargs -P when parallel is not installed), then merged.
#
#   deploy/parallel/kl-parallel.sh N JOBS OUT_DIR KL_FLAGS...
#   e.g. deploy/parallel/kl-parallel.sh 8 4 run1 --ref f16.gguf --arm q4.gguf --threads 2
#
# JOBS shards run at once (give each --threads cores/JOBS). Writes
# OUT_DIR/part-K.kldpart, OUT_DIR/shard-K.out and OUT_DIR/merged.json and
# prints the merged report. Environment: KLDEVAL (the binary), KLD_SHARD_MODE,
# KLD_COMMAND (kl, or dump: KL_FLAGS are dump's without --out; shard K is
# written to OUT_DIR/shard-K and `merge --dump` assembles OUT_DIR/dump, the
# dump one run writes), e.g.
#   KLD_COMMAND=dump deploy/parallel/kl-parallel.sh 8 4 dump1 -m f16.gguf --top-k 256 --threads 2
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 4 ]; then
  sed -n '2,15p' "$0" >&2
  exit 2
fi
n=$1 jobs=$2 out=$3
shift 3
kldeval=${KLDEVAL:-$(cd "$here/../.." && pwd)/build/kldeval}
mode=${KLD_SHARD_MODE:-mod}
command=${KLD_COMMAND:-kl}
mkdir -p "$out"
shard() { # K KL_FLAGS...
  local k=$1
  shift
  local dest=(--partial "$out/part-$k.kldpart")
  [ "$command" = dump ] && dest=(--out "$out/shard-$k")
  "$kldeval" "$command" "$@" --quiet --shard "$k/$n" --shard-mode "$mode" \
    "${dest[@]}" >"$out/shard-$k.out" 2>&1 ||
    { echo "shard $k/$n failed: see $out/shard-$k.out" >&2; return 1; }
}
export -f shard
export kldeval n mode out command
if command -v parallel >/dev/null; then
  parallel --halt now,fail=1 -j "$jobs" shard {} "$@" ::: $(seq 0 $((n - 1)))
else
  seq 0 $((n - 1)) | xargs -P "$jobs" -I{} bash -c 'shard "$@"' _ {} "$@"
fi
parts=()
if [ "$command" = dump ]; then
  for ((k = 0; k < n; k++)); do parts+=("$out/shard-$k"); done
  exec "$kldeval" merge --dump "$out/dump" "${parts[@]}"
fi
for ((k = 0; k < n; k++)); do parts+=("$out/part-$k.kldpart"); done
"$kldeval" merge "${parts[@]}" --json "$out/merged.json"
