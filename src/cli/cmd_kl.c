/* cmd_kl.c — `kldeval kl`: the KLD ruler. Parses flags, runs the lockstep
 * driver, prints the report and writes the requested files. */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/kl_pair.h"
#include "cli/kl_sweep.h"
#include "store/dump.h"
#include "engine/engine.h"
#include "eval/kl_driver.h"
#include "eval/merge.h"
#include "eval/bootstrap.h"
#include "report/report.h"

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
"usage: kldeval kl --ref MODEL --arm MODEL [flags]\n"
"       kldeval kl --ref MODEL --arm A --arm B [flags]            (two arms, paired)\n"
"       kldeval kl --reference-logits TEACHER_DIR (--arm MODEL | --arm-logits CAND_DIR) [flags]\n"
"       kldeval kl --llamacpp-base FILE --arm MODEL [flags]\n"
"       kldeval kl --ref MODEL --arm-endpoint URL [--top-logprobs K] [flags]   (a served arm)\n"
"       kldeval kl --ref-endpoint URL --arm MODEL [--top-logprobs K] [flags]   (a served reference)\n"
"       kldeval kl -m MODEL --lever NAME=VALUE[,...] [flags]   (self-flag: one weight load)\n\n"
"Teacher-forced KL divergence of an arm against a reference: both read the same tokens in\n"
"lockstep, chunk by chunk, and every scored position compares their next-token distributions.\n"
"MODEL is a .gguf, a .safetensors, a Hugging Face directory or a llama2.c checkpoint. Giving the\n"
"same model twice is the self-gate: KLD exactly 0, top-1 agreement exactly 1.\n"
"A saved teacher (kldeval dump, or another engine writing docs/dump-format.md) fixes the tokens\n"
"and windows; it holds the teacher's top-k, so KLD is then the truncated sum over those ids\n"
"(the seeds' definition), reported with the captured mass and a tail-corrected lower bound of the\n"
"full KL. A llama.cpp base file is scored with llama-perplexity's semantics.\n\n"
"arms and corpus\n"
"  --ref MODEL            the reference model (MODEL, MODEL@POLICY, MODEL[@POLICY]+ADAPTER[:SCALE]\n"
"                         wherever a model is read: see docs/lora.md)\n"
"  --arm MODEL            the candidate model. Given twice (--arm A --arm B), both arms are\n"
"                         scored against the reference on the same tokens (each in lockstep,\n"
"                         the reference forwarded once per arm; --arm-lever applies to both):\n"
"                         both reports, then the paired comparison A − B as kldeval runs compare\n"
"                         prints it (ΔKLD mean, p99, p99.9 and Δtop-1 with paired bootstrap\n"
"                         intervals and p-values, a verdict line), JSON schema kldeval.kl-pair/1\n"
"                         ({a, b, paired, gates}), both runs recorded. Not with --sweep, --floor,\n"
"                         --shard, --partial, --pin, --per-position, --checkpoint or --decode\n"
"  --reference-logits DIR the reference: a saved teacher dump (instead of --ref)\n"
"  --arm-logits DIR       the candidate: a candidate dump made with kldeval dump --indices-from\n"
"                         (instead of --arm; needs --reference-logits): two engines compared\n"
"                         without loading either model\n"
"  --teacher-head MODEL   a hidden-state teacher (dump --hidden): the model whose output head\n"
"                         turns its rows into logits (default: the model its manifest names;\n"
"                         only the head is read, and its bytes must hash as the manifest says)\n"
"  --arm-head MODEL       the same for a hidden-state candidate dump (--arm-logits)\n"
"  --arm-endpoint URL     the candidate: an OpenAI-style completions server (kldeval serve,\n"
"                         vLLM; URL http://HOST:PORT or .../v1) asked per window with the token\n"
"                         ids, echo, max_tokens 0, logprobs K, return_tokens_as_token_ids; its\n"
"                         echoed ids must be kldeval's. K < vocabulary: scored on the arm's top K,\n"
"                         reported as truncated with the lower bound (docs/serve.md); K = the\n"
"                         vocabulary: exact. 5xx and connection errors retried (5 tries)\n"
"  --ref-endpoint URL     the reference: a completions server asked as --arm-endpoint is (the\n"
"                         arm must be a model, whose tokenizer makes the windows). K < vocabulary:\n"
"                         scored on the reference's top K as a top-k saved teacher (truncated KL,\n"
"                         captured mass, lower bound); K = the vocabulary: exact. Before the run\n"
"                         each document goes to the server's POST /tokenize (when it has one, for\n"
"                         either endpoint flag) and must come back as kldeval's ids\n"
"  --endpoint-model NAME  the served model's name sent as 'model' (default: the first that\n"
"                         GET /v1/models lists)\n"
"  --top-logprobs K       log-probabilities per position asked of the endpoint (default 20,\n"
"                         vLLM's default limit; the vocabulary size for exact figures)\n"
"  --api-key KEY          sent to the endpoint as 'Authorization: Bearer KEY'\n"
"  --llamacpp-base FILE   the reference: a llama-perplexity --kl-divergence-base file (its tokens,\n"
"                         chunks and scored positions); prints llama-perplexity's statistics too\n"
"  -m, --model MODEL      the reference model (same as --ref); without --arm the run is\n"
"                         self-flag: the candidate is a second session over the same loaded\n"
"                         weights with the --lever settings\n"
"  --lever L              the candidate's levers (same as --arm-lever): NAME=VALUE[,...] with\n"
"                         kv=f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl (K and V cache;\n"
"                         per layer: kv=blk:0-3=q8_0,q4_0), also mlx<B>g<G> (MLX affine groups,\n"
"                         B 2 3 4 6 8, G 32 64 128) and rot<B> (rotated scalar quantizer, B 1-8),\n"
"                         kv_k=..., kv_v=..., kv_config=PATH (MLX kv_config.json), kv_start=N\n"
"                         (positions < N stay f32), act=f32|bf16|f16|q8\n"
"                         (q8: llama.cpp's activation rounding), kernels=auto|ref|simd,\n"
"                         attention=exact|online, attn_block=N, noise=none|bf16,\n"
"                         lora=ADAPTER[:SCALE] (a GGUF or PEFT LoRA adapter applied per session,\n"
"                         weights untouched; base against adapted on one load)\n"
"  --ref-lever L          the reference's levers (default: every lever at its reference value)\n"
"  --arm-lever L          the arm's levers\n"
"  --decode               the arm feeds each window's tokens after --prompt-len one decode step\n"
"                         at a time (teacher-forced): measures the decode path\n"
"  --prompt-len N         --decode: tokens of each window prefilled first (default 0)\n"
"  --allow-long-context   score a saved reference whose windows exceed the arm's training context\n"
"  --corpus FILE          text (one document per line, '#' comment lines) or JSONL ({\"text\": ...}\n"
"                         or {\"messages\": [{\"role\": ..., \"content\": ...}, ...]} per line: a\n"
"                         conversation rendered with the model's chat template, which both models\n"
"                         must render identically); default: the built-in corpus\n"
"  --corpus-format F      auto (default: .jsonl → JSONL, else text), text, jsonl\n"
"  --ids-file FILE        pre-tokenized int32 little-endian ids instead of text\n"
"  --max-docs N           at most N documents (doc chunking; default 0 = all)\n"
"  --max-tokens N         at most N tokens per document (doc chunking; default 0 = all)\n"
"  --allow-vocab-mismatch score only the ids both vocabularies share (otherwise an error)\n\n"
"windows\n"
"  --chunking MODE        doc (default): each document from position 0 in --ctx windows, every\n"
"                         position scored; llamacpp: llama-perplexity --kl-divergence semantics\n"
"                         (whole file as one text, minus its final newline, BOS prepended, cut into\n"
"                         --ctx windows with BOS first, positions ctx/2 .. ctx-2 scored); stream:\n"
"                         documents concatenated and cut into windows of exactly --ctx tokens,\n"
"                         rows 0 .. ctx-2 scored (the windows of kldeval dump)\n"
"                         (a saved reference brings its own windows: these flags do not apply)\n"
"  --ctx N                window length in tokens, 2 .. 16777216 (default 512)\n"
"  --chunks N             llamacpp chunking: score at most N windows (default 0 = all)\n"
"  --chunk N              prefill chunk in tokens, 1 .. 65536 (default 128); memory holds\n"
"                         2 × chunk × n_vocab floats of logits\n"
"  --topk K               top-k overlap size, 1 .. %d (default 10)\n"
"  --threads N            worker threads, 1 .. 1024 (default: all cores)\n\n"
"output\n"
"  --json FILE            everything as JSON (schema kldeval.kl/1, see docs/kl.md); output files\n"
"                         are checked before the run and may not be an input or each other\n"
"  --pin FILE             append one JSON line (never overwrites)\n"
"  --label NAME           label of the pin line (default \"<ref> vs <arm>\")\n"
"  --per-position FILE    every scored position as TSV\n"
"  --db PATH              record the run in this run database (default: $KLDEVAL_DB, else\n"
"                         $XDG_DATA_HOME/kldeval/runs.sqlite, else ~/.local/share/kldeval/runs.sqlite)\n"
"  --no-db                do not record the run\n"
"  --html FILE            write the HTML report of this run (see kldeval report)\n"
"  --quiet                no progress line\n"
"  --bootstrap N          95%% intervals for the mean, median, p90..p99.9 KLD, top-1 agreement and\n"
"                         PPL ratio by resampling whole documents (windows in stream/llamacpp\n"
"                         chunking) N times, 0 .. 100000 (default 1000; 0: none)\n"
"  --bootstrap-seed S     the resampling's seed (default 0): the same seed, the same intervals\n"
"  --strata SPEC          scoring subsets by the next token's decoded text: NAME=REGEX[,NAME=REGEX...]\n"
"                         (PCRE2, e.g. digits=^\\s*\\d+$,space=^\\s,code=[{}();]); the built-in\n"
"                         strata special (control tokens) and, on chat corpora, role:system,\n"
"                         role:user, role:assistant, role:tool (the turn the token lies in) come\n"
"                         with them; each stratum gets the full statistics (text, JSON strata.NAME,\n"
"                         database, TSV column)\n"
"  --score-only NAME      score only that stratum's positions (a --strata NAME, special or\n"
"                         role:...): every statistic, interval and gate sees those alone\n"
"  --gate EXPR            conditions on the reported statistics, e.g.\n"
"                         kld.mean<=2e-3,kld.p99<=0.05,top1>=0.98,ppl_ratio<=1.01 (any statistic of\n"
"                         --json: kld|kld_reverse|jsd|delta_p . mean|median|p90|p99|p99.9|max|...,\n"
"                         top1, topk, ppl_ratio, ln_ppl_ratio, ...; OP one of <= < >= >). Checked\n"
"                         before the run; each printed with its value and PASS/FAIL, kept in the\n"
"                         JSON and the database row; exit status 3 when any fails. With two arms\n"
"                         the statistics are arm A's, and paired.kld.mean, paired.kld.p99,\n"
"                         paired.kld.p99.9, paired.top1 judge A − B: paired.kld.mean<=0@95 fails\n"
"                         only when arm A is distinguishably worse than arm B (the baseline).\n"
"                         With --sweep/--floor every arm but the floor is judged, paired gates\n"
"                         on arm − baseline (the floor, else the first value); exit 3 when any\n"
"                         arm fails\n"
"  --checkpoint FILE      write the run's exact state (every position scored so far) to FILE,\n"
"                         atomically, at the first window boundary after every --checkpoint-every\n"
"                         chunks and when the run ends or is stopped: a run killed at any moment\n"
"                         (OOM killer, preemption, power) loses at most that much\n"
"  --checkpoint-every N   chunks between checkpoints (default 64)\n"
"  --resume FILE          continue from the checkpoint FILE (and keep checkpointing to it) with\n"
"                         the same arguments: the report, JSON and database row equal an\n"
"                         uninterrupted run's; a checkpoint of other arguments, models or corpus\n"
"                         is refused, naming what differs\n"
"  -h, --help             this text\n\n"
"sweeps (the reference forwarded once into a saved teacher, then one candidate per value)\n"
"  --sweep NAME=V1,V2,... one candidate per lever value, e.g. kv=f16,q8_0,q5_1,q4_0 (values\n"
"                         holding commas, such as per-layer maps, are separated by ';');\n"
"                         NAME=...×NAME=... (or *) runs the grid, e.g. kv_k=q8_0,q4_0×kv_v=q8_0,q4_0;\n"
"                         prints value, KLD mean ± error, median, p99, top-1 and the cache's bytes\n"
"                         per token; every arm is recorded (mode sweep). Windows: --chunking\n"
"                         stream (default here) or llamacpp\n"
"  --floor                add the noise floor (the reference with noise=bf16) and show every arm's\n"
"                         KLD beside it: the paired per-position difference KLD − floor ± error\n"
"  --teacher DIR          keep the saved teacher in DIR (reused when it holds a complete dump)\n"
"  --teacher-top-k K|all  ids per teacher record (default all: the reference's hidden states,\n"
"                         dump --hidden, recomputed into exact full-vocabulary KLDs)\n\n"
"scale-out (see docs/scale-out.md: Slurm, Kubernetes, GNU parallel)\n"
"  --shard K/N            score only shard K of N: the windows i with i mod N = K\n"
"  --shard-mode M         mod (default) or range (the K-th of N contiguous runs of windows)\n"
"  --partial FILE         write the run's per-position records, configuration and the hash of\n"
"                         its defining inputs for kldeval merge (checksummed binary)\n\n"
"Statistics (double precision): KLD(ref‖arm) per position in nats, mean ± standard error\n"
"(sqrt(var/(N−1)), var the population variance), percentiles by linear interpolation at\n"
"f·(N−1) of the sorted values (median = mean of the middle two for even N), mean of per-document\n"
"means; reverse KLD and Jensen–Shannon divergence; top-1 agreement ± sqrt(f(1−f)/(N−1)); top-k\n"
"overlap; PPL of each arm, ln(PPL_arm/PPL_ref) ± the standard error of per-token NLL differences;\n"
"Δp = p_arm(next) − p_ref(next); KLD by reference confidence and by context position.\n"
"Ctrl-C stops after the current chunk and reports the positions scored so far, marked partial.\n",
            KLD_TOPK_MAX);
}

