/* pool.h — the engine's fork-join thread pool (internal): run one function
 * on every thread of the pool and wait for all of them. Work is split
 * statically by thread index, so which thread computes what never changes
 * a result. */
#ifndef KLD_ENGINE_POOL_H
#define KLD_ENGINE_POOL_H

#include "engine/engine.h"

typedef void (*kld_task_fn)(void *ctx, int ith, int nth);

/* Runs fn(ctx, i, n) for i = 0..n-1 (i = 0 on the calling thread) and
 * returns when all have finished. Not reentrant. */
void kld_pool_run(kld_pool *pool, kld_task_fn fn, void *ctx);

/* The share [*begin, *end) of n items that thread ith of nth owns. */
static inline void kld_split(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
    *begin = n * ith / nth;
    *end = n * (ith + 1) / nth;
}

#endif
