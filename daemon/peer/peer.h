/*
 * sfd peer layer: the private interface between its files, grouped by file.
 * Everything here is sfd-internal (sfd_peer_... names). The peer layer links
 * sfd daemons of one cluster: framing, authentication, replay protection,
 * election, the summary codec, the fan-in tree and the root's window merge.
 */
#ifndef SFD_PEER_H
#define SFD_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <stagefrontier/accounting.h>
#include <stagefrontier/limits.h>

#include "peer.pb-c.h"

/* ---- limits ------------------------------------------------------------ */

#define SFD_PEER_FRAME_MAX (16u << 20) /* one envelope, length prefix excluded */
#define SFD_PEER_MAC_LEN 32
#define SFD_PEER_KEY_LEN 32
#define SFD_PEER_MAX_MEMBERS SF_MAX_MEMBERS /* limits.h */
#define SFD_PEER_ID_MAX 0x7fffffffu
#define SFD_PEER_PENDING_MAX 32 /* window keys in a root heartbeat */
/* Frame cap of a connection that has not yet proved itself with a valid MAC:
 * its first frame is a small heartbeat. */
#define SFD_PEER_PREAUTH_FRAME_MAX 4096u
/* A frame body: sender id (u32 big-endian), MAC, then the packed envelope. */
#define SFD_PEER_BODY_HEADER (4 + SFD_PEER_MAC_LEN)
/* Terms and boot epochs move up by at most these steps per message, and never
 * past these ceilings, so one forged value can neither wrap them nor jump
 * them out of reach of the real members (docs/CLUSTER.md). */
#define SFD_PEER_TERM_STEP 1024u
#define SFD_PEER_TERM_MAX (UINT64_C(1) << 62)
#define SFD_PEER_EPOCH_STEP (UINT64_C(1) << 20)
/* ... except the first epoch a node takes from a member it holds no state
 * of (a new node, or a lost state file): members' epochs may have climbed
 * past one step after forged ones, and must still get in. */
#define SFD_PEER_EPOCH_FIRST (UINT64_C(1) << 32)
#define SFD_PEER_EPOCH_MAX (UINT64_C(1) << 62)

/* ---- frame.c: u32 big-endian length prefix, hard cap -------------------- */

typedef struct sfd_peer_framer {
    uint8_t hdr[4];
    uint32_t hdr_have;
    uint32_t need; /* body length once the header is complete */
    uint32_t have;
    uint32_t cap; /* bytes allocated for the body so far */
    uint32_t max; /* frame cap of this stream */
    uint8_t *body;
} sfd_peer_framer;

/* Called once per complete frame; the body is owned by the callee when it
 * returns 1 (then it must free() it), by the framer otherwise. A negative
 * return stops the feed and is passed back. */
typedef int (*sfd_peer_frame_cb)(void *ctx, uint8_t *body, uint32_t len);

void sfd_peer_framer_init(sfd_peer_framer *f, uint32_t max);
void sfd_peer_framer_clear(sfd_peer_framer *f);
/* Feeds bytes; -EMSGSIZE for a zero length or one above f->max, the
 * callback's negative return otherwise. The body buffer grows with the bytes
 * received, never to the announced length ahead of them. After an error the
 * framer must be cleared. The callback may lower or raise f->max. */
int sfd_peer_framer_feed(sfd_peer_framer *f, const uint8_t *data, size_t len, sfd_peer_frame_cb cb,
                         void *ctx);
/* Bytes the framer holds for a partial frame. */
size_t sfd_peer_framer_held(const sfd_peer_framer *f);

/* ---- auth.c: cluster key and HMAC ------------------------------------- */

typedef struct sfd_peer_key {
    uint8_t k[SFD_PEER_KEY_LEN];
} sfd_peer_key;

/* Reads exactly 32 bytes from a regular file of mode 0600 or 0400.
 * -EPERM for a looser mode, -EINVAL for a wrong size. */
int sfd_peer_key_load(const char *path, sfd_peer_key *ret);
/* Where a configured key name points: a path with a '/' as it is; a bare
 * name inside $CREDENTIALS_DIRECTORY (systemd LoadCredential=). -ENOENT for
 * a bare name without that variable, -ENAMETOOLONG. */
