#!/usr/bin/python3
"""Job keys across nodes (docs/CLUSTER.md, "Job keys"): two uids run a job of
the same id on real sfd nodes, as real libsfclient ranks (with the C capture
handler, tests/sfd/sf_client_job.c) started through setpriv, and each queries
and captures with the real sfctl as itself. A job is (owner uid, job id,
incarnation) on every node: summaries merge, reports are stored and captures
reach ranks by that key only.

usage: cluster_owners.py BUILD_DIR SCENARIO
scenarios:
  apart     uid A's rank 0 of `train` on node 1, uid B's rank 1 of `train` on
            node 2, node 3 hosting none: each job is reported alone, on every
            node, under its owner's uid; A sees only A's job, on every node;
            A's capture of rank 1 never reaches B's trainer, A naming B's job
            is refused, and A's capture of its own rank works from a node that
            hosts none of A's ranks; after node 3 restarts, both jobs come back
            there under their owners and go on; a summary without an owner is
            refused
  together  both users' rank 0 of `train` on node 2: two jobs on every node,
            each with its own reports (and durations), and A's capture of
            rank 0 reaches A's trainer alone

Needs root (it runs ranks and sfctl as other uids); skips (77) otherwise.
"""
import json
import os
import shutil
import subprocess
import sys

from cluster_test import check, run_scenario, with_cluster

SKIP = 77
UID_A, UID_B = 62101, 62102
SLOW_STAGE_FWD = 1


def as_uid(uid, cmd):
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + cmd


