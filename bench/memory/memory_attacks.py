#!/usr/bin/env python3
"""Peak RSS of sfd under the two ingest-memory attacks of issue 11 (finding 2),
run by one uid, with STATUS latency and a trainer's connect time from another
uid measured right after each attack.

  rows:   --ranks connections of one job, each sending --steps steps of
          --stages stages (1000 x 1700 x 64 by default: 17 windows of 100).
  hellos: 64 connections, each the only rank of its own job declaring a
          world size of 2^18.

Usage (as root, from the build directory of the sfd under test; the sender and
sfctl come from --tools, a build of this tree):
  bench/memory/memory_attacks.py --sfd BUILD/daemon/sfd/sfd --tools BUILD \
      [--conf EXTRA_INI_LINES] [--ranks 1000 --steps 1700 --stages 64]
Prints one key=value line per attack.
"""

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

ATTACKER, OTHER = "63001", "63002"


def as_uid(uid, args):
    return ["setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups"] + args


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Peak(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.kb, self.done = pid, 0, threading.Event()

    def run(self):
        while not self.done.is_set():
            self.kb = max(self.kb, rss_kb(self.pid))
            time.sleep(0.005)


def wait_socket(path, deadline=30):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(path)
            s.close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("sfd did not come up")


def other_uid_checks(a, run):
    """STATUS latency as root and a trainer's connect+send time as OTHER."""
    t = time.monotonic()
    subprocess.run([a.tools + "/daemon/sfctl/sfctl", "--socket", run + "/query.sock", "status"],
                   capture_output=True, check=True, timeout=60)
    status_ms = (time.monotonic() - t) * 1e3
    t = time.monotonic()
    p = subprocess.run(as_uid(OTHER, [a.tools + "/tests/sfd/sf_test_sender", "--socket",
                                      run + "/ingest.sock", "--job", "trainer", "--steps", "1"]),
                       capture_output=True, timeout=60)
    trainer_ms = (time.monotonic() - t) * 1e3
    ok = p.returncode == 0 and b"sent=1" in p.stdout
    return "status_ms=%.1f trainer_ms=%.1f trainer_ok=%s" % (status_ms, trainer_ms, ok)


def attack(a, name, sender_args):
    d = tempfile.mkdtemp(prefix="sfmem-")
    os.chmod(d, 0o755)
    run = d + "/run"
    with open(d + "/sfd.conf", "w") as f:
        f.write("[gates]\nwarmup_steps = 0\nwindow_steps = 100\n" + a.conf.replace("\\n", "\n"))
    log = open(d + "/sfd.log", "w")
    sfd = subprocess.Popen([a.sfd, "--config", d + "/sfd.conf", "--runtime-dir", run,
                            "--foreground", "--log-level", "notice"], stdout=log,
                           stderr=subprocess.STDOUT)
    try:
        wait_socket(run + "/query.sock")
        base = rss_kb(sfd.pid)
        peak = Peak(sfd.pid)
        peak.start()
        t = time.monotonic()
        p = subprocess.Popen(as_uid(ATTACKER, [a.tools + "/tests/sfd/sf_test_sender", "--socket",
                                               run + "/ingest.sock"] + sender_args),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        lines = [p.stdout.readline().decode().strip()]
        if lines[0] != "ready":
            lines.append(p.stdout.readline().decode().strip())
        secs = time.monotonic() - t
        time.sleep(1.0)               # let the daemon drain what is queued
        during = other_uid_checks(a, run)
        held = rss_kb(sfd.pid)
        p.stdin.close()
        p.wait(timeout=120)
        time.sleep(3.0)               # after every connection closed
        after = rss_kb(sfd.pid)
        peak.done.set()
        peak.join()
        print("attack=%s base_kb=%d peak_kb=%d held_kb=%d after_close_kb=%d attack_s=%.1f %s "
              "sender: %s" % (name, base, peak.kb, held, after, secs, during, " ".join(lines)),
              flush=True)
    finally:
        sfd.terminate()
        sfd.wait(timeout=60)
        log.close()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sfd", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("--conf", default="", help="extra sfd.conf lines, \\n-separated")
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1700)
    ap.add_argument("--stages", type=int, default=64)
    ap.add_argument("--only", choices=["rows", "hellos"])
    a = ap.parse_args()
    if a.only in (None, "rows"):
        attack(a, "rows", ["--mode", "memflood", "--job", "wide", "--world", str(a.ranks),
                           "--steps", str(a.steps), "--batch", "100", "--stages",
                           str(a.stages)])
    if a.only in (None, "hellos"):
        attack(a, "hellos", ["--mode", "storm", "--storm", "64", "--world", "262144",
                             "--job", "big", "--distinct-jobs"])


main()