int sfd_peer_key_path(const char *name, char *ret_path, size_t size);
/* Per-member keys (X25519): this node's secret key file and the directory
 * of members' public keys, "<id>.pub" (32 raw bytes each). Derives the
 * directional keys of the link with member `peer`: tx seals what this node
 * sends it, rx opens what it sends. */
int sfd_peer_pair_keys(const char *secret_file, const char *pub_dir, uint32_t self, uint32_t peer,
                       sfd_peer_key *ret_tx, sfd_peer_key *ret_rx);

/* ---- envelope.c: sealing and opening envelopes ------------------------- */

typedef struct sfd_peer_msg {
    uint32_t from, dest;
    uint64_t epoch, seq, term;
    uint32_t type; /* STAGEFRONTIER__PEER_ENVELOPE__TYPE__* */
    const uint8_t *payload;
    size_t payload_len;
} sfd_peer_msg;

/* Builds the length-prefixed, authenticated frame of a message. */
int sfd_peer_seal(const sfd_peer_key *key, const sfd_peer_msg *msg, uint8_t **ret_frame,
                  size_t *ret_len);
/* Authenticates, then decodes one frame body (without the length prefix).
 * The MAC is checked first: nothing of a frame with a wrong MAC is decoded.
 * ret_msg's payload points into *ret_env, which the caller frees with
 * stagefrontier__peer_envelope__free_unpacked. -EBADMSG undecodable or out
 * of range, -EPERM wrong MAC. */
int sfd_peer_open(const sfd_peer_key *key, const uint8_t *body, size_t len,
                  Stagefrontier__PeerEnvelope **ret_env, sfd_peer_msg *ret_msg);

/* The claimed sender of a frame body, read before anything is decoded so
 * the receiver can pick the sender's key. -EBADMSG when too short. */
int sfd_peer_frame_sender(const uint8_t *body, size_t len, uint32_t *ret_from);

/* Packs any payload message into a malloc'd buffer. */
int sfd_peer_pack(const ProtobufCMessage *m, uint8_t **ret_buf, size_t *ret_len);

/* Replay protection, one per sender: (epoch, seq) strictly increasing, and a
 * higher epoch (a restart) resets the sequence. A new epoch may be at most
 * SFD_PEER_EPOCH_STEP above the last and below SFD_PEER_EPOCH_MAX. `closed`
 * (set when the state was read back after a restart of this node, whose
 * sequence numbers were not kept) refuses the rest of the current epoch. */
typedef struct sfd_peer_replay {
    uint64_t epoch, seq;
    bool closed;
} sfd_peer_replay;

enum sfd_replay_verdict { SFD_REPLAY_FRESH, SFD_REPLAY_OLD, SFD_REPLAY_FAR };
enum sfd_replay_verdict sfd_peer_replay_check(const sfd_peer_replay *r, uint64_t epoch,
                                              uint64_t seq);
bool sfd_peer_replay_fresh(const sfd_peer_replay *r, uint64_t epoch, uint64_t seq);
void sfd_peer_replay_commit(sfd_peer_replay *r, uint64_t epoch, uint64_t seq);
/* The epoch a sender starts after its receiver told it (epoch_seen, closed):
 * 0 when its own epoch `mine` may stay, else the new one. */
uint64_t sfd_peer_epoch_after(uint64_t mine, uint64_t seen, bool closed);

/* ---- state.c: the replay state kept across restarts ------------------------ */

/* One small file, "peer-<node_id>.state" in the state directory: this node's
 * boot counter and the last epoch accepted from each member. Replaced
 * atomically (temp file, fsync, rename); see docs/CLUSTER.md. */
typedef struct sfd_peer_state_entry {
    uint32_t id;
    uint64_t epoch;
} sfd_peer_state_entry;

typedef struct sfd_peer_state {
    uint64_t boot_epoch;
    uint32_t n;
    sfd_peer_state_entry *peers; /* sorted by id */
} sfd_peer_state;

/* Reads the file; a missing file is an empty state (returns 0), a damaged
 * one -EBADMSG (the caller goes on with an empty state). */
int sfd_peer_state_load(const char *path, sfd_peer_state *ret);
/* The parser behind it, over any stream (the fuzz target's entry). */
int sfd_peer_state_read(FILE *f, sfd_peer_state *ret);
int sfd_peer_state_save(const char *path, const sfd_peer_state *st);
void sfd_peer_state_clear(sfd_peer_state *st);

