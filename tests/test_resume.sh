#!/usr/bin/env bash
# test_resume.sh BUILD — runs killed with SIGKILL at random moments resume to
# the uninterrupted result:
#   kl --checkpoint / --resume: the JSON equals the uninterrupted run's but for
#     timings and the tokens this process forwarded; a checkpoint of another
#     run (another arm) is refused, naming the difference; a shard's partial
#     is not taken for a checkpoint, nor a checkpoint for a partial (merge);
#   dump --resume: the dump's files equal an uninterrupted dump's byte for byte;
#   cap --checkpoint / --resume: the report equals an uninterrupted run's.
# Moments are drawn from a seeded generator (RANDOM=7) so failures reproduce;
# checkpoints every chunk make kills during a checkpoint write likely.
set -euo pipefail
build=$1
k=$build/kldeval
m=../shared/models/rand-llama
out=$build/test_resume
rm -rf "$out" && mkdir -p "$out"
export KLDEVAL_DB=$out/runs.sqlite
RANDOM=7
args=(--ref $m/f16.gguf --arm $m/q4_K_M.gguf --ctx 48 --chunk 16 --max-docs 16 --quiet --no-db)
drop='del(.elapsed_s, .ref_seconds, .arm_seconds, .ref_tokens_per_s, .arm_tokens_per_s, .ref_tokens, .arm_tokens)'
"$k" kl "${args[@]}" --json "$out/full.json" > /dev/null
t0=$(date +%s%N); "$k" kl "${args[@]}" > /dev/null; t1=$(date +%s%N)
span=$(( (t1 - t0) / 1000000 )) # ms of one run
echo "one run: ${span} ms"

# sleep N milliseconds (spans scale with the build: a sanitizer build is ~20x slower)
ms_sleep() { sleep "$(( $1 / 1000 )).$(printf %03d $(( $1 % 1000 )))"; }

fail=0
for trial in 1 2 3 4 5 6; do
  ck=$out/ck$trial.bin kills=0
  rm -f "$ck"
  # kill at random moments until a run finishes on its own
  while :; do
    if [ -e "$ck" ]; then resume=(--resume "$ck"); else resume=(--checkpoint "$ck"); fi
    "$k" kl "${args[@]}" "${resume[@]}" --checkpoint-every 1 --json "$out/r$trial.json" > /dev/null 2>"$out/r$trial.err" &
    pid=$!
    ms_sleep $(( RANDOM % (span + 1) ))
    if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); wait $pid 2>/dev/null || true; continue; fi
    wait $pid || { echo "FAIL: trial $trial: the run failed: $(cat "$out/r$trial.err")"; fail=1; break; }
    break
  done
  if ! diff <(jq -S "$drop" "$out/full.json") <(jq -S "$drop" "$out/r$trial.json") > "$out/r$trial.diff"; then
    echo "FAIL: trial $trial ($kills kills): the resumed JSON differs:"; head -5 "$out/r$trial.diff"; fail=1
  else
    echo "trial $trial: $kills kills, resumed to the uninterrupted JSON"
  fi
done

# a checkpoint of another run is refused, naming the difference
if "$k" kl --ref $m/f16.gguf --arm $m/q4_0.gguf --ctx 48 --chunk 16 --max-docs 16 --quiet --no-db \
     --resume "$out/ck1.bin" > /dev/null 2> "$out/other.err"; then
  echo "FAIL: a checkpoint of another arm was resumed"; fail=1
elif ! grep -q "another run (config.arm" "$out/other.err"; then
  echo "FAIL: the refusal does not name the arm: $(cat "$out/other.err")"; fail=1
fi
if "$k" merge "$out/ck1.bin" > /dev/null 2> "$out/merge.err" || ! grep -q "is a checkpoint" "$out/merge.err"; then
  echo "FAIL: merge took a checkpoint for a partial: $(cat "$out/merge.err")"; fail=1
fi