/* Scale-out flags (--shard K/N, --shard-mode, --partial OUT), kept in one
 * block: 1 = consumed, 0 = error (printed), -1 = not one of them. */
static int parse_shard_flag(int argc, char **argv, int *i, kld_kl_config *c, kld_kl_outputs *o) {
    const char *a = argv[*i], *v;
    if (strcmp(a, "--shard") && strcmp(a, "--shard-mode") && strcmp(a, "--partial")) return -1;
    if (!(v = kld_arg_value(argc, argv, i))) return 0;
    if (!strcmp(a, "--partial")) o->partial_path = v;
    else if (!strcmp(a, "--shard")) {
        kld_shard_mode m = c->shard.mode;
        if (!kld_shard_parse(v, &c->shard)) {
            fprintf(stderr, "kldeval kl: --shard expects K/N with 0 <= K < N <= 1000000, got '%s'\n", v);
            return 0;
        }
        c->shard.mode = m;
    } else if (!strcmp(v, "mod") || !strcmp(v, "range")) {
        c->shard.mode = !strcmp(v, "mod") ? KLD_SHARD_MOD : KLD_SHARD_RANGE;
    } else {
        fprintf(stderr, "kldeval kl: --shard-mode expects mod or range, got '%s'\n", v);
        return 0;
    }
    return 1;
}

