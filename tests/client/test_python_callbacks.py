#!/usr/bin/python3
"""The framework callbacks on a real SOCK_SEQPACKET listener.

usage: test_python_callbacks.py timer|lightning|hf

timer: the step timer both callbacks share, driven through the exact hook
sequences of a Lightning batch and of a Hugging Face step with gradient
accumulation, each phase busy for a known time; every stage must get its
phase's time. lightning, hf: a small real training run through the real
framework, when it is installed; otherwise the test says "skipped" with the
reason and exits 77, which CTest reports as skipped.
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


if __name__ == "__main__":
    {"timer": test_timer, "lightning": test_lightning, "hf": test_hf}[sys.argv[1]]()
    print("ok")
