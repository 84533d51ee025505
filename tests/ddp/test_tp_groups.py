#!/usr/bin/python3
"""CI-sized tensor-parallel check of the wait rule (docs/ACCOUNTING.md,
"Synchronizing groups"): a real 4-rank PyTorch job (Gloo, CPU), 2-way tensor
parallel x 2-way data parallel, instrumented only through the public binding
(Recorder(parallel=..., sync_groups=...), rec.sync(group="tp") around the
tensor-parallel all-reduce that ends every layer of the forward, and
rec.sync(group="dp") around the gradient all-reduce), reporting to a real sfd.

Every member of a tp group leaves each layer's all-reduce together, so the
order of arrival at the forward's last sync point does not say who was slow.
--row forward slows one hidden rank's forward (its second layer, before that
layer's all-reduce) by a tenth of its own clean step (the median of its last
ten, less their delay): the window's verdict must name that rank, at the forward, by the
tp group's wait rule. --row none: no verdict.

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
LAYERS = 4
WIDTH = 384
BATCH = 64
FRACTION = 0.1  # of a clean step
FWD, BWD = "model.fwd_loss_cpu_wall", "model.backward_cpu_wall"


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
    tp, dp = rank % 2, rank // 2
    dist.init_process_group("gloo", rank=rank, world_size=world)
    tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dp_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    tp_group, dp_group = tp_groups[dp], dp_groups[tp]
    torch.manual_seed(10 + tp)
    # Each rank holds its half of every layer's input features (row-parallel
    # layers): its partial products are summed across the tp group.
    weights = [torch.randn(WIDTH // 2, WIDTH) / WIDTH for _ in range(LAYERS)]
    grads = torch.zeros(LAYERS * WIDTH // 2 * WIDTH)
    slow = a.row == "forward" and rank == hidden_rank(a.seed)
    rec = sf.Recorder(sync_stages=[FWD, BWD], sync_groups={FWD: "tp", BWD: "dp"},
                      parallel={"tp": (tp, 2), "dp": (dp, 2)})
    gen = torch.Generator().manual_seed(100 + dp)
    clean = []  # the rank's recent steps without their delay
    delay, delays = 0.0, []
    for step in range(WARMUP + STEPS):
        if step >= WARMUP and slow:
            # A tenth of the median of its last ten clean steps: the step
            # follows the host's load, and so does the delay.
            recent = sorted(clean[-10:])
            delay = FRACTION * recent[len(recent) // 2]
            delays.append(delay)
        t0 = time.monotonic()
        with rec.step():
            with rec.stage("data.next_wait"):
                x = torch.randn(BATCH, WIDTH, generator=gen)
            with rec.stage(FWD):
                h = x
                for layer, w in enumerate(weights):
                    part = h[:, tp * (WIDTH // 2):(tp + 1) * (WIDTH // 2)] @ w
                    if layer == 1 and delay:
                        time.sleep(delay)  # the hidden rank's own work, before the all-reduce
                    with rec.sync(group="tp"):
                        dist.all_reduce(part, group=tp_group)
                    h = torch.tanh(part)
                loss = h.pow(2).mean()
            with rec.stage(BWD):
                # The backward's work: a product per layer, then the gradients'
                # all-reduce across the data-parallel replicas.
                g = torch.ones(BATCH, WIDTH) * float(loss)
                for layer, w in enumerate(weights):
                    part = (g @ w.t()).t() @ g
                    grads[layer * part.numel():(layer + 1) * part.numel()] = part.flatten()
                with rec.sync(group="dp"):
                    dist.all_reduce(grads, group=dp_group)
            with rec.stage("optim.step_cpu_wall"):
                for layer, w in enumerate(weights):
                    w -= 1e-6 * grads[layer * w.numel():(layer + 1) * w.numel()].view_as(w)
        clean.append(time.monotonic() - t0 - delay)
    dist.barrier()
    rec.close()
    dist.barrier()
    if slow:
        delays.sort()
        print("hidden rank %d: forward slowed by %.1f ms (median of its steps)" %
              (rank, delays[len(delays) // 2] * 1e3))
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
    p.add_argument("--row", required=True, choices=["forward", "none"])
    p.add_argument("--seed", type=int, default=3)  # hidden rank 0
    a = p.parse_args()
    if "RANK" in os.environ:
        return run_rank(a)

    import sfharness
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    build = sfharness.Build(a.build)
    job = "tp-%s-%d" % (a.row, os.getpid())
    with sfharness.Sfd(build, warmup_steps=WARMUP, window_steps=STEPS) as sfd:
        argv = ["--row", a.row, "--seed", str(a.seed)]
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
    if w["window"]["ranks"] != 4 or w["window"]["steps"] != STEPS:
        print("FAIL: window covers %s ranks, %s steps" % (w["window"]["ranks"],
                                                           w["window"]["steps"]))
        return 1
    if "role_aware_applied" not in labels:
        print("FAIL: labels %s: want role_aware_applied" % labels)
        return 1
    if a.row == "none":
        if verdict is not None:
            print("FAIL: clean tensor-parallel job got a verdict %s" % verdict)
            return 1
        return 0
    want = {"rank": hidden_rank(a.seed), "sync_stage": FWD, "group": "tp", "origin": "wait",
            "victim_rank": hidden_rank(a.seed) ^ 1}
    got = {k: (verdict or {}).get(k) for k in want}
    if got != want:
        print("FAIL: verdict %s, want %s" % (verdict, want))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
