#!/usr/bin/env bash
# tests/slurm/setup.sh — installs what the Slurm test (label "slurm") needs:
# Debian's slurm-wlm (slurmctld, slurmd, sbatch) and munge. Only the missing
# packages, idempotent; the test itself never installs anything. The
# distribution's services are not started (the test runs its own daemons).
set -euo pipefail
packages=(slurm-wlm munge jq)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "slurm setup: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  # policy-rc.d 101: do not start the packaged services during installation
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod +x /usr/sbin/policy-rc.d
    trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
