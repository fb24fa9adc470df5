/* strata.h — scoring subsets of a kl run (`--strata`, `--score-only`).
 *
 * A stratum is a set of scored positions, chosen by the token each position
 * predicts (the next token):
 *   user strata  NAME=REGEX: the next token's decoded text matches the PCRE2
 *                regex (UTF, Unicode properties; a token whose bytes are not
 *                valid UTF-8 on their own matches by its valid parts)
 *   special      the next token is a control token (BOS, EOS, <|im_end|>, …)
 *   role:R       on chat corpora, the next token lies in a turn of role R
 *                (system, user, assistant, tool): the message's content and
 *                the control token that closes it (eval/chat_roles.c)
 * Strata overlap freely. Each record carries a bit mask (kld_position.strata,
 * bit s = stratum s in the order user strata, special, the four roles), so
 * the statistics of a stratum are those of its records and shards merge
 * exactly. The names in bit order go into the report's configuration
 * ("strata"), which is all a later reader (merge, the report) needs.
 *
 * --score-only NAME keeps only that stratum's positions: every statistic,
 * paired comparison and saved teacher's scoring then sees those alone. */
#ifndef KLD_EVAL_STRATA_H
#define KLD_EVAL_STRATA_H

#include "common/common.h"
#include "eval/stats.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>

#define KLD_STRATA_MAX 16
#define KLD_STRATA_USER_MAX (KLD_STRATA_MAX - 5) /* special and four roles */

/* Turn roles of chat corpora (0: none). */
enum { KLD_ROLE_NONE, KLD_ROLE_SYSTEM, KLD_ROLE_USER, KLD_ROLE_ASSISTANT, KLD_ROLE_TOOL, KLD_ROLE_N };

typedef struct kld_strata kld_strata;

/* Parses "NAME=REGEX[,NAME=REGEX…]" (spec may be NULL: no user strata; a
 * comma starts a new stratum only before NAME=, so regexes may hold commas)
 * and the --score-only name (NULL: all positions). Errors name the flag, the
 * stratum and, for a regex, PCRE2's message and offset. Loads nothing. */
kld_status kld_strata_parse(const char *spec, const char *score_only, kld_strata **out, kld_error *err);
void kld_strata_free(kld_strata *s);

/* Whether NAME is a stratum of the run (a --strata name, special or a role;
 * s is a kld_strata, void for kld_gates_check_strata). */
bool kld_strata_has(const void *s, const char *name);

/* Whether any stratum was asked for (--strata or --score-only). */
bool kld_strata_requested(const kld_strata *s);
/* The --score-only name names a role stratum. */
bool kld_strata_needs_roles(const kld_strata *s);

/* Decodes every id of tok (n_vocab ids) once: the token texts the TSV
 * prints and, when strata were asked for, each id's stratum mask. roles:
 * the run's windows carry turn roles (a chat corpus), so the role strata
 * exist. tok NULL: no texts; then strata are an error naming who has no
 * tokenizer (model). */
kld_status kld_strata_bind(kld_strata *s, const kld_tokenizer *tok, int32_t n_vocab, bool roles,
                           const char *model, kld_error *err);

/* The record's mask for a next token (-1: none) in a turn of role. */
uint16_t kld_strata_mask(const kld_strata *s, int32_t next, int role);
/* --score-only: the bit a record must carry (0: every record is kept). */
uint16_t kld_strata_only(const kld_strata *s);

/* The decoded text of id (NULL when not bound or out of range). */
const char *kld_strata_token_text(const kld_strata *s, int32_t id, size_t *len);

/* The names in bit order as a JSON array (the report's config "strata"),
 * and "score_only" when set; nothing when no stratum was asked for. */
void kld_strata_config_json(const kld_strata *s, json_t *config);

/* The turn role of each of a rendered conversation's n tokens (chat_roles.c):
 * a token starting inside message m's content, or the control token right
 * after it (the turn's end), has m's role; others KLD_ROLE_NONE. Contents
 * are found in order in the tokens' decoded text; one a template rewrote
 * beyond recognition leaves its tokens without a role. */
void kld_chat_roles(const kld_tokenizer *tok, const int32_t *ids, size_t n, const json_t *messages,
                    uint8_t *roles);

/* The names of the record's strata, comma-separated, from the report's
 * config (for the TSV); "" when none. */
void kld_strata_names_of(const json_t *config, uint16_t mask, char *buf, size_t cap);

#endif
