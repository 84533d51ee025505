"""Fault injection for the DDP evaluation job.

Owns the host-side delays injected into one hidden rank: where each fault
lives (loader, forward hook, backward hook, communication hook, callback) and
how large it is. It must not time anything itself: all timing goes through the
stagefrontier binding in train.py.
"""

import random
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

# Row name -> the stage (reporting group) a correct router should name, or None
# when the row is a control that must not route its own stage.
FAULTS = {
    "none": None,
    "data_wait": "data.next_wait",
    "backward_compute": "model.backward_cpu_wall",
    "backward_comm": "model.backward_cpu_wall",
    "forward_host": "model.fwd_loss_cpu_wall",
    "callback_barrier": "callbacks.cpu_wall",
    # Negative control: a host-only callback with no barrier. Its delay
    # surfaces as wait in the next step's backward allreduce on the other
    # ranks, so callbacks.cpu_wall must never enter the routing set.
    "callback_host": None,
}

# The stage a host-only callback must never route.
CONTROL_STAGE = {"callback_host": "callbacks.cpu_wall"}


def faulty_rank(seed, world_size):
    """The hidden rank, chosen by seed (never announced to the accounting)."""
    return random.Random("sf-hidden-rank-%d" % seed).randrange(world_size)


def _spin(seconds):
    """Busy compute for about `seconds`: real work on the CPU, not a sleep."""
    a = torch.ones(32, 32)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = torch.tanh(a @ a * 0.01)
    return a


class Injector:
    """Holds the delay (seconds) and arms the hooks of one fault row.

    The delay is 0 until `arm(delay_s)` is called after warmup, so warmup
    steps measure the clean median step on every rank. `active` lets a run
    switch the fault off and on again (A/B/A).
    """

    def __init__(self, kind, enabled):
        if kind not in FAULTS:
            raise ValueError("unknown fault %r" % kind)
        self.kind = kind
        self.enabled = enabled and kind != "none"
        self.delay_s = 0.0
        self.active = False
        self._bwd_pending = False

    def arm(self, delay_s, accumulation=1):
        """Set the per-step delay. Faults that fire once per micro-batch
        (loader, forward, backward compute) get delay/K each, so every row
        adds the same delay per optimizer step."""
        self.delay_s = delay_s if self.enabled else 0.0
        per_micro = self.kind in ("data_wait", "forward_host", "backward_compute")
        if per_micro and accumulation > 1:
            self.delay_s /= accumulation

    def _on(self, kind):
        return self.active and self.kind == kind and self.delay_s > 0

    # -- data wait: a slow loader ------------------------------------------
    def wrap_loader(self, loader):
        inj = self

        class SlowLoader:
            def __iter__(self):
                for batch in loader:
                    if inj._on("data_wait"):
                        time.sleep(inj.delay_s)
                    yield batch

        return SlowLoader()

    # -- forward host: sleep inside the forward ----------------------------
    def install_model_hooks(self, module):
        def fwd_pre(_mod, _inp):
            if self._on("forward_host"):
                time.sleep(self.delay_s)
                return None
            return None

        module.register_forward_pre_hook(fwd_pre)

        # Backward compute: extra CPU work in a full backward hook of the
        # model. Its input (token ids) needs no gradient, so the hook fires
        # once the output's gradient exists: at the start of backward, before
        # any gradient bucket is ready for its allreduce.
        def bwd_hook(_mod, _gin, _gout):
            if self._on("backward_compute") and self._bwd_pending:
                self._bwd_pending = False
                _spin(self.delay_s)
            return None

        module.register_full_backward_hook(bwd_hook)

    def begin_step(self):
        self._bwd_pending = True

    # -- backward communication: delay before the allreduce ---------------
    def install_comm_hook(self, ddp_model, wrap=None):
        """Registers the fault's allreduce hook; wrap(hook), when given,
        returns the hook to register instead (the arrival-marking wrapper)."""
        inj = self

        def delayed_allreduce(state, bucket):
            if inj._on("backward_comm") and inj._bwd_pending_comm:
                inj._bwd_pending_comm = False
                time.sleep(inj.delay_s)
            return default_hooks.allreduce_hook(state, bucket)

        self._bwd_pending_comm = False
        hook = wrap(delayed_allreduce) if wrap else delayed_allreduce
        ddp_model.register_comm_hook(None, hook)

    def begin_backward(self):
        self._bwd_pending_comm = True

    # -- callbacks -----------------------------------------------------------
    def callback(self):
        """The training loop's callback region (runs inside callbacks.cpu_wall)."""
        if self._on("callback_barrier") or self._on("callback_host"):
            time.sleep(self.delay_s)

    def needs_barrier(self):
        # Every rank runs the barrier in the sync-bounded row, so the other
        # ranks wait inside their own callback stage.
        return self.kind == "callback_barrier"


def barrier():
    dist.barrier()
