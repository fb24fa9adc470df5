#!/usr/bin/env bash
# setup.sh — installs kldeval's build dependencies from Debian's packages
# (only the missing ones; idempotent), what the browser test needs
# (tests/browser/setup.sh), and builds into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config gzip jq libjansson-dev libpcre2-dev libutf8proc-dev libssl-dev
          python3 python3-numpy python3-torch python3-pip python3-setuptools python3-wheel python3-yaml libsqlite3-dev libmicrohttpd-dev libcurl4-openssl-dev zlib1g-dev python3-langdetect)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# The HTML report's browser test (part of the default test run): chromium,
# Node.js and tests/browser/node_modules.
bash tests/browser/setup.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >&2
