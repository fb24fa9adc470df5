"""test_kldeval.py — the Python package (python/kldeval) against the CLI and the
library: kl() equals `kldeval kl --json` statistic for statistic; Stats fed with
Model.logits equals kl's figures exactly; Stats fed with a torch forward of the
same weights (a tiny llama written here from rand-llama-hf's safetensors) gives
the KLD between kldeval's exact f32 engine and torch's CPU math (printed); bad
inputs raise kldeval.Error subclasses with the library's message.

Run by ctest as: /usr/bin/python3 tests/python/test_kldeval.py BUILD_DIR
(KLDEVAL_LIB and PYTHONPATH set by tests/python.cmake)."""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

import kldeval

BUILD = sys.argv[1]
CLI = os.path.join(BUILD, "kldeval")
SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared")
RL = os.path.join(SHARED, "models", "rand-llama")
OUT = os.path.join(BUILD, "test_python")
os.makedirs(OUT, exist_ok=True)
failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what)


def cli(*args):
    env = dict(os.environ, KLDEVAL_DB=os.path.join(OUT, "runs.sqlite"))
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True)


TIMINGS = ("elapsed_s", "ref_seconds", "arm_seconds", "ref_tokens_per_s", "arm_tokens_per_s")


def strip(d):
    return {k: v for k, v in d.items() if k not in TIMINGS}


def kl_equals_cli():
    f16, q4 = os.path.join(RL, "f16.gguf"), os.path.join(RL, "q4_K_M.gguf")
    r = kldeval.kl(f16, q4, max_docs=4)
    out = os.path.join(OUT, "cli.json")
    p = cli("kl", "--ref", f16, "--arm", q4, "--max-docs", "4", "--json", out, "--quiet", "--no-db")
    check(p.returncode == 0, "kl CLI ran: " + p.stderr[-300:])
    with open(out) as f:
        c = json.load(f)
    check(strip(r) == strip(c), "kl() == kl --json, all but timings")
    check(r["kld"]["mean"] == c["kld"]["mean"] and repr(r["kld"]["mean"]) == repr(c["kld"]["mean"]),
          "kld.mean bit for bit: %r vs %r" % (r["kld"]["mean"], c["kld"]["mean"]))
    check(r.mode == "two-models" and not r.partial, "mode and partial")
    check(len(r.positions) == r["n_positions"] and
          abs(float(np.mean(r.positions["kld"])) - r["kld"]["mean"]) <= 1e-12,
          "positions: %d, their mean KLD is the report's" % len(r.positions))
    print("kl(): %d positions, mean KLD %r (CLI %r)" % (r["n_positions"], r["kld"]["mean"],
                                                       c["kld"]["mean"]))
    # self-flag through the same call
    s = kldeval.kl(f16, levers="kv=q8_0", max_docs=2)
    check(s.mode == "self-flag" and s["kld"]["mean"] > 0, "self-flag kl: %r" % s["kld"]["mean"])
    # strata and --score-only: the same report as the CLI's, the positions carrying their masks
    st = kldeval.kl(f16, q4, max_docs=4, strata=r"space=^\s", score_only="space")
    p = cli("kl", "--ref", f16, "--arm", q4, "--max-docs", "4", "--json", out, "--quiet", "--no-db",
            "--strata", r"space=^\s", "--score-only", "space")
    with open(out) as f:
        c = json.load(f)
    check(p.returncode == 0 and strip(st) == strip(c) and c["config"]["score_only"] == "space",
          "kl(strata=, score_only=) == the CLI's report")
    check(len(st.positions) == st["n_positions"] < r["n_positions"] and
          bool(np.all(st.positions["strata"] & 1)),
          "score_only: %d of %d positions, every one in the stratum" % (len(st.positions), r["n_positions"]))


