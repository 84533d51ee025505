#!/usr/bin/python3
"""One 4-rank parallel-layout job on CPU (Gloo), instrumented only through
the public binding (Recorder(parallel=...), rec.sync()), for the fault
matrix of bench/parallel/run_matrix.py.

Layouts (rank r of 4):
  pp-gpipe, pp-1f1b  2 pipeline stages x 2-way data parallel (stage r // 2,
                     replica r % 2): 4 microbatches, activations and
                     gradients sent between stages (isend / recv), each
                     stage's gradients all-reduced in its data-parallel group;
  tp                 2-way tensor x 2-way data parallel (tp r % 2, dp r // 2):
                     two blocks of a column- then row-parallel MLP, an
                     all-reduce in the tp group in forward (after the row
                     layer) and in backward (the column layer's input
                     gradient), then the gradients all-reduced in dp;
  sdp                4-way sharded data parallel, hand-written: each rank
                     keeps a quarter of every layer's parameters, all-gathers
                     a layer's parameters before its forward and
                     reduce-scatters its gradients as backward produces them.

Faults on one hidden rank, only in the windows after the baseline (steps
from --fault-from), of --magnitude x the clean step (the largest per-rank
median of the warmup steps, agreed by all ranks):
  data           a sleep in data.next_wait;
  forward        a sleep after the first microbatch's (layer's) forward compute;
  backward       a sleep after the first microbatch's backward compute (pp),
                 before loss.backward() (tp, sdp);
  communication  a delay before issuing a collective: pp the dp gradient
                 all-reduce, tp the first block's forward tp all-reduce, sdp
                 the first gradient reduce-scatter (in backward).

Arrival marks: where the binding's rec.sync() accepts group= (feature
detected), every collective and pipeline receive is wrapped in
rec.sync(group="tp"|"pp"|"dp"); otherwise only the last collective of each
synchronizing stage (the binding keeps one arrival per stage and step).

Without RANK in the environment this is the launcher: it starts the 4 ranks
(--job-id; SF_SOCKET from the environment) and exits with the first failing
rank's status; rank 0 writes the job's JSON summary to --result.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "ddp"))

import sfharness  # noqa: E402

LAYOUTS = ["pp-gpipe", "pp-1f1b", "tp", "sdp"]
FAULTS = ["data", "forward", "backward", "communication", "none"]
FWD, BWD = "model.fwd_loss_cpu_wall", "model.backward_cpu_wall"
DATA, OPT = "data.next_wait", "optim.step_cpu_wall"
MICRO = 4
BATCH = 32
WIDTH = 192


def expected_stage(layout, fault):
    """The stage a correct first answer names."""
    return {"data": DATA, "forward": FWD, "backward": BWD,
            "communication": FWD if layout == "tp" else BWD}.get(fault)


def hidden_rank(seed, fault):
    return (seed * 7 + 3 + FAULTS.index(fault)) % 4


class _NoSync(object):
    """Stands for rec.sync() where a collective is not marked."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def issued(self, work=None):
        pass


NOSYNC = _NoSync()
# Whether Gloo's reduce_scatter ran (sdp), for the summary.
SDP = {"native_reduce_scatter": None}


def has_group_sync(rec):
    try:
        rec.sync(group="dp")
        return True
    except TypeError:
        return False


class Marks(object):
    """rec.sync(group=...) for every collective where the binding takes it,
    else rec.sync() only for the ones flagged last of their stage."""

    def __init__(self, rec):
        self.rec = rec
        self.grouped = has_group_sync(rec)

    def __call__(self, group, last):
        if self.grouped:
            return self.rec.sync(group=group)
        return self.rec.sync() if last else NOSYNC


