#!/usr/bin/python3
"""Multi-node tests: real sfd processes linked by the peer layer, fed by real
ingest senders, queried with the real sfctl.

usage: cluster_test.py BUILD_DIR SCENARIO
scenarios: exact, comm, pipeline, tensor, tree, failover, catchup, catchup_hostile, partition, partition_root, split, faults, hostile,
           preauth, flood, forged, restart_replay, member_keys, credentials

Every wait polls a real condition (a query answer, a log line, a file) under
a generous overall timeout that only fails the test. Network namespaces are
created only by the partition, split and faults scenarios and removed on every exit
path; when they cannot be created the scenario exits with SKIP (77).
"""
import json
import re
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import peer_attacks
from peer_attacks import Watch, free_port, proc_status

SKIP = 77
# Targets of the peer-port attacks (docs/CLUSTER.md, "Attacks on the peer
# port"): STATUS answers within this, and RSS grows by less than this.
STATUS_MAX_S = 1.0
RSS_GROWTH_MAX_MB = 64
# From the start of a trainer process (a sanitizer build, on a loaded 2-core
# machine) to its job being listed by sfd.
TRAINER_CONNECT_MAX_S = 2.0
HB_MS = 100
FT_MS = 800
DEADLINE_MS = 2500
WARMUP = 2
WINDOW = 10
# The documented failover bound (docs/CLUSTER.md): failure_timeout_ms plus five
# heartbeats. The test allows twice that for a loaded 2-core sanitizer build.
FAILOVER_BOUND_S = 2 * (FT_MS + 5 * HB_MS) / 1000.0
TIMEOUT_S = 90


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


class Node:
    def __init__(self, cluster, node_id, host, port):
        self.c = cluster
        self.id = node_id
        self.host = host
        self.port = port
        self.dir = os.path.join(cluster.tmp, "node%d" % node_id)
        os.makedirs(self.dir, exist_ok=True)
        self.query = os.path.join(self.dir, "query.sock")
        self.ingest = os.path.join(self.dir, "ingest.sock")
        self.log = os.path.join(self.dir, "sfd.log")
        self.conf = os.path.join(self.dir, "sfd.conf")
        self.prom = os.path.join(self.dir, "prom")
        os.makedirs(self.prom, exist_ok=True)
        self.netns = None
        self.proc = None
        self.env = None
        self.key_lines = None       # [peer] key settings; None: the cluster key

    def write_conf(self, members):
        peers = ",".join("%d@%s:%d" % (m.id, m.host, m.port) for m in members)
        key = self.key_lines or "cluster_key_file = %s\n" % self.c.key
        with open(self.conf, "w") as f:
            f.write("[sfd]\nruntime_dir = %s\nstate_dir = %s/state\ningest_socket = %s\n"
                    "query_socket = %s\n"
                    "window_grace_ms = 300\nkeep_windows = 64\nlog_level = info\n"
                    "prom_dir = %s\n%s"
                    "[gates]\nwarmup_steps = %d\nwindow_steps = %d\n"
                    "[peer]\nnode_id = %d\npeers = %s\n%s"
                    "heartbeat_ms = %d\nfailure_timeout_ms = %d\nsummary_deadline_ms = %d\n"
                    "fanout = %d\n%s"
                    % (self.dir, self.dir, self.ingest, self.query, self.prom, self.c.sfd_extra,
                       WARMUP, WINDOW,
                       self.id, peers, key, HB_MS, self.c.ft_ms, DEADLINE_MS, self.c.fanout,
                       self.c.peer_extra))

    def start(self):
        if os.path.exists(self.query):
            os.unlink(self.query)
        cmd = [self.c.sfd, "--config", self.conf, "--foreground"]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        self.logf = open(self.log, "a")
        env = dict(self.env or os.environ)
        # Sanitizer builds keep freed memory in quarantine (256 MB by default),
        # which would read as RSS; the attack tests measure sfd's own.
        env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS"),
                                                    "quarantine_size_mb=16") if x)
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env)
        self.c.wait(lambda: os.path.exists(self.query) or self.proc.poll() is not None,
                    "node %d query socket" % self.id)
        check(self.proc.poll() is None, "node %d exited at start" % self.id)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def sfctl(self, *args):
        r = subprocess.run([self.c.sfctl, "--socket", self.query] + list(args),
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout, r.stderr

    def peers(self):
        rc, out, _ = self.sfctl("peers", "--json")
        if rc != 0:
            return None
        try:
            return json.loads(out)
        except ValueError:
            return None

    def status(self):
        rc, out, _ = self.sfctl("status", "--json")
        return json.loads(out) if rc == 0 else None

    def prom_role(self):
        """(role, term) from this node's Prometheus textfile, or None."""
        try:
            with open(os.path.join(self.prom, "stagefrontier.prom")) as f:
                text = f.read()
        except OSError:
            return None
        role = re.search(r'^stagefrontier_daemon_role_info\{role="(\w+)"\} 1$', text, re.M)
        term = re.search(r"^stagefrontier_daemon_term (\d+)$", text, re.M)
        return (role.group(1), int(term.group(1))) if role and term else None

    def report(self, job, window):
        rc, out, _ = self.sfctl("report", job, "--window", str(window), "--json")
        if rc != 0:
            return None
        try:
            arr = json.loads(out)
        except ValueError:
            return None
        if isinstance(arr, dict):
            arr = [arr]
        for w in arr:
            if w.get("window", {}).get("index") == window:
                return w
        return None

    def log_text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def report_lines(self, window):
        tag = "window %d.0: cluster report from root" % window
        return [l for l in self.log_text().splitlines() if tag in l]


class Cluster:
    def __init__(self, build, n, netns=False, fanout=8, members=None, peer_extra="", sfd_extra="",
                 ft_ms=FT_MS):
        self.build = build
        self.sfd = os.path.join(build, "daemon/sfd/sfd")
        self.sfctl = os.path.join(build, "daemon/sfctl/sfctl")
        self.sender = os.path.join(build, "tests/cluster/sf_cluster_sender")
        self.inject = os.path.join(build, "tests/cluster/sf_peer_inject")
        self.tmp = tempfile.mkdtemp(prefix="sf-cluster-")
        os.chmod(self.tmp, 0o755)      # other uids reach the query sockets
        self.fanout = fanout
        self.peer_extra = peer_extra
        self.sfd_extra = sfd_extra
        self.ft_ms = ft_ms
        self.key = os.path.join(self.tmp, "cluster.key")
        fd = os.open(self.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32))
        os.close(fd)
        self.senders = []
        self.namespaces = []
        self.tag = "sfc%d" % os.getpid()
        members = members or n
        if netns:
            self.make_netns(members)
            addrs = [("10.77.0.%d" % (i + 1), 7100) for i in range(members)]
        else:
            addrs = [("127.0.0.1", free_port()) for _ in range(members)]
        self.all = [Node(self, i + 1, h, p) for i, (h, p) in enumerate(addrs)]
        for i, node in enumerate(self.all):
            if netns:
                node.netns = "%s-n%d" % (self.tag, i + 1)
        for node in self.all:
            node.write_conf(self.all)
        self.nodes = self.all[:n]

    # -- network namespaces: a hub with bridges, one namespace per node --
    def ip(self, *args, ns=None):
        cmd = ["ip"] + (["-n", ns] if ns else []) + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise OSError("%s: %s" % (" ".join(cmd), r.stderr.strip()))

    def make_netns(self, n):
        hub = "%s-hub" % self.tag
        self.hub = hub
        self.ip("netns", "add", hub)
        self.namespaces.append(hub)
        self.ip("link", "set", "lo", "up", ns=hub)
        for br in ("br0", "br1"):
            self.ip("link", "add", br, "type", "bridge", ns=hub)
            self.ip("link", "set", br, "up", ns=hub)
        for i in range(n):
            ns = "%s-n%d" % (self.tag, i + 1)
            self.ip("netns", "add", ns)
            self.namespaces.append(ns)
            self.ip("link", "set", "lo", "up", ns=ns)
            self.ip("link", "add", "h%d" % (i + 1), "type", "veth", "peer", "name", "eth0",
                    "netns", ns, ns=hub)
            self.ip("addr", "add", "10.77.0.%d/24" % (i + 1), "dev", "eth0", ns=ns)
            self.ip("link", "set", "eth0", "up", ns=ns)
            self.ip("link", "set", "h%d" % (i + 1), "master", "br0", ns=hub)
            self.ip("link", "set", "h%d" % (i + 1), "up", ns=hub)

    def cut(self, node_id, on):
        """Takes a node's hub-side link down (on=True) or up again."""
        self.ip("link", "set", "h%d" % node_id, "down" if on else "up", ns=self.hub)

    def bridge(self, node_id, br):
        self.ip("link", "set", "h%d" % node_id, "master", br, ns=self.hub)

    def wait(self, cond, what, timeout=TIMEOUT_S):
        end = time.monotonic() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > end:
                raise Fail("timed out waiting for %s" % what)
            time.sleep(0.05)

    def start(self):
        for n in self.nodes:
            n.start()

    def roots(self, nodes=None):
        out = {}
        for n in nodes or self.nodes:
            if n.proc and n.proc.poll() is None:
                p = n.peers()
                out[n.id] = p["root"] if p else None
        return out

    def wait_root(self, root, nodes=None, timeout=TIMEOUT_S):
        nodes = nodes or self.nodes
        self.wait(lambda: all(v == root for v in self.roots(nodes).values()),
                  "root %d on nodes %s" % (root, [n.id for n in nodes]), timeout)

    def send(self, node, job, world, first, last, steps, seed, slow=-1, gate=None, comm=None,
             pp=None, tp=None):
        csv = os.path.join(self.tmp, "ranks-%s-%d-%d.csv" % (job, first, last))
        args = [self.sender, node.ingest, job, str(world), str(first), str(last), str(steps),
                str(seed), csv, str(slow if slow >= 0 else 4294967295)]
        if pp is not None or tp is not None:  # the sync stage, no issue marks
            comm = -1
        if gate or comm is not None:
            args.append(gate or "-")
        if comm is not None:   # issue marks; comm < 0: every rank on time
            args.append(str(comm if comm >= 0 else 4294967295))
        if pp is not None:
            args.append(str(pp))
        elif tp is not None:   # a tensor x data-parallel job with group sync waits
            args.append("tp=%d" % tp)
        p = subprocess.Popen(args, stdin=subprocess.PIPE)
        self.senders.append((p, csv))
        return p

    def finish_senders(self):
        for p, _ in self.senders:
            if p.poll() is None:
                try:
                    p.stdin.write(b"x")
                    p.stdin.close()
                except BrokenPipeError:
                    pass
        for p, _ in self.senders:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()

    def replay(self, names, windows):
        path = os.path.join(self.tmp, "all.csv")
        rows = []
        for _, csv in self.senders:
            with open(csv) as f:
                rows += [l for l in f.read().splitlines() if l]
        rows.sort(key=lambda l: (int(l.split(",")[0]), int(l.split(",")[1])))
        with open(path, "w") as f:
            f.write("step,rank," + ",".join(names) + "\n")
            f.write("\n".join(rows) + "\n")
        r = subprocess.run([self.sfctl, "replay", "--json", "--warmup-steps", str(WARMUP),
                            "--window-steps", str(WINDOW), path],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "sfctl replay failed: %s" % r.stderr)
        arr = json.loads(r.stdout)
        return {w["window"]["index"]: w for w in arr if w["window"]["index"] in windows}

    def stop_checked(self):
        """Stops every running daemon with SIGTERM and checks it exited
        cleanly, with no sanitizer report in its log."""
        self.finish_senders()
        for n in self.all:
            if n.proc is None or n.proc.returncode is not None:
                continue
            n.stop()
            check(n.proc.returncode == 0, "node %d exited with %d" % (n.id, n.proc.returncode))
        for n in self.all:
            if n.proc is None or not os.path.exists(n.log):
                continue
            log = n.log_text()
            for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
                check(bad not in log, "node %d: %s in its log" % (n.id, bad))

    def close(self):
        self.finish_senders()
        for n in self.all:
            n.stop()
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if os.environ.get("SF_KEEP_TMP"):
            print("kept", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def dump_logs(self):
        for n in self.all:
            if os.path.exists(n.log):
                print("---- node %d log (tail) ----" % n.id)
                print("\n".join(n.log_text().splitlines()[-40:]))


STAGES = ["data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
          "callbacks.cpu_wall", "optim.step_cpu_wall", "step.other_cpu_wall"]


def with_cluster(build, body, dir_keys=(0, 1), members=None, sfd_extra=""):
    """Runs body(cluster, capture_dirs, client_procs) on 3 started nodes with
    root 1, then stops them checked; cleans up on every exit path.
    capture_dirs maps each of dir_keys to a fresh temporary directory."""
    c = Cluster(build, 3, members=members, sfd_extra=sfd_extra)
    dirs = {k: tempfile.mkdtemp(prefix="sf-cap%s-" % k) for k in dir_keys}
    procs = []
    try:
        c.start()
        c.wait_root(1)
        summary = body(c, dirs, procs)
        for p in procs:
            p.kill()
            p.wait()
        c.stop_checked()
        print(summary)
    except Exception:
        c.dump_logs()
        raise
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        c.close()
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)


