#!/usr/bin/env bash
# submit.sh — one kldeval evaluation as a Slurm array job of N shards plus a
# merge job that waits for all of them (--dependency=afterok).
#
#   deploy/slurm/submit.sh N OUT_DIR KL_FLAGS...
#   e.g. deploy/slurm/submit.sh 16 /shared/run1 --ref /shared/f16.gguf --arm /shared/q4.gguf --ctx 512
#
# OUT_DIR must be on a file system every node sees. Prints "ARRAY_JOB MERGE_JOB".
# Environment: KLDEVAL (default: the kldeval beside this checkout's build/),
# KLD_SHARD_MODE (mod|range), SBATCH_FLAGS (extra sbatch flags for both jobs,
# e.g. "--partition=gpu --time=2:00:00"), KLD_ARRAY_LIMIT (at most this many
# shards at once: --array=0-(N-1)%LIMIT), KLD_COMMAND (kl, or dump: the flags are
# dump's without --out; the shards go to OUT_DIR/shard-K, the dump to OUT_DIR/dump).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 3 ]; then
  sed -n '2,15p' "$0" >&2
  exit 2
fi
n=$1 out=$2
shift 2
case $n in '' | *[!0-9]* | 0) echo "submit.sh: N must be a positive integer, got '$n'" >&2; exit 2 ;; esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
export KLD_BIN=${KLDEVAL:-$(cd "$here/../.." && pwd)/build/kldeval}
export KLD_OUT=$out KLD_SHARDS=$n KLD_ARGS="$*" KLD_SHARD_MODE=${KLD_SHARD_MODE:-mod}
export KLD_COMMAND=${KLD_COMMAND:-kl}
range="0-$((n - 1))${KLD_ARRAY_LIMIT:+%$KLD_ARRAY_LIMIT}"
# shellcheck disable=SC2086
array=$(sbatch --parsable ${SBATCH_FLAGS:-} --array="$range" --output="$out/shard-%a.out" \
  "$here/kl-shard.sbatch")
array=${array%%;*} # "jobid;cluster" on federated clusters
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SBATCH_FLAGS:-} --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --output="$out/merge.out" "$here/kl-merge.sbatch")
echo "$array ${merge%%;*}"
