#!/usr/bin/env python3
"""A real two-rank torch job on one GPU with the NCCL backend, instrumented with
the stagefrontier binding, the CUDA-event forward channel sampling every step
and NCCL loading the built profiler plugin. Both ranks report to a private sfd,
and the parent checks what sfd shows against what the ranks did:

- CUDA-event samples arrive and R (ready-event forward over CPU forward) is
  in (0, 1.5]. Forward ends with a device synchronize, so its CPU wall bounds
  its GPU time and R cannot honestly exceed 1; 1.5 leaves room for timers.
- NCCL itself loaded the plugin: its own log says "PROFILER/Plugin: Loaded
  stagefrontier (vN)", and the plugin's init line came through NCCL's logger
  with the same N.
- Collective counts and bytes in the report equal the all-reduces the ranks
  issued in backward (sfd sums a node's ranks), and every communicator used
  is seen.
- GPU kernel time is present with timed_count <= count, or absent, and then
  the summary says so with the reason.

Two ranks, because NCCL runs a one-rank collective as a plain copy that never
reaches the profiler plugin. NCCL also refuses two ranks of one host on one
device, so each rank names its own host (NCCL_HOSTID) and the two talk over
sockets on loopback, as two nodes would.

--cpu runs the same two ranks on Gloo without a GPU: it checks this harness
(the ranks, the binding, sfd's windows), not the side evidence.

Run by tests/gpu/run.sh (it sets SFD, SFCTL, SF_NCCL_PLUGIN, PYTHONPATH).
Exit 0: every check passed; 1: a mismatch, listed in the summary."""
import argparse
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
import sfdtest  # noqa: E402  (path set above)

STEPS = 40
WINDOW = 10
WORLD = 2
CONF = "[gates]\nwarmup_steps = 0\nwindow_steps = %d\n" % WINDOW
# The all-reduces each step issues in backward: (elements, dtype name, bytes per element).
PLAN = [(1 << 20, "float32", 4), (1 << 16, "float32", 4), (4096, "bfloat16", 2)]
NCCL_DTYPE = {"float32": "ncclFloat32", "bfloat16": "ncclBfloat16"}
RANK_TIMEOUT = 300


class Summary:
    def __init__(self, case):
        self.case, self.lines, self.failed = case, [], 0

    def check(self, ok, what):
        self.lines.append("%s %s" % ("ok  " if ok else "FAIL", what))
        self.failed += 0 if ok else 1

    def note(self, what):
        self.lines.append("note " + what)

    def print(self):
        print("== gpu case %s: %d checks failed" % (self.case, self.failed))
        for line in self.lines:
            print("   " + line)


# ---- one rank ----------------------------------------------------------------

def communicators(dist, case, backend):
    """The default group, plus two more communicators of both ranks."""
    groups = [None]
    if case == "multi":
        groups += [dist.new_group(list(range(WORLD)), backend=backend) for _ in range(2)]
    return groups


def run_job(torch, dist, rec, groups, dev):
    """Trains a small MLP; returns what it issued per communicator index as
    [[index, nccl dtype, bytes of one all-reduce, count], ...]."""
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gpu = dev.type == "cuda"
    plan = [(n, dt, size) if gpu else (n, "float32", 4) for n, dt, size in PLAN]  # Gloo: no bf16
    buffers = [torch.zeros(n, dtype=getattr(torch, dt), device=dev) for n, dt, _ in plan]
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    issued = {}
    for step in range(STEPS):
        with rec.step():
            with rec.stage("data.next_wait"):
                x = torch.randn(256 if gpu else 8, 1024, device=dev)
            with rec.stage("model.fwd_loss_cpu_wall"):
                loss = model(x).square().mean()
                sync()
            with rec.stage("model.backward_cpu_wall"):
                loss.backward()
                for i, ((n, dt, size), buf) in enumerate(zip(plan, buffers)):
                    g = (step + i) % len(groups)
                    dist.all_reduce(buf, group=groups[g])
                    key = (g, NCCL_DTYPE[dt], n * size)
                    issued[key] = issued.get(key, 0) + 1
            with rec.stage("optim.step_cpu_wall"):
                opt.step()
                opt.zero_grad(set_to_none=True)
    sync()
    return [list(k) + [c] for k, c in sorted(issued.items())]


