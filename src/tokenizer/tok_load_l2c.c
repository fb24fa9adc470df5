/* tok_load_l2c.c — a llama2.c tokenizer.bin (read by src/io/llama2c.c) as
 * an SPM vocabulary, spelled the way llama.cpp's llama2.c converter writes
 * it into GGUF: ids 0/1/2 are <unk>/<s>/</s> (the file spells BOS and EOS
 * "\n<s>\n" and "\n</s>\n"), "<0xNN>" pieces are byte tokens, an empty
 * piece is a control token, spaces become ▁. Then it tokenizes exactly
 * like the converted GGUF (add BOS, add a space prefix). */
#include "tokenizer/tok_internal.h"
#include "io/llama2c.h"

#include <ctype.h>
#include <stdlib.h>

static bool is_byte_piece(const char *p, size_t n) {
    /* the converter's sscanf("<0x%02hhX>") accepts "<0x" and a hex digit */
    return n >= 4 && memcmp(p, "<0x", 3) == 0 && isxdigit((unsigned char)p[3]);
}

kld_status tok_load_llama2c(const char *path, int32_t n_vocab, kld_tokenizer **out,
                            kld_error *err) {
    *out = NULL;
    kld_llama2c_vocab *lv = NULL;
    kld_status st = kld_llama2c_vocab_open(path, n_vocab, &lv, err);
    if (st) return st;
    kld_tokenizer *t = NULL;
    st = tok_new(path, SRC_LLAMA2C, &t, err);
    if (st) goto done;
    t->model = MODEL_SPM;
    t->llama_mode = true;
    t->add_space_prefix = true;
    t->pre_name = kld_strdup("default");
    st = tok_vocab_init(&t->vocab, lv->n_vocab, path, err);
    tok_buf piece = {0};
    static const char esc[] = "\xE2\x96\x81";
    for (int32_t i = 0; i < lv->n_vocab && !st; i++) {
        const char *p = lv->pieces[i];
        size_t n = lv->lengths[i];
        uint8_t type = KLD_TOKEN_NORMAL;
        piece.n = 0;
        bool ok = true;
        if (i == 0) ok = tok_buf_append(&piece, "<unk>", 5), type = KLD_TOKEN_UNKNOWN;
        else if (i == 1) ok = tok_buf_append(&piece, "<s>", 3), type = KLD_TOKEN_CONTROL;
        else if (i == 2) ok = tok_buf_append(&piece, "</s>", 4), type = KLD_TOKEN_CONTROL;
        else {
            if (n == 0) type = KLD_TOKEN_CONTROL;
            else if (is_byte_piece(p, n)) type = KLD_TOKEN_BYTE;
            for (size_t k = 0; k < n && ok; k++)
                ok =
                    p[k] == ' ' ? tok_buf_append(&piece, esc, 3) : tok_buf_append(&piece, p + k, 1);
        }
        if (!ok) {
            st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            break;
        }
        if (!kld_utf8_valid(piece.p, piece.n)) {
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: token %d is not valid UTF-8", path, (int)i);
            break;
        }
        st = tok_vocab_set(&t->vocab, i, piece.p ? piece.p : "", piece.n, lv->scores[i], type,
                           false, path, err);
    }
    tok_buf_free(&piece);
    if (!st) st = tok_vocab_finish(&t->vocab, false, false, NULL, path, err);
    if (!st) {
        t->unk = 0;
        t->bos = lv->n_vocab > 1 ? 1 : -1;
        t->eos = lv->n_vocab > 2 ? 2 : -1;
        t->add_bos = t->bos >= 0;
        st = tok_llama_specials(t, err);
    }
    if (!st && t->add_bos) {
        t->prefix_ids = malloc(sizeof *t->prefix_ids);
        if (!t->prefix_ids) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        else t->prefix_ids[0] = t->bos, t->n_prefix = 1;
    }
done:
    kld_llama2c_vocab_free(lv);
    if (st) kld_tok_free(t);
    else *out = t;
    return st;
}
