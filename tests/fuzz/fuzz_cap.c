/* fuzz_cap.c — libFuzzer harness for the capability suite's parsers of
 * untrusted text: the first byte picks the chat-template renderer (the
 * input is the template), the BFCL call/literal parser (the input is a
 * model's answer), or IFEval's 25 verifiers strict and loose plus the
 * text measures (the input is a response). */
#include "cap/cap.h"
#include "chat/chat.h"
#include "fuzz_common.h"

static const char *const IFEVAL_ITEM =
    "{\"key\": 1, \"prompt\": \"p\", \"instruction_id_list\": [\"punctuation:no_comma\", \"detectable_format:title\","
    "\"detectable_format:number_highlighted_sections\", \"length_constraints:number_words\","
    "\"length_constraints:number_sentences\", \"detectable_content:number_placeholders\","
    "\"detectable_format:number_bullet_lists\", \"detectable_format:constrained_response\","
    "\"detectable_format:multiple_sections\", \"length_constraints:number_paragraphs\","
    "\"length_constraints:nth_paragraph_first_word\", \"detectable_content:postscript\", \"keywords:existence\","
    "\"keywords:forbidden_words\", \"keywords:frequency\", \"keywords:letter_frequency\","
    "\"language:response_language\", \"change_case:english_capital\", \"change_case:english_lowercase\","
    "\"change_case:capital_word_frequency\", \"combination:repeat_prompt\", \"combination:two_responses\","
    "\"startend:end_checker\", \"startend:quotation\", \"detectable_format:json_format\"],"
    "\"kwargs\": [{}, {}, {\"num_highlights\": 2}, {\"relation\": \"at least\", \"num_words\": 5},"
    "{\"relation\": \"less than\", \"num_sentences\": 3}, {\"num_placeholders\": 1}, {\"num_bullets\": 2}, {},"
    "{\"section_spliter\": \"Section\", \"num_sections\": 2}, {\"num_paragraphs\": 2},"
    "{\"num_paragraphs\": 2, \"nth_paragraph\": 2, \"first_word\": \"so\"}, {\"postscript_marker\": \"P.S.\"},"
    "{\"keywords\": [\"a\", \"b(\"]}, {\"forbidden_words\": [\"x\"]}, {\"keyword\": \"y\", \"frequency\": 2, \"relation\": \"at least\"},"
    "{\"letter\": \"#\", \"let_frequency\": 2, \"let_relation\": \"less than\"}, {\"language\": \"de\"}, {}, {},"
    "{\"capital_frequency\": 2, \"capital_relation\": \"at least\"}, {\"prompt_to_repeat\": \"Say\"}, {},"
    "{\"end_phrase\": \"Bye.\"}, {}, {}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    kld_error err = {0};
    switch (data[0] % 3) {
    case 0: {
        json_t *m = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "user", "content", "hi", "role", "assistant",
                              "content", "yo");
        kld_chat_opts o = {.messages = m, .add_generation_prompt = true, .bos_token = "<s>", .eos_token = "</s>"};
        char *out = NULL;
        kld_status st = kld_chat_render(text, &o, &out, &err);
        fuzz_check_failure(st, &err);
        if (st == KLD_OK) fuzz_sink ^= (uint8_t)out[0];
        free(out);
        json_decref(m);
        break;
    }
    case 1: {
        json_t *c = kld_bfcl_parse_calls(text);
        fuzz_sink ^= (uint8_t)json_array_size(c);
        json_decref(c);
        json_t *v = kld_bfcl_parse_value(text);
        json_decref(v);
        break;
    }
    default: {
        json_error_t je;
        json_t *item = json_loads(IFEVAL_ITEM, 0, &je);
        if (!item) abort();
        bool f[64];
        for (int loose = 0; loose < 2; loose++) {
            kld_status st = kld_ifeval_check(item, text, loose, f, 64, &err);
            if (st != KLD_OK) abort(); /* every id is known and every kwarg well-formed */
        }
        fuzz_sink ^= (uint8_t)(kld_ifeval_count_sentences(text) + kld_ifeval_count_upper_words(text) +
                               kld_ifeval_count_words(text));
        char num[64];
        fuzz_sink ^= (uint8_t)kld_gsm8k_extract(text, num, sizeof num);
        json_decref(item);
        break;
    }
    }
    free(text);
    return 0;
}
