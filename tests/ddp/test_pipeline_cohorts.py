#!/usr/bin/python3
"""CI-sized pipeline x data-parallel check of cohorts (docs/ACCOUNTING.md,
"Cohorts"): a real 4-rank PyTorch job (Gloo, CPU), 2 pipeline stages x 2
data-parallel replicas, GPipe over 4 microbatches, instrumented only through
the public binding (Recorder(parallel=...), rec.sync() around each stage's
data-parallel gradient all-reduce), reporting to a real sfd.

Stage 1 computes the loss (twice the layers of stage 0): by its role it
arrives last at every step, which a global comparison reads as a straggler.
--row backward slows one hidden rank's own backward work, after its last
pipeline send or receive of the step, by --delay-frac of a clean step: the
window's verdict must name that rank and the label must say the role-aware
analysis was applied. --row none: no verdict.

Without RANK in the environment this is the driver; with it, one rank.
Exit 77 (CTest SKIP_RETURN_CODE) only when python3-torch with Gloo is absent.
"""

import argparse
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

SKIP = 77
WARMUP = 10
STEPS = 40
MICRO = 4
WIDTH = 192
# Well above the noise of 4 ranks sharing 2 busy cores, yet a fraction of a
# step (the clean step is printed with the report).
DELAY_S = 0.04


def hidden_rank(seed):
    return (seed * 7 + 3) % 4


# ---------------------------------------------------------------------------
# one rank

def run_rank(a):
    import torch
    import torch.distributed as dist
    import stagefrontier as sf

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    stage, replica = rank // 2, rank % 2
    dist.init_process_group("gloo", rank=rank, world_size=world)
    dp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dp_group = dp_groups[stage]
    peer = rank + 2 if stage == 0 else rank - 2
    torch.manual_seed(stage)
    layers = 2 if stage == 0 else 4  # stage 1 also computes the loss
    net = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(layers)])
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    slow = a.row == "backward" and rank == hidden_rank(a.seed)
    coords = {"pp": (stage, 2), "dp": (replica, 2), "schedule": "gpipe"}
    rec = sf.Recorder(sync_stages=["model.backward_cpu_wall"],
                      parallel=None if a.no_parallel else coords)
    gen = torch.Generator().manual_seed(100 + replica)
    for step in range(WARMUP + STEPS):
        with rec.step():
            with rec.stage("data.next_wait"):
                xs = [torch.randn(32, WIDTH, generator=gen) for _ in range(MICRO)]
            with rec.stage("model.fwd_loss_cpu_wall"):
                outs = []
                for x in xs:
                    if stage == 0:
                        h = net(x)
                        dist.send(h.detach(), peer)
                        outs.append(h)
                    else:
                        h = torch.empty(32, WIDTH)
                        dist.recv(h, peer)
                        h.requires_grad_()
                        outs.append((h, net(h).pow(2).mean()))
            with rec.stage("model.backward_cpu_wall"):
                for o in outs:
                    if stage == 0:
                        g = torch.empty(32, WIDTH)
                        dist.recv(g, peer)
                        o.backward(g)
                    else:
                        h, loss = o
                        loss.backward()
                        dist.send(h.grad, peer)
                if slow and step >= WARMUP:
                    time.sleep(a.delay_s)  # own work, after the last pipeline message
                flat = torch.cat([p.grad.flatten() for p in net.parameters()])
                with rec.sync() as s:
                    work = dist.all_reduce(flat, group=dp_group, async_op=True)
                    s.issued(work)
                    work.wait()
            with rec.stage("optim.step_cpu_wall"):
                opt.step()
                opt.zero_grad()
    dist.barrier()
    rec.close()
    dist.barrier()
    import sfharness
    sfharness.leave_rank()


# ---------------------------------------------------------------------------
# the driver

def launch(build, job, sock, argv, timeout):
    import sfharness
    env = build.env(dict(SF_JOB_ID=job, SF_SOCKET=sock))
    return sfharness.launch_ranks(__file__, argv, env, timeout=timeout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build")
    p.add_argument("--row", required=True, choices=["backward", "none"])
    p.add_argument("--seed", type=int, default=2)  # hidden rank 1, of stage 0
    p.add_argument("--delay-s", type=float, default=0.0)
    p.add_argument("--no-parallel", action="store_true",
                   help="measure only: the same job without coordinates (every rank "
                        "compared with every other); prints the verdict, checks nothing")
    a = p.parse_args()
    if "RANK" in os.environ:
        return run_rank(a)

    import sfharness
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    build = sfharness.Build(a.build)
    job = "pp-%s-%d" % (a.row, os.getpid())
    with sfharness.Sfd(build, warmup_steps=WARMUP, window_steps=STEPS) as sfd:
        delay = DELAY_S if a.row == "backward" else 0.0
        argv = ["--row", a.row, "--seed", str(a.seed), "--delay-s", str(delay)]
        argv += ["--no-parallel"] if a.no_parallel else []
        rc = launch(build, job, sfd.ingest, argv, timeout=240)
        if rc != 0:
            print("FAIL: the training job failed (rc %d)" % rc)
            return 1
        wins = sfd.windows(job, 1, timeout=60)
        print(sfd.report(job, human=True))
    w = [x for x in wins if x["window"]["index"] == 0 and
         "window_partial" not in (x.get("downgrade_reasons") or [])]
    if not w:
        print("FAIL: no closed measured window in %r" % wins)
        return 1
    w = w[0]
    labels = w.get("labels") or []
    verdict = w.get("straggler")
    print("row %s hidden rank %s verdict %s labels %s" % (
        a.row, hidden_rank(a.seed) if a.row != "none" else None, json.dumps(verdict), labels))
    if a.no_parallel:
        return 0
    if w["window"]["ranks"] != 4 or w["window"]["steps"] != STEPS:
        print("FAIL: window covers %s ranks, %s steps" % (w["window"]["ranks"],
                                                           w["window"]["steps"]))
        return 1
    if "role_aware_applied" not in labels or "role_aware_needed" in labels:
        print("FAIL: labels %s: want role_aware_applied" % labels)
        return 1
    if a.row == "none":
        if verdict is not None:
            print("FAIL: clean pipeline job got a verdict %s" % verdict)
            return 1
        return 0
    if verdict is None or verdict.get("rank") != hidden_rank(a.seed):
        print("FAIL: verdict %s does not name hidden rank %d" % (verdict, hidden_rank(a.seed)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
