"""StageFrontier per-step stage telemetry for Python training loops.

The Recorder, its context managers and ddp_comm_hook live in the C extension
(stagefrontier._stagefrontier, a binding of libsfclient); this package adds
the framework callbacks: stagefrontier.lightning and stagefrontier.hf.
See docs/CLIENT.md.
"""
from . import parallel
from ._stagefrontier import DEFAULT_STAGES, Recorder, __version__, ddp_comm_hook

__all__ = ["DEFAULT_STAGES", "Recorder", "__version__", "ddp_comm_hook", "parallel"]
