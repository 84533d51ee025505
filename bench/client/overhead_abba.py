#!/usr/bin/python3
"""The binding's cost on a training step, paired in one process (ABBA).

Owns one measurement: the step time of a real PyTorch training loop with
the binding on (a stagefrontier Recorder connected to a real sfd, the
default stages, the DDP communication hook's three marks) against the same
loop with it off (the same calls on train.py's do-nothing recorder, the hook
passing straight to the inner hook), in blocks of a few steps in the order
A B B A A B B A ..., so that drift and the machine's other load fall on both
alike. Each ABBA quad gives one paired difference (its two B blocks' mean
step minus its two A blocks'), relative to the A mean. The figure is the
median of the differences with its distribution-free 95 % interval (order
statistics: a burst of load on a shared machine moves a mean, not a
median), and the mean with Student's interval beside it; the run goes on
until the median's interval is narrower than --width (0.4 % of the step by
default) or --max-seconds passes.

Beside it, from thread CPU clocks: the binding's own CPU time a step (the
calls a step makes, in a tight loop on the training thread, against the
same loop with no call, from CLOCK_THREAD_CPUTIME_ID), and the CPU time of the threads the binding
starts (its heartbeat), from /proc/self/task/*/schedstat, a step.

Workloads: `demo`, the DDP demo model of bench/ddp/train.py (a one-rank
Gloo DDP job, so the communication hook runs); `10ms`, a step of about
10 ms of matrix products on an idle core (longer under load), split into
the same stages.

Run:  PYTHONPATH=build-rel/python /usr/bin/python3 bench/client/overhead_abba.py \\
          --sfd build-rel/daemon/sfd/sfd --workload demo
It prints one JSON object.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "ddp"))

STAGES = ["data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
          "callbacks.cpu_wall", "optim.step_cpu_wall"]
SYNC = ["model.backward_cpu_wall"]
# Two-sided 95 % quantiles of Student's t for small samples; 1.96 beyond.
T95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 8: 2.36, 10: 2.26, 15: 2.14, 20: 2.09,
       30: 2.05, 60: 2.00, 120: 1.98}


def t95(n):
    best = 1.96
    for k in sorted(T95, reverse=True):
        if n <= k:
            best = T95[k]
    return best


def binding_threads():
    return set(int(t) for t in os.listdir("/proc/self/task"))


def threads_cpu_ns(tids):
    total = 0
    for tid in tids:
        try:
            with open("/proc/self/task/%d/schedstat" % tid) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that has ended
    return total


def start_sfd(sfd, root):
    conf = os.path.join(root, "sfd.conf")
    with open(conf, "w") as f:
        f.write("[sfd]\nlog_level = warning\n[gates]\nwarmup_steps = 0\nwindow_steps = 100\n")
    proc = subprocess.Popen([sfd, "--foreground", "--config", conf, "--runtime-dir", root,
                             "--state-dir", ""], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    sock = os.path.join(root, "ingest.sock")
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("sfd did not start")
        time.sleep(0.01)
    return proc, sock


class DemoStep(object):
    """One step of the DDP demo model (bench/ddp/train.py's defaults)."""

    def __init__(self, torch, switch):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        import train
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        dist.init_process_group("gloo", rank=0, world_size=1)
        args = train.parse_args([])
        torch.manual_seed(0)
        model = train.build_model(torch, args, 64)
        self.ddp = DDP(model, broadcast_buffers=False)
        self.ddp.register_comm_hook(None, switch.hook)
        self.opt = torch.optim.AdamW(self.ddp.parameters(), lr=1e-3)
        data = train.MarkovText(torch, 64, args.seq, seed=0)
        self.batches = [next(iter(torch.utils.data.DataLoader(data, batch_size=args.batch)))
                        for _ in range(1)] * 4
        self.torch = torch

    def source(self):
        while True:
            for b in self.batches:
                yield b

    def run(self, rec, batch):
        x, y = batch
        with rec.stage(STAGES[1]):
            out = self.ddp(x)
            loss = self.torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                          y.reshape(-1))
        with rec.stage(STAGES[2]):
            loss.backward()
        with rec.stage(STAGES[3]):
            pass
        with rec.stage(STAGES[4]):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)