static void progress(const kld_kl_progress *p, void *user) {
    (void)user;
    kld_progress pr = {p->docs_done, p->docs_total, p->positions_done, p->positions_total,
                       p->elapsed_s, p->kld_mean};
    kld_progress_print(stderr, &pr);
}

static bool check_sweep(kld_kl_config *c, const kld_kl_outputs *o, const kld_kl_sweep_opts *so);

/* The flags that name the two arms, as given (mapped to specs at the end). */
typedef struct arm_flags {
    const char *arm2; /* a second --arm: two arms, paired */
    const char *ref, *arm, *ref_logits, *arm_logits, *lcpp_base, *ref_levers, *arm_levers;
    const char *arm_endpoint, *ref_endpoint, *endpoint_model, *api_key;
    int32_t top_logprobs;
    const char *teacher_head, *arm_head;
    bool decode;
    int64_t prompt_len;
} arm_flags;

/* The flags → the two arm specs. Which kinds pair up, and what applies to
 * which kind, is the library's to check (kld_kl_check). */
static bool to_specs(const arm_flags *f, kld_kl_config *c) {
    int refs = !!f->ref + !!f->ref_logits + !!f->lcpp_base + !!f->ref_endpoint,
        arms = !!f->arm + !!f->arm_logits + !!f->arm_endpoint;
    if (refs > 1 || arms > 1) {
        fprintf(stderr, "kldeval kl: give one reference (--ref, --reference-logits, --llamacpp-base or "
                        "--ref-endpoint) and one arm (--arm, --arm-logits or --arm-endpoint) (see --help)\n");
        return false;
    }
    c->ref = (kld_arm_spec){.kind = f->ref_logits ? KLD_ARM_TEACHER
                                    : f->lcpp_base ? KLD_ARM_LLAMACPP_BASE
                                    : f->ref_endpoint ? KLD_ARM_ENDPOINT
                                    : f->ref       ? KLD_ARM_MODEL
                                                   : KLD_ARM_NONE,
                            .path = f->ref_logits ? f->ref_logits : f->lcpp_base ? f->lcpp_base
                                    : f->ref_endpoint ? f->ref_endpoint : f->ref,
                            .levers = f->ref_levers, .head = f->teacher_head};
    if (f->ref_endpoint) { /* the endpoint's settings go to the side that is one */
        c->ref.endpoint_model = f->endpoint_model;
        c->ref.top_logprobs = f->top_logprobs;
        c->ref.api_key = f->api_key;
    }
    /* a model reference without a second model: a self-flag session of it */
    c->arm = (kld_arm_spec){.kind = f->arm_logits ? KLD_ARM_CANDIDATE
                                    : f->arm_endpoint ? KLD_ARM_ENDPOINT
                                    : f->arm      ? KLD_ARM_MODEL
                                    : f->ref      ? KLD_ARM_SELF
                                                  : KLD_ARM_NONE,
                            .path = f->arm_logits ? f->arm_logits : f->arm_endpoint ? f->arm_endpoint : f->arm,
                            .levers = f->arm_levers, .decode = f->decode,
                            .prompt_len = f->prompt_len, .head = f->arm_head};
    if (f->arm_endpoint || !f->ref_endpoint) {
        c->arm.endpoint_model = f->endpoint_model;
        c->arm.top_logprobs = f->top_logprobs;
        c->arm.api_key = f->api_key;
    }
    return true;
}

