/* test_dump_python.c — scripts/dump_teacher.py --selftest writes three dumps
 * (teacher v1, teacher v2, candidate v1 at the teacher's indices) from its
 * documented integer "model"; this reads them with kld_dump_open/read and
 * checks every field against the same generator recomputed here
 * (tests/dump_testutil.h: dt_logit is the script's formula). argv[1] is the
 * python3 to run; a missing python3 or numpy fails the test (tools/setup.sh
 * installs both). */
#include "dump_testutil.h"
#include "eval/arm.h"
#include "eval/corpus.h"
#include "tensor/types.h"

#include <jansson.h>

#define V 50
#define NSEQ 3
#define CTX 9
#define PPS (CTX - 1)
#define TOPK 6

static int32_t token(int64_t s, int64_t p) { return (int32_t)((7 * s + 3 * p + (p * p) % 5) % V); }

static bool near64(double a, double b) { return fabs(a - b) <= 1e-12 * (1.0 + fabs(b)); }
static bool near32(float a, float b) {
    return a == b || a == nextafterf(b, INFINITY) || a == nextafterf(b, -INFINITY);
}

static const char *mstr(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static void check_dump(const char *outdir, const char *name, int fv, int salt, bool candidate) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s", outdir, name);
    kld_dump *d = NULL;
    kld_error err = {0};
    kld_status st = kld_dump_open(dir, V, &d, &err);
    CHECK_OK(st, err);
    if (st) return;
    const kld_dump_meta *m = kld_dump_meta_of(d);
    char model[32];
    snprintf(model, sizeof model, "selftest-salt%d", salt);
    CHECK(m->format_version == fv && m->ctx_len == CTX && m->n_seqs == NSEQ && m->top_k == TOPK &&
              m->positions_per_seq == PPS && m->n_vocab == V && m->ext && m->candidate == candidate,
          "%s: manifest numbers", name);
    CHECK(!strcmp(m->model, model), "%s: model %s", name, m->model);
    CHECK(m->created && !strcmp(m->created, "2026-01-01T00:00:00Z"), "%s: created", name);
    CHECK(m->chunking && !strcmp(m->chunking, "selftest") && m->windows && m->bos == NULL,
          "%s: chunking/windows/bos", name);
    CHECK(m->tokenizer_fingerprint == NULL && m->kldeval_version == NULL && m->model_sha256 == NULL,
          "%s: keys the script cannot know are absent", name);
    /* corpus_sha256: the SHA-256 of the tokens' bytes */
    char tpath[1300];
    snprintf(tpath, sizeof tpath, "%s/tokens.bin", dir);
    uint8_t digest[32];
    char hex[65];
    CHECK_OK(kld_sha256_file(tpath, digest, &err), err);
    kld_hex_digest(digest, hex);
    CHECK(!strcmp(m->corpus_sha256, hex), "%s: corpus_sha256 %s, tokens hash %s", name,
          m->corpus_sha256, hex);
    if (candidate) {
        CHECK(m->teacher_model && !strcmp(m->teacher_model, "selftest-salt0") &&
                  m->teacher_corpus_sha256 && !strcmp(m->teacher_corpus_sha256, hex) &&
                  m->teacher_created && !strcmp(m->teacher_created, "2026-01-01T00:00:00Z") &&
                  m->teacher_fingerprint == NULL,
              "%s: teacher object", name);
    }
    /* the raw manifest: logit_dtype and kind as written */
    char mpath[1300];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    json_t *root = json_load_file(mpath, JSON_REJECT_DUPLICATES, NULL);
    CHECK(root && !strcmp(mstr(root, "logit_dtype"), fv == 1 ? "float16" : "float32") &&
              !strcmp(mstr(root, "kind"), candidate ? "candidate" : "teacher") &&
              json_is_true(json_object_get(root, "ext")) &&
              json_is_true(json_object_get(root, "lse_of_stored")),
          "%s: logit_dtype, kind, ext, lse_of_stored", name);
    json_decref(root);
    snprintf(mpath, sizeof mpath, "%s/dump.partial.json", dir);
    CHECK(!dt_exists(mpath), "%s: partial manifest removed", name);

    long bad_tok = 0, bad_idx = 0, bad_val = 0, bad_lse = 0, bad_ext = 0, ties = 0, n_rec = 0;
    int32_t idx[PPS * TOPK], am[PPS];
    float val[PPS * TOPK], lse[PPS];
    double lse64[PPS], logp[PPS];
    kld_dump_rows rows = {idx, val, lse, lse64, logp, am};
    for (int s = 0; s < NSEQ; s++) {
        const int32_t *tok = kld_dump_tokens(d, s);
        for (int p = 0; p < CTX; p++) bad_tok += tok[p] != token(s, p);
        st = kld_dump_read(d, s, 0, PPS, &rows, &err);
        CHECK_OK(st, err);
        if (st) continue;
        for (int r = 0; r < PPS; r++) {
            n_rec++;
            int32_t widx[TOPK], tidx[TOPK], wam;
            float wval[TOPK], wlse, tval[TOPK], tl;
            double wl, wlogp;
            int32_t next = token(s, r + 1);
            const int32_t *at = NULL;
            if (candidate) {
                dt_record(s, r, V, TOPK, 0, next, NULL, tidx, tval, &tl, NULL, NULL, NULL);
                at = tidx;
            }
            dt_record(s, r, V, TOPK, salt, next, at, widx, wval, &wlse, &wl, &wlogp, &wam);
            float half[TOPK];
            if (fv == 1) {
                /* the writer's float16 form (kld_row_as_f16 is the C twin) */
                float row[V];
                for (int v = 0; v < V; v++) row[v] = dt_logit(s, r, v, salt);
                CHECK_OK(kld_row_as_f16(row, V, wl, wam, widx, TOPK, half, &wl, &err), err);
                wlse = (float)wl;
            }
            for (int j = 0; j < TOPK; j++) {
                float want = fv == 1 ? half[j] : wval[j];
                bad_idx += idx[r * TOPK + j] != widx[j];
                bad_val += memcmp(&val[r * TOPK + j], &want, 4) != 0;
                if (j > 0 && !candidate) ties += wval[j] == wval[j - 1];
            }
            bad_lse += !near32(lse[r], wlse);
            bad_ext += !near64(lse64[r], wl) || !near64(logp[r], wlogp) || am[r] != wam;
        }
    }
    CHECK(n_rec == NSEQ * PPS, "%s: %ld records", name, n_rec);
    CHECK(bad_tok == 0, "%s: %ld token ids differ", name, bad_tok);
    CHECK(bad_idx == 0, "%s: %ld indices differ (top-k order, ties to the lower index)", name,
          bad_idx);
    CHECK(bad_val == 0, "%s: %ld logits differ%s", name, bad_val,
          fv == 1 ? " (float16 rounding)" : "");
    CHECK(bad_lse == 0, "%s: %ld logsumexp values differ", name, bad_lse);
    CHECK(bad_ext == 0, "%s: %ld sidecar entries differ", name, bad_ext);
    CHECK(candidate || ties > 0, "%s: the generator produced no ties inside the top-k", name);
    kld_dump_close(d);
}

