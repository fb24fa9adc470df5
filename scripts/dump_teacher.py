#!/usr/bin/env python3
"""dump_teacher.py — writes a kldeval dump (format v1/v2, docs/dump-format.md)
from a Hugging Face model, so that an engine kldeval does not run itself can
be the teacher (reference) or a candidate of `kldeval kl`.

Teacher dump: the model is run teacher-forced over every sequence of a
kldeval tokens.bin (int32[n_seqs][ctx_len]); record r of sequence i holds the
top-k of the logits after tokens[i][0..r], the log-sum-exp over the full
vocabulary, and the sidecar (float64 log-sum-exp, log-probability of the next
token, argmax).

Candidate dump (--indices-from TEACHER_DIR): the same, but the logits are
taken at the teacher's indices, record by record (the scorer then compares
both arms at the same vocabulary entries).

    dump_teacher.py --model HF_DIR --tokens-from DIR_OR_FILE --ctx-len N \\
                    --out DIR --top-k K [--logits f16|f32] [--indices-from TEACHER_DIR]
    dump_teacher.py --selftest OUTDIR

--tokens-from takes a dump directory (its tokens.bin, ctx_len and
corpus_sha256) or a flat int32 little-endian id file cut into --ctx-len
windows (the remainder is dropped; corpus_sha256 is the SHA-256 of the file).
tokenizer_fingerprint is omitted: this script cannot compute kldeval's.
Needs python3 and numpy; the model path also needs torch and transformers.

--selftest writes three dumps into OUTDIR through the same functions, from a
synthetic "model" whose logits are integer arithmetic (exact in any
language; tests/test_dump_python.c recomputes them in C):
    tokens[s][p]     = (7*s + 3*p + (p*p) % 5) % V
    logits[s][r][v]  = float32(((s*131 + r*71 + v*v*13 + v*7 + 29*salt) % 97 - 48) / 7.0)
with V = 50, 3 sequences of ctx_len 9, top_k 6, salt 0 for the teacher and 1
for the candidate:
    OUTDIR/teacher-v1  (float16 logits)   OUTDIR/teacher-v2  (float32 logits)
    OUTDIR/candidate-v1 (salt 1, at teacher-v1's indices)
    OUTDIR/teacher-v3, teacher-v3-bf16 (hidden states, n_embd 8:
      hidden[s][r][e] = float32(((s*31 + r*17 + e*e*5 + e) % 41 - 20) / 3.0))

--hidden writes format 3 (the final-norm hidden states, docs/dump-format.md) from
the model's last hidden state; its manifest identifies the head by the hash of
its safetensors bytes, and `kldeval kl` applies that head again.
"""

import argparse
import datetime
import hashlib
import json
import os
import sys

try:
    import numpy as np
except ImportError:  # the self-test must fail loudly, not skip
    sys.exit("dump_teacher.py: numpy is missing (Debian: apt-get install python3-numpy)")

EXT_DTYPE = np.dtype([("lse64", "<f8"), ("logp_next", "<f8"), ("argmax", "<i4"), ("reserved", "<i4")])
MAX_TOPK = 1 << 20


def fail(msg):
    sys.exit("dump_teacher.py: " + msg)


def record_dtype(format_version, top_k):
    logit = "<f2" if format_version == 1 else "<f4"
    return np.dtype([("idx", "<i4", (top_k,)), ("val", logit, (top_k,)), ("lse", "<f4")])


def topk_desc(x, k):
    """Indices of the k largest entries of each row of x (float32), by
    descending value, ties to the lower index (stable order over ascending
    indices). Only the entries >= the k-th largest value are sorted."""
    n, v = x.shape
    out = np.empty((n, k), dtype=np.int32)
    for r in range(n):
        row = x[r]
        kth = np.partition(row, v - k)[v - k]
        cand = np.nonzero(row >= kth)[0]  # ascending indices, every tie included
        order = np.argsort(-row[cand], kind="stable")
        out[r] = cand[order[:k]]
    return out


