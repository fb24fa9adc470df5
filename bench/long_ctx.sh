# bench/long_ctx.sh — sourced by bench/run for --long CTX[,CTX...] (uses its
# variables: repo, build, cache, logs, records, reps, llama, cpu, cores,
# simd, long_shape, long_llama_max). One KLD run per context length of a TinyLlama-shaped f16
# reference against its q4_K_M, synthesized with a training context as
# long as the longest window (at least 32,768), through the CLI as a user runs it:
#   kldeval kl --chunking llamacpp --ctx N --chunks 1 (llama-perplexity's
#   semantics: one window of N tokens, positions N/2 .. N-2 scored)
# beside llama-perplexity's base pass and KLD pass over the same text and
# window (with LLAMA_CPP_DIR), alternated round by round. Each process runs
# under /usr/bin/time: its wall time and peak RSS. kldeval's peak RSS is held
# to the memory plan `kldeval inspect --plan --ctx N` prints for the two
# models (kl_plan_bytes in vs_llama.sh).

# --long-shape: tinyllama (the issue's rows) or d512 (a d512, 4-layer,
# V 32,000 model: attention dominates sooner, and 131,072 tokens fit in hours)
long_shape_args() {
  case "$1" in
    tinyllama) echo "--dim 2048 --layers 22 --heads 32 --kv-heads 4 --ff 5632 --vocab 32000" ;;
    d512) echo "--dim 512 --layers 4 --heads 8 --kv-heads 4 --ff 1536 --vocab 32000" ;;
    *) return 1 ;;
  esac
}

# The synthesized model of shape $1, type $2, training context $3 (made once).
long_model() {
  local args name path
  args=$(long_shape_args "$1") || { echo "bench/run: --long-shape '$1' is not tinyllama or d512" >&2; return 1; }
  name=$(awk '{printf "d%s-l%s-h%s-kv%s-ff%s-v%s", $2, $4, $6, $8, $10, $12}' <<<"$args")
  path=$cache/synth-$name-c$3-s42-$2.gguf
  if [ ! -s "$path" ]; then
    echo "bench/run: synthesizing $path (once; minutes)" >&2
    # shellcheck disable=SC2086
    "$build/kldeval" synth $args --ctx "$3" --type "$2" -o "$path.tmp$$" > "$logs/long-synth-$2.log" 2>&1 &&
      mv "$path.tmp$$" "$path" || { echo "bench/run: synthesis failed (see $logs/long-synth-$2.log)" >&2; return 1; }
  fi
  echo "$path"
}

# The built-in corpus repeated until it holds at least $1 bytes (llama-perplexity
# needs 2 × ctx tokens of text even for one window).
long_text() {
  local path=$logs/long-corpus-$1.txt
  if [ ! -s "$path" ]; then
    : > "$path"
    while [ "$(stat -c %s "$path")" -lt "$1" ]; do cat "$repo/data/builtin_corpus.txt" >> "$path"; done
  fi
  echo "$path"
}