bool sfd_peer_job_id_valid(const char *job, size_t len);

/* ---- peer_config.c: membership from config ---------------------------- */

typedef struct sfd_peer_member {
    uint32_t id;
    char host[256];
    uint16_t port;
} sfd_peer_member;

typedef struct sfd_peer_config {
    uint32_t node_id;
    uint32_t n_members; /* self included, sorted by id */
    sfd_peer_member *members;
    char key_file[4096];
    char member_key_file[4096]; /* per-member keys: this node's X25519 secret */
    char member_pub_dir[4096];  /* ... and the members' "<id>.pub" files */
    char state_dir[4096];       /* from the host (sfd's state_dir); "" keeps no state */
    uint32_t auth_timeout_ms;   /* 2000: an unauthenticated connection's time to prove itself */
    uint32_t preauth_max;       /* 64: unauthenticated connections at once */
    uint32_t preauth_per_addr;  /* 8: ... from one source address */
    char listen_host[256];      /* default: this node's own entry */
    uint16_t listen_port;
    uint32_t heartbeat_ms;        /* 200 */
    uint32_t failure_timeout_ms;  /* 1000 */
    uint32_t fanout;              /* 8 */
    uint32_t summary_deadline_ms; /* 3000 */
    uint32_t tree_hold_ms;        /* 100: a parent's wait for its children */
    uint32_t retained_max;        /* summaries a node keeps for resend, 512 */
    uint32_t keep_windows;        /* the host's windows kept per job: caught up after a restart */
} sfd_peer_config;

void sfd_peer_config_init(sfd_peer_config *cfg);
void sfd_peer_config_clear(sfd_peer_config *cfg);
/* Sets one key ("node_id", "peers", "cluster_key_file", "member_key_file",
 * "member_pub_dir", "heartbeat_ms", "failure_timeout_ms", "fanout",
 * "summary_deadline_ms", "tree_hold_ms", "retained_max", "listen",
 * "peer_auth_timeout_ms", "peer_preauth_max", "peer_preauth_per_addr"):
 * -ENOENT unknown key, -EINVAL bad value. */
int sfd_peer_config_set(sfd_peer_config *cfg, const char *key, const char *value);
/* The state directory is the host's setting (sfd's [sfd] state_dir), not a
 * key of the peer section. */
int sfd_peer_config_state_dir(sfd_peer_config *cfg, const char *dir);
/* Checks the whole config once every key is set. */
int sfd_peer_config_validate(const sfd_peer_config *cfg);
int sfd_peer_config_index(const sfd_peer_config *cfg, uint32_t id);

/* ---- election.c: pure root election (no I/O, no clock) ------------------ */

enum sfd_elect_role { SFD_ELECT_FOLLOWER, SFD_ELECT_CANDIDATE, SFD_ELECT_ROOT };

enum sfd_elect_action_type {
    SFD_ELECT_SEND_CLAIM,     /* broadcast RootClaim{self, term} */
    SFD_ELECT_SEND_VOTE,      /* RootVote{candidate, term, granted} to `to` */
    SFD_ELECT_SEND_HEARTBEAT, /* broadcast a heartbeat now */
    SFD_ELECT_ROOT_CHANGED,   /* root is now `root` (0: none) */
};

typedef struct sfd_elect_action {
    enum sfd_elect_action_type type;
    uint32_t to;
    uint32_t candidate;
    uint64_t term;
    bool granted;
    uint32_t root;
} sfd_elect_action;

#define SFD_ELECT_MAX_ACTIONS 4

typedef struct sfd_elect_out {
    uint32_t n;
    sfd_elect_action a[SFD_ELECT_MAX_ACTIONS];
} sfd_elect_out;

typedef struct sfd_elect {
    uint32_t self;
    uint32_t n_members;
    uint32_t *ids;        /* sorted, self included */
    uint64_t *last_heard; /* ms, per member; 0 never */
    uint8_t *votes;       /* per member, in the current candidacy */
    uint32_t n_votes;     /* ... how many granted */
    uint64_t heartbeat_ms, failure_timeout_ms;
    uint64_t term;
    uint32_t voted_for;  /* in term; 0 none */
    uint32_t root;       /* followed root; self when root */
    uint64_t root_heard; /* ms of the root's last heartbeat */
    enum sfd_elect_role role;
    uint64_t candidate_since;
    uint64_t stale_rejected; /* stale-term claims and votes */
    uint64_t *far_term;      /* per member: last term beyond our step */
} sfd_elect;

