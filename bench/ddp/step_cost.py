#!/usr/bin/python3
"""Cost of the DDP job's instrumentation per training step, without the job.

Owns one measurement: the wall time of exactly the binding calls that
train.py makes per step (a data next() through rec.data, rec.step(), four
stage contexts) in a tight loop, for no recorder, a Recorder connected to
sfd, and a Recorder whose socket has no listener. The three settings are
interleaved in rounds so drift hits all of them alike. It prints JSON; the
matrix runner divides by the job's step time. It must not start sfd: the
caller passes SF_SOCKET.
"""

import json
import os
import statistics
import sys
import time

STAGES = ["model.fwd_loss_cpu_wall", "model.backward_cpu_wall", "callbacks.cpu_wall",
          "optim.step_cpu_wall"]


class _Null(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class NullRecorder(object):
    _c = _Null()

    def data(self, it):
        return it

    def step(self):
        return self._c

    def stage(self, _n):
        return self._c

    def close(self):
        pass


def loop(rec, n):
    it = iter(rec.data(iter(range(n + 1))))
    t0 = time.perf_counter()
    for _ in range(n):
        next(it)
        with rec.step():
            for s in STAGES:
                with rec.stage(s):
                    pass
    return (time.perf_counter() - t0) / n


def main():
    import stagefrontier as sf
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    absent = os.path.join(os.path.dirname(os.environ["SF_SOCKET"]), "absent", "ingest.sock")
    common = dict(job_id="stepcost-%d" % os.getpid(), rank=0, world_size=1, local_rank=0)
    recs = {"off": NullRecorder(), "on_sfd": sf.Recorder(**common),
            "on_nosfd": sf.Recorder(socket=absent, **common)}
    per = {k: [] for k in recs}
    for r in range(rounds):
        order = list(recs)[r % 3:] + list(recs)[:r % 3]
        for k in order:
            per[k].append(loop(recs[k], n))
    stats = recs["on_sfd"].stats()
    for rec in recs.values():
        rec.close()
    out = {k: statistics.median(v) for k, v in per.items()}
    out["sent"] = stats.get("records_sent")
    out["dropped"] = stats.get("records_dropped")
    out["iterations"] = n * rounds
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
