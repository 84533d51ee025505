"""Timing of the default stages from a framework's training-loop hooks.

The framework callbacks (stagefrontier.lightning, stagefrontier.hf) only map
their framework's hooks onto the calls here; this module owns the step and
stage bookkeeping and the DDP communication hook, and must not import a
framework (torch is used only when the process has imported it). Every
duration comes from the Recorder (libsfclient's monotonic clock); a hook
costs a few C calls.
"""
import gc
import sys
import time
import warnings

from ._stagefrontier import DEFAULT_STAGES, Recorder, ddp_comm_hook

# Positions of the default stages (DEFAULT_STAGES; the residual is never timed).
DATA, FORWARD, BACKWARD, CALLBACKS, OPTIMIZER = range(5)

# What a job whose DDP model the callback cannot reach runs itself.
MANUAL_HOOK = ("pass sync_stages=[%r] to the callback and run "
               "ddp_model.register_comm_hook(None, stagefrontier.ddp_comm_hook(callback.recorder))"
               % DEFAULT_STAGES[BACKWARD])


def _ddp_class():
    """torch's DistributedDataParallel when the process uses torch.distributed."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return torch.nn.parallel.DistributedDataParallel


def find_ddp(model, search=False):
    """The DistributedDataParallel that is `model` or wraps it: model itself,
    or (search) the one whose .module is model, found by one walk of the
    objects the collector tracks, for frameworks that hand callbacks the
    unwrapped model. None without torch.distributed or such a wrapper."""
    ddp = _ddp_class()
    if ddp is None or model is None:
        return None
    if isinstance(model, ddp):
        return model
    if search:
        for o in gc.get_objects():
            if isinstance(o, ddp) and getattr(o, "module", None) is model:
                return o
    return None


def _existing_hook(ddp):
    """The name of a comm hook already registered on ddp, or None."""
    try:
        return ddp._get_ddp_logging_data().get("comm_hook") or None
    except (AttributeError, RuntimeError):
        return None


class StepTimer:
    """One step at a time: begin() opens the step at its forward stage,
    switch() moves to another stage, end() closes the step.

    The data wait of a step is the time since the previous step ended (or
    since idle() said the loop's own work between steps was done), in which
    the loop fetched the batch. It is charged to the step's data stage, as
    Recorder.data() charges a wrapped loader's next(). A loader wrapped with
    data() is timed exactly instead, and the gap is then not charged."""

    def __init__(self, recorder=None, **recorder_kwargs):
        if "stages" in recorder_kwargs or "groups" in recorder_kwargs:
            raise TypeError("the framework callbacks time the default stages; "
                            "a custom schema needs the manual API")
        self._recorder = recorder
        self._kwargs = recorder_kwargs
        self._step = None           # the open step's context, or None
        self._stage = None          # the open stage's context, or None
        self._stage_index = None
        self._next_step = 0
        self._last_end_ns = None
        self._microbatch_end_ns = None
        self._loader_timed = False
        self.hook_installed = False

    def open(self, ddp=None, distributed=False, **identity):
        """Creates the Recorder (unless one was given) once the framework
        knows the process's rank; identity fills what the keyword arguments
        given to the callback leave out.

        ddp: the job's DistributedDataParallel model, if the framework shows
        it. The straggler verdict needs each rank's arrival in its gradient
        all-reduce, so then backward is declared synchronizing and
        stagefrontier.ddp_comm_hook is installed on ddp. A distributed run
        (distributed) whose hook cannot be installed warns once: its records
        carry no arrival and sfd gives no straggler verdict. A Recorder given
        to the callback is used as it is: its owner installs the hook."""
        if self._recorder is not None:
            return self._recorder
        kwargs = dict(identity)
        hook = ddp is not None and self._hook_free(ddp)
        if hook and "sync_stages" not in self._kwargs:
            kwargs["sync_stages"] = [DEFAULT_STAGES[BACKWARD]]
        kwargs.update(self._kwargs)
        try:
            self._recorder = Recorder(**kwargs)
        except ValueError as e:
            # A callback must never stop a training run: without a job id
            # (or with bad options) it records nothing and says so once.
            warnings.warn("stagefrontier: callback disabled: %s" % e, RuntimeWarning,
                          stacklevel=3)
            self._recorder = Recorder(disabled=True)
            return self._recorder
        if hook:
            self._install_hook(ddp, DEFAULT_STAGES[BACKWARD] in (kwargs.get("sync_stages") or ()))
        elif distributed and ddp is None:
            _warn("no DistributedDataParallel model found: records carry no arrival, so sfd "
                  "gives no straggler verdict; " + MANUAL_HOOK)
        return self._recorder

    def _hook_free(self, ddp):
        name = _existing_hook(ddp)
        if name is not None:
            _warn("the DDP model already has the communication hook %r: records carry no "
                  "arrival, so sfd gives no straggler verdict; wrap it instead: pass "
                  "sync_stages=[%r] to the callback and register stagefrontier.ddp_comm_hook("
                  "callback.recorder, inner=%s)" % (name, DEFAULT_STAGES[BACKWARD], name))
        return name is None

    def _install_hook(self, ddp, backward_syncs):
        if not backward_syncs:
            _warn("sync_stages leaves out %r: no communication hook installed, so sfd gives "
                  "no straggler verdict" % DEFAULT_STAGES[BACKWARD])
            return
        try:
            ddp.register_comm_hook(None, ddp_comm_hook(self._recorder))
            self.hook_installed = True
        except RuntimeError as e:
            _warn("the communication hook could not be installed (%s): no straggler verdict; "
                  "%s" % (e, MANUAL_HOOK))

    @property
    def recorder(self):
        return self.open()

    @property
    def in_step(self):
        return self._step is not None

    def data(self, loader):
        """Wraps a loader so each next() is charged to the consuming step."""
        self._loader_timed = True
        return self.recorder.data(loader)

    def begin(self, step=None):
        """Opens step `step` (default: one past the last) at its forward stage."""
        if self._step is not None:
            self.end()
        now = time.monotonic_ns()
        rec = self.recorder
        step = self._next_step if step is None else step
        self._step = rec.step(step)
        self._step.__enter__()
        self._next_step = step + 1
        self._microbatch_end_ns = None
        if self._last_end_ns is not None and not self._loader_timed:
            rec.charge_data_wait(step, now - self._last_end_ns)
        self.switch(FORWARD)

    def switch(self, index):
        """Closes the open stage and opens stage `index` of the default stages."""
        names = self.recorder.stages        # empty for a disabled Recorder
        if self._step is None or index == self._stage_index or index >= len(names):
            return
        self._close_stage()
        self._stage = self.recorder.stage(names[index])
        self._stage.__enter__()
        self._stage_index = index

    def microbatch_end(self):
        """Inside a step with gradient accumulation: a microbatch is done."""
        if self._step is None:
            return
        self._close_stage()
        self._microbatch_end_ns = time.monotonic_ns()

    def microbatch_begin(self):
        """The next microbatch's forward: the time since microbatch_end() was
        its fetch, charged to the data stage of the open step."""
        if self._step is None or self._microbatch_end_ns is None:
            return
        if not self._loader_timed:
            self.recorder.charge_data_wait(self._next_step - 1,
                                           time.monotonic_ns() - self._microbatch_end_ns)
        self._microbatch_end_ns = None
        self.switch(FORWARD)

    def end(self):
        """Closes the open step; its record goes to sfd."""
        if self._step is None:
            return
        self._close_stage()
        self._step.__exit__(None, None, None)
        self._step = None
        self._last_end_ns = time.monotonic_ns()

    def idle(self):
        """Between steps, after work that is not the loader's (evaluation,
        checkpoints, logging): the next step's data wait starts now."""
        if self._step is None and self._last_end_ns is not None:
            self._last_end_ns = time.monotonic_ns()

    def close(self):
        """Ends the open step and hands the queued records to sfd."""
        self.end()
        self._last_end_ns = None
        if self._recorder is not None:
            self._recorder.flush()

    def _close_stage(self):
        if self._stage is not None:
            self._stage.__exit__(None, None, None)
            self._stage = None
            self._stage_index = None


_WARNED = set()


def _warn(msg):
    """Once per message and process: a callback never stops a training run."""
    if msg not in _WARNED:
        _WARNED.add(msg)
        warnings.warn("stagefrontier: " + msg, RuntimeWarning, stacklevel=4)
