#!/usr/bin/env python3
"""Runs llama.cpp's own Hugging Face converter (convert_hf_to_gguf.py of a
llama.cpp source tree outside this project) on a tokenizer-less test
checkpoint, for tests/data/lcpp-oracle/converter (README there).

    lcpp_convert.py LLAMA_CPP_TREE HF_DIR OUT.gguf [CONVERTER OPTIONS...]

Two things stand in for what the test checkpoints do not have, and nothing
else of the converter changes:
- transformers: the converter reads config.json through AutoConfig and falls
  back to the plain JSON when that raises; a stand-in module whose AutoConfig
  always raises takes that fallback (the machines have no transformers).
- the tokenizer: the checkpoints carry none, so the model class's set_vocab
  writes what llama.cpp needs to load a GGUF without one
  (tokenizer.ggml.model "no_vocab" and <arch>.vocab_size), as the oracle
  GGUFs carry.
- torch's float8 dtypes: Debian 12's torch 1.13 predates them; the converter
  only names them (the checkpoints hold no float8), so placeholders do.
Matrices are written as F32 (--outtype f32); MXFP4 experts stay MXFP4.
"""
import sys
import types
from pathlib import Path


def stand_in_transformers():
    module = types.ModuleType("transformers")

    class AutoConfig:
        @staticmethod
        def from_pretrained(*_args, **_kwargs):
            raise OSError("no transformers here: read config.json")

    module.AutoConfig = AutoConfig
    sys.modules["transformers"] = module


def float8_placeholders():
    import torch

    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, type(name, (), {})())


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: lcpp_convert.py LLAMA_CPP_TREE HF_DIR OUT.gguf [CONVERTER OPTIONS...]")
    tree, hf_dir, out = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    sys.path.insert(0, str(tree / "gguf-py"))
    sys.path.insert(0, str(tree))
    stand_in_transformers()
    float8_placeholders()
    import convert_hf_to_gguf as converter

    real_get_model_class = converter.get_model_class

    def without_tokenizer(name, *args, **kwargs):
        cls = real_get_model_class(name, *args, **kwargs)

        def set_vocab(self):
            self.gguf_writer.add_tokenizer_model("no_vocab")
            self.gguf_writer.add_vocab_size(self.hparams["vocab_size"])

        cls.set_vocab = set_vocab  # on the class itself: the converter refuses subclasses without model_arch
        return cls

    converter.get_model_class = without_tokenizer
    sys.argv = ["convert_hf_to_gguf.py", hf_dir, "--outfile", out, "--outtype", "f32"] + sys.argv[4:]
    converter.main()


if __name__ == "__main__":
    main()
