/*
 * The node's standing behind the cluster-operations interface: mode, role,
 * term, peers and the capture questions, dispatched through d->cluster, with
 * the standalone answers when no cluster is installed; installing and closing
 * an implementation. Everything asks this file and it calls nothing else in
 * sfd. Submitting a window is cluster_submit.c's. It knows nothing of the
 * peer layer.
 */
#include <errno.h>
#include <jansson.h>

#include "cluster.h"
#include "sfd.h"

static const char *standalone_status(const void *ctx)
{
    (void)ctx;
    return "single";
}

static uint64_t standalone_term(const void *ctx)
{
    (void)ctx;
    return 0;
}

static int standalone_peers(void *ctx, char **ret_text)
{
    (void)ctx;
    json_t *o = json_pack("{s:s, s:s, s:I, s:[]}", "mode", "single", "role", "single", "term",
                          (json_int_t)0, "peers");
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text == NULL)
        return -ENOMEM;
    *ret_text = text;
    return 0;
}

const struct sfd_cluster_ops sfd_cluster_standalone_ops = {
    .submit = NULL, /* computed on this node: cluster_submit.c */
    .status = standalone_status,
    .role = standalone_status,
    .term = standalone_term,
    .peers = standalone_peers,
    .close = NULL,
};

static const struct sfd_cluster_ops *ops_of(const struct sfd *d)
{
    return d->cluster.ops != NULL ? d->cluster.ops : &sfd_cluster_standalone_ops;
}

const char *sfd_cluster_mode(const struct sfd *d)
{
    return ops_of(d)->status(d->cluster.ctx);
}

const char *sfd_cluster_role(const struct sfd *d, uint64_t *ret_term)
{
    *ret_term = ops_of(d)->term(d->cluster.ctx);
    return ops_of(d)->role(d->cluster.ctx);
}

int sfd_cluster_peers(struct sfd *d, char **ret_text)
{
    return ops_of(d)->peers(d->cluster.ctx, ret_text);
}

int sfd_cluster_capture_decider(struct sfd *d)
{
    const struct sfd_cluster_ops *ops = ops_of(d);
    return ops->capture_decider != NULL ? ops->capture_decider(d->cluster.ctx) : 1;
}

uint32_t sfd_cluster_node_id(const struct sfd *d)
{
    const struct sfd_cluster_ops *ops = ops_of(d);
    return ops->node_id != NULL ? ops->node_id(d->cluster.ctx) : 0;
}

uint64_t sfd_cluster_capture_id(struct sfd *d)
{
    const struct sfd_cluster_ops *ops = ops_of(d);
    return ops->capture_id != NULL ? ops->capture_id(d->cluster.ctx) : ++d->next_capture_id;
}

/* Whether captures travel to other nodes (a cluster) or stay here. */
bool sfd_cluster_capture_shared(const struct sfd *d)
{
    return ops_of(d)->capture_request != NULL;
}

int sfd_cluster_capture_request(struct sfd *d, const struct sfd_peer_capture_request *q)
{
    const struct sfd_cluster_ops *ops = ops_of(d);
    return ops->capture_request != NULL ? ops->capture_request(d->cluster.ctx, q) : 0;
}

int sfd_cluster_capture_result(struct sfd *d, const struct sfd_peer_capture_result *r,
                               uint32_t except)
{
    const struct sfd_cluster_ops *ops = ops_of(d);
    return ops->capture_result != NULL ? ops->capture_result(d->cluster.ctx, r, except) : 0;
}

int sfd_cluster_live_rows(struct sfd *d, const struct sfd_peer_live_rows *b)
{
    const struct sfd_cluster_ops *ops = ops_of(d);
    return ops->live_rows != NULL ? ops->live_rows(d->cluster.ctx, b) : -ENOTSUP;
}

/* The root in force, as the peer layer's routing rule has it: the node the
 * members send to and the one that takes their rows. */
bool sfd_cluster_is_root(const struct sfd *d)
{
    const struct sfd_cluster_ops *ops = ops_of(d);
    return ops != &sfd_cluster_standalone_ops && ops->capture_decider != NULL &&
           ops->capture_decider(d->cluster.ctx) == 1;
}

bool sfd_cluster_is_standalone(const struct sfd *d)
{
    return ops_of(d) == &sfd_cluster_standalone_ops;
}

void sfd_cluster_close(struct sfd *d)
{
    const struct sfd_cluster_ops *ops = d->cluster.ops;
    void *ctx = d->cluster.ctx;
    d->cluster = (struct sfd_cluster){NULL, NULL};
    if (ops != NULL && ops->close != NULL)
        ops->close(ctx);
}

void sfd_cluster_set(struct sfd *d, const struct sfd_cluster_ops *ops, void *ctx)
{
    sfd_cluster_close(d);
    d->cluster = (struct sfd_cluster){ops, ctx};
}
