#!/usr/bin/env python3
"""A real two-rank DDP job on one GPU with the NCCL backend and the built
profiler plugin, in which rank 1's inner communication hook waits a tenth of a
clean step before it issues its all-reduce (docs/ACCOUNTING.md,
"Communication verdict"). Both ranks report to a private sfd through the
binding's hook, sf.ddp_comm_hook(rec, inner=delayed), and the parent checks:

- the window's straggler is rank 1 with origin communication, and the
  communication verdict sees every rank's issue marks;
- the hook wrapper's cost, paired: each step runs the same batch through two
  DDP replicas of one model, one with the plain inner hook and one with the
  wrapper, in alternating order; the median per-step difference and its
  95 % interval (bootstrap over steps) are printed, and the gradients of the
  two replicas must be bit-identical at every step.

--case plugin checks the verdict from the NCCL plugin's data alone: no
hook wrapper, no Python marks, only rec.stage() around a synchronizing
backward. Rank 1's GPU is kept busy (a torch.cuda._sleep kernel of
PLUGIN_DELAY_S on its current stream) just before DDP issues its last
bucket's all-reduce, so its host enqueues on time but the collective's
kernel starts late. The plugin ships each step's enqueue point and that
kernel's start and end (docs/SIDE_EVIDENCE.md, "Kernel start"), and the
check is that the window's straggler is rank 1 with origin communication,
every row's issue lag coming from a kernel start. When NCCL gives no
kernel timestamps, the summary says they are absent.

--cpu runs the same two ranks on Gloo without a GPU: it checks this harness
(with --case plugin, Gloo has no plugin: the check is that the
communication verdict says it cannot see, and names nobody).

Run by tests/gpu/run.sh (it sets SFD, SFCTL, SF_NCCL_PLUGIN, PYTHONPATH).
Exit 0: every check passed; 1: a mismatch, listed in the summary."""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
import sfdtest  # noqa: E402  (path set above)

WORLD = 2
HIDDEN = 1
WARMUP = 10
STEPS = 40
CONF = "[gates]\nwarmup_steps = %d\nwindow_steps = %d\n" % (WARMUP, STEPS)
RANK_TIMEOUT = int(os.environ.get("SF_GPU_RANK_TIMEOUT", "240"))
SYNC = "model.backward_cpu_wall"
PLUGIN_DELAY_S = 0.02


class Summary:
    def __init__(self, case):
        self.case, self.lines, self.failed = case, [], 0

    def check(self, ok, what):
        self.lines.append("%s %s" % ("ok  " if ok else "FAIL", what))
        self.failed += 0 if ok else 1

    def note(self, what):
        self.lines.append("note " + what)

    def print(self):
        print("gpu comm %s:" % self.case)
        for line in self.lines:
            print("  " + line)


# ---- one rank ---------------------------------------------------------------

def rank_main(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    import stagefrontier as sf
    import faulthandler

    # A hung rank says where before the parent's timeout kills it.
    faulthandler.dump_traceback_later(RANK_TIMEOUT - 10, exit=False)
    rank = int(os.environ["RANK"])
    if args.cpu:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(args.store, "store"),
                                rank=rank, world_size=WORLD)
        dev, ids = torch.device("cpu"), None
    else:
        torch.cuda.set_device(0)
        dev, ids = torch.device("cuda", 0), [0]
        dist.init_process_group("nccl", rank=rank, world_size=WORLD, device_id=dev)
    torch.manual_seed(0)

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                   torch.nn.Linear(1024, 512)).to(dev)

    if args.case == "plugin":
        return plugin_rank(args, rank, model(), ids, dev)
    plain, wrapped = DDP(model(), device_ids=ids), DDP(model(), device_ids=ids)
    delay = {"s": 0.0}

    def delayed(state, bucket):
        if delay["s"] > 0 and rank == HIDDEN and bucket.is_last():
            time.sleep(delay["s"])    # a slow hook: ready, but late to issue
        return default_hooks.allreduce_hook(state, bucket)

    rec = sf.Recorder(job_id=os.environ["SF_JOB_ID"], socket=os.environ["SF_SOCKET"], rank=rank,
                      world_size=WORLD, sync_stages=[SYNC])
    plain.register_comm_hook(None, delayed)
    wrapped.register_comm_hook(None, sf.ddp_comm_hook(rec, inner=delayed))
    sync = torch.cuda.synchronize if not args.cpu else (lambda: None)
    gen = torch.Generator().manual_seed(rank)
    walls, diffs, identical = [], [], True
    for step in range(WARMUP + STEPS):
        if step == WARMUP:
            med = torch.tensor([statistics.median(walls[2:])], device=dev)
            dist.all_reduce(med, op=dist.ReduceOp.MAX)
            delay["s"] = 0.1 * float(med.item())
        x = torch.randn(64, 512, generator=gen).to(dev)
        cost = {}
        # The same batch through both replicas, in alternating order.
        for which in (("plain", "wrapped") if step % 2 else ("wrapped", "plain")):
            m = wrapped if which == "wrapped" else plain
            sync()
            t0 = time.perf_counter()
            if which == "wrapped":
                with rec.step():
                    with rec.stage(SYNC):
                        m(x).square().mean().backward()
                        sync()
            else:
                m(x).square().mean().backward()
                sync()
            cost[which] = time.perf_counter() - t0
        walls.append(cost["wrapped"])
        diffs.append(cost["wrapped"] - cost["plain"])
        for a, b in zip(plain.parameters(), wrapped.parameters()):
            identical &= bool(torch.equal(a.grad, b.grad))
            a.grad = None
            b.grad = None
    rec.close()
    dist.destroy_process_group()
    with open(args.out, "w") as f:
        json.dump({"rank": rank, "identical": identical, "diffs": diffs[WARMUP:],
                   "delay_s": delay["s"]}, f)
    return 0