def compare_exact(live, ref, where):
    """Every field the report marks exact must be equal, at the top level, in
    each stage and group, and in each rank entry."""
    exact = [k for k, v in live["exact"].items() if v]
    check(exact, "%s: no exact fields" % where)
    compared = 0
    for k in exact:
        if k in live or k in ref:
            check(live.get(k) == ref.get(k), "%s: %s differs: %r != %r"
                  % (where, k, live.get(k), ref.get(k)))
            compared += 1
        for table in ("stages", "groups", "ranks"):
            a, b = live.get(table) or [], ref.get(table) or []
            check(len(a) == len(b), "%s: %s length differs" % (where, table))
            for x, y in zip(a, b):
                if k in x or k in y:
                    check(x.get(k) == y.get(k), "%s: %s.%s differs: %r != %r"
                          % (where, table, k, x.get(k), y.get(k)))
                    compared += 1
    for k in ("steps", "ranks", "world_size", "missing_ranks", "incomplete_steps",
              "first_step", "last_step"):
        check(live["window"].get(k) == ref["window"].get(k),
              "%s: window.%s differs" % (where, k))
    return compared


def reports_everywhere(cluster, nodes, job, windows):
    def ready():
        return all(n.report(job, w) is not None for n in nodes for w in windows)
    cluster.wait(ready, "reports of windows %s on nodes %s" % (windows, [n.id for n in nodes]))


def once_per_window(nodes, windows):
    """Each node got exactly one cluster report per window, all from the same
    root and term."""
    origin = {}
    for n in nodes:
        for w in windows:
            lines = n.report_lines(w)
            check(len(lines) == 1, "node %d: window %d reported %d times"
                  % (n.id, w, len(lines)))
            src = lines[0].split("cluster report from ")[1]
            check(origin.setdefault(w, src) == src,
                  "window %d: node %d has %s, another node %s" % (w, n.id, src, origin[w]))


# ---- scenarios ---------------------------------------------------------------

def scenario_exact(build, fanout=8):
    # Node 5 holds no rank of the job: it answers from the reports pushed to it.
    c = Cluster(build, 5, fanout=fanout)
    try:
        c.start()
        c.wait_root(1)
        job, world, steps = "exact-job", 12, WARMUP + 3 * WINDOW + 3
        for i, n in enumerate(c.nodes[:4]):
            c.send(n, job, world, 3 * i, 3 * i + 2, steps, seed=11, slow=7)
        windows = [0, 1, 2]
        reports_everywhere(c, c.nodes, job, windows)
        ref = c.replay(STAGES, windows)
        total = 0
        for w in windows:
            root = c.nodes[0].report(job, w)
            total += compare_exact(root, ref[w], "window %d" % w)
            for n in c.nodes[1:]:
                check(n.report(job, w) == root, "node %d's report of window %d differs from "
                      "the root's" % (n.id, w))
            check(root["window"]["ranks"] == world, "window %d: not every rank" % w)
            check("late_or_failed_summary" not in root["downgrade_reasons"],
                  "window %d downgraded without a failure" % w)
        once_per_window(c.nodes, windows)
        p = c.nodes[2].peers()
        check(p["root"] == 1 and len(p["members"]) == 5, "peers view: %r" % p)
        check_roles(c, c.nodes, root_id=1)
        rc, out, _ = c.nodes[2].sfctl("peers")
        check(rc == 0 and "root 1, term" in out and out.count("\n") >= 6,
              "sfctl peers: %r" % out)
        print(out)
        if fanout < 4:
            fwd = sum(n.peers()["counters"]["summaries_received"] for n in c.nodes[1:])
            check(fwd > 0, "no summary went through an inner node of the tree")
        c.stop_checked()
        print("exact (fanout %d): %d fields compared over %d windows"
              % (fanout, total, len(windows)))
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def scenario_comm(build):
    """A rank that issues its all-reduce 3 ms after it arrives, on one node of
    three: the root names it with the same communication verdict, field for
    field, as one node that holds every rank; a clean job of the same shape
    gets no verdict on either, with every row marked."""
    c, one = Cluster(build, 3), Cluster(build, 1)
    try:
        c.start()
        one.start()
        c.wait_root(1)
        one.wait_root(1)
        world, steps, late = 6, WARMUP + 2 * WINDOW + 3, 4
        jobs = {"comm-late": late, "comm-clean": -1}
        for job, comm in jobs.items():
            for i, n in enumerate(c.nodes):
                c.send(n, job, world, 2 * i, 2 * i + 1, steps, seed=5, comm=comm)
            one.send(one.nodes[0], job, world, 0, world - 1, steps, seed=5, comm=comm)
        windows = [0, 1]
        for job in jobs:
            reports_everywhere(c, c.nodes, job, windows)
            reports_everywhere(one, one.nodes, job, windows)
        for job, comm in jobs.items():
            for w in windows:
                root = c.nodes[0].report(job, w)["communication"]
                ref = one.nodes[0].report(job, w)["communication"]
                check(root == ref, "%s window %d: root %r, one node %r" % (job, w, root, ref))
                check(root["visibility"] == "seen" and root["marked_rows"] == root["rows"] > 0,
                      "%s window %d: marks %r" % (job, w, root))
                v = root["verdict"]
                if comm < 0:
                    check(v is None, "%s window %d: a verdict on a clean job: %r" % (job, w, v))
                else:
                    check(v is not None and v["rank"] == late and
                          v["sync_stage"] == STAGES[2] and v["led_steps"] == v["eligible_steps"],
                          "%s window %d: verdict %r" % (job, w, v))
        c.finish_senders()
        one.finish_senders()
        c.stop_checked()
        one.stop_checked()
        print("comm: root and one node agree on %d windows of %d jobs" % (len(windows), len(jobs)))
    except Exception:
        c.dump_logs()
        one.dump_logs()
        raise
    finally:
        c.close()
        one.close()