def sfctl_as(node, uid, *args):
    """sfctl on `node` as `uid` (None: root, the test's own uid)."""
    cmd = [node.c.sfctl, "--socket", node.query] + list(args)
    r = subprocess.run(as_uid(uid, cmd) if uid is not None else cmd, capture_output=True,
                       text=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def json_of(node, uid, *args):
    rc, out, _ = sfctl_as(node, uid, *(list(args) + ["--json"]))
    if rc != 0:
        return None
    try:
        return json.loads(out)
    except ValueError:
        return None


def trainer(c, node, uid, rank, world, capdir, slow_us=0):
    """One rank of uid's job `train` on `node`, its capture handler writing
    into capdir (owned by uid); it runs until the scenario ends."""
    os.chown(capdir, uid, uid)
    env = dict(os.environ, SF_HEARTBEAT_MS="0", SF_TEST_CAPTURE_DIR=capdir)
    prog = os.path.join(c.build, "tests/sfd/sf_client_job")
    cmd = [prog, node.ingest, "train", str(rank), str(world), "100000",
           str(rank if slow_us else -1), str(SLOW_STAGE_FWD), str(slow_us), "3000", "0"]
    return subprocess.Popen(as_uid(uid, cmd), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def windows(node, uid, job="train"):
    """uid's latest reports of `job` on `node`, by window index ({} when none)."""
    arr = json_of(node, uid, "report", job, "--last", "8")
    arr = arr if isinstance(arr, list) else [arr] if arr else []
    return {w["window"]["index"]: w for w in arr}


def ranks_of(report):
    return sorted(r["rank"] for r in report.get("ranks") or [])


def own_jobs(c, uid, n_windows):
    """On every node, uid sees exactly one job, train owned by uid, with at
    least n_windows reports; returns {node id: {window: report}}."""
    def ready():
        out = {}
        for n in c.nodes:
            js = json_of(n, uid, "jobs")
            if not js or [(j["job_id"], j["uid"]) for j in js] != [("train", uid)]:
                return None
            w = windows(n, uid)
            if len(w) < n_windows:
                return None
            out[n.id] = w
        return out
    return c.wait(ready, "uid %d's own train reported on every node" % uid)


def check_all_jobs(c):
    """Root sees both users' train on every node, each under its owner."""
    for n in c.nodes:
        js = json_of(n, None, "jobs") or []
        owners = sorted(j["uid"] for j in js if j["job_id"] == "train")
        check(owners == [UID_A, UID_B], "node %d: root lists train of uids %s" % (n.id, owners))


def captures_of(node, uid, job="train"):
    return json_of(node, uid, "captures", job) or []


def settled_everywhere(c, uid, cid, job="train"):
    def agree():
        ks = []
        for n in c.nodes:
            k = next((x for x in captures_of(n, uid, job) if x["id"] == cid), None)
            if k is None or k["state"] == "running":
                return None
            ks.append(k)
        return ks if all(k["ranks"] == ks[0]["ranks"] for k in ks) else None
    return c.wait(agree, "capture %d settled alike on every node" % cid)[0]


def capture(node, uid, job, ranks):
    rc, out, err = sfctl_as(node, uid, "capture", job, "--ranks", ranks, "--steps", "3")
    check(rc == 0, "uid %d: sfctl capture %s --ranks %s on node %d: %s"
          % (uid, job, ranks, node.id, err))
    return int(out.strip())


def denied(node):
    return (node.status() or {}).get("rejected", {}).get("query_denied", 0)


def needs_other_uids():
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        print("SKIP: needs root and setpriv to run ranks and sfctl as two other uids")
        sys.exit(SKIP)


def with_owners(build, body):
    """Three running nodes of four configured members: the injector speaks
    as member 4; a capture directory per uid."""
    needs_other_uids()
    with_cluster(build, body, dir_keys=(UID_A, UID_B), members=4,
                 sfd_extra="capture_timeout_s = 60\n")


def apart(c, dirs, procs):
    n1, n2, n3 = c.nodes
    procs += [trainer(c, n1, UID_A, 0, 2, dirs[UID_A]),
              trainer(c, n2, UID_B, 1, 2, dirs[UID_B])]
    a = own_jobs(c, UID_A, 2)
    b = own_jobs(c, UID_B, 2)
    check_all_jobs(c)
    # Each job is reported alone: A's windows hold rank 0 only, B's rank 1
    # only, on every node, node 3 (no ranks) included.
    for nid in a:
        for w, r in a[nid].items():
            check(ranks_of(r) == [0] and r["window"]["missing_ranks"] == 1,
                  "node %d: A's window %d holds ranks %s" % (nid, w, ranks_of(r)))
        for w, r in b[nid].items():
            check(ranks_of(r) == [1] and r["window"]["missing_ranks"] == 1,
                  "node %d: B's window %d holds ranks %s" % (nid, w, ranks_of(r)))
    for n in c.nodes:
        ids = sorted(j["uid"] for j in json_of(n, UID_A, "jobs"))
        check(ids == [UID_A], "node %d: A lists jobs of uids %s" % (n.id, ids))

    # A's capture of rank 1 of its own train: no node hosts A's rank 1, so it
    # ends not_connected, and B's trainer (rank 1 of B's train) gets nothing.
    cid = capture(n1, UID_A, "train", "1")
    k = settled_everywhere(c, UID_A, cid)
    t = k["ranks"][0]
    check(t["rank"] == 1 and t["state"] == "not_connected" and t["node"] is None,
          "A's capture of rank 1: %s" % k)
    # A naming B's job is refused where A asks, on a node with B's rank and
    # on one without, and counted there.
    for n in (n1, n2, n3):
        before = denied(n)
        rc, _, err = sfctl_as(n, UID_A, "capture", "%d/train" % UID_B, "--ranks", "1")
        check(rc != 0 and "denied" in err, "node %d: A's capture of B's job: %r" % (n.id, err))
        rc, _, err = sfctl_as(n, UID_A, "report", "%d/train" % UID_B)
        check(rc != 0 and "denied" in err, "node %d: A's report of B's job: %r" % (n.id, err))
        check(denied(n) == before + 2, "node %d: refusals not counted" % n.id)
    # A acts on its own job from node 3, which hosts none of A's ranks.
    cid3 = capture(n3, UID_A, "train", "0")
    k3 = settled_everywhere(c, UID_A, cid3)
    t = k3["ranks"][0]
    check(t["state"] == "done" and t["node"] == 1 and os.path.dirname(t["path"]) == dirs[UID_A],
          "A's capture of rank 0 from node 3: %s" % k3)
    check(os.listdir(dirs[UID_B]) == [], "B's trainer captured for A: %s" % os.listdir(dirs[UID_B]))
    for n in c.nodes:
        check(captures_of(n, UID_B) == [], "node %d: B's job lists A's captures" % n.id)

    # Node 3 restarts on its state dir: both jobs come back from its history
    # under their owners, and take the cluster's next reports there.
    latest = {u: max(windows(n3, u)) for u in (UID_A, UID_B)}
    n3.stop()
    n3.start()
    c.wait_root(1)
    for u in (UID_A, UID_B):
        c.wait(lambda: max(windows(n3, u) or {-1: None}) > latest[u] + 2,
               "uid %d's reports after node 3's restart" % u)
    own_jobs(c, UID_A, 2)
    own_jobs(c, UID_B, 2)
    check_all_jobs(c)

    # A member that names a job without its owner is refused and counted.
    root = n1
    before = root.peers()["counters"]["rejected_owner"]
    r = subprocess.run([c.inject, root.host, str(root.port), c.key, "4", "1", "unowned", "train",
                        "2", str(root.peers()["term"])], capture_output=True, timeout=60)
    check(r.returncode == 0, "injector: %s" % r.stderr)
    c.wait(lambda: root.peers()["counters"]["rejected_owner"] == before + 1,
           "the unowned summary counted as rejected_owner")
    check("without a valid owner uid and incarnation" in root.log_text(),
          "no log line about the unowned summary")
    rc, text, _ = root.sfctl("peers")
    check(rc == 0 and "owner %d," % (before + 1) in text, "sfctl peers: %r" % text)
    c.wait_root(1)
    return ("apart: A's and B's train reported apart on 3 nodes; A's capture %d of rank 1 "
            "not_connected, B's trainer untouched; A's capture %d from node 3 done"
            % (cid, cid3))


def mean_fwd_ms(report):
    """The forward pass's mean time per step of a window, in ms."""
    st = next(s for s in report["stages"] if s["name"] == "model.fwd_loss_cpu_wall")
    return st["mean_s"] * 1e3 / report["window"]["steps"]


def together(c, dirs, procs):
    n2 = c.nodes[1]
    # B's rank is 4 ms slower in the forward pass (3 ms a stage otherwise):
    # the reports tell them apart.
    procs += [trainer(c, n2, UID_A, 0, 1, dirs[UID_A]),
              trainer(c, n2, UID_B, 0, 1, dirs[UID_B], slow_us=4000)]
    a = own_jobs(c, UID_A, 3)
    b = own_jobs(c, UID_B, 3)
    check_all_jobs(c)
    for nid in a:
        for w, r in a[nid].items():
            check(ranks_of(r) == [0] and r["window"]["missing_ranks"] == 0 and
                  mean_fwd_ms(r) < 5.5, "node %d: A's window %d: %s ranks, fwd %.2f ms"
                  % (nid, w, ranks_of(r), mean_fwd_ms(r)))
        for w, r in b[nid].items():
            check(ranks_of(r) == [0] and r["window"]["missing_ranks"] == 0 and
                  mean_fwd_ms(r) > 5.5, "node %d: B's window %d: %s ranks, fwd %.2f ms"
                  % (nid, w, ranks_of(r), mean_fwd_ms(r)))
    # A's capture of rank 0, asked on node 3: A's trainer alone takes it.
    cid = capture(c.nodes[2], UID_A, "train", "0")
    k = settled_everywhere(c, UID_A, cid)
    t = k["ranks"][0]
    check(t["state"] == "done" and t["node"] == 2 and os.path.dirname(t["path"]) == dirs[UID_A],
          "A's capture of rank 0: %s" % k)
    check(os.listdir(dirs[UID_B]) == [], "B's trainer captured for A: %s" % os.listdir(dirs[UID_B]))
    for n in c.nodes:
        check(captures_of(n, UID_B) == [], "node %d: B's job lists A's capture" % n.id)
    return ("together: A's and B's train on node 2 reported apart on 3 nodes (%d and %d windows "
            "on node 1); A's capture %d reached A's trainer only"
            % (len(a[1]), len(b[1]), cid))


def scenario_apart(build):
    with_owners(build, apart)


def scenario_together(build):
    with_owners(build, together)


def main():
    return run_scenario(globals(), __doc__)


if __name__ == "__main__":
    sys.exit(main())