def gpu_sleep_cycles(seconds):
    """torch.cuda._sleep's cycles for about `seconds` on this GPU, measured."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 10 ** 7
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return int(cycles * seconds / (start.elapsed_time(end) / 1e3))


def plugin_rank(args, rank, net, ids, dev):
    """Plain DDP, the stage timed, no marks: the plugin's data alone."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    import stagefrontier as sf

    m = DDP(net, device_ids=ids)
    late = {"on": False, "cycles": 0 if args.cpu else gpu_sleep_cycles(PLUGIN_DELAY_S)}

    def busy_gpu(state, bucket):
        # Not a mark: the host issues at once, the GPU starts it late.
        if late["on"] and rank == HIDDEN and bucket.is_last() and not args.cpu:
            torch.cuda._sleep(late["cycles"])
        return default_hooks.allreduce_hook(state, bucket)

    m.register_comm_hook(None, busy_gpu)
    rec = sf.Recorder(job_id=os.environ["SF_JOB_ID"], socket=os.environ["SF_SOCKET"], rank=rank,
                      world_size=WORLD, sync_stages=[SYNC])
    sync = torch.cuda.synchronize if not args.cpu else (lambda: None)
    gen = torch.Generator().manual_seed(rank)
    for step in range(WARMUP + STEPS):
        late["on"] = step >= WARMUP
        x = torch.randn(64, 512, generator=gen).to(dev)
        with rec.step():
            with rec.stage(SYNC):
                m(x).square().mean().backward()
                sync()
    rec.close()
    dist.destroy_process_group()
    with open(args.out, "w") as f:
        json.dump({"rank": rank, "delay_s": PLUGIN_DELAY_S}, f)
    return 0


# ---- the parent: sfd, both ranks, the checks ------------------------------------

def rank_env(rank, sfd, job, port, log_dir, cpu):
    env = dict(os.environ, SF_SOCKET=sfd.ingest, SF_JOB_ID=job, RANK=str(rank),
               WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port))
    if not cpu:
        # Kernel times ship within a tick of the kernel's end: a short tick
        # lets them reach sfd before the step's record.
        env.update(SF_NCCL_FLUSH_MS="2")
        env.update(NCCL_PROFILER_PLUGIN=os.environ["SF_NCCL_PLUGIN"],
                   NCCL_HOSTID="sf-gpu-host-%d" % rank, NCCL_SOCKET_IFNAME="lo",
                   NCCL_IB_DISABLE="1", NCCL_DEBUG_FILE=os.path.join(log_dir, "nccl.%p"))
    return env