def scenario_pipeline(build):
    """A declared 2-stage pipeline x 3-way data-parallel job whose hidden
    rank 2 (pipeline stage 0) is 8 ms slow in backward, its ranks two to a
    node on three nodes, so each cohort spans nodes: the root applies the
    cohorts and names rank 2, with the same straggler verdict, suspects,
    labels and pipeline view as one node that holds every rank."""
    c, one = Cluster(build, 3), Cluster(build, 1)
    try:
        c.start()
        one.start()
        c.wait_root(1)
        one.wait_root(1)
        world, steps, hidden, job = 6, WARMUP + 2 * WINDOW + 3, 2, "pp-dp"
        for i, n in enumerate(c.nodes):
            c.send(n, job, world, 2 * i, 2 * i + 1, steps, seed=9, slow=hidden, pp=2)
        one.send(one.nodes[0], job, world, 0, world - 1, steps, seed=9, slow=hidden, pp=2)
        windows = [0, 1]
        reports_everywhere(c, c.nodes, job, windows)
        reports_everywhere(one, one.nodes, job, windows)
        for w in windows:
            root, ref = c.nodes[0].report(job, w), one.nodes[0].report(job, w)
            for key in ("straggler", "suspect_ranks", "labels", "pipeline"):
                check(root.get(key) == ref.get(key),
                      "window %d %s: root %r, one node %r" % (w, key, root.get(key), ref.get(key)))
            check("role_aware_applied" in root["labels"], "window %d labels %r" % (w, root["labels"]))
            v = root["straggler"]
            check(v is not None and v["rank"] == hidden and v["sync_stage"] == STAGES[2],
                  "window %d: straggler %r" % (w, v))
            p = root.get("pipeline") or {}
            o = p.get("origin") or {}
            check(p.get("pipeline_stages") == 2 and o.get("rank") == hidden and
                  o.get("pipeline_stage") == 0, "window %d: pipeline %r" % (w, p))
        c.finish_senders()
        one.finish_senders()
        c.stop_checked()
        one.stop_checked()
        print("pipeline: root and one node name rank %d in %d windows" % (hidden, len(windows)))
    except Exception:
        c.dump_logs()
        one.dump_logs()
        raise
    finally:
        c.close()
        one.close()


def check_roles(c, nodes, root_id):
    """STATUS and the Prometheus export tell each node's cluster role and the
    term the peers view shows, once the export has caught up (1 s timer)."""
    term = next(n for n in nodes if n.id == root_id).peers()["term"]
    check(term >= 1, "no term after an election")
    for n in nodes:
        want = ("root" if n.id == root_id else "follower", term)
        st = n.status()
        check(st["mode"] == "cluster" and (st["role"], st["term"]) == want,
              "node %d STATUS: mode %s role %s term %s, want %s"
              % (n.id, st.get("mode"), st.get("role"), st.get("term"), want))
        c.wait(lambda: n.prom_role() == want, "node %d Prometheus role %s" % (n.id, want))
    rc, out, _ = nodes[0].sfctl("status")
    check(rc == 0 and "cluster:" in out and "term %d" % term in out, "sfctl status: %r" % out)


def scenario_tensor(build):
    """A declared 2-way tensor x 3-way data-parallel job whose stage SYNC
    holds four all-reduces of its tp group, the hidden rank 4 6 ms slow in
    one layer and its tp peer rank 1 the last to reach the stage's last sync
    point; its ranks two to a node on three nodes, so every tp group and
    every cohort spans two nodes: the root's report names rank 4 by the wait
    rule, rank 1 its victim, with the same verdict, suspects and labels as
    one node that holds every rank; a clean job of the same shape gets no tp
    verdict on either."""
    c, one = Cluster(build, 3), Cluster(build, 1)
    try:
        c.start()
        one.start()
        c.wait_root(1)
        one.wait_root(1)
        world, steps, hidden, victim = 6, WARMUP + 2 * WINDOW + 3, 4, 1
        jobs = {"tp-dp": hidden, "tp-dp-clean": -1}
        for job, slow in jobs.items():
            for i, n in enumerate(c.nodes):
                c.send(n, job, world, 2 * i, 2 * i + 1, steps, seed=11, slow=slow, tp=2)
            one.send(one.nodes[0], job, world, 0, world - 1, steps, seed=11, slow=slow, tp=2)
        windows = [0, 1]
        for job in jobs:
            reports_everywhere(c, c.nodes, job, windows)
            reports_everywhere(one, one.nodes, job, windows)
        for job, slow in jobs.items():
            for w in windows:
                root, ref = c.nodes[0].report(job, w), one.nodes[0].report(job, w)
                for key in ("straggler", "suspect_ranks", "labels"):
                    check(root.get(key) == ref.get(key), "%s window %d %s: root %r, one node %r" %
                          (job, w, key, root.get(key), ref.get(key)))
                check("role_aware_applied" in root["labels"],
                      "%s window %d labels %r" % (job, w, root["labels"]))
                v = root["straggler"]
                if slow < 0:
                    check(v is None or v.get("group") != "tp",
                          "%s window %d: a tp verdict on a clean job: %r" % (job, w, v))
                    continue
                check(v is not None and v["rank"] == hidden and v["origin"] == "wait" and
                      v["group"] == "tp" and v["victim_rank"] == victim and
                      v["sync_stage"] == STAGES[2], "%s window %d: straggler %r" % (job, w, v))
        c.finish_senders()
        one.finish_senders()
        c.stop_checked()
        one.stop_checked()
        print("tensor: root and one node name rank %d by the wait rule in %d windows" %
              (hidden, len(windows)))
    except Exception:
        c.dump_logs()
        one.dump_logs()
        raise
    finally:
        c.close()
        one.close()


def scenario_tree(build):
    """The same exactness through a fan-in tree of fanout 1 (a chain): inner
    nodes merge their children's summaries and relay the reports down."""
    scenario_exact(build, fanout=1)


def report_acks(node):
    c = node.peers()["counters"]
    return c["report_acks_deferred"], c["report_acks_late"]


def scenario_prompt_acks(build):
    """Seven nodes: the root asks a majority and a margin to acknowledge a
    proposal at once (nodes 2 to 6), node 7 only if the report is not final
    two heartbeat periods later. Then three of the prompt five are stopped
    while the root still counts them live (a long failure timeout), so only
    node 7's late acknowledgement can make the majority."""
    c = Cluster(build, 7, ft_ms=30000)
    stopped = c.nodes[2:5]
    try:
        c.start()
        c.wait_root(1)
        c.wait(lambda: all((live_view(c.nodes[0]) or {0: False}).values()),
               "every member live in the root's view")
        job, world = "prompt-job", 8
        gate = os.path.join(c.tmp, "gate")
        set_gate(gate, WARMUP + 2 * WINDOW + 2)
        steps = WARMUP + 4 * WINDOW + 2
        running = [c.nodes[i] for i in (0, 1, 5, 6)]
        for i, n in enumerate(running):
            c.send(n, job, world, 2 * i, 2 * i + 1, steps, seed=3, gate=gate)
        reports_everywhere(c, c.nodes, job, [0, 1])
        for n in c.nodes[1:6]:
            check(report_acks(n) == (0, 0), "node %d held an acknowledgement back: %r"
                  % (n.id, report_acks(n)))
        deferred, late = report_acks(c.nodes[6])
        check(deferred >= 2, "node 7 held back %d acknowledgements of 2" % deferred)
        for n in stopped:
            n.proc.send_signal(signal.SIGSTOP)
        set_gate(gate, steps)
        reports_everywhere(c, running, job, [2, 3])
        deferred2, late2 = report_acks(c.nodes[6])
        check(deferred2 >= deferred + 2 and late2 >= late + 2,
              "node 7 after the stop: held back %d, sent late %d (before: %d, %d)"
              % (deferred2, late2, deferred, late))
        once_per_window(running, [0, 1, 2, 3])
        for n in stopped:
            n.proc.send_signal(signal.SIGCONT)
        c.stop_checked()
        print("prompt acknowledgements: node 7 held back %d, sent %d late" % (deferred2, late2))
    except Exception:
        c.dump_logs()
        raise
    finally:
        for n in stopped:
            if n.proc and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGCONT)
        c.close()


