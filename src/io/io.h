/* io.h — the io module's header: file → tensors. */
#ifndef KLD_IO_IO_H
#define KLD_IO_IO_H
#include "io/gguf.h"
#include "io/llama2c.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/source.h"
#endif
