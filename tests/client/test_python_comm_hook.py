#!/usr/bin/python3
"""stagefrontier.ddp_comm_hook and the arrival calls of the Python binding.

Two Gloo ranks train two copies of one model side by side: one under torch's
allreduce_hook, one under stagefrontier.ddp_comm_hook(rec) (whose default
inner hook is that same allreduce_hook). After N steps every parameter must
be bit-identical between the copies. The wrapper must mark exactly one
arrival per step, inside the open synchronizing stage (no violation), and
rec.arrive() / rec.sync() must count a violation outside one. Exit 77
(CTest SKIP_RETURN_CODE) only when torch with Gloo is absent.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
from loopback import free_port  # noqa: E402  (path set above)

SKIP = 77
STEPS = 6
BACKWARD = "model.backward_cpu_wall"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def rank_main():
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    import stagefrontier as sf

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=2)
    absent = "/nonexistent-stagefrontier-test/ingest.sock"
    rec = sf.Recorder(job_id="hook", socket=absent, rank=rank, world_size=2,
                      sync_stages=[BACKWARD])

    def model():
        torch.manual_seed(7)
        # Several parameter tensors in small buckets: many hook calls per step.
        return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(),
                                   torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                   torch.nn.Linear(64, 4))

    plain, wrapped = DDP(model(), bucket_cap_mb=0.01), DDP(model(), bucket_cap_mb=0.01)
    plain.register_comm_hook(None, default_hooks.allreduce_hook)
    def counting(state, bucket):
        return default_hooks.allreduce_hook(state, bucket)

    hook = sf.ddp_comm_hook(rec)
    if hook.inner is not default_hooks.allreduce_hook:
        fail("the default inner hook is not allreduce_hook")
    if sf.ddp_comm_hook(rec, counting).__name__ != "counting":
        fail("the wrapper does not carry its inner hook's name")
    wrapped.register_comm_hook(None, hook)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (plain, wrapped)]
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(STEPS):
        x = torch.randn(8, 16, generator=g)
        y = torch.randn(8, 4, generator=g)
        for m, opt in zip((plain, wrapped), opts):
            with rec.step(step) if m is wrapped else _null():
                loss = torch.nn.functional.mse_loss(m(x), y)
                if m is wrapped:
                    with rec.stage(BACKWARD):
                        loss.backward()
                else:
                    loss.backward()
                opt.step()
                opt.zero_grad()
    for a, b in zip(plain.parameters(), wrapped.parameters()):
        if not torch.equal(a, b):
            fail("rank %d: parameters differ after %d steps" % (rank, STEPS))
    if rec.stats()["violations"] != 0:
        fail("the wrapper's arrivals were violations: %s" % rec.stats())
    # Outside a synchronizing stage: -EINVAL, counted.
    with rec.step(STEPS):
        if rec.arrive() != -22:
            fail("arrive() outside a synchronizing stage returned 0")
        with rec.stage(BACKWARD):
            if rec.arrive() != 0:
                fail("arrive() inside the synchronizing stage failed")
            with rec.sync():
                dist.barrier()
    if rec.stats()["violations"] != 1:
        fail("violations %s, want 1" % rec.stats())
    rec.close()
    print("rank %d ok" % rank)
    sys.stdout.flush()
    os._exit(0)     # see bench/ddp/train.py: Gloo teardown can hang at exit in torch 1.13


class _null(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    if "RANK" in os.environ:
        return rank_main()
    try:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("no gloo")
    except ImportError:
        print("SKIP: torch with Gloo is not importable")
        return SKIP
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                              env=dict(os.environ, RANK=str(r), MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=port, WORLD_SIZE="2"))
             for r in range(2)]
    rcs = [p.wait(timeout=150) for p in procs]
    if any(rcs):
        fail("rank exit codes %s" % rcs)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
