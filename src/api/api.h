/* api.h — what the public API's files share (internal). */
#ifndef KLD_API_API_H
#define KLD_API_API_H

#include "kld.h"
#include "tokenizer/tokenizer.h"

/* The model's tokenizer, opened on first use and kept with the model
 * (KLD_ERR_UNSUPPORTED and the reader's message when it has none). */
kld_status kld_api_tokenizer(kld_model *m, const kld_tokenizer **out, kld_error *err);

#endif
