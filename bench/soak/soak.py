#!/usr/bin/python3
"""sfd under churn for a long run (not CI; docs/OPERATIONS.md, "Soak").

One real sfd, and for --minutes (30 by default):
- jobs starting and ending: --jobs jobs of 4 ranks at once (tests/sfd/
  sf_client_job, the real client library), each a few hundred steps, new
  job ids, and every other one a rerun of the same job id;
- ranks reconnecting: every 15 s one rank of a running job is killed (-9)
  and started again with the same rank;
- queries every 2 s (status, jobs, the latest report of a job) and an
  operator capture every 30 s (the C capture handler of sf_client_job,
  its files removed as they come);
- the history store filling to its cap (max_history_mb = 1);
- a SIGHUP reload every 60 s.
Every 10 s it samples sfd's RSS, open descriptors, the history store's size
on disk and in pages (`history.bytes`), reports written and evicted, the
jobs in the table (max_jobs = 64), and the loop latency (the round trip of a
STATUS query over the query socket, median and maximum of 20). At the end
it prints, for each, the least-squares slope over the samples after the
warm-up (--warmup-min, 5 by default), per hour, and writes every sample to
--out as CSV.

usage: soak.py --build BUILD [--minutes 30] [--jobs 6] [--out soak.csv]
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CONF = """[sfd]
window_grace_ms = 500
keep_windows = 16
max_history_mb = 1
max_jobs = 64
[gates]
warmup_steps = 0
window_steps = 20
"""


def varint(buf, i):
    v, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def chunk_of(resp):
    """The chunk field (3) of a QueryResponse (proto/query.proto)."""
    i, out = 0, b""
    while i < len(resp):
        tag, i = varint(resp, i)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, i = varint(resp, i)
        elif wire == 2:
            n, i = varint(resp, i)
            if field == 3:
                out += resp[i:i + n]
            i += n
        else:
            raise ValueError("unexpected wire type %d" % wire)
    return out


def status_round_trip(path):
    """One STATUS query: (seconds, parsed status)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    s.connect(path)
    t0 = time.perf_counter()
    s.send(b"\x08\x00")                      # QueryRequest{kind = STATUS}
    resp = s.recv(1 << 17)
    dt = time.perf_counter() - t0
    s.close()
    return dt, json.loads(chunk_of(resp) or b"{}")


def slope_per_hour(ts, vs):
    n = len(ts)
    if n < 2:
        return float("nan")
    mt, mv = sum(ts) / n, sum(vs) / n
    den = sum((t - mt) ** 2 for t in ts)
    return 3600.0 * sum((t - mt) * (v - mv) for t, v in zip(ts, vs)) / den if den else 0.0


