/*
 * CUDA-event forward channel (docs/SPEC.md section 3): side evidence that times the
 * forward region on the device at a deterministic fraction of steps. It uses
 * only a CUDA runtime the process already loaded and never synchronizes; it
 * does not touch the prefix vector, which libsfclient owns.
 */
#ifndef SF_CLIENT_CUDA_EVENTS_H
#define SF_CLIENT_CUDA_EVENTS_H

#include <stdint.h>

/* One finished sample. state 1: ready (gpu_ns valid), 2: missing (the events
 * never became ready within the poll horizon, or recording failed). */
struct sf__event_sample {
    int64_t step;
    uint8_t state;
    int64_t cpu_ns, gpu_ns;
};

#define SF__EVENT_READY 1
#define SF__EVENT_MISSING 2

/* Event pairs in flight at once; a sampled step finding none free is skipped
 * (counted), never blocked on. */
#define SF__CUDA_POOL_PAIRS 16
/* A sample still not ready this many steps after its own step is MISSING. */
#define SF__CUDA_MAX_LAG_STEPS 8

typedef struct sf_cuda_channel sf_cuda_channel;

/* Opens the channel. sample_fraction in [0, 1]. -ENOTSUP when no CUDA runtime
 * is loaded in the process, a symbol is missing, no device is visible, or the
 * fraction is 0: "unavailable", never an error for training. -EINVAL for a
 * fraction outside [0, 1]. -ENOMEM. */
int sf__cuda_channel_open(double sample_fraction, sf_cuda_channel **ret);
void sf__cuda_channel_close(sf_cuda_channel *ch);

/* Whether step is in the deterministic sample (a hash of the step against the
 * fraction); the same on every rank, so samples line up across ranks. */
int sf__cuda_step_sampled(const sf_cuda_channel *ch, int64_t step);

/* Records the start event; a no-op unless step is sampled. */
void sf__cuda_forward_begin(sf_cuda_channel *ch, int64_t step);
/* Records the end event and keeps the step's CPU-wall forward duration. */
void sf__cuda_forward_end(sf_cuda_channel *ch, int64_t step, int64_t cpu_ns);
/* Called at a safe point (step end). Fills ret with one finished sample, the
 * oldest first: returns 1 when filled, 0 when none is due. Never blocks. */
int sf__cuda_poll(sf_cuda_channel *ch, int64_t now_step, struct sf__event_sample *ret);

/* Counters for diagnostics. */
struct sf__cuda_stats {
    uint64_t sampled, ready, missing, skipped_pool_full, record_errors;
};
void sf__cuda_channel_stats(const sf_cuda_channel *ch, struct sf__cuda_stats *ret);

#endif
