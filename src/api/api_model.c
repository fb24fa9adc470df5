/* api_model.c — the public model calls of kld.h beyond opening: its facts,
 * tokenizing with its tokenizer, and its logits for a list of ids. */
#include "api/api.h"

#include "common/common.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdlib.h>

void kld_free(void *p) { free(p); }

int32_t kld_model_n_vocab(const kld_model *m) { return m ? (int32_t)kld_model_hparams(m)->n_vocab : 0; }
int64_t kld_model_n_ctx_train(const kld_model *m) { return m ? kld_model_hparams(m)->n_ctx_train : 0; }
int64_t kld_model_n_embd(const kld_model *m) { return m ? kld_model_hparams(m)->n_embd : 0; }
const char *kld_model_arch(const kld_model *m) { return m ? kld_model_hparams(m)->arch : NULL; }

static void free_tokenizer(void *p) { kld_tok_free(p); }

/* The model's tokenizer, opened on first use and kept with the model. */
kld_status kld_api_tokenizer(kld_model *m, const kld_tokenizer **out, kld_error *err) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    kld_status st = KLD_OK;
    if (!kld_model_attached(m)) {
        kld_tokenizer *t = NULL;
        st = kld_tok_open_source(kld_model_source(m), &t, err);
        if (!st) kld_model_attach(m, t, free_tokenizer);
    }
    *out = kld_model_attached(m);
    pthread_mutex_unlock(&lock);
    return st;
}

kld_status kld_model_tokenize(kld_model *m, const char *text, size_t len, bool add_special,
                              int32_t **ids, size_t *n_ids, kld_error *err) {
    if (!m || !text || !ids || !n_ids)
        return kld_fail(err, KLD_ERR_ARG, "kld_model_tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    const kld_tokenizer *t;
    kld_status st = kld_api_tokenizer(m, &t, err);
    if (st) return st;
    kld_tok_ids out = {0};
    st = kld_tok_encode(t, text, len, add_special ? KLD_TOK_ADD_SPECIAL : 0, &out, err);
    if (st) {
        kld_tok_ids_free(&out);
        return st;
    }
    *ids = out.ids;
    *n_ids = out.n;
    return KLD_OK;
}

kld_status kld_model_logits(kld_model *m, const char *levers, const int32_t *ids, int64_t n,
                            int n_threads, float *logits, kld_error *err) {
    if (!m || !ids || !logits || n < 1)
        return kld_fail(err, KLD_ERR_ARG, "kld_model_logits: NULL argument or n %lld < 1",
                        (long long)n);
    int64_t nv = kld_model_hparams(m)->n_vocab;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv)
            return kld_fail(err, KLD_ERR_ARG, "id %d at position %lld is outside the vocabulary "
                            "[0, %lld)", (int)ids[i], (long long)i, (long long)nv);
    kld_levers lv;
    kld_levers_default(&lv);
    kld_status st;
    if (levers && (st = kld_levers_parse(levers, &lv, err))) return st;
    if ((st = kld_levers_check(&lv, m, err))) return st;
    /* the chunk the CLI's `logits` uses: results do not depend on it */
    int64_t chunk = n < 512 ? n : 512;
    kld_session_opts so = {n, chunk, n_threads, NULL, &lv, false, 0};
    kld_session *s = NULL;
    if ((st = kld_session_create_opts(m, &so, &s, err))) return st;
    for (int64_t i = 0; i < n && !st; i += chunk) {
        int64_t c = n - i < chunk ? n - i : chunk;
        st = kld_session_eval(s, ids + i, c, logits + (size_t)i * (size_t)nv, err);
    }
    kld_session_free(s);
    return st;
}
