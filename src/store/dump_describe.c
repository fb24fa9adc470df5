/* dump_describe.c — what `kldeval inspect DIR` says of a dump (dump.h):
 * its manifest's facts and what a position costs on disk. */
#include "store/dump_internal.h"

#include <stdio.h>
#include <sys/stat.h>

static void set_str(json_t *o, const char *key, const char *v) {
    if (v) json_object_set_new(o, key, json_string(v));
}

json_t *kld_dump_describe(const kld_dump *d) {
    const kld_dump_meta *m = kld_dump_meta_of(d);
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "format", json_string("kldeval dump"));
    json_object_set_new(o, "path", json_string(kld_dump_dir(d)));
    json_object_set_new(o, "format_version", json_integer(m->format_version));
    json_object_set_new(o, "kind", json_string(m->candidate ? "candidate" : "teacher"));
    json_object_set_new(o, "stores",
                        json_string(m->format_version == 3   ? "final-norm hidden states"
                                    : m->format_version == 1 ? "top-k logits, float16"
                                                             : "top-k logits, float32"));
    set_str(o, "model", m->model);
    set_str(o, "model_sha256", m->model_sha256);
    set_str(o, "corpus_sha256", m->corpus_sha256);
    set_str(o, "created", m->created);
    set_str(o, "kldeval_version", m->kldeval_version);
    set_str(o, "levers", m->levers ? m->levers : "reference");
    set_str(o, "windows", m->windows);
    json_object_set_new(o, "n_seqs", json_integer(m->n_seqs));
    json_object_set_new(o, "ctx_len", json_integer(m->ctx_len));
    json_object_set_new(o, "positions", json_integer(m->n_seqs * m->positions_per_seq));
    if (m->n_vocab) json_object_set_new(o, "n_vocab", json_integer(m->n_vocab));
    if (m->format_version == 3) {
        json_object_set_new(o, "n_embd", json_integer(m->n_embd));
        json_object_set_new(o, "hidden_dtype", json_string(kld_dump_hidden_name(m->hidden_dtype)));
        json_object_set_new(o, "head", json_pack("{s:s,s:s,s:I,s:I,s:s,s:b,s:f}", "tensor",
                                                 m->head.tensor, "type", m->head.type, "rows",
                                                 (json_int_t)m->head.rows, "cols",
                                                 (json_int_t)m->head.cols, "sha256", m->head.sha256,
                                                 "tied", m->head.tied, "final_softcap",
                                                 m->head.final_softcap));
        if (m->has_rounding)
            json_object_set_new(o, "hidden_rounding", json_pack("{s:f,s:f}", "kld_mean",
                                                                m->rounding_kld_mean, "kld_max",
                                                                m->rounding_kld_max));
    } else {
        json_object_set_new(o, "top_k", json_integer(m->top_k));
        json_object_set_new(o, "lse_of_stored", json_boolean(m->lse_of_stored));
    }
    json_object_set_new(o, "ext", json_boolean(m->ext));
    uint64_t rec = kld_dump_meta_record_bytes(m);
    json_object_set_new(o, "bytes_per_position", json_integer((json_int_t)(rec + (m->ext ? KLD_DUMP_EXT_BYTES : 0))));
    /* llama.cpp's base file keeps every id as 16 bits (and a few fields) a position */
    if (m->n_vocab)
        json_object_set_new(o, "llamacpp_base_bytes_per_position",
                            json_integer((json_int_t)((2 * ((m->n_vocab + 1) / 2) + 4) * 2)));
    return o;
}