# dump --resume after SIGKILL: the same bytes as an uninterrupted dump
dargs=(-m $m/f16.gguf --ctx 48 --chunk 16 --chunks 24 --top-k 32 --quiet --no-db)
t0=$(date +%s%N); "$k" dump "${dargs[@]}" --out "$out/dump-full" > /dev/null; t1=$(date +%s%N)
dspan=$(( (t1 - t0) / 1000000 ))
echo "one dump: ${dspan} ms"
for trial in 1 2 3; do
  d=$out/dump$trial kills=0
  rm -rf "$d"
  while :; do
    if [ -e "$d" ]; then r=(--resume); else r=(); fi
    "$k" dump "${dargs[@]}" "${r[@]}" --out "$d" > /dev/null 2>"$d.err" &
    pid=$!
    ms_sleep $(( RANDOM % (dspan + 1) ))
    if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); wait $pid 2>/dev/null || true; continue; fi
    wait $pid || { echo "FAIL: dump trial $trial: $(cat "$d.err")"; fail=1; break; }
    break
  done
  for f in tokens.bin seq-0.bin seq-23.bin seq-0.ext.bin seq-23.ext.bin; do
    cmp -s "$out/dump-full/$f" "$d/$f" || { echo "FAIL: dump trial $trial ($kills kills): $f differs"; fail=1; }
  done
  n_full=$(ls "$out/dump-full" | wc -l) n_res=$(ls "$d" | wc -l)
  [ "$n_full" = "$n_res" ] || { echo "FAIL: dump trial $trial: $n_res files, not $n_full"; fail=1; }
  [ $fail = 0 ] && echo "dump trial $trial: $kills kills, resumed to the same bytes"
done
# a dump killed before its partial manifest existed (only tokens.bin written):
# --resume starts it afresh
d=$out/dump-early
rm -rf "$d" && mkdir -p "$d" && cp "$out/dump-full/tokens.bin" "$d/"
if "$k" dump "${dargs[@]}" --resume --out "$d" > /dev/null 2> "$d.err"; then
  cmp -s "$out/dump-full/seq-23.bin" "$d/seq-23.bin" || { echo "FAIL: the early-killed dump differs"; fail=1; }
else
  echo "FAIL: resuming a dump killed before its partial manifest: $(cat "$d.err")"; fail=1
fi

# cap --checkpoint / --resume after SIGKILL: the responses kept, the report
# equal to an uninterrupted run's; other arguments refused naming the field
sm=../shared/models
cargs=(-q -m $sm/stories260K/f32.gguf --arm $sm/aidreams260K/f32.gguf --n 16 --max-new 40 --no-db
       --tasks gsm8k,ifeval,bfcl --batch 4)
t0=$(date +%s%N); "$k" cap "${cargs[@]}" --json "$out/cap-full.json" > /dev/null; t1=$(date +%s%N)
cspan=$(( (t1 - t0) / 1000000 ))
echo "one cap run: ${cspan} ms"
for trial in 1 2 3; do
  ck=$out/cap$trial.jsonl kills=0
  rm -f "$ck"
  while :; do
    if [ -e "$ck" ]; then r=(--resume "$ck"); else r=(--checkpoint "$ck"); fi
    "$k" cap "${cargs[@]}" "${r[@]}" --json "$out/cap$trial.json" > /dev/null 2>"$out/cap$trial.err" &
    pid=$!
    ms_sleep $(( RANDOM % (cspan + 1) ))
    if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); wait $pid 2>/dev/null || true; continue; fi
    wait $pid || { echo "FAIL: cap trial $trial: $(cat "$out/cap$trial.err")"; fail=1; break; }
    break
  done
  if ! diff <(jq -S 'del(.elapsed_s)' "$out/cap-full.json") <(jq -S 'del(.elapsed_s)' "$out/cap$trial.json") \
       > "$out/cap$trial.diff"; then
    echo "FAIL: cap trial $trial ($kills kills): the resumed report differs:"; head -5 "$out/cap$trial.diff"; fail=1
  else
    echo "cap trial $trial: $kills kills, resumed to the uninterrupted report"
  fi
done
if "$k" cap "${cargs[@]}" --max-new 32 --resume "$out/cap1.jsonl" > /dev/null 2> "$out/cap-other.err" ||
   ! grep -q "config.max_new: 32 vs 40" "$out/cap-other.err"; then
  echo "FAIL: a cap checkpoint of other arguments: $(cat "$out/cap-other.err")"; fail=1
fi
rc=0; "$k" cap "${cargs[@]}" --checkpoint "$out/cap1.jsonl" > /dev/null 2> "$out/cap-exists.err" || rc=$?
[ $rc = 2 ] && grep -q "exists" "$out/cap-exists.err" || { echo "FAIL: --checkpoint over an existing file"; fail=1; }
# a write cut by the kill: the torn last line is dropped
printf '{"arm": 0, "un' >> "$out/cap1.jsonl"
"$k" cap "${cargs[@]}" --resume "$out/cap1.jsonl" --json "$out/cap-torn.json" > /dev/null 2> "$out/cap-torn.err" &&
  diff -q <(jq -S . "$out/cap-full.json") <(jq -S . "$out/cap-torn.json") > /dev/null ||
  { echo "FAIL: a torn last line: $(cat "$out/cap-torn.err")"; fail=1; }

[ $fail = 0 ] && echo PASS
exit $fail