int sfd_elect_init(sfd_elect *e, uint32_t self, const uint32_t *ids, uint32_t n,
                   uint64_t heartbeat_ms, uint64_t failure_timeout_ms);
void sfd_elect_clear(sfd_elect *e);
/* Timer tick: liveness, candidacy, the root's majority lease. */
void sfd_elect_tick(sfd_elect *e, uint64_t now, sfd_elect_out *out);
/* Any authenticated message from a member (liveness only). _heard takes a
 * member id, _member_heard the member's index in ids (for passes over a set
 * of members, which need no search). */
void sfd_elect_heard(sfd_elect *e, uint64_t now, uint32_t from);
void sfd_elect_member_heard(sfd_elect *e, uint64_t now, uint32_t i);
/* The index of member `id` in ids, -1 when it is not a member. */
int sfd_elect_index(const sfd_elect *e, uint32_t id);
/* A heartbeat: sender, its term, whether it claims to be root. */
void sfd_elect_on_heartbeat(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term, bool is_root,
                            sfd_elect_out *out);
void sfd_elect_on_claim(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term,
                        sfd_elect_out *out);
void sfd_elect_on_vote(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term, bool granted,
                       sfd_elect_out *out);
/* Any other termed message: -ESTALE if its term is below ours (reject it);
 * a higher term is adopted (a root or candidate steps down). */
int sfd_elect_on_term(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term, sfd_elect_out *out);
/* Liveness: this node always; another member while its last message is
 * within the failure timeout. _is_live takes a member id, _member_live the
 * member's index in ids (for passes over all members). */
bool sfd_elect_is_live(const sfd_elect *e, uint64_t now, uint32_t id);
bool sfd_elect_member_live(const sfd_elect *e, uint64_t now, uint32_t i);
uint32_t sfd_elect_majority(const sfd_elect *e);
uint32_t sfd_elect_live_count(const sfd_elect *e, uint64_t now);
/* The root in force (0: none). */
uint32_t sfd_elect_root(const sfd_elect *e, uint64_t now);
/* Gate before any termed message: false when `term` is more than
 * SFD_PEER_TERM_STEP above ours (or past SFD_PEER_TERM_MAX); the caller
 * drops the message. Such terms are remembered per member, and once a
 * majority of the other live members report one, this node adopts the
 * highest term that majority backs (a restarted node catching up). */
bool sfd_elect_term_ok(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term,
                       sfd_elect_out *out);

/* ---- heartbeat.c: the checks of a heartbeat (pure) ----------------------- */

/* A decoded heartbeat from `from` in a cluster of n_members: its node id,
 * window list, and liveness sets (exactly ceil(n_members / 8) bytes each,
 * the root's view with its root and an age within the failure timeout). */
bool sfd_peer_heartbeat_valid(const Stagefrontier__Heartbeat *hb, uint32_t from, uint32_t n_members,
                              uint32_t failure_timeout_ms);

/* ---- tree.c: fan-in tree (pure) ------------------------------------------ */

/* Parent of `self` in the tree over the live members, rooted at `root`:
 * members in id order after the root; the parent of position p is position
 * (p - 1) / fanout. Returns 0 when self is the root or there is no root. */
uint32_t sfd_peer_tree_parent(const sfd_elect *e, uint64_t now, uint32_t fanout);
/* Number of live members whose parent is self. */
uint32_t sfd_peer_tree_children(const sfd_elect *e, uint64_t now, uint32_t fanout);
/* Ids of those children (at most `max`); returns how many were written. */
uint32_t sfd_peer_tree_child_ids(const sfd_elect *e, uint64_t now, uint32_t fanout,
                                 uint32_t *ret_ids, uint32_t max);

/* ---- codec.c: sf_summary <-> Summary, and the job key ------------------- */

/* Every message that names a job names it by its key: the owner's uid (the
 * uid of its ranks' connections on the node hosting them), the job id and
 * the incarnation (docs/SFD.md, "Identity"; docs/CLUSTER.md, "Job keys").
 * (uid_t)-1 and (uid_t)-2 are no uid: POSIX's "no uid" and sfd's own. */
