/* head.h — what identifies a model's output head, so that hidden states
 * saved from one model are never turned back into logits by another head:
 * its GGUF name, stored type, shape, the SHA-256 of its bytes, whether it is
 * the token embedding, and the architecture's final soft-cap. */
#ifndef KLD_EVAL_HEAD_H
#define KLD_EVAL_HEAD_H

#include "engine/engine.h"

typedef struct kld_head_id {
    char tensor[128], type[32], sha256[65];
    int64_t rows, cols;        /* n_vocab, n_embd */
    bool tied;
    double final_softcap;
} kld_head_id;

kld_status kld_head_identify(const kld_model *model, kld_head_id *out, kld_error *err);

#endif
