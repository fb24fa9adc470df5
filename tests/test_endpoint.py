#!/usr/bin/python3
"""test_endpoint.py — `kl --arm-endpoint` against `kldeval serve` on
loopback (servers started here on a free port, stopped with SIGTERM):
with --top-logprobs = the vocabulary the figures equal lockstep `kl` of the
served model (see docs/serve.md for why to ~1e-8 relative and not bit for
bit); with K = 20 the run is truncated and its lower bound lies below the
exact mean; a lever arm served equals the self-flag run; a 4xx (unknown
model) and a dead endpoint give clear errors.

usage: test_endpoint.py KLDEVAL   (KLD_BUILD_DIR: where scratch files go)"""
import json
import os
import re
import signal
import socket
import subprocess
import sys

KLDEVAL = sys.argv[1]
OUT = os.path.join(os.environ["KLD_BUILD_DIR"], "test_endpoint")
os.makedirs(OUT, exist_ok=True)
M = "../shared/models/stories260K/"
COMMON = ["--max-docs", "6", "--threads", "1", "--no-db"]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def start(model, *extra):
    p = subprocess.Popen([KLDEVAL, "serve", "-m", model, "--port", "0", "--threads", "1",
                          "--ctx", "1024", *extra], stderr=subprocess.PIPE, text=True)
    lines = []
    while True:
        line = p.stderr.readline()
        if not line:
            sys.exit("server did not start: " + "".join(lines))
        lines.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", line)
        if m:
            return p, int(m.group(1))


def stop(p, what):
    p.send_signal(signal.SIGTERM)
    p.stderr.read()
    check(p.wait(timeout=60) == 0, f"{what}: SIGTERM exits 0 (got {p.returncode})")


def kl(name, *args):
    path = os.path.join(OUT, name + ".json")
    r = subprocess.run([KLDEVAL, "kl", *args, *COMMON, "--json", path], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"{name}: exit {r.returncode}\n{r.stderr}")
        return None, r
    with open(path) as f:
        return json.load(f), r


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


# ---- the whole distribution: equal to the lockstep run ----
srv, port = start(M + "q8_0.gguf")
url = f"http://127.0.0.1:{port}"
lock, _ = kl("lockstep", "--ref", M + "f32.gguf", "--arm", M + "q8_0.gguf")
full, _ = kl("full", "--ref", M + "f32.gguf", "--arm-endpoint", url, "--top-logprobs", "512")
if lock and full:
    check(full["n_positions"] == lock["n_positions"] and full["n_positions"] > 500,
          f"positions {full['n_positions']} vs {lock['n_positions']}")
    for key in ("kld", "kld_reverse", "jsd"):
        for stat in ("mean", "median", "p99", "max"):
            # the mean to 1e-6, single positions (quantiles) to 1e-5 (docs/serve.md)
            check(close(full[key][stat], lock[key][stat], 1e-6 if stat == "mean" else 1e-5),
                  f"K=V {key}.{stat} {full[key][stat]!r} vs lockstep {lock[key][stat]!r}")
    check(full["top1_agreement"] == lock["top1_agreement"],
          f"top-1 agreement {full['top1_agreement']} vs {lock['top1_agreement']}")
    check(close(full["ppl_arm"], lock["ppl_arm"], 1e-6), f"ppl_arm {full['ppl_arm']} vs {lock['ppl_arm']}")
    print(f"K=512: KLD mean {full['kld']['mean']!r}, lockstep {lock['kld']['mean']!r}")

# ---- K = 20: truncated, its lower bound below the exact mean ----
trunc, _ = kl("k20", "--ref", M + "f32.gguf", "--arm-endpoint", url, "--top-logprobs", "20")
if trunc and lock:
    t = trunc.get("truncated") or {}
    check(t.get("n_rows") == trunc["n_positions"], f"K=20: every row truncated ({t.get('n_rows')})")
    check(0.5 < t.get("mass_mean", 0) < 1, f"K=20: captured mass {t.get('mass_mean')}")
    bound = (t.get("kld_bound") or {}).get("mean")
    check(bound is not None, f"K=20 has a kld_bound mean ")
    if bound is not None:
        check(bound <= lock["kld"]["mean"] * (1 + 1e-9),
              f"K=20 bound {bound} <= exact mean {lock['kld']['mean']}")
        check(bound >= 0.5 * lock["kld"]["mean"], f"K=20 bound {bound} is close to the exact {lock['kld']['mean']}")
        print(f"K=20: KLD mean {trunc['kld']['mean']!r}, bound {bound!r}, exact {lock['kld']['mean']!r}")

# ---- a 4xx: an unknown model name ----
bad, r = kl("badmodel", "--ref", M + "f32.gguf", "--arm-endpoint", url, "--endpoint-model", "nope")
check(bad is None and "HTTP 404" in r.stderr and url in r.stderr,
      f"unknown model: a 404 naming the URL (got {r.returncode}: {r.stderr})")
stop(srv, "q8_0 server")

# ---- a lever arm served equals the self-flag run ----
srv, port = start(M + "f32.gguf", "--lever", "kv=bf16")
selfflag, _ = kl("selfflag", "-m", M + "f32.gguf", "--lever", "kv=bf16")
lever, _ = kl("lever", "--ref", M + "f32.gguf", "--arm-endpoint", f"http://127.0.0.1:{port}/v1",
              "--top-logprobs", "512")
if selfflag and lever:
    check(close(lever["kld"]["mean"], selfflag["kld"]["mean"], 1e-6),
          f"lever: {lever['kld']['mean']!r} vs self-flag {selfflag['kld']['mean']!r}")
    check(lever["top1_agreement"] == selfflag["top1_agreement"], "lever: top-1 agreement")
    print(f"kv=bf16 served: KLD mean {lever['kld']['mean']!r}, self-flag {selfflag['kld']['mean']!r}")
stop(srv, "lever server")

# ---- a dead endpoint ----
s = socket.socket()
s.bind(("127.0.0.1", 0))
dead = s.getsockname()[1]
s.close()
bad, r = kl("dead", "--ref", M + "f32.gguf", "--arm-endpoint", f"http://127.0.0.1:{dead}")
check(bad is None and f"127.0.0.1:{dead}" in r.stderr and "attempts" in r.stderr,
      f"dead endpoint: a clear error (got {r.returncode}: {r.stderr})")
# flags that do not apply, and a bad URL, fail before any model loads
_, r = kl("notaurl", "--ref", M + "f32.gguf", "--arm-endpoint", "ftp://x")
check(r.returncode == 2 and "http://" in r.stderr, f"bad URL refused (got {r.returncode}: {r.stderr})")
_, r = kl("stray", "--ref", M + "f32.gguf", "--arm", M + "q8_0.gguf", "--top-logprobs", "5")
check(r.returncode == 2 and "--top-logprobs" in r.stderr, f"--top-logprobs without endpoint (got {r.stderr})")

print("failures:", failures)
sys.exit(1 if failures else 0)
