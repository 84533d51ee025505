/*
 * `sfctl peers`: the cluster as one node sees it (daemon/sfctl/peers.c).
 */
#ifndef SFCTL_PEERS_H
#define SFCTL_PEERS_H

int sfctl_cmd_peers_view(int argc, char **argv);

#endif
