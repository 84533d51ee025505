#!/usr/bin/python3
"""Cost of `with rec.stage(...)` in the stagefrontier binding, side by side
with a bare `with nullcontext()` and an empty loop, in one run. Also the
cost per bucket of stagefrontier.ddp_comm_hook: the wrapper around an inner
hook against calling that inner hook directly, on a stand-in bucket whose
is_last() is a plain method (torch's GradBucket.is_last is a bound C++
method of similar cost). And the three marks of a synchronizing collective
(arrival, issue, completion through the future's callback), per step: a
step with one synchronizing stage whose inner hook (or wrapped collective)
returns a completed torch.futures.Future, through the DDP hook wrapper and
through `with rec.sync() as s: s.issued(fut)`, against the same step calling
the inner hook bare, the three timed in turn in short chunks (the best chunk
of each); needs torch (skipped without it).

Usage: PYTHONPATH=<build>/python /usr/bin/python3 bench/client/bench_python.py [N]
"""
import contextlib
import os
import sys
import tempfile
import time

import stagefrontier as sf


def per_iter(fn, n):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, time.perf_counter_ns() - t0)
    return best / n / 1000.0


def interleaved(fns, n, rounds):
    """Per-iteration cost of each of fns, timed in short chunks of n in
    turn (the order rotating each round), the best chunk of each: on a
    loaded host a chunk shorter than a scheduler slice mostly runs whole,
    and the variants see the same load."""
    best = [float("inf")] * len(fns)
    for r in range(rounds):
        for j in range(len(fns)):
            i = (j + r) % len(fns)
            t0 = time.perf_counter_ns()
            fns[i](n)
            best[i] = min(best[i], time.perf_counter_ns() - t0)
    return [b / n / 1000.0 for b in best]


def empty(n):
    for _ in range(n):
        pass


def nullctx(n):
    ctx = contextlib.nullcontext()
    for _ in range(n):
        with ctx:
            pass


def make_stage(rec):
    def stage(n):
        for _ in range(n):
            with rec.stage("model.fwd_loss_cpu_wall"):
                pass
    return stage


def make_steps(rec):
    def steps(n):
        for _ in range(n // 5):
            with rec.step():
                with rec.stage("data.next_wait"):
                    pass
                with rec.stage("model.fwd_loss_cpu_wall"):
                    pass
                with rec.stage("model.backward_cpu_wall"):
                    pass
                with rec.stage("callbacks.cpu_wall"):
                    pass
                with rec.stage("optim.step_cpu_wall"):
                    pass
    return steps


class Bucket(object):
    def __init__(self, last):
        self.last = last

    def is_last(self):
        return self.last


def inner_hook(state, bucket):
    return bucket


def make_hook_direct(bucket):
    def run(n):
        for _ in range(n):
            inner_hook(None, bucket)
    return run


def make_hook_wrapped(hook, bucket):
    def run(n):
        for _ in range(n):
            hook(None, bucket)
    return run


def future_hook(state, bucket):
    import torch
    f = torch.futures.Future()
    f.set_result(bucket)
    return f


def make_marks_bare(rec, bucket):
    def run(n):
        for _ in range(n):
            with rec.step(), rec.stage("model.backward_cpu_wall"):
                future_hook(None, bucket)
    return run


def make_marks_hook(rec, hook, bucket):
    def run(n):
        for _ in range(n):
            with rec.step(), rec.stage("model.backward_cpu_wall"):
                hook(None, bucket)
    return run


def make_marks_sync(rec, bucket):
    def run(n):
        for _ in range(n):
            with rec.step(), rec.stage("model.backward_cpu_wall"):
                with rec.sync() as s:
                    s.issued(future_hook(None, bucket))
    return run


def three_marks(d, n):
    try:
        import torch  # noqa: F401
    except ImportError:
        print("three marks: skipped (no torch)")
        return
    rec = sf.Recorder(job_id="bench", socket=os.path.join(d, "absent.sock"), rank=0,
                      world_size=1, sync_stages=["model.backward_cpu_wall"])
    hook, last = sf.ddp_comm_hook(rec, future_hook), Bucket(True)
    # 2,000 steps a chunk (a few ms), 100 rounds: n // 10 steps of each
    # variant at the default n, interleaved.
    rounds = max(n // 20000, 10)
    bare, wrapped, synced = interleaved([make_marks_bare(rec, last),
                                         make_marks_hook(rec, hook, last),
                                         make_marks_sync(rec, last)], 2000, rounds)
    print("%-36s %8.3f us" % ("step, inner hook bare", bare))
    print("%-36s %8.3f us" % ("step, DDP hook wrapper (3 marks)", wrapped))
    print("%-36s %8.3f us" % ("step, rec.sync() + issued() (3 marks)", synced))
    print("three marks per step: +%.3f us (hook, %.3f x bare), +%.3f us (rec.sync(), %.3f x bare)"
          % (wrapped - bare, wrapped / bare, synced - bare, synced / bare))
    print("stats (three marks):", rec.stats())
    rec.close()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    d = tempfile.mkdtemp(prefix="sfbench-")
    rec = sf.Recorder(job_id="bench", socket=os.path.join(d, "absent.sock"), rank=0,
                      world_size=1)
    rows = [("empty loop", per_iter(empty, n)),
            ("with nullcontext()", per_iter(nullctx, n))]
    with rec.step():
        rows.append(("with rec.stage()", per_iter(make_stage(rec), n)))
    rows.append(("5 stages in rec.step(), per stage", per_iter(make_steps(rec), n)))
    for name, us in rows:
        print("%-36s %8.3f us" % (name, us))
    print("rec.stage() minus empty loop: %.3f us" % (rows[2][1] - rows[0][1]))
    rec2 = sf.Recorder(job_id="bench", socket=os.path.join(d, "absent.sock"), rank=0,
                       world_size=1, sync_stages=["model.backward_cpu_wall"])
    hook = sf.ddp_comm_hook(rec2, inner_hook)
    with rec2.step(), rec2.stage("model.backward_cpu_wall"):
        direct = per_iter(make_hook_direct(Bucket(False)), n)
        mid = per_iter(make_hook_wrapped(hook, Bucket(False)), n)
        last = per_iter(make_hook_wrapped(hook, Bucket(True)), n)
    print("%-36s %8.3f us" % ("inner hook called directly", direct))
    print("%-36s %8.3f us" % ("wrapped, not the last bucket", mid))
    print("%-36s %8.3f us" % ("wrapped, the last bucket (arrive)", last))
    print("hook per bucket: +%.3f us (not last), +%.3f us (last)" % (mid - direct, last - direct))
    print("stats (hook recorder):", rec2.stats())
    rec2.close()
    three_marks(d, n)
    print("stats:", rec.stats())
    rec.close()
    os.rmdir(d)


if __name__ == "__main__":
    main()