def logsumexp64(x):
    """float64 log-sum-exp of each row: max + log(sum(exp(x - max)))."""
    x64 = x.astype(np.float64)
    m = x64.max(axis=1)
    return m + np.log(np.exp(x64 - m[:, None]).sum(axis=1))


def as_float16(logits, val, lse64):
    """A float16 dump's record values (docs/dump-format.md, "lse_of_stored"):
    the kept logits shifted by the row's maximum and rounded to float16, and
    the log-sum-exp of those stored values together with the float32 logits
    of the ids not kept (same shift), so that the stored distribution is
    normalised exactly."""
    mx = logits.max(axis=1, keepdims=True).astype(np.float64)
    half = (val.astype(np.float64) - mx).astype(np.float32).astype(np.float16)
    kept = np.exp(val.astype(np.float64) - mx).sum(axis=1)
    stored = np.exp(half.astype(np.float64)).sum(axis=1)
    if val.shape[1] < logits.shape[1]:
        tail = np.maximum(np.exp(lse64 - mx[:, 0]) - kept, 0.0)
    else:
        tail = np.zeros_like(kept)
    return half, np.log(stored + tail)


HIDDEN_DTYPES = ("float32", "bfloat16", "float16")


def hidden_bytes(h, dtype):
    """Hidden states as a format-3 record stores them: float32, float16, or
    bfloat16 rounded to nearest even (the top 16 bits of float32)."""
    if dtype == "float32":
        return h.astype("<f4").tobytes()
    if dtype == "float16":
        return h.astype("<f2").tobytes()
    u = h.astype("<f4").view("<u4").astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # finite values: round to nearest even
    return rounded.astype("<u2").tobytes()


