/* dump_shard.c — a dump's defining inputs and a shard's bookkeeping
 * (dump_shard.h). The configuration mirrors a kl run's (merge.h): what the
 * hash drops (paths, threads, chunk) is recorded but cannot make two shards
 * foreign; everything that can change a stored byte is hashed. */
#include "eval/dump_shard.h"

#include "common/common.h"
#include "eval/merge.h"

#include <stdlib.h>

json_t *kld_dump_config_json(const kld_dump_shard_in *in) {
    const kld_dump_config *c = in->c;
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "version", json_string(kld_version()));
    json_object_set_new(o, "mode", json_string("dump"));
    json_object_set_new(o, "ref", json_deep_copy(in->model_desc));
    json_object_set_new(o, "corpus", json_pack("{s:s?,s:s,s:s?}", "name", in->corpus_name, "kind",
                                               in->corpus_kind, "sha256", in->corpus_sha256));
    json_object_set_new(o, "chunking", json_string(kld_chunking_name(in->plan->chunking)));
    /* a candidate's windows are the teacher's; its plan note names the teacher's path */
    const char *windows = in->teacher ? in->teacher->windows : in->plan->note;
    json_object_set_new(o, "windows", windows ? json_string(windows) : json_null());
    json_object_set_new(o, "ctx", json_integer(in->plan->max_len));
    json_object_set_new(o, "n_seqs", json_integer((json_int_t)in->plan->n_windows));
    json_object_set_new(o, "max_docs", json_integer(c->max_docs));
    json_object_set_new(o, "max_tokens", json_integer(c->max_tokens));
    json_object_set_new(o, "max_chunks", json_integer(c->max_chunks));
    json_object_set_new(o, "top_k", json_integer(in->top_k));
    if (in->format_version == 3) /* hidden states: their dtype defines the bytes */
        json_object_set_new(o, "hidden_dtype", json_string(kld_dump_hidden_name(c->hidden_dtype)));
    else
        json_object_set_new(o, "logit_dtype", json_string(in->format_version == 1 ? "float16" : "float32"));
    json_object_set_new(o, "lse_of_stored", json_true());
    json_object_set_new(o, "kind", json_string(in->teacher ? "candidate" : "teacher"));
    json_object_set_new(o, "n_vocab", json_integer(in->n_vocab));
    json_object_set_new(o, "notes", json_string(c->notes ? c->notes : ""));
    if (in->teacher) {
        const kld_dump_meta *t = in->teacher;
        json_object_set_new(o, "teacher", json_pack("{s:s,s:s?,s:s,s:s?,s:s?,s:I,s:I,s:i,s:i}",
                                                    "model", t->model, "model_sha256", t->model_sha256,
                                                    "corpus_sha256", t->corpus_sha256,
                                                    "tokenizer_fingerprint", t->tokenizer_fingerprint,
                                                    "created", t->created, "n_seqs", (json_int_t)t->n_seqs,
                                                    "ctx_len", (json_int_t)t->ctx_len, "top_k",
                                                    (int)t->top_k, "format_version", t->format_version));
        json_object_set_new(o, "allow_vocab_mismatch", json_boolean(c->allow_vocab_mismatch));
    }
    json_object_set_new(o, "chunk", json_integer(in->chunk));
    json_object_set_new(o, "threads", json_integer(in->threads));
    return o;
}

char *kld_dump_shard_json(const kld_dump_shard_in *in, const kld_shard *s, const int64_t *held,
                          size_t n_held, char hash_hex[65]) {
    json_t *config = kld_dump_config_json(in);
    if (!config) return NULL;
    uint8_t hash[32];
    kld_eval_hash(config, hash);
    kld_hex_digest(hash, hash_hex);
    json_t *windows = json_array();
    for (size_t i = 0; windows && i < n_held; i++) json_array_append_new(windows, json_integer(held[i]));
    json_t *o = json_pack("{s:i,s:i,s:s,s:o,s:s,s:o}", "k", (int)s->k, "n", (int)s->n, "mode",
                          kld_shard_mode_name(s->mode), "windows", windows, "eval_hash", hash_hex,
                          "config", kld_eval_defining(config));
    json_decref(config);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}
