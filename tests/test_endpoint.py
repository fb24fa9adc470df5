#!/usr/bin/python3
"""test_endpoint.py — `kl --arm-endpoint` and `--ref-endpoint` against
`kldeval serve` on loopback (servers started here on a free port, stopped
with SIGTERM): with --top-logprobs = the vocabulary every statistic equals
lockstep `kl` of the served model bit for bit (the server's logsumexp
recovers its f32 logits), and without that extension to ~1e-8; with K = 20
the run is truncated and its lower bound lies below the exact mean; a lever
arm served equals the self-flag run bit for bit; a 4xx (unknown model) and a dead
endpoint give clear errors. A fault-injecting proxy in front of the server
checks the retries on 5xx, the /tokenize check before the run, the check of
the echoed ids, and a server without /tokenize.

usage: test_endpoint.py KLDEVAL   (KLD_BUILD_DIR: where scratch files go)"""
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import serve_util

KLDEVAL = sys.argv[1]
OUT = os.path.join(os.environ["KLD_BUILD_DIR"], "test_endpoint")
os.makedirs(OUT, exist_ok=True)
M = "../shared/models/stories260K/"
COMMON = ["--max-docs", "6", "--threads", "1", "--no-db"]
check = serve_util.Checks()


def start(model, *extra):
    p, port, _ = serve_util.start(KLDEVAL, model, "--threads", "1", "--ctx", "1024", *extra)
    return p, port


def stop(p, what):
    serve_util.stop(p, what, check)


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


# every statistic of a run (not its timings or its configuration)
STATS = ["n_positions", "n_tokens", "n_docs", "kld", "kld_reverse", "jsd", "top1_agreement",
         "top1_agreement_stderr", "topk_overlap", "ppl_ref", "ppl_arm", "ln_ppl_ratio", "ppl_ratio",
         "nll_correlation", "label_in_topk", "topk_ordered", "dlogit_centered", "delta_p",
         "by_ref_confidence", "by_context_position", "top1_agreement_ci95", "ppl_ratio_ci95"]


def same_stats(a, b, what):
    for key in STATS:
        check(a.get(key) == b.get(key), f"{what}: {key} differs: {str(a.get(key))[:120]} vs {str(b.get(key))[:120]}")


