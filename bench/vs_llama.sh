# bench/vs_llama.sh — sourced by bench/run (uses its variables: repo, build,
# cache, logs, records, reps, quick, cpu, cores, simd). Two parts:
#   * rounds: with LLAMA_CPP_DIR, bench_forward and bench_kl run one
#     repetition at a time, each followed by the same workload in llama.cpp
#     (llama-bench for pp512/tg32, llama-perplexity's base and KLD passes),
#     so that drift in the machine's speed hits both sides alike; medians
#     and spreads are taken over the rounds.
#   * the table: one line per target of the performance issue — workload,
#     kldeval, llama.cpp (or the baseline named in the workload), ratio,
#     target, met.

have_llama() {
  [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$LLAMA_CPP_DIR/llama-bench" ] && [ -x "$LLAMA_CPP_DIR/llama-perplexity" ]
}

rounds=$logs/rounds.jsonl # one line per measurement per round, both sides
llama=$logs/llama.jsonl   # llama.cpp's figures, aggregated over the rounds

# One repetition of bench program $1 in round $2; its records tagged with the round.
kld_round() {
  local p=$1 r=$2 out=$logs/$1.round$2.out args=(--reps 1 --cache "$cache")
  [ $quick = 1 ] && args+=(--quick)
  # the KLD run as llama-perplexity makes it: windows of 512, each from an empty cache
  [ "$p" = bench_kl ] && args+=(--window "$([ $quick = 1 ] && echo 128 || echo 512)")
  "$build/bench/$p" "${args[@]}" > "$out" 2>> "$logs/$p.err" ||
    { echo "bench/run: $p round $r failed (see $logs/$p.err)" >&2; return 1; }
  jq -c -R --arg p "$p" --argjson r "$r" 'fromjson? | objects | .program = $p | .round = $r' < "$out" >> "$rounds"
}

round_field() { # bench name field round -> value or empty
  jq -r -s --arg b "$1" --arg n "$2" --argjson r "$4" \
    "map(select(.bench == \$b and .name == \$n and .round == \$r))[0].$3 // empty" "$rounds"
}

llama_value() { # name unit value round
  jq -cn --arg n "$1" --arg u "$2" --arg v "$3" --argjson r "$4" \
    '{bench: "llama.cpp", name: $n, unit: $u, median: ($v | tonumber? // null), round: $r}' >> "$rounds"
}

# llama-bench on the models bench_forward used in round $1: pp512 and tg32
# (llama-bench decodes from an empty cache; bench_forward after its prefill).
llama_forward_round() {
  local r=$1 t model thr j
  for t in f16 q4_K_M; do
    model=$(round_field bench_forward "prefill_$t" model "$r")
    thr=$(round_field bench_forward "prefill_$t" threads "$r")
    [ -n "$model" ] || continue
    j=$logs/llama-bench-$t.round$r.json
    "$LLAMA_CPP_DIR/llama-bench" -m "$model" -p 512 -n 32 -t "${thr:-2}" -r 1 -o json > "$j" 2>> "$logs/llama-bench.err"
    llama_value "pp512_$t" tok/s "$(jq -r '.[] | select(.n_prompt == 512 and .n_gen == 0) | .avg_ts' "$j" 2>/dev/null)" "$r"
    llama_value "tg32_$t" tok/s "$(jq -r '.[] | select(.n_prompt == 0 and .n_gen == 32) | .avg_ts' "$j" 2>/dev/null)" "$r"
  done
}

# llama-perplexity's base pass (reference, writes the logits file) and KLD
# pass (arm) over the same number of tokens as bench_kl's run in round $1,
# in windows of 512. The text is the built-in corpus (which the synthesized
# models learned from), repeated to cover the windows.
llama_kl_round() {
  local r=$1 ref arm tokens thr text=$logs/llama-corpus.txt chunks win t0 t1 t2
  ref=$(round_field bench_kl lockstep models.ref "$r")
  arm=$(round_field bench_kl lockstep models.arm "$r")
  tokens=$(round_field bench_kl lockstep shape.tokens "$r")
  thr=$(round_field bench_kl lockstep shape.threads "$r")
  [ -n "$ref" ] && [ -n "$arm" ] || return 0
  if [ ! -s "$text" ]; then
    for _ in 1 2 3 4 5 6 7 8; do cat "$repo/data/builtin_corpus.txt"; done > "$text"
  fi
  win=$(round_field bench_kl lockstep shape.window "$r"); win=${win:-512}
  chunks=$(( tokens / win )); [ "$chunks" -ge 1 ] || chunks=1
  t0=$(date +%s.%N)
  "$LLAMA_CPP_DIR/llama-perplexity" -m "$ref" -f "$text" -c "$win" --chunks "$chunks" -t "${thr:-2}" \
    --kl-divergence-base "$logs/llama-base.kld" > "$logs/llama-ppl-base.round$r.log" 2>&1
  t1=$(date +%s.%N)
  "$LLAMA_CPP_DIR/llama-perplexity" -m "$arm" -f "$text" -c "$win" --chunks "$chunks" -t "${thr:-2}" \
    --kl-divergence-base "$logs/llama-base.kld" --kl-divergence > "$logs/llama-ppl-kld.round$r.log" 2>&1
  t2=$(date +%s.%N)
  llama_value perplexity_base_s s "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$r"
  llama_value perplexity_kld_s s "$(awk -v a="$t1" -v b="$t2" 'BEGIN {print b - a}')" "$r"
  llama_value perplexity_total_s s "$(awk -v a="$t0" -v b="$t2" 'BEGIN {print b - a}')" "$r"
  llama_value perplexity_positions positions "$(( chunks * (win / 2 - 1) ))" "$r" # the second half of each window
}

# Runs the rounds for the programs given ($@ among bench_forward, bench_kl)
# and appends the aggregated records: kldeval's to $records, llama.cpp's to
# $llama. Medians over the rounds; spread = (max - min) / median.
run_rounds() {
  local n=${reps:-5} r p
  : > "$rounds"
  echo "bench/run: $n alternated rounds of {$*} and the same workloads in llama.cpp ($LLAMA_CPP_DIR)"
  for r in $(seq 1 "$n"); do
    for p in "$@"; do
      echo "bench/run: round $r/$n: $p, then llama.cpp"
      kld_round "$p" "$r" || continue
      case "$p" in
        bench_forward) llama_forward_round "$r" ;;
        bench_kl) llama_kl_round "$r" ;;
      esac
    done
  done
  local agg='def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    group_by([.bench, .name])[] | map(select(.median != null)) | select(length > 0) |
    . as $g | ($g | map(.median)) as $v | ($v | median) as $m |
    $g[0] + {median: $m, min: ($v | min), max: ($v | max), reps: ($v | length), rounds: $v,
             spread: (if $m != 0 then (($v | max) - ($v | min)) / $m else 0 end), alternated: true}
    | if $g[0].peak_rss_bytes != null then .peak_rss_bytes = ($g | map(.peak_rss_bytes) | max) else . end
    | if .tok_per_s != null and .shape.tokens != null then .tok_per_s = .shape.tokens / $m else . end
    | del(.round, .best)'
  jq -c -s "$agg" "$rounds" > "$logs/rounds-aggregated.jsonl"
  jq -c 'select(.bench != "llama.cpp")' "$logs/rounds-aggregated.jsonl" >> "$records"
  jq -c 'select(.bench == "llama.cpp")' "$logs/rounds-aggregated.jsonl" >> "$llama"
  # the lockstep overhead of the medians, from the aggregated medians
  local fix
  fix=$(jq -c -s 'map(select(.bench == "bench_kl")) as $k |
      ($k | map(select(.name == "lockstep"))[0].median) as $c |
      ($k | map(select(.name == "ref_forward"))[0].median) as $a |
      ($k | map(select(.name == "arm_forward"))[0].median) as $b |
      .[] | if .bench == "bench_kl" and .name == "lockstep_overhead" and $c != null then .of_medians = $c / ($a + $b) - 1 else . end' "$records")
  printf '%s\n' "$fix" > "$records"
}