class Soak:
    def __init__(self, args):
        self.args = args
        self.sfd_bin = os.path.join(args.build, "daemon", "sfd", "sfd")
        self.sfctl_bin = os.path.join(args.build, "daemon", "sfctl", "sfctl")
        self.client = os.path.join(args.build, "tests", "sfd", "sf_client_job")
        self.dir = tempfile.mkdtemp(prefix="sf-soak-")
        os.chmod(self.dir, 0o755)
        self.run = os.path.join(self.dir, "run")
        self.state = os.path.join(self.dir, "state")
        self.capdir = os.path.join(self.dir, "captures")
        os.mkdir(self.capdir, 0o700)
        self.query = os.path.join(self.run, "query.sock")
        self.conf = os.path.join(self.dir, "sfd.conf")
        with open(self.conf, "w") as f:
            f.write(CONF)
        self.jobs = {}          # job id -> list of Popen, one per rank
        self.serial = 0
        self.counts = {"jobs": 0, "reruns": 0, "reconnects": 0, "queries": 0, "captures": 0,
                       "reloads": 0, "query_errors": 0}
        self.rng = random.Random(52)

    def start(self):
        self.log = open(os.path.join(self.dir, "sfd.log"), "w")
        self.proc = subprocess.Popen(
            [self.sfd_bin, "--config", self.conf, "--runtime-dir", self.run, "--state-dir",
             self.state, "--foreground", "--log-level", "notice"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                status_round_trip(self.query)
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("sfd did not answer; log in %s" % self.log.name)

    def rank(self, job, r, steps):
        env = dict(os.environ, SF_TEST_CAPTURE_DIR=self.capdir)
        return subprocess.Popen([self.client, os.path.join(self.run, "ingest.sock"), job, str(r),
                                 "4", str(steps), "-1", "0", "0", "2000", "1"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def launch(self):
        self.serial += 1
        rerun = self.serial % 2 == 0 and "soak-rerun" not in self.jobs
        job = "soak-rerun" if rerun else "soak-%d" % self.serial
        steps = self.rng.randrange(200, 600)
        self.jobs[job] = [self.rank(job, r, steps) for r in range(4)]
        self.counts["reruns" if rerun else "jobs"] += 1

    def reap(self):
        for job, ranks in list(self.jobs.items()):
            if all(p.poll() is not None for p in ranks):
                del self.jobs[job]
        while len(self.jobs) < self.args.jobs:
            self.launch()

    def reconnect(self):
        live = [(j, r) for j, ranks in self.jobs.items() for r, p in enumerate(ranks)
                if p.poll() is None]
        if not live:
            return
        job, r = self.rng.choice(live)
        p = self.jobs[job][r]
        p.kill()
        p.wait()
        self.jobs[job][r] = self.rank(job, r, self.rng.randrange(100, 300))
        self.counts["reconnects"] += 1

    def sfctl(self, *args):
        self.counts["queries"] += 1
        p = subprocess.run([self.sfctl_bin, "--socket", self.query] + list(args),
                           capture_output=True, timeout=30)
        if p.returncode not in (0, 3, 5):       # 3/5: a job that just ended or has no report
            self.counts["query_errors"] += 1
        return p

    def queries(self):
        self.sfctl("status", "--json")
        self.sfctl("jobs", "--json")
        if self.jobs:
            self.sfctl("report", self.rng.choice(sorted(self.jobs)))

    def capture(self):
        if self.jobs:
            self.sfctl("capture", self.rng.choice(sorted(self.jobs)), "--ranks", "0", "--steps",
                       "2")
            self.counts["captures"] += 1
        for name in os.listdir(self.capdir):
            os.unlink(os.path.join(self.capdir, name))

    def sample(self, t):
        pid = self.proc.pid
        with open("/proc/%d/status" % pid) as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        fds = len(os.listdir("/proc/%d/fd" % pid))
        disk = sum(os.path.getsize(os.path.join(self.state, n)) for n in os.listdir(self.state)
                   if n.startswith("history"))
        lat, st = [], {}
        for _ in range(20):
            dt, st = status_round_trip(self.query)
            lat.append(dt * 1e6)
        hist = st.get("history", {})
        return {"t_s": round(t, 1), "rss_kb": rss, "fds": fds, "history_file_bytes": disk,
                "history_bytes": hist.get("bytes", -1), "history_written": hist.get("written", -1),
                "history_evicted": hist.get("evicted", -1),
                "loop_us_median": round(statistics.median(lat), 1),
                "loop_us_max": round(max(lat), 1), "jobs": len(st.get("jobs", []))
                if isinstance(st.get("jobs"), list) else st.get("jobs", -1)}

    def loop(self):
        t0 = time.monotonic()
        end = t0 + 60 * self.args.minutes
        samples, next_sample = [], t0
        last = {"reconnect": t0, "query": t0, "capture": t0, "reload": t0}
        out = open(self.args.out, "w")
        header = None
        while time.monotonic() < end:
            now = time.monotonic()
            if self.proc.poll() is not None:
                raise SystemExit("sfd exited with %s; log %s" % (self.proc.returncode,
                                                                  self.log.name))
            self.reap()
            if now - last["reconnect"] >= 15:
                self.reconnect()
                last["reconnect"] = now
            if now - last["query"] >= 2:
                self.queries()
                last["query"] = now
            if now - last["capture"] >= 30:
                self.capture()
                last["capture"] = now
            if now - last["reload"] >= 60:
                self.proc.send_signal(signal.SIGHUP)
                self.counts["reloads"] += 1
                last["reload"] = now
            if now >= next_sample:
                s = self.sample(now - t0)
                samples.append(s)
                if header is None:
                    header = list(s)
                    out.write(",".join(header) + "\n")
                out.write(",".join(str(s[k]) for k in header) + "\n")
                out.flush()
                print(json.dumps(s), flush=True)
                next_sample += 10
            time.sleep(0.2)
        out.close()
        return samples

    def stop(self):
        for ranks in self.jobs.values():
            for p in ranks:
                if p.poll() is None:
                    p.kill()
                p.wait()
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.log.close()
        return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup-min", type=float, default=5)
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--out", default="soak.csv")
    args = ap.parse_args()
    soak = Soak(args)
    soak.start()
    try:
        samples = soak.loop()
    finally:
        rc = soak.stop()
    warm = [s for s in samples if s["t_s"] >= 60 * args.warmup_min] or samples
    ts = [s["t_s"] for s in warm]
    print("soak: %.1f min, %d samples (%d after warm-up), sfd exit %d, %s"
          % (args.minutes, len(samples), len(warm), rc, json.dumps(soak.counts)))
    for k in ("rss_kb", "fds", "history_file_bytes", "history_bytes", "jobs", "loop_us_median",
              "loop_us_max"):
        vs = [s[k] for s in warm]
        print("  %-16s first %10s  last %10s  min %10s  max %10s  slope %+.1f/h"
              % (k, vs[0], vs[-1], min(vs), max(vs), slope_per_hour(ts, vs)))
    if rc == 0:
        shutil.rmtree(soak.dir, ignore_errors=True)
    else:
        print("sfd log kept in %s" % soak.dir)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
