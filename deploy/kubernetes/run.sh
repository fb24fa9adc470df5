#!/usr/bin/env bash
# run.sh — the Kubernetes recipe end to end: the shared volume, the Indexed
# Job of shards, a wait for its completion, then the merge Job; prints the
# merged report (the merge pod's log). Edit KLD_ARGS/completions in
# kl-shards.yaml first. Usage: deploy/kubernetes/run.sh [NAMESPACE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ns=(${1:+--namespace "$1"})
kubectl "${ns[@]}" apply -f "$here/volume.yaml"
kubectl "${ns[@]}" delete job kldeval-shards kldeval-merge --ignore-not-found
kubectl "${ns[@]}" apply -f "$here/kl-shards.yaml"
kubectl "${ns[@]}" wait --for=condition=complete --timeout=24h job/kldeval-shards
kubectl "${ns[@]}" apply -f "$here/kl-merge.yaml"
kubectl "${ns[@]}" wait --for=condition=complete --timeout=1h job/kldeval-merge
kubectl "${ns[@]}" logs job/kldeval-merge