/* Gates on a stratum's statistics name a stratum of the run. */
static bool gates_name_strata(const kld_kl_config *c, const kld_kl_outputs *o, kld_error *err) {
    kld_strata *s = NULL;
    if (kld_strata_parse(c->strata, c->score_only, &s, err)) return false;
    bool ok = kld_gates_check_strata(&o->gates, kld_strata_has, s, err) == KLD_OK;
    kld_strata_free(s);
    return ok;
}

/* kl --arm A --arm B: the second arm's configuration, the first's with its
 * arm spec, and what two arms do not combine with. */
static bool two_arms(const arm_flags *f, const kld_kl_config *c, const kld_kl_outputs *o,
                     const kld_kl_sweep_opts *so, kld_kl_config *c2) {
    if (c->arm.kind != KLD_ARM_MODEL) {
        fprintf(stderr, "kldeval kl: two arms are two --arm models (not --arm-logits)\n");
        return false;
    }
    if (so->spec || so->floor || c->shard.n || o->partial_path || o->pin_path || o->tsv_path || c->checkpoint ||
        c->arm.decode) {
        fprintf(stderr, "kldeval kl: two arms (--arm %s --arm %s) do not combine with --sweep, --floor, "
                        "--shard, --partial, --pin, --per-position, --checkpoint/--resume or --decode\n",
                c->arm.path, f->arm2);
        return false;
    }
    *c2 = *c;
    c2->arm.path = f->arm2;
    return true;
}

