/*
 * Control interface of the test double of the CUDA runtime (fake_cudart.c):
 * device count, elapsed time and readiness are set by the test; counters say
 * what the channel under test called. Tests reach it through dlsym.
 */
#ifndef SF_TEST_FAKE_CUDART_H
#define SF_TEST_FAKE_CUDART_H

#include <stdint.h>

struct fake_cudart_ctl {
    int device_count;      /* what cudaGetDeviceCount reports */
    int device;            /* what cudaGetDevice reports */
    float elapsed_ms;      /* what cudaEventElapsedTime reports */
    int not_ready_queries; /* queries answered NotReady before Success; -1: never ready */
    int fail_record;       /* cudaEventRecord fails */
    /* Counters, written by the double. */
    uint64_t created, destroyed, records, queries, elapsed_calls, syncs;
};

/* Returns the live control block (its address never changes). */
typedef struct fake_cudart_ctl *(*fake_cudart_ctl_fn)(void);

#endif
