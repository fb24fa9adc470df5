#!/usr/bin/python3
"""test_serve_load.py — `kldeval serve --parallel 8` under 64 concurrent
clients × 20 requests each (greedy and seeded sampled completions with
log-probabilities, echo requests, and malformed ones): every reply equals
the one the same request gets alone, every malformed request gets its 4xx,
and the server exits 0 on SIGTERM (with an ASan build: no leak).

usage: test_serve_load.py KLDEVAL   (KLD_BUILD_DIR: where scratch files go)"""
import concurrent.futures
import json
import random
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

KLDEVAL = sys.argv[1]
MODEL = "../shared/models/stories260K/f32.gguf"

srv = subprocess.Popen([KLDEVAL, "serve", "-m", MODEL, "--port", "0", "--threads", "2", "--parallel", "8",
                        "--max-connections", "128", "--max-body", "65536"], stderr=subprocess.PIPE, text=True)
port = None
while port is None:
    line = srv.stderr.readline()
    if not line:
        sys.exit("the server did not start")
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", line)
    port = int(m.group(1)) if m else None


def call(body, data=None):
    data = data if data is not None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=data, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


good = []
for i in range(14):
    ids = [1] + [(37 * i + 11 * k) % 511 + 1 for k in range(3 + i % 5)]
    if i % 3 == 0:
        good.append({"prompt": ids, "max_tokens": 12 + i, "temperature": 0, "logprobs": 2})
    elif i % 3 == 1:
        good.append({"prompt": "Once upon a time" + " there" * (i % 4), "max_tokens": 16, "temperature": 0.9,
                     "seed": i, "logprobs": 1, "top_p": 0.9})
    else:
        good.append({"prompt": [ids, ids[:3]], "max_tokens": 1, "echo": True, "logprobs": 3})
bad = [(b"{", 400), (b"[]", 400), (json.dumps({"prompt": "x", "max_tokens": -3}).encode(), 400),
       (json.dumps({"prompt": [[1, 600]]}).encode(), 400), (b"\xc3\x28", 400),
       (json.dumps({"prompt": "a" * 70000}).encode(), 413)]
want = [call(r) for r in good]
assert all(st == 200 for st, _ in want), want
failures = []


def client(c):
    rng = random.Random(c)
    order = [("good", i) for i in range(14)] + [("bad", i) for i in range(6)]
    rng.shuffle(order)
    for kind, i in order:
        if kind == "good":
            st, got = call(good[i])
            if st != 200 or got["choices"] != want[i][1]["choices"]:
                failures.append(f"client {c} request {i}: {st}")
        else:
            st, got = call(None, bad[i][0])
            if st != bad[i][1] or "message" not in got.get("error", {}):
                failures.append(f"client {c} malformed {i}: {st} {got}")


with concurrent.futures.ThreadPoolExecutor(64) as pool:
    list(pool.map(client, range(64)))
with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=60) as r:
    health = json.loads(r.read())
print(f"64 clients x 20 requests: {len(failures)} wrong; {health}")
srv.send_signal(signal.SIGTERM)
rest = srv.stderr.read()
rc = srv.wait(timeout=120)
if rc != 0:
    failures.append(f"exit {rc}: {rest[-2000:]}")
if health["max_batch"] < 2:
    failures.append(f"no decode step was batched: {health}")
if failures:
    sys.exit("\n".join(failures[:20]))
print("test_serve_load: all replies right")
