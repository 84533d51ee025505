#!/usr/bin/python3
"""The capture request as the Python side sees it (docs/CLIENT.md, "Captures").

glue: a real SOCK_SEQPACKET listener sends CaptureRequests to a Recorder
whose capture backend is a recording stand-in: the request dict start() gets
carries communication True when the request has the field set, False when it
is absent (an ordinary capture, or an sfd older than the field).

backend: stagefrontier._capture.TorchCapture over a stand-in of
torch.profiler (no torch needed): a communication request profiles with
record_shapes=True (the collectives' sizes and groups in the trace), an
ordinary one with record_shapes=False; the trace is written either way.
"""
import gzip
import json
import os
import shutil
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python_binding import Listener, check  # noqa: E402

import stagefrontier as sf  # noqa: E402


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def control_message(cid, steps, communication=None):
    """ControlMessage{capture = CaptureRequest{id, steps[, communication]}}
    (field numbers from proto/ingest.proto)."""
    q = b"\x08" + varint(cid) + b"\x10" + varint(steps)
    if communication is not None:
        q += b"\x20" + varint(1 if communication else 0)
    return b"\x0a" + varint(len(q)) + q


class Recording:
    """A capture backend that keeps the requests it was started with."""
    started = []

    def start(self, req):
        Recording.started.append(dict(req))

    def step_begin(self, step):
        pass

    def step_end(self, step):
        pass

    def stage_begin(self, name):
        pass

    def stage_end(self, name):
        pass

    def stop(self):
        return "/nowhere/trace-%d.json.gz" % Recording.started[-1]["id"]


def test_glue():
    lst = Listener()
    rec = sf.Recorder(job_id="py-cap", socket=lst.path, rank=0, world_size=1,
                      capture=Recording)
    lst.accept()
    check(lst.recv()[0] == "hello", "first datagram is the hello")
    for cid, comm in ((7, True), (8, None), (9, False)):
        lst.conn.send(control_message(cid, 2, comm))
        for _ in range(200):       # the request is read at a flush, taken at a step
            with rec.step():
                with rec.stage("model.fwd_loss_cpu_wall"):
                    pass
            rec.flush()
            if rec.stats()["captures_done"] == len(Recording.started) and \
                    Recording.started and Recording.started[-1]["id"] == cid:
                break
        check(Recording.started and Recording.started[-1]["id"] == cid,
              "capture %d started: %r" % (cid, Recording.started))
        got = Recording.started[-1]
        check(got["communication"] is bool(comm),
              "capture %d: communication %r, sent %r" % (cid, got["communication"], comm))
        check(got["steps"] == 2 and got["rank"] == 0 and got["world_size"] == 1,
              "request dict %r" % got)
    check(rec.stats()["captures_done"] == 3, "stats %r" % rec.stats())
    rec.close()
    lst.close()


def torch_stand_in():
    """torch, torch.profiler and torch.cuda as far as TorchCapture uses them;
    each profile() keeps the keyword arguments it was made with."""
    torch = types.ModuleType("torch")
    prof_mod = types.ModuleType("torch.profiler")
    made = []

    class Profile:
        def __init__(self, **kw):
            self.kw = kw
            made.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def export_chrome_trace(self, path):
            with open(path, "w") as f:
                json.dump({"traceEvents": [], "record_shapes": self.kw["record_shapes"]}, f)

    class RecordFunction:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    prof_mod.profile = Profile
    prof_mod.record_function = RecordFunction
    prof_mod.ProfilerActivity = types.SimpleNamespace(CPU="cpu", CUDA="cuda")
    torch.profiler = prof_mod
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)
    sys.modules["torch"] = torch
    sys.modules["torch.profiler"] = prof_mod
    return made


def test_backend():
    made = torch_stand_in()
    from stagefrontier import _capture
    d = tempfile.mkdtemp(prefix="sfpy-cap-")
    os.environ["SF_CAPTURE_DIR"] = os.path.join(d, "captures")
    try:
        for cid, comm in ((21, True), (22, False)):
            req = {"id": cid, "steps": 1, "kinds": 0, "first_step": -1, "job_id": "py-cap",
                   "rank": 3, "world_size": 4, "communication": comm}
            b = _capture.TorchCapture()
            b.start(req)
            check(made[-1].kw["record_shapes"] is comm,
                  "capture %d: record_shapes %r, communication %r" %
                  (cid, made[-1].kw["record_shapes"], comm))
            check(made[-1].kw["activities"] == ["cpu"], "activities %r" % made[-1].kw)
            b.step_begin(5)
            b.step_end(5)
            path = b.stop()
            with gzip.open(path) as f:
                trace = json.load(f)
            check(trace["record_shapes"] is comm and trace["distributedInfo"]["rank"] == 3,
                  "trace %r" % trace)
        # a request dict without the field (a binding older than it): no shapes
        b = _capture.TorchCapture()
        b.start({"id": 23, "steps": 1, "kinds": 0, "first_step": -1, "job_id": "py-cap",
                 "rank": 3, "world_size": 4})
        check(made[-1].kw["record_shapes"] is False, "no field: %r" % made[-1].kw)
        b.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    for name in ("SF_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "RANK", "WORLD_SIZE",
                 "SF_DISABLE"):
        os.environ.pop(name, None)
    os.environ["SF_HEARTBEAT_MS"] = "0"
    test_glue()
    test_backend()
    print("ok")
