"""sfd ingest benchmark: N concurrent sender processes stream step records
of one job into one sfd. With --client the senders are libsfclient (its ring,
batching and non-blocking sends); with --sender they are raw protobuf-c
senders that drop a batch as soon as the socket is full. Reports, for each
offered rate, the records/s sfd ingested and whether anything was lost, then
the highest lossless rate and the unpaced throughput.

usage: ingest_bench.py --sfd PATH --sfctl PATH (--client PATH | --sender PATH)
                       [--senders 8] [--records N]
                       [--batch 64] [--rates 100000,200000,...]"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

CONF = """[sfd]
window_grace_ms = 2000
log_level = warning
[limits]
max_pending_steps = 4194304
[gates]
warmup_steps = 0
window_steps = 100
"""


def wait_socket(path, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("sfd exited")
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(path)
            s.close()
            return
        except OSError:
            time.sleep(0.01)
    sys.exit("sfd did not start")


def job_counts(sfctl, query, job):
    """(records ingested, records rejected) of a job."""
    p = subprocess.run([sfctl, "--socket", query, "jobs", "--json"], capture_output=True)
    for j in json.loads(p.stdout or b"[]"):
        if j["job_id"] == job:
            return j["records"], j["rejected"]
    return 0, 0


def cpu_seconds(pid):
    """User + system CPU time of a process, from /proc."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(a, d, job, rate_total, sfd_pid):
    ingest = os.path.join(d, "run", "ingest.sock")
    query = os.path.join(d, "run", "query.sock")
    per = rate_total / a.senders if rate_total else 0
    procs = []
    c0 = cpu_seconds(sfd_pid)
    t0 = time.monotonic()
    for r in range(a.senders):
        if a.client:
            args = [a.client, ingest, job, str(r), str(a.senders), str(a.records), str(per)]
        else:
            args = [a.sender, "--socket", ingest, "--job", job, "--rank", str(r), "--world",
                    str(a.senders), "--steps", str(a.records), "--batch", str(a.batch)]
            if per:
                args += ["--rate", str(per)]
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE))
    sent = dropped = 0
    for p in procs:
        out = dict(kv.split("=", 1) for kv in p.communicate()[0].decode().split() if "=" in kv)
        sent += int(out["sent"])
        dropped += int(out["dropped"])
    # Ingest is done when sfd has accounted for every record that was sent
    # (taken, or refused past a bound when ranks drift far apart).
    deadline = time.monotonic() + 120
    got = rej = 0
    while time.monotonic() < deadline:
        got, rej = job_counts(a.sfctl, query, job)
        if got + rej >= sent:
            break
        time.sleep(0.005)
    t1 = time.monotonic()
    cpu = cpu_seconds(sfd_pid) - c0
    total = a.senders * a.records
    return dict(offered=rate_total, sent=sent, dropped=dropped, ingested=got, rejected=rej,
                lost=total - got, seconds=t1 - t0, rate=got / (t1 - t0), cpu=cpu,
                per_cpu=got / cpu if cpu > 0 else float("nan"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sfd", required=True)
    ap.add_argument("--sfctl", required=True)
    ap.add_argument("--sender")
    ap.add_argument("--client")
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--records", type=int, default=200000, help="per sender")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rates", default="100000,250000,500000,750000,1000000,1500000,2000000")
    a = ap.parse_args()
    if not (a.sender or a.client):
        ap.error("--client or --sender is required")
    d = tempfile.mkdtemp(prefix="sfd-bench-")
    conf = os.path.join(d, "sfd.conf")
    with open(conf, "w") as f:
        f.write(CONF)
    log = open(os.path.join(d, "sfd.log"), "w")
    sfd = subprocess.Popen([a.sfd, "--config", conf, "--runtime-dir", os.path.join(d, "run"),
                            "--state-dir", os.path.join(d, "state")],
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_socket(os.path.join(d, "run", "query.sock"), sfd)
        print("%d %s senders x %d records, one job of %d ranks"
              % (a.senders, "libsfclient" if a.client else "raw protobuf-c (batch %d)" % a.batch,
                 a.records, a.senders))
        print("%12s %12s %10s %10s %10s %8s %8s %14s" % ("offered/s", "ingested/s", "dropped",
                                                        "rejected", "lost", "seconds", "sfd cpu",
                                                        "rec/sfd-cpu-s"))
        best = prev_ok = 0
        results = []
        for i, rate in enumerate([int(x) for x in a.rates.split(",") if x] + [0]):
            r = run_once(a, d, "bench%d" % i, rate, sfd.pid)
            results.append(r)
            print("%12s %12.0f %10d %10d %10d %8.2f %8.2f %14.0f"
                  % (rate or "unpaced", r["rate"], r["dropped"], r["rejected"], r["lost"],
                     r["seconds"], r["cpu"], r["per_cpu"]))
            if rate and r["lost"] == 0 and best == prev_ok:
                best = rate         # every offered rate up to this one was lossless
            prev_ok = rate if rate and r["lost"] == 0 and best == rate else -1
        unpaced = results[-1]
        print("highest offered rate lossless at and below: %d records/s" % best)
        print("sfd CPU cost: %.0f records per sfd CPU-second (median over the runs)"
              % sorted(r["per_cpu"] for r in results)[len(results) // 2])
        print("unpaced: %.0f records/s ingested (%d dropped by the senders)"
              % (unpaced["rate"], unpaced["dropped"]))
    finally:
        sfd.terminate()
        sfd.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


main()