class Proxy:
    """Forwards to the server at `upstream`, with faults set in `faults`:
    fail (the next N completions answer 503), fail_all (every completion
    answers 500), echo_flip (the echoed id at that prompt position is
    changed), tokenize_flip (document text containing this string gets its
    /tokenize ids changed at position 2), no_tokenize (/tokenize is 404),
    foreign (/v1/models says another owner: a server other than kldeval's,
    not asked for the logsumexp extension)."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.faults = {}
        self.completions = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, status, body):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def forward(self, body):
                req = urllib.request.Request(proxy.upstream + self.path, data=body,
                                             method="POST" if body is not None else "GET",
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req) as r:
                        return r.status, r.read()
                except urllib.error.HTTPError as e:
                    return e.code, e.read()

            def do_GET(self):
                status, data = self.forward(None)
                if status == 200 and self.path.endswith("/models") and proxy.faults.get("foreign"):
                    j = json.loads(data)
                    for m in j["data"]:
                        m["owned_by"] = "someone-else"
                    data = json.dumps(j).encode()
                self.reply(status, data)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                f = proxy.faults
                if self.path.endswith("/completions"):
                    proxy.completions += 1
                    if f.get("fail_all"):
                        return self.reply(500, {"error": {"message": "injected failure"}})
                    if f.get("fail", 0) > 0:
                        f["fail"] -= 1
                        return self.reply(503, {"error": {"message": "injected overload"}})
                    status, data = self.forward(body)
                    if status == 200 and "echo_flip" in f:
                        j = json.loads(data)
                        lp = j["choices"][0]["logprobs"]
                        at = f["echo_flip"]
                        tok = lp["tokens"][at]
                        lp["tokens"][at] = "token_id:%d" % ((int(tok.split(":")[1]) + 1) % 512)
                        data = json.dumps(j).encode()
                    return self.reply(status, data)
                if self.path == "/tokenize":
                    if f.get("no_tokenize"):
                        return self.reply(404, {"error": {"message": "not found"}})
                    status, data = self.forward(body)
                    flip = f.get("tokenize_flip")
                    if status == 200 and flip and flip in json.loads(body)["prompt"]:
                        j = json.loads(data)
                        j["tokens"][2] = (j["tokens"][2] + 1) % 512
                        data = json.dumps(j).encode()
                    return self.reply(status, data)
                self.reply(*self.forward(body))

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- the whole distribution: equal to the lockstep run ----
srv, port = start(M + "q8_0.gguf")
url = f"http://127.0.0.1:{port}"
lock, _ = kl("lockstep", "--ref", M + "f32.gguf", "--arm", M + "q8_0.gguf")
full, r = kl("full", "--ref", M + "f32.gguf", "--arm-endpoint", url, "--top-logprobs", "512")
if lock and full:
    check(full["n_positions"] == lock["n_positions"] and full["n_positions"] > 500,
          f"positions {full['n_positions']} vs {lock['n_positions']}")
    # kldeval serve's logsumexp recovers the f32 logits: bit for bit
    check(full["config"]["arm"].get("logits_recovered") is True, "K=V from kldeval serve: logits recovered")
    same_stats(full, lock, "K=V --arm-endpoint vs lockstep")
    check("/tokenize gives kldeval's ids" in r.stdout, "the /tokenize check ran and is reported")
    print(f"K=512: KLD mean {full['kld']['mean']!r}, lockstep {lock['kld']['mean']!r} (every statistic equal)")

# ---- the served model as the reference: equal to the lockstep run the other way round ----
lock_rev, _ = kl("lockstep-rev", "--ref", M + "q8_0.gguf", "--arm", M + "f32.gguf")
ref_full, _ = kl("ref-full", "--ref-endpoint", url, "--arm", M + "f32.gguf", "--top-logprobs", "512")
if lock_rev and ref_full:
    check(ref_full["n_positions"] == lock_rev["n_positions"], "ref-endpoint: positions")
    same_stats(ref_full, lock_rev, "K=V --ref-endpoint vs lockstep")
    print(f"--ref-endpoint K=512: KLD mean {ref_full['kld']['mean']!r}, lockstep {lock_rev['kld']['mean']!r}")
ref20, _ = kl("ref-k20", "--ref-endpoint", url, "--arm", M + "f32.gguf", "--top-logprobs", "20")
if ref20 and lock_rev:
    t = ref20.get("truncated") or {}
    bound = (t.get("kld_bound") or {}).get("mean")
    check(t.get("n_rows") == ref20["n_positions"], f"ref K=20: every row truncated ({t.get('n_rows')})")
    check(bound is not None and 0.5 * lock_rev["kld"]["mean"] <= bound <= lock_rev["kld"]["mean"] * (1 + 1e-9),
          f"ref K=20 bound {bound} within [0.5, 1] of the exact {lock_rev['kld']['mean']}")
    print(f"--ref-endpoint K=20: bound {bound!r}, exact {lock_rev['kld']['mean']!r}, "
          f"captured mass {t.get('mass_mean')!r}")

# ---- K = 20: truncated, its lower bound below the exact mean ----
trunc, _ = kl("k20", "--ref", M + "f32.gguf", "--arm-endpoint", url, "--top-logprobs", "20")
if trunc and lock:
    t = trunc.get("truncated") or {}
    check(t.get("n_rows") == trunc["n_positions"], f"K=20: every row truncated ({t.get('n_rows')})")
    check(0.5 < t.get("mass_mean", 0) < 1, f"K=20: captured mass {t.get('mass_mean')}")
    bound = (t.get("kld_bound") or {}).get("mean")
    check(bound is not None, "K=20 has a kld_bound mean")
    if bound is not None:
        check(bound <= lock["kld"]["mean"] * (1 + 1e-9),
              f"K=20 bound {bound} <= exact mean {lock['kld']['mean']}")
        check(bound >= 0.5 * lock["kld"]["mean"], f"K=20 bound {bound} is close to the exact {lock['kld']['mean']}")
        print(f"K=20: KLD mean {trunc['kld']['mean']!r}, bound {bound!r}, exact {lock['kld']['mean']!r}")

# ---- through a proxy that injects faults ----
px = Proxy(url)
# without the logsumexp extension (a server other than kldeval's): equal to ~1e-8 (docs/serve.md)
px.faults = {"foreign": True}
stripped, r = kl("stripped", "--ref", M + "f32.gguf", "--arm-endpoint", px.url, "--top-logprobs", "512")
if stripped and lock:
    check(stripped["config"]["arm"].get("logits_recovered") is False, "another server: not asked for logsumexp")
    for key in ("kld", "kld_reverse", "jsd"):
        for stat in ("mean", "median", "p99", "max"):
            check(close(stripped[key][stat], lock[key][stat], 1e-6 if stat == "mean" else 1e-5),
                  f"K=V without logsumexp {key}.{stat} {stripped[key][stat]!r} vs {lock[key][stat]!r}")
    check(stripped["top1_agreement"] == lock["top1_agreement"], "K=V without logsumexp: top-1 agreement")
else:
    check(False, f"K=V without logsumexp: the run failed: {r.stderr}")
# no /tokenize: the run goes on, checked on the echoed ids, and says so
px.faults = {"no_tokenize": True}
px.completions = 0
ok, r = kl("no-tokenize", "--ref", M + "f32.gguf", "--arm-endpoint", px.url, "--top-logprobs", "512")
check(ok is not None and "has no /tokenize" in r.stdout, f"no /tokenize: the run notes it ({r.stderr[-300:]})")
if ok and lock:
    same_stats(ok, lock, "no /tokenize")
clean_requests = px.completions
# 5xx on three requests: retried, same figures
px.faults = {"fail": 3}
px.completions = 0
retried, r = kl("retried", "--ref", M + "f32.gguf", "--arm-endpoint", px.url, "--top-logprobs", "512")
check(retried is not None and px.completions == clean_requests + 3,
      f"3 injected 503s retried ({px.completions} completion requests, {clean_requests} without faults; "
      f"{r.stderr[-300:]})")
if retried and lock:
    same_stats(retried, lock, "after retries")
# every request a 500: stops after 5 attempts naming the status and the message
px.faults = {"fail_all": True}
bad, r = kl("fail-all", "--ref", M + "f32.gguf", "--arm-endpoint", px.url)
check(bad is None and r.returncode != 0 and "HTTP 500" in r.stderr and "injected failure" in r.stderr
      and "after 5 attempts" in r.stderr, f"persistent 500: a clear error (got {r.returncode}: {r.stderr})")
# the server tokenizes document 2 differently: stopped before the run, naming it
with open(os.path.join(OUT, "docs.txt"), "w") as f:
    f.write("Once upon a time there was a cat.\nThe dog ran to the park and played.\nA bird sang.\n")
px.faults = {"tokenize_flip": "dog ran"}
bad, r = kl("tok-flip", "--ref", M + "f32.gguf", "--arm-endpoint", px.url, "--corpus",
            os.path.join(OUT, "docs.txt"))
check(bad is None and r.returncode != 0 and "docs.txt:2 (document 2)" in r.stderr and "position 2" in r.stderr
      and "/tokenize" in r.stderr, f"/tokenize mismatch names the document (got {r.returncode}: {r.stderr})")
bad, r = kl("tok-flip-ref", "--ref-endpoint", px.url, "--arm", M + "f32.gguf", "--corpus",
            os.path.join(OUT, "docs.txt"))
check(bad is None and "--ref-endpoint" in r.stderr and "document 2" in r.stderr,
      f"/tokenize mismatch with --ref-endpoint (got {r.returncode}: {r.stderr})")
# an echoed id rewritten at prompt position 5: the run stops naming the place
px.faults = {"echo_flip": 5, "no_tokenize": True}
bad, r = kl("echo-flip", "--ref", M + "f32.gguf", "--arm-endpoint", px.url)
check(bad is None and r.returncode != 0 and "document 0" in r.stderr and "position 5" in r.stderr,
      f"echoed id mismatch names the position (got {r.returncode}: {r.stderr})")
px.close()

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
    same_stats(lever, selfflag, "kv=bf16 served vs the self-flag run")
    print(f"kv=bf16 served: KLD mean {lever['kld']['mean']!r}, self-flag {selfflag['kld']['mean']!r} "
          "(every statistic equal)")
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
# a reference endpoint needs a model arm; two endpoints are refused
_, r = kl("ref-selfflag", "--ref-endpoint", "http://127.0.0.1:1", "--lever", "kv=q8_0")
check(r.returncode == 2 and "--ref-endpoint" in r.stderr, f"--ref-endpoint without a model arm (got {r.stderr})")
_, r = kl("two-endpoints", "--ref-endpoint", "http://127.0.0.1:1", "--arm-endpoint", "http://127.0.0.1:2")
check(r.returncode == 2 and "model arm" in r.stderr, f"two endpoints refused (got {r.stderr})")

check.exit()
