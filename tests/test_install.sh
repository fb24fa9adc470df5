#!/usr/bin/env bash
# test_install.sh BUILD SOURCE [CFLAGS] — the installed package as another program
# uses it: `cmake --install` into BUILD/test-install, the two examples built
# against it with pkg-config (the shared library, and own_logits also against
# the static archive), and their figures equal to the installed CLI's:
#   score_models REF ARM      = kldeval kl --ref REF --arm ARM --json (all but timings)
#   own_logits  (logits files) = kldeval kl over the same ids (every printed figure)
set -euo pipefail
build=$1 src=$2 cflags=${3:-} # CFLAGS: the build's sanitizers, if any
inst=$build/test-install
shared=$src/../shared
ref=$shared/models/stories260K/f32.gguf arm=$shared/models/stories260K/q8_0.gguf
rm -rf "$inst" && mkdir -p "$inst/work"
cmake --install "$build" --prefix "$inst" >/dev/null
export PKG_CONFIG_PATH=$inst/lib/pkgconfig
for f in bin/kldeval include/kld.h lib/libkldeval.so lib/libkldeval.a lib/pkgconfig/kldeval.pc; do
  [ -e "$inst/$f" ] || { echo "FAIL: cmake --install did not install $f"; exit 1; }
done
ver=$(pkg-config --modversion kldeval)
soname=$(objdump -p "$inst/lib/libkldeval.so" | awk '/SONAME/ {print $2}')
echo "installed kldeval $ver, soname $soname"
[ "$soname" = "libkldeval.so.0" ] || { echo "FAIL: soname $soname"; exit 1; }
# no third-party header in the public one
if grep -E '#include <(jansson|pcre2|utf8proc|openssl|sqlite3|zlib)' "$inst/include/kld.h"; then
  echo "FAIL: kld.h includes a third-party header"; exit 1
fi

cd "$inst/work"
cc -std=c17 -Wall -Wextra -Werror $cflags "$src/examples/score_models.c" $(pkg-config --cflags --libs kldeval) -o score_models
cc -std=c17 -Wall -Wextra -Werror $cflags "$src/examples/own_logits.c" $(pkg-config --cflags --libs kldeval) -o own_logits
cc -std=c17 -Wall -Wextra -Werror $cflags "$src/examples/own_logits.c" $(pkg-config --cflags kldeval) \
   -L"$inst/lib" -Wl,-Bstatic -lkldeval -Wl,-Bdynamic $(pkg-config --static --libs-only-l kldeval | sed 's/-lkldeval//') \
   -o own_logits_static
export LD_LIBRARY_PATH=$inst/lib KLDEVAL_DB=$inst/work/runs.sqlite

# 1. score_models equals the CLI's JSON (timings and the thread count aside)
./score_models "$ref" "$arm" > api.json 2>api.err
"$inst/bin/kldeval" kl --ref "$ref" --arm "$arm" --json cli.json --quiet --no-db > /dev/null 2>&1
drop='del(.elapsed_s, .ref_seconds, .arm_seconds, .ref_tokens_per_s, .arm_tokens_per_s)'
if ! diff <(jq -S "$drop" api.json) <(jq -S "$drop" cli.json) > json.diff; then
  echo "FAIL: score_models' JSON differs from kldeval kl --json:"; head -20 json.diff; exit 1
fi
echo "score_models = kl --json: $(jq -r '.n_positions' api.json) positions, mean KLD $(jq -r '.kld.mean' api.json)"

# 2. own_logits over the CLI's logits equals kl over the same ids
head -c 400 "$shared/oracle/stories260K/corpus.tokens" > ids.i32
"$inst/bin/kldeval" logits -m "$ref" --ids-file ids.i32 --out ref.f32 > /dev/null
"$inst/bin/kldeval" logits -m "$arm" --ids-file ids.i32 --out arm.f32 > /dev/null
./own_logits ref.f32 arm.f32 ids.i32 512 > own.txt
./own_logits_static ref.f32 arm.f32 ids.i32 512 > own_static.txt
cmp own.txt own_static.txt || { echo "FAIL: the static and shared builds differ"; exit 1; }
"$inst/bin/kldeval" kl --ref "$ref" --arm "$arm" --ids-file ids.i32 --ctx 100 --json kl.json --quiet --no-db > /dev/null 2>&1
jq -r '"n_positions \(.n_positions)",
       "kld.mean \(.kld.mean)", "kld.stderr \(.kld.stderr)", "kld.median \(.kld.median)",
       "kld.p99 \(.kld.p99)", "kld.max \(.kld.max)", "top1_agreement \(.top1_agreement)",
       "ppl_ref \(.ppl_ref)", "ppl_arm \(.ppl_arm)", "ln_ppl_ratio \(.ln_ppl_ratio)"' kl.json > cli.txt
# both printed at full double precision: compare as numbers
if ! awk 'NR==FNR {want[$1]=$2; next} { if (!($1 in want) || want[$1]+0 != $2+0) { print "differs:", $1, $2, want[$1]; bad=1 } } END { exit bad }' cli.txt own.txt; then
  echo "FAIL: own_logits differs from kl"; cat own.txt cli.txt; exit 1
fi
echo "own_logits = kl over the same 100 ids: $(grep kld.mean own.txt)"
echo "PASS"