def scenario_failover(build):
    c = Cluster(build, 3)
    try:
        c.start()
        c.wait_root(1)
        job, world = "failover-job", 9
        # Nodes 1 and 2 run ahead (gate a); node 3 lags (gate b), so window 1
        # sits at the root with only part of its coverage when the root dies.
        gate_a, gate_b = os.path.join(c.tmp, "gate_a"), os.path.join(c.tmp, "gate_b")
        set_gate(gate_a, WARMUP + 2 * WINDOW + 2)
        set_gate(gate_b, WARMUP + WINDOW + 4)
        steps = WARMUP + 4 * WINDOW + 2
        for i, n in enumerate(c.nodes):
            c.send(n, job, world, 3 * i, 3 * i + 2, steps, seed=5,
                   gate=gate_b if i == 2 else gate_a)
        reports_everywhere(c, c.nodes, job, [0])
        c.wait(lambda: (c.nodes[0].peers() or {}).get("windows_pending", 0) >= 1,
               "window 1 pending at the root")
        c.nodes[0].kill()
        killed = time.monotonic()
        survivors = c.nodes[1:]
        c.wait_root(2, survivors, timeout=TIMEOUT_S)
        took = time.monotonic() - killed
        check(took <= FAILOVER_BOUND_S, "new root after %.2f s > %.2f s" % (took, FAILOVER_BOUND_S))
        check_roles(c, survivors, root_id=2)
        set_gate(gate_a, steps)
        set_gate(gate_b, steps)
        windows = [0, 1, 2, 3]
        reports_everywhere(c, survivors, job, windows)
        once_per_window(survivors, windows)
        for w in (1, 2, 3):
            r = survivors[0].report(job, w)
            check("late_or_failed_summary" in r["downgrade_reasons"],
                  "window %d after the failover lacks late_or_failed_summary: %r"
                  % (w, r["downgrade_reasons"]))
            # node 1's ranks died with it; nodes 2 and 3 are all there, so
            # node 2's summary of window 1, sent to the old root, was kept
            # and given to the new one
            check(r["window"]["ranks"] == 6 and r["window"]["missing_ranks"] == 3,
                  "window %d: %r" % (w, r["window"]))
        r0 = survivors[0].report(job, 0)
        check("late_or_failed_summary" not in r0["downgrade_reasons"],
              "window 0, before the failover, is downgraded")
        resent = survivors[0].peers()["counters"]["summaries_resent"]
        check(resent >= 1, "node 2 resent nothing after the failover")
        # the killed node restarts with a new boot epoch: accepted, not taken
        # for a replay, and as the lowest id it becomes root again
        c.nodes[0].start()
        c.wait_root(1)
        for n in c.nodes[1:]:
            check(n.peers()["counters"]["rejected_replay"] == 0,
                  "node %d took the restarted node for a replay" % n.id)
        c.stop_checked()
        print("failover: new root in %.2f s, %d summaries resent" % (took, resent))
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def scenario_catchup(build):
    """A node restarted with the same id catches up: windows finished while
    it was away are fetched from the root (docs/CLUSTER.md, "Catch-up"), so
    it answers for every kept window, each exactly as the root reports it
    and delivered once."""
    c = Cluster(build, 3)
    try:
        c.start()
        c.wait_root(1)
        job, world = "catchup-job", 6
        gate = os.path.join(c.tmp, "gate")
        set_gate(gate, WARMUP + WINDOW + 2)
        steps = WARMUP + 4 * WINDOW + 2
        # Node 3 hosts no rank: it knows the job from the cluster's reports alone.
        for i, n in enumerate(c.nodes[:2]):
            c.send(n, job, world, 3 * i, 3 * i + 2, steps, seed=17, gate=gate)
        reports_everywhere(c, c.nodes, job, [0])
        away = c.nodes[2]
        away.kill()
        set_gate(gate, WARMUP + 3 * WINDOW + 2)
        reports_everywhere(c, c.nodes[:2], job, [1, 2])
        check(away.report_lines(1) == [], "node 3 reported window 1 while it was down")
        away.start()
        c.wait_root(1)
        # At least once: a term change while it rejoins (a slow start under
        # load) makes it catch up again from the new root.
        c.wait(lambda: (away.peers() or {}).get("counters", {}).get("catchups_done", 0) >= 1,
               "node 3 to catch up")
        for w in (0, 1, 2):
            mine = c.wait(lambda: away.report(job, w), "node 3's report of window %d" % w)
            check(mine == c.nodes[0].report(job, w),
                  "node 3's report of window %d differs from the root's" % w)
        rc, _, err = away.sfctl("report", job, "--window", "2")
        check(rc == 0, "sfctl report --window 2 on node 3: rc %d %s" % (rc, err))
        for w in (1, 2):
            check(len(away.report_lines(w)) == 1, "node 3: window %d delivered %d times"
                  % (w, len(away.report_lines(w))))
        served = c.nodes[0].peers()["counters"]
        check(served["catchups_served"] >= 1 and served["catchup_reports_sent"] >= 3,
              "root's catch-up counters: %r" % served)
        check(served["rejected_catchup"] == 0, "root refused a catch-up: %r" % served)
        set_gate(gate, steps)
        reports_everywhere(c, c.nodes, job, [3])
        once_per_window(c.nodes[:2], [0, 1, 2, 3])
        check(len(away.report_lines(3)) == 1, "node 3: window 3 not delivered once")
        c.stop_checked()
        print("catchup: node 3 fetched %d reports after its restart"
              % served["catchup_reports_sent"])
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def scenario_catchup_hostile(build):
    """Catch-up messages from a key holder, as configured member 4 (never
    started): keep_windows 0 and past 4096 refused, a valid request served
    once and a second within the second refused, an answer nobody asked for
    refused; each counted in rejected_catchup, the cluster unchanged."""
    def body(c, dirs, procs):
        root, other = c.nodes[0], c.nodes[1]
        epoch = [0]

        def inject(node, mode, value, seq=1):
            # A new boot epoch for each, except a later message of the last
            # one (seq > 1): a restarted member is a new asker, never throttled.
            epoch[0] += seq == 1
            env = dict(os.environ, SF_INJECT_EPOCH=str(epoch[0]), SF_INJECT_SEQ=str(seq))
            r = subprocess.run([c.inject, node.host, str(node.port), c.key, "4", str(node.id),
                                mode, str(value), str(node.peers()["term"])],
                               capture_output=True, timeout=60, env=env)
            check(r.returncode == 0, "injector: %s" % r.stderr)

        def counters(node):
            return node.peers()["counters"]
        # The members' own catch-ups at startup are served by the root too:
        # count from after them.
        c.wait(lambda: all(counters(n).get("catchups_done", 0) >= 1 for n in c.nodes[1:]),
               "the members' startup catch-ups")
        served = counters(root)["catchups_served"]
        for n, (mode, value) in enumerate((("catchup", 0), ("catchup", 4097))):
            inject(root, mode, value)
            c.wait(lambda: counters(root)["rejected_catchup"] == n + 1,
                   "catch-up request %s %d refused" % (mode, value))
        inject(root, "catchup", 16)
        c.wait(lambda: counters(root)["catchups_served"] == served + 1, "a valid request served")
        inject(root, "catchup", 16, seq=2)
        c.wait(lambda: counters(root)["rejected_catchup"] == 3, "a second request refused")
        check(counters(root)["catchups_served"] == served + 1, "served twice within a second")
        inject(other, "catchupdone", 2)
        c.wait(lambda: counters(other)["rejected_catchup"] == 1, "an unasked answer refused")
        check("refused a catch-up message from node 4" in root.log_text(),
              "the refusal is not logged")
        c.wait_root(1)
        return "catchup_hostile: 3 requests and 1 answer refused, 1 request served"
    with_cluster(build, body, dir_keys=(), members=4)


def live_view(node):
    """{member id: live} as one node sees it, or None while it does not answer."""
    p = node.peers()
    return {m["id"]: m["live"] for m in p["members"]} if p else None


def frames_out_rate(node, seconds):
    """Frames this node sends per heartbeat period, over `seconds`."""
    f0, t0 = node.peers()["counters"]["frames_out"], time.monotonic()
    time.sleep(seconds)
    f1, t1 = node.peers()["counters"]["frames_out"], time.monotonic()
    return (f1 - f0) / ((t1 - t0) * 1000.0 / HB_MS)