def head_identity(model_dir, tied, softcap):
    """The head as kldeval identifies it: the safetensors bytes of lm_head.weight (or the
    embedding when tied), hashed; kldeval refuses to score with a head that hashes otherwise."""
    want = "model.embed_tokens.weight" if tied else "lm_head.weight"
    files = [f for f in sorted(os.listdir(model_dir)) if f.endswith(".safetensors")]
    for f in files:
        path = os.path.join(model_dir, f)
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
            if want not in header:
                continue
            info = header[want]
            a, b = info["data_offsets"]
            fh.seek(8 + n + a)
            data = fh.read(b - a)
        rows, cols = info["shape"]
        return {"tensor": "token_embd.weight" if tied else "output.weight",
                "type": {"F32": "f32", "F16": "f16", "BF16": "bf16"}.get(info["dtype"], info["dtype"].lower()),
                "rows": rows, "cols": cols, "sha256": hashlib.sha256(data).hexdigest(),
                "tied": bool(tied), "final_softcap": float(softcap or 0.0)}
    fail("%s: no %s in its safetensors files: cannot identify the head" % (model_dir, want))


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_json_atomic(directory, name, obj):
    path = os.path.join(directory, name)
    tmp = path + ".tmp"
    write_bytes(tmp, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    os.replace(tmp, path)
    fsync_dir(directory)


def manifest_object(meta):
    """The manifest: the seed's v1 keys first, then kldeval's extensions
    this script knows (absent ones are left out)."""
    m = {
        "format_version": meta["format_version"],
        "model": meta["model"],
        "corpus_sha256": meta["corpus_sha256"],
        "ctx_len": meta["ctx_len"],
        "n_seqs": meta["n_seqs"],
        "positions_per_seq": meta["ctx_len"] - 1,
        "created": meta.get("created") or utc_now(),
        "notes": meta.get("notes") or "",
        "kind": "candidate" if meta.get("candidate") else "teacher",
        "ext": True,
        "n_vocab": meta["n_vocab"],
        "lse_of_stored": True,
    }
    if meta["format_version"] == 3:  # hidden states: n_embd values a record, and the head
        m["n_embd"] = meta["n_embd"]
        m["hidden_dtype"] = meta["hidden_dtype"]
        m["head"] = meta["head"]
    else:
        m["top_k"] = meta["top_k"]
        m["logit_dtype"] = "float16" if meta["format_version"] == 1 else "float32"
    for key in ("chunking", "bos", "windows"):
        if meta.get(key):
            m[key] = meta[key]
    if meta.get("candidate") and meta.get("teacher"):
        m["teacher"] = meta["teacher"]
    return m


class DumpWriter:
    """Writes one dump directory: tokens.bin and dump.partial.json at once,
    then the sequences in order, then manifest.json (atomically) last."""

    def __init__(self, out, meta, tokens):
        if meta["format_version"] not in (1, 2, 3):
            fail("format_version must be 1, 2 or 3")
        if meta["format_version"] == 3:
            if meta.get("hidden_dtype") not in HIDDEN_DTYPES or not 1 <= meta.get("n_embd", 0) <= MAX_TOPK:
                fail("format 3 needs n_embd and hidden_dtype (float32, bfloat16, float16)")
        elif not 1 <= meta["top_k"] <= min(MAX_TOPK, meta["n_vocab"]):
            fail("top_k %d outside [1, min(%d, n_vocab %d)]" % (meta["top_k"], MAX_TOPK, meta["n_vocab"]))
        tokens = np.ascontiguousarray(tokens, dtype="<i4")
        if tokens.shape != (meta["n_seqs"], meta["ctx_len"]):
            fail("tokens have shape %s, expected (%d, %d)" % (tokens.shape, meta["n_seqs"], meta["ctx_len"]))
        if tokens.size and (tokens.min() < 0 or tokens.max() >= meta["n_vocab"]):
            fail("token ids outside [0, n_vocab %d)" % meta["n_vocab"])
        if os.path.exists(out) and os.listdir(out):
            fail("%s: not empty (a new dump needs a new or empty directory)" % out)
        os.makedirs(out, exist_ok=True)
        self.out, self.meta, self.tokens = out, meta, tokens
        self.manifest = manifest_object(meta)
        self.rec = None if meta["format_version"] == 3 else record_dtype(meta["format_version"], meta["top_k"])
        self.next_seq = 0
        write_bytes(os.path.join(out, "tokens.bin"), tokens.tobytes())
        write_json_atomic(out, "dump.partial.json", self.manifest)

    def write_seq(self, seq, logits, indices=None, hidden=None):
        """logits: float32 [ctx_len - 1, n_vocab], row r after tokens[seq][0..r].
        indices: a teacher's int32 [ctx_len - 1, top_k] (candidate dumps).
        hidden: format 3, the final-norm hidden states [ctx_len - 1, n_embd]."""
        meta = self.meta
        pps, k = meta["ctx_len"] - 1, meta.get("top_k")
        if seq != self.next_seq:
            fail("sequence %d written out of order (expected %d)" % (seq, self.next_seq))
        logits = np.ascontiguousarray(logits, dtype=np.float32)
        if logits.shape != (pps, meta["n_vocab"]):
            fail("sequence %d: logits of shape %s, expected (%d, %d)" % (seq, logits.shape, pps, meta["n_vocab"]))
        if not np.isfinite(logits).all():
            fail("sequence %d: the model produced non-finite logits" % seq)
        if meta["format_version"] == 3:
            self.write_hidden(seq, logits, hidden)
            return
        idx = topk_desc(logits, k) if indices is None else np.asarray(indices, dtype=np.int32)
        if idx.shape != (pps, k):
            fail("sequence %d: indices of shape %s, expected (%d, %d)" % (seq, idx.shape, pps, k))
        if idx.min() < 0 or idx.max() >= meta["n_vocab"]:
            fail("sequence %d: the teacher's indices reach outside n_vocab %d" % (seq, meta["n_vocab"]))
        val = np.take_along_axis(logits, idx.astype(np.int64), axis=1)
        lse64 = logsumexp64(logits)
        nxt = self.tokens[seq, 1:].astype(np.int64)
        rec = np.zeros(pps, dtype=self.rec)
        rec["idx"] = idx
        lse_rec = lse64
        if meta["format_version"] == 1:
            half, lse_rec = as_float16(logits, val, lse64)
            if not np.isfinite(half).all():
                fail("sequence %d: a logit lies outside float16's range below its row's maximum "
                     "(use --logits f32)" % seq)
            rec["val"] = half
        else:
            rec["val"] = val
        rec["lse"] = lse_rec.astype(np.float32)
        ext = np.zeros(pps, dtype=EXT_DTYPE)
        ext["lse64"] = lse_rec
        ext["logp_next"] = logits[np.arange(pps), nxt].astype(np.float64) - lse64
        ext["argmax"] = logits.argmax(axis=1)  # first index on ties
        write_bytes(os.path.join(self.out, "seq-%d.bin" % seq), rec.tobytes())
        write_bytes(os.path.join(self.out, "seq-%d.ext.bin" % seq), ext.tobytes())
        self.next_seq += 1

    def write_hidden(self, seq, logits, hidden):
        """Format 3: the hidden states in the dump's dtype, the sidecar from the logits."""
        meta = self.meta
        pps = meta["ctx_len"] - 1
        hidden = np.ascontiguousarray(hidden, dtype=np.float32)
        if hidden.shape != (pps, meta["n_embd"]):
            fail("sequence %d: hidden states of shape %s, expected (%d, %d)"
                 % (seq, hidden.shape, pps, meta["n_embd"]))
        if not np.isfinite(hidden).all():
            fail("sequence %d: non-finite hidden states" % seq)
        lse64 = logsumexp64(logits)
        nxt = self.tokens[seq, 1:].astype(np.int64)
        ext = np.zeros(pps, dtype=EXT_DTYPE)
        ext["lse64"] = lse64
        ext["logp_next"] = logits[np.arange(pps), nxt].astype(np.float64) - lse64
        ext["argmax"] = logits.argmax(axis=1)
        write_bytes(os.path.join(self.out, "seq-%d.bin" % seq), hidden_bytes(hidden, meta["hidden_dtype"]))
        write_bytes(os.path.join(self.out, "seq-%d.ext.bin" % seq), ext.tobytes())
        self.next_seq += 1

    def finish(self):
        if self.next_seq != self.meta["n_seqs"]:
            fail("finish after %d of %d sequences" % (self.next_seq, self.meta["n_seqs"]))
        write_json_atomic(self.out, "manifest.json", self.manifest)
        os.remove(os.path.join(self.out, "dump.partial.json"))
        fsync_dir(self.out)


def read_manifest(directory):
    path = os.path.join(directory, "manifest.json")
    try:
        with open(path, "rb") as f:
            m = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))
    for key in ("format_version", "ctx_len", "n_seqs", "top_k", "corpus_sha256", "model"):
        if key not in m:
            fail("%s: %s: missing" % (path, key))
    return m


