#!/usr/bin/python3
"""Captures across nodes (docs/CLUSTER.md, "Captures"): real sfd processes
linked by the peer layer, real libsfclient ranks with the C capture handler
(tests/sfd/sf_client_job.c) on different nodes, queried with the real sfctl.

usage: cluster_captures.py BUILD_DIR SCENARIO
scenarios:
  operator  a capture asked on a non-root node of a rank hosted on a third
            node ends done, with the trace path on that node, listed alike on
            every node; a rank no node hosts ends not_connected; forged and
            unknown-id outcomes from a peer are counted rejections
  auto      with auto_capture on every node, the root alone decides: one
            capture of the persisting suspect, then the cooldown holds

Every wait polls a real condition under an overall timeout.
"""
import json
import os
import subprocess
import sys

from cluster_test import check, run_scenario, with_cluster

SLOW_STAGE_FWD = 1


def client(c, node, job, rank, world, capdir, slow_us=0):
    """One rank of a libsfclient job on `node`, with the C capture handler
    writing into capdir; it runs until the scenario ends."""
    env = dict(os.environ)
    env["SF_HEARTBEAT_MS"] = "0"
    env["SF_TEST_CAPTURE_DIR"] = capdir
    prog = os.path.join(c.build, "tests/sfd/sf_client_job")
    return subprocess.Popen([prog, node.ingest, job, str(rank), str(world), "100000",
                             str(rank if slow_us else -1), str(SLOW_STAGE_FWD), str(slow_us),
                             "3000", "0"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def has_report(node, job):
    return node.sfctl("report", job, "--json")[0] == 0


def latest_window(node, job):
    rc, out, _ = node.sfctl("report", job, "--json")
    arr = json.loads(out) if rc == 0 else []
    arr = arr if isinstance(arr, list) else [arr]
    return max((w["window"]["index"] for w in arr), default=-1)


def captures(node, job):
    rc, out, _ = node.sfctl("captures", job, "--json")
    return json.loads(out) if rc == 0 else []


def capture_on(node, job, cid):
    return next((k for k in captures(node, job) if k["id"] == cid), None)


def settled(node, job, cid):
    k = capture_on(node, job, cid)
    return k if k is not None and k["state"] != "running" else None


def same_everywhere(c, job, cid):
    """Every node lists the capture with the root's outcome of every rank."""
    def agree():
        ks = [settled(n, job, cid) for n in c.nodes]
        return ks if all(ks) and all(k["ranks"] == ks[0]["ranks"] for k in ks) else None
    return c.wait(agree, "capture %d settled alike on every node" % cid)[0]


def check_trace(t, capdir, node_id):
    check(t["state"] == "done" and t["node"] == node_id, "rank %d: %s" % (t["rank"], t))
    check(os.path.dirname(t["path"]) == capdir, "trace outside the node's dir: %s" % t)
    with open(t["path"]) as f:
        steps = [int(line.split()[1]) for line in f]
    check(steps == list(range(t["first_step"], t["last_step"] + 1)),
          "the handler saw steps %s for %s" % (steps, t))


def inject_result(c, root, epoch, job, cid, rank, node_id):
    term = root.peers()["term"]
    env = dict(os.environ, SF_INJECT_EPOCH=str(epoch))
    r = subprocess.run([c.inject, root.host, str(root.port), c.key, "4", str(root.id), "capture",
                        job, str(cid), str(rank), str(node_id), str(term)],
                       capture_output=True, timeout=60, env=env)
    check(r.returncode == 0, "injector: %s" % r.stderr)


def operator(c, dirs, procs):
    job = "capj"
    # rank 0 on node 2, rank 1 on node 3, rank 2 nowhere; the root hosts none
    procs += [client(c, c.nodes[1], job, 0, 3, dirs[0]),
              client(c, c.nodes[2], job, 1, 3, dirs[1])]
    c.wait(lambda: all(has_report(n, job) for n in c.nodes), "a report on every node")
    rc, out, err = c.nodes[1].sfctl("capture", job, "--ranks", "1", "--steps", "3")
    check(rc == 0, "sfctl capture on node 2: %s" % err)
    cid = int(out.strip())
    k = same_everywhere(c, job, cid)
    check(k["state"] == "done" and k["trigger"] == "operator" and len(k["ranks"]) == 1,
          "capture: %s" % k)
    check_trace(k["ranks"][0], dirs[1], 3)
    check(os.listdir(dirs[0]) == [], "node 2's rank captured too")
    rc, text, _ = c.nodes[0].sfctl("captures", job)
    check(rc == 0 and "node 3" in text and k["ranks"][0]["path"] in text,
          "sfctl captures on the root: %r" % text)

    rc, out, err = c.nodes[2].sfctl("capture", job, "--ranks", "2")
    check(rc == 0, "sfctl capture on node 3: %s" % err)
    nc = same_everywhere(c, job, int(out.strip()))
    check(nc["state"] == "failed" and nc["ranks"][0]["state"] == "not_connected" and
          nc["ranks"][0]["node"] is None, "a rank nobody hosts: %s" % nc)

    # Hostile member 4: an unknown id, a rank of node 3 claimed as its own,
    # and an outcome claiming to come from node 3.
    root = c.nodes[0]
    before = root.peers()["counters"]["rejected_capture"]
    inject_result(c, root, 1, job, 999999, 1, 4)
    inject_result(c, root, 2, job, cid, 1, 4)
    inject_result(c, root, 3, job, cid, 1, 3)
    c.wait(lambda: root.peers()["counters"]["rejected_capture"] - before == 3,
           "three rejected capture outcomes at the root")
    for n in c.nodes:
        check(capture_on(n, job, cid)["ranks"] == k["ranks"],
              "node %d: a forged outcome changed the capture" % n.id)
    check("rejected a capture message from node 4" in root.log_text(),
          "no log line about the forged outcome")
    rc, text, _ = root.sfctl("peers")
    check(rc == 0 and "capture %d;" % (before + 3) in text, "sfctl peers: %r" % text)
    return "operator: capture %d done on node 3 at %s" % (cid, k["ranks"][0]["path"])


def scenario_operator(build):
    # Four configured members, three running: the injector speaks as member 4.
    with_cluster(build, operator, members=4, sfd_extra="capture_timeout_s = 60\n")


def auto(c, dirs, procs):
    job = "autoj"
    # rank 1, on node 3, is slow in the forward pass in every step
    procs += [client(c, c.nodes[1], job, 0, 2, dirs[0]),
              client(c, c.nodes[2], job, 1, 2, dirs[1], slow_us=4000)]

    def fired():
        ks = [k for k in captures(c.nodes[1], job) if k["trigger"] == "auto"]
        return ks if ks and ks[0]["state"] != "running" else None
    k = c.wait(fired, "an automatic capture on node 2")[0]
    k = same_everywhere(c, job, k["id"])
    sus = [t for t in k["ranks"] if not t["control"]]
    check([t["rank"] for t in sus] == [1], "the suspect is rank 1: %s" % k)
    check_trace(sus[0], dirs[1], 3)
    ctl = [t for t in k["ranks"] if t["control"]]
    check([t["rank"] for t in ctl] == [0] and ctl[0]["state"] == "done" and
          ctl[0]["node"] == 2, "the control rank 0 on node 2: %s" % ctl)
    # a straggler's capture, not a communication verdict's, on every node
    for n in c.nodes:
        check(capture_on(n, job, k["id"])["communication"] is False,
              "node %d: communication %s" % (n.id, capture_on(n, job, k["id"])))
    # The suspect persists for ten more windows: the cooldown holds, and no
    # other node decides a capture of its own.
    last = k["window"] + 10
    c.wait(lambda: all(latest_window(n, job) >= last for n in c.nodes), "window %d" % last)
    for n in c.nodes:
        autos = [x["id"] for x in captures(n, job) if x["trigger"] == "auto"]
        check(autos == [k["id"]], "node %d lists automatic captures %s" % (n.id, autos))
    return "auto: capture %d of window %d, one in %d windows" % (k["id"], k["window"],
                                                                 last - k["window"] + 1)


def scenario_auto(build):
    # auto_capture on every node: only the root may act on it
    with_cluster(build, auto, sfd_extra="auto_capture = true\nauto_capture_windows = 2\n"
                 "auto_capture_cooldown_s = 600\nauto_capture_steps = 3\n"
                 "capture_timeout_s = 60\n")


def main():
    return run_scenario(globals(), __doc__)


if __name__ == "__main__":
    sys.exit(main())
