/* ifeval_lang.c — language identification for IFEval's language and
 * English-case verifiers. The reference uses Python's langdetect; Debian
 * ships no C port of it, so this uses libexttextcat (Debian's n-gram
 * TextCat, the library LibreOffice uses) with its own fingerprints,
 * restricted to the 55 languages langdetect knows (TextCat's 160 include
 * near neighbours such as Scots that langdetect never answers). The text
 * is lower-cased first (IFEval asks for all-capital answers; the
 * fingerprints are of running text). When TextCat cannot decide, the
 * dominant script decides: a script used by one language names it, Latin
 * counts as English, Devanagari as Hindi, Cyrillic as Russian, Arabic
 * script as Arabic (langdetect's usual answer for such short texts). */
#include "cap/cap.h"
#include "cap/pyre.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <textcat.h>
#include <unistd.h>

#define TEXTCAT_DIR "/usr/share/libexttextcat/"

static const char *const langdetect_codes[] = {
    "af", "ar", "bg", "bn", "ca", "cs", "cy", "da", "de", "el", "en", "es", "et", "fa",
    "fi", "fr", "gu", "he", "hi", "hr", "hu", "id", "it", "ja", "kn", "ko", "lt", "lv",
    "mk", "ml", "mr", "ne", "nl", "nb", "pa", "pl", "pt", "ro", "ru", "sk", "sl", "so",
    "sq", "sv", "sw", "ta", "te", "th", "tl", "tr", "uk", "ur", "vi", "zh", NULL};

static void *g_textcat;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static bool known_code(const char *c, size_t n) {
    for (int i = 0; langdetect_codes[i]; i++)
        if (strlen(langdetect_codes[i]) == n && !strncmp(langdetect_codes[i], c, n)) return true;
    return false;
}

/* TextCat reads its language list from a file: write the restricted list
 * to a private temporary file, load it, remove it. */
static void init_textcat(void) {
    FILE *in = fopen(TEXTCAT_DIR "fpdb.conf", "r");
    if (!in) return;
    const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[512];
    snprintf(path, sizeof path, "%s/kldeval-textcat-XXXXXX", tmpdir);
    int fd = mkstemp(path);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out) {
        if (fd >= 0) close(fd), unlink(path);
        fclose(in);
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, in)) {
        if (line[0] == '#') continue;
        size_t n = strcspn(line, ".-");
        if (known_code(line, n)) fputs(line, out);
    }
    fclose(in);
    if (fclose(out) == 0) g_textcat = special_textcat_Init(path, TEXTCAT_DIR);
    unlink(path);
}

static const char *by_script(const char *text) {
    static const struct { int32_t lo, hi; const char *code; } scripts[] = {
        {0x0041, 0x024F, "en"}, {0x0370, 0x03FF, "el"}, {0x0400, 0x04FF, "ru"},
        {0x0590, 0x05FF, "he"}, {0x0600, 0x06FF, "ar"}, {0x0900, 0x097F, "hi"},
        {0x0980, 0x09FF, "bn"}, {0x0A00, 0x0A7F, "pa"}, {0x0A80, 0x0AFF, "gu"},
        {0x0B80, 0x0BFF, "ta"}, {0x0C00, 0x0C7F, "te"}, {0x0C80, 0x0CFF, "kn"},
        {0x0D00, 0x0D7F, "ml"}, {0x0E00, 0x0E7F, "th"}, {0x1100, 0x11FF, "ko"},
        {0x3040, 0x30FF, "ja"}, {0x3130, 0x318F, "ko"}, {0x4E00, 0x9FFF, "zh"},
        {0xAC00, 0xD7AF, "ko"}};
    enum { NS = sizeof scripts / sizeof scripts[0] };
    size_t count[NS] = {0}, n = strlen(text);
    for (size_t i = 0; i < n;) {
        int32_t c;
        i += py_decode(text + i, n - i, &c);
        if (c < 0x80 && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) continue;
        for (int s = 0; s < NS; s++)
            if (c >= scripts[s].lo && c <= scripts[s].hi) count[s]++;
    }
    int best = -1;
    for (int s = 0; s < NS; s++)
        if (count[s] && (best < 0 || count[s] > count[best])) best = s;
    return best < 0 ? "" : scripts[best].code;
}

const char *kld_ifeval_language(const char *text) {
    static __thread char code[16];
    code[0] = '\0';
    pthread_once(&g_once, init_textcat);
    size_t n = 0;
    char *low = py_lower(text, strlen(text), &n);
    if (!low) return code;
    bool decided = false;
    if (g_textcat) {
        pthread_mutex_lock(&g_lock);
        const char *r = textcat_Classify(g_textcat, low, n);
        /* "[ko--utf8][fr--utf8]" best first; "UNKNOWN"; "SHORT" */
        if (r && !strcmp(r, TEXTCAT_RESULT_SHORT_STR)) decided = true; /* too short to tell */
        for (const char *p = r; p && *p == '['; p = strchr(p, ']') ? strchr(p, ']') + 1 : NULL) {
            size_t l = strcspn(p + 1, "-]");
            if (known_code(p + 1, l) && l < sizeof code) {
                memcpy(code, p + 1, l);
                code[l] = '\0';
                decided = true;
                break;
            }
        }
        pthread_mutex_unlock(&g_lock);
    }
    if (!decided) snprintf(code, sizeof code, "%s", by_script(low));
    free(low);
    return code;
}
