# Tokenizer tests (src/tokenizer): unit cases and malformed files, the
# Hugging Face reference ids, llama.cpp's vocabulary vectors, and the model
# corpus oracles.
kld_add_test(NAME test_tokenizer SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer.c)
kld_add_test(NAME test_tok_ref SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tok_ref.c TIMEOUT 300)
kld_add_test(NAME test_tok_vocab SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tok_vocab.c TIMEOUT 300)
kld_add_test(NAME test_tok_models SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tok_models.c TIMEOUT 300)
kld_add_test(NAME test_tok_cli SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tok_cli.c
             ARGS $<TARGET_FILE:kldeval> TIMEOUT 300)
add_dependencies(test_tok_cli kldeval)
