"""StageFrontier for the Hugging Face Trainer: a TrainerCallback that times
the default stages of every optimizer step (docs/CLIENT.md).

    from stagefrontier.hf import StageFrontierCallback
    trainer = Trainer(..., callbacks=[StageFrontierCallback()])

The Trainer has no forward or backward hooks, so the callback adds two to the
model while training: the model's forward opens the forward stage, and the
first gradient of its output (the loss) opens backward. Hook to stage:
on_step_begin opens the step (the time since the last step ended, the
loader's fetch, is its data wait); on_substep_end ends a microbatch of
gradient accumulation (the next microbatch's fetch is data wait too);
on_pre_optimizer_step starts the optimizer stage; on_optimizer_step starts
callbacks (scheduler, zero_grad, other callbacks); on_step_end closes the
step. Evaluation, checkpoints and logging are not counted as data wait.
Transformers releases without the optimizer hooks leave the optimizer time
in backward.
"""
try:
    from transformers import TrainerCallback
except ImportError as e:
    raise ImportError("stagefrontier.hf needs Hugging Face transformers") from e

from ._hooks import BACKWARD, CALLBACKS, OPTIMIZER, StepTimer, find_ddp


def _grad_tensor(output):
    """The tensor whose gradient starts backward: the loss when the model
    computed it, else the first output that requires grad."""
    loss = getattr(output, "loss", None)
    if loss is not None and getattr(loss, "requires_grad", False):
        return loss
    if getattr(output, "requires_grad", False):
        return output
    values = output.values() if hasattr(output, "values") else (
        output if isinstance(output, (tuple, list)) else ())
    for v in values:
        if getattr(v, "requires_grad", False):
            return v
    return None


class StageFrontierCallback(TrainerCallback):
    """recorder: a stagefrontier.Recorder to use; otherwise one is made when
    training begins from recorder_kwargs (job_id, socket, role, ...), with the
    Trainer's process index, world size and local process index."""

    def __init__(self, recorder=None, **recorder_kwargs):
        self._timer = StepTimer(recorder, **recorder_kwargs)
        self._handles = []

    @property
    def recorder(self):
        return self._timer.recorder

    @property
    def hook_installed(self):
        """Whether the callback installed the DDP communication hook."""
        return self._timer.hook_installed

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        distributed = args.world_size > 1
        self._timer.open(ddp=find_ddp(model, search=distributed), distributed=distributed,
                         rank=args.process_index, world_size=args.world_size,
                         local_rank=max(args.local_process_index, 0))
        if model is not None and not self._handles:
            self._handles = [model.register_forward_pre_hook(self._on_forward_start),
                             model.register_forward_hook(self._on_forward_end)]

    def _on_forward_start(self, module, inputs):
        if module.training:
            self._timer.microbatch_begin()

    def _on_forward_end(self, module, inputs, output):
        if not (module.training and self._timer.in_step):
            return
        t = _grad_tensor(output)
        if t is not None:
            t.register_hook(self._on_backward_start)

    def _on_backward_start(self, grad):
        self._timer.switch(BACKWARD)

    def on_step_begin(self, args, state, control, **kwargs):
        self._timer.begin()

    def on_substep_end(self, args, state, control, **kwargs):
        self._timer.microbatch_end()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._timer.switch(OPTIMIZER)

    def on_optimizer_step(self, args, state, control, **kwargs):
        self._timer.switch(CALLBACKS)

    def on_step_end(self, args, state, control, **kwargs):
        self._timer.end()

    def on_evaluate(self, args, state, control, **kwargs):
        self._timer.idle()

    def on_save(self, args, state, control, **kwargs):
        self._timer.idle()

    def on_log(self, args, state, control, **kwargs):
        self._timer.idle()

    def on_train_end(self, args, state, control, **kwargs):
        for h in self._handles:
            h.remove()
        self._handles = []
        self._timer.close()