def scenario_liveness(build):
    """Heartbeats along a fan-in tree of fanout 2 over 7 nodes (root 1; 2 and
    3 under it; 4, 5 under 2; 6, 7 under 3): each member sends a heartbeat
    or so per period, not one per member; a dead leaf and a dead inner node
    drop out of every node's view; the inner node's children rejoin; the
    root's death elects node 2 with the 4 of 7 left (a bare majority)."""
    c = Cluster(build, 7, fanout=2)
    # A member's death reaches the root's view within its parent's failure
    # timeout plus the root's, and the other nodes one failure timeout later
    # (docs/CLUSTER.md, "Liveness"); twice that for a loaded sanitizer build.
    notice_bound_s = 2 * (3 * FT_MS + 4 * HB_MS) / 1000.0
    try:
        c.start()
        c.wait_root(1)
        ids = [n.id for n in c.nodes]
        c.wait(lambda: all((live_view(n) or {}).get(i) for n in c.nodes for i in ids),
               "every node sees every member live")
        # a leaf sends up to its parent only; the root down to its 2 children
        dialled = [n.peers()["counters"]["links_dialled"] for n in c.nodes]
        leaf_rate, root_rate = frames_out_rate(c.nodes[6], 2.0), frames_out_rate(c.nodes[0], 2.0)
        check(leaf_rate <= 1.5, "leaf 7 sends %.2f frames per heartbeat period" % leaf_rate)
        check(root_rate <= 2.5, "root 1 sends %.2f frames per heartbeat period" % root_rate)
        # links that hold are never dialled again (5 failure timeouts went by)
        redialled = [n.peers()["counters"]["links_dialled"] - d for n, d in zip(c.nodes, dialled)]
        check(redialled == [0] * 7, "links dialled again while every member was live: %s" %
              redialled)
        # a leaf dies: every survivor's view drops it
        c.nodes[4].kill()
        killed = time.monotonic()
        alive = [n for n in c.nodes if n.id != 5]
        c.wait(lambda: all((live_view(n) or {}).get(5) is False for n in alive),
               "every node sees member 5 dead")
        took_leaf = time.monotonic() - killed
        check(took_leaf <= notice_bound_s,
              "member 5's death seen everywhere after %.2f s > %.2f s" % (took_leaf, notice_bound_s))
        # an inner node dies: its children 6 and 7 rejoin under the root
        c.nodes[2].kill()
        killed = time.monotonic()
        alive = [n for n in alive if n.id != 3]
        c.wait(lambda: all((live_view(n) or {}).get(3) is False and
                           all((live_view(n) or {}).get(m.id) for m in alive) for n in alive),
               "every node sees member 3 dead and 1, 2, 4, 6, 7 live")
        took_inner = time.monotonic() - killed
        check(took_inner <= 2 * notice_bound_s,
              "after the inner node's death the views agreed after %.2f s" % took_inner)
        c.wait_root(1, alive)
        # the root dies: 2, 4, 6, 7 are 4 of 7, a majority, and elect node 2
        c.nodes[0].kill()
        killed = time.monotonic()
        alive = [n for n in alive if n.id != 1]
        c.wait_root(2, alive, timeout=TIMEOUT_S)
        took_root = time.monotonic() - killed
        check(took_root <= 2 * FAILOVER_BOUND_S,
              "new root after %.2f s > %.2f s" % (took_root, 2 * FAILOVER_BOUND_S))
        check_roles(c, alive, root_id=2)
        c.stop_checked()
        print("liveness: leaf %.2f and root %.2f frames per period; member death seen in %.2f s, "
              "inner node in %.2f s; new root in %.2f s" % (leaf_rate, root_rate, took_leaf,
                                                           took_inner, took_root))
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def sweep_stale_namespaces():
    """Removes namespaces left by an earlier run that was killed outright
    (a ctest timeout): their creator's pid is gone."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for ns in (l.split()[0] for l in out.splitlines() if l.strip()):
        if not ns.startswith("sfc") or "-" not in ns:
            continue
        pid = ns[3:].split("-")[0]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def netns_cluster(build, n):
    sweep_stale_namespaces()
    try:
        return Cluster(build, n, netns=True)
    except OSError as e:
        print("SKIP: cannot create network namespaces: %s" % e)
        for ns in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                 text=True).stdout.split():
            if ns.startswith("sfc%d-" % os.getpid()):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        sys.exit(SKIP)


def set_gate(gate, step):
    with open(gate + ".tmp", "w") as f:
        f.write("%d\n" % step)
    os.rename(gate + ".tmp", gate)


def scenario_partition(build, cut_id=3):
    c = netns_cluster(build, 3)
    try:
        c.start()
        c.wait_root(1)
        job, world = "cut-job", 9
        gate = os.path.join(c.tmp, "gate")
        set_gate(gate, WARMUP + WINDOW + 2)
        steps = WARMUP + 4 * WINDOW + 2
        for i, n in enumerate(c.nodes):
            c.send(n, job, world, 3 * i, 3 * i + 2, steps, seed=9, gate=gate)
        reports_everywhere(c, c.nodes, job, [0])
        cut = c.nodes[cut_id - 1]
        rest = [n for n in c.nodes if n is not cut]
        c.cut(cut_id, True)
        # the cut node loses its root (a cut root steps down), never claims
        # one, and the rest agree on the lowest id among them
        c.wait(lambda: (cut.peers() or {}).get("root") == 0, "node %d to lose its root" % cut_id)
        c.wait_root(rest[0].id, rest)
        set_gate(gate, WARMUP + 3 * WINDOW + 2)
        reports_everywhere(c, rest, job, [1, 2])
        held = c.wait(lambda: (cut.peers() or {}).get("summaries_in_flight", 0) > 0,
                      "node %d to hold its summaries" % cut_id)
        for _ in range(20):
            p = cut.peers()
            check(p["role"] != "root" and p["root"] == 0,
                  "node %d claimed a root while cut" % cut_id)
            time.sleep(0.05)
        for w in (1, 2):
            r = rest[0].report(job, w)
            check("late_or_failed_summary" in r["downgrade_reasons"] and
                  r["window"]["missing_ranks"] == 3, "window %d while cut: %r" % (w, r["window"]))
        c.cut(cut_id, False)
        # after the heal: no restart, the retained summaries are delivered and
        # answered, and the cut node has every report
        c.wait_root(1)
        set_gate(gate, steps)
        reports_everywhere(c, c.nodes, job, [0, 1, 2, 3])
        c.wait(lambda: cut.peers()["summaries_in_flight"] == 0,
               "node %d to empty its retained set" % cut_id)
        once_per_window(c.nodes, [0, 1, 2, 3])
        check(cut.proc.poll() is None, "node %d restarted" % cut_id)
        c.stop_checked()
        print("partition: node %d held %s summaries while cut" % (cut_id, bool(held)))
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def scenario_partition_root(build):
    """The root itself is cut off: it steps down, the majority elects the
    next id, and after the heal every node has one report per window."""
    scenario_partition(build, cut_id=1)


def scenario_split(build):
    c = netns_cluster(build, 5)
    try:
        c.start()
        c.wait_root(1)
        job, world = "split-job", 10
        gate = os.path.join(c.tmp, "gate")
        set_gate(gate, WARMUP + WINDOW + 2)
        steps = WARMUP + 3 * WINDOW + 2
        for i, n in enumerate(c.nodes):
            c.send(n, job, world, 2 * i, 2 * i + 1, steps, seed=3, gate=gate)
        reports_everywhere(c, c.nodes, job, [0])
        for i in (1, 2):
            c.bridge(i, "br1")
        minority, majority = c.nodes[:2], c.nodes[2:]
        c.wait_root(3, majority)
        c.wait(lambda: all((n.peers() or {}).get("root") == 0 for n in minority),
               "the minority to have no root")
        set_gate(gate, WARMUP + 2 * WINDOW + 2)
        reports_everywhere(c, majority, job, [1])
        for _ in range(20):
            check(all(n.peers()["root"] == 0 for n in minority), "the minority elected a root")
            time.sleep(0.05)
        for i in (1, 2):
            c.bridge(i, "br0")
        c.wait_root(1)
        set_gate(gate, steps)
        reports_everywhere(c, c.nodes, job, [0, 1, 2])
        once_per_window(c.nodes, [0, 1, 2])
        c.stop_checked()
        print("split: only the majority had a root")
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


class RoleRecorder:
    """Polls every running node's PEERS view in a thread of its own and
    records (term, root claimed) as each node saw it, for the check that no
    term has two roots."""

    def __init__(self, c):
        import threading
        self.c = c
        self.roots_by_term = {}     # term -> ids of the nodes that were root in it
        self.seen = {}              # node id -> set of (term, root it followed)
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            for n in self.c.nodes:
                if n.proc is None or n.proc.poll() is not None:
                    continue
                p = n.peers()
                if p is None:
                    continue
                self.seen.setdefault(n.id, set()).add((p["term"], p["root"]))
                if p["role"] == "root":
                    self.roots_by_term.setdefault(p["term"], set()).add(n.id)
            self.stop_flag.wait(0.1)

    def finish(self):
        self.stop_flag.set()
        self.thread.join()
        for term, ids in sorted(self.roots_by_term.items()):
            check(len(ids) == 1, "term %d had roots %s" % (term, sorted(ids)))
        return self.roots_by_term


def report_counts(nodes):
    return {n.id: len([l for l in n.log_text().splitlines() if "cluster report from root" in l])
            for n in nodes}


def scenario_faults(build):
    """Five nodes in network namespaces through three faults in turn: the
    root cut off, then healed; a minority (two nodes) cut off, then healed;
    a node flapping (four cuts). Recorded on every node: the term, the root and every
    report published. Checked: at most one root per term; the minority
    publishes nothing while cut; after healing every window is reported
    exactly once on every node, from one root and term, and identically."""
    c = netns_cluster(build, 5)
    rec = None
    try:
        c.start()
        c.wait_root(1)
        rec = RoleRecorder(c)
        job, world = "faults-job", 10
        gate = os.path.join(c.tmp, "gate")
        windows = list(range(5))
        steps = WARMUP + len(windows) * WINDOW + 2

        def through(w):
            set_gate(gate, WARMUP + (w + 1) * WINDOW + 2)
        through(0)
        for i, n in enumerate(c.nodes):
            c.send(n, job, world, 2 * i, 2 * i + 1, steps, seed=23, gate=gate)
        reports_everywhere(c, c.nodes, job, [0])

        # 1. the root cut off: the other four elect node 2; healed, node 1 again
        c.cut(1, True)
        c.wait_root(2, c.nodes[1:])
        through(1)
        reports_everywhere(c, c.nodes[1:], job, [1])
        c.cut(1, False)
        c.wait_root(1)
        reports_everywhere(c, c.nodes, job, [0, 1])

        # 2. a minority cut off: nodes 1 and 2 on a bridge of their own
        minority, majority = c.nodes[:2], c.nodes[2:]
        for n in minority:
            c.bridge(n.id, "br1")
        c.wait_root(3, majority)
        c.wait(lambda: all((n.peers() or {}).get("root") == 0 for n in minority),
               "the minority to have no root")
        before = report_counts(minority)
        through(2)
        reports_everywhere(c, majority, job, [2])
        check(report_counts(minority) == before,
              "the minority published while cut: %r -> %r" % (before, report_counts(minority)))
        for n in minority:
            c.bridge(n.id, "br0")
        c.wait_root(1)

        # 3. node 4 flapping: four cuts, each past the failure timeout, while
        # windows finish
        through(4)
        for _ in range(4):
            c.cut(4, True)
            time.sleep(2 * FT_MS / 1000.0)   # the fault's length, not a wait for a condition
            c.cut(4, False)
            time.sleep(2 * FT_MS / 1000.0)
        c.wait_root(1)
        set_gate(gate, steps)
        reports_everywhere(c, c.nodes, job, windows)
        terms = rec.finish()
        rec = None
        once_per_window(c.nodes, windows)
        for w in windows:
            ref = c.nodes[0].report(job, w)
            for n in c.nodes[1:]:
                check(n.report(job, w) == ref, "node %d's report of window %d differs" % (n.id, w))
        c.stop_checked()
        print("faults: %d windows once and alike on 5 nodes; terms with a root: %s"
              % (len(windows), {t: sorted(ids) for t, ids in sorted(terms.items())}))
    except Exception:
        c.dump_logs()
        raise
    finally:
        if rec is not None:
            rec.stop_flag.set()
            rec.thread.join()
        c.close()


def check_one_connection_a_member(c, root):
    """A member holds one inbound connection: a second one that
    authenticates as member 4 replaces the first, which the root closes
    though its other end stays open (a half-open link after a cut)."""
    def hold(seq, seconds):
        env = dict(os.environ, SF_INJECT_EPOCH="3", SF_INJECT_SEQ=str(seq),
                   SF_INJECT_HOLD_S=str(seconds))
        return subprocess.Popen([c.inject, root.host, str(root.port), c.key, "4", "1", "hold"],
                                env=env, stdout=subprocess.PIPE, text=True)
    before = root.peers()["inbound"]
    first = hold(1, 60)
    c.wait(lambda: root.peers()["inbound"] == before + 1 and
           root.peers()["unauthenticated"] == 0, "member 4's first connection to authenticate")
    second = hold(2, 2)
    check(first.communicate(timeout=90)[0].strip() == "closed",
          "member 4's first connection was left open beside the second")
    check(second.communicate(timeout=90)[0].strip() == "open",
          "member 4's second connection was closed")


def scenario_hostile(build):
    # Four configured members, three running: the injector speaks as member 4.
    c = Cluster(build, 3, members=4)
    try:
        c.start()
        c.wait_root(1)
        job, world, steps = "hostile-job", 9, WARMUP + 2 * WINDOW + 3
        root = c.nodes[0]
        inj = lambda *a: subprocess.run([c.inject, root.host, str(root.port), c.key, "4", "1"]
                                        + list(a), capture_output=True, timeout=60)
        for mode in ("wrongkey", "replay", "garbage"):
            check(inj(mode).returncode == 0, "injector %s failed" % mode)
        for i, n in enumerate(c.nodes):
            c.send(n, job, world, 3 * i, 3 * i + 2, steps, seed=21, slow=4)
        # a stale-term summary of window 0, sent while the window is collected
        check(inj("stale", job, str(world)).returncode == 0, "injector stale failed")
        reports_everywhere(c, c.nodes, job, [0, 1])
        ref = c.replay(STAGES, [0, 1])
        for w in (0, 1):
            compare_exact(root.report(job, w), ref[w], "window %d" % w)
        cnt = root.peers()["counters"]
        for k in ("rejected_mac", "rejected_replay", "rejected_stale_term", "rejected_frame"):
            check(cnt[k] >= 1, "counter %s is %d" % (k, cnt[k]))
        log = root.log_text()
        for what in ("wrong MAC", "replayed message", "stale term", "oversized"):
            check(what in log, "no log line about a %s" % what)
        check_one_connection_a_member(c, root)
        c.stop_checked()
        print("hostile: %r" % {k: cnt[k] for k in cnt if k.startswith("rejected")})
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


# ---- attacks on the peer port --------------------------------------------------

def member(node, mid):
    p = node.peers() or {"members": []}
    return next((m for m in p["members"] if m["id"] == mid), {})


def check_watch(w, what):
    s = w.summary()
    print("%s: %s" % (what, {k: round(v, 3) for k, v in s.items()}))
    check(w.failures == 0, "%s: %d STATUS queries failed" % (what, w.failures))
    check(w.lat_root and max(w.lat_root) < STATUS_MAX_S,
          "%s: root's STATUS took %.3f s" % (what, max(w.lat_root or [0])))
    check(w.lat_other and max(w.lat_other) < STATUS_MAX_S,
          "%s: another uid's STATUS took %.3f s" % (what, max(w.lat_other or [0])))
    return s


def trainer_connects(c, node):
    """Another uid's trainer connects to `node` and has its job taken, during
    an attack on the peer port; returns the seconds from the sender's start
    to its job being listed."""
    uid = peer_attacks.OTHER_UID
    out = os.path.join(c.tmp, "trainer-%d" % uid)
    os.makedirs(out, exist_ok=True)
    os.chown(out, uid, uid)
    job = "trainer-%d" % uid
    t = time.monotonic()
    p = subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                          c.sender, node.ingest, job, "2", "0", "1", "3", "1",
                          os.path.join(out, "rows.csv"), "4294967295"], stdin=subprocess.PIPE)
    try:
        c.wait(lambda: job in node.sfctl("jobs")[1], "the trainer's job", timeout=10)
        took = time.monotonic() - t
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    check(took < TRAINER_CONNECT_MAX_S, "the trainer's job took %.2f s to appear" % took)
    print("another uid's trainer connected; its job listed after %.2f s" % took)
    return took


def attacked(c, body):
    """Starts cluster c, waits for root 1, runs body(c, victim, attacks) with
    node 1 as the victim, and cleans up on every path: the attacks in the
    list stopped, logs dumped on failure, the cluster closed."""
    attacks = []
    try:
        c.start()
        c.wait_root(1)
        body(c, c.nodes[0], attacks)
    except Exception:
        c.dump_logs()
        raise
    finally:
        for a in attacks:
            a.stop()
        c.close()


def check_rss_growth(pid, hwm0):
    grew = (proc_status(pid, "VmHWM") - hwm0) / 1024.0
    check(grew < RSS_GROWTH_MAX_MB, "peak RSS grew by %.0f MB" % grew)
    return grew


def scenario_preauth(build):
    """Finding 4: connections that never authenticate (idle ones, reopened as
    fast as they are closed, and stalled half-frames of 16 MiB and of 4 KiB)
    hold no memory, do not lock out members, and a restarted member is seen
    live again while the attack goes on."""
    def body(c, victim, attacks):
        pid = victim.proc.pid
        hwm0 = proc_status(pid, "VmHWM")
        h, port = victim.host, victim.port
        attacks += [peer_attacks.idle(h, port, 200).start(),
                    peer_attacks.half_frames(h, port, 26).start(),
                    peer_attacks.half_frames(h, port, 26, announced=4096, sent=4000).start()]
        w = Watch(pid, c.sfctl, victim.query).run(3.0)
        check_watch(w, "preauth, during the attack")
        trainer_connects(c, victim)
        p = victim.peers()
        check(p["unauthenticated"] <= 64, "%d unauthenticated connections held"
              % p["unauthenticated"])
        # a member restarts during the attack and is seen live again
        c.nodes[1].kill()
        c.wait(lambda: not member(victim, 2).get("live"), "node 2 to be seen dead")
        c.nodes[1].start()
        t = time.monotonic()
        c.wait(lambda: member(victim, 2).get("live") and
               (member(victim, 2).get("last_heartbeat_ms_ago") or 10 ** 9) < 2 * HB_MS,
               "the restarted node 2 to be seen live", timeout=20)
        took = time.monotonic() - t
        c.wait_root(1)
        for a in attacks:
            a.stop()
        # silent connections within the limits are closed at the timeout
        quiet = [socket.create_connection((h, port)) for _ in range(4)]
        t = time.monotonic()
        for q in quiet:
            q.settimeout(10)
            check(q.recv(1) == b"", "a silent connection got data")
            q.close()
        closed_after = time.monotonic() - t
        check(closed_after < 1.0 + 2.0, "silent connections closed after %.2f s" % closed_after)
        cnt = victim.peers()["counters"]
        for k in ("rejected_frame", "rejected_preauth", "rejected_auth_timeout"):
            check(cnt[k] >= 1, "counter %s is %d" % (k, cnt[k]))
        grew = check_rss_growth(pid, hwm0)
        c.stop_checked()
        print("preauth: restarted node live after %.2f s; peak RSS +%.1f MB; %r"
              % (took, grew, {k: cnt[k] for k in cnt if k.startswith("rejected")}))

    attacked(Cluster(build, 3, peer_extra="peer_auth_timeout_ms = 1000\n"), body)


def scenario_flood(build):
    """Finding 4: streams of frames with a wrong MAC, 16 MiB ones and ones
    small enough to reach the MAC check, reconnecting whenever closed: the
    loop stays responsive, memory flat, and the cluster keeps its root."""
    def body(c, victim, attacks):
        pid = victim.proc.pid
        hwm0 = proc_status(pid, "VmHWM")
        attacks += [peer_attacks.bad_mac(victim.host, victim.port, 3).start(),
                    peer_attacks.bad_mac(victim.host, victim.port, 3, frame=4000).start()]
        w = Watch(pid, c.sfctl, victim.query).run(4.0)
        s = check_watch(w, "flood")
        trainer_connects(c, victim)
        check(s["cpu_share"] < 0.9, "sfd used %.0f %% of a core" % (100 * s["cpu_share"]))
        for a in attacks:
            a.stop()
        cnt = victim.peers()["counters"]
        check(cnt["rejected_frame"] >= 1 and cnt["rejected_mac"] >= 1, "counters: %r" % cnt)
        c.wait_root(1)
        check(all(member(victim, i)["live"] for i in (2, 3)), "a member lost during the flood")
        grew = check_rss_growth(pid, hwm0)
        c.stop_checked()
        print("flood: cpu %.0f %%, peak RSS +%.1f MB, rejected mac %d frame %d"
              % (100 * s["cpu_share"], grew, cnt["rejected_mac"], cnt["rejected_frame"]))

    attacked(Cluster(build, 3), body)


def scenario_forged(build):
    """Finding 5: a key holder's forged term of 2^64-1 and forged epochs. The
    term is refused everywhere (the root stays); an epoch of 2^64-1 is
    refused; an epoch within the step is taken, and the real member it was
    forged for starts a higher one and is heard again."""
    c = Cluster(build, 3, members=4)
    try:
        c.start()
        c.wait_root(1)

        def inj(node, frm, mode, epoch=None):
            env = dict(os.environ)
            if epoch is not None:
                env["SF_INJECT_EPOCH"] = str(epoch)
            r = subprocess.run([c.inject, node.host, str(node.port), c.key, str(frm),
                                str(node.id), mode], capture_output=True, timeout=60, env=env)
            check(r.returncode == 0, "injector %s: %s" % (mode, r.stderr))

        terms = {n.id: n.peers()["term"] for n in c.nodes}
        for n in c.nodes:
            inj(n, 4, "term", epoch=10 + n.id)
        for _ in range(10):
            check(all(v == 1 for v in c.roots().values()), "roots after a forged term: %r"
                  % c.roots())
            time.sleep(0.1)
        for n in c.nodes:
            p = n.peers()
            check(p["term"] < terms[n.id] + 5, "node %d's term moved to %d" % (n.id, p["term"]))
            check(p["counters"]["rejected_term_jump"] >= 1, "node %d took the term" % n.id)
        victim, real = c.nodes[0], c.nodes[1]
        inj(victim, 2, "epoch")
        check(victim.peers()["counters"]["rejected_epoch"] >= 1, "epoch 2^64-1 not refused")
        # a forged epoch just ahead of node 2's own: node 1 takes it, node 2
        # hears so in node 1's heartbeats and starts an epoch above it
        e2 = real.peers()["epoch"]
        inj(victim, 2, "replay", epoch=e2 + 1000)
        c.wait(lambda: real.peers()["epoch"] > e2 + 1000, "node 2 to start a higher epoch",
               timeout=10)
        c.wait(lambda: (member(victim, 2).get("last_heartbeat_ms_ago") or 10 ** 9) < 2 * HB_MS,
               "node 1 to hear node 2 again", timeout=10)
        # over several heartbeats, node 2 stays live and nothing of it is refused
        refused = victim.peers()["counters"]["rejected_replay"]
        for _ in range(10):
            p = victim.peers()
            check(member(victim, 2).get("live") and
                  p["counters"]["rejected_replay"] == refused,
                  "node 2's messages refused again: %r" % p["counters"])
            time.sleep(0.05)
        check(real.peers()["counters"]["epoch_bumps"] >= 1, "no epoch bump counted")
        c.wait_root(1)
        e2_after = real.peers()["epoch"]
        c.stop_checked()
        print("forged: term and epoch refused; node 2 went from epoch %d to %d" % (e2, e2_after))
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def scenario_restart_replay(build):
    """Finding 9: frames recorded from a member and replayed into a node
    after its restart are refused (its replay state comes back from the
    state directory, the interrupted epochs closed); real members start new
    epochs and rejoin."""
    c = Cluster(build, 3, members=4)
    try:
        c.start()
        c.wait_root(1)
        victim = c.nodes[0]
        rec = os.path.join(c.tmp, "recorded.bin")
        r = subprocess.run([c.inject, victim.host, str(victim.port), c.key, "4", "1", "record",
                            rec, "7", "20"], capture_output=True, timeout=60)
        check(r.returncode == 0, "injector record: %s" % r.stderr)
        check(member(victim, 4).get("last_heartbeat_ms_ago") is not None,
              "the recorded frames were not accepted the first time")
        bumps = {n.id: n.peers()["counters"]["epoch_bumps"] for n in c.nodes[1:]}
        victim.stop()
        check(victim.proc.returncode == 0, "node 1 exited with %d" % victim.proc.returncode)
        victim.start()
        c.wait_root(1)
        r = subprocess.run([c.inject, victim.host, str(victim.port), c.key, "4", "1",
                            "playback", rec], capture_output=True, timeout=60)
        check(r.returncode == 0, "injector playback: %s" % r.stderr)
        p = victim.peers()
        check(member(victim, 4).get("last_heartbeat_ms_ago") is None,
              "a replayed frame was accepted after the restart")
        check(p["counters"]["rejected_replay"] >= 1, "no replay counted")
        for n in c.nodes[1:]:
            check(n.peers()["counters"]["epoch_bumps"] > bumps[n.id],
                  "node %d did not start a new epoch after node 1's restart" % n.id)
        state = os.path.join(victim.dir, "state", "peer-1.state")
        check(os.path.exists(state), "no state file")
        c.stop_checked()
        print("restart_replay: %d replayed frames refused" % p["counters"]["rejected_replay"])
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def member_keys_openssl(c, node, keydir, pubdir):
    """Makes a member's keys with the commands docs/CLUSTER.md gives."""
    der = os.path.join(keydir, "%d.der" % node.id)
    key = os.path.join(keydir, "%d.key" % node.id)
    pub = os.path.join(pubdir, "%d.pub" % node.id)
    sh = ("umask 077 && openssl genpkey -algorithm X25519 -outform DER -out {der} && "
          "tail -c 32 {der} > {key} && chmod 0400 {key} && "
          "openssl pkey -inform DER -in {der} -pubout -outform DER | tail -c 32 > {pub} && "
          "chmod 0644 {pub} && rm {der}").format(der=der, key=key, pub=pub)
    r = subprocess.run(["sh", "-c", sh], capture_output=True, text=True)
    check(r.returncode == 0, "openssl: %s" % r.stderr)
    return key


