#!/usr/bin/python3
"""test_serve.py — `kldeval serve` over loopback (servers started here on a
free port of their choosing, read from their "listening on" line, stopped
with SIGTERM): prompt log-probabilities equal the float64 log-softmax of
`kldeval logits` of the same ids, top-N alternatives are the N largest,
lm-evaluation-harness's local-completions log-likelihood request gives the
log-likelihoods and greedy flags computed here directly, greedy generation
equals `kldeval generate`, sampling is reproducible by seed, stop strings
cut, the tokenizer endpoints, malformed requests get 4xx JSON errors while
the server keeps serving, --api-key is enforced, SIGTERM exits 0.

usage: test_serve.py KLDEVAL   (KLD_BUILD_DIR: where scratch files go)"""
import concurrent.futures
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np

import serve_util

KLDEVAL = sys.argv[1]
OUT = os.path.join(os.environ["KLD_BUILD_DIR"], "test_serve")
os.makedirs(OUT, exist_ok=True)
MODEL = "../shared/models/stories260K/f32.gguf"
TEXT = "Once upon a time, there was a little girl named Lily. She loved to play"
check = serve_util.Checks()
call = serve_util.call


def start(*extra, model=MODEL):
    return serve_util.start(KLDEVAL, model, "--threads", "1", *extra)


def stop(p, what):
    serve_util.stop(p, what, check)


def log_softmax_of_logits(ids, name, arm=(MODEL,)):
    path = os.path.join(OUT, name + ".f32")
    subprocess.run([KLDEVAL, "logits", "-m", *arm, "--ids", ",".join(map(str, ids)), "--out", path,
                    "--threads", "1"], check=True, stdout=subprocess.DEVNULL)
    x = np.fromfile(path, dtype="<f4").astype(np.float64).reshape(len(ids), -1)
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))


def generate(prompt, n):
    r = subprocess.run([KLDEVAL, "generate", "-m", MODEL, "-p", prompt, "-n", str(n), "--threads", "1"],
                       check=True, capture_output=True, text=True)
    assert r.stdout.endswith("\n")
    return r.stdout[:-1]


srv, port, _ = start()

# ---- tokenizer endpoints
st, tok = call(port, "POST", "/tokenize", {"prompt": TEXT, "add_special_tokens": True})
ids = tok["tokens"]
check(st == 200 and ids[0] == 1 and len(ids) > 10, f"/tokenize: {st} {tok}")
st, tok2 = call(port, "POST", "/tokenize", {"prompt": TEXT, "add_special_tokens": False})
check(tok2["tokens"] == ids[1:], f"/tokenize without special tokens: {tok2}")
cli_ids = subprocess.run([KLDEVAL, "tokenize", "-m", MODEL, "--text", TEXT], check=True, capture_output=True,
                         text=True).stdout.split()
check(list(map(int, cli_ids)) == ids, f"/tokenize equals kldeval tokenize: {cli_ids} vs {ids}")
st, det = call(port, "POST", "/detokenize", {"tokens": ids[1:]})
check(st == 200 and det["prompt"] == TEXT, f"/detokenize: {det}")
st, info = call(port, "GET", "/tokenizer_info")
check(st == 200 and info["eos_token"] == "</s>" and info["bos_token"] == "<s>" and "chat_template" in info,
      f"/tokenizer_info: {info}")
st, models = call(port, "GET", "/v1/models")
check(st == 200 and models["data"][0]["id"] == MODEL, f"/v1/models: {models}")
st, h = call(port, "GET", "/health")
check(st == 200 and h["status"] == "ok" and h["parallel"] == 1, f"/health: {h}")

# ---- echo log-probabilities = log-softmax of `kldeval logits`, full vocabulary and top 5
lsm = log_softmax_of_logits(ids, "text")
n_vocab = lsm.shape[1]
st, full = call(port, "POST", "/v1/completions",
                {"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": n_vocab, "temperature": 0})