def rank_main(args):
    import torch
    import torch.distributed as dist
    import stagefrontier as sf
    rank = int(os.environ["RANK"])
    if args.cpu:
        # A file store, not rank 0's TCP store: when rank 1 leaves first, that
        # store's thread throws, which a sanitized run cannot survive.
        backend, dev = "gloo", torch.device("cpu")
        dist.init_process_group(backend, init_method="file://" + os.path.join(args.store, "store"),
                                rank=rank, world_size=WORLD)
    else:
        backend, dev = "nccl", torch.device("cuda", 0)
        torch.cuda.set_device(0)
        torch.cuda.init()               # the runtime is loaded before the recorder looks for it
        dist.init_process_group(backend, rank=rank, world_size=WORLD, device_id=dev)
    rec = sf.Recorder(job_id=os.environ["SF_JOB_ID"], socket=os.environ["SF_SOCKET"], rank=rank,
                      world_size=WORLD, event_sample_fraction=0.0 if args.cpu else 1.0)
    issued = run_job(torch, dist, rec, communicators(dist, args.case, backend), dev)
    rec.close()
    if not args.cpu:
        dist.destroy_process_group()    # finalize flushes each communicator's last figures
    with open(args.issued, "w") as f:
        json.dump(issued, f)
    return 0


# ---- the parent: sfd, both ranks, the checks ------------------------------------