long_record() { # name unit value ctx round [peak_rss_bytes]
  jq -cn --arg n "$1" --arg u "$2" --arg v "$3" --argjson c "$4" --argjson r "$5" --arg rss "${6:-}" \
    '{bench: "long_ctx", name: $n, unit: $u, median: ($v | tonumber? // null), ctx: $c, round: $r}
     + (if ($rss | tonumber? // null) != null then {peak_rss_bytes: ($rss | tonumber)} else {} end)' >> "$logs/long-rounds.jsonl"
}

# Runs "$@" under /usr/bin/time; prints "wall_s peak_rss_bytes" (empty on failure).
timed() { # log -- command...
  local log=$1 tf=$logs/.time.$$
  shift
  /usr/bin/time -f '%e %M' -o "$tf" "$@" > "$log" 2>&1 || { rm -f "$tf"; return 1; }
  awk '{printf "%s %.0f\n", $1, $2 * 1024}' "$tf"
  rm -f "$tf"
}

run_long() { # comma-separated context lengths
  # one pair of models for every length: training context 32,768 (the issue's
  # longest row) or the longest window asked for
  local list=$1 n ctx max=32768 ref arm text r t rss plan
  IFS=, read -r -a ctxs <<<"$list"
  for ctx in "${ctxs[@]}"; do
    [[ "$ctx" =~ ^[0-9]+$ ]] && [ "$ctx" -ge 1024 ] ||
      { echo "bench/run: --long: '$ctx' is not a context length >= 1024" >&2; return 1; }
    [ "$ctx" -gt "$max" ] && max=$ctx
  done
  ref=$(long_model "$long_shape" f16 "$max") && arm=$(long_model "$long_shape" q4_K_M "$max") || return 1
  n=${reps:-3}
  : > "$logs/long-rounds.jsonl"
  for ctx in "${ctxs[@]}"; do
    text=$(long_text $((ctx * 2 * 6))) # ~4 bytes a token in this vocabulary; room to spare
    plan=$(kl_plan_bytes "$ref" "$arm" "$ctx" 512 2)
    for r in $(seq 1 "$n"); do
      echo "bench/run: long context $ctx, round $r/$n: kldeval kl, then llama-perplexity"
      read -r t rss < <(timed "$logs/long-kl-$ctx.round$r.log" "$build/kldeval" kl --ref "$ref" --arm "$arm" \
        --corpus "$text" --chunking llamacpp --ctx "$ctx" --chunks 1 --chunk 512 --threads 2 --no-db) ||
        { echo "bench/run: kldeval kl at ctx $ctx failed (see $logs/long-kl-$ctx.round$r.log)" >&2; continue; }
      long_record kl_s s "$t" "$ctx" "$r" "$rss"
      [ -n "$plan" ] && long_record plan_bytes bytes "$plan" "$ctx" "$r"
      have_llama || continue
      if [ "$ctx" -gt "$long_llama_max" ]; then
        echo "bench/run: llama-perplexity not run at ctx $ctx (--long-llama-max $long_llama_max): its window's logits alone would need $((ctx * 32000 * 4 / 1073741824)) GiB"
        continue
      fi
      local tb rb tk rk
      read -r tb rb < <(timed "$logs/long-ppl-base-$ctx.round$r.log" "$LLAMA_CPP_DIR/llama-perplexity" -m "$ref" \
        -f "$text" -c "$ctx" --chunks 1 -t 2 --kl-divergence-base "$logs/long-base-$ctx.kld") ||
        { echo "bench/run: llama-perplexity base at ctx $ctx failed (see $logs/long-ppl-base-$ctx.round$r.log)" >&2; continue; }
      read -r tk rk < <(timed "$logs/long-ppl-kld-$ctx.round$r.log" "$LLAMA_CPP_DIR/llama-perplexity" -m "$arm" \
        -f "$text" -c "$ctx" --chunks 1 -t 2 --kl-divergence-base "$logs/long-base-$ctx.kld" --kl-divergence) ||
        { echo "bench/run: llama-perplexity KLD at ctx $ctx failed (see $logs/long-ppl-kld-$ctx.round$r.log)" >&2; continue; }
      rm -f "$logs/long-base-$ctx.kld" # gigabytes at long context
      long_record llama_s s "$(awk -v a="$tb" -v b="$tk" 'BEGIN {print a + b}')" "$ctx" "$r" \
        "$([ "$rb" -gt "$rk" ] && echo "$rb" || echo "$rk")"
    done
  done
  jq -c -s 'def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    group_by([.name, .ctx])[] | map(select(.median != null)) | select(length > 0) |
    (map(.median)) as $v | ($v | median) as $m |
    .[0] + {median: $m, min: ($v | min), max: ($v | max), reps: ($v | length), rounds: $v,
            spread: (if $m != 0 then (($v | max) - ($v | min)) / $m else 0 end),
            peak_rss_bytes: (map(.peak_rss_bytes // 0) | max)}
    | .name = "\(.name)_ctx\(.ctx)" | del(.round)' "$logs/long-rounds.jsonl" >> "$records"
}

long_table() {
  local ctx k ks l ls rk rl plan
  [ -s "$logs/long-rounds.jsonl" ] || return 0
  echo
  echo "== long context: KLD run, $long_shape shape f16 vs q4_K_M, one window, llama-perplexity's positions ($cpu, $cores cores) =="
  printf '%-52s %14s %14s %7s %8s %4s\n' "workload" "kldeval" "llama.cpp" "ratio" "target" "met"
  for ctx in $(jq -r -s 'map(.ctx) | unique | .[]' "$logs/long-rounds.jsonl"); do
    k=$(rec long_ctx "kl_s_ctx$ctx" median); ks=$(rec long_ctx "kl_s_ctx$ctx" spread)
    l=$(rec long_ctx "llama_s_ctx$ctx" median); ls=$(rec long_ctx "llama_s_ctx$ctx" spread)
    [ -n "$k" ] || continue
    row "ctx $ctx KLD run wall s (llama.cpp: base + KLD)" "$k" "$ks" "$l" "$ls" "$(div "$k" "$l")" "<=" 0.5
    rk=$(rec long_ctx "kl_s_ctx$ctx" peak_rss_bytes); rl=$(rec long_ctx "llama_s_ctx$ctx" peak_rss_bytes)
    plan=$(rec long_ctx "plan_bytes_ctx$ctx" median)
    row "ctx $ctx peak RSS MiB (kldeval ÷ its plan)" "$(awk -v r="$rk" 'BEGIN {print r / 1048576}')" "" \
      "$([ -n "$rl" ] && awk -v r="$rl" 'BEGIN {print r / 1048576}')" "" "$(div "$rk" "$plan")" "<=" 1.0
    [ -n "$plan" ] && echo "    plan (kldeval inspect --plan --ctx $ctx, both models): $(awk -v p="$plan" 'BEGIN {printf "%.0f", p / 1048576}') MiB"
  done
}
