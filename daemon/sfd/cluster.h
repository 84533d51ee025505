/*
 * The cluster-operations interface: every question sfd asks of the layer
 * that decides where a closed window's report is computed (submit), how the
 * node stands (status, role, term) and who its peers are (peers). sfd calls
 * only through struct sfd_cluster; it never knows which implementation runs.
 */
#ifndef SFD_CLUSTER_H
#define SFD_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "stagefrontier/accounting.h"

struct sfd;
struct sfd_job;
struct sfd_peer_capture_request;
struct sfd_peer_capture_result;
struct sfd_peer_live_rows;

struct sfd_cluster_ops {
    /* Takes ownership of summary in every case: hands the summary to the
     * cluster. NULL (standalone): the report is computed on this node. */
    int (*submit)(void *ctx, struct sfd_job *job, sf_summary *summary);
    /* STATUS's "mode": "single" or "cluster". */
    const char *(*status)(const void *ctx);
    /* This node's role ("single", "root", "candidate", "follower") and term. */
    const char *(*role)(const void *ctx);
    uint64_t (*term)(const void *ctx);
    /* The PEERS answer as JSON text (malloc'd into *ret_text). */
    int (*peers)(void *ctx, char **ret_text);
    /* Frees ctx and everything it owns; NULL when ctx owns nothing. */
    void (*close)(void *ctx);
    /* Captures (docs/CLUSTER.md, "Captures"). Who decides them: 1 this
     * node, 0 another (the root), -EAGAIN nobody yet. NULL: this node. */
    int (*capture_decider)(void *ctx);
    /* This node's id in the cluster (0: standalone). */
    uint32_t (*node_id)(const void *ctx);
    /* A capture id unique in the cluster. NULL: the node's own counter. */
    uint64_t (*capture_id)(void *ctx);
    /* A request or a rank's outcome to the other nodes: a member's to the
     * root, the root's to every other member but `except`. NULL: none. */
    int (*capture_request)(void *ctx, const struct sfd_peer_capture_request *q);
    int (*capture_result)(void *ctx, const struct sfd_peer_capture_result *r, uint32_t except);
    /* A member's rows of complete steps to the root for the live verdict:
     * -EALREADY when this node is the root, -EAGAIN without one. NULL: none. */
    int (*live_rows)(void *ctx, const struct sfd_peer_live_rows *b);
};

/* What struct sfd holds. ops NULL (a zeroed sfd, as tests make) is the
 * standalone implementation. The cluster owns ctx until sfd_cluster_close. */
struct sfd_cluster {
    const struct sfd_cluster_ops *ops;
    void *ctx;
};

/* The standalone implementation: reports computed on this node. */
extern const struct sfd_cluster_ops sfd_cluster_standalone_ops;

/* A closed window's summary (cluster_submit.c): to ops->submit, or computed
 * into a report here and published. Takes ownership of summary. */
int sfd_cluster_submit(struct sfd *d, struct sfd_job *job, sf_summary *summary);
/* The node's standing (cluster.c), dispatched through d->cluster. */
const char *sfd_cluster_mode(const struct sfd *d);
const char *sfd_cluster_role(const struct sfd *d, uint64_t *ret_term);
int sfd_cluster_peers(struct sfd *d, char **ret_text);
/* Captures across nodes (capture.c): the dispatch of the ops above. */
int sfd_cluster_capture_decider(struct sfd *d);
uint32_t sfd_cluster_node_id(const struct sfd *d);
uint64_t sfd_cluster_capture_id(struct sfd *d);
bool sfd_cluster_capture_shared(const struct sfd *d);
int sfd_cluster_capture_request(struct sfd *d, const struct sfd_peer_capture_request *q);
int sfd_cluster_capture_result(struct sfd *d, const struct sfd_peer_capture_result *r,
                               uint32_t except);
/* The live verdict's rows to the root (verdict_cluster.c): the dispatch of
 * ops->live_rows, -ENOTSUP without it. */
int sfd_cluster_live_rows(struct sfd *d, const struct sfd_peer_live_rows *b);
/* Whether this node is the cluster's root now (false standalone). */
bool sfd_cluster_is_root(const struct sfd *d);
/* Whether reports are computed here from local rows (baseline pinning). */
bool sfd_cluster_is_standalone(const struct sfd *d);
/* Installs an implementation, closing the one in place. */
void sfd_cluster_set(struct sfd *d, const struct sfd_cluster_ops *ops, void *ctx);
/* Closes the implementation in place; sfd is standalone afterwards. */
void sfd_cluster_close(struct sfd *d);

/* cluster_peer.c: reads [peer] (or [cluster]) from the config file and, when
 * node_id and peers are set there, installs the peer-layer implementation
 * (daemon/peer). Without them sfd stays standalone and this returns 0. */
int sfd_cluster_peer_attach(struct sfd *d, const char *config_path);

#endif
