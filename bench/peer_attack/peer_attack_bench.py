#!/usr/bin/python3
"""Attacks on one node's peer port, measured: for each attack, a fresh
3-node sfd cluster on loopback, the attack against node 1 for a fixed time,
and meanwhile `sfctl status` latency on node 1 (root's, and another uid's),
node 1's peak RSS growth (VmHWM) and its CPU share. The idle-connection
attack also restarts node 2 and times how long node 1 takes to see it live
again. Runs against any build, so the same command measures before and
after a change side by side (docs/CLUSTER.md, "Attacks on the peer port").

usage: peer_attack_bench.py BUILD_DIR [BUILD_DIR ...] [--seconds S]
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cluster"))
import peer_attacks  # noqa: E402
from peer_attacks import Watch, free_port, proc_status  # noqa: E402

HB_MS, FT_MS = 100, 800
LIVE_WAIT_S = 10.0


class Node:
    def __init__(self, build, tmp, nid, port, peers, key, state):
        self.id, self.port = nid, port
        self.sfd = os.path.join(build, "daemon/sfd/sfd")
        self.dir = os.path.join(tmp, "n%d" % nid)
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.query = os.path.join(self.dir, "query.sock")
        self.conf = os.path.join(self.dir, "sfd.conf")
        with open(self.conf, "w") as f:
            f.write("[sfd]\nruntime_dir = %s\n%s[peer]\nnode_id = %d\npeers = %s\n"
                    "cluster_key_file = %s\nheartbeat_ms = %d\nfailure_timeout_ms = %d\n"
                    % (self.dir, "state_dir = %s\n" % self.dir if state else "", nid, peers,
                       key, HB_MS, FT_MS))
        self.proc = None

    def start(self):
        if os.path.exists(self.query):
            os.unlink(self.query)
        self.log = open(os.path.join(self.dir, "sfd.log"), "a")
        self.proc = subprocess.Popen([self.sfd, "--config", self.conf, "--foreground"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait(lambda: os.path.exists(self.query), 20)

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait(cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    return None


def peers_json(sfctl, node):
    r = subprocess.run([sfctl, "--socket", node.query, "peers", "--json"],
                       capture_output=True, text=True, timeout=30)
    try:
        return json.loads(r.stdout) if r.returncode == 0 else None
    except ValueError:
        return None


def member_live(sfctl, node, mid):
    p = peers_json(sfctl, node)
    if p is None:
        return False
    m = next(m for m in p["members"] if m["id"] == mid)
    ago = m.get("last_heartbeat_ms_ago")
    return m["live"] and ago is not None and ago < 2 * HB_MS


ATTACKS = {
    "none": lambda h, p: [],
    "idle_200": lambda h, p: [peer_attacks.idle(h, p, 200)],
    "half_frames_26x16MiB": lambda h, p: [peer_attacks.half_frames(h, p, 26)],
    "bad_mac_3x16MiB": lambda h, p: [peer_attacks.bad_mac(h, p, 3)],
    "bad_mac_3x4KiB": lambda h, p: [peer_attacks.bad_mac(h, p, 3, frame=4000)],
}


def run_one(build, attack, seconds):
    tmp = tempfile.mkdtemp(prefix="sf-peer-bench-")
    os.chmod(tmp, 0o755)
    sfctl = os.path.join(build, "daemon/sfctl/sfctl")
    help_text = subprocess.run([os.path.join(build, "daemon/sfd/sfd"), "--help"],
                               capture_output=True, text=True).stdout
    state = "--state-dir" in help_text
    key = os.path.join(tmp, "cluster.key")
    fd = os.open(key, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, os.urandom(32))
    os.close(fd)
    ports = [free_port() for _ in range(3)]
    peers = ",".join("%d@127.0.0.1:%d" % (i + 1, p) for i, p in enumerate(ports))
    nodes = [Node(build, tmp, i + 1, p, peers, key, state) for i, p in enumerate(ports)]
    attacks = []
    try:
        for n in nodes:
            n.start()
        wait(lambda: all((peers_json(sfctl, n) or {}).get("root") == 1 for n in nodes), 30)
        victim = nodes[0]
        pid = victim.proc.pid
        hwm0 = proc_status(pid, "VmHWM")
        attacks = [a.start() for a in ATTACKS[attack]("127.0.0.1", victim.port)]
        w = Watch(pid, sfctl, victim.query).run(seconds)
        out = w.summary()
        out["peak_rss_growth_mb"] = (proc_status(pid, "VmHWM") - hwm0) / 1024.0
        if attack == "idle_200":
            nodes[1].stop(signal.SIGKILL)
            wait(lambda: not member_live(sfctl, victim, 2), 10)
            nodes[1].start()
            t = time.monotonic()
            ok = wait(lambda: member_live(sfctl, victim, 2), LIVE_WAIT_S)
            out["restarted_member_live_s"] = (time.monotonic() - t) if ok else None
        return out
    finally:
        for a in attacks:
            a.stop()
        for n in nodes:
            n.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    args = sys.argv[1:]
    seconds = 5.0
    if "--seconds" in args:
        i = args.index("--seconds")
        seconds = float(args[i + 1])
        del args[i:i + 2]
    if not args:
        print(__doc__)
        return 2
    results = {}
    for attack in ATTACKS:
        for build in args:
            r = run_one(build, attack, seconds)
            results.setdefault(attack, {})[build] = r
            print(json.dumps({"attack": attack, "build": build,
                              **{k: (round(v, 3) if isinstance(v, float) else v)
                                 for k, v in r.items()}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