def read_teacher_indices(directory):
    """A teacher dump's manifest, tokens and per-sequence indices."""
    m = read_manifest(directory)
    if m.get("kind", "teacher") != "teacher":
        fail("%s: --indices-from needs a teacher dump, this is a %s dump" % (directory, m["kind"]))
    pps = m["ctx_len"] - 1
    tokens = np.fromfile(os.path.join(directory, "tokens.bin"), dtype="<i4")
    if tokens.size != m["n_seqs"] * m["ctx_len"]:
        fail("%s/tokens.bin: %d ids, expected %d" % (directory, tokens.size, m["n_seqs"] * m["ctx_len"]))
    if m["format_version"] == 3:  # hidden states: tokens only, no ids to follow
        return m, tokens.reshape(m["n_seqs"], m["ctx_len"]), None
    rec = record_dtype(m["format_version"], m["top_k"])
    indices = []
    for s in range(m["n_seqs"]):
        path = os.path.join(directory, "seq-%d.bin" % s)
        r = np.fromfile(path, dtype=rec)
        if r.size != pps:
            fail("%s: %d records, expected %d" % (path, r.size, pps))
        indices.append(r["idx"].copy())
    return m, tokens.reshape(m["n_seqs"], m["ctx_len"]), indices


def load_tokens(source, ctx_len):
    """(tokens [n_seqs, ctx_len], corpus_sha256, manifest or None)."""
    if os.path.isdir(source):
        path = os.path.join(source, "tokens.bin")
        man = None
        for name in ("manifest.json", "dump.partial.json"):
            p = os.path.join(source, name)
            if os.path.exists(p):
                with open(p, "rb") as f:
                    man = json.loads(f.read().decode("utf-8"))
                break
        if man is None:
            fail("%s: a tokens directory needs manifest.json (ctx_len, corpus_sha256)" % source)
        if ctx_len and ctx_len != man["ctx_len"]:
            fail("--ctx-len %d, but %s has ctx_len %d" % (ctx_len, source, man["ctx_len"]))
        ids = np.fromfile(path, dtype="<i4")
        n = man["ctx_len"]
        if ids.size != man["n_seqs"] * n:
            fail("%s: %d ids, expected n_seqs * ctx_len = %d" % (path, ids.size, man["n_seqs"] * n))
        return ids.reshape(man["n_seqs"], n), man["corpus_sha256"], man
    if not ctx_len or ctx_len < 2:
        fail("--ctx-len N (>= 2) is needed with a token file")
    with open(source, "rb") as f:
        raw = f.read()
    if len(raw) % 4:
        fail("%s: %d bytes, not a whole number of int32 ids" % (source, len(raw)))
    ids = np.frombuffer(raw, dtype="<i4")
    n_seqs = ids.size // ctx_len
    if n_seqs == 0:
        fail("%s: %d ids, fewer than one window of %d" % (source, ids.size, ctx_len))
    if ids.size % ctx_len:
        print("dump_teacher.py: %s: dropping the last %d ids (not a whole window)" % (source, ids.size % ctx_len),
              file=sys.stderr)
    return ids[: n_seqs * ctx_len].reshape(n_seqs, ctx_len).copy(), hashlib.sha256(raw).hexdigest(), None


