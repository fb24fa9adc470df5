/* test_cap_chat.c — the chat-template renderer on the templates of
 * ChatML, Qwen2, Llama-2, Llama-3, Gemma, Phi-3 and Mistral (their
 * tokenizer_config.json strings), each against a rendering derived by hand
 * from the template text; trim_blocks/lstrip_blocks and whitespace
 * control; raise_exception; unsupported constructs are errors naming them. */
#include "chat/chat.h"
#include "testlib.h"

#include <stdlib.h>

static const char *CHATML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char *QWEN2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char *LLAMA3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content "
    "}}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' "
    "}}{% endif %}";
static const char *LLAMA2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false "
    "%}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 "
    "== 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
    "}}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
    "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
    "content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + "
    "' ' + eos_token }}{% endif %}{% endfor %}";
static const char *GEMMA =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
    "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role "
    "= 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + "
    "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt "
    "%}{{'<start_of_turn>model\\n'}}{% endif %}";
static const char *PHI3 =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + "
    "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + "
    "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + "
    "message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";
static const char *MISTRAL =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == "
    "0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% "
    "endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
    "message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ "
    "raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";
/* A multi-line template (Zephyr's layout): trim_blocks and lstrip_blocks. */
static const char *ZEPHYR =
    "{% for message in messages %}\n"
    "    {% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
    "    {% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
    "    {% endif %}\n"
    "    {% if loop.last and add_generation_prompt %}\n"
    "{{ '<|assistant|>' }}\n"
    "    {% endif %}\n"
    "{% endfor %}";

static json_t *msgs(const char *spec) { /* "s:text|u:text|a:text" */
    json_t *a = json_array();
    char *copy = kld_strdup(spec);
    for (char *tok = strtok(copy, "|"); tok; tok = strtok(NULL, "|")) {
        const char *role = tok[0] == 's' ? "system" : tok[0] == 'u' ? "user" : "assistant";
        json_array_append_new(a, json_pack("{s:s, s:s}", "role", role, "content", tok + 2));
    }
    free(copy);
    return a;
}

static void expect(const char *name, const char *tmpl, const char *spec, bool agp, const char *bos,
                   const char *eos, const char *want) {
    json_t *m = msgs(spec);
    kld_chat_opts o = {.messages = m, .add_generation_prompt = agp, .bos_token = bos, .eos_token = eos};
    char *out = NULL;
    kld_error err = {0};
    kld_status st = kld_chat_render(tmpl, &o, &out, &err);
    CHECK(st == KLD_OK && out && !strcmp(out, want), "%s: got %s '%s' (%s), want '%s'", name,
          kld_status_name(st), out ? out : "", err.msg, want);
    free(out);
    json_decref(m);
}

static void expect_error(const char *name, const char *tmpl, const char *spec, kld_status want_st,
                         const char *want_msg) {
    json_t *m = msgs(spec);
    kld_chat_opts o = {.messages = m, .bos_token = "<s>", .eos_token = "</s>"};
    char *out = NULL;
    kld_error err = {0};
    kld_status st = kld_chat_render(tmpl, &o, &out, &err);
    CHECK(st == want_st && strstr(err.msg, want_msg), "%s: %s '%s', want %s naming '%s'", name,
          kld_status_name(st), err.msg, kld_status_name(want_st), want_msg);
    free(out);
    json_decref(m);
}

