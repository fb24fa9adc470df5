/* cmd_dump.c — `kldeval dump`: forward a model once and save its
 * distributions (a saved teacher, a candidate dump at a teacher's ids, or a
 * llama.cpp base file). Parses flags and calls the dump driver. */
#include "cli/args.h"
#include "eval/outputs.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "eval/dump_driver.h"
#include "report/report.h"
#include "store/dump.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void usage(FILE *f) {
    fprintf(f,
"usage: kldeval dump -m MODEL --out DIR [--top-k K] [flags]\n"
"       kldeval dump -m CAND --indices-from TEACHER_DIR --out CDIR\n"
"       kldeval dump -m MODEL --format llamacpp --out FILE --ctx N [--chunks N]\n\n"
"Forwards MODEL once, teacher-forced, and saves its next-token distributions, written as each\n"
"chunk is computed (memory O(chunk × vocabulary)), so that any number of arms can later be scored\n"
"against them with `kldeval kl --reference-logits DIR --arm MODEL` (or --arm-logits CDIR).\n\n"
"Dump format (docs/dump-format.md): format_version 1, the mlx-bun seed's layout: manifest.json,\n"
"tokens.bin (int32 [n_seqs][ctx_len]), seq-<i>.bin with ctx_len-1 records of the top-k ids (by\n"
"descending logit, ties to the lower id), their float16 logits (shifted by the row's maximum) and\n"
"the float32 logsumexp of the stored logits with the float32 logits of the ids not kept, so that\n"
"the stored distribution is normalised exactly; plus kldeval's sidecar seq-<i>.ext.bin (float64\n"
"logsumexp, log p(next token), argmax).\n"
"Every sequence is exactly --ctx tokens: windows are cut from the corpus as --chunking says and\n"
"the manifest records how (\"chunking\", \"bos\", \"windows\"). manifest.json is written last\n"
"(temporary name, fsync, rename): a dump without it is incomplete and --resume continues it.\n\n"
"model and output\n"
"  -m, --model MODEL      the model (.gguf, .safetensors, Hugging Face directory, llama2.c)\n"
"  --out PATH             the dump directory (created), or the base file with --format llamacpp\n"
"  --format F             dump (default) or llamacpp (llama-perplexity --kl-divergence-base file)\n"
"  --top-k K              ids per record, 1 .. %d and at most the vocabulary (default 256)\n"
"  --logits T             f16 (default: format_version 1) or f32 (format_version 2: exact logits,\n"
"                         record 8·k+4 bytes); a candidate dump takes its teacher's\n"
"  --hidden               save each position's final-norm hidden state instead of logits (format\n"
"                         3: n_embd values a position, 16-100x smaller than the vocabulary's\n"
"                         logits); kl recomputes the logits with the model's output head, exactly\n"
"                         the lockstep figures (docs/saved-teachers.md)\n"
"  --hidden-dtype T       f32 (default: exact), bf16 or f16 (half the size; the KL the rounding\n"
"                         adds is measured over the dump and kept in its manifest)\n"
"  --indices-from DIR     write a candidate dump: MODEL's logits at the teacher dump's ids, over\n"
"                         its tokens, with MODEL's own logsumexp and argmax, at the teacher's\n"
"                         logit precision (with --hidden: MODEL's hidden states at its tokens)\n"
"  --resume               continue an interrupted dump in --out after its last complete record\n"
"  --notes TEXT           the manifest's notes\n"
"  --allow-vocab-mismatch with --indices-from: accept a teacher made with another tokenizer\n\n"
"corpus and windows (as in `kldeval kl`)\n"
"  --corpus FILE          text (one document per line) or JSONL ({\"text\": ...} or {\"messages\":\n"
"                         [...]} lines, conversations rendered with the model's chat template);\n"
"                         default: the built-in corpus\n"
"  --corpus-format F      auto, text, jsonl\n"
"  --ids-file FILE        pre-tokenized int32 little-endian ids\n"
"  --chunking MODE        stream (default): documents tokenized with the tokenizer's BOS,\n"
"                         concatenated and cut into windows of exactly --ctx tokens (a shorter\n"
"                         tail is dropped), records for rows 0 .. ctx-2; llamacpp: the whole text\n"
"                         minus its final newline, --ctx windows with the first token replaced by\n"
"                         BOS (tokens.bin holds the ids as fed)\n"
"  --ctx N                window length, 2 .. 16777216 (default 512)\n"
"  --chunks N             at most N windows (default 0 = all)\n"
"  --max-docs N           stream: at most N documents\n"
"  --max-tokens N         stream: at most N tokens per document\n"
"  --chunk N              prefill chunk, 1 .. 65536 (default 128)\n"
"  --threads N            worker threads (default: all cores)\n"
"  --db PATH / --no-db    record the dump in this run database / do not (default: as kl)\n"
"  --label NAME           the run's label in the database\n"
"  --lever L              the model session's levers NAME=VALUE[,...] (see kldeval kl --help)\n"
"  --shard K/N            write only shard K of N: the sequences i with i mod N = K; --out then\n"
"                         holds tokens.bin, those sequences' files and shard.json (the manifest,\n"
"                         the shard's sequences and the hash of the defining inputs) instead of\n"
"                         manifest.json; `kldeval merge --dump OUT SHARD_DIR...` assembles the\n"
"                         shards into the dump one run writes, byte for byte (not with --format\n"
"                         llamacpp)\n"
"  --shard-mode M         mod (default) or range (the K-th of N contiguous runs of sequences)\n"
"  --quiet                no progress line\n"
"  -h, --help             this text\n\n"
"Ctrl-C stops after the current chunk and leaves a resumable dump (exit status 130).\n",
            KLD_DUMP_MAX_TOPK);
}