def run_dump(out, meta, tokens, forward, teacher_indices=None):
    """The one path both the model and the self-test take: forward(seq,
    ids) returns float32 logits [ctx_len - 1, n_vocab] for sequence seq."""
    w = DumpWriter(out, meta, tokens)
    for s in range(meta["n_seqs"]):
        out = forward(s, tokens[s])
        logits, hidden = out if isinstance(out, tuple) else (out, None)
        w.write_seq(s, logits, None if teacher_indices is None else teacher_indices[s], hidden)
    w.finish()


def plan(args, model_name, n_vocab, forward_factory, tokens_override=None):
    """Builds meta/tokens from the arguments and writes the dump."""
    teacher_indices = None
    teacher = None
    if args.indices_from:
        tman, ttok, teacher_indices = read_teacher_indices(args.indices_from)
        teacher = {k: tman[k] for k in ("model", "corpus_sha256", "tokenizer_fingerprint", "created") if k in tman}
    if tokens_override is not None:
        tokens, corpus_sha, src_man = tokens_override
    elif args.tokens_from:
        tokens, corpus_sha, src_man = load_tokens(args.tokens_from, args.ctx_len)
    elif args.indices_from:
        tokens, corpus_sha, src_man = ttok, tman["corpus_sha256"], tman
    else:
        fail("--tokens-from is required")
    hidden = getattr(args, "hidden", False)
    if args.indices_from and (ttok.shape != tokens.shape or not np.array_equal(ttok, tokens)):
        fail("%s: the teacher was fed other tokens than --tokens-from" % args.indices_from)
    if hidden:
        top_k = 0
        teacher_indices = None  # a hidden-state candidate holds full rows at the teacher's tokens
    elif args.indices_from:
        top_k = tman.get("top_k")
        if not top_k:
            fail("%s: a hidden-state teacher: its candidate needs --hidden too" % args.indices_from)
    else:
        top_k = args.top_k
    if not top_k and not hidden:
        fail("--top-k K is required for a teacher dump")
    meta = {
        "format_version": 3 if hidden else 1 if args.logits == "f16" else 2,
        "model": model_name,
        "corpus_sha256": corpus_sha,
        "ctx_len": int(tokens.shape[1]),
        "n_seqs": int(tokens.shape[0]),
        "top_k": int(top_k),
        "n_vocab": int(n_vocab),
        "notes": args.notes or "",
        "created": getattr(args, "created", None),
        "candidate": args.indices_from is not None,
        "teacher": teacher,
    }
    if hidden:
        meta.update(getattr(args, "hidden_meta", {}))
    if src_man:
        for key in ("chunking", "bos", "windows"):
            if key in src_man:
                meta[key] = src_man[key]
    run_dump(args.out, meta, tokens, forward_factory(meta), teacher_indices)