int main(void) {
    const char *conv = "s:You are kind.|u:Hello|a:Hi there|u:How are you?";
    const char *noss = "u:Hello|a:Hi there|u:How are you?";
    expect("chatml", CHATML, conv, true, NULL, NULL,
           "<|im_start|>system\nYou are kind.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
           "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
           "<|im_start|>assistant\n");
    expect("chatml no generation prompt", CHATML, "u:Hi", false, NULL, NULL, "<|im_start|>user\nHi<|im_end|>\n");
    expect("qwen2 default system", QWEN2, "u:Hi", true, NULL, NULL,
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
           "<|im_start|>assistant\n");
    expect("llama3", LLAMA3, "s:You are kind.|u:  Hello \n|a:Hi there", true, "<|begin_of_text|>", "<|eot_id|>",
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are kind.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant"
           "<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    expect("llama2 with system", LLAMA2, conv, false, "<s>", "</s>",
           "<s>[INST] <<SYS>>\nYou are kind.\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] How are you? [/INST]");
    expect("llama2 without system", LLAMA2, "u:Hello", false, "<s>", "</s>", "<s>[INST] Hello [/INST]");
    expect("gemma", GEMMA, noss, true, "<bos>", "<eos>",
           "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
           "<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n");
    expect("phi3", PHI3, conv, false, "<s>", "<|endoftext|>",
           "<|system|>\nYou are kind.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
           "<|user|>\nHow are you?<|end|>\n<|endoftext|>");
    expect("phi3 generation prompt", PHI3, "u:Hi", true, "<s>", "<|endoftext|>", "<|user|>\nHi<|end|>\n<|assistant|>\n");
    expect("mistral", MISTRAL, noss, false, "<s>", "</s>",
           "<s>[INST] Hello [/INST]Hi there</s>[INST] How are you? [/INST]");
    expect("zephyr layout", ZEPHYR, "u:Hello|a:Hi", true, "<s>", "</s>",
           "<|user|>\nHello</s>\n<|assistant|>\nHi</s>\n<|assistant|>\n");
    /* whitespace control, expressions, filters, namespace */
    expect("dash", "a  {%- if true -%}  b  {%- endif %}\n c", "u:x", false, NULL, NULL, "ab c");
    expect("expressions", "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 'x' ~ 5 }} {{ 'ab' in 'cabd' }} "
           "{{ [1,2,3][1:] | length }} {{ none is none }} {{ 'A b'.lower() }} {{ x is defined }} "
           "{{ 'y' if false else 'n' }} {{ messages | length }} {{ messages[-1].content }} "
           "{{ [3, 4] | join('-') }} {{ {'a': 1} | tojson }} {{ 'abc'[::-1] }}", "u:x|a:last", false,
           NULL, NULL, "7 3 2 x5 True 2 True a b False n 2 last 3-4 {\"a\": 1} cba");
    expect("namespace", "{% set ns = namespace(found=false) %}{% for m in messages %}{% if m.role == 'a' or "
           "m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% set leaked = 1 %}{% endfor %}"
           "{{ ns.found }} {{ leaked is defined }}", "u:x|a:y", false, NULL, NULL, "True False");
    expect("loop variables", "{% for m in messages %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last "
           "}}{% endfor %}", "u:x|a:y|u:z", false, NULL, NULL, "1/3,2/3,3/3");
    /* the templates' own checks */
    expect_error("gemma system", GEMMA, conv, KLD_ERR_ARG, "System role not supported");
    expect_error("mistral alternation", MISTRAL, "u:a|u:b", KLD_ERR_ARG, "Conversation roles must alternate");
    /* unsupported constructs name themselves */
    expect_error("macro", "{% macro f() %}x{% endmacro %}", "u:x", KLD_ERR_UNSUPPORTED, "unsupported construct 'macro'");
    expect_error("filter", "{{ 'x' | wordwrap }}", "u:x", KLD_ERR_UNSUPPORTED, "filter 'wordwrap'");
    expect_error("loop filter", "{% for m in messages if m %}{% endfor %}", "u:x", KLD_ERR_UNSUPPORTED, "for … if");
    expect_error("include", "{% include 'x' %}", "u:x", KLD_ERR_UNSUPPORTED, "'include'");
    expect_error("unclosed", "{% if true %}x", "u:x", KLD_ERR_FORMAT, "missing '{% endif %}'");
    expect_error("bad tag", "{{ 1 + }}", "u:x", KLD_ERR_FORMAT, "line 1");
    CHECK(kld_chat_has_bos("<|begin_of_text|>hi", "<|begin_of_text|>"), "has bos");
    CHECK(!kld_chat_has_bos("<|im_start|>", "<s>") && !kld_chat_has_bos("x", ""), "no bos");
    return kt_finish();
}
