#!/usr/bin/python3
"""test_serve_openai.py — the official OpenAI client from npm (`openai`,
tests/browser/package.json; installed by tests/browser/setup.sh) against
`kldeval serve` on loopback with an API key (rand-llama-hf with a chat
template): tests/browser/check_openai_client.js
reports what the client parsed, and each part must equal the server's raw
reply to the same request (so the client reads every field as kldeval means
it): the model list, an echoed completion's text and logprobs (tokens,
token_logprobs with the first null, 3 top_logprobs per token holding the
chosen maximum, text_offset), a greedy completion equal to `kldeval
generate`, a seeded sampled completion drawn twice alike, a chat completion,
and a wrong key refused with 401.

usage: test_serve_openai.py KLDEVAL   (KLD_BUILD_DIR: where scratch files go)"""
import json
import os
import subprocess
import sys

import serve_util

KLDEVAL = sys.argv[1]
KEY = "test-key-1234"
HERE = os.path.dirname(os.path.abspath(__file__))
check = serve_util.Checks()
OUT = os.path.join(os.environ["KLD_BUILD_DIR"], "test_serve_openai")
os.makedirs(OUT, exist_ok=True)
MODEL = serve_util.chat_model(OUT)  # rand-llama-hf with a chat template

if not os.path.isdir(os.path.join(HERE, "browser", "node_modules", "openai")):
    sys.exit("tests/browser/node_modules/openai is missing: run bash tests/browser/setup.sh (tools/setup.sh does)")

srv, port, _ = serve_util.start(KLDEVAL, MODEL, "--threads", "1", "--ctx", "256", "--api-key", KEY)
auth = {"Authorization": "Bearer " + KEY}
r = subprocess.run(["node", os.path.join(HERE, "browser", "check_openai_client.js"), f"http://127.0.0.1:{port}", KEY],
                   capture_output=True, text=True, timeout=300)
check(r.returncode == 0, f"the client ran (exit {r.returncode}: {r.stderr})")
got = json.loads(r.stdout) if r.returncode == 0 else {}


def raw(path, body):
    status, reply = serve_util.call(port, "POST", path, body, headers=auth)
    check(status == 200, f"raw {path}: HTTP {status} {reply}")
    return reply


if got:
    _, models = serve_util.call(port, "GET", "/v1/models", headers=auth)
    check(got["models"] == [m["id"] for m in models["data"]], f"models {got['models']}")
    model = got["models"][0]

    echo = raw("/v1/completions", {"model": model, "prompt": "Once upon a time there was", "max_tokens": 0,
                                   "echo": True, "logprobs": 3, "temperature": 0})
    c = echo["choices"][0]
    check(got["echo"]["text"] == c["text"], f"echo text {got['echo']['text']!r} vs {c['text']!r}")
    check(got["echo"]["logprobs"] == c["logprobs"], "echo logprobs as the server sent them")
    check(got["echo"]["usage"] == echo["usage"], f"usage {got['echo']['usage']} vs {echo['usage']}")
    lp = got["echo"]["logprobs"]
    n = len(lp["tokens"])
    check(n > 3 and lp["token_logprobs"][0] is None and all(x < 0 for x in lp["token_logprobs"][1:]),
          f"token_logprobs {lp['token_logprobs']}")
    for i in range(1, n):
        top = lp["top_logprobs"][i]
        check(len(top) == 3, f"3 alternatives at {i}: {top}")
        check(max(top.values()) >= lp["token_logprobs"][i] - 1e-12, f"top-1 at {i} is the maximum")
    check(lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"]), "text_offset grows")

    gen = subprocess.run([KLDEVAL, "generate", "-m", MODEL, "-p", "Once upon a time", "-n", "12", "--threads", "1"],
                         capture_output=True, text=True)
    greedy = raw("/v1/completions", {"model": model, "prompt": "Once upon a time", "max_tokens": 12,
                                     "temperature": 0})["choices"][0]
    check(got["greedy"]["text"] == greedy["text"], f"greedy {got['greedy']['text']!r} vs raw {greedy['text']!r}")
    check(gen.returncode == 0 and gen.stdout.startswith("Once upon a time" + got["greedy"]["text"]),
          f"greedy = kldeval generate: {got['greedy']['text']!r} vs {gen.stdout!r}")
    check(got["sampled"][0] == got["sampled"][1] and got["sampled"][0], f"seeded sampling repeats: {got['sampled']}")
    sampled = raw("/v1/completions", {"model": model, "prompt": "The cat", "max_tokens": 10, "temperature": 0.9,
                                      "top_p": 0.95, "seed": 7})["choices"][0]["text"]
    check(got["sampled"][0] == sampled, f"sampled {got['sampled'][0]!r} vs raw {sampled!r}")
    chat = raw("/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "Tell me a story."}],
                                        "max_tokens": 10, "temperature": 0})["choices"][0]["message"]
    check(got["chat"] == {"role": chat["role"], "content": chat["content"]}, f"chat {got['chat']} vs {chat}")
    check(got["wrong_key"] == {"status": 401, "name": "AuthenticationError"}, f"wrong key: {got['wrong_key']}")
    print(f"openai client: greedy {got['greedy']['text']!r}, sampled {got['sampled'][0]!r}, "
          f"{n} echoed tokens with logprobs")

serve_util.stop(srv, "server", check)
check.exit()
