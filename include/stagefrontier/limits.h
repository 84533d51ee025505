/*
 * Every hard limit of StageFrontier in one place: stages per step, ranks per
 * job, one stage's duration, the job-id length and the default sockets. The
 * client, sfd, the peer layer, sfctl and the core all take them from here;
 * the public client ABI (client.h) and the wire formats are checked against
 * them at compile time. Internal: not installed.
 */
#ifndef STAGEFRONTIER_LIMITS_H
#define STAGEFRONTIER_LIMITS_H

#include <stdint.h>

/* A compile-time check in C and in C++ (whose keyword is static_assert). */
#ifdef __cplusplus
#define SF_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define SF_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* They keep every per-step sum over ranks inside int64 without checks on the
 * hot merge path: a rank's stages in one step add up to at most
 * SF_MAX_STEP_NS, so a sum over ranks is at most SF_MAX_RANKS *
 * SF_MAX_STEP_NS = 2^62; and a prefix is at most SF_MAX_STAGES *
 * SF_MAX_DURATION_NS = 2^48 (docs/ACCOUNTING.md, "Bounds"). */
#define SF_MAX_STAGES 64
#define SF_MAX_RANKS (1u << 21)               /* 2097152: a job's world size */
#define SF_MAX_DURATION_NS (INT64_C(1) << 42) /* about 73 minutes per stage */
#define SF_MAX_STEP_NS (INT64_C(1) << 41)     /* about 37 minutes: one rank's whole step */
#define SF_MAX_MEMBERS 65536                  /* sfd daemons in one cluster (docs/CLUSTER.md) */
#define SF_MAX_JOB_ID_LEN 128                 /* bytes, without the NUL */
#define SF_MAX_RUN_ID_LEN SF_MAX_JOB_ID_LEN   /* a launch's run id (docs/SFD.md, "Identity") */
#define SF_MAX_RESTART_COUNT (1u << 20)       /* elastic restarts of one run */
#define SF_MAX_SYNC_WAITS (1u << 20)  /* sync points one rank counts in one stage of one step */
#define SF_MAX_INCARNATION (1u << 20) /* runs of one job id one sfd tells apart */
SF_STATIC_ASSERT(SF_MAX_RUN_ID_LEN == SF_MAX_JOB_ID_LEN, "a run id is spelt as a job id");

/* Where sfd listens unless told otherwise (sfd.conf runtime_dir), and where
 * the client and sfctl look. */
#define SF_DEFAULT_RUNTIME_DIR "/run/stagefrontier"
#define SF_INGEST_SOCKET_NAME "ingest.sock"
#define SF_QUERY_SOCKET_NAME "query.sock"
#define SF_DEFAULT_INGEST_SOCKET SF_DEFAULT_RUNTIME_DIR "/" SF_INGEST_SOCKET_NAME
#define SF_DEFAULT_QUERY_SOCKET SF_DEFAULT_RUNTIME_DIR "/" SF_QUERY_SOCKET_NAME

/* The control channel and liveness (docs/SFD.md, "Captures" and "Liveness"):
 * what one capture may ask for and report, and the heartbeat interval. */
#define SF_MAX_CAPTURE_STEPS 100 /* steps of one capture */
#define SF_MAX_CAPTURE_RANKS 16  /* ranks of one capture */
#define SF_MAX_CAPTURE_PATH 1024 /* bytes of a trace path, without the NUL */
#define SF_MAX_CAPTURE_ERROR 256 /* bytes of a capture's failure reason */
#define SF_MAX_HEARTBEAT_MS 3600000
#define SF_MAX_FLUSH_MS 3600000 /* the client's batch flush interval */
/* Bytes of why a capture was asked for; capture ids fit a JSON number
 * exactly (a cluster's ids are drawn at random, docs/CLUSTER.md). */
#define SF_MAX_CAPTURE_REASON 191
#define SF_MAX_CAPTURE_ID ((UINT64_C(1) << 53) - 1)

SF_STATIC_ASSERT((uint64_t)SF_MAX_RANKS *(uint64_t)SF_MAX_STEP_NS <= (UINT64_C(1) << 62),
                 "a per-step sum over ranks fits int64 with room to add");
SF_STATIC_ASSERT(SF_MAX_STEP_NS <= SF_MAX_DURATION_NS, "a stage may take a whole step");
SF_STATIC_ASSERT(SF_MAX_CAPTURE_ERROR <= SF_MAX_CAPTURE_PATH,
                 "a capture outcome's text holds a path or a reason");
SF_STATIC_ASSERT(SF_MAX_MEMBERS <= (1u << 16), "member sets are at most 8 KiB bitmaps");
SF_STATIC_ASSERT((uint64_t)SF_MAX_STAGES *(uint64_t)SF_MAX_DURATION_NS <= (UINT64_C(1) << 48),
                 "a step's prefix is at most 2^48");
SF_STATIC_ASSERT(SF_MAX_STAGES <= 64, "stage masks are 64-bit words");

#endif
