"""Helpers of the side-evidence tests that run the real sfd (through
tests/sfd/sfdtest.py): the windows of a job, their NCCL rows, and the forward
labels that CUDA-event samples with R >= 0.5 must produce."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
import sfdtest  # noqa: E402  (path set above)

WINDOW = 10
CONF = "[gates]\nwarmup_steps = 0\nwindow_steps = %d\n" % WINDOW


def windows(sfd, job, n):
    r = sfd.sfctl("report", job, "--last", str(n), "--json", check_rc=None)
    return json.loads(r.stdout) if r.returncode == 0 else []


def nccl_rows(ws):
    return [row for w in ws
            for row in w.get("side_evidence", {}).get("nccl", {}).get("collectives", [])]


def check_forward_labels(ws):
    """R >= 0.5 by construction, so the forward labels follow the routing
    (docs/SPEC.md section 1)."""
    for w in ws:
        fwd_routed = "model.fwd_loss_cpu_wall" in w["routing_set"]
        bwd_leads = w["routing_set"][:1] == ["model.backward_cpu_wall"]
        labels = set(w["labels"])
        assert ("forward_device_supported" in labels) == fwd_routed, w
        assert ("forward_spillover_suspected" in labels) == (bwd_leads and not fwd_routed), w
        assert "forward_event_scope_limited" not in labels, w