def scenario_member_keys(build):
    """Per-member keys: a cluster with X25519 member keys elects a root and
    reports; a member that holds its own key cannot pass as another."""
    if shutil.which("openssl") is None:
        print("SKIP: no openssl to make member keys")
        sys.exit(SKIP)
    c = Cluster(build, 3)
    try:
        keydir = os.path.join(c.tmp, "keys")
        pubdir = os.path.join(keydir, "members")
        os.makedirs(pubdir)
        secrets = {}
        for n in c.nodes:
            secrets[n.id] = member_keys_openssl(c, n, keydir, pubdir)
            n.key_lines = "member_key_file = %s\nmember_pub_dir = %s\n" % (secrets[n.id], pubdir)
            n.write_conf(c.all)
        c.start()
        c.wait_root(1)
        job, world, steps = "member-keys", 6, WARMUP + WINDOW + 3
        for i, n in enumerate(c.nodes):
            c.send(n, job, world, 2 * i, 2 * i + 1, steps, seed=4)
        reports_everywhere(c, c.nodes, job, [0])
        victim = c.nodes[0]
        mac0 = victim.peers()["counters"]["rejected_mac"]
        env = dict(os.environ, SF_INJECT_PAIR="%s:%s:3" % (secrets[3], pubdir),
                   SF_INJECT_EPOCH=str(10 ** 6))
        r = subprocess.run([c.inject, victim.host, str(victim.port), "-", "2", "1", "replay"],
                           capture_output=True, timeout=60, env=env)
        check(r.returncode == 0, "injector: %s" % r.stderr)
        check(victim.peers()["counters"]["rejected_mac"] > mac0,
              "node 3's key passed as node 2's")
        c.wait_root(1)
        c.stop_checked()
        print("member_keys: cluster up with per-member keys; impersonation refused")
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def run_sfd_once(c, conf, uid=None, env=None, timeout=20, wrap=()):
    """Starts sfd with conf (under the command `wrap`, if any); returns
    (started, log text). A started sfd is stopped again."""
    cmd = list(wrap) + [c.sfd, "--config", conf, "--foreground"]
    if uid is not None:
        cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + cmd
    logf = conf + ".log"
    with open(logf, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)

    def attached():
        with open(logf) as f:
            return "peer layer: node" in f.read()
    # The sockets open before the peer layer reads its key: wait for either
    # the peer layer's start or the exit.
    c.wait(lambda: p.poll() is not None or attached(), "sfd to start or exit", timeout)
    started = p.poll() is None
    if started:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=20)
    with open(logf) as f:
        return started, f.read()


