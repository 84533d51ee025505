"""sfd ingest benchmark: N concurrent sender processes stream step records
of one job into one sfd. With --client the senders are libsfclient (its ring,
batching and non-blocking sends); with --sender they are raw protobuf-c
senders that drop a batch as soon as the socket is full. Reports, for each
offered rate, the records/s sfd ingested and whether anything was lost, then
the highest lossless rate and the unpaced throughput.

With --sink, each offered rate is first sent by the same senders to
ingest_sink, a read-and-discard SEQPACKET socket (the physical anchor), then
to sfd, so both see the same load; the lossless rates are compared (target:
sfd >= 0.9 of the sink's). With --overload F, a last run offers F times
sfd's own lossless rate (target at 3: ingested >= 0.8 of that rate; F times
the lowest rate offered when sfd held none) and checks that every record lost
is counted by sfd: dropped by the senders (and reported to sfd), rejected, or
shed before decoding.

With --decode-anchor, each offered rate is also sent to `ingest_sink --decode`,
which unpacks every datagram as sfd's decoder does and frees it: the floor of
any daemon that reads its input. The senders' CPU per record is printed for
every run: on a machine whose cores the senders share with the receiver, a
receiver that costs more per record leaves the senders less, which bounds the
lossless ratio whatever the receiver does with its share.

usage: ingest_bench.py --sfd PATH --sfctl PATH (--client PATH | --sender PATH)
                       [--sink PATH] [--overload 3] [--senders 8] [--records N]
                       [--set SECTION.KEY=VALUE ...]
                       [--batch 64] [--rates 100000,200000,...] [--sender-nice 10]
                       [--window-steps 100] [--perf FILE] [--decode-anchor]
                       [--pin RECEIVER_CPUS:SENDER_CPUS] [--parallel PP] [--no-unpaced]

--window-steps sets the job's window length: a report is computed for every
closed window (8 ranks x 100 steps by default), so a long window (e.g.
16384) gives fewer, larger reports. --perf FILE profiles sfd (every thread)
with `perf record --call-graph dwarf` from its start to the end of the runs;
bench/ingest/ingest_profile.py FILE groups it by where the CPU goes.

--parallel PP gives the libsfclient senders parallel coordinates (SF_PARALLEL,
which the client's Hello carries): PP pipeline stages x SENDERS/PP data-parallel
ranks, sender r at pp=r/(SENDERS/PP) and dp=r%(SENDERS/PP), so that sfd gathers
the ranks' coordinates and builds every window summary's cohort part
(docs/ACCOUNTING.md, "Cohorts"). bench/ingest/cohort_cost.sh runs it
alternated with runs without coordinates."""

import argparse
import json
import os
import resource
import shutil
import signal
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
window_steps = %d
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
    """(records ingested, rejected, dropped as reported, shed) of a job."""
    p = subprocess.run([sfctl, "--socket", query, "jobs", "--json"], capture_output=True)
    for j in json.loads(p.stdout or b"[]"):
        if j["job_id"] == job:
            return j["records"], j["rejected"], j["dropped"], j.get("shed_records", 0)
    return 0, 0, 0, 0