# ---- the table ----
rec() { jq -r -s --arg b "$1" --arg n "$2" "map(select(.bench == \$b and .name == \$n)) | last | .$3 // empty" "$records" 2>/dev/null; }
lc() { jq -r -s --arg n "$1" "map(select(.name == \$n)) | last | .$2 // empty" "$llama" 2>/dev/null; }

cell() { # value spread -> "12.3 ±4%" or "-"
  [ -n "$1" ] || { echo "-"; return; }
  awk -v v="$1" -v s="${2:-}" 'BEGIN { if (s == "") printf "%.1f", v; else printf "%.1f ±%.0f%%", v, 100 * s }'
}

row() { # label kld kld_spread base base_spread ratio target_op target
  local met="-" r=${6:-}
  [ -n "$r" ] && met=$(awk -v r="$r" -v op="$7" -v g="$8" 'BEGIN { ok = op == ">=" ? r >= g : r <= g; print ok ? "yes" : "no" }')
  printf '%-52s %14s %14s %7s %8s %4s\n' "$1" "$(cell "$2" "$3")" "$(cell "$4" "$5")" \
    "$([ -n "$r" ] && printf '%.2f' "$r" || echo -)" "$7 $8" "$met"
}

div() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b }'; }

# The memory plan of a KLD run as kldeval prints it: for each of the two
# models, `kldeval inspect --plan` at the run's context, chunk and threads —
# its total: weights, norms and biases, the session's arena (KV cache,
# activations, scratch), the logits buffer of one chunk, program and
# tokenizer. Empty when kldeval or a
# model is missing or the plan cannot be made.
kl_plan_bytes() { # ref arm ctx chunk threads -> bytes
  local total=0 m b
  [ -x "$build/kldeval" ] || return 0
  for m in "$1" "$2"; do
    [ -f "$m" ] || return 0
    b=$("$build/kldeval" inspect "$m" --plan --ctx "$3" --chunk "$4" --threads "${5:-2}" --json 2>/dev/null |
        jq -r '.plan.total_bytes') || return 0
    [[ "$b" =~ ^[0-9]+$ ]] || return 0
    total=$((total + b))
  done
  echo "$total"
}