def stats_equal_kl():
    f32 = os.path.join(SHARED, "models", "stories260K", "f32.gguf")
    q8 = os.path.join(SHARED, "models", "stories260K", "q8_0.gguf")
    ref, arm = kldeval.Model(f32), kldeval.Model(q8)
    ids = ref.tokenize("Once upon a time there was a little girl named Lily. She loved to play "
                       "outside in the park with her dog.")
    ids_path = os.path.join(OUT, "ids.i32")
    ids.astype("<i4").tofile(ids_path)
    lr, la = ref.logits(ids), arm.logits(ids)
    check(lr.shape == (len(ids), ref.n_vocab) and lr.dtype == np.float32, "logits shape %s" % (lr.shape,))
    s = kldeval.Stats()
    nxt = np.append(ids[1:], -1)
    s.add(lr, la, nxt)
    got = s.result()
    r = kldeval.kl(f32, q8, ids_file=ids_path, ctx=len(ids))
    for key in ("n_positions", "n_tokens", "kld", "kld_reverse", "jsd", "top1_agreement",
                "topk_overlap", "ppl_ref", "ppl_arm", "ln_ppl_ratio", "ppl_ratio", "delta_p"):
        check(got[key] == r[key], "Stats == kl: %s (%r vs %r)" % (key, got[key], r[key]))
    check(np.array_equal(s.positions["kld"], r.positions["kld"]), "per-position KLD equal")
    # the same logits as torch tensors (DLPack)
    try:
        import torch
        t = kldeval.Stats()
        t.add(torch.from_numpy(lr), torch.from_numpy(la), torch.from_numpy(nxt))
        check(t.result()["kld"] == got["kld"], "torch tensors give the numpy figures")
    except ImportError:
        check(False, "python3-torch is installed (tools/setup.sh)")
    print("Stats over Model.logits == kl over the same %d ids: mean KLD %r" % (len(ids), got["kld"]["mean"]))


# ---- a tiny llama forward in torch, from rand-llama-hf's safetensors ----

def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dtype = {"F16": np.float16, "F32": np.float32, "BF16": None}[info["dtype"]]
        out[name] = np.frombuffer(data[a:b], dtype=dtype).reshape(info["shape"]).astype(np.float32)
    return out


def torch_llama_logits(hf_dir, ids):
    import torch
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    w = {k: torch.from_numpy(v) for k, v in read_safetensors(os.path.join(hf_dir, "model.safetensors")).items()}
    d, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, theta = cfg.get("head_dim", d // nh), cfg["rms_norm_eps"], cfg["rope_theta"]
    n = len(ids)

    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = torch.arange(n, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)

    def rope(x):  # [heads, n, hd], rotate-half (Hugging Face layout)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    x = w["model.embed_tokens.weight"][torch.as_tensor(ids, dtype=torch.long)]
    mask = torch.full((n, n), float("-inf")).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, nh, hd).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, nkv, hd).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, nkv, hd).transpose(0, 1)
        q, k = rope(q), rope(k)
        k, v = k.repeat_interleave(nh // nkv, 0), v.repeat_interleave(nh // nkv, 0)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask, -1)
        o = (att @ v).transpose(0, 1).reshape(n, nh * hd)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + g @ w[p + "mlp.down_proj.weight"].T
    x = rms(x, w["model.norm.weight"])
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T, x


def torch_llama_forward(hf_dir, ids):
    """(logits, final-norm hidden states) of the torch forward."""
    return torch_llama_logits(hf_dir, ids)


def torch_against_engine():
    import torch
    torch.set_num_threads(1)
    hf = os.path.join(SHARED, "models", "rand-llama-hf")
    m = kldeval.Model(hf)
    ids = m.tokenize("The quick brown fox jumps over the lazy dog, and the licenses say so too.")
    with torch.no_grad():
        lt, _ = torch_llama_logits(hf, ids.tolist())
    le = m.logits(ids)
    s = kldeval.Stats()
    s.add(le, lt, np.append(ids[1:], -1))  # torch tensor through DLPack
    r = s.result()
    check(r["top1_agreement"] == 1.0, "torch and kldeval agree on the argmax everywhere")
    check(r["kld"]["max"] < 1e-6, "torch's float32 forward within 1e-6 nats of the exact engine: %r"
          % r["kld"]["max"])
    print("KLD(kldeval f32 engine || torch %s CPU float32 forward), rand-llama-hf, %d positions: "
          "mean %.3e, max %.3e nats; max |dlogit| %.3e" % (torch.__version__, r["n_positions"],
                                                          r["kld"]["mean"], r["kld"]["max"],
                                                          float(np.abs(le - lt.numpy()).max())))


def torch_hidden_candidate():
    """A candidate of hidden states written from outside (scripts/dump_teacher.py's writer,
    torch's final-norm states of rand-llama-hf) against kldeval's own hidden-state teacher of
    the same weights: the head identity the script computes is kldeval's, and the KLD is the
    torch-vs-engine difference only."""
    import importlib.util
    import torch
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("dump_teacher", os.path.join(here, "..", "..", "scripts", "dump_teacher.py"))
    dt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dt)
    hf = os.path.join(SHARED, "models", "rand-llama-hf")
    teacher = os.path.join(OUT, "hf-teacher")
    cand = os.path.join(OUT, "hf-cand")
    import shutil
    shutil.rmtree(teacher, ignore_errors=True)
    shutil.rmtree(cand, ignore_errors=True)
    p = cli("dump", "-m", hf, "--hidden", "--out", teacher, "--ctx", "24", "--chunks", "2", "--quiet", "--no-db")
    check(p.returncode == 0, "dump --hidden of the HF folder: " + p.stderr[-300:])
    with open(os.path.join(teacher, "manifest.json")) as f:
        tman = json.load(f)
    head = dt.head_identity(hf, True, 0)
    check(head["sha256"] == tman["head"]["sha256"] and head["tensor"] == tman["head"]["tensor"],
          "the script identifies the head as kldeval does: %s vs %s" % (head["sha256"], tman["head"]["sha256"]))
    tokens = np.fromfile(os.path.join(teacher, "tokens.bin"), dtype="<i4").reshape(tman["n_seqs"], tman["ctx_len"])
    meta = {"format_version": 3, "model": hf, "corpus_sha256": tman["corpus_sha256"],
            "ctx_len": tman["ctx_len"], "n_seqs": tman["n_seqs"], "top_k": 0, "n_vocab": tman["n_vocab"],
            "candidate": True, "teacher": {"model": tman["model"]}, "n_embd": tman["n_embd"],
            "hidden_dtype": "float32", "head": head}
    w = dt.DumpWriter(cand, meta, tokens)
    with torch.no_grad():
        for s_ in range(tman["n_seqs"]):
            ids = tokens[s_].tolist()
            logits, hidden = torch_llama_forward(hf, ids)
            n = tman["ctx_len"] - 1
            w.write_seq(s_, logits[:n].numpy(), None, hidden[:n].numpy())
    w.finish()
    r = kldeval.kl(reference_logits=teacher, arm_logits=cand)
    check(r.mode == "candidate-dumps" and r["kld"]["max"] < 1e-6,
          "torch's hidden states through kldeval's head: KLD max %r" % r["kld"]["max"])
    print("hidden-state candidate written by dump_teacher.py from torch (%d positions): KLD mean %.3e, "
          "max %.3e against kldeval's own hidden-state teacher" % (r["n_positions"], r["kld"]["mean"], r["kld"]["max"]))