# ---- the Hugging Face model ----

def model_main(args):
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        fail("the model path needs torch and transformers (%s); --selftest needs neither" % e)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype)
    model.to(args.device).eval()
    n_vocab = model.get_output_embeddings().weight.shape[0]

    def factory(meta):
        def forward(seq, ids):
            with torch.no_grad():
                t = torch.tensor(np.asarray(ids, dtype=np.int64)[None, :], device=args.device)
                out = model(input_ids=t, output_hidden_states=args.hidden)
                logits = out.logits[0, : meta["ctx_len"] - 1, :].float().cpu().numpy()
                if not args.hidden:
                    return logits
                # transformers' last hidden state is the one after the final norm
                h = out.hidden_states[-1][0, : meta["ctx_len"] - 1, :].float().cpu().numpy()
                return logits, h
        return forward

    name = os.path.basename(os.path.normpath(args.model))
    if args.hidden:
        cfg = model.config
        tied = bool(getattr(cfg, "tie_word_embeddings", False))
        args.hidden_meta = {"n_embd": int(cfg.hidden_size), "hidden_dtype": args.hidden_dtype,
                            "head": head_identity(args.model, tied, getattr(cfg, "final_logit_softcapping", 0))}
        name = args.model  # kl opens this model for its head (or --teacher-head)
    plan(args, name, n_vocab, factory)


# ---- the self-test ----

SELFTEST = {"n_vocab": 50, "n_seqs": 3, "ctx_len": 9, "top_k": 6, "n_embd": 8}
# a head identity of the right shape; the self-test checks the layout, not a model
SELFTEST_HEAD = {"tensor": "output.weight", "type": "f32", "rows": 50, "cols": 8,
                 "sha256": hashlib.sha256(b"selftest head").hexdigest(), "tied": False,
                 "final_softcap": 0.0}


def selftest_hidden(seq):
    """hidden[s][r][e] = float32(((s*31 + r*17 + e*e*5 + e) % 41 - 20) / 3.0)"""
    r = np.arange(SELFTEST["ctx_len"] - 1, dtype=np.int64)[:, None]
    e = np.arange(SELFTEST["n_embd"], dtype=np.int64)[None, :]
    return (((seq * 31 + r * 17 + e * e * 5 + e) % 41 - 20).astype(np.float64) / 3.0).astype(np.float32)