def cpu_seconds(pid):
    """User + system CPU time of a process, from /proc."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The libsfclient senders run as a job's ranks do, side by side (each step
# ends in a collective): they begin their first step together, this long
# after the first one is started, and keep within 1 024 steps of each other
# through a shared lockstep file (ingest_client.c). Free-running senders
# drift apart by their start-up times and by the scheduler, at these rates
# by hundreds of windows: sfd then closes a window while a lagging rank's
# records for it are still to come, which no real job can cause.
START_AFTER_S = 0.2
LOCKSTEP_SLOT_BYTES = 64


def start_senders(a, ingest, job, rate_total):
    """The sender processes, and the monotonic time (s) their steps begin."""
    def behind():
        if a.sender_nice:
            os.nice(a.sender_nice)
        if a.pin:
            os.sched_setaffinity(0, a.pin[1])

    per = rate_total / a.senders if rate_total else 0
    start_ns = time.monotonic_ns() + (int(START_AFTER_S * 1e9) if a.client else 0)
    lockstep = os.path.join(os.path.dirname(ingest), "lockstep")
    if a.client:
        with open(lockstep, "wb") as f:
            f.write(bytes(a.senders * LOCKSTEP_SLOT_BYTES))
    procs = []
    for r in range(a.senders):
        env = dict(os.environ)
        env.pop("SF_PARALLEL", None)
        if a.client:
            args = [a.client, ingest, job, str(r), str(a.senders), str(a.records), str(per),
                    str(start_ns), lockstep]
            if a.parallel:
                env["SF_PARALLEL"] = parallel_of(r, a.senders, a.parallel)
        else:
            args = [a.sender, "--socket", ingest, "--job", job, "--rank", str(r), "--world",
                    str(a.senders), "--steps", str(a.records), "--batch", str(a.batch)]
            if per:
                args += ["--rate", str(per)]
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, preexec_fn=behind, env=env))
    return procs, start_ns / 1e9


def parallel_of(rank, world, pp):
    """A sender's coordinates: pp stages x world/pp data-parallel ranks, the
    data-parallel index the faster one (ranks of a stage side by side)."""
    dp = world // pp
    return "pp=%d/%d,dp=%d/%d" % (rank // dp, pp, rank % dp, dp)


def key_values(stdout):
    """The KEY=VALUE words a sender or a sink prints."""
    return dict(kv.split("=", 1) for kv in stdout.decode().split() if "=" in kv)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_senders(started):
    """Records sent and dropped by the senders, and their CPU-seconds (every
    child reaped meanwhile is a sender)."""
    procs, start_s = started
    sent = dropped = late = 0
    c0 = children_cpu()
    for p in procs:
        out = key_values(p.communicate()[0])
        sent += int(out["sent"])
        dropped += int(out["dropped"])
        late += int(out.get("late", 0))
    if late:
        print("warning: %d senders were not ready at the common start" % late, file=sys.stderr)
    return sent, dropped, children_cpu() - c0, start_s


def run_result(a, offered, sent, dropped, sender_cpu, t0, cpu, ingested, rejected=0,
               reported=0, shed=0):
    """One run's row, timed from the senders' common start to now."""
    seconds = time.monotonic() - t0
    return dict(offered=offered, sent=sent, dropped=dropped, ingested=ingested,
                rejected=rejected, reported=reported, shed=shed,
                lost=a.senders * a.records - ingested, seconds=seconds,
                rate=ingested / seconds, cpu=cpu,
                per_cpu=ingested / cpu if cpu > 0 else float("nan"),
                sender_us=sender_cpu / sent * 1e6 if sent else float("nan"))


def run_once(a, d, job, rate_total, sfd_pid):
    ingest = os.path.join(d, "run", "ingest.sock")
    query = os.path.join(d, "run", "query.sock")
    c0 = cpu_seconds(sfd_pid)
    sent, dropped, sender_cpu, t0 = wait_senders(start_senders(a, ingest, job, rate_total))
    # Ingest is done when sfd has accounted for every record that was sent
    # (taken, refused, or shed before decoding).
    deadline = time.monotonic() + 120
    got = rej = rep = shed = 0
    while time.monotonic() < deadline:
        got, rej, rep, shed = job_counts(a.sfctl, query, job)
        if got + rej + shed >= sent:
            break
        time.sleep(0.005)
    return run_result(a, rate_total, sent, dropped, sender_cpu, t0, cpu_seconds(sfd_pid) - c0,
                      ingested=got, rejected=rej, reported=rep, shed=shed)


def run_sink(a, d, job, rate_total, decode=False):
    """The same senders into ingest_sink: records sent are records read."""
    path = os.path.join(d, "sink.sock")
    sink = subprocess.Popen([a.sink] + (["--decode"] if decode else []) + [path],
                            stdout=subprocess.PIPE, preexec_fn=receiver_cpus(a))
    wait_socket(path, sink)
    c0 = cpu_seconds(sink.pid)
    sent, dropped, sender_cpu, t0 = wait_senders(start_senders(a, path, job, rate_total))
    r = run_result(a, rate_total, sent, dropped, sender_cpu, t0, cpu_seconds(sink.pid) - c0,
                   ingested=sent)
    sink.terminate()
    out = key_values(sink.communicate()[0])
    if int(out.get("undecodable", 0)):
        sys.exit("ingest_sink --decode: %s datagrams did not decode" % out["undecodable"])
    return r


HEADER = "%-6s %12s %12s %6s %10s %10s %10s %10s %8s %8s %14s %10s" % (
    "", "offered/s", "ingested/s", "pace", "dropped", "rejected", "shed", "lost", "seconds",
    "cpu", "rec/cpu-s", "sender-us")


def row(name, r):
    pace = "%6.2f" % (r["rate"] / r["offered"]) if r["offered"] else "%6s" % "-"
    return "%-6s %12s %12.0f %s %10d %10d %10d %10d %8.2f %8.2f %14.0f %10.3f" % (
        name, r["offered"] or "unpaced", r["rate"], pace, r["dropped"], r["rejected"],
        r["shed"], r["lost"], r["seconds"], r["cpu"], r["per_cpu"], r["sender_us"])


def median(values):
    v = sorted(values)
    return v[len(v) // 2]


# A rate is held when nothing is lost and the records went in at no less than
# this share of it: senders held back (by the CPU the receiver takes, or by
# the lockstep) offer less than the rate asked for.
PACE_MIN = 0.9


def lossless_rate(results):
    """The highest offered rate such that it and every lower one was held."""
    return lossless_bracket(results)[0]


def lossless_bracket(results):
    """The highest offered rate held (as lossless_rate) and the first offered
    rate above it that was not (None when every rate was held): the true
    lossless rate lies between the two."""
    best = 0
    for r in sorted((r for r in results if r["offered"]), key=lambda r: r["offered"]):
        if r["lost"] or r["rate"] < PACE_MIN * r["offered"]:
            return best, r["offered"]
        best = r["offered"]
    return best, None


def ratio_bracket(sfd_results, sink_results):
    """What the rate ladder allows of sfd's lossless rate over the sink's:
    each lies between the rate it held and the next one offered, so a
    ladder of coarse steps reads 0.5 for daemons anywhere between 0.5 and 1."""
    held, failed = lossless_bracket(sfd_results)
    sink_held, sink_failed = lossless_bracket(sink_results)
    low = held / sink_failed if sink_failed else 0.0
    high = failed / sink_held if failed and sink_held else float("inf")
    return low, high


def receiver_cpus(a):
    """Pins sfd or the sink to the receiver's CPUs under --pin."""
    return (lambda: os.sched_setaffinity(0, a.pin[0])) if a.pin else None


