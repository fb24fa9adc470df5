/* lcpp_converted_hf.h — the Hugging Face checkpoint of an oracle family's model
 * (lcpp_oracle_families.c) that llama.cpp's converter turned into the GGUFs of
 * tests/data/lcpp-oracle/converter: written by lcpp_converter_gen for the
 * converter, and by test_lcpp_converter for kldeval's own conversion. */
#ifndef KLD_TEST_LCPP_CONVERTED_HF_H
#define KLD_TEST_LCPP_CONVERTED_HF_H

#include "lcpp_oracle_families.h"

#include <stdbool.h>

/* Writes the family's GGUF (synth_write_gguf of its shape, also left in *s) to gguf, and its
 * HF copy (model.safetensors, config.json, tokenizer.json) into the existing directory dir. */
bool lcpp_converted_write(const lcpp_family *f, const char *gguf, const char *dir, synth_shape *s);

#endif
