"""kldeval from Python: exact KL divergence between two arms of a language model.

A thin ctypes layer over libkldeval (include/kld.h): every figure is computed
by the library, in float64 from the exact float32 logits of kldeval's engine,
so a figure here is the one `kldeval kl` prints, bit for bit.

    import kldeval
    r = kldeval.kl("f16.gguf", "f16.gguf@q4_K_M", max_docs=4)
    r["kld"]["mean"], r.positions["kld"]

    m = kldeval.Model("f16.gguf")
    logits = m.logits(m.tokenize("Once upon a time"))     # numpy [n, n_vocab] float32

    s = kldeval.Stats()
    s.add(ref_logits, arm_logits, next_tokens)             # numpy, torch (DLPack / __array__)
    s.result()["kld"]["mean"]

The library is found through $KLDEVAL_LIB, then the system's library path
(libkldeval.so.0 as `cmake --install` puts it), then a build tree beside this
package (../../build). Errors raise kldeval.Error (a subclass per status)
carrying the library's message.
"""

import ctypes
import ctypes.util
import json
import os

import numpy as np

__all__ = ["Error", "ArgumentError", "FormatError", "IOError_", "MismatchError", "UnsupportedError",
           "Model", "Stats", "Result", "kl", "version"]


# ---- errors ----

class Error(Exception):
    """A libkldeval error: .status (the kld_status name) and the message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class IOError_(Error):
    pass


class FormatError(Error):
    pass


class UnsupportedError(Error):
    pass


class ArgumentError(Error, ValueError):
    pass


class MismatchError(Error, ValueError):
    pass


class InterruptedError_(Error):
    pass


_ERRORS = {1: IOError_, 2: FormatError, 3: UnsupportedError, 4: Error, 5: ArgumentError,
           6: MismatchError, 7: InterruptedError_}


class _KldError(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("msg", ctypes.c_char * 1024)]


# ---- the library ----

def _load():
    tried = []
    names = []
    if os.environ.get("KLDEVAL_LIB"):
        names.append(os.environ["KLDEVAL_LIB"])
    found = ctypes.util.find_library("kldeval")
    if found:
        names.append(found)
    names.append("libkldeval.so.0")
    here = os.path.dirname(os.path.abspath(__file__))
    names.append(os.path.join(here, "..", "..", "build", "libkldeval.so"))
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            tried.append("%s (%s)" % (name, e))
    raise ImportError("kldeval: cannot load libkldeval; tried " + "; ".join(tried) +
                      " (set KLDEVAL_LIB to the library's path)")


_lib = _load()
_c = ctypes
_P = _c.c_void_p


def _fn(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_status_name = _fn("kld_status_name", _c.c_char_p, _c.c_int)
_version = _fn("kld_version", _c.c_char_p)
_free = _fn("kld_free", None, _P)
_model_open = _fn("kld_model_open", _c.c_int, _c.c_char_p, _P, _c.POINTER(_P), _c.POINTER(_KldError))
_model_close = _fn("kld_model_close", None, _P)
_model_n_vocab = _fn("kld_model_n_vocab", _c.c_int32, _P)
_model_n_ctx_train = _fn("kld_model_n_ctx_train", _c.c_int64, _P)
_model_n_embd = _fn("kld_model_n_embd", _c.c_int64, _P)
_model_arch = _fn("kld_model_arch", _c.c_char_p, _P)
_model_tokenize = _fn("kld_model_tokenize", _c.c_int, _P, _c.c_char_p, _c.c_size_t, _c.c_bool,
                      _c.POINTER(_c.POINTER(_c.c_int32)), _c.POINTER(_c.c_size_t), _c.POINTER(_KldError))
_model_logits = _fn("kld_model_logits", _c.c_int, _P, _c.c_char_p, _P, _c.c_int64, _c.c_int, _P,
                    _c.POINTER(_KldError))
_stats_create = _fn("kld_stats_create", _c.c_int, _c.POINTER(_P), _c.c_int, _c.POINTER(_KldError))
_stats_free = _fn("kld_stats_free", None, _P)
_stats_begin_doc = _fn("kld_stats_begin_doc", _c.c_int, _P, _c.POINTER(_KldError))
_stats_add_logits = _fn("kld_stats_add_logits", _c.c_int, _P, _P, _P, _c.c_int32, _c.c_int32,
                        _c.c_uint32, _c.POINTER(_KldError))
_stats_count = _fn("kld_stats_count", _c.c_size_t, _P)
_stats_records = _fn("kld_stats_records", _P, _P, _c.POINTER(_c.c_size_t))
_kl_defaults = _fn("kld_kl_config_defaults", None, _P)
_kl_evaluate = _fn("kld_kl_evaluate", _c.c_int, _P, _c.POINTER(_P), _c.POINTER(_KldError))
_result_free = _fn("kld_result_free", None, _P)
_result_mode = _fn("kld_result_mode", _c.c_char_p, _P)
_result_partial = _fn("kld_result_partial", _c.c_bool, _P)
_result_positions = _fn("kld_result_positions", _P, _P, _c.POINTER(_c.c_size_t))
_result_json = _fn("kld_result_json", _P, _P, _c.POINTER(_KldError))


def version():
    """The library's version string."""
    return _version().decode()


