#!/usr/bin/python3
"""Multi-node tests: real sfd processes linked by the peer layer, fed by real
ingest senders, queried with the real sfctl.

usage: cluster_test.py BUILD_DIR SCENARIO
scenarios: exact, tree, failover, partition, partition_root, split, hostile

Every wait polls a real condition (a query answer, a log line, a file) under
a generous overall timeout that only fails the test. Network namespaces are
created only by the partition and split scenarios and removed on every exit
path; when they cannot be created the scenario exits with SKIP (77).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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
        self.netns = None
        self.proc = None

    def write_conf(self, members):
        peers = ",".join("%d@%s:%d" % (m.id, m.host, m.port) for m in members)
        with open(self.conf, "w") as f:
            f.write("[sfd]\nruntime_dir = %s\nstate_dir = %s/state\ningest_socket = %s\n"
                    "query_socket = %s\n"
                    "window_grace_ms = 300\nkeep_windows = 64\nlog_level = info\n"
                    "[gates]\nwarmup_steps = %d\nwindow_steps = %d\n"
                    "[peer]\nnode_id = %d\npeers = %s\ncluster_key_file = %s\n"
                    "heartbeat_ms = %d\nfailure_timeout_ms = %d\nsummary_deadline_ms = %d\n"
                    "fanout = %d\n"
                    % (self.dir, self.dir, self.ingest, self.query, WARMUP, WINDOW, self.id, peers,
                       self.c.key, HB_MS, FT_MS, DEADLINE_MS, self.c.fanout))

    def start(self):
        if os.path.exists(self.query):
            os.unlink(self.query)
        cmd = [self.c.sfd, "--config", self.conf, "--foreground"]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        self.logf = open(self.log, "a")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        self.c.wait(lambda: os.path.exists(self.query), "node %d query socket" % self.id)

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
    def __init__(self, build, n, netns=False, fanout=8, members=None):
        self.build = build
        self.sfd = os.path.join(build, "daemon/sfd/sfd")
        self.sfctl = os.path.join(build, "daemon/sfctl/sfctl")
        self.sender = os.path.join(build, "tests/cluster/sf_cluster_sender")
        self.inject = os.path.join(build, "tests/cluster/sf_peer_inject")
        self.tmp = tempfile.mkdtemp(prefix="sf-cluster-")
        self.fanout = fanout
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

    def send(self, node, job, world, first, last, steps, seed, slow=-1, gate=None):
        csv = os.path.join(self.tmp, "ranks-%d-%d.csv" % (first, last))
        args = [self.sender, node.ingest, job, str(world), str(first), str(last), str(steps),
                str(seed), csv, str(slow if slow >= 0 else 4294967295)]
        if gate:
            args.append(gate)
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


def scenario_tree(build):
    """The same exactness through a fan-in tree of fanout 1 (a chain): inner
    nodes merge their children's summaries and relay the reports down."""
    scenario_exact(build, fanout=1)


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
        c.stop_checked()
        print("hostile: %r" % {k: cnt[k] for k in cnt if k.startswith("rejected")})
    except Exception:
        c.dump_logs()
        raise
    finally:
        c.close()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, scenario = sys.argv[1], sys.argv[2]
    fn = globals().get("scenario_" + scenario)
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


if __name__ == "__main__":
    sys.exit(main())
