#!/usr/bin/env bash
# test_bench_table.sh — bench/vs_llama.sh, which bench/run sources: the
# rounds alternate one repetition of a kldeval program with llama.cpp's
# workload, the aggregated records are medians over the rounds, and the
# table's ratios and verdicts follow from them. Stand-ins print known
# figures (no timing); the real programs are never run here.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath "${KLD_BUILD_DIR:-build}")/bench-table-test
rm -rf "$work"
mkdir -p "$work/build/bench" "$work/llama" "$work/cache" "$work/logs"
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }

# models: sparse files (the stand-in kldeval below gives their plans)
truncate -s 1073741824 "$work/cache/ref-f16.gguf"
truncate -s 536870912 "$work/cache/arm-q4_K_M.gguf"

# kldeval stand-ins: the figure of round r is the r-th of a list
cat > "$work/build/bench/bench_forward" <<EOF
#!/usr/bin/env bash
n=\$(( \$(cat "$work/fwd.count" 2>/dev/null || echo 0) + 1 )); echo \$n > "$work/fwd.count"
pp=(0 30 34 32); dec=(0 7 8 6)
echo "human line of round \$n"
for t in f16 q4_K_M; do
  m=$work/cache/\$([ \$t = f16 ] && echo ref-f16 || echo arm-q4_K_M).gguf
  echo "{\"bench\":\"bench_forward\",\"name\":\"prefill_\$t\",\"unit\":\"tok/s\",\"median\":\${pp[\$n]},\"model\":\"\$m\",\"threads\":2,\"reps\":1}"
  echo "{\"bench\":\"bench_forward\",\"name\":\"prefill_all_logits_\$t\",\"unit\":\"tok/s\",\"median\":31,\"reps\":1}"
  echo "{\"bench\":\"bench_forward\",\"name\":\"decode_\$t\",\"unit\":\"tok/s\",\"median\":\${dec[\$n]},\"reps\":1}"