lp = full["choices"][0]["logprobs"]
check(st == 200 and len(lp["token_logprobs"]) == len(ids), f"echo: one entry per prompt token ({st})")
check(lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, "first prompt token has null logprobs")
err = max(abs(lp["token_logprobs"][t] - lsm[t - 1, ids[t]]) for t in range(1, len(ids)))
print(f"echo ids: max |served - log-softmax(kldeval logits)| = {err:.3e} over {len(ids) - 1} tokens")
check(err <= 1e-12, f"echo logprobs equal log-softmax of kldeval logits (max diff {err})")
check(full["choices"][0]["text"] == TEXT and full["usage"]["prompt_tokens"] == len(ids),
      f"echo text and usage: {full['choices'][0]['text']!r} {full['usage']}")
# every served alternative (the full vocabulary: texts that repeat keep the first) is exact
err_top = max(abs(v - lsm[t - 1]).min() for t in range(1, len(ids)) for v in lp["top_logprobs"][t].values())
check(err_top <= 1e-12, f"full-vocabulary alternatives are log-probabilities of the row ({err_top})")
st, top5 = call(port, "POST", "/v1/completions", {"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 5})
for t in range(1, len(ids)):
    want = np.sort(lsm[t - 1])[::-1][:5]
    got = sorted(top5["choices"][0]["logprobs"]["top_logprobs"][t].values(), reverse=True)
    if len(got) != 5 or max(abs(np.array(got) - want)) > 1e-12:
        check(False, f"top-5 at token {t}: {got} vs {want}")
        break
offsets = top5["choices"][0]["logprobs"]["text_offset"]
toks = top5["choices"][0]["logprobs"]["tokens"]
check(all(TEXT[offsets[t]:].startswith(toks[t]) for t in range(1, len(ids))),
      f"text_offset: each token's text starts at its offset: {list(zip(toks, offsets))}")

# the same prompt as text gives the same tokens and values
st, as_text = call(port, "POST", "/v1/completions", {"prompt": TEXT, "max_tokens": 0, "echo": True, "logprobs": 1})
check(as_text["choices"][0]["logprobs"]["token_logprobs"] == lp["token_logprobs"], "text prompt = id prompt")

# ---- lm-evaluation-harness local-completions: log-likelihood request and its parse
ctx = ids
cont1 = [int(np.argmax(lsm[-1]))]  # the greedy continuation, two tokens
cont1.append(int(np.argmax(log_softmax_of_logits(ctx + cont1, "c1")[-1])))
cont2 = [ids[3], ids[4]]  # " upon a" after the whole text: surely not greedy
seqs = [ctx + cont1, ctx + cont2]
payload = {"model": MODEL, "prompt": seqs, "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234,
           "echo": True}
st, out = call(port, "POST", "/v1/completions", payload)
check(st == 200 and len(out["choices"]) == 2, f"lm-eval request: {st}")
ctxlen = len(ctx)
for choice, seq in zip(sorted(out["choices"], key=lambda c: c["index"]), seqs):
    tl = choice["logprobs"]["token_logprobs"]
    check(len(tl) == len(seq) + 1, "echo + max_tokens 1: one more entry than the prompt")
    ll = sum(tl[ctxlen:-1])
    greedy = all(tok == max(top.values()) for tok, top in
                 zip(tl[ctxlen:-1], choice["logprobs"]["top_logprobs"][ctxlen:-1]))
    l = log_softmax_of_logits(seq, "seq")
    want_ll = sum(l[t - 1, seq[t]] for t in range(ctxlen, len(seq)))
    want_greedy = all(int(np.argmax(l[t - 1])) == seq[t] for t in range(ctxlen, len(seq)))
    print(f"lm-eval loglikelihood: served {ll:.15f} direct {want_ll:.15f} greedy {greedy}/{want_greedy}")
    check(want_greedy == (seq == seqs[0]), "the first continuation is greedy, the second is not")
    check(abs(ll - want_ll) <= 1e-12 and greedy == want_greedy, f"lm-eval parse: {ll} {greedy} vs {want_ll} "
          f"{want_greedy}")

# ---- greedy generation equals kldeval generate
prompt = "Once upon a time"
want = generate(prompt, 24)
st, echo0 = call(port, "POST", "/v1/completions", {"prompt": prompt, "max_tokens": 0, "echo": True})
st, gen_echo = call(port, "POST", "/v1/completions", {"prompt": prompt, "max_tokens": 24, "echo": True,
                                                     "temperature": 0})
st, gen = call(port, "POST", "/v1/completions", {"prompt": prompt, "max_tokens": 24, "temperature": 0})
print(f"greedy: served {gen_echo['choices'][0]['text']!r}\n        generate {want!r}")
check(gen_echo["choices"][0]["text"] == want, "greedy echo text equals kldeval generate")
check(echo0["choices"][0]["text"] + gen["choices"][0]["text"] == want, "prompt text + completion = generate")
check(gen["choices"][0]["finish_reason"] == "length" and gen["usage"]["completion_tokens"] == 24,
      f"finish_reason and usage: {gen}")

# ---- stop strings cut the text before them
st, stopped = call(port, "POST", "/v1/completions", {"prompt": prompt, "max_tokens": 24, "temperature": 0,
                                                    "stop": ["Lily", "zzz"]})
g = gen["choices"][0]["text"]
check("Lily" in g and stopped["choices"][0]["text"] == g[:g.index("Lily")] and
      stopped["choices"][0]["finish_reason"] == "stop", f"stop: {stopped['choices'][0]}")

# ---- sampling: reproducible by seed, and it samples
def sample(seed):
    st, r = call(port, "POST", "/v1/completions", {"prompt": prompt, "max_tokens": 24, "temperature": 1.0,
                                                  "top_p": 0.95, "seed": seed})
    return r["choices"][0]["text"]
a = sample(7)
check(a == sample(7), "a seeded sampled completion is reproducible")
check(any(sample(s) != g for s in range(1, 6)), "sampled completions differ from the greedy one")

# ---- malformed requests: 4xx with a JSON error naming the field, and the server keeps serving
bad = [
    ("POST", "/v1/completions", b"{\"prompt\": \"x\",", 400, "not valid JSON"),
    ("POST", "/v1/completions", b"\xff\xfe{}", 400, "not valid JSON"),
    ("POST", "/v1/completions", b"[1, 2]", 400, "JSON object"),
    ("POST", "/v1/completions", {"prompt": "x", "max_tokens": "abc"}, 400, "'max_tokens' must be an integer, got \"abc\""),
    ("POST", "/v1/completions", {"prompt": "x", "max_tokens": -1}, 400, "'max_tokens' must be in"),
    ("POST", "/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "echo"),
    ("POST", "/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "'temperature' must be a number"),
    ("POST", "/v1/completions", {"prompt": "x", "top_p": 0}, 400, "top_p"),
    ("POST", "/v1/completions", {"prompt": "x", "logprobs": -1}, 400, "'logprobs'"),
    ("POST", "/v1/completions", {"prompt": "x", "n": 2}, 400, "'n'"),
    ("POST", "/v1/completions", {"prompt": "x", "stream": True}, 400, "stream"),
    ("POST", "/v1/completions", {"prompt": "x", "stop": [1]}, 400, "'stop'[0]"),
    ("POST", "/v1/completions", {"prompt": 5}, 400, "'prompt' must be"),
    ("POST", "/v1/completions", {}, 400, "'prompt' must be"),
    ("POST", "/v1/completions", {"prompt": []}, 400, "'prompt' must be"),
    ("POST", "/v1/completions", {"prompt": [[1, 99999]]}, 400, "got 99999"),
    ("POST", "/v1/completions", {"prompt": [1, "a"]}, 400, "'prompt'[1]"),
    ("POST", "/v1/completions", {"prompt": [[1, 2], []]}, 400, "prompt[1]"),
    ("POST", "/v1/completions", {"prompt": [1] * 129, "max_tokens": 1}, 413, "context is 128"),
    ("POST", "/v1/completions", {"prompt": [1] * 100, "max_tokens": 50}, 400, "context of 128"),
    ("POST", "/v1/completions", {"prompt": "x", "model": "other"}, 404, "not served here"),
    ("POST", "/tokenize", {"prompt": 3}, 400, "'prompt' must be a string"),
    ("POST", "/tokenize", {"prompt": "x", "add_special_tokens": "yes"}, 400, "add_special_tokens"),
    ("POST", "/detokenize", {"tokens": [1, -1]}, 400, "got -1"),
    ("POST", "/v1/completions", {"prompt": "x", "echo": "yes"}, 400, "'echo' must be true or false"),
    ("POST", "/v1/completions", {"prompt": "x", "logprobs": "3"}, 400, "'logprobs' must be an integer"),
    ("POST", "/v1/completions", {"prompt": "x", "logprobs": 100000}, 400, "'logprobs' must be in [0, 512]"),
    ("POST", "/v1/completions", {"prompt": "x", "seed": "s"}, 400, "'seed' must be an integer"),
    ("POST", "/v1/completions", {"prompt": "x", "top_p": 1.5}, 400, "'top_p' must be in [0, 1]"),
    ("POST", "/v1/completions", {"prompt": "x", "top_k": -2}, 400, "'top_k' must be in"),
    ("POST", "/v1/completions", {"prompt": "x", "temperature": -1}, 400, "'temperature' must be in"),
    ("POST", "/v1/completions", {"prompt": "x", "stop": 5}, 400, "'stop' must be a string or a list"),
    ("POST", "/v1/completions", {"prompt": "x", "stop": ["a"] * 17}, 400, "up to 16 strings"),
    ("POST", "/v1/completions", {"prompt": "x", "return_logsumexp": "yes"}, 400, "'return_logsumexp'"),
    ("POST", "/v1/completions", {"prompt": "x", "return_tokens_as_token_ids": 1}, 400,
     "'return_tokens_as_token_ids' must be true or false"),
    ("POST", "/v1/completions", {"prompt": "x", "ignore_eos": "no"}, 400, "'ignore_eos'"),
    ("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1.5}, 400, "'max_tokens' must be an integer"),
    ("POST", "/v1/completions", {"prompt": [[1, 2.5]]}, 400, "got 2.5"),
    ("POST", "/v1/completions", {"prompt": {"a": 1}}, 400, "'prompt' must be"),
    ("POST", "/v1/completions", b"null", 400, "not valid JSON"),
    ("POST", "/detokenize", {"tokens": "abc"}, 400, "'tokens' must be a list"),
    ("POST", "/detokenize", {"tokens": [99999]}, 400, "got 99999"),
    ("POST", "/v1/chat/completions", {"messages": "hi"}, 400, "'messages' must be a non-empty list"),
    ("POST", "/v1/models", {}, 405, "does not take POST"),
    ("GET", "/nope", None, 404, "no such endpoint"),
    ("GET", "/v1/completions", None, 405, "does not take GET"),
]
for method, path, body, want_status, want_msg in bad:
    raw = body if isinstance(body, bytes) else None
    st, e = call(port, method, path, body=None if raw else body, data=raw)
    msg = e.get("error", {}).get("message", "")
    check(st == want_status and want_msg in msg, f"{method} {path} {body!r}: {st} {msg!r}")
check(len(bad) >= 46, f"{len(bad)} malformed requests")
check(call(port, "GET", "/health")[0] == 200, "still serving after the malformed requests")
st, e = call(port, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})
check(st == 400 and "no chat template" in e["error"]["message"], f"chat without a template: {st} {e}")
stop(srv, "server")

# ---- chat completions: an HF folder (rand-llama-hf's files) with a chat template in tokenizer_config.json
TEMPLATE = serve_util.CHAT_TEMPLATE
hf = serve_util.chat_model(OUT)
srv, port, _ = start("--ctx", "256", model=hf)
st, info = call(port, "GET", "/tokenizer_info")
check(info["chat_template"] == TEMPLATE, f"/tokenizer_info gives the chat template: {info}")
msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello, who are you?"}]
rendered = "<s>[system] Be brief.</s>\n[user] Hello, who are you?</s>\n[assistant]"
st, chat = call(port, "POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 10, "temperature": 0})
st2, rt = call(port, "POST", "/tokenize", {"prompt": rendered, "add_special_tokens": False})
st3, comp = call(port, "POST", "/v1/completions", {"prompt": rt["tokens"], "max_tokens": 10, "temperature": 0})
print(f"chat: {chat['choices'][0]['message']!r} usage {chat['usage']}")
check(st == 200 and chat["object"] == "chat.completion" and chat["choices"][0]["message"]["role"] == "assistant",
      f"chat reply: {st} {chat}")
check(rt["tokens"].count(1) == 1 and chat["usage"]["prompt_tokens"] == len(rt["tokens"]),
      f"the template's BOS is the only one: {rt['tokens'][:4]} {chat['usage']}")
check(chat["choices"][0]["message"]["content"] == comp["choices"][0]["text"],
      "chat content = completion of the hand-rendered conversation")
for body, want in (({"max_tokens": 3}, "'messages' must be"),
                   ({"messages": [{"role": 1, "content": "x"}]}, "'messages'[0]"),
                   ({"messages": [{"role": "user", "content": 5}]}, "'messages'[0].content"),
                   ({"messages": msgs, "logprobs": True}, "logprobs"),
                   ({"messages": msgs, "max_tokens": 300}, "'max_tokens' must be in"),
                   ({"messages": msgs, "max_completion_tokens": 250}, "exceeds the context of 256")):
    st, e = call(port, "POST", "/v1/chat/completions", body)
    check(st == 400 and want in e["error"]["message"], f"chat {body}: {st} {e}")
stop(srv, "chat server")

# ---- body limit (Content-Length and chunked), --api-key
srv, port, _ = start("--max-body", "4096", "--api-key", "sesame", "--model-name", "arm")
key = {"Authorization": "Bearer sesame"}
st, e = call(port, "POST", "/v1/completions", data=b"{\"prompt\": \"" + b"a" * 8000 + b"\"}", headers=key)
check(st == 413 and "4096" in e["error"]["message"], f"413 by Content-Length: {st} {e}")
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.putrequest("POST", "/v1/completions")
c.putheader("Transfer-Encoding", "chunked")
c.putheader("Authorization", "Bearer sesame")
c.endheaders()
for _ in range(3):
    c.send(b"%x\r\n%s\r\n" % (3000, b" " * 3000))
c.send(b"0\r\n\r\n")
r = c.getresponse()
check(r.status == 413 and "--max-body" in json.loads(r.read())["error"]["message"], f"413 chunked: {r.status}")
c.close()
st, e = call(port, "GET", "/v1/models")
check(st == 401 and "Bearer" in e["error"]["message"], f"no key: 401 ({st})")
st, e = call(port, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
check(st == 401, f"wrong key: 401 ({st})")
st, m = call(port, "GET", "/v1/models", headers=key)
check(st == 200 and m["data"][0]["id"] == "arm", f"right key: 200 and --model-name ({st} {m})")
check(call(port, "GET", "/health")[0] == 200, "/health needs no key")
st, r = call(port, "POST", "/v1/completions", {"model": "arm", "prompt": "Once", "max_tokens": 2}, headers=key)
check(st == 200 and r["model"] == "arm", f"completion with the key: {st}")
stop(srv, "server with --api-key")

# ---- a body that stops half-way is closed after --timeout; a client that leaves costs nothing else
srv, port, _ = start("--timeout", "2", "--max-logprobs", "1000")
st, e = call(port, "POST", "/v1/completions", {"prompt": list(range(1, 41)), "max_tokens": 1, "echo": True,
                                               "logprobs": 25})
check(st == 413 and "--max-logprobs" in e["error"]["message"] and e["error"]["param"] == "logprobs",
      f"41 tokens x 25 log-probabilities > --max-logprobs 1000: {st} {e}")
st, e = call(port, "POST", "/v1/completions", {"prompt": list(range(1, 40)), "max_tokens": 1, "echo": True,
                                               "logprobs": 25})
check(st == 200, f"40 tokens x 25 = the limit: {st}")
slow = socket.create_connection(("127.0.0.1", port))
slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: 100\r\n\r\n{\"prompt\": ")
gone = socket.create_connection(("127.0.0.1", port))
body = json.dumps({"prompt": "Once", "max_tokens": 100, "ignore_eos": True}).encode()
gone.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
gone.close()
check(call(port, "POST", "/v1/completions", {"prompt": "Once", "max_tokens": 4})[0] == 200,
      "serving while a body is stalled and after a client left")
slow.settimeout(10)
t0 = time.time()
try:
    closed = slow.recv(4096) == b""
except ConnectionResetError:
    closed = True
check(closed and time.time() - t0 < 8, f"the stalled body is closed after --timeout 2 ({time.time() - t0:.1f} s)")
slow.close()
check(call(port, "GET", "/health")[0] == 200, "still serving after the stalled body")
stop(srv, "server with --timeout")

# ---- --parallel: requests in flight share batched decode steps, and get what they get alone
BIG = "../shared/models/rand-llama/f16.gguf"
seq_srv, seq_port, _ = start("--ctx", "256", model=BIG)
par_srv, par_port, _ = start("--ctx", "256", "--parallel", "4", model=BIG)
st, bt = call(seq_port, "POST", "/tokenize", {"prompt": TEXT})
base = bt["tokens"]
reqs = []
for i in range(8):
    if i % 3 == 0:
        reqs.append({"prompt": base[:8 + i], "max_tokens": 40, "temperature": 0, "logprobs": 3, "ignore_eos": True})
    elif i % 3 == 1:
        reqs.append({"prompt": TEXT[:20 + i], "max_tokens": 40, "temperature": 0.8, "seed": i, "logprobs": 2,
                     "ignore_eos": True})
    else:
        reqs.append({"prompt": [base[:6 + i], base[:4]], "max_tokens": 8, "echo": True, "logprobs": 5,
                     "ignore_eos": True})
alone = [call(seq_port, "POST", "/v1/completions", r)[1]["choices"] for r in reqs]
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    together = list(pool.map(lambda r: call(par_port, "POST", "/v1/completions", r)[1]["choices"], reqs))
check(together == alone, "8 requests in flight on --parallel 4 get what they get one at a time")
st, h = call(par_port, "GET", "/health")
print(f"--parallel 4 under 8 concurrent requests: {h}")
check(h["parallel"] == 4 and h["max_batch"] > 1 and h["decode_rows"] > h["decode_steps"],
      f"decode steps were batched: {h}")
# a client that leaves mid-generation: its run stops at the next step, the others go on
gone = socket.create_connection(("127.0.0.1", seq_port))
body = json.dumps({"prompt": base[:8], "max_tokens": 200, "temperature": 0, "ignore_eos": True}).encode()
steps0 = call(seq_port, "GET", "/health")[1]["decode_steps"]
gone.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
while call(seq_port, "GET", "/health")[1]["decode_steps"] == steps0:
    time.sleep(0.002)
gone.close()
t0 = time.time()
while call(seq_port, "GET", "/health")[1]["cancelled"] == 0 and time.time() - t0 < 20:
    time.sleep(0.01)
h = call(seq_port, "GET", "/health")[1]
print(f"client gone after its first step: {h['decode_steps'] - steps0} of 199 decode steps run, {h}")
check(h["cancelled"] == 1 and h["decode_steps"] - steps0 < 150, f"the run of a client that left stops: {h}")
check(call(seq_port, "POST", "/v1/completions", reqs[0])[1]["choices"] == alone[0], "serving on, same answers")

# SIGTERM while a request is in flight: it is answered in full, then the server exits 0
with concurrent.futures.ThreadPoolExecutor(1) as pool:
    steps0 = call(seq_port, "GET", "/health")[1]["decode_steps"]
    fut = pool.submit(call, seq_port, "POST", "/v1/completions",
                      {"prompt": base[:8], "max_tokens": 200, "temperature": 0, "ignore_eos": True})
    while call(seq_port, "GET", "/health")[1]["decode_steps"] == steps0 and not fut.done():
        time.sleep(0.002)
    seq_srv.send_signal(signal.SIGTERM)
    st, drained = fut.result()
check(st == 200 and drained["usage"]["completion_tokens"] == 200, f"the request in flight at SIGTERM is "
      f"answered in full: {st} {drained.get('usage')}")
stop(seq_srv, "sequential server")
stop(par_srv, "parallel server")

# ---- an arm: a precision policy quantized on load and a KV-cache lever, through the library's arm spec
ARM = (MODEL + "@q8_0,ffn_down=f16", "--lever", "kv=f16")
srv, port, _ = start(*ARM[1:], model=ARM[0])
st, q = call(port, "POST", "/v1/completions", {"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 1})
lsm_arm = log_softmax_of_logits(ids, "arm", ARM)
served = q["choices"][0]["logprobs"]["token_logprobs"]
err_arm = max(abs(served[t] - lsm_arm[t - 1, ids[t]]) for t in range(1, len(ids)))
moved = max(abs(served[t] - lsm[t - 1, ids[t]]) for t in range(1, len(ids)))
print(f"arm {' '.join(ARM)}: max |served - kldeval logits of the arm| = {err_arm:.3e}; vs the f32 model {moved:.3e}")
check(err_arm <= 1e-12 and moved > 1e-6, f"the served arm is the arm ({err_arm}, moved {moved})")
stop(srv, "arm server")

# ---- addresses: IPv6 loopback (where the machine has one), a port in use, a host that does not resolve
try:
    probe = socket.socket(socket.AF_INET6)
    probe.bind(("::1", 0))
    probe.close()
    have_v6 = True
except OSError:
    have_v6 = False
    print("no IPv6 loopback here: --host ::1 not checked")
if have_v6:
    p6 = subprocess.Popen([KLDEVAL, "serve", "-m", MODEL, "--host", "::1", "--port", "0", "--threads", "1"],
                          stderr=subprocess.PIPE, text=True)
    m = re.search(r"listening on http://\[::1\]:(\d+) ", p6.stderr.readline())
    check(m is not None, "a listening line on ::1")
    if m:
        with urllib.request.urlopen(f"http://[::1]:{m.group(1)}/health", timeout=30) as r:
            check(r.status == 200, "serving on ::1")
    stop(p6, "server on ::1")
taken = socket.socket()
taken.bind(("127.0.0.1", 0))
taken.listen()
r = subprocess.run([KLDEVAL, "serve", "-m", MODEL, "--port", str(taken.getsockname()[1])], capture_output=True,
                   text=True, timeout=60)
taken.close()
check(r.returncode == 1 and "cannot listen" in r.stderr, f"a port in use: {r.returncode} {r.stderr}")
r = subprocess.run([KLDEVAL, "serve", "-m", MODEL, "--host", "no.such.host.invalid"], capture_output=True, text=True,
                   timeout=60)
check(r.returncode == 1 and "--host no.such.host.invalid" in r.stderr, f"bad --host: {r.returncode} {r.stderr}")

# ---- --help documents every flag the parser takes
helptext = subprocess.run([KLDEVAL, "serve", "--help"], check=True, capture_output=True, text=True).stdout
src = open("src/cli/cmd_serve.c").read()
for flag in set(re.findall(r'strcmp\(a, "(--[a-z-]+)"\)', src)):
    check(flag in helptext, f"--help documents {flag}")

if check.failures:
    sys.exit(f"{check.failures} check(s) failed")
print("test_serve: all checks passed")
