/*
 * `sfctl peers [--json]`: members, the root, the term, each member's last
 * heartbeat and the summaries in flight, from the PEERS query of one sfd.
 * Output only; it must not change anything on the daemon.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "peers.h"
#include "sfctl.h"
#include "sfctl_live.h"

static void print_member(json_t *m, long long root)
{
    char addr[300], hb[32];
    snprintf(addr, sizeof addr, "%s:%lld", json_string_value(json_object_get(m, "host")),
             sfctl_json_int(m, "port"));
    json_t *ago = json_object_get(m, "last_heartbeat_ms_ago");
    if (json_is_true(json_object_get(m, "self")))
        snprintf(hb, sizeof hb, "(this node)");
    else if (json_is_integer(ago))
        snprintf(hb, sizeof hb, "%.2f s ago", (double)json_integer_value(ago) / 1000.0);
    else
        snprintf(hb, sizeof hb, "never");
    printf("%c%6lld  %-24s %-5s %-9s %-15s %9lld %6lld\n",
           sfctl_json_int(m, "id") == root ? '*' : ' ', sfctl_json_int(m, "id"), addr,
           json_is_true(json_object_get(m, "live")) ? "yes" : "no",
           json_is_true(json_object_get(m, "connected")) ? "yes" : "no", hb,
           sfctl_json_int(m, "summaries_in_flight"), sfctl_json_int(m, "term"));
}

static int print_view(json_t *o, const char *job)
{
    (void)job;
    json_t *members = json_object_get(o, "members");
    if (!json_is_array(members)) {
        printf("single node: no peers configured\n");
        return SFCTL_EXIT_OK;
    }
    long long root = sfctl_json_int(o, "root");
    printf("node %lld (%s), ", sfctl_json_int(o, "node_id"),
           json_string_value(json_object_get(o, "role")));
    if (root != 0)
        printf("root %lld", root);
    else
        printf("no root (no majority reachable)");
    printf(", term %lld, summaries in flight %lld, windows collecting %lld\n",
           sfctl_json_int(o, "term"), sfctl_json_int(o, "summaries_in_flight"),
           sfctl_json_int(o, "windows_pending"));
    printf(" %6s  %-24s %-5s %-9s %-15s %9s %6s\n", "ID", "ADDRESS", "LIVE", "CONNECTED",
           "LAST_HEARTBEAT", "IN_FLIGHT", "TERM");
    size_t i;
    json_t *m;
    json_array_foreach(members, i, m) print_member(m, root);
    json_t *c = json_object_get(o, "counters");
    printf("rejected: mac %lld, replay %lld, stale term %lld, decode %lld, frame %lld, "
           "owner %lld, capture %lld; merge conflicts %lld\n",
           sfctl_json_int(c, "rejected_mac"), sfctl_json_int(c, "rejected_replay"),
           sfctl_json_int(c, "rejected_stale_term"), sfctl_json_int(c, "rejected_decode"),
           sfctl_json_int(c, "rejected_frame"), sfctl_json_int(c, "rejected_owner"),
           sfctl_json_int(c, "rejected_capture"), sfctl_json_int(c, "merge_conflicts"));
    printf("peer port: %lld unauthenticated; closed: auth timeout %lld, over limits %lld; "
           "refused: term jump %lld, epoch %lld\n",
           sfctl_json_int(o, "unauthenticated"), sfctl_json_int(c, "rejected_auth_timeout"),
           sfctl_json_int(c, "rejected_preauth"), sfctl_json_int(c, "rejected_term_jump"),
           sfctl_json_int(c, "rejected_epoch"));
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_peers_view(int argc, char **argv)
{
    return sfctl_show(argc, argv, "[--json]", false, SFCTL_Q_PEERS, print_view);
}