#define SFD_PEER_UID_MAX 0xfffffffdu
/* The owner and incarnation fields of a decoded message: 0, or -EPROTO when
 * either is missing or out of bounds (counted as rejected_owner). */
int sfd_peer_owner_check(bool has_uid, uint32_t uid, bool has_incarnation, uint32_t incarnation);

typedef struct sfd_window_key {
    char job[SF_MAX_JOB_ID_LEN + 1];
    uint32_t uid;         /* the job's owner */
    uint32_t incarnation; /* 1..SF_MAX_INCARNATION */
    int64_t window;
    uint32_t segment;
} sfd_window_key;

bool sfd_window_key_equal(const sfd_window_key *a, const sfd_window_key *b);

/* The window key of a message's fields, each checked: -EBADMSG for a bad
 * job id or window, -EPROTO for a missing or bad owner or incarnation. */
int sfd_peer_window_key_make(const char *job, bool has_uid, uint32_t uid, bool has_incarnation,
                             uint32_t incarnation, int64_t window, uint32_t segment,
                             sfd_window_key *ret);

/* Encodes the summary of window `key` (its window and segment must be s's;
 * views into s and key; freed with sfd_peer_summary_msg_free). */
int sfd_peer_summary_encode(const sf_summary *s, const sfd_window_key *key,
                            Stagefrontier__Summary **ret);
void sfd_peer_summary_msg_free(Stagefrontier__Summary *m);
/* Validates every field against the bounds and rebuilds the summary:
 * -EPROTO for the owner or incarnation, -EBADMSG for any other field. */
int sfd_peer_summary_decode(const Stagefrontier__Summary *m, sf_summary **ret,
                            sfd_window_key *ret_key);
/* Packed wire form of a summary, and back (fuzz entry points use these). */
int sfd_peer_summary_pack(const sf_summary *s, const sfd_window_key *key, bool resent,
                          uint32_t origin, uint8_t **ret_buf, size_t *ret_len);
int sfd_peer_summary_unpack(const uint8_t *buf, size_t len, sf_summary **ret,
                            sfd_window_key *ret_key, bool *ret_resent);

/* ---- capture_codec.c: PeerCaptureRequest / PeerCaptureResult (pure) ----- */

/* A capture request as it travels between nodes (docs/CLUSTER.md,
 * "Captures"). Every field is checked on decode and before encode. */
typedef struct sfd_peer_capture_request {
    char job[SF_MAX_JOB_ID_LEN + 1];
    uint32_t uid;         /* the job's owner: only its ranks are asked */
    uint32_t incarnation; /* 1..SF_MAX_INCARNATION */
    uint64_t id;          /* 1..SF_MAX_CAPTURE_ID */
    uint32_t n_ranks;
    uint32_t ranks[SF_MAX_CAPTURE_RANKS]; /* unique, < SF_MAX_RANKS */
    int64_t control_rank;                 /* one of ranks, -1: none */
    uint32_t steps;                       /* 1..SF_MAX_CAPTURE_STEPS */
    bool automatic;
    bool communication; /* for a collective that started late; automatic only */
    char reason[SF_MAX_CAPTURE_REASON + 1];
    int64_t window; /* -1: none */
    uint32_t segment;
    int64_t created_at_ms;
} sfd_peer_capture_request;

/* One rank's outcome. state is a STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__*. */
typedef struct sfd_peer_capture_result {
    char job[SF_MAX_JOB_ID_LEN + 1];
    uint32_t uid, incarnation; /* the job's key, as in the request */
    uint64_t id;
    uint32_t rank;
    uint32_t state;
    uint32_t node;                         /* the node hosting the rank, 0: none */
    int64_t first_step, last_step;         /* -1: unknown */
    int64_t started_at_ms, finished_at_ms; /* 0: unknown */
    char text[SF_MAX_CAPTURE_PATH + 1];    /* DONE: the trace path; else the reason */
} sfd_peer_capture_result;

/* Packed payloads, and back: -EINVAL for a value out of its bound (nothing
 * is sent), -EBADMSG for bytes that do not decode or a field out of bounds,
 * -EPROTO for an owner or incarnation missing or out of bounds. */
int sfd_peer_capture_request_pack(const sfd_peer_capture_request *q, uint8_t **ret_buf,
                                  size_t *ret_len);