static bool parse(int argc, char **argv, kld_kl_config *c, kld_kl_outputs *o, kld_kl_sweep_opts *so,
                  kld_kl_config *c2, bool *two, int *rc) {
    static const char *const valued[] = {
        "--ref", "--arm", "--reference-logits", "--arm-logits", "--llamacpp-base", "--corpus", "--corpus-format", "--ids-file", "--json", "--pin",
        "--per-position", "--label", "--db", "--html", "--chunking", "--max-docs", "--max-tokens",
        "--ctx", "--chunk", "--chunks", "--topk", "--threads", "-m", "--model", "--lever",
        "--ref-lever", "--arm-lever", "--prompt-len", "--sweep", "--teacher", "--teacher-top-k",
        "--checkpoint", "--checkpoint-every", "--resume", "--teacher-head", "--arm-head", "--gate",
        "--bootstrap", "--bootstrap-seed", "--strata", "--score-only", "--arm-endpoint",
        "--endpoint-model", "--top-logprobs", "--api-key", "--ref-endpoint", NULL};
    arm_flags f = {0};
    *rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            *rc = 0;
            return false;
        }
        if (!strcmp(a, "--allow-vocab-mismatch")) { c->allow_vocab_mismatch = true; continue; }
        if (!strcmp(a, "--allow-long-context")) { c->allow_long_context = true; continue; }
        if (!strcmp(a, "--quiet")) { o->quiet = true; continue; }
        if (!strcmp(a, "--no-db")) { o->no_db = true; continue; }
        int sh = parse_shard_flag(argc, argv, &i, c, o);
        if (sh >= 0) { if (!sh) return false; continue; }
        if (!strcmp(a, "--decode")) { f.decode = true; continue; }
        if (!strcmp(a, "--floor")) { so->floor = true; continue; }
        if (!kld_arg_in(a, valued)) {
            fprintf(stderr, "kldeval kl: unknown %s '%s' (see --help)\n",
                    a[0] == '-' ? "flag" : "argument", a);
            return false;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return false;
        if (!strcmp(a, "--ref") || !strcmp(a, "-m") || !strcmp(a, "--model")) f.ref = v;
        else if (!strcmp(a, "--lever") || !strcmp(a, "--arm-lever")) f.arm_levers = v;
        else if (!strcmp(a, "--ref-lever")) f.ref_levers = v;
        else if (!strcmp(a, "--prompt-len")) { if (!kld_arg_int(a, v, 0, 1 << 24, &f.prompt_len)) return false; }
        else if (!strcmp(a, "--arm")) {
            if (f.arm2) {
                fprintf(stderr, "kldeval kl: --arm given three times ('%s'): kl compares at most two arms "
                                "(use kl --sweep or runs compare for more)\n", v);
                return false;
            }
            if (f.arm) f.arm2 = v;
            else f.arm = v;
        }
        else if (!strcmp(a, "--checkpoint")) c->checkpoint = v;
        else if (!strcmp(a, "--strata")) c->strata = v;
        else if (!strcmp(a, "--score-only")) c->score_only = v;
        else if (!strcmp(a, "--teacher-head")) f.teacher_head = v;
        else if (!strcmp(a, "--arm-head")) f.arm_head = v;
        else if (!strcmp(a, "--resume")) { c->checkpoint = v; c->resume = true; }
        else if (!strcmp(a, "--checkpoint-every")) { if (!kld_arg_int(a, v, 1, INT64_MAX, &c->checkpoint_every)) return false; }
        else if (!strcmp(a, "--sweep")) so->spec = v;
        else if (!strcmp(a, "--teacher")) so->teacher_dir = v;
        else if (!strcmp(a, "--teacher-top-k")) {
            if (!strcmp(v, "all")) so->teacher_top_k = 0;
            else if (!kld_arg_int(a, v, 1, KLD_DUMP_MAX_TOPK, &n)) return false;
            else so->teacher_top_k = (int32_t)n;
        }
        else if (!strcmp(a, "--reference-logits")) f.ref_logits = v;
        else if (!strcmp(a, "--arm-logits")) f.arm_logits = v;
        else if (!strcmp(a, "--arm-endpoint")) f.arm_endpoint = v;
        else if (!strcmp(a, "--ref-endpoint")) f.ref_endpoint = v;
        else if (!strcmp(a, "--endpoint-model")) f.endpoint_model = v;
        else if (!strcmp(a, "--api-key")) f.api_key = v;
        else if (!strcmp(a, "--top-logprobs")) {
            if (!kld_arg_int(a, v, 1, INT32_MAX, &n)) return false;
            f.top_logprobs = (int32_t)n;
        }
        else if (!strcmp(a, "--llamacpp-base")) f.lcpp_base = v;
        else if (!strcmp(a, "--corpus")) c->corpus_path = v;
        else if (!strcmp(a, "--json")) o->json_path = v;
        else if (!strcmp(a, "--gate")) {
            kld_error e = {0};
            kld_gates_free(&o->gates);
            kld_gates_free(&o->paired_gates);
            if (kld_gates_parse_with_paired(v, &o->gates, &o->paired_gates, &e) != KLD_OK) {
                fprintf(stderr, "kldeval kl: %s\n", e.msg);
                return false;
            }
        }
        else if (!strcmp(a, "--bootstrap")) {
            if (!kld_arg_int(a, v, 0, 100000, &n)) return false;
            o->bootstrap = (int)n;
        }
        else if (!strcmp(a, "--bootstrap-seed")) { if (!kld_arg_u64(a, v, &o->bootstrap_seed)) return false; }
        else if (!strcmp(a, "--pin")) o->pin_path = v;
        else if (!strcmp(a, "--per-position")) o->tsv_path = v;
        else if (!strcmp(a, "--html")) o->html_path = v;
        else if (!strcmp(a, "--db")) o->db_path = v;
        else if (!strcmp(a, "--label")) o->label = v;
        else if (!strcmp(a, "--chunk")) { if (!kld_arg_int(a, v, 1, 1 << 16, &c->chunk)) return false; }
        else if (!strcmp(a, "--topk")) { if (!kld_arg_int(a, v, 1, KLD_TOPK_MAX, &n)) return false; c->topk = (int)n; }
        else if (!strcmp(a, "--threads")) { if (!kld_arg_int(a, v, 1, 1024, &n)) return false; c->n_threads = (int)n; }
        else if (!kld_arg_kl_window(a, v, c)) return false; /* corpus and windows (args.c) */
    }
    if (!to_specs(&f, c)) return false;
    *two = f.arm2 != NULL;
    if (*two && !two_arms(&f, c, o, so, c2)) return false;
    if (o->paired_gates.n && !*two && !so->spec && !so->floor) {
        fprintf(stderr, "kldeval kl: --gate %s: paired gates judge two arms: give --arm A --arm B (or compare "
                        "recorded runs with kldeval runs compare A B --gate)\n", o->paired_gates.g[0].text);
        return false;
    }
    if (o->paired_gates.n && o->bootstrap == 0) {
        fprintf(stderr, "kldeval kl: --gate %s needs the paired bootstrap: not with --bootstrap 0\n",
                o->paired_gates.g[0].text);
        return false;
    }
    if ((so->spec || so->floor) && !check_sweep(c, o, so)) return false;
    if (o->db_path && o->no_db) {
        fprintf(stderr, "kldeval kl: give --db or --no-db, not both\n");
        return false;
    }
    if (c->shard.n && !o->partial_path) {
        /* a shard's statistics cover a fraction of the corpus: only a merge of
         * every shard's partial gives the run's figures */
        fprintf(stderr, "kldeval kl: --shard %u/%u scores only part of the corpus; give --partial "
                        "FILE and merge the shards' partials (kldeval merge)\n", c->shard.k, c->shard.n);
        return false;
    }
    kld_error err = {0};
    /* every rule of the run, then every output proven writable, before any model loads */
    const char *what[5] = {"--json", "--pin", "--per-position", "--html", "--partial"};
    const char *paths[5] = {o->json_path, o->pin_path, o->tsv_path, o->html_path, o->partial_path};
    if ((!so->spec && !so->floor && kld_kl_check(c, &err)) || (*two && kld_kl_check(c2, &err)) ||
        kld_kl_check_outputs(c, what, paths, 5, &err) || (*two && kld_kl_check_outputs(c2, what, paths, 5, &err)) ||
        !gates_name_strata(c, o, &err)) {
        fprintf(stderr, "kldeval kl: %s\n", err.msg);
        return false;
    }
    return kld_record_check("kl", o);
}

