#!/usr/bin/env bash
# setup.sh — what the Node.js tests need (ctest -L browser: the HTML report
# in Chromium; test_serve_openai: the OpenAI client against kldeval serve):
# Debian's chromium, Node.js with npm, and tests/browser/node_modules
# (playwright-core and openai, pinned by package-lock.json, installed with
# npm ci). Idempotent; installs only what is missing. tools/setup.sh calls it.
set -euo pipefail
cd "$(dirname "$0")"

if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "browser setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# npm ci again only when the lock file changed since the last install
stamp=node_modules/.kld-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # npm trusts Node's bundled roots only; the system's bundle also holds any
  # CA the machine's administrator installed (a proxy's, for example)
  if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
  fi
  npm ci --no-audit --no-fund --loglevel=error >&2
  echo "$want" > "$stamp"
fi