def scenario_credentials(build):
    """Finding 10: the documented key setups. A key passed as a systemd
    credential ($CREDENTIALS_DIRECTORY, a bare name in cluster_key_file)
    works for the service user; a key of mode 0640 and a root-owned 0600
    key that the service user cannot read are refused with a reason that
    points at LoadCredential=."""
    c = Cluster(build, 3)
    try:
        creds = os.path.join(c.tmp, "credentials")
        os.mkdir(creds, 0o700)
        shutil.copy(c.key, os.path.join(creds, "cluster.key"))
        os.chmod(os.path.join(creds, "cluster.key"), 0o400)
        for n in c.nodes:
            n.key_lines = "cluster_key_file = cluster.key\n"
            n.env = dict(os.environ, CREDENTIALS_DIRECTORY=creds)
            n.write_conf(c.all)
        c.start()
        c.wait_root(1)
        c.stop_checked()
        uid = peer_attacks.OTHER_UID

        def one_node(name, key_line, owner=None):
            d = os.path.join(c.tmp, name)
            os.makedirs(d)
            port = free_port()
            conf = os.path.join(d, "sfd.conf")
            with open(conf, "w") as f:
                f.write("[sfd]\nruntime_dir = %s\nstate_dir = %s\n[peer]\nnode_id = 1\n"
                        "peers = 1@127.0.0.1:%d\n%s" % (d, d, port, key_line))
            if owner is not None:
                os.chown(d, owner, owner)
            return conf

        loose = os.path.join(c.tmp, "loose.key")
        shutil.copy(c.key, loose)
        os.chmod(loose, 0o640)
        ok, log = run_sfd_once(c, one_node("loose", "cluster_key_file = %s\n" % loose))
        check(not ok and "0600 or 0400" in log and "LoadCredential" in log,
              "a 0640 key: %r" % log[-300:])
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            print("credentials: other-uid part skipped (needs root and setpriv)")
            return
        rootkey = os.path.join(c.tmp, "root.key")
        shutil.copy(c.key, rootkey)
        os.chmod(rootkey, 0o600)
        ok, log = run_sfd_once(c, one_node("rootkey", "cluster_key_file = %s\n" % rootkey,
                                           owner=uid), uid=uid)
        check(not ok and "LoadCredential" in log, "a root-owned 0600 key: %r" % log[-300:])
        ucreds = os.path.join(c.tmp, "ucreds")
        os.mkdir(ucreds, 0o500)
        shutil.copy(c.key, os.path.join(ucreds, "cluster.key"))
        os.chmod(os.path.join(ucreds, "cluster.key"), 0o400)
        os.chown(os.path.join(ucreds, "cluster.key"), uid, uid)
        os.chown(ucreds, uid, uid)
        ok, log = run_sfd_once(c, one_node("svc", "cluster_key_file = cluster.key\n", owner=uid),
                               uid=uid, env=dict(os.environ, CREDENTIALS_DIRECTORY=ucreds))
        check(ok and "peer layer: node 1 of 1" in log,
              "the service user with a credential: %r" % log[-300:])
        print("credentials: credential accepted; 0640 and unreadable keys refused with the fix")
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def scenario_descriptors(build):
    """A node dials every member and every member dials it: under a
    descriptor limit below two a member beside max_connections, sfd says so
    at start, with the figures and the fix; under one that fits it does not."""
    c = Cluster(build, 1)
    try:
        d = os.path.join(c.tmp, "many")
        os.makedirs(d)
        members = ["1@127.0.0.1:%d" % free_port()] + \
            ["%d@127.0.0.1:%d" % (i, 20000 + i) for i in range(2, 601)]
        conf = os.path.join(d, "sfd.conf")
        with open(conf, "w") as f:
            f.write("[sfd]\nruntime_dir = %s\nstate_dir = %s\n[peer]\nnode_id = 1\n"
                    "cluster_key_file = %s\n" % (d, d, c.key))
            for i in range(0, len(members), 8):
                f.write("peers = %s\n" % ",".join(members[i:i + 8]))
        # 2 x 599 links + max_connections 4096 + 64 operators' connections
        need = 2 * 599 + 4096 + 64
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if (hard != resource.RLIM_INFINITY and hard < need) or shutil.which("prlimit") is None:
            print("SKIP: needs prlimit and a hard descriptor limit of %d (it is %d)" % (need, hard))
            sys.exit(SKIP)
        ok, log = run_sfd_once(c, conf, wrap=["prlimit", "--nofile=%d:%d" % (need - 1, need - 1)])
        warning = ("descriptor limit %d is below the %d that 600 members and max_connections 4096"
                   " need: raise LimitNOFILE=" % (need - 1, need))
        check(ok and "peer layer: node 1 of 600" in log and warning in log,
              "600 members under %d descriptors: %r" % (need - 1, log[-400:]))
        ok, log = run_sfd_once(c, conf, wrap=["prlimit", "--nofile=%d:%d" % (need, need)])
        check(ok and "peer layer: node 1 of 600" in log and "descriptor limit" not in log,
              "600 members under %d descriptors: %r" % (need, log[-400:]))
        print("descriptors: 600 members named under %d descriptors, silent under %d"
              % (need - 1, need))
    finally:
        c.close()


def run_scenario(namespace, doc):
    """`SCRIPT BUILD SCENARIO`: runs scenario_SCENARIO(BUILD) from namespace
    (a module's globals()); 0 on PASS, 1 on FAIL, 2 on bad arguments."""
    if len(sys.argv) != 3:
        print(doc)
        return 2
    build, scenario = sys.argv[1], sys.argv[2]
    fn = namespace.get("scenario_" + scenario)
    if fn is None:
        print("unknown scenario", scenario)
        return 2
    try:
        fn(build)
    except Fail as e:
        print("FAIL:", e)
        return 1
    print("PASS")
    return 0


def main():
    return run_scenario(globals(), __doc__)


if __name__ == "__main__":
    sys.exit(main())