/* --sweep / --floor: a model reference, stream or llamacpp windows, and no
 * single-run outputs. */
static bool check_sweep(kld_kl_config *c, const kld_kl_outputs *o, const kld_kl_sweep_opts *so) {
    const char *flag = so->spec ? "--sweep" : "--floor";
    if (c->ref.kind != KLD_ARM_MODEL || (c->arm.kind != KLD_ARM_SELF && c->arm.kind != KLD_ARM_MODEL)) {
        fprintf(stderr, "kldeval kl: %s needs a reference model (-m/--ref): it makes its own saved "
                        "teacher\n", flag);
        return false;
    }
    if (c->shard.n || o->partial_path || o->pin_path || o->tsv_path || c->arm.decode) {
        fprintf(stderr, "kldeval kl: %s does not combine with --shard, --partial, --pin, "
                        "--per-position or --decode\n", flag);
        return false;
    }
    if (c->chunking == KLD_CHUNKING_DEFAULT) c->chunking = KLD_CHUNKING_STREAM;
    else if (c->chunking == KLD_CHUNKING_DOC) {
        fprintf(stderr, "kldeval kl: %s uses a saved teacher, whose windows have a fixed length: "
                        "--chunking stream or llamacpp\n", flag);
        return false;
    }
    return true;
}

