#!/usr/bin/python3
"""The framework callbacks on a real SOCK_SEQPACKET listener.

usage: test_python_callbacks.py timer|lightning|hf|lightning_ddp|hf_ddp

timer: the step timer both callbacks share, driven through the exact hook
sequences of a Lightning batch and of a Hugging Face step with gradient
accumulation, each phase busy for a known time; every stage must get its
phase's time. lightning, hf: a small real training run through the real
framework, when it is installed; otherwise the test says "skipped" with the
reason and exits 77, which CTest reports as skipped.

lightning_ddp, hf_ddp: each callback on two real Gloo ranks of a real torch
DistributedDataParallel model, its hooks called in its framework's order
(the framework's own package where installed, else a stand-in of the one
base class the callback derives from). The callback must find the DDP model
(Lightning: the strategy's model at on_train_start; Hugging Face: the
wrapper of the model on_train_begin is handed), declare backward
synchronizing, install the comm hook: every record carries one arrival in
backward, within its duration, and the ranks' parameters stay equal (the
gradients went through the hook's all-reduce). A DDP model that already has
a hook, and a distributed run without a DDP model, each warn once that no
straggler verdict follows, and declare no synchronizing stage.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python_binding import Listener, check  # noqa: E402

SKIP = 77
MS = 1_000_000
DATA, FWD, BWD, CB, OPT, RESIDUAL = range(6)


def busy(ms):
    t0 = time.monotonic()
    while time.monotonic() - t0 < ms / 1000:
        pass


def records_of(lst, n):
    kind, hello = lst.recv()
    check(kind == "hello", "hello first")
    records = []
    while len(records) < n:
        msg = lst.recv()
        check(msg[0] == "batch", "batches after the hello")
        records.extend(msg[1])
    return hello, records


def check_phases(r, want_ms, what):
    """Each stage at least its phase's busy time. Every phase is charged to
    one stage, so time that landed in the wrong stage leaves its own stage
    short; upper bounds would only measure how loaded the machine is."""
    for stage, ms in want_ms.items():
        d = r["durations"][stage]
        check(d >= ms * MS, "%s: stage %d has %.2f ms, want >= %d: %r"
              % (what, stage, d / MS, ms, r))
    check(r.get("violations", 0) == 0, "%s: violations %r" % (what, r))


def test_timer():
    from stagefrontier._hooks import BACKWARD, CALLBACKS, OPTIMIZER, StepTimer
    import stagefrontier as sf
    lst = Listener()
    timer = StepTimer(job_id="cb-timer", socket=lst.path)
    timer.open(rank=0, world_size=1, local_rank=0)
    lst.accept()
    # Lightning's order: batch start, backward, after backward, optimizer, end.
    for _ in range(3):
        busy(8)                          # the loader's fetch
        timer.begin()
        busy(4)
        timer.switch(BACKWARD)
        busy(6)
        timer.switch(CALLBACKS)
        busy(2)
        timer.switch(OPTIMIZER)
        busy(3)
        timer.end()
        busy(300)                        # validation between batches
        timer.idle()
    # Hugging Face with two microbatches per step.
    for _ in range(2):
        busy(8)
        timer.begin()
        busy(4)
        timer.switch(BACKWARD)
        busy(6)
        timer.microbatch_end()
        busy(5)                          # the second microbatch's fetch
        timer.microbatch_begin()
        busy(4)
        timer.switch(BACKWARD)
        busy(6)
        timer.switch(OPTIMIZER)
        busy(3)
        timer.switch(CALLBACKS)
        busy(2)
        timer.end()
    timer.close()
    hello, records = records_of(lst, 5)
    check(tuple(hello["stage_names"]) == sf.DEFAULT_STAGES, "default stages")
    check([r["step"] for r in records] == list(range(5)), "steps %r" % records)
    # The first step has no previous end: no data wait to charge.
    check(records[0]["durations"][DATA] == 0, "first step data wait %r" % records[0])
    check_phases(records[0], {FWD: 4, BWD: 6, CB: 2, OPT: 3}, "lightning step 0")
    for r in records[1:3]:
        check_phases(r, {DATA: 8, FWD: 4, BWD: 6, CB: 2, OPT: 3}, "lightning step")
        check(r["durations"][DATA] < 200 * MS, "validation counted as data wait: %r" % r)
    for r in records[3:]:
        check_phases(r, {DATA: 13, FWD: 8, BWD: 12, CB: 2, OPT: 3}, "accumulation step")
    lst.close()
    # A callback without a job id records nothing and never stops training.
    for name in ("SF_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        os.environ.pop(name, None)
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = StepTimer(socket="/nonexistent/ingest.sock")
        t.begin()
        t.switch(BACKWARD)
        t.end()
    check(any("callback disabled" in str(w.message) for w in seen), "disabled warning")
    check(t.recorder.stats()["steps"] == 0, "a disabled callback records nothing")
    try:
        StepTimer(stages=["a", "rest"])
        check(False, "a custom schema was accepted")
    except TypeError:
        pass


def check_run(lst, steps, data_ms, timed):
    """A real framework's run: every step recorded in order, each after the
    first with the loader's wait in its data stage and the stages in timed
    above zero, without violations."""
    lst.accept()
    _, records = records_of(lst, steps)
    check([r["step"] for r in records] == list(range(steps)), "steps %r" % records)
    for r in records[1:]:
        d = r["durations"]
        check(d[DATA] >= data_ms * MS, "data wait through the loader: %r" % r)
        check(all(d[s] > 0 for s in timed), "stages %s timed: %r" % (timed, r))
        check(r.get("violations", 0) == 0, "violations: %r" % r)
    lst.close()


def skip(why):
    print("skipped:", why)
    sys.exit(SKIP)


def test_lightning():
    try:
        import torch
        try:
            import lightning.pytorch as pl
        except ImportError:
            import pytorch_lightning as pl
    except ImportError as e:
        skip("PyTorch Lightning is not installed (%s); Debian 12 does not package it" % e)
    from stagefrontier.lightning import StageFrontierCallback

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(16, 1)

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def slow_collate(items):
        busy(5)
        return torch.utils.data.default_collate(items)

    data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8, collate_fn=slow_collate)
    lst = Listener()
    cb = StageFrontierCallback(job_id="cb-lightning", socket=lst.path)
    trainer = pl.Trainer(max_steps=8, callbacks=[cb], accelerator="cpu", devices=1,
                         logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Tiny(), loader)
    check_run(lst, 8, 5, (FWD, BWD, OPT))


def test_hf():
    try:
        import torch
        import transformers
    except ImportError as e:
        skip("Hugging Face transformers is not installed (%s); Debian 12 does not "
             "package it" % e)
    from stagefrontier.hf import StageFrontierCallback

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(16, 1)

        def forward(self, x, labels=None):
            out = self.layer(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            busy(1)
            return {"x": torch.randn(16), "labels": torch.randn(1)}

    lst = Listener()
    cb = StageFrontierCallback(job_id="cb-hf", socket=lst.path)
    args = transformers.TrainingArguments(output_dir=lst.dir, max_steps=6,
                                          per_device_train_batch_size=8,
                                          gradient_accumulation_steps=2, report_to=[],
                                          save_strategy="no",
                                          dataloader_num_workers=0)
    transformers.Trainer(model=Tiny(), args=args, train_dataset=Slow(),
                         callbacks=[cb]).train()
    check_run(lst, 6, 8, (FWD, BWD))


def stand_in(framework):
    """The framework's callback base class: its own package when installed,
    else a module holding only that class (the callbacks need no more)."""
    import types
    if framework == "lightning":
        try:
            import lightning.pytorch.callbacks  # noqa: F401
            return
        except ImportError:
            pass
        names, cls = ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks"), "Callback"
    else:
        try:
            import transformers  # noqa: F401
            return
        except ImportError:
            pass
        names, cls = ("transformers",), "TrainerCallback"
    for name in names:
        sys.modules[name] = types.ModuleType(name)
    setattr(sys.modules[names[-1]], cls, type(cls, (), {}))


def hook(cb, name, *args, **kwargs):
    """Calls a hook as the framework does: its base class has every hook."""
    f = getattr(cb, name, None)
    if f is not None:
        f(*args, **kwargs)


DDP_STEPS = 6
ACC = 2     # Hugging Face: microbatches per optimizer step


def ddp_model(seed=7):
    import torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def lightning_run(cb, trainer, rank):
    """Lightning's order: setup, (strategy.setup wraps), on_fit_start,
    on_train_start, then per batch start, training_step, zero_grad,
    before/after backward, before optimizer step, step, batch end."""
    import torch
    ddp = trainer.strategy.model
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    hook(cb, "setup", trainer, ddp, "fit")
    hook(cb, "on_fit_start", trainer, ddp)
    hook(cb, "on_train_start", trainer, ddp)
    g = torch.Generator().manual_seed(100 + rank)
    for i in range(DDP_STEPS):
        batch = (torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g))
        hook(cb, "on_train_batch_start", trainer, ddp, batch, i)
        loss = torch.nn.functional.mse_loss(ddp(batch[0]), batch[1])
        opt.zero_grad()
        hook(cb, "on_before_backward", trainer, ddp, loss)
        loss.backward()
        hook(cb, "on_after_backward", trainer, ddp)
        hook(cb, "on_before_optimizer_step", trainer, ddp, opt)
        opt.step()
        hook(cb, "on_train_batch_end", trainer, ddp, loss, batch, i)
    hook(cb, "on_train_end", trainer, ddp)


def hf_run(cb, args, model, ddp, rank):
    """The Trainer's order: on_train_begin (handed the unwrapped model), then
    per optimizer step on_step_begin, each microbatch's forward and backward
    (all but the last under no_sync, then on_substep_end), on_pre_optimizer_step,
    the step, on_optimizer_step, on_step_end; on_train_end."""
    import contextlib
    import torch
    state, control = object(), object()
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    hook(cb, "on_train_begin", args, state, control, model=model)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(DDP_STEPS):
        hook(cb, "on_step_begin", args, state, control)
        for micro in range(ACC):
            x, y = torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)
            with ddp.no_sync() if micro < ACC - 1 else contextlib.nullcontext():
                out = ddp(x)
                (torch.nn.functional.mse_loss(out, y) / ACC).backward()
            if micro < ACC - 1:
                hook(cb, "on_substep_end", args, state, control)
        hook(cb, "on_pre_optimizer_step", args, state, control)
        opt.step()
        hook(cb, "on_optimizer_step", args, state, control)
        opt.zero_grad()
        hook(cb, "on_step_end", args, state, control)
    hook(cb, "on_train_end", args, state, control)


def check_arrivals(hello, records, rank):
    bwd = hello["stage_names"].index("model.backward_cpu_wall")
    check(hello.get("sync_stages") == [bwd], "rank %d: backward not synchronizing: %r"
          % (rank, hello))
    check([r["step"] for r in records] == list(range(DDP_STEPS)), "steps %r" % records)
    for r in records:
        a = r.get("arrivals", [])
        check(len(a) == 1 and a[0]["stage"] == bwd, "rank %d: arrivals %r" % (rank, r))
        check(0 < a[0]["own_ns"] <= r["durations"][bwd], "rank %d: arrival %r" % (rank, r))
        check(r.get("violations", 0) == 0, "rank %d: violations %r" % (rank, r))


def params_equal(ddp):
    import torch
    import torch.distributed as dist
    flat = torch.cat([p.detach().flatten() for p in ddp.parameters()])
    both = [torch.zeros_like(flat) for _ in range(2)]
    dist.all_gather(both, flat)
    return torch.equal(both[0], both[1])


def check_warns(framework, make, why):
    """A callback whose hook cannot be installed warns once, says no
    straggler verdict follows, and declares no synchronizing stage."""
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cb = make()
    said = [str(w.message) for w in seen if "no straggler verdict" in str(w.message)]
    check(len(said) == 1 and why in said[0] and "ddp_comm_hook" in said[0],
          "%s: warning %r" % (framework, [str(w.message) for w in seen]))
    check(not cb.hook_installed, "%s: hook installed anyway" % framework)


def ddp_rank(framework):
    import types
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=2)
    stand_in(framework)
    lst = Listener()
    absent = "/nonexistent-stagefrontier-test/ingest.sock"
    if framework == "lightning":
        from stagefrontier.lightning import StageFrontierCallback
        cb = StageFrontierCallback(job_id="cb-ddp", socket=lst.path)
        ddp = DDP(ddp_model(), bucket_cap_mb=0.01)

        def trainer(model):
            return types.SimpleNamespace(global_rank=rank, world_size=2, local_rank=rank,
                                         strategy=types.SimpleNamespace(model=model))
        lightning_run(cb, trainer(ddp), rank)

        def hooked():
            c = StageFrontierCallback(job_id="cb-ddp-w", socket=absent)
            d = DDP(ddp_model())
            d.register_comm_hook(None, default_hooks.allreduce_hook)
            c.on_train_start(trainer(d), d)
            return c

        def plain():
            c = StageFrontierCallback(job_id="cb-ddp-p", socket=absent)
            c.on_train_start(trainer(ddp_model()), None)
            return c
    else:
        from stagefrontier.hf import StageFrontierCallback
        cb = StageFrontierCallback(job_id="cb-ddp", socket=lst.path)
        model = ddp_model()
        ddp = DDP(model, bucket_cap_mb=0.01)
        args = types.SimpleNamespace(process_index=rank, world_size=2, local_process_index=rank)
        hf_run(cb, args, model, ddp, rank)

        def hooked():
            c = StageFrontierCallback(job_id="cb-ddp-w", socket=absent)
            m = ddp_model()
            d = DDP(m)
            d.register_comm_hook(None, default_hooks.allreduce_hook)
            c.on_train_begin(args, None, None, model=m)
            c.on_train_end(args, None, None)
            return c

        def plain():
            c = StageFrontierCallback(job_id="cb-ddp-p", socket=absent)
            c.on_train_begin(args, None, None, model=ddp_model())
            c.on_train_end(args, None, None)
            return c
    check(cb.hook_installed, "%s rank %d: no comm hook installed" % (framework, rank))
    lst.accept()
    hello, records = records_of(lst, DDP_STEPS)
    check_arrivals(hello, records, rank)
    check(params_equal(ddp), "rank %d: parameters differ: the hook's all-reduce" % rank)
    check_warns(framework, hooked, "already has the communication hook")
    check_warns(framework, plain, "no DistributedDataParallel model found")
    lst.close()
    print("rank %d ok" % rank)
    sys.stdout.flush()
    os._exit(0)     # see bench/ddp/train.py: Gloo teardown can hang at exit in torch 1.13


def test_ddp(framework):
    import subprocess
    try:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("no gloo")
    except ImportError:
        skip("torch with Gloo is not importable")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
    from loopback import free_port
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), framework + "_ddp"],
                              env=dict(os.environ, RANK=str(r), MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=port, WORLD_SIZE="2"))
             for r in range(2)]
    rcs = [p.wait(timeout=200) for p in procs]
    check(rcs == [0, 0], "rank exit codes %s" % rcs)


if __name__ == "__main__":
    part = sys.argv[1]
    if part.endswith("_ddp"):
        framework = part[:-len("_ddp")]
        ddp_rank(framework) if "RANK" in os.environ else test_ddp(framework)
    else:
        {"timer": test_timer, "lightning": test_lightning, "hf": test_hf}[part]()
    print("ok")