class MatmulStep(object):
    """About 10 ms of matrix products, split into the same stages."""

    def __init__(self, torch, switch, target_s=0.010):
        self.torch = torch
        self.a = torch.randn(256, 256)
        self.switch = switch
        per = []  # the fastest of five trials: the machine's speed without its load
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(20):
                self.a @ self.a
            per.append((time.perf_counter() - t0) / 20)
        self.reps = max(4, int(target_s / min(per)))

    def source(self):
        while True:
            yield None

    def _work(self, n):
        for _ in range(n):
            self.a @ self.a

    def run(self, rec, _batch):
        q = self.reps // 4
        with rec.stage(STAGES[1]):
            self._work(q)
        with rec.stage(STAGES[2]):
            self._work(2 * q)
            self.switch.arrive()
        with rec.stage(STAGES[3]):
            pass
        with rec.stage(STAGES[4]):
            self._work(self.reps - 3 * q)


class Switch(object):
    """The communication marks on or off, chosen per block: the DDP hook
    (or, for the matmul step, rec.arrive at the end of backward) calls the
    binding only while on, and is the same hook either way."""

    def __init__(self, sf, rec, torch):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        self.on = False
        self.rec = rec
        self._plain = default_hooks.allreduce_hook
        self._marked = sf.ddp_comm_hook(rec, self._plain)

    def hook(self, state, bucket):
        return (self._marked if self.on else self._plain)(state, bucket)

    def arrive(self):
        if self.on:
            self.rec.arrive()


def run_block(step, rec, it, steps):
    t_wall = time.perf_counter()
    for _ in range(steps):
        batch = next(it)
        with rec.step():
            step.run(rec, batch)
    return (time.perf_counter() - t_wall) / steps, None


def calls_cpu_ns(rec, n):
    """Thread CPU time a step of the calls a step makes, alone: the data
    iterator, the step, the stages and a synchronizing collective's marks."""
    it = iter(rec.data(iter(range(n + 1))))
    t0 = time.thread_time_ns()
    for _ in range(n):
        next(it)
        with rec.step():
            with rec.stage(STAGES[1]):
                pass
            with rec.stage(STAGES[2]):
                with rec.sync():
                    pass
            with rec.stage(STAGES[3]):
                pass
            with rec.stage(STAGES[4]):
                pass
    return (time.thread_time_ns() - t0) / n


def bare_cpu_ns(n):
    """The same loop without a call to the binding: what an uninstrumented
    training loop spends on it."""
    it = iter(range(n + 1))
    t0 = time.thread_time_ns()
    for _ in range(n):
        next(it)
    return (time.thread_time_ns() - t0) / n


def binding_cpu(rec, rounds=7, n=20000):
    """Per round, the instrumented loop minus the bare one; the median and
    range over the rounds."""
    d = [calls_cpu_ns(rec, n) - bare_cpu_ns(n) for _ in range(rounds)]
    return statistics.median(d), min(d), max(d)


def median_interval(diffs):
    """The median and its distribution-free 95 % interval: the order
    statistics n/2 -+ 0.98 sqrt(n) (binomial ranks, normal approximation)."""
    v = sorted(diffs)
    n = len(v)
    lo = max(0, int(math.floor(n / 2 - 0.98 * math.sqrt(n))))
    hi = min(n - 1, int(math.ceil(n / 2 + 0.98 * math.sqrt(n))))
    return statistics.median(v), v[lo], v[hi]