def selftest_tokens():
    s = np.arange(SELFTEST["n_seqs"], dtype=np.int64)[:, None]
    p = np.arange(SELFTEST["ctx_len"], dtype=np.int64)[None, :]
    return ((7 * s + 3 * p + (p * p) % 5) % SELFTEST["n_vocab"]).astype(np.int32)


def selftest_logits(seq, salt):
    r = np.arange(SELFTEST["ctx_len"] - 1, dtype=np.int64)[:, None]
    v = np.arange(SELFTEST["n_vocab"], dtype=np.int64)[None, :]
    h = (seq * 131 + r * 71 + v * v * 13 + v * 7 + 29 * salt) % 97
    return ((h - 48).astype(np.float64) / 7.0).astype(np.float32)


def selftest_main(outdir):
    os.makedirs(outdir, exist_ok=True)
    tokens = selftest_tokens()
    corpus_sha = hashlib.sha256(tokens.astype("<i4").tobytes()).hexdigest()
    runs = (("teacher-v1", "f16", 0, None, None), ("teacher-v2", "f32", 0, None, None),
            ("candidate-v1", "f16", 1, "teacher-v1", None), ("teacher-v3", "f32", 0, None, "float32"),
            ("teacher-v3-bf16", "f32", 0, None, "bfloat16"))
    for name, logits, salt, indices_from, hidden_dtype in runs:
        out = os.path.join(outdir, name)
        if os.path.isdir(out):  # a rerun starts over
            for f in os.listdir(out):
                os.remove(os.path.join(out, f))
        args = argparse.Namespace(out=out, logits=logits, top_k=SELFTEST["top_k"], ctx_len=None,
                                  tokens_from=None, notes="dump_teacher.py self-test",
                                  indices_from=os.path.join(outdir, indices_from) if indices_from else None,
                                  created="2026-01-01T00:00:00Z", hidden=hidden_dtype is not None,
                                  hidden_meta={"n_embd": SELFTEST["n_embd"], "hidden_dtype": hidden_dtype,
                                               "head": SELFTEST_HEAD})

        def factory(meta, salt=salt, hidden=hidden_dtype is not None):
            if hidden:
                return lambda seq, ids: (selftest_logits(seq, salt), selftest_hidden(seq))
            return lambda seq, ids: selftest_logits(seq, salt)

        plan(args, "selftest-salt%d" % salt, SELFTEST["n_vocab"], factory,
             tokens_override=(tokens, corpus_sha, {"chunking": "selftest", "windows": "3 fixed sequences"}))
        print("dump_teacher.py: wrote %s" % out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="Hugging Face model directory")
    ap.add_argument("--tokens-from", help="a dump directory or a flat int32 id file")
    ap.add_argument("--ctx-len", type=int, help="window length (ids per sequence)")
    ap.add_argument("--out", help="the dump directory to write (new or empty)")
    ap.add_argument("--top-k", type=int, help="entries per record (a teacher dump)")
    ap.add_argument("--logits", choices=("f16", "f32"), default="f16", help="v1 (float16) or v2 (float32)")
    ap.add_argument("--hidden", action="store_true",
                    help="format 3: the final-norm hidden states (kl applies the model's head again)")
    ap.add_argument("--hidden-dtype", choices=HIDDEN_DTYPES, default="float32",
                    help="format 3: how the hidden states are stored")
    ap.add_argument("--indices-from", help="a teacher dump: write a candidate dump at its indices")
    ap.add_argument("--notes", help="the manifest's notes")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                    help="the model's compute dtype (logits are ranked in float32)")
    ap.add_argument("--selftest", metavar="OUTDIR", help="write the synthetic self-test dumps")
    args = ap.parse_args()
    if args.selftest:
        selftest_main(args.selftest)
        return
    for need in ("model", "out"):
        if not getattr(args, need):
            ap.error("--%s is required" % need)
    if not args.tokens_from and not args.indices_from:
        ap.error("--tokens-from is required")
    args.created = None
    model_main(args)


if __name__ == "__main__":
    main()