def run_ranks(s, args, sfd, job, log_dir):
    port = sfdtest.free_port()
    procs, files = [], []
    for rank in range(WORLD):
        files.append(os.path.join(log_dir, "rank.%d.json" % rank))
        cmd = [sys.executable, os.path.abspath(__file__), "--rank-of-job", "--out", files[-1],
               "--store", log_dir, "--case", args.case] + (["--cpu"] if args.cpu else [])
        procs.append(subprocess.Popen(cmd, env=rank_env(rank, sfd, job, port, log_dir, args.cpu)))
    for rank, p in enumerate(procs):
        try:
            rc = p.wait(timeout=RANK_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        s.check(rc == 0, "rank %d exited %d" % (rank, rc))
    return None if s.failed else [json.load(open(f)) for f in files]


def window(sfd, job):
    deadline = time.monotonic() + sfdtest.TIMEOUT
    while time.monotonic() < deadline:
        r = sfd.sfctl("report", job, "--last", "1", "--json", check_rc=None)
        ws = json.loads(r.stdout) if r.returncode == 0 else []
        if ws and ws[-1]["window"]["steps"] == STEPS:
            return ws[-1]
        time.sleep(0.1)
    return None


def paired_interval(diffs, seed=1):
    """Median paired difference and its 95 % bootstrap interval."""
    rnd = random.Random(seed)
    boots = sorted(statistics.median(rnd.choices(diffs, k=len(diffs))) for _ in range(2000))
    return statistics.median(diffs), boots[50], boots[1949]


def check_plugin_case(s, args, sfd, w):
    """The verdict from the plugin's data alone (no Python marks)."""
    comm, v = w["communication"], w.get("straggler")
    status = sfd.status()
    if args.cpu:
        s.check(comm["visibility"] == "no_issue_marks" and comm["verdict"] is None,
                "without the plugin the communication verdict cannot see: %s" % comm)
        return
    s.note("enqueue points %d, with kernel times %d, issue lags from kernel starts %d"
           % (status["enqueue_points"], status["kernel_points"], status["kernel_issue_lags"]))
    if status["enqueue_points"] > 0 and status["kernel_points"] == 0:
        s.check(False, "NCCL gave no kernel timestamps the plugin could place on the host's "
                "clock: kernel times absent, so no verdict from the plugin alone")
        return
    # A record that leaves before its step's kernel times reach sfd gets no
    # lag (docs/SIDE_EVIDENCE.md, "Kernel start", Ordering): most rows must
    # have one, not all.
    s.check(comm["visibility"] == "seen" and comm["marked_rows"] >= 0.8 * comm["rows"],
            "the rows' issue lags came from the plugin's kernel starts: %s" % comm)
    s.check(v is not None and v["rank"] == HIDDEN and v.get("origin") == "communication",
            "the straggler is rank %d's communication, from the plugin alone: %s" % (HIDDEN, v))
    cv = comm.get("verdict") or {}
    s.check(cv.get("median_issue_lag_s", 0) >= 0.5 * PLUGIN_DELAY_S,
            "its kernel started about %.0f ms after its arrival: %s" % (1e3 * PLUGIN_DELAY_S, cv))


def main(args):
    s = Summary(("cpu (the harness only)" if args.cpu else "nccl") +
                (", plugin data alone" if args.case == "plugin" else ""))
    log_dir = tempfile.mkdtemp(prefix="sf-gpu-comm-")
    sfd = sfdtest.Sfd(CONF)
    job = "gpu-comm"
    try:
        ranks = run_ranks(s, args, sfd, job, log_dir)
        w = window(sfd, job) if ranks else None
        if ranks:
            s.check(w is not None, "the measured window closed")
        if w is not None and args.case == "plugin":
            check_plugin_case(s, args, sfd, w)
        elif w is not None:
            comm, v = w["communication"], w.get("straggler")
            s.check(comm["visibility"] == "seen" and comm["marked_rows"] == comm["rows"],
                    "every row carried its issue mark: %s" % comm)
            s.check(v is not None and v["rank"] == HIDDEN and v.get("origin") == "communication",
                    "the straggler is rank %d's communication: %s" % (HIDDEN, v))
        if ranks and args.case == "hook":
            s.check(all(r["identical"] for r in ranks),
                    "gradients bit-identical with and without the wrapper at every step")
            diffs = [d for r in ranks for d in r["diffs"]]
            med, lo, hi = paired_interval(diffs)
            s.note("wrapper cost per step, paired: %.1f us (95 %% interval %.1f to %.1f us), "
                   "delay %.1f ms" % (1e6 * med, 1e6 * lo, 1e6 * hi, 1e3 * ranks[HIDDEN]["delay_s"]))
    finally:
        sfd.close()
    s.print()
    if not s.failed:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 1 if s.failed else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="Gloo on the CPU: checks the harness only")
    ap.add_argument("--case", choices=("hook", "plugin"), default="hook",
                    help="hook: the binding's marks; plugin: the NCCL plugin's data alone")
    ap.add_argument("--rank-of-job", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sys.exit(rank_main(a) if a.rank_of_job else main(a))