static void progress(const kld_kl_progress *p, void *user) {
    (void)user;
    kld_progress pr = {p->docs_done, p->docs_total, p->positions_done, p->positions_total,
                       p->elapsed_s, p->kld_mean};
    kld_progress_print(stderr, &pr);
}

static bool parse(int argc, char **argv, kld_dump_config *c, kld_kl_outputs *o, int *rc) {
    static const char *const valued[] = {
        "-m", "--model", "--out", "--format", "--top-k", "--logits", "--indices-from", "--notes",
        "--hidden-dtype",
        "--corpus", "--corpus-format", "--ids-file", "--chunking", "--ctx", "--chunks",
        "--max-docs", "--max-tokens", "--chunk", "--threads", "--db", "--label", "--lever", "--shard",
        "--shard-mode", NULL};
    *rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            *rc = 0;
            return false;
        }
        if (!strcmp(a, "--resume")) { c->resume = true; continue; }
        if (!strcmp(a, "--hidden")) { c->hidden = true; continue; }
        if (!strcmp(a, "--quiet")) { o->quiet = true; continue; }
        if (!strcmp(a, "--no-db")) { o->no_db = true; continue; }
        if (!strcmp(a, "--allow-vocab-mismatch")) { c->allow_vocab_mismatch = true; continue; }
        if (!kld_arg_in(a, valued)) {
            fprintf(stderr, "kldeval dump: unknown %s '%s' (see --help)\n",
                    a[0] == '-' ? "flag" : "argument", a);
            return false;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return false;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) c->model_path = v;
        else if (!strcmp(a, "--lever")) {
            if (!kld_arg_levers(&c->levers, v)) return false;
        }
        else if (!strcmp(a, "--out")) c->out = v;
        else if (!strcmp(a, "--format")) {
            if (!strcmp(v, "llamacpp")) c->llamacpp = true;
            else if (strcmp(v, "dump")) {
                fprintf(stderr, "kldeval dump: --format expects dump or llamacpp, got '%s'\n", v);
                return false;
            }
        } else if (!strcmp(a, "--hidden-dtype")) {
            c->hidden_dtype = !strcmp(v, "f32") ? KLD_DUMP_HIDDEN_F32 : !strcmp(v, "bf16") ? KLD_DUMP_HIDDEN_BF16
                              : !strcmp(v, "f16") ? KLD_DUMP_HIDDEN_F16 : -1;
            if (c->hidden_dtype < 0) {
                fprintf(stderr, "kldeval dump: --hidden-dtype expects f32, bf16 or f16, got '%s'\n", v);
                return false;
            }
        } else if (!strcmp(a, "--logits")) {
            if (!strcmp(v, "f16")) c->format_version = 1;
            else if (!strcmp(v, "f32")) c->format_version = 2;
            else {
                fprintf(stderr, "kldeval dump: --logits expects f16 or f32, got '%s'\n", v);
                return false;
            }
        } else if (!strcmp(a, "--chunking")) {
            if (!strcmp(v, "stream")) c->chunking = KLD_CHUNKING_STREAM;
            else if (!strcmp(v, "llamacpp")) c->chunking = KLD_CHUNKING_LLAMACPP;
            else {
                fprintf(stderr, "kldeval dump: --chunking expects stream or llamacpp, got '%s' "
                                "(doc windows have varying lengths; a dump's are fixed)\n", v);
                return false;
            }
        } else if (!strcmp(a, "--corpus-format")) {
            if (strcmp(v, "auto") && strcmp(v, "text") && strcmp(v, "jsonl")) {
                fprintf(stderr, "kldeval dump: --corpus-format expects auto, text or jsonl, got '%s'\n", v);
                return false;
            }
            c->corpus_format = v;
        }
        else if (!strcmp(a, "--indices-from")) c->indices_from = v;
        else if (!strcmp(a, "--shard")) {
            kld_shard_mode m = c->shard.mode;
            if (!kld_shard_parse(v, &c->shard)) {
                fprintf(stderr, "kldeval dump: --shard expects K/N with 0 <= K < N <= 1000000, got '%s'\n", v);
                return false;
            }
            c->shard.mode = m;
        } else if (!strcmp(a, "--shard-mode")) {
            if (strcmp(v, "mod") && strcmp(v, "range")) {
                fprintf(stderr, "kldeval dump: --shard-mode expects mod or range, got '%s'\n", v);
                return false;
            }
            c->shard.mode = !strcmp(v, "mod") ? KLD_SHARD_MOD : KLD_SHARD_RANGE;
        }
        else if (!strcmp(a, "--db")) o->db_path = v;
        else if (!strcmp(a, "--label")) o->label = v;
        else if (!strcmp(a, "--notes")) c->notes = v;
        else if (!strcmp(a, "--corpus")) c->corpus_path = v;
        else if (!strcmp(a, "--ids-file")) c->ids_path = v;
        else if (!strcmp(a, "--top-k")) { if (!kld_arg_int(a, v, 1, KLD_DUMP_MAX_TOPK, &n)) return false; c->top_k = (int32_t)n; }
        else if (!strcmp(a, "--ctx")) { if (!kld_arg_int(a, v, 2, 1 << 24, &c->ctx)) return false; }
        else if (!strcmp(a, "--chunks")) { if (!kld_arg_int(a, v, 0, INT64_MAX, &c->max_chunks)) return false; }
        else if (!strcmp(a, "--max-docs")) { if (!kld_arg_int(a, v, 0, INT64_MAX, &c->max_docs)) return false; }
        else if (!strcmp(a, "--max-tokens")) { if (!kld_arg_int(a, v, 0, INT64_MAX, &c->max_tokens)) return false; }
        else if (!strcmp(a, "--chunk")) { if (!kld_arg_int(a, v, 1, 1 << 16, &c->chunk)) return false; }
        else if (!strcmp(a, "--threads")) { if (!kld_arg_int(a, v, 1, 1024, &n)) return false; c->n_threads = (int)n; }
    }
    if (!c->model_path || !c->out) {
        fprintf(stderr, "kldeval dump: -m MODEL and --out are required (see --help)\n");
        return false;
    }
    kld_error err = {0};
    if (kld_dump_check(c, &err)) {
        fprintf(stderr, "kldeval dump: %s\n", err.msg);
        return false;
    }
    if (c->llamacpp) {
        const char *inputs[4] = {c->model_path, c->corpus_path, c->ids_path};
        if (!kld_arg_output("dump", "--out", c->out, inputs, 3)) return false;
    } else if (kld_output_dir_check("--out", c->out, &err)) {
        fprintf(stderr, "kldeval dump: %s\n", err.msg);
        return false;
    }
    if (!kld_record_check("dump", o)) return false;
    return true;
}

