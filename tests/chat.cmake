# Chat corpora: JSONL "messages" lines rendered with the model's chat template (src/chat/, src/eval/corpus_chat.c).
kld_add_test(NAME test_chat_corpus SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_corpus.c ARGS $<TARGET_FILE:kldeval>)
add_dependencies(test_chat_corpus kldeval)
