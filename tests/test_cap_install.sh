#!/usr/bin/env bash
# test_cap_install.sh BUILD — the capability data ships with kldeval: from an
# installed copy, `cap` and `smoketest` find it whatever the working folder;
# a missing data folder (or a bad KL option of smoketest) fails before any
# model loads, naming what is wrong.
set -euo pipefail
build=$1
src=$(pwd)
inst=$build/test-cap-install
model=$src/../shared/models/stories260K/f32.gguf
rm -rf "$inst" && mkdir -p "$inst/empty"
cmake --install "$build" --prefix "$inst/prefix" > /dev/null
[ -f "$inst/prefix/share/kldeval/capability/gsm8k/test.jsonl" ] || { echo "FAIL: capability data not installed"; exit 1; }
k=$inst/prefix/bin/kldeval
export KLDEVAL_DB=$inst/runs.sqlite HOME=$inst/empty
cd "$inst/empty"
fail=0
if ! "$k" cap -m "$model" --tasks gsm8k --n 5 --max-new 16 > cap.out 2> cap.err; then
  echo "FAIL: cap from an empty folder: $(tail -3 cap.err)"; fail=1
elif ! grep -q gsm8k cap.out; then
  echo "FAIL: cap printed no gsm8k result"; fail=1
else echo "cap --tasks gsm8k --n 5 from $inst/empty: $(grep -m1 gsm8k cap.out)"; fi
if ! "$k" smoketest --ref "$model" --arm "$model" --n 3 --max-new 16 --max-docs 2 --ctx 64 --no-db > smoke.out 2> smoke.err; then
  echo "FAIL: smoketest from an empty folder: $(tail -3 smoke.err)"; fail=1
elif ! grep -q 'Mean KLD' smoke.out || ! grep -q '^gsm8k' smoke.out; then
  echo "FAIL: smoketest printed no KL report or GSM8K line"; fail=1
else echo "smoketest from $inst/empty: $(grep -m1 '^gsm8k' smoke.out)"; fi
# a missing data folder: refused at once (no model loaded: it names the folder, within a second)
t0=$(date +%s%N)
if "$k" cap -m "$model" --tasks gsm8k --data /nonexistent/capability > /dev/null 2> miss.err; then
  echo "FAIL: cap with a missing data folder succeeded"; fail=1
elif ! grep -q '/nonexistent/capability/gsm8k/test.jsonl' miss.err; then
  echo "FAIL: the error does not name the file: $(cat miss.err)"; fail=1
fi
if "$k" smoketest --ref "$model" --arm "$model" --data /nonexistent/capability > /dev/null 2> miss2.err ||
   ! grep -q '/nonexistent/capability' miss2.err || grep -q 'Mean KLD' miss2.err; then
  echo "FAIL: smoketest with a missing data folder: $(cat miss2.err)"; fail=1
fi
if "$k" smoketest --ref "$model" --arm "$model" --chunking llamacpp --max-docs 2 > /dev/null 2> bad.err ||
   ! grep -q -- '--max-docs' bad.err; then
  echo "FAIL: smoketest with a bad KL option: $(cat bad.err)"; fail=1
fi
[ $fail = 0 ] && echo PASS
exit $fail