int kld_cmd_dump(int argc, char **argv) {
    kld_dump_config c;
    kld_dump_config_defaults(&c);
    kld_kl_outputs o = {0};
    int rc;
    if (!parse(argc, argv, &c, &o, &rc)) return rc;
    kld_kernels_init();
    c.stop = &stop_requested;
    if (!o.quiet && kld_progress_enabled(stderr)) c.progress = progress;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    kld_dump_result res;
    kld_error err = {0};
    kld_status st = kld_dump_run(&c, &res, &err);
    sigaction(SIGINT, &old, NULL);
    if (c.progress) kld_progress_end(stderr);
    if (st) {
        fprintf(stderr, "kldeval dump: %s\n", err.msg);
        return 1;
    }
    printf("%s: %llu windows, %llu records written", c.out, (unsigned long long)res.n_windows,
           (unsigned long long)res.n_records);
    if (res.records_skipped)
        printf(" (%llu already on disk)", (unsigned long long)res.records_skipped);
    if (c.shard.n)
        printf(" (shard %u/%u %s: %llu of %llu windows)", c.shard.k, c.shard.n,
               kld_shard_mode_name(c.shard.mode), (unsigned long long)res.n_windows,
               (unsigned long long)res.n_windows_total);
    printf(", %llu tokens forwarded in %.2f s (%.1f tokens/s); windows: %s; levers: %s\n",
           (unsigned long long)res.tokens, res.elapsed_s,
           res.forward_s > 0 ? (double)res.tokens / res.forward_s : 0.0, res.windows, res.levers);
    /* the run database keeps dumps beside the runs scored against them */
    kld_record_run("dump", &o, "dump", res.report, NULL, NULL, res.partial, res.elapsed_s,
                   res.elapsed_s > 0 ? (double)res.tokens / res.elapsed_s : NAN);
    kld_dump_result_free(&res);
    if (res.partial) {
        printf("*** INTERRUPTED: the dump is incomplete; continue it with --resume ***\n");
        return 130;
    }
    return 0;
}