done
EOF
cat > "$work/build/bench/bench_kl" <<EOF
#!/usr/bin/env bash
n=\$(( \$(cat "$work/kl.count" 2>/dev/null || echo 0) + 1 )); echo \$n > "$work/kl.count"
wall=(0 150 152 148); rss=(0 2000 2100 1900)
shape='{"n_embd":2048,"n_layer":22,"n_head":32,"n_head_kv":4,"tokens":2048,"window":512,"chunk":512,"threads":2,"ref_type":"f16","arm_type":"q4_K_M"}'
echo "{\"bench\":\"bench_kl\",\"name\":\"ref_forward\",\"median\":70,\"tok_per_s\":0,\"shape\":\$shape}"
echo "{\"bench\":\"bench_kl\",\"name\":\"arm_forward\",\"median\":70,\"shape\":\$shape}"
echo "{\"bench\":\"bench_kl\",\"name\":\"lockstep\",\"median\":147,\"positions\":2048,\"peak_rss_bytes\":\$(( \${rss[\$n]} * 1048576 )),\"models\":{\"ref\":\"$work/cache/ref-f16.gguf\",\"arm\":\"$work/cache/arm-q4_K_M.gguf\"},\"shape\":\$shape}"
echo "{\"bench\":\"bench_kl\",\"name\":\"lockstep_wall\",\"median\":\${wall[\$n]},\"shape\":\$shape}"
echo "{\"bench\":\"bench_kl\",\"name\":\"lockstep_overhead\",\"median\":0.05,\"of_medians\":0.05}"
EOF
# kldeval stand-in: inspect --plan --json of a model at the KLD run's window (1500 + 700 MiB)
cat > "$work/build/kldeval" <<EOF
#!/usr/bin/env bash
case "\$*" in *"--plan --ctx 512 --chunk 512 --threads 2 --json"*) ;; *) echo "unexpected: \$*" >&2; exit 1 ;; esac
case "\$2" in *ref-f16*) mib=1500 ;; *) mib=700 ;; esac
echo "{\"plan\":{\"total_bytes\":\$(( mib * 1048576 ))}}"
EOF
# llama.cpp stand-ins: llama-bench's pp512 and tg32 per model and round
cat > "$work/llama/llama-bench" <<EOF
#!/usr/bin/env bash
n=\$(( \$(cat "$work/lb.count" 2>/dev/null || echo 0) + 1 )); echo \$n > "$work/lb.count"
r=\$(( (n + 1) / 2 )); pp=(0 15 16 17); tg=(0 5.5 5.0 6.0)
case "\$*" in *q4_K_M*) p=22 ;; *) p=\${pp[\$r]} ;; esac
echo "[{\"n_prompt\":512,\"n_gen\":0,\"avg_ts\":\$p},{\"n_prompt\":0,\"n_gen\":32,\"avg_ts\":\${tg[\$r]}}]"
EOF
printf '#!/usr/bin/env bash\necho "$*" >> %q\n' "$work/ppl.args" > "$work/llama/llama-perplexity"
chmod +x "$work"/build/bench/* "$work"/build/kldeval "$work"/llama/*

out=$(
  set +e # bench/run does not run under -e either
  export LLAMA_CPP_DIR=$work/llama
  repo=$repo build=$work/build cache=$work/cache logs=$work/logs records=$work/logs/records.jsonl
  reps=3 quick=0 cpu="test CPU" cores=2 simd="avx2"
  # bench_gemm's records come from its own run (not alternated)
  for r in 'openblas_f32 37' 'avx2_f32 36' 'avx2_q4_K 28' 'repacked_q4_K 30' 'avx2_q6_K 27' 'repacked_q6_K 26'; do
    set -- $r
    echo "{\"bench\":\"bench_gemm\",\"name\":\"gemm_prefill_$1_t1\",\"median\":$2}"
  done > "$records"
  . "$repo/bench/vs_llama.sh"
  : > "$llama"
  run_rounds bench_forward bench_kl > /dev/null
  issue_table
)
echo "$out"
has() { grep -F -q -- "$1" <<<"$out" || fail "no line with '$1'"; }
line() { grep -F -- "$1" <<<"$out" | head -n 1; }

# rounds alternate: llama-bench ran twice (two models) after each bench_forward round
[ "$(cat "$work/lb.count")" = 6 ] || fail "llama-bench ran $(cat "$work/lb.count") times, not 6"
[ "$(wc -l < "$work/ppl.args")" = 6 ] || fail "llama-perplexity ran $(wc -l < "$work/ppl.args") times, not 6"
grep -q -- "-c 512 --chunks 4" "$work/ppl.args" || fail "llama-perplexity not over 2048/512 = 4 windows of 512"

# aggregated: medians over the three rounds, spreads (max - min) / median
rec() { jq -r -s --arg n "$1" "map(select(.name == \$n)) | last | .$2" "$work/logs/records.jsonl"; }
[ "$(rec prefill_f16 median)" = 32 ] || fail "prefill_f16 median $(rec prefill_f16 median), not 32"
[ "$(rec prefill_f16 reps)" = 3 ] || fail "prefill_f16 reps $(rec prefill_f16 reps), not 3"
[ "$(rec prefill_f16 spread)" = 0.125 ] || fail "prefill_f16 spread $(rec prefill_f16 spread), not 0.125"
[ "$(rec lockstep peak_rss_bytes)" = $(( 2100 * 1048576 )) ] || fail "peak RSS is not the rounds' maximum"
of=$(rec lockstep_overhead of_medians)
awk -v o="$of" 'BEGIN {exit !(o > 0.04999 && o < 0.05001)}' || fail "overhead of medians $of, not 147/140 - 1"

# the table: ratio and verdict per target
line "prefill pp512 f16" | grep -q "32.0 ±12%.*16.0 ±12%.*2.00.*>= 1.3.*yes" || fail "pp512 f16: $(line 'prefill pp512 f16')"
line "prefill pp512 q4_K_M" | grep -q "32.0.*22.0.*1.45.*>= 2.0.*no" || fail "pp512 q4_K_M: $(line 'prefill pp512 q4_K_M')"
line "decode tg f16" | grep -q "7.0.*5.5.*1.27.*yes" || fail "tg f16: $(line 'decode tg f16')"
line "KLD run" | grep -q "2048 tokens (windows of 512).*150.0 ±3%.*<= 0.5.*no" || fail "KLD run: $(line 'KLD run')"
has "positions scored: kldeval 2048, llama-perplexity 1020"
line "peak RSS" | grep -q "plan 2200 MiB.*2100.0.*0.95.*<= 1.0.*yes" || fail "RSS: $(line 'peak RSS')"
has "inspect --plan --ctx 512 --json"
line "GEMM f32" | grep -q "36.0.*0.97.*yes" || fail "GEMM f32: $(line 'GEMM f32')"
line "GEMM block types" | grep -q "slowest (avx2_q6_K).*27.0.*0.73.*>= 0.75.*no" || fail "GEMM blocks: $(line 'GEMM block types')"
has "alternated round by round"
exit $failed
