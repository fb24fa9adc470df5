/* ifeval_lang.c — language identification for IFEval's language and
 * English-case verifiers. The reference calls Python's langdetect
 * (python3-langdetect 1.0.9), unseeded; this asks our port of it
 * (langdetect.c), which answers as langdetect seeded 0 does. */
#include "cap/cap.h"
#include "cap/langdetect.h"

kld_status kld_ifeval_language_is(const char *text, const char *code, bool *yes, kld_error *err) {
    const kld_langdetect *ld;
    char got[KLD_LANGDETECT_CODE];
    kld_status st = kld_langdetect_shared(&ld, err);
    if (st == KLD_OK) st = kld_langdetect_detect(ld, text, strlen(text), got, err);
    if (st != KLD_OK) {
        *yes = false;
        return st;
    }
    /* instructions.py catches LangDetectException (a text without features)
     * and counts the instruction as followed */
    *yes = !got[0] || !strcmp(got, code);
    return KLD_OK;
}

const char *kld_ifeval_language(const char *text) {
    static __thread char code[KLD_LANGDETECT_CODE];
    const kld_langdetect *ld;
    code[0] = '\0';
    if (kld_langdetect_shared(&ld, NULL) != KLD_OK ||
        kld_langdetect_detect(ld, text, strlen(text), code, NULL) != KLD_OK)
        code[0] = '\0';
    return code;
}