def cpu_sets(v):
    sets = [{int(c) for c in part.split(",")} for part in v.split(":")]
    if len(sets) != 2:
        raise argparse.ArgumentTypeError("RECEIVER_CPUS:SENDER_CPUS, e.g. 0:1")
    return sets


def print_rejections(sfctl, query):
    """sfd's refusals over all the runs, by reason (sfctl status)."""
    p = subprocess.run([sfctl, "--socket", query, "status", "--json"], capture_output=True)
    rejected = json.loads(p.stdout or b"{}").get("rejected", {})
    print("sfd rejected, all runs: %s" % (", ".join(
        "%s %d" % kv for kv in sorted(rejected.items()) if kv[1]) or "nothing"))


def print_live_tested(sfctl, query):
    """Complete steps the live verdict tested, over the runs' jobs (sfctl
    events): 0 when it is off, or when no job got its baseline."""
    p = subprocess.run([sfctl, "--socket", query, "jobs", "--json"], capture_output=True)
    tested = 0
    for j in json.loads(p.stdout or b"[]"):
        e = subprocess.run([sfctl, "--socket", query, "events", j["job_id"], "--json"],
                           capture_output=True)
        tested += json.loads(e.stdout or b"{}").get("steps_tested", 0)
    print("live verdict: %d complete steps tested, all runs" % tested)


def print_cohorts(sfctl, query):
    """How many of the runs' jobs had their latest window's report compare
    ranks inside cohorts (the label role_aware_applied): with --parallel,
    every job, else none."""
    p = subprocess.run([sfctl, "--socket", query, "jobs", "--json"], capture_output=True)
    jobs = [j["job_id"] for j in json.loads(p.stdout or b"[]")]
    applied = 0
    for job in jobs:
        r = subprocess.run([sfctl, "--socket", query, "report", job, "--json"],
                           capture_output=True)
        applied += b'"role_aware_applied"' in r.stdout
    print("cohorts: %d of %d jobs' latest reports applied the role-aware analysis"
          % (applied, len(jobs)))