/* Format 3 (--hidden): the generator's hidden states, as stored (bf16:
 * rounded to nearest even), the sidecar from the logits, the manifest's
 * n_embd, dtype and head. */
#define EMBD 8
static float gen_hidden(int64_t s, int64_t r, int64_t e) {
    return (float)((double)((s * 31 + r * 17 + e * e * 5 + e) % 41 - 20) / 3.0);
}

static void check_hidden(const char *outdir, const char *name, int dtype) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s", outdir, name);
    kld_dump *d = NULL;
    kld_error err = {0};
    kld_status st = kld_dump_open(dir, V, &d, &err);
    CHECK_OK(st, err);
    if (st) return;
    const kld_dump_meta *m = kld_dump_meta_of(d);
    CHECK(m->format_version == 3 && m->top_k == 0 && m->n_embd == EMBD && m->hidden_dtype == dtype &&
              m->n_vocab == V && m->head.rows == V && m->head.cols == EMBD && !m->head.tied &&
              !strcmp(m->head.tensor, "output.weight"),
          "%s: format 3 manifest (n_embd, dtype, head)", name);
    long bad_h = 0, bad_ext = 0;
    float h[PPS * EMBD];
    double lse[PPS], logp[PPS];
    int32_t am[PPS];
    for (int s = 0; s < NSEQ; s++) {
        st = kld_dump_read_hidden(d, s, 0, PPS, h, lse, logp, am, &err);
        CHECK_OK(st, err);
        if (st) continue;
        for (int r = 0; r < PPS; r++) {
            for (int e = 0; e < EMBD; e++) {
                float want = gen_hidden(s, r, e);
                if (dtype == KLD_DUMP_HIDDEN_BF16) want = kld_bf16_to_f32(kld_f32_to_bf16(want));
                bad_h += memcmp(&h[r * EMBD + e], &want, 4) != 0;
            }
            int32_t widx[TOPK], wam;
            float wval[TOPK], wlse;
            double wl, wlogp;
            dt_record(s, r, V, TOPK, 0, token(s, r + 1), NULL, widx, wval, &wlse, &wl, &wlogp, &wam);
            bad_ext += !near64(lse[r], wl) || !near64(logp[r], wlogp) || am[r] != wam;
        }
    }
    CHECK(bad_h == 0, "%s: %ld hidden values differ", name, bad_h);
    CHECK(bad_ext == 0, "%s: %ld sidecar entries differ", name, bad_ext);
    kld_dump_close(d);
}

int main(int argc, char **argv) {
    const char *python = argc > 1 ? argv[1] : "python3";
    char outdir[1024], cmd[4096];
    snprintf(outdir, sizeof outdir, "%s/pydump", kt_build_dir());
    snprintf(cmd, sizeof cmd, "'%s' scripts/dump_teacher.py --selftest '%s'", python, outdir);
    int rc = system(cmd);
    CHECK(rc == 0, "%s: exit status %d (python3 and python3-numpy are needed: bash tools/setup.sh)",
          cmd, rc);
    if (rc != 0) return kt_finish();
    check_dump(outdir, "teacher-v1", 1, 0, false);
    check_dump(outdir, "teacher-v2", 2, 0, false);
    check_dump(outdir, "candidate-v1", 1, 1, true);
    check_hidden(outdir, "teacher-v3", KLD_DUMP_HIDDEN_F32);
    check_hidden(outdir, "teacher-v3-bf16", KLD_DUMP_HIDDEN_BF16);
    return kt_finish();
}