int sfd_peer_capture_request_unpack(const uint8_t *buf, size_t len, sfd_peer_capture_request *ret);
int sfd_peer_capture_result_pack(const sfd_peer_capture_result *r, uint8_t **ret_buf,
                                 size_t *ret_len);
int sfd_peer_capture_result_unpack(const uint8_t *buf, size_t len, sfd_peer_capture_result *ret);

/* ---- live_codec.c: LiveRows, the live verdict's rows (pure) -------------- */

/* A member's rows of a few complete steps for the root's live verdict
 * (docs/LIVE.md, "In a cluster"): n_steps steps, each with the same n_ranks
 * ranks, d step-major then rank then stage. A decoded value points into the
 * message it came from and lives until sfd_peer_live_rows_free. */
#define SFD_PEER_LIVE_MAX_STEPS 64u
typedef struct sfd_peer_live_rows {
    char job[SF_MAX_JOB_ID_LEN + 1];
    uint32_t uid, incarnation; /* the job's key */
    uint64_t schema_hash;
    uint32_t world_size, n_stages;
    uint32_t n_steps, n_ranks;
    const int64_t *steps;  /* [n_steps] strictly increasing, >= 0 */
    const uint32_t *ranks; /* [n_ranks] strictly increasing, < world_size */
    const int64_t *d;      /* [n_steps][n_ranks][n_stages], 0..SF_MAX_DURATION_NS */
    void *msg;             /* the decoded message, NULL for a value built to send */
} sfd_peer_live_rows;

/* Packs a value (-EINVAL for any field out of its bound: nothing is sent),
 * and back: -EBADMSG for bytes that do not decode or a field out of bounds,
 * -EPROTO for an owner or incarnation missing or out of bounds. */
int sfd_peer_live_rows_pack(const sfd_peer_live_rows *b, uint8_t **ret_buf, size_t *ret_len);
int sfd_peer_live_rows_unpack(const uint8_t *buf, size_t len, sfd_peer_live_rows *ret);
void sfd_peer_live_rows_free(sfd_peer_live_rows *b);

/* ---- catchup.c: CatchUpRequest / CatchUpDone, their checks (pure) ------- */

#define SFD_PEER_CATCHUP_KEEP_MAX 4096u    /* sfd's keep_windows bound (config.c) */
#define SFD_PEER_CATCHUP_REPORTS_MAX 1024u /* the reports a node keeps */

/* Decodes and checks a payload: -EBADMSG for bytes that do not decode,
 * -ERANGE for keep_windows outside 1..SFD_PEER_CATCHUP_KEEP_MAX, or a count
 * of reports above SFD_PEER_CATCHUP_REPORTS_MAX. */
int sfd_peer_catchup_request_unpack(const uint8_t *buf, size_t len, uint32_t *ret_keep);
int sfd_peer_catchup_done_unpack(const uint8_t *buf, size_t len, uint32_t *ret_reports);

/* ---- node.c, link.c, root.c: the running peer layer (libuv) ------------ */

struct uv_loop_s;
typedef struct sfd_peer_node sfd_peer_node;

enum sfd_peer_log {
    SFD_PEER_LOG_ERR = 3,
    SFD_PEER_LOG_WARNING = 4,
    SFD_PEER_LOG_NOTICE = 5,
    SFD_PEER_LOG_INFO = 6
};

typedef struct sfd_peer_hooks {
    void *ctx;
    /* Every node, once per window key: the root closed the window with this
     * merged summary (its meta carries the root's downgrade flags). The host
     * computes and stores the report; the summary stays the peer layer's. */
    void (*deliver)(void *ctx, const sfd_window_key *key, uint32_t root_id, uint64_t root_term,
                    const sf_summary *merged);
    void (*log)(void *ctx, int priority, const char *msg);
    /* Captures (docs/CLUSTER.md, "Captures"): a request or an outcome that
     * passed the codec and the routing rule, either to this node as the root
     * from a member (from_root false) or from the root (from_root true). A
     * negative return is a counted rejection (rejected_capture). */
    int (*capture_request)(void *ctx, uint32_t from, bool from_root,
                           const sfd_peer_capture_request *q);
    int (*capture_result)(void *ctx, uint32_t from, bool from_root,
                          const sfd_peer_capture_result *r);
    /* This node as the root: a member's rows for the live verdict that
     * passed the codec (docs/LIVE.md, "In a cluster"). A negative return is
     * a counted rejection (rejected_live). NULL: refused. */
    int (*live_rows)(void *ctx, uint32_t from, const sfd_peer_live_rows *b);
} sfd_peer_hooks;

