/* tok_wpm.c — WordPiece for GGUF "bert" vocabularies, as llama.cpp does it:
 * NFD, drop controls, strip accents and lowercase (BERT's uncased
 * normalizer), split on whitespace and around punctuation / CJK
 * characters, then per word greedy longest match of "▁word" (the GGUF
 * converter spells word starts with ▁ instead of marking continuations
 * with ##); a word with an unmatched position becomes [UNK]. */
#include "tokenizer/tok_internal.h"

#include <utf8proc.h>

static bool is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static kld_status emit_word(const kld_tokenizer *t, const char *w, size_t n, kld_tok_ids *out,
                            kld_error *err) {
    size_t before = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = i + t->vocab.max_len;
        if (j > n) j = n;
        int32_t id = -1;
        for (; j > i; j--) {
            id = tok_vocab_find(&t->vocab, w + i, j - i);
            if (id >= 0) break;
        }
        if (id < 0) { /* discard the whole word */
            out->n = before;
            break;
        }
        if (!tok_ids_push(out, id)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        i = j;
    }
    if (out->n == before && !tok_ids_push(out, t->unk))
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return KLD_OK;
}

kld_status tok_wpm_text(const kld_tokenizer *t, tok_scratch *sc, const char *s, size_t n,
                        kld_tok_ids *out, kld_error *err) {
    tok_buf *nfd = &sc->norm2, *word = &sc->tmp;
    nfd->n = 0;
    const char *p = s;
    if (t->wpm_strip_accents) {
        kld_status st = tok_normalize_form(TOK_NFD, s, n, nfd, err);
        if (st) return st;
        p = nfd->p;
        n = nfd->n;
    }
    word->n = 0;
    static const char phantom[] = "\xE2\x96\x81"; /* ▁ */
    tok_buf_append(word, phantom, 3);
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t cp = tok_utf8_decode(p + i, n - i, &l);
        i += l;
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
        if (tok_is_whitespace(cp)) {
            if (word->n > 3) {
                kld_status st = emit_word(t, word->p, word->n, out, err);
                if (st) return st;
            }
            word->n = 3;
            continue;
        }
        if (cp == 0 || cp == 0xFFFD || cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
            cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS ||
            cat == UTF8PROC_CATEGORY_CN)
            continue;
        if (t->wpm_strip_accents && cat == UTF8PROC_CATEGORY_MN) continue;
        if (t->wpm_lowercase) cp = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
        char u[4];
        size_t k = tok_utf8_encode(cp, u);
        bool punct = (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO) ||
                     (cp < 0x7F && cat >= UTF8PROC_CATEGORY_SM && cat <= UTF8PROC_CATEGORY_SO) ||
                     is_chinese(cp);
        if (punct) {
            if (word->n > 3) {
                kld_status st = emit_word(t, word->p, word->n, out, err);
                if (st) return st;
            }
            word->n = 3;
            tok_buf_append(word, u, k);
            kld_status st = emit_word(t, word->p, word->n, out, err);
            if (st) return st;
            word->n = 3;
        } else if (!tok_buf_append(word, u, k)) {
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        }
    }
    if (word->n > 3) return emit_word(t, word->p, word->n, out, err);
    return KLD_OK;
}