def bad_inputs():
    def raises(cls, fn, needle, what):
        try:
            fn()
        except cls as e:
            check(needle in str(e), "%s: message %r names %r" % (what, str(e), needle))
            return
        except Exception as e:  # noqa: BLE001
            check(False, "%s: raised %s (%s), not %s" % (what, type(e).__name__, e, cls.__name__))
            return
        check(False, "%s: no error" % what)

    raises(kldeval.Error, lambda: kldeval.Model("/nonexistent/model.gguf"), "/nonexistent/model.gguf",
           "a missing file")
    s = kldeval.Stats()
    a = np.zeros((3, 10), dtype=np.float32)
    raises(kldeval.ArgumentError, lambda: s.add(a, np.zeros((3, 11), dtype=np.float32), [1, 2, -1]),
           "(3, 11)", "a shape mismatch")
    raises(kldeval.ArgumentError, lambda: s.add(a, a, [1, 2]), "2 entries for 3 rows", "too few tokens")
    raises(kldeval.ArgumentError, lambda: s.add(a, a, [1, 2, 10]), "outside [-1, 10)",
           "a token outside the vocabulary")
    nan = a.copy()
    nan[1, 4] = np.nan
    raises(kldeval.ArgumentError, lambda: kldeval.Stats().add(nan, a, [1, 2, -1]), "row 1: ", "a NaN row")
    raises(kldeval.ArgumentError, lambda: kldeval.Stats().result(), "no positions",
           "an empty accumulator")
    m = kldeval.Model(os.path.join(SHARED, "models", "stories260K", "f32.gguf"))
    raises(kldeval.ArgumentError, lambda: m.logits([1, 2, 600]), "600", "an id outside the vocabulary")
    raises(kldeval.ArgumentError, lambda: m.logits([1, 2], levers="kv=q9_0"), "q9_0", "a bad lever")
    raises(kldeval.MismatchError, lambda: kldeval.kl(os.path.join(RL, "f16.gguf"),
                                                     os.path.join(SHARED, "models", "stories260K", "f32.gguf")),
           "vocabularies differ", "a vocabulary mismatch")
    raises(kldeval.ArgumentError, lambda: kldeval.kl(os.path.join(RL, "f16.gguf")), "--lever",
           "self-flag without levers")
    raises(kldeval.ArgumentError, lambda: kldeval.Stats().add([[1.0, "x"]], [[1.0, 2.0]], [0]), "",
           "strings as logits")


