/*
 * Our declarations of NCCL's profiler plugin ABI, versions 5 (NCCL 2.28) and
 * 4 (NCCL 2.27), written from NCCL's public plugin documentation. Only what
 * the StageFrontier plugin reads is named; the layouts must match NCCL's
 * byte for byte, so every union member that precedes or sizes one we read is
 * declared. ncclResult_t comes from the installed nccl.h.
 */
#ifndef SF_NCCL_PROFILER_ABI_H
#define SF_NCCL_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nccl.h>

/* nccl.h does not declare the logger that init receives. */
typedef void (*sf_nccl_logger_t)(int level, unsigned long flags, const char *file, int line,
                                 const char *fmt, ...);

/* Event type bits: the descriptor's type and the activation mask. */
enum {
    SF_NCCL_EV_GROUP = 1 << 0,
    SF_NCCL_EV_COLL = 1 << 1,
    SF_NCCL_EV_P2P = 1 << 2,
    SF_NCCL_EV_PROXY_OP = 1 << 3,
    SF_NCCL_EV_PROXY_STEP = 1 << 4,
    SF_NCCL_EV_PROXY_CTRL = 1 << 5,
    SF_NCCL_EV_KERNEL_CH = 1 << 6,
    SF_NCCL_EV_NET_PLUGIN = 1 << 7,
    SF_NCCL_EV_GROUP_API = 1 << 8,      /* v5 */
    SF_NCCL_EV_COLL_API = 1 << 9,       /* v5 */
    SF_NCCL_EV_P2P_API = 1 << 10,       /* v5 */
    SF_NCCL_EV_KERNEL_LAUNCH = 1 << 11, /* v5 */
};

/* State transitions passed to recordEventState (an int-sized enum). Only the
 * kernel-channel stop matters to us: it carries the GPU stop timestamp. */
typedef int sf_nccl_event_state_t;
#define SF_NCCL_STATE_KERNEL_CH_STOP 22

/* ---- version 5 ------------------------------------------------------------ */

struct sf_nccl_coll_v5 {
    uint64_t seq;
    const char *func;
    const void *send_buff;
    void *recv_buff;
    size_t count;
    int root;
    const char *datatype;
    uint8_t n_channels;
    uint8_t n_warps;
    const char *algo;
    const char *proto;
    void *parent_group; /* the Group event: parentObj is the CollApi event */
};

struct sf_nccl_p2p_v5 {
    const char *func;
    void *buff;
    const char *datatype;
    size_t count;
    int peer;
    uint8_t n_channels;
    void *parent_group;
};

struct sf_nccl_proxy_op {
    pid_t pid;
    uint8_t channel;
    int peer;
    int n_steps;
    int chunk_size;
    int is_send;
};

struct sf_nccl_kernel_ch {
    uint8_t channel;
    uint64_t gpu_timer_start; /* GPU globaltimer, ns */
};

typedef struct sf_nccl_descr_v5 {
    uint64_t type;
    void *parent; /* the parent event's handle */
    int rank;
    union {
        struct {
            bool graph_captured;
            int group_depth;
        } group_api;
        struct {
            const char *func;
            size_t count;
            const char *datatype;
            int root;
            void *stream;
            bool graph_captured;
        } coll_api;
        struct {
            const char *func;
            size_t count;
            const char *datatype;
            void *stream;
            bool graph_captured;
        } p2p_api;
        struct {
            void *stream;
        } kernel_launch;
        struct sf_nccl_coll_v5 coll;
        struct sf_nccl_p2p_v5 p2p;
        struct sf_nccl_proxy_op proxy_op;
        struct {
            int step;
        } proxy_step;
        struct sf_nccl_kernel_ch kernel_ch;
        struct {
            int64_t id;
            void *data;
        } net_plugin;
    };
} sf_nccl_descr_v5;

typedef union sf_nccl_state_args {
    struct {
        size_t trans_size;
    } proxy_step;
    struct {
        int appended_proxy_ops;
    } proxy_ctrl;
    struct {
        void *data;
    } net_plugin;
    struct {
        uint64_t gpu_timer;
    } kernel_ch; /* the stop timestamp */
} sf_nccl_state_args;

typedef struct sf_nccl_profiler_v5 {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t comm_id, int *activation_mask,
                         const char *comm_name, int n_nodes, int n_ranks, int rank,
                         sf_nccl_logger_t log);
    ncclResult_t (*start_event)(void *context, void **handle, sf_nccl_descr_v5 *descr);
    ncclResult_t (*stop_event)(void *handle);
    ncclResult_t (*record_event_state)(void *handle, sf_nccl_event_state_t state,
                                       sf_nccl_state_args *args);
    ncclResult_t (*finalize)(void *context);
} sf_nccl_profiler_v5;

/* ---- version 4 ------------------------------------------------------------ */

struct sf_nccl_coll_v4 {
    uint64_t seq;
    const char *func;
    const void *send_buff;
    void *recv_buff;
    size_t count;
    int root;
    const char *datatype;
    uint8_t n_channels;
    uint8_t n_warps;
    const char *algo;
    const char *proto;
};

struct sf_nccl_p2p_v4 {
    const char *func;
    void *buff;
    const char *datatype;
    size_t count;
    int peer;
    uint8_t n_channels;
};

typedef struct sf_nccl_descr_v4 {
    uint8_t type; /* v4 carries the type in one byte */
    void *parent; /* for a Coll: the Group event */
    int rank;
    union {
        struct sf_nccl_coll_v4 coll;
        struct sf_nccl_p2p_v4 p2p;
        struct sf_nccl_proxy_op proxy_op;
        struct {
            int step;
        } proxy_step;
        struct sf_nccl_kernel_ch kernel_ch;
        struct {
            int64_t id;
            void *data;
        } net_plugin;
    };
} sf_nccl_descr_v4;

typedef struct sf_nccl_profiler_v4 {
    const char *name;
    /* v4 passes the communicator name before its hash. */
    ncclResult_t (*init)(void **context, int *activation_mask, const char *comm_name,
                         uint64_t comm_hash, int n_nodes, int n_ranks, int rank,
                         sf_nccl_logger_t log);
    ncclResult_t (*start_event)(void *context, void **handle, sf_nccl_descr_v4 *descr);
    ncclResult_t (*stop_event)(void *handle);
    ncclResult_t (*record_event_state)(void *handle, sf_nccl_event_state_t state,
                                       sf_nccl_state_args *args);
    ncclResult_t (*finalize)(void *context);
} sf_nccl_profiler_v4;

#endif
