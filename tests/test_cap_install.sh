#!/usr/bin/env bash
# test_cap_install.sh BUILD — the capability data ships with kldeval: the
# shipped files are the shared ones byte for byte; from an installed copy
# (also moved elsewhere as a whole), `cap` and `smoketest` read its own
# share/kldeval/capability whatever the working folder, and write nothing
# there; a missing or incomplete data folder, or a bad KL option of
# smoketest, fails before any model loads (the model given does not exist,
# so loading it would be the error), naming what is wrong.
set -euo pipefail
build=$1
src=$(pwd)
inst=$build/test-cap-install
model=$src/../shared/models/stories260K/f32.gguf
nomodel=/nonexistent-model.gguf
rm -rf "$inst" && mkdir -p "$inst/empty" "$inst/out"
fail=0
# the shipped files: every one SHA256SUMS lists, equal to ../shared/capability's
n=0
while read -r _ f; do
  n=$((n + 1))
  cmp -s "$src/data/capability/$f" "$src/../shared/capability/$f" || { echo "FAIL: data/capability/$f differs from ../shared"; fail=1; }
done < "$src/data/capability/SHA256SUMS"
(cd "$src/data/capability" && sha256sum --quiet -c SHA256SUMS) || { echo "FAIL: data/capability/SHA256SUMS"; fail=1; }
echo "data/capability: $n files, equal to ../shared/capability's"

cmake --install "$build" --prefix "$inst/prefix" > /dev/null
[ -f "$inst/prefix/share/kldeval/capability/gsm8k/test.jsonl" ] || { echo "FAIL: capability data not installed"; exit 1; }
# relocated as a whole: the data is found beside the binary, wherever it lies
mv "$inst/prefix" "$inst/moved"
k=$inst/moved/bin/kldeval want=$inst/moved/share/kldeval/capability
export KLDEVAL_DB=$inst/out/runs.sqlite HOME=$inst/empty
o=$inst/out
cd "$inst/empty"
if ! "$k" cap -m "$model" --tasks gsm8k --n 5 --max-new 16 --json "$o/cap.json" > "$o/cap.out" 2> "$o/cap.err"; then
  echo "FAIL: cap from an empty folder: $(tail -3 "$o/cap.err")"; fail=1
elif ! grep -q '^gsm8k .*/5)' "$o/cap.out"; then
  echo "FAIL: cap printed no gsm8k result of 5 items: $(cat "$o/cap.out")"; fail=1
elif [ "$(jq -r .config.data "$o/cap.json")" != "$want" ]; then
  echo "FAIL: cap read $(jq -r .config.data "$o/cap.json"), not the installed $want"; fail=1
else echo "cap --tasks gsm8k --n 5 from $inst/empty: $(grep -m1 '^gsm8k' "$o/cap.out") (data $want)"; fi
# the same items answered as by the build tree's program on the shared data
"$build/kldeval" cap --no-db -m "$model" --tasks gsm8k --n 5 --max-new 16 --data "$src/../shared/capability" \
  --json "$o/ref.json" > /dev/null 2>&1 || { echo "FAIL: build-tree cap on ../shared/capability"; fail=1; }
items='.tasks.gsm8k.ref.items'
if [ "$(jq -c "$items" "$o/cap.json")" != "$(jq -c "$items" "$o/ref.json")" ] ||
   [ "$(jq -r .config.data_sha256.gsm8k "$o/cap.json")" != "$(jq -r .config.data_sha256.gsm8k "$o/ref.json")" ]; then
  echo "FAIL: the installed run's items or data hash differ from the shared data's"; fail=1
fi
if ! "$k" smoketest --ref "$model" --arm "$model" --n 3 --max-new 16 --max-docs 2 --ctx 64 --no-db \
     --json "$o/smoke.json" > "$o/smoke.out" 2> "$o/smoke.err"; then
  echo "FAIL: smoketest from an empty folder: $(tail -3 "$o/smoke.err")"; fail=1
elif ! grep -q 'in 2 of 2 documents' "$o/smoke.out" || ! grep -q '^\[32, 64) ' "$o/smoke.out" ||
     grep -q '^\[64, ' "$o/smoke.out" || ! grep -q '^gsm8k' "$o/smoke.out"; then
  echo "FAIL: smoketest printed no KL report of 2 documents in 64-token windows, or no GSM8K line"; fail=1
elif [ "$(jq -r .config.data "$o/smoke.json")" != "$want" ]; then
  echo "FAIL: smoketest read $(jq -r .config.data "$o/smoke.json"), not $want"; fail=1
else echo "smoketest from $inst/empty: $(grep -m1 '^gsm8k' "$o/smoke.out")"; fi

# refused before any model loads: the error is the data's or the option's, never the model's
refused() { # what status message command...
  local what=$1 status=$2 msg=$3; shift 3
  local rc=0
  "$@" > "$o/r.out" 2> "$o/r.err" || rc=$?
  if [ $rc != "$status" ] || ! grep -qF -- "$msg" "$o/r.err" || grep -q nonexistent-model "$o/r.err" ||
     grep -q '== KL' "$o/r.out"; then
    echo "FAIL: $what: exit $rc (want $status), stderr: $(cat "$o/r.err")"; fail=1
  fi
}
refused "cap, missing data folder" 1 /nonexistent/capability/gsm8k/test.jsonl \
  "$k" cap --no-db -m "$nomodel" --tasks gsm8k --data /nonexistent/capability
refused "smoketest, missing data folder" 2 /nonexistent/capability/gsm8k/test.jsonl \
  "$k" smoketest --no-db --ref "$nomodel" --arm "$nomodel" --data /nonexistent/capability
mkdir -p "$o/nommlu/mmlu/test" "$o/nommlu/mmlu/dev"
refused "cap, MMLU folders without subjects" 1 "mmlu/test: mmlu's data: holds no *_test.csv file" \
  "$k" cap --no-db -m "$nomodel" --tasks mmlu --data "$o/nommlu"
refused "smoketest --chunking llamacpp --max-docs" 2 "--max-docs and --max-tokens apply to --chunking doc" \
  "$k" smoketest --no-db --ref "$nomodel" --arm "$nomodel" --chunking llamacpp --max-docs 2
refused "smoketest --corpus-format xml" 2 "--corpus-format expects auto, text or jsonl, got 'xml'" \
  "$k" smoketest --no-db --ref "$nomodel" --arm "$nomodel" --corpus-format xml
refused "smoketest --ctx 1" 2 "--ctx expects an integer in [2, 16777216]" \
  "$k" smoketest --no-db --ref "$nomodel" --arm "$nomodel" --ctx 1
left=$(ls -A "$inst/empty")
[ -z "$left" ] || { echo "FAIL: the runs wrote into their working folder: $left"; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
