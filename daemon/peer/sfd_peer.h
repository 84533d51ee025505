/*
 * The seam between sfd and its peer layer: attaching a node to the daemon
 * when the config has a [peer] section, routing closed windows' summaries
 * into it, storing the reports the root pushes, and the PEERS view.
 */
#ifndef SFD_PEER_GLUE_H
#define SFD_PEER_GLUE_H

struct sfd;

/* Reads [peer] (or [cluster]) from the config file. Without node_id and
 * peers there, sfd stays single-node and this returns 0. */
int sfd_peer_attach(struct sfd *d, const char *config_path);
void sfd_peer_detach(struct sfd *d);
/* The PEERS answer as JSON text (malloc'd), or -ENOENT in single-node mode. */
int sfd_peer_status_text(struct sfd *d, char **ret_text);
/* This node's cluster role and term, or -ENOENT in single-node mode. */
int sfd_peer_role(struct sfd *d, const char **ret_role, uint64_t *ret_term);

#endif
