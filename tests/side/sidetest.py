"""Helpers of the side-evidence tests that run the real sfd (through
tests/sfd/sfdtest.py): the windows of a job, their NCCL rows, and the forward
labels that CUDA-event samples with R >= 0.5 must produce."""
import json
import os
import subprocess
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


def run_gated(sfd, args, job, steps, window, env=None):
    """Runs a trainer that closes its NCCL plugin (shipping every enqueue
    point), prints one line and waits on stdin before its step records go
    out: it is let go once sfd holds `steps` more enqueue points, so each
    record finds its point. Returns the job's windows of `steps` steps."""
    before = sfd.status()["enqueue_points"]
    p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert "finalized" in p.stdout.readline(), "trainer did not finalize"
        sfdtest.wait_for(lambda: sfd.status()["enqueue_points"] >= before + steps,
                         "every enqueue point of " + job)
        p.stdin.write("go\n")
        p.stdin.close()
        assert p.wait(timeout=60) == 0, "trainer failed"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    n = steps // window
    sfdtest.wait_for(lambda: len(windows(sfd, job, n)) == n, "the windows of " + job)
    return windows(sfd, job, n)
