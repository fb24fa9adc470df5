# io module tests: good inputs (every shared model, a sharded fixture built
# at test time, llama2.c vs its converted GGUF) and the bad-input corpus.
kld_add_test(NAME test_io SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_io.c LABELS parsers)
kld_add_test(NAME test_bad_corpus SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_bad_corpus.c
             LABELS parsers)
# Crafted bad files for the newer readers: LoRA GGUF and PEFT, shard
# partials, importance matrices, JSONL/text corpora, chat templates.
kld_add_test(NAME test_bad_readers SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_bad_readers.c
             LABELS parsers)
