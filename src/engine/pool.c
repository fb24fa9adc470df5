/* pool.c — fork-join pool on pthreads. Workers spin briefly on a
 * generation counter (a forward pass issues many short jobs) and then
 * sleep on a condition variable, so idle sessions cost no CPU. */
#include "engine/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define SPIN_ITERS 4000 /* pause loops before sleeping (~0.1 ms) */
#define YIELD_EVERY 64  /* let other runnable threads in while spinning (oversubscription) */

struct kld_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    atomic_uint_fast64_t gen;   /* bumped once per job */
    atomic_int pending;         /* workers still running the current job */
    kld_task_fn fn;
    void *ctx;
    atomic_bool quit;
    int n_started;
};

typedef struct worker_arg {
    kld_pool *pool;
    int ith;
} worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *p) {
    worker_arg *wa = p;
    kld_pool *pool = wa->pool;
    const int ith = wa->ith;
    free(wa);
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        for (int i = 0; g == seen && i < SPIN_ITERS; i++) {
            if (i % YIELD_EVERY == YIELD_EVERY - 1) sched_yield();
            else cpu_relax();
            g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&pool->mu);
            while ((g = atomic_load_explicit(&pool->gen, memory_order_acquire)) == seen && !atomic_load(&pool->quit))
                pthread_cond_wait(&pool->cv_start, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (g == seen) return NULL; /* woken without a new job: quitting */
        seen = g;
        pool->fn(pool->ctx, ith, pool->n_threads);
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->cv_done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

kld_pool *kld_pool_create(int n_threads) {
    if (n_threads <= 0) n_threads = kld_default_threads();
    kld_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv_start, NULL);
    pthread_cond_init(&pool->cv_done, NULL);
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->quit, false);
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    if (!pool->threads) {
        kld_pool_free(pool);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        wa->pool = pool;
        wa->ith = i;
        if (pthread_create(&pool->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            break;
        }
        pool->n_started++;
    }
    if (pool->n_started != n_threads - 1) {
        kld_pool_free(pool);
        return NULL;
    }
    return pool;
}

void kld_pool_free(kld_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    atomic_store(&pool->quit, true);
    pthread_cond_broadcast(&pool->cv_start);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 1; i <= pool->n_started; i++) pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->cv_start);
    pthread_cond_destroy(&pool->cv_done);
    pthread_mutex_destroy(&pool->mu);
    free(pool->threads);
    free(pool);
}

int kld_pool_size(const kld_pool *pool) { return pool->n_threads; }

void kld_pool_run(kld_pool *pool, kld_task_fn fn, void *ctx) {
    if (pool->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool->cv_start);
    pthread_mutex_unlock(&pool->mu);
    fn(ctx, 0, pool->n_threads);
    for (int i = 0; i < SPIN_ITERS && atomic_load_explicit(&pool->pending, memory_order_acquire) > 0; i++) {
        if (i % YIELD_EVERY == YIELD_EVERY - 1) sched_yield();
        else cpu_relax();
    }
    if (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0) {
        pthread_mutex_lock(&pool->mu);
        while (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0)
            pthread_cond_wait(&pool->cv_done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}
