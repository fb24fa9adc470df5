#!/usr/bin/python3
"""zoo_extend.py — writes tests/data/zoo_iq.gguf, the dequantization oracle
for the types that ../shared/oracle/dequant/zoo.gguf does not cover:
iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m tq1_0 tq2_0 mxfp4.

For each type T the file holds
  "T"           type T, seeded random blocks (every field random; f16 and
                E8M0 scales drawn among the finite values, a few blocks with
                the extreme ones: subnormal, -0, 65504, E8M0 0/1/254/255)
  "T.expected"  F32, the same shape: the blocks decoded here, independently
                of kldeval, with numpy in float32 following gguf-py's
                gguf/quants.py (llama.cpp c392e50; mxfp4 from a newer
                gguf-py): same operations, same order.
Shapes: [768, 3] (three 256-value blocks per row) and [224, 5] for mxfp4
(seven 32-value blocks per row), so no row is a power of two blocks.

The lattice tables and the sign table come from gguf-py's own packed
encodings (grid_hex / grid_map / ksigns in gguf/quants.py), not from
ggml-common.h, which kldeval's tables are generated from: the test then
also checks that the two published forms agree.

    tools/zoo_extend.py [--quants PATH/gguf/quants.py] [-o tests/data/zoo_iq.gguf]
    tools/zoo_extend.py --cross-check GGUF_PY_DIR   # gguf-py's dequantize on the same bytes

Needs /usr/bin/python3 with numpy. The default quants.py is read from the
llama.cpp snapshot (git show on the bare mirror)."""
import argparse
import ast
import importlib
import os
import struct
import subprocess
import sys
import types

import numpy as np

MIRROR = "/work/.mirror/ggerganov+llama.cpp/repo"
COMMIT = "c392e5094deaf2d1a7c18683214f007fad3fe42b"
SEED = 20250301
F32 = np.float32

# name: (ggml type id, values per block, bytes per block, ne)
TYPES = {
    "iq2_xxs": (16, 256, 66, (768, 3)),
    "iq2_xs": (17, 256, 74, (768, 3)),
    "iq2_s": (22, 256, 82, (768, 3)),
    "iq3_xxs": (18, 256, 98, (768, 3)),
    "iq3_s": (21, 256, 110, (768, 3)),
    "iq1_s": (19, 256, 50, (768, 3)),
    "iq1_m": (29, 256, 56, (768, 3)),
    "tq1_0": (34, 256, 54, (768, 3)),
    "tq2_0": (35, 256, 66, (768, 3)),
    "mxfp4": (39, 32, 17, (224, 5)),
}
# offset of the f16 scale inside the block (iq1_m and mxfp4 have none)
HALF_AT = {"iq2_xxs": 0, "iq2_xs": 0, "iq2_s": 0, "iq3_xxs": 0, "iq3_s": 0, "iq1_s": 0,
           "tq1_0": 52, "tq2_0": 64}


# ---- gguf-py's packed tables ----------------------------------------------