typedef struct sfd_peer_counters {
    uint64_t frames_in, frames_out, bytes_in, bytes_out;
    uint64_t rejected_mac, rejected_decode, rejected_replay, rejected_stale_term;
    uint64_t rejected_member, rejected_frame, rejected_conns, send_dropped;
    uint64_t summaries_sent, summaries_resent, summaries_received;
    uint64_t merge_duplicates, merge_conflicts, merge_mismatches;
    uint64_t reports_computed, reports_received, reports_adopted, windows_late;
    uint64_t root_changes, retained_dropped;
    uint64_t rejected_auth_timeout, rejected_preauth, rejected_term_jump, rejected_epoch;
    uint64_t epoch_bumps, state_writes, state_errors;
    uint64_t captures_sent, captures_received, rejected_capture;
    uint64_t rejected_owner; /* a job named without a valid owner uid and incarnation */
    uint64_t links_dialled;  /* outbound connections opened: steady while the links hold */
    uint64_t report_acks_deferred, report_acks_late; /* past a proposal's prompt bound */
    /* catch-up after a restart (catchup.c): asked, answered to others, the
     * reports those answers carried, finished here, and refused requests */
    uint64_t catchups_requested, catchups_served, catchup_reports_sent, catchups_done;
    uint64_t rejected_catchup;
    /* the live verdict's rows (live_route.c): sent to the root, received as
     * the root, and refused (undecodable, not to the root, or by the host) */
    uint64_t live_rows_sent, live_rows_received, rejected_live;
} sfd_peer_counters;

int sfd_peer_node_new(struct uv_loop_s *loop, const sfd_peer_config *cfg, const sfd_peer_key *key,
                      const sfd_peer_hooks *hooks, sfd_peer_node **ret);
/* Binds the listener (or adopts an already bound fd >= 0) and starts the
 * timers; links are dialled from the first tick. */
int sfd_peer_node_start(sfd_peer_node *node, int listen_fd);
/* Hands this node's summary of one window of job (id, owner uid,
 * incarnation) to the cluster; takes ownership of s in every case. The node
 * keeps it until the window's report arrives. */
int sfd_peer_submit(sfd_peer_node *node, const char *job, uint32_t uid, uint32_t incarnation,
                    sf_summary *s);
/* Closes every handle; `done` runs once the loop has let go of them all. */
void sfd_peer_node_close(sfd_peer_node *node, void (*done)(void *ctx), void *ctx);
/* The PEERS view as JSON text (malloc'd). */
int sfd_peer_status_json(sfd_peer_node *node, char **ret_json);
const sfd_peer_counters *sfd_peer_node_counters(const sfd_peer_node *node);
uint32_t sfd_peer_node_root(sfd_peer_node *node);
/* This node's election role ("root", "candidate", "follower") and term. */
void sfd_peer_node_role(const sfd_peer_node *node, const char **ret_role, uint64_t *ret_term);
uint32_t sfd_peer_node_id(const sfd_peer_node *node);

/* ---- live_route.c: the live verdict's rows to the root ------------------- */

/* A member's rows to the root in force: -EAGAIN without a root, -EALREADY
 * when this node is the root (the host feeds its own rows directly). */
int sfd_peer_live_rows_send(sfd_peer_node *node, const sfd_peer_live_rows *b);

/* ---- capture_route.c: captures between the nodes ------------------------- */

/* Who decides captures now: 1 this node (the root), 0 another (the root in
 * force), -EAGAIN nobody (no root in force). */
int sfd_peer_capture_decider(sfd_peer_node *node);
/* A request: the root sends it to every other member, a member to the root.
 * -EAGAIN without a root. */
int sfd_peer_capture_request_send(sfd_peer_node *node, const sfd_peer_capture_request *q);
/* An outcome: the root relays it to every other member but `except` (0:
 * none), a member sends it to the root. -EAGAIN without a root. */
int sfd_peer_capture_result_send(sfd_peer_node *node, const sfd_peer_capture_result *r,
                                 uint32_t except);

#endif
