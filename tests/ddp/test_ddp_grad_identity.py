#!/usr/bin/python3
"""The marks do not touch the gradients: a real 4-rank PyTorch DDP job
(Gloo, CPU) runs the same seeded steps several ways in each rank's process,
and every way must end with the same parameters, bit for bit:

- hook_bare: DDP with torch's stock allreduce hook registered as it is;
- hook_wrapped: the same hook wrapped, stagefrontier.ddp_comm_hook(rec, inner=...);
- hook_default: stagefrontier.ddp_comm_hook(rec) (its default inner hook);
- builtin: DDP without a registered hook (its built-in all-reduce);
- manual_bare / manual_sync: the gradients all-reduced by hand, one flat
  buffer a step, bare and inside `with rec.sync() as s: s.issued(work)`
  (compared with each other).

The recorders report to a real sfd, and the wrapped job's window must show
every row's issue mark, so the marks really ran. The model has several
gradient buckets, so the wrapper sees buckets that are not the last. Exit 77
(CTest SKIP_RETURN_CODE) only when python3-torch with Gloo is absent.
"""

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

import sfharness  # noqa: E402

SKIP = 77
RANKS = 4
WARMUP, STEPS = 2, 12
BACKWARD = "model.backward_cpu_wall"
HOOK_WAYS = ["hook_bare", "hook_wrapped", "hook_default", "builtin"]
MANUAL_WAYS = ["manual_bare", "manual_sync"]


def job_id(way):
    return "ci-gradid-%s-%s" % (way, os.environ["SF_GRADID_TAG"])


def worker(out_path):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    import stagefrontier as sf

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)

    def model_of():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(),
                                   torch.nn.Linear(256, 256), torch.nn.Tanh(),
                                   torch.nn.Linear(256, 8))

    def batch(step):
        g = torch.Generator().manual_seed(1000 * step + rank)
        return torch.randn(16, 64, generator=g), torch.randn(16, 8, generator=g)

    def recorder(way):
        return sf.Recorder(job_id=job_id(way), socket=os.environ["SF_SOCKET"], rank=rank,
                           world_size=world, sync_stages=[BACKWARD])

    def digest(model):
        h = hashlib.sha256()
        for p in model.parameters():
            h.update(p.detach().contiguous().numpy().tobytes())
        return h.hexdigest()

    out = {}
    for way in HOOK_WAYS:
        model = model_of()
        # Small buckets: several a step, the last one marks the arrival.
        ddp = DDP(model, bucket_cap_mb=0.1)
        rec = recorder(way)
        if way == "hook_bare":
            ddp.register_comm_hook(None, default_hooks.allreduce_hook)
        elif way == "hook_wrapped":
            ddp.register_comm_hook(None, sf.ddp_comm_hook(rec, inner=default_hooks.allreduce_hook))
        elif way == "hook_default":
            ddp.register_comm_hook(None, sf.ddp_comm_hook(rec))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        for step in range(WARMUP + STEPS):
            x, y = batch(step)
            with rec.step(step):
                with rec.stage("model.fwd_loss_cpu_wall"):
                    loss = torch.nn.functional.mse_loss(ddp(x), y)
                with rec.stage(BACKWARD):
                    opt.zero_grad()
                    loss.backward()
                with rec.stage("optim.step_cpu_wall"):
                    opt.step()
        rec.flush()
        out[way] = digest(model)
    for way in MANUAL_WAYS:
        model = model_of()
        rec = recorder(way)
        params = list(model.parameters())
        opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
        for step in range(WARMUP + STEPS):
            x, y = batch(step)
            with rec.step(step):
                with rec.stage("model.fwd_loss_cpu_wall"):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                with rec.stage(BACKWARD):
                    opt.zero_grad()
                    loss.backward()
                    flat = torch.cat([p.grad.reshape(-1) for p in params]).div_(world)
                    if way == "manual_sync":
                        with rec.sync() as s:
                            work = dist.all_reduce(flat, async_op=True)
                            s.issued(work)
                            work.wait()
                    else:
                        dist.all_reduce(flat, async_op=True).wait()
                    off = 0
                    for p in params:
                        p.grad.copy_(flat[off:off + p.numel()].view_as(p))
                        off += p.numel()
                with rec.stage("optim.step_cpu_wall"):
                    opt.step()
        rec.flush()
        out[way] = digest(model)
    with open(out_path, "w") as f:
        json.dump(out, f)
    dist.barrier()  # no rank leaves (rank 0 holds the store) before all are done
    # Leave without tearing the process group down, as bench/ddp/train.py
    # does (torch 1.13's Gloo teardown can hang or throw at exit); the
    # records were flushed above.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--row", default="all", choices=["all"])
    a = p.parse_args()
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    build = sfharness.Build(a.build)
    tag = str(os.getpid())
    with sfharness.Sfd(build, warmup_steps=WARMUP, window_steps=STEPS) as sfd:
        port, procs, outs = free_port(), [], []
        for r in range(RANKS):
            outs.append(os.path.join(sfd.dir, "rank%d.json" % r))
            env = build.env({"RANK": str(r), "WORLD_SIZE": str(RANKS), "MASTER_ADDR": "127.0.0.1",
                             "MASTER_PORT": str(port), "SF_SOCKET": sfd.ingest,
                             "SF_GRADID_TAG": tag})
            procs.append(subprocess.Popen([sfharness.PYTHON, os.path.abspath(__file__),
                                           "--worker", outs[-1]], env=env))
        rcs = [pr.wait(timeout=240) for pr in procs]
        if any(rcs):
            print("FAIL: rank exits %s" % rcs)
            return 1
        os.environ["SF_GRADID_TAG"] = tag
        wins = {w: sfd.windows(job_id(w), 1, timeout=60) for w in ("hook_wrapped", "manual_sync")}
        got = []
        for path in outs:  # in sfd's directory, removed with it
            with open(path) as f:
                got.append(json.load(f))
    for r, g in enumerate(got):
        print("rank %d: %s" % (r, " ".join("%s=%s" % (w, g[w][:12]) for w in HOOK_WAYS +
                                           MANUAL_WAYS)))
    if any(g != got[0] for g in got):
        print("FAIL: the ranks' parameters differ")
        return 1
    g = got[0]
    for way in HOOK_WAYS[1:]:
        if g[way] != g["hook_bare"]:
            print("FAIL: %s's parameters differ from hook_bare's" % way)
            return 1
    if g["manual_sync"] != g["manual_bare"]:
        print("FAIL: manual_sync's parameters differ from manual_bare's")
        return 1
    for way, ws in wins.items():
        w = [x for x in ws if x["window"]["index"] == 0]
        comm = w[0].get("communication") if w else None
        if comm is None or comm["visibility"] != "seen" or comm["marked_rows"] != comm["rows"] \
                or comm["rows"] != RANKS * STEPS:
            print("FAIL: %s: the window does not show every row's issue mark: %s" % (way, comm))
            return 1
        print("%s: %d of %d rows carried an issue mark" % (way, comm["marked_rows"],
                                                           comm["rows"]))
    print("PASS")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    sys.exit(main())
