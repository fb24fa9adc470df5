#!/usr/bin/env python3
"""make_bad_corpus.py — writes the bad-input corpus of the io readers.

Every file here is one defect away from a valid file (the valid bases are
in the corpus too, as ok_* rows), so each row tests one check. Output:
the files beside this script and MANIFEST.tsv, one row per input:

    path<TAB>expected status<TAB>substring the error message must contain

Status is OK, FORMAT, UNSUPPORTED, MISMATCH or IO (kld_status names).
Paths are relative to tests/bad; folders are opened as model folders.
Rows whose file name starts with tok_ are llama2.c tokenizer.bin files,
opened with kld_llama2c_vocab_open(path, n_vocab = 4); every other row is
opened with kld_source_open. The generated files are committed, so the
test needs no python; rerun this script after changing it:

    python3 tests/bad/make_bad_corpus.py
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
rows = []


def emit(rel, data, status, substring):
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    rows.append((rel, status, substring))


def u32(v): return struct.pack("<I", v & 0xFFFFFFFF)
def i32(v): return struct.pack("<i", v)
def u64(v): return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)
def f32(v): return struct.pack("<f", v)


# ---------------------------------------------------------------- GGUF ----
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8


def gstr(b):
    if isinstance(b, str):
        b = b.encode()
    return u64(len(b)) + b


class Gguf:
    """A GGUF file built piece by piece; `marks` records section boundaries
    (byte offsets) so truncated variants can cut exactly there."""

    def __init__(self, kvs=None, tensors=None, version=3, magic=b"GGUF", alignment=32,
                 n_tensors=None, n_kv=None):
        self.kvs = kvs if kvs is not None else base_kvs()
        self.tensors = tensors if tensors is not None else base_tensors()
        self.version, self.magic, self.alignment = version, magic, alignment
        self.n_tensors, self.n_kv = n_tensors, n_kv

    def build(self):
        marks = {}
        out = bytearray(self.magic)
        marks["magic"] = len(out)
        out += u32(self.version)
        marks["version"] = len(out)
        out += u64(len(self.tensors) if self.n_tensors is None else self.n_tensors)
        marks["n_tensors"] = len(out)
        out += u64(len(self.kvs) if self.n_kv is None else self.n_kv)
        marks["n_kv"] = len(out)
        for i, (key, vtype, payload) in enumerate(self.kvs):
            out += gstr(key)
            marks["kv%d_key" % i] = len(out)
            out += u32(vtype)
            marks["kv%d_type" % i] = len(out)
            out += payload
            marks["kv%d_value" % i] = len(out)
        data = bytearray()
        for i, t in enumerate(self.tensors):
            name, dims, ttype, offset, blob = t
            out += gstr(name)
            marks["t%d_name" % i] = len(out)
            out += u32(len(dims))
            marks["t%d_ndims" % i] = len(out)
            for d in dims:
                out += u64(d)
            marks["t%d_dims" % i] = len(out)
            out += u32(ttype)
            marks["t%d_type" % i] = len(out)
            out += u64(offset)
            marks["t%d_offset" % i] = len(out)
            if blob is not None:
                if len(data) < offset:
                    data += b"\0" * (offset - len(data))
                data[offset:offset + len(blob)] = blob
        marks["infos"] = len(out)
        pad = (-len(out)) % self.alignment
        out += b"\0" * pad
        marks["data"] = len(out)
        out += data
        # pad the data section so the last tensor ends on an alignment boundary
        out += b"\0" * ((-len(out)) % self.alignment)
        return bytes(out), marks


def arr(elem_type, items_payload, n):
    return u32(elem_type) + u64(n) + items_payload


def base_kvs():
    return [
        ("general.architecture", T_STR, gstr("llama")),
        ("general.name", T_STR, gstr("bad-corpus base")),
        ("llama.block_count", T_U32, u32(1)),
        ("llama.rope.freq_base", T_F32, f32(10000.0)),
        ("general.flag", T_BOOL, b"\x01"),
        ("tokenizer.ggml.tokens", T_ARR, arr(T_STR, gstr("a") + gstr("bc"), 2)),
        ("tokenizer.ggml.token_type", T_ARR, arr(T_I32, i32(1) + i32(3), 2)),
    ]


def base_tensors():
    a = b"".join(f32(x) for x in (1.0, 2.0, 3.0, 4.0))
    b = bytes(range(32))  # 16 f16 values
    return [("tok.a", [4], GGML_F32, 0, a), ("tok.b", [8, 2], GGML_F16, 32, b)]


def gguf_corpus():
    base, m = Gguf().build()
    emit("ok_base.gguf", base, "OK", "")
    emit("ok_align64.gguf", Gguf(kvs=base_kvs() + [("general.alignment", T_U32, u32(64))],
                                 tensors=[("tok.a", [4], GGML_F32, 0, bytes(16)),
                                          ("tok.b", [8, 2], GGML_F16, 64, bytes(32))],
                                 alignment=64).build()[0], "OK", "")
    emit("ok_no_tensors.gguf", Gguf(tensors=[]).build()[0], "OK", "")
    assert m["data"] > m["infos"], "the base must have alignment padding"

    # Truncated at (or inside) every section.
    cuts = [
        ("magic", 2, "bad magic"),
        ("version", m["magic"] + 2, "truncated"),
        ("tensor_count", m["version"] + 4, "truncated"),
        ("kv_count", m["n_tensors"] + 4, "truncated"),
        # Too short for 7 key/values at all: the count check fires first.
        ("kv0_key_len", m["n_kv"] + 4, "metadata count 7 is impossible"),
        ("kv0_key_bytes", m["n_kv"] + 10, "metadata count 7 is impossible"),
        ("kv0_type", m["kv0_key"] + 2, "metadata count 7 is impossible"),
        ("kv0_value", m["kv0_type"] + 5, "metadata count 7 is impossible"),
        ("kv2_u32_value", m["kv2_type"] + 2, "truncated"),
        ("kv5_string_array", m["kv5_value"] - 3, "truncated"),
        ("kv6_int_array", m["kv6_value"] - 3, "does not fit"),
        ("tensor0_name", m["kv6_value"] + 9, "truncated"),
        ("tensor0_ndims", m["t0_name"] + 2, "truncated"),
        ("tensor1_dims", m["t1_ndims"] + 12, "truncated"),
        ("tensor1_type", m["t1_dims"] + 1, "truncated"),
        ("tensor1_offset", m["t1_type"] + 7, "truncated"),
        ("alignment_padding", m["infos"] + 1, "data section would start"),
        ("data", m["data"] + 40, "runs past the end of the data section"),
    ]
    for label, at, sub in cuts:
        assert 0 < at < len(base), label
        emit("gguf_trunc_%s.gguf" % label, base[:at], "FORMAT", sub)

    def g(name, status, sub, **kw):
        emit(name, Gguf(**kw).build()[0], status, sub)

    def kv_plus(*extra):
        return base_kvs() + list(extra)

    def tens(*ts):
        return list(ts)

    g("gguf_bad_magic.gguf", "FORMAT", "bad magic", magic=b"GGUX")
    g("gguf_v1.gguf", "UNSUPPORTED", "version 1 is not supported", version=1)
    g("gguf_v4.gguf", "UNSUPPORTED", "version 4 is not supported", version=4)
    g("gguf_big_endian.gguf", "UNSUPPORTED", "big-endian", version=0x03000000)
    g("gguf_huge_kv_count.gguf", "FORMAT", "metadata count", n_kv=1 << 62)
    g("gguf_huge_tensor_count.gguf", "FORMAT", "tensor count", n_tensors=(1 << 64) - 1)
    # One key/value more than written: the first tensor info is read as one.
    g("gguf_kv_count_short.gguf", "FORMAT", "tensor info 0", n_kv=len(base_kvs()) + 1)
    g("gguf_key_bad_utf8.gguf", "FORMAT", "not valid UTF-8",
      kvs=kv_plus((b"general.\xff\xfe", T_U32, u32(1))))
    g("gguf_key_overlong_utf8.gguf", "FORMAT", "not valid UTF-8",
      kvs=kv_plus((b"k\xc0\xaf", T_U32, u32(1))))
    g("gguf_key_empty.gguf", "FORMAT", "key length 0", kvs=kv_plus(("", T_U32, u32(1))))
    g("gguf_dup_key.gguf", "FORMAT", "duplicate metadata key 'llama.block_count'",
      kvs=kv_plus(("llama.block_count", T_U32, u32(2))))
    g("gguf_unknown_value_type.gguf", "FORMAT", "unknown value type 13",
      kvs=kv_plus(("x.y", 13, u32(0))))
    g("gguf_unknown_array_type.gguf", "FORMAT", "unknown array element type 99",
      kvs=kv_plus(("x.y", T_ARR, arr(99, b"", 0))))
    g("gguf_array_huge_count.gguf", "FORMAT", "does not fit",
      kvs=kv_plus(("x.y", T_ARR, arr(T_U32, b"", 1 << 60))))
    g("gguf_string_array_huge_count.gguf", "FORMAT", "does not fit",
      kvs=kv_plus(("x.y", T_ARR, arr(T_STR, b"", (1 << 64) - 1))))
    nested = arr(T_U8, b"\x01", 1)
    for _ in range(9):
        nested = arr(T_ARR, nested, 1)
    g("gguf_array_nested_too_deep.gguf", "FORMAT", "nested deeper than",
      kvs=kv_plus(("x.y", T_ARR, nested)))
    g("gguf_string_value_huge_len.gguf", "FORMAT", "truncated",
      kvs=kv_plus(("x.y", T_STR, u64(1 << 63))))
    g("gguf_bool_2.gguf", "FORMAT", "bool has value 2", kvs=kv_plus(("x.y", T_BOOL, b"\x02")))
    g("gguf_bool_array_2.gguf", "FORMAT", "bool element 1 has value 7",
      kvs=kv_plus(("x.y", T_ARR, arr(T_BOOL, b"\x00\x07", 2))))
    g("gguf_alignment_not_pow2.gguf", "FORMAT", "general.alignment is 48",
      kvs=kv_plus(("general.alignment", T_U32, u32(48))))
    g("gguf_alignment_zero.gguf", "FORMAT", "general.alignment is 0",
      kvs=kv_plus(("general.alignment", T_U32, u32(0))))
    g("gguf_alignment_string.gguf", "FORMAT", "general.alignment has type string",
      kvs=kv_plus(("general.alignment", T_STR, gstr("32"))))
    ok_a = bytes(16)
    g("gguf_tensor_name_bad_utf8.gguf", "FORMAT", "not valid UTF-8",
      tensors=tens((b"tok.\xed\xa0\x80", [4], GGML_F32, 0, ok_a)))
    g("gguf_tensor_name_nul.gguf", "FORMAT", "name contains NUL",
      tensors=tens((b"tok\0a", [4], GGML_F32, 0, ok_a)))
    g("gguf_tensor_name_empty.gguf", "FORMAT", "name length 0",
      tensors=tens(("", [4], GGML_F32, 0, ok_a)))
    g("gguf_dup_tensor.gguf", "FORMAT", "duplicate tensor name 'tok.a'",
      tensors=tens(("tok.a", [4], GGML_F32, 0, ok_a), ("tok.a", [4], GGML_F32, 32, ok_a)))
    g("gguf_ndims_0.gguf", "FORMAT", "n_dims is 0", tensors=tens(("tok.a", [], GGML_F32, 0, ok_a)))
    g("gguf_ndims_5.gguf", "FORMAT", "n_dims is 5",
      tensors=tens(("tok.a", [1, 1, 1, 1, 4], GGML_F32, 0, ok_a)))
    g("gguf_dim_negative.gguf", "FORMAT", "dimension 1 is",
      tensors=tens(("tok.a", [4, (1 << 64) - 1], GGML_F32, 0, ok_a)))
    g("gguf_dims_overflow.gguf", "FORMAT", "more than 2^63 elements",
      tensors=tens(("tok.a", [1 << 40, 1 << 40], GGML_F32, 0, ok_a)))
    # a zero dimension makes the byte size 0 but the other dims still overflow
    g("gguf_zero_dim_nelements_overflow.gguf", "FORMAT", "more than 2^63 elements",
      tensors=tens(("tok.a", [1 << 62, 3, 0], 24, 0, None)))
    g("gguf_tensors_overlap.gguf", "FORMAT", "overlap",
      tensors=tens(("tok.a", [16], GGML_F32, 0, bytes(64)), ("tok.b", [4], GGML_F32, 32, None)))
    g("gguf_row_overflow.gguf", "FORMAT", "overflows",
      tensors=tens(("tok.a", [1 << 62], GGML_F32, 0, ok_a)))
    g("gguf_unknown_tensor_type.gguf", "UNSUPPORTED", "unknown tensor type",
      tensors=tens(("tok.a", [4], 99, 0, ok_a)))
    g("gguf_removed_tensor_type.gguf", "UNSUPPORTED", "unknown tensor type",
      tensors=tens(("tok.a", [32], 4, 0, bytes(20))))  # Q4_2, removed from ggml
    g("gguf_q8_0_row_not_block.gguf", "FORMAT", "not a multiple of the q8_0 block size",
      tensors=tens(("tok.a", [33], GGML_Q8_0, 0, bytes(34))))
    g("gguf_iq2_xxs_row_not_block.gguf", "FORMAT", "tensor 'tok.a': row length 300 is not a multiple of the iq2_xxs block size 256",
      tensors=tens(("tok.a", [300], 16, 0, bytes(66))))  # GGML_TYPE_IQ2_XXS
    g("gguf_mxfp4_row_not_block.gguf", "FORMAT", "tensor 'tok.a': row length 33 is not a multiple of the mxfp4 block size 32",
      tensors=tens(("tok.a", [33], 39, 0, bytes(17))))  # GGML_TYPE_MXFP4
    g("gguf_misaligned_offset.gguf", "FORMAT", "not a multiple of the alignment",
      tensors=tens(("tok.a", [4], GGML_F32, 0, ok_a), ("tok.b", [4], GGML_F32, 16, ok_a)))
    g("gguf_offset_past_end.gguf", "FORMAT", "runs past the end of the data section",
      tensors=tens(("tok.a", [4], GGML_F32, 1 << 40, None)))
    g("gguf_offset_overflow.gguf", "FORMAT", "runs past the end of the data section",
      tensors=tens(("tok.a", [4], GGML_F32, (1 << 64) - 32, None)))
    g("gguf_tensor_too_big.gguf", "FORMAT", "runs past the end of the data section",
      tensors=tens(("tok.a", [1 << 20, 1 << 10], GGML_F32, 0, ok_a)))

    # A key whose length field claims 2^63 bytes (no key bytes follow).
    data = b"GGUF" + u32(3) + u64(0) + u64(1) + u64(1 << 63) + bytes(16)
    emit("gguf_key_huge_len.gguf", data, "FORMAT", "truncated: metadata key")
    # One key/value, cut inside its 40-byte key (the count is plausible).
    data = b"GGUF" + u32(3) + u64(0) + u64(1) + u64(40) + b"k" * 20
    emit("gguf_trunc_long_key.gguf", data, "FORMAT", "truncated: metadata key")
    # ... and cut inside a u64 value.
    data = b"GGUF" + u32(3) + u64(0) + u64(1) + gstr("some.key") + u32(T_U64) + bytes(5)
    emit("gguf_trunc_u64_value.gguf", data, "FORMAT", "truncated: value")
    # Not even the magic: opened by extension only.
    emit("gguf_empty.gguf", b"", "FORMAT", "bad magic")
    emit("gguf_gguf_text.gguf", b"GGUF is a file format\n", "UNSUPPORTED", "not supported")


# --------------------------------------------------------- safetensors ----
def st_bytes(header, data=b"", hlen=None, pad=True):
    """header: a str (JSON text written verbatim) or an object to dump."""
    text = header if isinstance(header, (str, bytes)) else json.dumps(header)
    text = text.encode() if isinstance(text, str) else text
    if pad:
        text += b" " * ((-len(text)) % 8)
    n = len(text) if hlen is None else hlen
    return u64(n) + text + data


def entry(dtype="F32", shape=(2,), offs=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}


def st_corpus():
    two = bytes(8)
    ok = {"__metadata__": {"format": "pt"}, "w.a": entry(), "w.b": entry("F16", (2, 2), (8, 16))}
    emit("ok_base.safetensors", st_bytes(ok, bytes(16)), "OK", "")
    emit("ok_all_dtypes.safetensors", st_bytes({
        "b": entry("BOOL", (2,), (0, 2)), "u8": entry("U8", (2,), (2, 4)),
        "f8": entry("F8_E4M3", (2,), (4, 6)), "i64": entry("I64", (1,), (6, 14)),
        "bf": entry("BF16", (1,), (14, 16)), "f4": entry("F4", (4,), (16, 18)),
        "scalar": entry("F32", (), (18, 22)), "empty": entry("F32", (0, 3), (22, 22)),
        "quad": entry("F16", (1, 1, 1, 1), (22, 24))}, bytes(24)), "OK", "")
    emit("ok_empty.safetensors", st_bytes({}), "OK", "")

    def s(name, status, sub, header, data=two, **kw):
        emit("st_" + name + ".safetensors", st_bytes(header, data, **kw), status, sub)

    emit("st_empty.safetensors", b"", "FORMAT", "too small for the 8-byte header length")
    emit("st_short_len.safetensors", b"\x10\0\0\0\0", "FORMAT", "too small")
    s("header_too_large", "FORMAT", "exceeds the 100 MB limit", {"a": entry()},
      hlen=100_000_001)
    s("header_len_huge", "FORMAT", "exceeds the 100 MB limit", {"a": entry()}, hlen=(1 << 64) - 1)
    s("header_past_end", "FORMAT", "runs past the end of the file", {"a": entry()}, hlen=4096)
    s("header_zero_len", "FORMAT", "does not start with '{'", "", b"", hlen=0)
    s("not_object", "FORMAT", "does not start with '{'", "[]")
    s("leading_space", "FORMAT", "does not start with '{'", ' {"a": %s}' % json.dumps(entry()))
    s("json_syntax", "FORMAT", "header JSON", '{"a": {"dtype": "F32",')
    s("trailing_garbage", "FORMAT", "header JSON", '{"a": %s} x' % json.dumps(entry()))
    s("two_objects", "FORMAT", "header JSON", '{"a": %s}{}' % json.dumps(entry()))
    s("dup_tensor", "FORMAT", "duplicate object key",
      '{"a": %s, "a": %s}' % (json.dumps(entry()), json.dumps(entry())))
    s("dup_metadata", "FORMAT", "duplicate object key",
      '{"__metadata__": {}, "__metadata__": {}, "a": %s}' % json.dumps(entry()))
    s("dup_field", "FORMAT", "duplicate object key",
      '{"a": {"dtype": "F32", "dtype": "F16", "shape": [2], "data_offsets": [0, 8]}}')
    s("name_bad_utf8", "FORMAT", "not valid UTF-8",
      b'{"w.\xff": ' + json.dumps(entry()).encode() + b"}")
    s("name_surrogate_escape", "FORMAT", "invalid Unicode",
      '{"w.\\ud800": %s}' % json.dumps(entry()))
    s("name_nul_escape", "FORMAT", "NUL byte", '{"w\\u0000": %s}' % json.dumps(entry()))
    s("metadata_not_object", "FORMAT", "__metadata__ is not a JSON object",
      {"__metadata__": ["pt"], "a": entry()})
    s("metadata_not_string", "FORMAT", "__metadata__ 'format' is not a string",
      {"__metadata__": {"format": 1}, "a": entry()})
    s("entry_not_object", "FORMAT", "tensor 'a': entry is not a JSON object", {"a": [1, 2]})
    s("extra_field", "FORMAT", "unexpected field 'offset'", {"a": dict(entry(), offset=0)})
    s("missing_dtype", "FORMAT", "missing field 'dtype'",
      {"a": {"shape": [2], "data_offsets": [0, 8]}})
    s("missing_offsets", "FORMAT", "missing field 'data_offsets'",
      {"a": {"dtype": "F32", "shape": [2]}})
    s("dtype_not_string", "FORMAT", "dtype is not a string", {"a": entry(dtype=4)})
    s("unknown_dtype", "FORMAT", "unknown dtype 'F17'", {"a": entry(dtype="F17")})
    s("dtype_lowercase", "FORMAT", "unknown dtype 'f32'", {"a": entry(dtype="f32")})
    s("shape_not_array", "FORMAT", "shape is not an array", {"a": dict(entry(), shape=2)})
    s("shape_negative", "FORMAT", "shape[0] is not a non-negative integer",
      {"a": entry(shape=(-2,))})
    s("shape_float", "FORMAT", "shape[1] is not a non-negative integer",
      {"a": dict(entry(), shape=[1, 2.0])})
    s("shape_5_dims", "UNSUPPORTED", "at most 4", {"a": entry(shape=(1, 1, 1, 1, 2))})
    s("offsets_three", "FORMAT", "data_offsets is not an array of two integers",
      {"a": entry(offs=(0, 4, 8))})
    s("offsets_not_array", "FORMAT", "data_offsets is not an array of two integers",
      {"a": dict(entry(), data_offsets="0-8")})
    s("offsets_negative", "FORMAT", "data_offsets are not non-negative integers",
      {"a": entry(offs=(-8, 0))})
    s("offsets_too_big", "FORMAT", "too big integer",
      '{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551615]}}')
    s("offsets_reversed", "FORMAT", "end before they begin", {"a": entry(offs=(8, 0))})
    s("wrong_dtype_size", "FORMAT", "dtype F32 x shape [2] is 8 bytes but data_offsets [0, 4]",
      {"a": entry(offs=(0, 4))}, bytes(4))
    s("shape_overflow", "FORMAT", "overflows", {"a": entry(shape=(1 << 62, 1 << 62))})
    s("bytes_overflow", "FORMAT", "overflows", {"a": entry("F64", (1 << 62, 4), (0, 8))})
    s("zero_dim_overflow", "FORMAT", "overflows",
      {"a": entry("F32", (0, 1 << 40, 1 << 40), (0, 0)), "b": entry(offs=(0, 8))})
    s("f4_half_byte", "FORMAT", "not a whole number of bytes", {"a": entry("F4", (3,), (0, 2))})
    s("offset_past_end", "FORMAT", "past the end of the data section",
      {"a": entry(offs=(0, 8)), "b": entry(offs=(8, 16))})
    s("overlap", "FORMAT", "overlap tensor",
      {"a": entry(offs=(0, 8)), "b": entry("F16", (2,), (4, 8))})
    s("gap", "FORMAT", "gap of 4 unused bytes",
      {"a": entry("F16", (2,), (0, 4)), "b": entry("F16", (2,), (8, 12))}, bytes(12))
    s("gap_at_start", "FORMAT", "gap of 8 unused bytes",
      {"a": entry(offs=(8, 16))}, bytes(16))
    s("trailing_bytes", "FORMAT", "4 trailing bytes", {"a": entry()}, bytes(12))
    s("nul_padding", "FORMAT", "header JSON", '{"a": %s}\0\0\0' % json.dumps(entry()), pad=False)
    emit("st_detect_noext.dat", st_bytes({"a": entry()}, bytes(12)), "FORMAT",
         "4 trailing bytes")


# ----------------------------------------------- index.json and folders ----
CONFIG = json.dumps({"model_type": "llama", "hidden_size": 2}).encode()


def shard(tensors):
    """tensors: list of (name, n_f32_values) laid out back to back."""
    h, pos = {}, 0
    for name, n in tensors:
        h[name] = entry("F32", (n,), (pos, pos + 4 * n))
        pos += 4 * n
    return st_bytes(h, bytes(pos))


def hf_dir(name, status, sub, files):
    """A model folder: files maps file name -> bytes (config.json added
    unless given as None)."""
    files = dict(files)
    if "config.json" not in files:
        files["config.json"] = CONFIG
    path = os.path.join(HERE, name)
    if os.path.isdir(path):
        shutil.rmtree(path)
    for fn, data in files.items():
        if data is None:
            continue
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, fn), "wb") as f:
            f.write(data)
    rows.append((name, status, sub))


def index(weight_map, extra=None):
    obj = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    if extra:
        obj.update(extra)
    return json.dumps(obj).encode()


def idx_corpus():
    s1 = shard([("w.a", 2), ("w.b", 3)])
    s2 = shard([("w.c", 1)])
    good_map = {"w.a": "s1.safetensors", "w.b": "s1.safetensors", "w.c": "s2.safetensors"}
    IDX = "model.safetensors.index.json"
    hf_dir("ok_sharded", "OK", "", {IDX: index(good_map), "s1.safetensors": s1,
                                     "s2.safetensors": s2})
    hf_dir("ok_single", "OK", "", {"model.safetensors": s2, "tokenizer.json": b"{}"})

    def bad(name, sub, files, status="FORMAT"):
        hf_dir("idx_" + name, status, sub, files)

    shards = {"s1.safetensors": s1, "s2.safetensors": s2}
    bad("not_object", "not a JSON object", {IDX: b"[]", **shards})
    bad("syntax", "JSON", {IDX: b'{"weight_map": {', **shards})
    bad("no_weight_map", "no weight_map", {IDX: b'{"metadata": {}}', **shards})
    bad("weight_map_array", "weight_map is not a JSON object",
        {IDX: b'{"weight_map": ["s1.safetensors"]}', **shards})
    bad("weight_map_empty", "weight_map is empty", {IDX: index({}), **shards})
    bad("metadata_string", "metadata is not a JSON object",
        {IDX: index(good_map, {"metadata": "x"}), **shards})
    bad("shard_not_string", "shard is not a string",
        {IDX: index(dict(good_map, **{"w.c": 2})), **shards})
    bad("shard_path_traversal", "is not a file name",
        {IDX: index(dict(good_map, **{"w.c": "../s2.safetensors"})), **shards})
    bad("shard_subfolder", "is not a file name",
        {IDX: index(dict(good_map, **{"w.c": "sub/s2.safetensors"})), **shards})
    bad("missing_shard", "names shard 's3.safetensors', which does not exist",
        {IDX: index(dict(good_map, **{"w.c": "s3.safetensors"})), "s1.safetensors": s1})
    bad("dup_key", "duplicate object key",
        {IDX: b'{"weight_map": {"w.a": "s1.safetensors", "w.a": "s1.safetensors"}}', **shards})
    bad("wrong_shard", "puts tensor 'w.a' in shard 's2.safetensors', but it is in 's1.safetensors'",
        {IDX: index(dict(good_map, **{"w.a": "s2.safetensors"})), **shards})
    bad("listed_not_present", "puts tensor 'w.z' in shard 's2.safetensors', which does not contain it",
        {IDX: index(dict(good_map, **{"w.z": "s2.safetensors"})), **shards})
    bad("unlisted_tensor", "tensor 'w.b' of shard 's1.safetensors' is not in weight_map",
        {IDX: index({"w.a": "s1.safetensors", "w.c": "s2.safetensors"}), **shards})
    bad("tensor_in_two_shards", "tensor 'w.c' is in two shards",
        {IDX: index(dict(good_map, **{"w.d": "s3.safetensors"})), **shards,
         "s3.safetensors": shard([("w.c", 1), ("w.d", 1)])})
    bad("bad_shard", "s2.safetensors: 4 trailing bytes",
        {IDX: index(good_map), "s1.safetensors": s1, "s2.safetensors": s2 + bytes(4)})

    bad("cfg_not_object", "config is not a JSON object",
        {"config.json": b"[1, 2]", "model.safetensors": s2})
    bad("cfg_syntax", "config.json: JSON", {"config.json": b'{"model_type": ', "model.safetensors": s2})
    bad("cfg_dup_key", "duplicate object key",
        {"config.json": b'{"a": 1, "a": 2}', "model.safetensors": s2})
    bad("cfg_missing", "without config.json", {"config.json": None, "model.safetensors": s2})
    bad("dir_no_model", "folder has no model.safetensors",
        {"config.json": CONFIG, "weights.pt": b"not a model"})
    emit("unknown_format.dat", b"this is not a model file at all\n", "FORMAT",
         "unrecognised model format")


# ------------------------------------------------------------- llama2.c ----
def l2c_model(dim=8, hidden=16, layers=1, heads=2, kv=1, vocab=4, seq=4, extra=0):
    hs = dim // heads if heads > 0 and dim > 0 else 0
    kvd = hs * kv
    n = (abs(vocab) * dim + layers * dim * 2 + layers * dim * dim * 2 + layers * kvd * dim * 2
         + layers * hidden * dim * 3 + dim + seq * hs)
    if vocab < 0:
        n += abs(vocab) * dim
    n = max(n + extra, 0)
    hdr = b"".join(i32(v) for v in (dim, hidden, layers, heads, kv, vocab, seq))
    return hdr + b"".join(f32((i % 7) * 0.25) for i in range(n))


def l2c_corpus():
    emit("ok_tiny.bin", l2c_model(), "OK", "")
    emit("ok_tiny_unshared.bin", l2c_model(vocab=-4), "OK", "")
    emit("ok_tiny_noext.l2c", l2c_model(), "OK", "")
    emit("l2c_short.bin", i32(8) * 3, "FORMAT", "too small for the llama2.c header")
    emit("l2c_empty.bin", b"", "FORMAT", "too small for the llama2.c header")
    emit("l2c_zero_dim.bin", l2c_model(dim=0), "FORMAT", "dim is 0 (must be positive)")
    emit("l2c_neg_layers.bin", l2c_model(layers=-1), "FORMAT", "n_layers is -1")
    emit("l2c_zero_seq.bin", l2c_model(seq=0), "FORMAT", "seq_len is 0")
    emit("l2c_vocab_zero.bin", l2c_model(vocab=0), "FORMAT", "vocab_size is 0")
    emit("l2c_vocab_int_min.bin", l2c_model()[:20] + i32(-2**31) + i32(4) + bytes(64), "FORMAT",
         "vocab_size is -2147483648")
    emit("l2c_dim_not_multiple.bin", l2c_model(dim=10, heads=4, kv=2), "FORMAT",
         "dim 10 is not a multiple of n_heads 4")
    emit("l2c_kv_not_divide.bin", l2c_model(dim=12, heads=3, kv=2), "FORMAT",
         "n_kv_heads 2 does not divide n_heads 3")
    emit("l2c_kv_more_than_heads.bin", l2c_model(heads=2, kv=4), "FORMAT",
         "n_kv_heads 4 does not divide n_heads 2")
    emit("l2c_odd_head.bin", l2c_model(dim=6, heads=2, kv=1), "FORMAT", "head size 3")
    emit("l2c_truncated.bin", l2c_model()[:-4], "FORMAT", "needs exactly")
    emit("l2c_trailing.bin", l2c_model() + bytes(4), "FORMAT", "needs exactly")
    emit("l2c_sign_should_be_negative.bin", l2c_model(vocab=-4)[:20] + i32(4) + i32(4)
         + l2c_model(vocab=-4)[28:], "FORMAT", "should vocab_size be negative")
    emit("l2c_sign_should_be_positive.bin", l2c_model()[:20] + i32(-4) + l2c_model()[24:],
         "FORMAT", "should vocab_size be positive")
    emit("l2c_overflow.bin", b"".join(i32(v) for v in (2**30, 2**30, 2**30, 2, 1, 2**30, 2**30)),
         "FORMAT", "overflows")
    emit("l2c_ak42_export.bin", u32(0x616B3432) + i32(1) + bytes(248), "UNSUPPORTED",
         "\"ak42\" header")
    hf_dir("l2c_dir", "FORMAT", "needs exactly",
           {"config.json": None, "model.bin": l2c_model()[:-8], "tokenizer.bin": tok_file()})


def tok_file(tokens=None, max_len=None):
    tokens = tokens if tokens is not None else [(0.0, b"<unk>"), (0.0, b"<s>"), (-1.5, b"ab"),
                                                 (-2.0, b"\x00z")]
    if max_len is None:
        max_len = max(len(t) for _, t in tokens)
    out = i32(max_len)
    for score, piece in tokens:
        out += f32(score) + i32(len(piece)) + piece
    return out


def tok_corpus():
    good = tok_file()
    emit("tok_ok.bin", good, "OK", "")
    emit("tok_empty.bin", b"", "FORMAT", "too small for max_token_length")
    emit("tok_max_len_zero.bin", i32(0) + good[4:], "FORMAT", "max_token_length is 0")
    emit("tok_too_small.bin", good[:20], "FORMAT", "cannot hold 4 tokens")
    emit("tok_truncated_piece.bin", good[:-1], "FORMAT", "token 3: 2 bytes run past the end")
    emit("tok_truncated_header.bin", good[:len(good) - 2 - 8 + 3], "FORMAT",
         "token 3: truncated")
    emit("tok_len_negative.bin", tok_file()[:4] + f32(0) + i32(-1) + good[8 + 5 + 4:], "FORMAT",
         "length -1 is outside")
    emit("tok_len_over_max.bin", tok_file(max_len=3), "FORMAT", "length 5 is outside 0..max_token_length (3)")
    emit("tok_nan_score.bin", tok_file([(0.0, b"a"), (float("nan"), b"b"), (0.0, b"c"), (0.0, b"d")]),
         "FORMAT", "token 1: score is NaN")
    emit("tok_trailing.bin", tok_file([(0.0, b"a")] * 5), "MISMATCH", "trailing bytes after 4 tokens")


def main():
    # Start from a clean slate so renamed cases leave nothing behind.
    for fn in os.listdir(HERE):
        p = os.path.join(HERE, fn)
        if fn in ("make_bad_corpus.py",):
            continue
        if os.path.isdir(p):
            shutil.rmtree(p)
        else:
            os.remove(p)
    gguf_corpus()
    st_corpus()
    idx_corpus()
    l2c_corpus()
    tok_corpus()
    with open(os.path.join(HERE, "MANIFEST.tsv"), "w") as f:
        f.write("# file\tstatus\tmessage substring (see make_bad_corpus.py)\n")
        for rel, status, sub in rows:
            assert "\t" not in sub and "\n" not in sub
            f.write("%s\t%s\t%s\n" % (rel, status, sub))
    print("%d corpus entries (%d bad)" % (len(rows), sum(1 for r in rows if r[1] != "OK")))


if __name__ == "__main__":
    main()
