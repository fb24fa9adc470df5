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
if cmp -s <(jq -S "$strip" "$out.single.json") <(jq -S "$strip" "$out/merged.json"); then
  echo "1 passed, 0 failed"
else
  echo "FAIL: merged.json differs from the single run" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
