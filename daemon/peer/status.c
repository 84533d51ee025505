/*
 * The PEERS view of a node as JSON: members, the root, the term, each
 * member's last heartbeat and summaries in flight, and the counters. Read
 * only; it must not change the node.
 */
#include <errno.h>
#include <stdlib.h>

#include <jansson.h>

#include "node_internal.h"

static const char *role_name(enum sfd_elect_role r)
{
    return r == SFD_ELECT_ROOT ? "root" : r == SFD_ELECT_CANDIDATE ? "candidate" : "follower";
}

static json_t *counters_json(const sfd_peer_counters *c)
{
    return json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
        "s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
        "frames_in", (json_int_t)c->frames_in, "frames_out", (json_int_t)c->frames_out, "bytes_in",
        (json_int_t)c->bytes_in, "bytes_out", (json_int_t)c->bytes_out, "rejected_mac",
        (json_int_t)c->rejected_mac, "rejected_decode", (json_int_t)c->rejected_decode,
        "rejected_replay", (json_int_t)c->rejected_replay, "rejected_stale_term",
        (json_int_t)c->rejected_stale_term, "rejected_member", (json_int_t)c->rejected_member,
        "rejected_frame", (json_int_t)c->rejected_frame, "rejected_conns",
        (json_int_t)c->rejected_conns, "send_dropped", (json_int_t)c->send_dropped,
        "summaries_sent", (json_int_t)c->summaries_sent, "summaries_resent",
        (json_int_t)c->summaries_resent, "summaries_received", (json_int_t)c->summaries_received,
        "merge_duplicates", (json_int_t)c->merge_duplicates, "merge_conflicts",
        (json_int_t)c->merge_conflicts, "merge_mismatches", (json_int_t)c->merge_mismatches,
        "reports_computed", (json_int_t)c->reports_computed, "reports_received",
        (json_int_t)c->reports_received, "reports_adopted", (json_int_t)c->reports_adopted,
        "windows_late", (json_int_t)c->windows_late, "root_changes", (json_int_t)c->root_changes,
        "retained_dropped", (json_int_t)c->retained_dropped);
}

/* The counters of the connection limits, the term and epoch bounds and the
 * replay state file. */
static json_t *guard_counters_json(json_t *o, const sfd_peer_counters *c)
{
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "rejected_auth_timeout",
                        json_integer((json_int_t)c->rejected_auth_timeout));
    json_object_set_new(o, "rejected_preauth", json_integer((json_int_t)c->rejected_preauth));
    json_object_set_new(o, "rejected_term_jump", json_integer((json_int_t)c->rejected_term_jump));
    json_object_set_new(o, "rejected_epoch", json_integer((json_int_t)c->rejected_epoch));
    json_object_set_new(o, "epoch_bumps", json_integer((json_int_t)c->epoch_bumps));
    json_object_set_new(o, "state_writes", json_integer((json_int_t)c->state_writes));
    json_object_set_new(o, "state_errors", json_integer((json_int_t)c->state_errors));
    json_object_set_new(o, "captures_sent", json_integer((json_int_t)c->captures_sent));
    json_object_set_new(o, "captures_received", json_integer((json_int_t)c->captures_received));
    json_object_set_new(o, "rejected_capture", json_integer((json_int_t)c->rejected_capture));
    json_object_set_new(o, "rejected_owner", json_integer((json_int_t)c->rejected_owner));
    json_object_set_new(o, "links_dialled", json_integer((json_int_t)c->links_dialled));
    json_object_set_new(o, "report_acks_deferred",
                        json_integer((json_int_t)c->report_acks_deferred));
    json_object_set_new(o, "report_acks_late", json_integer((json_int_t)c->report_acks_late));
    json_object_set_new(o, "catchups_requested", json_integer((json_int_t)c->catchups_requested));
    json_object_set_new(o, "catchups_served", json_integer((json_int_t)c->catchups_served));
    json_object_set_new(o, "catchup_reports_sent",
                        json_integer((json_int_t)c->catchup_reports_sent));
    json_object_set_new(o, "catchups_done", json_integer((json_int_t)c->catchups_done));
    json_object_set_new(o, "rejected_catchup", json_integer((json_int_t)c->rejected_catchup));
    json_object_set_new(o, "live_rows_sent", json_integer((json_int_t)c->live_rows_sent));
    json_object_set_new(o, "live_rows_received", json_integer((json_int_t)c->live_rows_received));
    json_object_set_new(o, "rejected_live", json_integer((json_int_t)c->rejected_live));
    return o;
}

/* One member, by its index in the config (a lookup by id per member would
 * make the view quadratic in the members). */
static json_t *member_json(sfd_peer_node *node, uint32_t index, uint64_t now)
{
    const sfd_peer_member *m = &node->cfg.members[index];
    uint32_t id = m->id;
    sfd_peer_link *l = sfd_peer_link_find(node, id);
    bool self = id == node->cfg.node_id;
    json_t *hb = json_null();
    if (l != NULL && l->last_heartbeat_ms != 0)
        hb = json_integer((json_int_t)(now - l->last_heartbeat_ms));
    return json_pack("{s:I,s:s,s:i,s:b,s:b,s:b,s:o,s:I,s:I}", "id", (json_int_t)id, "host", m->host,
                     "port", m->port, "self", self, "live",
                     sfd_elect_is_live(&node->elect, now, id), "connected",
                     self || (l && l->out_connected), "last_heartbeat_ms_ago", hb,
                     "summaries_in_flight", (json_int_t)(self ? node->n_retained : l->in_flight),
                     "term", (json_int_t)(self ? node->elect.term : l->term_seen));
}

void sfd_peer_node_role(const sfd_peer_node *node, const char **ret_role, uint64_t *ret_term)
{
    *ret_role = role_name(node->elect.role);
    *ret_term = node->elect.term;
}

int sfd_peer_status_json(sfd_peer_node *node, char **ret_json)
{
    if (node == NULL || ret_json == NULL)
        return -EINVAL;
    uint64_t now = sfd_peer_now(node);
    json_t *members = json_array();
    for (uint32_t i = 0; members && i < node->cfg.n_members; i++)
        json_array_append_new(members, member_json(node, i, now));
    json_t *root = json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:I,s:I,s:I,s:o,s:o}", "node_id",
        (json_int_t)node->cfg.node_id, "root", (json_int_t)sfd_elect_root(&node->elect, now),
        "term", (json_int_t)node->elect.term, "epoch", (json_int_t)node->epoch, "inbound",
        (json_int_t)node->n_inbound, "unauthenticated", (json_int_t)node->n_preauth, "role",
        role_name(node->elect.role), "summaries_in_flight", (json_int_t)node->n_retained,
        "windows_pending", (json_int_t)node->n_pending, "reports_kept", (json_int_t)node->n_reports,
        "members", members, "counters", guard_counters_json(counters_json(&node->c), &node->c));
    if (root == NULL)
        return -ENOMEM;
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (text == NULL)
        return -ENOMEM;
    *ret_json = text;
    return 0;
}