def run_rank(a):
    import torch
    import torch.distributed as dist
    import stagefrontier as sf

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    hidden = hidden_rank(a.seed, a.fault) if a.fault != "none" else -1
    faulty = rank == hidden

    if a.layout.startswith("pp"):
        stage, replica = rank // 2, rank % 2
        coords = {"pp": (stage, 2), "dp": (replica, 2),
                  "schedule": "gpipe" if a.layout == "pp-gpipe" else "1f1b"}
        groups = {"dp": [dist.new_group([0, 1]), dist.new_group([2, 3])][stage]}
        seed_data = replica
    elif a.layout == "tp":
        tpi, dpi = rank % 2, rank // 2
        coords = {"tp": (tpi, 2), "dp": (dpi, 2)}
        tpg = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        dpg = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        groups = {"tp": tpg[dpi], "dp": dpg[tpi]}
        seed_data = dpi
    else:
        coords = {"dp": (rank, 4)}
        groups = {"dp": None}
        seed_data = rank

    probe = sf.Recorder(disabled=True)
    grouped = has_group_sync(probe)
    probe.close()
    sync_stages = [FWD, BWD] if (grouped or a.layout in ("tp", "sdp")) else [BWD]
    # With group sync points, each synchronizing stage names the group whose
    # collectives it waits in, so the wait rule applies inside tp and pp.
    kw = {}
    if grouped:
        group = {"pp-gpipe": "pp", "pp-1f1b": "pp", "tp": "tp"}.get(a.layout, "dp")
        kw["sync_groups"] = {FWD: group, BWD: group}
    rec = sf.Recorder(sync_stages=sync_stages, parallel=coords, **kw)
    marks = Marks(rec)
    gen = torch.Generator().manual_seed(100 + seed_data)
    state = {"delay": 0.0}

    def fault_sleep(kind):
        if faulty and a.fault == kind and state["delay"] > 0:
            time.sleep(state["delay"])

    if a.layout.startswith("pp"):
        step_fn = make_pp(a, torch, dist, rec, marks, groups, fault_sleep, gen)
    elif a.layout == "tp":
        step_fn = make_tp(a, torch, dist, rec, marks, groups, fault_sleep, gen)
    else:
        step_fn = make_sdp(a, torch, dist, rec, marks, fault_sleep, gen, rank, world)

    times = []
    total = a.warmup + a.steps
    for step in range(total):
        if step == a.warmup:
            # The clean step: every rank's median of its warmup steps (the
            # first two left out), the largest of them.
            w = sorted(times[2:])
            med = torch.tensor([w[len(w) // 2]], dtype=torch.float64)
            dist.all_reduce(med, op=dist.ReduceOp.MAX)
            clean = float(med.item())
        if step == a.warmup + a.fault_from and a.fault != "none":
            state["delay"] = a.magnitude * clean
        t0 = time.perf_counter()
        with rec.step():
            step_fn()
        times.append(time.perf_counter() - t0)
    dist.barrier()
    rec.close()
    dist.barrier()
    if rank == 0 and a.result:
        ms = sorted(times[a.warmup:])
        with open(a.result, "w") as f:
            json.dump({"layout": a.layout, "fault": a.fault, "seed": a.seed,
                       "magnitude": a.magnitude, "hidden_rank": hidden,
                       "expected_stage": expected_stage(a.layout, a.fault),
                       "clean_step_s": clean, "delay_s": a.magnitude * clean
                       if a.fault != "none" else 0.0,
                       "median_step_s": ms[len(ms) // 2], "group_sync": marks.grouped,
                       "native_reduce_scatter": SDP["native_reduce_scatter"]}, f)
    sfharness.leave_rank()


# ---------------------------------------------------------------------------
# pipeline x data parallel

def make_pp(a, torch, dist, rec, marks, groups, fault_sleep, gen):
    rank = dist.get_rank()
    stage = rank // 2
    peer = rank + 2 if stage == 0 else rank - 2
    torch.manual_seed(stage)
    layers = 2 if stage == 0 else 3  # stage 1 also computes the loss
    net = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(layers)])
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    if a.layout == "pp-gpipe":
        order = [("F", i) for i in range(MICRO)] + [("B", i) for i in range(MICRO)]
    else:  # 1F1B: P - s - 1 warmup forwards, then one forward one backward
        warm = 2 - stage - 1
        order = [("F", i) for i in range(warm)]
        for i in range(MICRO - warm):
            order += [("F", warm + i), ("B", i)]
        order += [("B", i) for i in range(MICRO - warm, MICRO)]

    def recv(shape):
        t = torch.empty(*shape)
        with marks("pp", False) as s:
            work = dist.irecv(t, peer)
            s.issued()  # the issue alone: a Gloo p2p Work has no future here
            work.wait()
        return t

    def step():
        with rec.stage(DATA):
            fault_sleep("data")
            xs = [torch.randn(BATCH, WIDTH, generator=gen) for _ in range(MICRO)]
        outs, sends = {}, []
        first = {"F": True, "B": True}
        for kind, i in order:
            if kind == "F":
                with rec.stage(FWD):
                    if stage == 0:
                        h = net(xs[i])
                        if first["F"]:
                            fault_sleep("forward")
                        if marks.grouped:
                            rec.mark_send()  # a sync point that does not wait
                        sends.append(dist.isend(h.detach(), peer))
                        outs[i] = h
                    else:
                        h = recv((BATCH, WIDTH)).requires_grad_()
                        loss = net(h).pow(2).mean()
                        if first["F"]:
                            fault_sleep("forward")
                        outs[i] = (h, loss)
                first["F"] = False
            else:
                last = kind == "B" and i == order[-1][1]
                with rec.stage(BWD):
                    if stage == 0:
                        g = recv((BATCH, WIDTH))
                        outs[i].backward(g)
                    else:
                        h, loss = outs[i]
                        loss.backward()
                        if marks.grouped:
                            rec.mark_send()  # a sync point that does not wait
                        sends.append(dist.isend(h.grad, peer))
                    if first["B"]:
                        fault_sleep("backward")
                    first["B"] = False
                    if last:
                        for w in sends:
                            w.wait()
                        flat = torch.cat([p.grad.flatten() for p in net.parameters()])
                        with marks("dp", True) as s:
                            fault_sleep("communication")
                            work = dist.all_reduce(flat, group=groups["dp"], async_op=True)
                            s.issued(work)
                            work.wait()
        with rec.stage(OPT):
            opt.step()
            opt.zero_grad()
    return step


# ---------------------------------------------------------------------------
# tensor x data parallel

def make_tp(a, torch, dist, rec, marks, groups, fault_sleep, gen):
    tpg, dpg = groups["tp"], groups["dp"]
    rank = dist.get_rank()
    tpi = rank % 2
    hidden = 2 * WIDTH
    torch.manual_seed(1)
    blocks = []
    for _ in range(2):
        w1 = torch.randn(WIDTH, hidden) * WIDTH ** -0.5
        w2 = torch.randn(hidden, WIDTH) * hidden ** -0.5
        half = hidden // 2
        blocks.append((w1[:, tpi * half:(tpi + 1) * half].clone().requires_grad_(),
                       w2[tpi * half:(tpi + 1) * half, :].clone().requires_grad_()))
    params = [p for b in blocks for p in b]
    opt = torch.optim.SGD(params, lr=1e-3)
    ctx = {"block": 0}

    def tp_all_reduce(t, last, comm_fault):
        with marks("tp", last) as s:
            if comm_fault:
                fault_sleep("communication")
            work = dist.all_reduce(t, group=tpg, async_op=True)
            s.issued(work)
            work.wait()
        return t

    class CopyToTp(torch.autograd.Function):
        """Identity in forward; the input gradient all-reduced in tp."""
        @staticmethod
        def forward(c, x):
            return x

        @staticmethod
        def backward(c, g):
            return tp_all_reduce(g.contiguous().clone(), False, False)

    class ReduceFromTp(torch.autograd.Function):
        """The row-parallel partial sums all-reduced in tp; identity back."""
        @staticmethod
        def forward(c, x):
            b = ctx["block"]
            return tp_all_reduce(x.contiguous().clone(), b == len(blocks) - 1, b == 0)

        @staticmethod
        def backward(c, g):
            return g

    def step():
        with rec.stage(DATA):
            fault_sleep("data")
            x = torch.randn(MICRO * BATCH, WIDTH, generator=gen)
        with rec.stage(FWD):
            h = x
            for b, (w1, w2) in enumerate(blocks):
                ctx["block"] = b
                u = torch.nn.functional.gelu(CopyToTp.apply(h) @ w1)
                if b == 0:
                    fault_sleep("forward")
                h = h + ReduceFromTp.apply(u @ w2)
            loss = h.pow(2).mean()
        with rec.stage(BWD):
            fault_sleep("backward")
            loss.backward()
            flat = torch.cat([p.grad.flatten() for p in params])
            with marks("dp", True) as s:
                work = dist.all_reduce(flat, group=dpg, async_op=True)
                s.issued(work)
                work.wait()
        with rec.stage(OPT):
            opt.step()
            opt.zero_grad()
    return step


# ---------------------------------------------------------------------------
# sharded data parallel

def make_sdp(a, torch, dist, rec, marks, fault_sleep, gen, rank, world):
    torch.manual_seed(1)
    n_layers = 3
    numel = WIDTH * WIDTH
    chunk = numel // world
    shards = [(torch.randn(numel) * WIDTH ** -0.5)[rank * chunk:(rank + 1) * chunk].clone()
              for _ in range(n_layers)]
    grads = [torch.zeros(chunk) for _ in range(n_layers)]
    # Gloo in some torch releases has no reduce_scatter: then an all-reduce
    # of the flat gradient keeps this rank's chunk (the same sums).
    rs = {"native": True, "n": 0}

    def reduce_scatter(flat, l):
        last = rs["n"] == n_layers - 1
        with marks("dp", last) as s:
            if rs["n"] == 0:
                fault_sleep("communication")
            out = torch.empty(chunk)
            work = None
            if rs["native"]:
                try:
                    work = dist.reduce_scatter(out, list(flat.chunk(world)), async_op=True)
                except RuntimeError:
                    rs["native"] = False
            SDP["native_reduce_scatter"] = rs["native"]
            if work is None:
                work = dist.all_reduce(flat, async_op=True)
            s.issued(work)
            work.wait()
            if not rs["native"]:
                out = flat[rank * chunk:(rank + 1) * chunk]
        rs["n"] += 1
        grads[l] += out

    def step():
        with rec.stage(DATA):
            fault_sleep("data")
            x = torch.randn(MICRO * BATCH, WIDTH, generator=gen)
        with rec.stage(FWD):
            h = x
            for l in range(n_layers):
                full = [torch.empty(chunk) for _ in range(world)]
                with marks("dp", l == n_layers - 1) as s:
                    work = dist.all_gather(full, shards[l], async_op=True)
                    s.issued(work)
                    work.wait()
                w = torch.cat(full).view(WIDTH, WIDTH).requires_grad_()
                w.register_hook(lambda g, l=l: reduce_scatter(g.flatten().contiguous(), l))
                h = torch.tanh(h @ w)
                if l == 0:
                    fault_sleep("forward")
            loss = h.pow(2).mean()
        with rec.stage(BWD):
            rs["n"] = 0
            fault_sleep("backward")
            loss.backward()
        with rec.stage(OPT):
            for l in range(n_layers):
                shards[l] -= 1e-3 * grads[l]
                grads[l].zero_()
    return step


# ---------------------------------------------------------------------------
# the launcher

def launch(argv, job, env_base, timeout):
    """Starts the 4 ranks with this script's argv; returns their exit status."""
    return sfharness.launch_ranks(__file__, argv, dict(env_base, SF_JOB_ID=job), timeout=timeout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--job-id", default="par")
    p.add_argument("--layout", required=True, choices=LAYOUTS)
    p.add_argument("--fault", default="none", choices=FAULTS)
    p.add_argument("--magnitude", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--steps", type=int, default=90)
    p.add_argument("--fault-from", type=int, default=60,
                   help="measured steps before the fault starts")
    p.add_argument("--result", default=None)
    p.add_argument("--timeout", type=float, default=300)
    a = p.parse_args()
    if "RANK" in os.environ:
        return run_rank(a)
    argv = [x for x in sys.argv[1:]]
    rc = launch(argv, a.job_id, dict(os.environ), a.timeout)
    return rc


if __name__ == "__main__":
    sys.exit(main())
