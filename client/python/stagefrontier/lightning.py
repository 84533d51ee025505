"""StageFrontier for PyTorch Lightning: a Callback that times the default
stages of every training batch from Lightning's hooks (docs/CLIENT.md).

    from stagefrontier.lightning import StageFrontierCallback
    trainer = Trainer(callbacks=[StageFrontierCallback()])

At on_train_start, once the strategy has wrapped the model, the callback
makes its Recorder and, when the strategy's model is a
DistributedDataParallel (the ddp strategies), declares backward
synchronizing and installs stagefrontier.ddp_comm_hook on it: each step's
arrival is then marked where the rank hands its last gradient bucket to the
all-reduce, which the straggler verdict needs. A distributed run without a
DDP model (FSDP, DeepSpeed) or whose model already has a hook warns once
that it gives no straggler verdict, with the line that installs the hook.

Hook to stage: on_train_batch_start opens the step (the time since the last
batch ended, the loader's fetch, is its data wait) and its forward stage;
on_before_backward starts backward; on_after_backward starts callbacks;
on_before_optimizer_step starts the optimizer stage; on_train_batch_end
closes the step. Validation, checkpointing and logging between batches are
not counted as data wait. Lightning's own `lightning` package is used when
installed, else `pytorch_lightning`.
"""
try:
    from lightning.pytorch.callbacks import Callback
except ImportError:
    try:
        from pytorch_lightning.callbacks import Callback
    except ImportError as e:
        raise ImportError("stagefrontier.lightning needs PyTorch Lightning "
                          "(the lightning or pytorch_lightning package)") from e

from ._hooks import BACKWARD, CALLBACKS, OPTIMIZER, StepTimer, find_ddp


class StageFrontierCallback(Callback):
    """recorder: a stagefrontier.Recorder to use; otherwise one is made at
    fit start from recorder_kwargs (job_id, socket, role, ...), with the
    trainer's global rank, world size and local rank."""

    def __init__(self, recorder=None, **recorder_kwargs):
        super().__init__()
        self._timer = StepTimer(recorder, **recorder_kwargs)

    @property
    def recorder(self):
        return self._timer.recorder

    @property
    def hook_installed(self):
        """Whether the callback installed the DDP communication hook."""
        return self._timer.hook_installed

    def on_train_start(self, trainer, pl_module):
        # After strategy.setup: trainer.strategy.model is the wrapped model.
        strategy = getattr(trainer, "strategy", None)
        self._timer.open(ddp=find_ddp(getattr(strategy, "model", None)),
                         distributed=trainer.world_size > 1, rank=trainer.global_rank,
                         world_size=trainer.world_size, local_rank=trainer.local_rank)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        self._timer.begin()

    def on_before_backward(self, trainer, pl_module, loss):
        self._timer.switch(BACKWARD)

    def on_after_backward(self, trainer, pl_module):
        self._timer.switch(CALLBACKS)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer, *args):
        self._timer.switch(OPTIMIZER)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        self._timer.end()

    def on_validation_end(self, trainer, pl_module):
        self._timer.idle()

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self._timer.idle()

    def on_train_end(self, trainer, pl_module):
        self._timer.close()

    def on_exception(self, trainer, pl_module, exception):
        self._timer.close()