def load_tables(quants_src):
    """grid name -> float32 array [entries, values]; plus the ksigns bytes."""
    tree = ast.parse(quants_src)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def attr(cls, name):
        for st in classes[cls].body:
            if isinstance(st, (ast.Assign, ast.AnnAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    return ast.literal_eval(st.value)
        raise KeyError(cls + "." + name)

    grids = {}
    for cls in ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S"):
        shape, gmap, ghex = attr(cls, "grid_shape"), attr(cls, "grid_map"), attr(cls, "grid_hex")
        bits = max(1, (len(gmap) - 1).bit_length())
        step = 8 // (8 // bits)  # a 3-bit value takes a nibble
        packed = bytes.fromhex(ghex.decode())
        idx = [(b >> s) & ((1 << bits) - 1) for b in packed for s in range(0, 8, step)]
        grids[cls] = np.array(gmap, dtype=F32)[np.array(idx)].reshape(shape)
    ksigns = np.frombuffer(attr("IQ2_XXS", "ksigns"), dtype=np.uint8)
    return grids, ksigns


# ---- decoders (blocks: uint8 [nb, type_size] -> float32 [nb, block]) -------

def f16_at(blocks, off):
    return blocks[:, off:off + 2].copy().view("<f2").astype(F32)  # [nb, 1]


def sign_bits(signs):
    """uint8 [...] -> float32 [..., 8]: -1 where bit j is set."""
    bits = (signs[..., None] >> np.arange(8, dtype=np.uint8)) & 1
    return np.where(bits == 0, F32(1), F32(-1))


def iq2_scales(d, sc):
    """Two 4-bit scales per byte -> (d * (0.5 + s)) * 0.25, one per 16 values."""
    s = np.stack([sc & 0xF, sc >> 4], axis=-1).reshape(sc.shape[0], -1).astype(F32)
    return d * (F32(0.5) + s) * F32(0.25)


def dec_iq2_xxs(blocks, T):
    nb = len(blocks)
    d = f16_at(blocks, 0)
    q = blocks[:, 2:].reshape(nb, 8, 8)
    aux = q[:, :, 4:].copy().view("<u4")[:, :, 0]                        # [nb, 8]
    db = d * (F32(0.5) + (aux >> 28).astype(F32)) * F32(0.25)            # [nb, 8]
    s7 = (aux[:, :, None] >> (7 * np.arange(4, dtype=np.uint32))) & 127  # [nb, 8, 4]
    grid = T["IQ2_XXS"][q[:, :, :4]]                                     # [nb, 8, 4, 8]
    out = db[:, :, None, None] * grid * sign_bits(T["ksigns"][s7])
    return out.reshape(nb, -1)


def dec_iq2_xs(blocks, T):
    nb = len(blocks)
    d = f16_at(blocks, 0)
    q = blocks[:, 2:66].copy().view("<u2")                               # [nb, 32]
    db = iq2_scales(d, blocks[:, 66:74])                                 # [nb, 16]
    grid = T["IQ2_XS"][q & 511]                                          # [nb, 32, 8]
    signs = sign_bits(T["ksigns"][q >> 9])
    out = np.repeat(db, 2, axis=1)[:, :, None] * grid * signs
    return out.reshape(nb, -1)


def dec_iq2_s(blocks, T):
    nb = len(blocks)
    d = f16_at(blocks, 0)
    qs, signs, qh = blocks[:, 2:34], blocks[:, 34:66], blocks[:, 66:74]
    hi = (qh[:, :, None] >> (2 * np.arange(4, dtype=np.uint8))) & 3      # [nb, 8, 4]
    idx = qs.astype(np.uint16) | (hi.reshape(nb, 32).astype(np.uint16) << 8)
    db = iq2_scales(d, blocks[:, 74:82])
    out = np.repeat(db, 2, axis=1)[:, :, None] * T["IQ2_S"][idx] * sign_bits(signs)
    return out.reshape(nb, -1)


def dec_iq3_xxs(blocks, T):
    nb = len(blocks)
    d = f16_at(blocks, 0)
    qs = blocks[:, 2:66]
    aux = blocks[:, 66:98].copy().view("<u4")                            # [nb, 8]
    db = d * (F32(0.5) + (aux >> 28).astype(F32)) * F32(0.5)
    s7 = (aux[:, :, None] >> (7 * np.arange(4, dtype=np.uint32))) & 127
    grid = T["IQ3_XXS"][qs].reshape(nb, 8, 4, 8)
    out = db[:, :, None, None] * grid * sign_bits(T["ksigns"][s7])
    return out.reshape(nb, -1)


def dec_iq3_s(blocks, T):
    nb = len(blocks)
    d = f16_at(blocks, 0)
    qs, qh, signs, sc = blocks[:, 2:66], blocks[:, 66:74], blocks[:, 74:106], blocks[:, 106:110]
    ninth = (qh[:, :, None] >> np.arange(8, dtype=np.uint8)) & 1         # bit m of qh[g]: entry 8g+m
    idx = qs.astype(np.uint16) | (ninth.reshape(nb, 64).astype(np.uint16) << 8)
    s = np.stack([sc & 0xF, sc >> 4], axis=-1).reshape(nb, 8)
    db = d * (1 + 2 * s)                                                 # float32 * small ints
    grid = T["IQ3_S"][idx].reshape(nb, 8, 4, 8)
    out = db[:, :, None, None] * grid * sign_bits(signs.reshape(nb, 8, 4))
    return out.reshape(nb, -1)


def delta_for(neg):
    return np.where(neg, F32(-0.125), F32(0.125)).astype(F32)


def dec_iq1_s(blocks, T):
    nb = len(blocks)
    d = f16_at(blocks, 0)
    qs = blocks[:, 2:34]
    qh = blocks[:, 34:50].copy().view("<u2")                             # [nb, 8]
    dl = d * (2 * ((qh >> 12) & 7) + 1)                                  # [nb, 8]
    delta = delta_for((qh & 0x8000) != 0)
    ext = (qh[:, :, None] >> (3 * np.arange(4, dtype=np.uint16))) & 7
    idx = qs.astype(np.uint16) | (ext.reshape(nb, 32) << 8)
    grid = T["IQ1_S"][idx].reshape(nb, 8, 4, 8)
    out = dl[:, :, None, None] * (grid + delta[:, :, None, None])
    return out.reshape(nb, -1)


def dec_iq1_m(blocks, T):
    nb = len(blocks)
    qs, qh = blocks[:, 0:32], blocks[:, 32:48]
    sc = blocks[:, 48:56].copy().view("<u2")                             # [nb, 4]
    top = (sc & 0xF000) >> np.array([12, 8, 4, 0], dtype=np.uint16)
    d = (top[:, 0] | top[:, 1] | top[:, 2] | top[:, 3]).astype(np.uint16).view("<f2")
    d = d.astype(F32)[:, None]
    s3 = (sc[:, :, None] >> (3 * np.arange(4, dtype=np.uint16))) & 7     # scale 4w+k
    dl = d * (2 * s3.reshape(nb, 16) + 1)                                # one per 16 values
    nib = np.stack([qh & 0xF, qh >> 4], axis=-1).reshape(nb, 32)         # nibble k of qh
    idx = qs.astype(np.uint16) | ((nib & 7).astype(np.uint16) << 8)
    delta = delta_for((nib & 8) != 0)
    grid = T["IQ1_S"][idx]                                               # [nb, 32, 8]
    out = np.repeat(dl, 2, axis=1)[:, :, None] * (grid + delta[:, :, None])
    return out.reshape(nb, -1)


def trits(b, pow3):
    q = (b.astype(np.uint16) * pow3) & 0xFF
    return ((q * 3) >> 8).astype(np.int8) - np.int8(1)


def dec_tq1_0(blocks, T):
    nb = len(blocks)
    d = f16_at(blocks, 52)
    p5 = np.array([1, 3, 9, 27, 81], dtype=np.uint16)[None, :, None]
    a = trits(blocks[:, None, 0:32], p5).reshape(nb, 160)               # value 32t + m
    b = trits(blocks[:, None, 32:48], p5).reshape(nb, 80)               # 160 + 16t + m
    c = trits(blocks[:, None, 48:52], p5[:, :4]).reshape(nb, 16)        # 240 + 4t + m
    return d * np.concatenate([a, b, c], axis=1).astype(F32)


def dec_tq2_0(blocks, T):
    nb = len(blocks)
    d = f16_at(blocks, 64)
    qs = blocks[:, 0:64].reshape(nb, 2, 1, 32)
    q = ((qs >> (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]) & 3).astype(np.int8)
    return d * (q - np.int8(1)).reshape(nb, 256).astype(F32)


MXFP4_VALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.int8)


def e8m0_half(e):
    e = e.astype(np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << np.uint32(23)).astype(np.uint32)
    return bits.view(F32)


def dec_mxfp4(blocks, T):
    d = e8m0_half(blocks[:, 0:1])
    qs = blocks[:, 1:17]
    v = np.concatenate([MXFP4_VALUES[qs & 0xF], MXFP4_VALUES[qs >> 4]], axis=1)
    with np.errstate(over="ignore"):
        return d * v.astype(F32)


DECODERS = {"iq2_xxs": dec_iq2_xxs, "iq2_xs": dec_iq2_xs, "iq2_s": dec_iq2_s,
            "iq3_xxs": dec_iq3_xxs, "iq3_s": dec_iq3_s, "iq1_s": dec_iq1_s, "iq1_m": dec_iq1_m,
            "tq1_0": dec_tq1_0, "tq2_0": dec_tq2_0, "mxfp4": dec_mxfp4}


# ---- seeded blocks ----------------------------------------------------------

def finite_half(rng):
    while True:
        h = int(rng.integers(0, 1 << 16))
        if (h & 0x7C00) != 0x7C00:
            return h


EXTREME_HALVES = [0x0001, 0x03FF, 0x8000, 0x7BFF, 0xFBFF, 0x0000]  # subnormals, -0, ±65504, +0


def make_blocks(name, rng):
    _, bs, ts, ne = TYPES[name]
    nb = ne[0] * ne[1] // bs
    blocks = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    for k in range(nb):
        special = EXTREME_HALVES[k - 1] if 1 <= k <= len(EXTREME_HALVES) else None
        h = special if special is not None else finite_half(rng)
        if name in HALF_AT:
            blocks[k, HALF_AT[name]:HALF_AT[name] + 2] = [h & 0xFF, h >> 8]
        elif name == "iq1_m":  # the f16 lives in the top nibbles of the four scale words
            for w in range(4):
                hi = blocks[k, 48 + 2 * w + 1]
                blocks[k, 48 + 2 * w + 1] = (hi & 0x0F) | (((h >> (4 * w)) & 0xF) << 4)
    if name == "mxfp4":
        blocks[:6, 0] = [0, 1, 2, 127, 254, 255]
    return blocks


# ---- GGUF v3 writer (just what the fixture needs) ---------------------------

def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs, tensors):
    """kvs: (key, 'str' | 'u32' | 'strs', value); tensors: (name, type, ne, bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, kind, val in kvs:
        out += gguf_str(key)
        if kind == "str":
            out += struct.pack("<I", 8) + gguf_str(val)
        elif kind == "u32":
            out += struct.pack("<II", 4, val)
        else:
            out += struct.pack("<IIQ", 9, 8, len(val)) + b"".join(gguf_str(v) for v in val)
    offset, blobs = 0, []
    for name, ttype, ne, data in tensors:
        out += gguf_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        out += struct.pack("<IQ", ttype, offset)
        pad = (-len(data)) % 32
        blobs.append(data + bytes(pad))
        offset += len(data) + pad
    out += bytes((-len(out)) % 32)
    with open(path, "wb") as f:
        f.write(out + b"".join(blobs))


# ---- main -------------------------------------------------------------------

def read_quants(path):
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read()
    return subprocess.run(["git", "-C", MIRROR, "show", COMMIT + ":gguf-py/gguf/quants.py"],
                          check=True, capture_output=True, text=True).stdout


def build(tables):
    rng = np.random.default_rng(SEED)
    out = {}
    for name in TYPES:
        blocks = make_blocks(name, rng)
        out[name] = (blocks, DECODERS[name](blocks, tables))
    return out


def cross_check(gguf_py_dir, data):
    """gguf-py's own dequantize on the same bytes, bit for bit."""
    # the package without its __init__ (which needs sentencepiece for the vocab)
    pkg = types.ModuleType("gguf")
    pkg.__path__ = [os.path.join(gguf_py_dir, "gguf")]
    sys.modules["gguf"] = pkg
    gq = importlib.import_module("gguf.quants")
    const = importlib.import_module("gguf.constants")
    GGML_QUANT_SIZES, GGMLQuantizationType = const.GGML_QUANT_SIZES, const.GGMLQuantizationType
    bad = 0
    for name, (blocks, expected) in data.items():
        qt = getattr(GGMLQuantizationType, name.upper(), None)
        if qt is None:
            print("%-8s not in this gguf-py" % name)
            continue
        tid, bs, ts, _ = TYPES[name]
        ok_size = int(qt) == tid and GGML_QUANT_SIZES[qt] == (bs, ts)
        with np.errstate(over="ignore"):
            got = gq.dequantize(blocks.reshape(1, -1), qt).reshape(expected.shape)
        same = np.array_equal(got.view(np.uint32), expected.view(np.uint32))
        bad += (not same) + (not ok_size)
        print("%-8s id/size %s, %d values: %s" % (name, "ok" if ok_size else "DIFFER", expected.size,
                                                  "bit-identical" if same else "DIFFER"))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quants", help="gguf-py's gguf/quants.py (default: the mirror's)")
    ap.add_argument("-o", "--out", default="tests/data/zoo_iq.gguf")
    ap.add_argument("--cross-check", metavar="GGUF_PY_DIR")
    args = ap.parse_args()
    grids, ksigns = load_tables(read_quants(args.quants))
    tables = dict(grids, ksigns=ksigns)
    data = build(tables)
    if args.cross_check:
        sys.exit(1 if cross_check(args.cross_check, data) else 0)
    tensors = []
    for name, (blocks, expected) in data.items():
        tid, _, _, ne = TYPES[name]
        tensors.append((name, tid, ne, blocks.tobytes()))
        tensors.append((name + ".expected", 0, ne, expected.astype("<f4").tobytes()))
    kvs = [("general.architecture", "str", "zoo"),
           ("zoo.types", "strs", list(TYPES)),
           ("zoo.seed", "u32", SEED),
           ("zoo.generator", "str", "tools/zoo_extend.py (numpy, gguf-py quants.py semantics)")]
    write_gguf(args.out, kvs, tensors)
    print("wrote %s: %d tensors" % (args.out, len(tensors)))


if __name__ == "__main__":
    main()
