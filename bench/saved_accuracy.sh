#!/usr/bin/env bash
# saved_accuracy.sh — how far a saved teacher's numbers are from the
# full-vocabulary KLD of the lockstep `kl`, on rand-llama (f16 reference;
# q8_0 and q4_K_M arms), built-in corpus, stream windows of 512, 8 windows:
#   1. v1 (float16 logits) against v2 (float32) at top-k = n_vocab: the error
#      float16 storage adds;
#   2. top-k 16 … 2048 (v1 and v2): the truncated KLD and the tail-corrected
#      lower bound against the full KLD, with the captured mass.
# Prints Markdown tables (the README quotes them). Needs ./build/kldeval and jq.
# Usage: bench/saved_accuracy.sh [OUT_DIR]   (default /tmp/kldeval-saved-accuracy)
set -euo pipefail
cd "$(dirname "$0")/.."
k=./build/kldeval
m=../shared/models/rand-llama
out=${1:-/tmp/kldeval-saved-accuracy}
rm -rf "$out" && mkdir -p "$out"
export KLDEVAL_DB="$out/runs.sqlite" # these runs are measurements, not the user's history
win=(--ctx 512 --chunks 8)

full() { # lockstep full-vocabulary KLD of an arm, same windows
  $k kl --ref $m/f16.gguf --arm "$m/$1.gguf" --chunking stream "${win[@]}" --quiet --json "$out/full-$1.json" >/dev/null
  jq -r '.kld.mean' "$out/full-$1.json"
}
score() { # JSON of an arm against a dump
  $k kl --reference-logits "$1" --arm "$m/$2.gguf" --quiet --json "$3" >/dev/null
}

for v in 1 2; do
  lg=$([ $v = 1 ] && echo f16 || echo f32)
  $k dump -m $m/f16.gguf --out "$out/v$v-full" --top-k 32000 --logits $lg "${win[@]}" --quiet >/dev/null
done
echo "| arm | full KLD (lockstep) | v2 top-32000 | v1 top-32000 | v1 error |"
echo "|---|---|---|---|---|"
for a in q8_0 q4_K_M; do
  f=$(full $a)
  score "$out/v2-full" $a "$out/v2-$a.json"; score "$out/v1-full" $a "$out/v1-$a.json"
  v2=$(jq -r '.kld.mean' "$out/v2-$a.json"); v1=$(jq -r '.kld.mean' "$out/v1-$a.json")
  printf '| %s | %.6f | %.6f | %.6f | %+.2e (%.2f%%) |\n' $a "$f" "$v2" "$v1" \
    "$(echo "$v1 - $f" | bc -l)" "$(echo "100 * ($v1 - $f) / $f" | bc -l)"
done
rm -rf "$out/v1-full" "$out/v2-full"

echo
echo "| arm | top-k | logits | captured mass | truncated KLD | KLD + tail bound | full KLD | bound / full |"
echo "|---|---|---|---|---|---|---|---|"
for kk in 16 64 256 1024 2048; do
  for lg in f16 f32; do
    $k dump -m $m/f16.gguf --out "$out/k$kk" --top-k $kk --logits $lg "${win[@]}" --quiet >/dev/null
    for a in q8_0 q4_K_M; do
      f=$(jq -r '.kld.mean' "$out/full-$a.json")
      score "$out/k$kk" $a "$out/k$kk-$a.json"
      read -r mass tr bd < <(jq -r '"\(.truncated.mass_mean) \(.kld.mean) \(.truncated.kld_bound.mean)"' "$out/k$kk-$a.json")
      printf '| %s | %d | %s | %.4f | %.6f | %.6f | %.6f | %.3f |\n' $a $kk $lg "$mass" "$tr" "$bd" "$f" \
        "$(echo "$bd / $f" | bc -l)"
    done
    rm -rf "$out/k$kk"
  done
done
