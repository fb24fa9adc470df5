"""serve_util.py — what the tests of `kldeval serve` share: a server started
on a free loopback port (its port read from the line it prints), stopped
with SIGTERM (exit 0 expected), JSON calls with urllib, and a failure
counter. The scripts import it from their own directory."""
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request


class Checks:
    def __init__(self):
        self.failures = 0

    def __call__(self, cond, what):
        if not cond:
            self.failures += 1
            print("FAIL:", what)

    def exit(self):
        print("failures:", self.failures)
        sys.exit(1 if self.failures else 0)


def start(kldeval, model, *extra):
    """(process, port, the lines it printed up to then)"""
    p = subprocess.Popen([kldeval, "serve", "-m", model, "--port", "0", *extra], stderr=subprocess.PIPE,
                         text=True)
    lines = []
    while True:
        line = p.stderr.readline()
        if not line:
            sys.exit("server did not start: " + "".join(lines))
        lines.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", line)
        if m:
            return p, int(m.group(1)), lines


def stop(p, what, check):
    p.send_signal(signal.SIGTERM)
    rest = p.stderr.read()
    check(p.wait(timeout=60) == 0, f"{what}: SIGTERM exits 0 (got {p.returncode}: {rest})")


def call(port, method, path, body=None, data=None, headers=None, timeout=120):
    """(status, parsed JSON reply)"""
    if body is not None:
        data = json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# A chat template for models that have none (rand-llama-hf): roles in brackets.
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}\n{% endfor %}"
                 "{% if add_generation_prompt %}[assistant]{% endif %}")


def chat_model(out):
    """An HF folder under out: rand-llama-hf's files (linked) with CHAT_TEMPLATE in
    tokenizer_config.json."""
    hf = os.path.join(out, "chat-model")
    os.makedirs(hf, exist_ok=True)
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        link = os.path.join(hf, f)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.realpath(os.path.join("../shared/models/rand-llama-hf", f)), link)
    with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "chat_template": CHAT_TEMPLATE}, f)
    return hf