def interval(diffs):
    n = len(diffs)
    mean = statistics.fmean(diffs)
    half = t95(n - 1) * statistics.stdev(diffs) / math.sqrt(n) if n > 1 else float("inf")
    return mean, half


def measure(step, recs, args):
    """ABBA quads until the interval is narrow enough; A = off, B = on."""
    its = {k: iter(r.data(step.source())) for k, r in recs.items()}
    for k in ("off", "on", "off", "on"):  # warm both paths
        step.switch.on = k == "on"
        run_block(step, recs[k], its[k], args.block)
    wall_d, steps_on = [], 0
    a_means = []
    t_end = time.monotonic() + args.max_seconds
    while True:
        quad = {}
        for k in ("off", "on", "on", "off"):
            step.switch.on = k == "on"
            quad.setdefault(k, []).append(run_block(step, recs[k], its[k], args.block))
            steps_on += args.block if k == "on" else 0
        a_wall = statistics.fmean(w for w, _ in quad["off"])
        a_means.append(a_wall)
        wall_d.append((statistics.fmean(w for w, _ in quad["on"]) - a_wall) / a_wall)
        if len(wall_d) >= args.min_quads:
            _, lo, hi = median_interval(wall_d)
            if hi - lo < args.width / 100 or time.monotonic() > t_end:
                break
    return wall_d, a_means, steps_on


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sfd", required=True)
    ap.add_argument("--workload", choices=["demo", "10ms"], default="demo")
    ap.add_argument("--block", type=int, default=4, help="steps per block")
    ap.add_argument("--width", type=float, default=0.4,
                    help="stop when the 95 %% interval is narrower than this %% of the step")
    ap.add_argument("--min-quads", type=int, default=30)
    ap.add_argument("--max-seconds", type=float, default=300)
    args = ap.parse_args()

    import torch
    import stagefrontier as sf
    import train
    torch.set_num_threads(1)
    root = tempfile.mkdtemp(prefix="sf-abba-")
    proc, sock = start_sfd(args.sfd, root)
    try:
        before = binding_threads()
        rec = sf.Recorder(job_id="abba-%d" % os.getpid(), rank=0, world_size=1, local_rank=0,
                          socket=sock, sync_stages=SYNC)
        mine = binding_threads() - before
        switch = Switch(sf, rec, torch)
        step = DemoStep(torch, switch) if args.workload == "demo" else MatmulStep(torch, switch)
        step.switch = switch
        cpu0 = threads_cpu_ns(mine)
        wall_d, a_means, steps_on = measure(step, {"off": train.NullRecorder(), "on": rec},
                                            args)
        thread_ns = (threads_cpu_ns(mine) - cpu0) / max(1, steps_on)
        stats = rec.stats()  # of the training steps; the tight loop below outruns sfd
        calls = binding_cpu(rec)
        rec.close()
    finally:
        proc.terminate()
        proc.wait()
    mean, half = interval(wall_d)
    p50, lo, hi = median_interval(wall_d)
    step_s = statistics.median(a_means)
    print(json.dumps({
        "workload": args.workload,
        "step_ms": round(step_s * 1e3, 3),
        "quads": len(wall_d),
        "steps": len(wall_d) * 4 * args.block,
        "overhead_p50_pct": round(100 * p50, 4),
        "overhead_p50_ci95_pct": [round(100 * lo, 4), round(100 * hi, 4)],
        "overhead_mean_pct": round(100 * mean, 4),
        "overhead_mean_ci95_pct": [round(100 * (mean - half), 4), round(100 * (mean + half), 4)],
        "binding_cpu_us_per_step": round(calls[0] / 1e3, 3),
        "binding_cpu_range_us": [round(calls[1] / 1e3, 3), round(calls[2] / 1e3, 3)],
        "binding_threads": len(mine),
        "binding_threads_cpu_us_per_step": round(thread_ns / 1e3, 3),
        "records_sent": stats.get("records_sent"),
        "records_dropped": stats.get("records_dropped"),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
