"""Attacks on a peer port that need no key, and the probes that watch a
victim sfd while they run: STATUS latency (root and another uid), peak RSS
(VmHWM) and CPU time. Used by the cluster tests (cluster_test.py) and the
benchmark (bench/peer_attack). Every attack runs in threads that stop at a
deadline or when told to; every loop is bounded in time.
"""
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
import loopback  # noqa: E402  (path set above)

FRAME_MAX = 16 << 20
OTHER_UID = 4242

free_port = loopback.free_port  # cluster_test.py and bench/peer_attack take it from here


class Attack:
    """Runs `fn(stop_event)` in `n` threads until stop()."""

    def __init__(self, fn, n):
        self.stop_ev = threading.Event()
        self.threads = [threading.Thread(target=fn, args=(self.stop_ev,), daemon=True)
                        for _ in range(n)]
        self.socks = []
        self.lock = threading.Lock()
        self.sent = 0
        self.conns = 0

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=10)
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass
            self.socks = []


def _connect(host, port, timeout=2.0):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    return s


def idle(host, port, n, hold=True):
    """Opens n connections that never send a byte, and keeps reopening the
    ones the victim closes (so a victim that only counted would lock up)."""
    a = None

    def run(stop):
        mine = []
        while not stop.is_set():
            mine = [s for s in mine if _alive(s)]
            while len(mine) < n and not stop.is_set():
                try:
                    s = _connect(host, port)
                except OSError:
                    break
                mine.append(s)
                with a.lock:
                    a.conns += 1
                    a.socks.append(s)
            stop.wait(0.05 if hold else 3600)

    a = Attack(run, 1)
    return a


def _alive(s):
    try:
        s.setblocking(False)
        d = s.recv(1, socket.MSG_PEEK)
        return d != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        try:
            s.setblocking(True)
        except OSError:
            pass


def half_frames(host, port, n, announced=FRAME_MAX - 1, sent=FRAME_MAX - 64):
    """n connections, each announcing a frame of `announced` bytes, sending
    `sent` of them and stalling (finding: 26 such frames held 430 MB)."""
    a = None

    def run(stop):
        for _ in range(n):
            if stop.is_set():
                return
            try:
                s = _connect(host, port)
                with a.lock:
                    a.socks.append(s)
                    a.conns += 1
                s.sendall(struct.pack(">I", announced))
                left = sent
                chunk = b"\x01" * (1 << 20)
                s.settimeout(2.0)
                while left > 0 and not stop.is_set():
                    k = s.send(chunk[:min(left, len(chunk))])
                    left -= k
                    with a.lock:
                        a.sent += k
            except OSError:
                continue        # the victim closed it: that is the defence
        stop.wait(3600)

    a = Attack(run, 1)
    return a


def bad_mac(host, port, streams, frame=FRAME_MAX - 1, sender=2):
    """`streams` threads sending frames of random bytes (a member's id as
    the claimed sender, so they reach the MAC check), reconnecting whenever
    the victim closes (finding: three streams kept sfd at 95 % of a core)."""
    a = None
    body = bytes(random.getrandbits(8) for _ in range(4096))
    body = struct.pack(">I", sender) + body[4:]
    payload = body * (frame // len(body)) + body[:frame % len(body)]
    data = struct.pack(">I", frame) + payload

    def run(stop):
        while not stop.is_set():
            try:
                s = _connect(host, port)
                with a.lock:
                    a.conns += 1
                s.settimeout(1.0)
                view = memoryview(data)
                while not stop.is_set():
                    k = s.send(view[: 1 << 20])
                    with a.lock:
                        a.sent += k
                    view = view[k:]
                    if len(view) == 0:
                        view = memoryview(data)
            except OSError:
                pass
            finally:
                try:
                    s.close()
                except (OSError, UnboundLocalError):
                    pass

    a = Attack(run, streams)
    return a


# ---- probes --------------------------------------------------------------------

def proc_status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_latency(sfctl, query, uid=None):
    """Wall time of one `sfctl status`, root's or another uid's; None when it
    failed."""
    cmd = [sfctl, "--socket", query, "status"]
    if uid is not None:
        cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + cmd
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, timeout=30)
    took = time.monotonic() - t
    return took if r.returncode == 0 else None


class Watch:
    """Samples a victim while an attack runs: STATUS latency (root's and
    another uid's), RSS, CPU."""

    def __init__(self, pid, sfctl, query, other_uid=True):
        self.pid = pid
        self.sfctl = sfctl
        self.query = query
        self.other_uid = other_uid
        self.lat_root = []
        self.lat_other = []
        self.failures = 0
        self.rss_max_kb = 0

    def run(self, seconds, interval=0.1):
        cpu0 = cpu_seconds(self.pid)
        t0 = time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            for uid, out in ((None, self.lat_root), (OTHER_UID, self.lat_other)):
                if uid is not None and not self.other_uid:
                    continue
                v = status_latency(self.sfctl, self.query, uid)
                if v is None:
                    self.failures += 1
                else:
                    out.append(v)
            self.rss_max_kb = max(self.rss_max_kb, proc_status(self.pid, "VmRSS"))
            time.sleep(interval)
        self.cpu = (cpu_seconds(self.pid) - cpu0) / (time.monotonic() - t0)
        self.hwm_kb = proc_status(self.pid, "VmHWM")
        return self

    def summary(self):
        def q(xs, p):
            if not xs:
                return float("nan")
            xs = sorted(xs)
            return xs[min(len(xs) - 1, int(p * len(xs)))]
        return {
            "status_root_p50_ms": q(self.lat_root, 0.5) * 1000,
            "status_root_max_ms": max(self.lat_root or [float("nan")]) * 1000,
            "status_other_p50_ms": q(self.lat_other, 0.5) * 1000,
            "status_other_max_ms": max(self.lat_other or [float("nan")]) * 1000,
            "status_failures": self.failures,
            "rss_max_mb": self.rss_max_kb / 1024.0,
            "cpu_share": self.cpu,
        }