def _raise(status, err):
    cls = _ERRORS.get(status, Error)
    raise cls(_status_name(status).decode(), err.msg.decode("utf-8", "replace"))


def _check(status, err):
    if status != 0:
        _raise(status, err)


def _take_string(ptr):
    """A malloc'd C string from the library, as str (freed)."""
    if not ptr:
        return None
    try:
        return _c.string_at(ptr).decode("utf-8")
    finally:
        _free(ptr)


def _enc(s):
    return None if s is None else os.fsencode(s) if not isinstance(s, bytes) else s


# kld_position (96 bytes), as numpy sees it
POSITION_DTYPE = np.dtype([("kld", "<f8"), ("kld_rev", "<f8"), ("jsd", "<f8"), ("nll_ref", "<f8"),
                           ("nll_arm", "<f8"), ("kld_bound", "<f8"), ("dlogit", "<f8"),
                           ("p_ref_max", "<f4"), ("mass", "<f4"), ("token", "<i4"),
                           ("top_ref", "<i4"), ("top_arm", "<i4"), ("ctx_pos", "<u4"),
                           ("topk_hits", "<u2"), ("topk", "<u2"), ("topk_ordered", "<u2"),
                           ("rank_ref", "<u2"), ("rank_arm", "<u2"), ("strata", "<u2"),
                           ("truncated", "u1"), ("next_outside", "u1"), ("pad_", "u1", (2,))])
assert POSITION_DTYPE.itemsize == 96


def _positions(ptr, n):
    if not ptr or n == 0:
        return np.zeros(0, dtype=POSITION_DTYPE)
    buf = (_c.c_char * (n * POSITION_DTYPE.itemsize)).from_address(ptr)
    return np.frombuffer(bytes(buf), dtype=POSITION_DTYPE)


def _as_array(x, dtype, name):
    """numpy, or anything with __dlpack__ / __array__ (a CPU torch tensor), as a
    C-contiguous numpy array of dtype."""
    if not isinstance(x, np.ndarray):
        if hasattr(x, "detach"):  # a torch tensor: no gradient, on the CPU
            x = x.detach().cpu()
        if hasattr(x, "__dlpack__"):
            try:
                x = np.from_dlpack(x)
            except (TypeError, RuntimeError, BufferError):
                x = np.asarray(x)
        else:
            x = np.asarray(x)
    if x.dtype.kind not in "fiu":
        raise ArgumentError("KLD_ERR_ARG", "%s: expected numbers, got dtype %s" % (name, x.dtype))
    return np.ascontiguousarray(x, dtype=dtype)


# ---- models ----

