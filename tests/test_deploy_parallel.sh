#!/usr/bin/env bash
# test_deploy_parallel.sh — the one-machine recipe (deploy/parallel/
# kl-parallel.sh: GNU parallel, or xargs -P without it) in range mode gives
# the single run's JSON (timings aside). Usage: test_deploy_parallel.sh KLDEVAL
set -euo pipefail
kldeval=$(realpath "$1")
out=$(realpath "${KLD_BUILD_DIR:-build}")/deploy-parallel
rm -rf "$out"
m=../shared/models/rand-llama
flags=(--ref "$m/f16.gguf" --arm "$m/q4_K_M.gguf" --max-docs 5 --ctx 40 --threads 1)
"$kldeval" kl "${flags[@]}" --quiet --json "$out.single.json" >/dev/null
KLDEVAL=$kldeval KLD_SHARD_MODE=range bash deploy/parallel/kl-parallel.sh 3 2 "$out" "${flags[@]}" >/dev/null
strip='del(.elapsed_s, .ref_seconds, .arm_seconds, .ref_tokens_per_s, .arm_tokens_per_s, .merged)'
failed=0
if ! cmp -s <(jq -S "$strip" "$out.single.json") <(jq -S "$strip" "$out/merged.json"); then
  echo "FAIL: merged.json differs from the single run" >&2
  failed=1
fi
# the same recipe for a dump: the assembled dump equals the single one
dflags=(-m "$m/f16.gguf" --ctx 24 --chunks 7 --top-k 8 --threads 1 --no-db)
rm -rf "$out.dump" "$out-d"
"$kldeval" dump "${dflags[@]}" --quiet --out "$out.dump" >/dev/null
KLDEVAL=$kldeval KLD_COMMAND=dump bash deploy/parallel/kl-parallel.sh 3 2 "$out-d" "${dflags[@]}" >/dev/null
for f in "$out.dump"/*; do
  name=$(basename "$f")
  if [ "$name" = manifest.json ]; then
    cmp -s <(jq -S 'del(.created)' "$f") <(jq -S 'del(.created, .merged)' "$out-d/dump/$name") ||
      { echo "FAIL: the assembled dump's manifest differs" >&2; failed=1; }
  elif ! cmp -s "$f" "$out-d/dump/$name"; then
    echo "FAIL: $out-d/dump/$name differs from the single dump's" >&2
    failed=1
  fi
done
echo "$((2 - failed)) passed, $failed failed"
exit $failed