def rank_env(rank, sfd, job, port, log_dir, cpu):
    env = dict(os.environ, SF_SOCKET=sfd.ingest, SF_JOB_ID=job, RANK=str(rank),
               WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port))
    if not cpu:
        env.update(NCCL_PROFILER_PLUGIN=os.environ["SF_NCCL_PLUGIN"], NCCL_DEBUG="INFO",
                   NCCL_DEBUG_SUBSYS="INIT,ENV,NET", NCCL_DEBUG_FILE=os.path.join(log_dir, "nccl.%p"),
                   SF_NCCL_FLUSH_MS="5", NCCL_HOSTID="sf-gpu-host-%d" % rank,
                   NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")
    return env


def run_ranks(s, args, sfd, job, log_dir):
    """Runs both ranks to completion; returns the issued rows of both, or None."""
    port = sfdtest.free_port()
    procs, files = [], []
    for rank in range(WORLD):
        files.append(os.path.join(log_dir, "issued.%d.json" % rank))
        cmd = [sys.executable, os.path.abspath(__file__), "--case", args.case,
               "--rank-of-job", "--issued", files[-1], "--store", log_dir]
        cmd += ["--cpu"] if args.cpu else []
        procs.append(subprocess.Popen(cmd, env=rank_env(rank, sfd, job, port, log_dir, args.cpu)))
    for rank, p in enumerate(procs):
        try:
            rc = p.wait(timeout=RANK_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        s.check(rc == 0, "rank %d exited %d" % (rank, rc))
    if s.failed:
        return None
    return [row for path in files for row in json.load(open(path))]


def report_windows(sfd, job):
    r = sfd.sfctl("report", job, "--last", str(STEPS // WINDOW), "--json", check_rc=None)
    return json.loads(r.stdout) if r.returncode == 0 else []


def allreduce_rows(ws, stage=None):
    return [r for w in ws for r in w.get("side_evidence", {}).get("nccl", {}).get("collectives", [])
            if r["collective"] == "AllReduce" and stage in (None, r["enclosing_stage"])]


def wait_filed(s, sfd, job, want):
    """Waits until every window, and every all-reduce when want > 0, is in the
    report; on a timeout says what was there and goes on to the checks."""
    deadline = time.monotonic() + sfdtest.TIMEOUT
    while True:
        ws = report_windows(sfd, job)
        got = sum(r["count"] for r in allreduce_rows(ws))
        if len(ws) == STEPS // WINDOW and got >= want:
            return ws
        if time.monotonic() > deadline:
            s.check(False, "report complete in %.0f s: %d of %d windows, %d of %d all-reduces"
                    % (sfdtest.TIMEOUT, len(ws), STEPS // WINDOW, got, want))
            return ws
        time.sleep(0.05)


def check_events(s, ws):
    samples = sum(w["events"]["samples"] for w in ws)
    ready = sum(w["events"]["ready"] for w in ws)
    s.check(samples > 0 and ready > 0, "CUDA-event samples arrived: %d, %d ready" % (samples, ready))
    for w in ws:
        r = w["events"]["ratio"]
        if w["events"]["ready"]:
            s.check(r is not None and 0 < r <= 1.5, "window %d: R = %s in (0, 1.5]" % (w["window"]["index"], r))


def nccl_log(log_dir):
    return "".join(open(p, errors="replace").read() for p in glob.glob(os.path.join(log_dir, "nccl.*")))


def check_plugin_loaded(s, log_dir):
    text = nccl_log(log_dir)
    loaded = re.search(r"PROFILER/Plugin: [Ll]oaded stagefrontier(?: \(v(\d+)\))?", text)
    init = re.search(r"stagefrontier profiler: init v(\d+) comm", text)
    s.check(loaded is not None, "NCCL's log says it loaded the stagefrontier plugin")
    s.check(init is not None, "the plugin's init ran through NCCL's logger")
    if loaded and init:
        chosen = loaded.group(1) or "4"        # NCCL's v4 loader names no version
        s.check(chosen == init.group(1), "NCCL chose v%s and init ran as v%s" % (chosen, init.group(1)))
    if not loaded or not init:
        for line in text.splitlines():
            if re.search(r"PROFILER|stagefrontier|WARN", line):
                s.note("nccl log: " + line.strip())


def check_collectives(s, ws, issued, n_comms):
    rows = allreduce_rows(ws, "model.backward_cpu_wall")
    want_count = sum(c for _, _, _, c in issued)
    want_bytes = sum(c * b for _, _, b, c in issued)
    got_count, got_bytes = sum(r["count"] for r in rows), sum(r["bytes"] for r in rows)
    s.check(got_count == want_count, "all-reduces in backward: %d reported, %d issued by %d ranks"
            % (got_count, want_count, WORLD))
    s.check(got_bytes == want_bytes, "bytes: %d reported, %d issued" % (got_bytes, want_bytes))
    for dt in sorted({d for _, d, _, _ in issued}):
        want = sum(c for _, d, _, c in issued if d == dt)
        got = sum(r["count"] for r in rows if r["datatype"] == dt)
        s.check(got == want, "%s: %d reported, %d issued" % (dt, got, want))
    comms = {c["hash"]: c for w in ws for c in w.get("side_evidence", {}).get("nccl", {}).get("communicators", [])}
    s.check(len(comms) >= n_comms, "communicators seen: %d, used: %d" % (len(comms), n_comms))
    s.check(all(c["ranks"] == WORLD for c in comms.values()),
            "every communicator has %d ranks: %s" % (WORLD, sorted(c["ranks"] for c in comms.values())))
    timed = sum(r["timed_count"] for r in rows)
    if timed:
        s.check(timed <= got_count and all(r["gpu_time_s"] and r["gpu_time_s"] > 0
                                           for r in rows if r["timed_count"]),
                "GPU kernel time present: %d of %d collectives timed" % (timed, got_count))
    else:
        s.note("GPU kernel time absent: no kernel-channel event reached the plugin for these "
               "collectives")


def main(args):
    if args.cpu and importlib.util.find_spec("torch") is None:
        print("skipped: %s cannot import torch" % sys.executable)
        return 77
    s = Summary(args.case + (" (cpu: the harness only)" if args.cpu else ""))
    log_dir = tempfile.mkdtemp(prefix="sf-gpu-job-")
    sfd = sfdtest.Sfd(CONF)
    job = "gpu-" + args.case
    try:
        issued = run_ranks(s, args, sfd, job, log_dir)
        if issued is not None:
            want = 0 if args.cpu else sum(c for _, _, _, c in issued)
            ws = wait_filed(s, sfd, job, want)
            steps = sum(w["window"]["steps"] for w in ws)
            ranks = sorted({w["window"]["ranks"] for w in ws})
            s.check(steps == STEPS and ranks == [WORLD], "%d windows filed: %d steps of ranks %s"
                    % (len(ws), steps, ranks))
            if not args.cpu:
                check_events(s, ws)
                check_plugin_loaded(s, log_dir)
                check_collectives(s, ws, issued, 3 if args.case == "multi" else 1)
    finally:
        sfd.close()
    s.print()
    if not s.failed:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 1 if s.failed else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=("single", "multi"), required=True)
    ap.add_argument("--cpu", action="store_true", help="Gloo on the CPU: checks the harness only")
    ap.add_argument("--rank-of-job", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--issued", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sys.exit(rank_main(a) if a.rank_of_job else main(a))