issue_table() {
  local t k ks l ls
  echo
  echo "== performance targets ($cpu, $cores cores, $simd; kldeval's kernel set: $(rec bench_forward prefill_f16 kernels || true)) =="
  printf '%-52s %14s %14s %7s %8s %4s\n' "workload" "kldeval" "llama.cpp" "ratio" "target" "met"
  for t in f16 q4_K_M; do
    k=$(rec bench_forward "prefill_$t" median); ks=$(rec bench_forward "prefill_$t" spread)
    l=$(lc "pp512_$t" median); ls=$(lc "pp512_$t" spread)
    [ -n "$k" ] && row "prefill pp512 $t tok/s" "$k" "$ks" "$l" "$ls" "$(div "$k" "$l")" ">=" "$([ $t = f16 ] && echo 1.3 || echo 2.0)"
    k=$(rec bench_forward "decode_$t" median); ks=$(rec bench_forward "decode_$t" spread)
    l=$(lc "tg32_$t" median); ls=$(lc "tg32_$t" spread)
    [ -n "$k" ] && row "decode tg $t tok/s (512-token cache)" "$k" "$ks" "$l" "$ls" "$(div "$k" "$l")" ">=" 1.0
  done
  k=$(rec bench_kl lockstep_wall median); ks=$(rec bench_kl lockstep_wall spread)
  if [ -n "$k" ]; then
    local pos lpos ref arm tokens win
    pos=$(rec bench_kl lockstep positions); lpos=$(lc perplexity_positions median)
    l=$(lc perplexity_total_s median); ls=$(lc perplexity_total_s spread)
    tokens=$(rec bench_kl lockstep shape.tokens); win=$(rec bench_kl lockstep shape.window)
    ref=$(rec bench_kl lockstep shape.ref_type); arm=$(rec bench_kl lockstep shape.arm_type)
    row "KLD run $ref vs $arm, $tokens tokens (windows of ${win:-$tokens}), wall s" "$k" "$ks" "$l" "$ls" "$(div "$k" "$l")" "<=" 0.5
    echo "    positions scored: kldeval ${pos:-?}, llama-perplexity ${lpos:--} (ratio = time, lower is better)"
    local rss bound
    rss=$(rec bench_kl lockstep peak_rss_bytes)
    bound=$(kl_plan_bytes "$(rec bench_kl lockstep models.ref)" "$(rec bench_kl lockstep models.arm)" \
      "${win:-$tokens}" "$(rec bench_kl lockstep shape.chunk)" "$(rec bench_kl lockstep shape.threads)")
    if [ -n "$rss" ] && [ -n "$bound" ]; then
      row "peak RSS of the KLD run MiB ÷ plan $(awk -v b="$bound" 'BEGIN {printf "%.0f", b / 1048576}') MiB" \
        "$(awk -v r="$rss" 'BEGIN {print r / 1048576}')" "" "" "" "$(div "$rss" "$bound")" "<=" 1.0
      echo "    plan = the sum of both models' \`kldeval inspect --plan --ctx ${win:-$tokens} --json\` (totals: weights, norms, session arena, logits per chunk, program and tokenizer)"
    fi
  fi
  local blas f32 worst wname
  blas=$(rec bench_gemm gemm_prefill_openblas_f32_t1 median)
  f32=$(rec bench_gemm gemm_prefill_avx512_f32_t1 median); [ -n "$f32" ] || f32=$(rec bench_gemm gemm_prefill_avx2_f32_t1 median)
  if [ -n "$blas" ] && [ -n "$f32" ]; then
    row "GEMM f32 GFLOP/cpu-s ÷ OpenBLAS ($(cell "$blas"))" "$f32" "" "" "" "$(div "$f32" "$blas")" ">=" 0.85
    # the slowest block type, as the forward pass runs it (from the repacked copy where there is one)
    read -r wname worst < <(jq -r -s '[.[] | select(.bench == "bench_gemm" and (.name | test("^gemm_prefill_(avx2|avx512_repacked|avx512|repacked)_")) and (.name | test("_f32_") | not))]
        | group_by(.name | sub("^gemm_prefill_(avx2|avx512_repacked|avx512|repacked)_"; "")) | map(max_by(.median)) | min_by(.median) // empty
        | "\(.name | sub("^gemm_prefill_"; "") | sub("_t[0-9]+$"; "")) \(.median)"' "$records" 2>/dev/null)
    [ -n "${worst:-}" ] && row "GEMM block types, slowest ($wname) ÷ OpenBLAS" "$worst" "" "" "" "$(div "$worst" "$blas")" ">=" 0.75
  fi
  if have_llama; then
    echo "kldeval and llama.cpp alternated round by round; medians ± (max - min) / median over the rounds."
  else
    echo "(no ratio against llama.cpp measured: set LLAMA_CPP_DIR to a folder holding llama-bench and llama-perplexity)"
  fi
}