class Model:
    """A model kldeval reads: a .gguf, .safetensors, a Hugging Face folder or a
    llama2.c model.bin; "f16.gguf@q4_K_M" quantizes on load, "base.gguf+lora.gguf:0.5"
    applies a LoRA adapter. levers (e.g. "kv=q8_0,act=q8") apply to logits()."""

    def __init__(self, path, levers=None, threads=0):
        self._h = _P()
        err = _KldError()
        _check(_model_open(_enc(str(path)), None, _c.byref(self._h), _c.byref(err)), err)
        self.path = str(path)
        self.levers = levers
        self.threads = threads
        self.n_vocab = _model_n_vocab(self._h)
        self.n_ctx_train = _model_n_ctx_train(self._h)
        self.n_embd = _model_n_embd(self._h)
        self.arch = _model_arch(self._h).decode()

    def close(self):
        if self._h:
            _model_close(self._h)
            self._h = _P()

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def tokenize(self, text, add_special=True):
        """Token ids (numpy int32) of text with the model's tokenizer; add_special:
        its BOS, as `kl` encodes each document."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids = _c.POINTER(_c.c_int32)()
        n = _c.c_size_t()
        err = _KldError()
        _check(_model_tokenize(self._h, data, len(data), bool(add_special), _c.byref(ids),
                               _c.byref(n), _c.byref(err)), err)
        try:
            return np.ctypeslib.as_array(ids, shape=(n.value,)).copy() if n.value else \
                np.zeros(0, dtype=np.int32)
        finally:
            _free(_c.cast(ids, _P))

    def logits(self, ids, levers=None):
        """The float32 logits [len(ids), n_vocab] of ids teacher-forced from an
        empty context (row t: after ids[0..t])."""
        a = _as_array(ids, np.int32, "ids").reshape(-1)
        if a.size == 0:
            raise ArgumentError("KLD_ERR_ARG", "logits: no ids")
        out = np.empty((a.size, self.n_vocab), dtype=np.float32)
        lv = levers if levers is not None else self.levers
        err = _KldError()
        _check(_model_logits(self._h, _enc(lv), a.ctypes.data, a.size, self.threads,
                             out.ctypes.data, _c.byref(err)), err)
        return out


# ---- the accumulator ----

class Stats:
    """kldeval's statistics over logits from anywhere: add() rows of reference and
    arm logits with the true next tokens; result() gives the figures `kl` reports
    (the JSON report's names: r["kld"]["mean"], r["top1_agreement"], ...)."""

    def __init__(self, topk=10):
        self._h = _P()
        err = _KldError()
        _check(_stats_create(_c.byref(self._h), int(topk), _c.byref(err)), err)

    def close(self):
        if self._h:
            _stats_free(self._h)
            self._h = _P()

    def __del__(self):
        self.close()

    def __len__(self):
        return _stats_count(self._h)

    def add(self, ref_logits, arm_logits, next_tokens, positions=None):
        """One document: ref and arm logits [n, n_vocab] (float32; numpy, torch, any
        __array__ or DLPack object), next_tokens [n] (the true next token of each
        row, -1 where there is none), positions [n] (each row's position in its
        window; default 0 .. n-1)."""
        r = _as_array(ref_logits, np.float32, "ref_logits")
        a = _as_array(arm_logits, np.float32, "arm_logits")
        t = _as_array(next_tokens, np.int32, "next_tokens").reshape(-1)
        if r.ndim == 1:
            r, a = r.reshape(1, -1), a.reshape(1, -1)
        if r.ndim != 2 or r.shape != a.shape:
            raise ArgumentError("KLD_ERR_ARG", "ref_logits %s and arm_logits %s: expected two "
                                "[n, n_vocab] arrays of one shape" % (tuple(r.shape), tuple(a.shape)))
        n, nv = r.shape
        if t.size != n:
            raise ArgumentError("KLD_ERR_ARG", "next_tokens has %d entries for %d rows" % (t.size, n))
        if n and (t.min() < -1 or t.max() >= nv):
            raise ArgumentError("KLD_ERR_ARG", "next_tokens outside [-1, %d): %d .. %d"
                                % (nv, t.min(), t.max()))
        p = np.arange(n, dtype=np.uint32) if positions is None else \
            _as_array(positions, np.uint32, "positions").reshape(-1)
        if p.size != n:
            raise ArgumentError("KLD_ERR_ARG", "positions has %d entries for %d rows" % (p.size, n))
        err = _KldError()
        _check(_stats_begin_doc(self._h, _c.byref(err)), err)
        row = nv * 4
        for i in range(n):
            st = _stats_add_logits(self._h, r.ctypes.data + i * row, a.ctypes.data + i * row, nv,
                                   int(t[i]), int(p[i]), _c.byref(err))
            if st:
                cls = _ERRORS.get(st, Error)
                raise cls(_status_name(st).decode(),
                          "row %d: %s" % (i, err.msg.decode("utf-8", "replace")))
        return self

    @property
    def positions(self):
        """Every position scored so far (a numpy structured array, POSITION_DTYPE)."""
        n = _c.c_size_t()
        ptr = _stats_records(self._h, _c.byref(n))
        return _positions(ptr, n.value)

    def result(self):
        """The statistics as `kl`'s JSON report names them (a dict)."""
        summary = _KldSummaryBuffer()
        err = _KldError()
        _check(_stats_finalize(self._h, summary, _c.byref(err)), err)
        text = _take_string(_summary_json(summary, _c.byref(err)))
        if text is None:
            _raise(err.status or 4, err)
        return json.loads(text)


class _KldSummaryBuffer(ctypes.Structure):
    # room for a kld_summary (its figures are read through kld_summary_json)
    _fields_ = [("bytes", ctypes.c_char * 8192)]


_stats_finalize = _fn("kld_stats_finalize", _c.c_int, _P, _c.POINTER(_KldSummaryBuffer),
                      _c.POINTER(_KldError))
_summary_json = _fn("kld_summary_json", _P, _c.POINTER(_KldSummaryBuffer), _c.POINTER(_KldError))


# ---- a whole evaluation ----

class _ArmSpec(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("path", ctypes.c_char_p), ("levers", ctypes.c_char_p),
                ("decode", ctypes.c_bool), ("prompt_len", ctypes.c_int64), ("head", ctypes.c_char_p),
                ("endpoint_model", ctypes.c_char_p), ("top_logprobs", ctypes.c_int32),
                ("api_key", ctypes.c_char_p)]


class _Shard(ctypes.Structure):
    _fields_ = [("k", ctypes.c_uint32), ("n", ctypes.c_uint32), ("mode", ctypes.c_int)]


class _KlConfig(ctypes.Structure):
    _fields_ = [("ref", _ArmSpec), ("arm", _ArmSpec), ("corpus_path", ctypes.c_char_p),
                ("corpus_format", ctypes.c_char_p), ("ids_path", ctypes.c_char_p),
                ("max_docs", ctypes.c_int64), ("max_tokens", ctypes.c_int64), ("ctx", ctypes.c_int64),
                ("chunk", ctypes.c_int64), ("max_chunks", ctypes.c_int64), ("chunking", ctypes.c_int),
                ("n_threads", ctypes.c_int), ("topk", ctypes.c_int),
                ("allow_vocab_mismatch", ctypes.c_bool), ("allow_long_context", ctypes.c_bool),
                ("stop", ctypes.c_void_p), ("progress", ctypes.c_void_p),
                ("progress_user", ctypes.c_void_p), ("shard", _Shard),
                ("checkpoint", ctypes.c_char_p), ("checkpoint_every", ctypes.c_int64),
                ("resume", ctypes.c_bool), ("strata", ctypes.c_char_p), ("score_only", ctypes.c_char_p)]


_KIND = {"model": 1, "self": 2, "teacher": 3, "candidate": 4, "llamacpp-base": 5, "endpoint": 6}
_CHUNKING = {None: -1, "doc": 0, "llamacpp": 1, "stream": 2}


class Result(dict):
    """The JSON report `kldeval kl --json` writes, as a dict, with .positions (every
    scored position, a numpy structured array), .mode and .partial."""


def kl(ref=None, arm=None, corpus=None, *, reference_logits=None, arm_logits=None,
       llamacpp_base=None, levers=None, ref_levers=None, decode=False, prompt_len=0,
       ctx=None, max_docs=0, max_tokens=0, chunks=0, chunking=None, ids_file=None,
       corpus_format=None, chunk=128, topk=10, threads=0, allow_vocab_mismatch=False,
       allow_long_context=False, teacher_head=None, arm_head=None, strata=None, score_only=None,
       ref_endpoint=None, arm_endpoint=None, endpoint_model=None, top_logprobs=0, api_key=None):
    """`kldeval kl` as a function. ref / arm: model paths (MODEL, MODEL@POLICY,
    MODEL+ADAPTER[:SCALE]); instead of ref a saved teacher (reference_logits) or a
    llama.cpp base file (llamacpp_base); instead of arm a candidate dump
    (arm_logits); without arm, the run is self-flag: ref with `levers` against ref.
    strata: "NAME=REGEX[,NAME=REGEX...]" on the next token's text (report["strata"]);
    score_only: the one stratum to score. ref_endpoint / arm_endpoint: an OpenAI-style
    completions server's URL as the reference or the arm (kl --ref-endpoint /
    --arm-endpoint; endpoint_model, top_logprobs, api_key as there). Returns a Result
    (the JSON report as a dict)."""
    c = _KlConfig()
    _kl_defaults(_c.byref(c))
    keep = []  # the encoded strings must outlive the call

    def s(x):
        b = _enc(None if x is None else str(x))
        keep.append(b)
        return b

    refs = [x for x in (ref, reference_logits, llamacpp_base, ref_endpoint) if x is not None]
    arms = [x for x in (arm, arm_logits, arm_endpoint) if x is not None]
    if len(refs) != 1 or len(arms) > 1:
        raise ArgumentError("KLD_ERR_ARG", "give one reference (ref, reference_logits, llamacpp_base "
                            "or ref_endpoint) and at most one arm (arm, arm_logits or arm_endpoint)")
    rk = "teacher" if reference_logits is not None else "llamacpp-base" if llamacpp_base is not None \
        else "endpoint" if ref_endpoint is not None else "model"
    ak = "candidate" if arm_logits is not None else "endpoint" if arm_endpoint is not None \
        else "model" if arm is not None else "self"
    c.ref = _ArmSpec(_KIND[rk], s(refs[0]), s(ref_levers), False, 0, s(teacher_head))
    c.arm = _ArmSpec(_KIND[ak], s(arms[0]) if arms else None, s(levers), bool(decode), int(prompt_len),
                     s(arm_head))
    # the endpoint's settings go to the side that is one
    ep = c.ref if rk == "endpoint" else c.arm
    ep.endpoint_model, ep.top_logprobs, ep.api_key = s(endpoint_model), int(top_logprobs), s(api_key)
    if chunking not in _CHUNKING:
        raise ArgumentError("KLD_ERR_ARG", "chunking %r: doc, llamacpp or stream" % (chunking,))
    c.corpus_path, c.ids_path = s(corpus), s(ids_file)
    if corpus_format is not None:
        c.corpus_format = s(corpus_format)
    c.ctx = int(ctx or 0)
    c.max_docs, c.max_tokens, c.max_chunks = int(max_docs), int(max_tokens), int(chunks)
    c.chunking = _CHUNKING[chunking]
    c.chunk, c.topk, c.n_threads = int(chunk), int(topk), int(threads)
    c.allow_vocab_mismatch, c.allow_long_context = bool(allow_vocab_mismatch), bool(allow_long_context)
    c.strata, c.score_only = s(strata), s(score_only)
    h = _P()
    err = _KldError()
    _check(_kl_evaluate(_c.byref(c), _c.byref(h), _c.byref(err)), err)
    try:
        text = _take_string(_result_json(h, _c.byref(err)))
        if text is None:
            _raise(err.status or 4, err)
        out = Result(json.loads(text))
        n = _c.c_size_t()
        out.positions = _positions(_result_positions(h, _c.byref(n)), n.value)
        out.mode = _result_mode(h).decode()
        out.partial = bool(_result_partial(h))
        return out
    finally:
        _result_free(h)