/* Runs the evaluation and writes every requested output; used by `kl` and `demo`. */
int kld_kl_main(kld_kl_config *c, const kld_kl_outputs *o) {
    c->stop = &stop_requested;
    if (!o->quiet && kld_progress_enabled(stderr)) c->progress = progress;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    kld_kl_result res;
    kld_error err = {0};
    kld_status st = kld_kl_run(c, &res, &err);
    sigaction(SIGINT, &old, NULL);
    if (c->progress) kld_progress_end(stderr);
    if (st) {
        fprintf(stderr, "kldeval kl: %s\n", err.msg);
        return 1;
    }
    const char *ref_label = res.ref_label, *arm_label = res.arm_label,
               *corpus_label = res.corpus_label;
    if (o->partial_path) {
        kld_partial_labels lb = {ref_label, arm_label, corpus_label, o->label};
        if (kld_kl_write_partial(o->partial_path, &res, c, &lb, &err) != KLD_OK) {
            fprintf(stderr, "kldeval kl: %s\n", err.msg);
            kld_kl_result_free(&res);
            return res.partial ? 130 : 1;
        }
        if (kld_stats_count(res.stats) == 0) { /* more shards than windows */
            printf("shard %u/%u: no windows; wrote %s\n", c->shard.k, c->shard.n, o->partial_path);
            kld_kl_result_free(&res);
            return 0;
        }
    }
    kld_summary sum;
    kld_status fin = c->score_only && kld_stats_count(res.stats) == 0
                         ? kld_fail(&err, KLD_ERR_ARG, "--score-only %s: no position of the run lies in "
                                    "this stratum", c->score_only)
                         : kld_stats_finalize(res.stats, &sum, &err);
    if (fin != KLD_OK) {
        fprintf(stderr, "kldeval kl: %s\n", err.msg);
        kld_kl_result_free(&res);
        return 1;
    }
    kld_report_run run = {ref_label, arm_label, corpus_label,
                          o->label, res.config, res.elapsed_s, res.ref_seconds, res.arm_seconds,
                          res.ref_tokens, res.arm_tokens, res.partial};
    int rc = 0;
    if (kld_report_text(stdout, &sum, &run, &err) != KLD_OK) rc = 1;
    printf("%-30s: %s\n", "vocabulary", res.vocab_note);
    if (!rc && c->ref.kind == KLD_ARM_LLAMACPP_BASE) {
        /* the figures llama-perplexity --kl-divergence prints, in its layout */
        printf("\n====== as llama-perplexity --kl-divergence prints it ======\n");
        if (kld_report_llamacpp(stdout, &sum, &err) != KLD_OK) rc = 1;
    }
    if (sum.n_truncated && sum.mass_mean < KLD_MASS_COMPARABLE)
        fprintf(stderr, "kldeval kl: warning: the %s captures %.4f of the reference's mass on "
                        "average (< %.2f): this KLD is not comparable with full-vocabulary KLDs%s\n",
                c->arm.kind == KLD_ARM_ENDPOINT ? "arm's top K (the endpoint's)" : "reference's top-k",
                sum.mass_mean, KLD_MASS_COMPARABLE,
                c->arm.kind == KLD_ARM_ENDPOINT || c->ref.kind == KLD_ARM_ENDPOINT ? " (raise --top-logprobs)" : "");
    if (res.ctx_note[0]) {
        printf("%-30s: %s\n", "WARNING", res.ctx_note);
        fprintf(stderr, "kldeval kl: warning: %s\n", res.ctx_note);
    }
    json_t *report = kld_report_json(&sum, &run);
    /* the intervals: from the records the statistics came from */
    const int boot = o->bootstrap < 0 ? KLD_BOOTSTRAP_DEFAULT : o->bootstrap;
    kld_bootstrap b;
    kld_record_source src;
    kld_stats_source(res.stats, &src);
    if (!rc && report && kld_bootstrap_report(report, &src, boot, o->bootstrap_seed, &b, &err) != KLD_OK) rc = 1;
    else if (!rc && b.replicates) kld_report_bootstrap_text(stdout, &b, &sum);
    else if (!rc && boot > 0) printf("%-30s: none (one document: nothing to resample)\n", "95% intervals");
    if (!rc && report && kld_strata_report(report, &src, boot, o->bootstrap_seed, &err) != KLD_OK) rc = 1;
    if (!rc) kld_strata_report_text(stdout, report);
    /* gates: judged on the report; a stopped run's figures are not the run's */
    bool gates_pass = true;
    if (!rc && kld_gates_judge(&o->gates, report, res.partial, stdout, &gates_pass))
        rc = 1, kld_fail(&err, KLD_ERR_NOMEM, "out of memory");
    if (!rc && o->json_path && kld_report_json_dump(o->json_path, report, &err) != KLD_OK) rc = 1;
    if (!rc && o->pin_path && kld_report_pin_append(o->pin_path, &sum, &run, &err) != KLD_OK) rc = 1;
    if (!rc && o->tsv_path && kld_report_tsv_write(o->tsv_path, res.stats, &(kld_tsv_names){res.strata, res.config}, &err) != KLD_OK) rc = 1;
    if (rc) fprintf(stderr, "kldeval kl: %s\n", err.msg);
    /* the run database keeps every run, so that later comparisons can be paired */
    double rate = res.elapsed_s > 0 ? (double)res.arm_tokens / res.elapsed_s : NAN;
    if (!kld_record_run("kl", o, res.mode, report, &sum, res.stats, res.partial, res.elapsed_s, rate) &&
        !rc)
        rc = 1;
    json_decref(report);
    kld_kl_result_free(&res);
    return rc ? rc : res.partial ? 130 : gates_pass ? 0 : KLD_EXIT_GATE_FAILED;
}

static int run_kl(int argc, char **argv, kld_kl_outputs *o) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    kld_kl_sweep_opts so = {0};
    kld_kl_config c2;
    bool two = false;
    int rc;
    if (!parse(argc, argv, &c, o, &so, &c2, &two, &rc)) return rc;
    if ((so.teacher_dir || so.teacher_top_k) && !so.spec && !so.floor) {
        fprintf(stderr, "kldeval kl: --teacher and --teacher-top-k apply to --sweep and --floor\n");
        return 2;
    }
    kld_kernels_init();
    if (two) return kld_kl_pair_main(&c, &c2, o, &o->paired_gates);
    if (so.spec || so.floor) {
        so.json_path = o->json_path;
        return kld_kl_sweep_main(&c, o, &so);
    }
    return kld_kl_main(&c, o);
}

int kld_cmd_kl(int argc, char **argv) {
    kld_kl_outputs o = {.bootstrap = -1};
    int rc = run_kl(argc, argv, &o);
    kld_gates_free(&o.gates);
    kld_gates_free(&o.paired_gates);
    return rc;
}