def endpoints():
    """kl(arm_endpoint=, ref_endpoint=) against `kldeval serve` on loopback: with the
    whole vocabulary equal to the lockstep runs statistic for statistic."""
    sl = os.path.join(SHARED, "models", "stories260K")
    f32, q8 = os.path.join(sl, "f32.gguf"), os.path.join(sl, "q8_0.gguf")
    srv = subprocess.Popen([CLI, "serve", "-m", q8, "--port", "0", "--threads", "1", "--ctx", "1024"],
                           stderr=subprocess.PIPE, text=True)
    port = None
    while port is None:
        line = srv.stderr.readline()
        if not line:
            check(False, "the server started")
            return
        if "listening on http://127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0])
    url = "http://127.0.0.1:%d" % port
    try:
        lock = kldeval.kl(f32, q8, max_docs=3, threads=1)
        served = kldeval.kl(f32, arm_endpoint=url, top_logprobs=512, max_docs=3, threads=1)
        check(served["kld"] == lock["kld"] and served["top1_agreement"] == lock["top1_agreement"],
              "kl(arm_endpoint=) == kl(arm=) at K = V: %r vs %r" % (served["kld"]["mean"], lock["kld"]["mean"]))
        lock_rev = kldeval.kl(q8, f32, max_docs=3, threads=1)
        ref = kldeval.kl(ref_endpoint=url, arm=f32, top_logprobs=512, max_docs=3, threads=1)
        check(ref["kld"] == lock_rev["kld"], "kl(ref_endpoint=) == kl(ref=) at K = V")
        trunc = kldeval.kl(ref_endpoint=url, arm=f32, top_logprobs=20, max_docs=3, threads=1)
        check(trunc["truncated"]["kld_bound"]["mean"] <= lock_rev["kld"]["mean"],
              "kl(ref_endpoint=, top_logprobs=20): the bound lies below the exact mean")
        try:
            kldeval.kl(f32, arm_endpoint=url, endpoint_model="nope", max_docs=1)
            check(False, "an unknown served model raises")
        except kldeval.Error as e:
            check("404" in str(e), "an unknown served model: %s" % e)
        print("endpoints: K=V KLD mean %r (lockstep %r)" % (served["kld"]["mean"], lock["kld"]["mean"]))
    finally:
        srv.terminate()
        srv.wait(timeout=60)


def pip_install():
    """pip install ./python works offline (from a copy: pip writes build files beside
    the sources), and the installed package imports and computes."""
    import shutil
    src, target = os.path.join(OUT, "pysrc"), os.path.join(OUT, "pyinst")
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"), src)
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--no-index", "--quiet", "--target", target, src], capture_output=True, text=True)
    check(p.returncode == 0, "pip install ./python: " + p.stderr[-500:])
    code = ("import kldeval, numpy as np; s = kldeval.Stats(); "
            "s.add(np.zeros((2, 16), np.float32), np.zeros((2, 16), np.float32), [1, -1]); "
            "print(kldeval.__file__, s.result()['kld']['mean'])")
    env = dict(os.environ, PYTHONPATH=target)
    q = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    check(q.returncode == 0 and q.stdout.startswith(os.path.realpath(target)) and q.stdout.split()[-1] == "0.0",
          "the pip-installed package imports from its target and computes: %r %r" % (q.stdout, q.stderr[-300:]))


pip_install()
kl_equals_cli()
stats_equal_kl()
torch_against_engine()
torch_hidden_candidate()
bad_inputs()
endpoints()
print("%d checks, %d failed" % (checks, failures))
sys.exit(1 if failures else 0)