def print_cpu_shares(sink_results, decode_results, sfd_results):
    """CPU per record (medians over the rates) of the senders and each
    receiver: where the cores are shared, the senders' rate falls as the
    receiver's cost rises."""
    parts = [("sink", sink_results), ("decode sink", decode_results), ("sfd", sfd_results)]
    print("CPU per record, median over the rates: " + "; ".join(
        "%s %.3f us (senders %.3f us)" % (name, 1e6 / median(r["per_cpu"] for r in rs),
                                         median(r["sender_us"] for r in rs))
        for name, rs in parts if rs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sfd", required=True)
    ap.add_argument("--sfctl", required=True)
    ap.add_argument("--sender")
    ap.add_argument("--client")
    ap.add_argument("--sink", help="ingest_sink: the read-and-discard anchor, same senders")
    ap.add_argument("--overload", type=float, default=0,
                    help="then offer this multiple of sfd's lossless rate")
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--sender-nice", type=int, default=0,
                    help="run the senders at this nice value (sink and sfd alike keep theirs)")
    ap.add_argument("--records", type=int, default=200000, help="per sender")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--window-steps", type=int, default=100,
                    help="steps per window: one report per closed window")
    ap.add_argument("--pin", type=cpu_sets,
                    help="RECEIVER_CPUS:SENDER_CPUS (e.g. 0:1): the receiver on cores of its own")
    ap.add_argument("--decode-anchor", action="store_true",
                    help="also feed ingest_sink --decode (read and unpack) at every rate")
    ap.add_argument("--perf", help="record a perf profile of sfd into this file")
    ap.add_argument("--no-unpaced", action="store_true",
                    help="only the rates given: no unpaced run after them")
    ap.add_argument("--parallel", type=int, default=0, metavar="PP",
                    help="senders declare coordinates: PP pipeline stages x SENDERS/PP dp ranks")
    ap.add_argument("--rates", default="100000,250000,500000,750000,1000000,1500000,2000000")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="a configuration key for sfd, e.g. limits.history_rows=false (repeatable)")
    a = ap.parse_args()
    if not (a.sender or a.client):
        ap.error("--client or --sender is required")
    if a.parallel and (not a.client or a.parallel < 1 or a.senders % a.parallel):
        ap.error("--parallel PP needs --client and a PP that divides --senders")
    d = tempfile.mkdtemp(prefix="sfd-bench-")
    conf = os.path.join(d, "sfd.conf")
    with open(conf, "w") as f:
        f.write(CONF % a.window_steps)
        for setting in a.set:
            key, _, value = setting.partition("=")
            section, _, name = key.rpartition(".")
            if not section or not name or not value:
                ap.error("--set %r: expected SECTION.KEY=VALUE" % setting)
            f.write("[%s]\n%s = %s\n" % (section, name, value))
    log = open(os.path.join(d, "sfd.log"), "w")
    sfd = subprocess.Popen([a.sfd, "--config", conf, "--runtime-dir", os.path.join(d, "run"),
                            "--state-dir", os.path.join(d, "state")],
                           stdout=log, stderr=subprocess.STDOUT, preexec_fn=receiver_cpus(a))
    ok = True
    perf = None
    try:
        wait_socket(os.path.join(d, "run", "query.sock"), sfd)
        if a.perf:
            # a query answered: the loop runs, so every thread of sfd exists
            job_counts(a.sfctl, os.path.join(d, "run", "query.sock"), "")
            perf = subprocess.Popen(["perf", "record", "-q", "-F", "1000", "--call-graph",
                                     "dwarf,16384", "-o", a.perf, "-p", str(sfd.pid)])
        print("%d %s senders x %d records, one job of %d ranks, windows of %d steps; %d CPUs,"
              " load %s" % (a.senders,
                            "libsfclient" if a.client else "raw protobuf-c (batch %d)" % a.batch,
                            a.records, a.senders, a.window_steps, os.cpu_count(),
                            open("/proc/loadavg").read().split()[:3]))
        if a.parallel:
            print("coordinates: pp=%d x dp=%d (SF_PARALLEL, e.g. rank 1: %s)"
                  % (a.parallel, a.senders // a.parallel, parallel_of(1, a.senders, a.parallel)))
        if a.pin:
            print("receiver on CPUs %s, senders on CPUs %s" % tuple(sorted(c) for c in a.pin))
        print(HEADER)
        results, sink_results, decode_results = [], [], []
        rates = [int(x) for x in a.rates.split(",") if x] + ([] if a.no_unpaced else [0])
        for i, rate in enumerate(rates):
            if a.sink:
                r = run_sink(a, d, "sink%d" % i, rate)
                sink_results.append(r)
                print(row("sink", r), flush=True)
            if a.sink and a.decode_anchor:
                r = run_sink(a, d, "decode%d" % i, rate, decode=True)
                decode_results.append(r)
                print(row("decode", r), flush=True)
            r = run_once(a, d, "bench%d" % i, rate, sfd.pid)
            results.append(r)
            print(row("sfd", r), flush=True)
        best = lossless_rate(results)
        unpaced = results[-1]  # the last rate offered, with --no-unpaced
        print("load after the runs: %s" % open("/proc/loadavg").read().split()[:3])
        print("sfd: highest offered rate lossless at and below: %d records/s" % best)
        print("sfd CPU cost: %.0f records per sfd CPU-second (median over the runs)"
              % median(r["per_cpu"] for r in results))
        print("sfd unpaced: %.0f records/s ingested (%d dropped by the senders)"
              % (unpaced["rate"], unpaced["dropped"]))
        if a.sink:
            sink_best = lossless_rate(sink_results)
            ratio = best / sink_best if sink_best else float("nan")
            print("sink: highest offered rate lossless at and below: %d records/s; unpaced %.0f/s"
                  % (sink_best, sink_results[-1]["rate"]))
            low, high = ratio_bracket(results, sink_results)
            print("sfd/sink lossless rate: %.2f (target >= 0.9: %s); the rates offered allow"
                  " %.2f to %s" % (ratio, "met" if ratio >= 0.9 else "missed", low,
                                   "%.2f" % high if high != float("inf") else "any higher"))
            print_cpu_shares(sink_results, decode_results, results)
        if decode_results:
            decode_best = lossless_rate(decode_results)
            print("decode sink: highest offered rate lossless at and below: %d records/s;"
                  " unpaced %.0f/s; decode/sink %.2f, sfd/decode %.2f"
                  % (decode_best, decode_results[-1]["rate"],
                     decode_best / sink_best if sink_best else float("nan"),
                     best / decode_best if decode_best else float("nan")))
        # With no rate held (a loaded or sanitized build), the overload run
        # still checks that every loss is counted, from the lowest rate.
        base = best or next((x for x in rates if x), 0)
        if a.overload and base:
            rate = int(base * a.overload)
            r = run_once(a, d, "overload", rate, sfd.pid)
            print(row("sfd", r))
            counted = r["reported"] + r["rejected"] + r["shed"]
            if best:
                frac = r["rate"] / best
                print("%.1fx overload (%d/s): ingested %.0f/s = %.2f of the lossless rate"
                      " (target >= 0.8: %s)" % (a.overload, rate, r["rate"], frac,
                                               "met" if frac >= 0.8 else "missed"))
            else:
                print("%.1fx the lowest rate (%d/s; no rate was held): ingested %.0f/s"
                      % (a.overload, rate, r["rate"]))
            print("lost %d: counted by sfd %d (dropped as the senders reported %d, rejected %d,"
                  " shed before decoding %d): %s"
                  % (r["lost"], counted, r["reported"], r["rejected"], r["shed"],
                     "every drop counted" if counted == r["lost"] else "UNCOUNTED LOSS"))
            ok = counted == r["lost"]
        print_rejections(a.sfctl, os.path.join(d, "run", "query.sock"))
        print_live_tested(a.sfctl, os.path.join(d, "run", "query.sock"))
        print_cohorts(a.sfctl, os.path.join(d, "run", "query.sock"))
    finally:
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        sfd.terminate()
        sfd.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(0 if ok else 1)


main()
