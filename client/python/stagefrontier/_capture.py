"""The default capture backend: torch.profiler for the steps sfd asked for.

The binding (capture_glue.c) calls start(), step_begin()/step_end() around
each captured step, stage_begin()/stage_end() around each stage, and stop(),
which writes a gzipped Chrome trace into the capture directory and returns
its path (docs/CLIENT.md, "Captures"). Any exception is reported to sfd as a
failed capture and never reaches the training loop. This module must not be
imported on the hot path: the binding imports it once, and torch only when a
request arrives.
"""
import gzip
import os
import shutil
import socket
import stat
import tempfile

CPU, CUDA = 1, 2


def capture_dir():
    """SF_CAPTURE_DIR, else $XDG_RUNTIME_DIR/stagefrontier/captures, else
    /tmp/stagefrontier-$UID/captures: created mode 0700, and refused unless
    it is a real directory owned by this user that no one else can write."""
    d = os.environ.get("SF_CAPTURE_DIR")
    if not d:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isdir(xdg):
            d = os.path.join(xdg, "stagefrontier", "captures")
        else:
            d = os.path.join("/tmp", "stagefrontier-%d" % os.getuid(), "captures")
    _make_private_dirs(d)
    return d


def _make_private_dirs(d):
    parent = os.path.dirname(d.rstrip("/"))
    if parent and parent != d and not os.path.lexists(parent):
        _make_private_dirs(parent)
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode):
        raise PermissionError("capture directory %s is not a directory" % d)
    if st.st_uid != os.getuid():
        raise PermissionError("capture directory %s is owned by uid %d, not %d"
                              % (d, st.st_uid, os.getuid()))
    if st.st_mode & 0o022:
        raise PermissionError("capture directory %s is writable by others (mode %o)"
                              % (d, stat.S_IMODE(st.st_mode)))


_HEAD = 1 << 20  # where Kineto writes distributedInfo, before traceEvents


def _copy_with_identity(src, dst, req):
    """Copies the Chrome trace, adding distributedInfo (rank, world size) when
    torch wrote none (no torch.distributed, or a build that writes the bare
    event array), so that `sfctl import kineto` places each capture at its
    rank (docs/IMPORT.md)."""
    head = src.read(_HEAD)
    body = head.lstrip()
    info = b'"distributedInfo": {"rank": %d, "world_size": %d}' % (
        req["rank"], req.get("world_size", 0))
    if b'"distributedInfo"' in head or "world_size" not in req:
        dst.write(head)
        shutil.copyfileobj(src, dst)
    elif body.startswith(b"["):     # the bare array: into the object form
        dst.write(b"{" + info + b', "traceEvents": ' + body)
        shutil.copyfileobj(src, dst)
        dst.write(b"}\n")
    elif body.startswith(b"{"):
        rest = body[1:]
        dst.write(b"{" + info + (b"" if rest.lstrip().startswith(b"}") else b", ") + rest)
        shutil.copyfileobj(src, dst)
    else:
        dst.write(head)
        shutil.copyfileobj(src, dst)


class TorchCapture(object):
    """torch.profiler (Kineto where the build has it) with CPU activities,
    and CUDA when asked or, by default, when a GPU is present."""

    def __init__(self):
        import torch
        import torch.profiler
        self.torch = torch
        self.prof = None
        self.step_range = None
        self.stages = []
        self.req = None

    def _activities(self, kinds):
        tp = self.torch.profiler
        acts = [tp.ProfilerActivity.CPU]
        cuda = self.torch.cuda.is_available()
        if (kinds & CUDA or kinds == 0) and cuda:
            acts.append(tp.ProfilerActivity.CUDA)
        elif kinds & CUDA:
            raise RuntimeError("CUDA activities asked for, but no GPU is available")
        return acts

    def start(self, req):
        self.req = req
        self.dir = capture_dir()
        self.prof = self.torch.profiler.profile(activities=self._activities(req["kinds"]))
        self.prof.__enter__()

    def step_begin(self, step):
        # The name Kineto gives its own steps, so tools that cut a trace into
        # steps (and `sfctl import kineto`) find them in any torch build.
        self.step_range = self.torch.profiler.record_function("ProfilerStep#%d" % step)
        self.step_range.__enter__()

    def step_end(self, step):
        while self.stages:          # a stage left open by an exception
            self.stages.pop().__exit__(None, None, None)
        if self.step_range is not None:
            self.step_range.__exit__(None, None, None)
            self.step_range = None

    def stage_begin(self, name):
        rf = self.torch.profiler.record_function(name)
        rf.__enter__()
        self.stages.append(rf)

    def stage_end(self, name):
        if self.stages:
            self.stages.pop().__exit__(None, None, None)

    def stop(self):
        self.step_end(None)
        prof, self.prof = self.prof, None
        if prof is None:
            raise RuntimeError("no capture running")
        prof.__exit__(None, None, None)
        req = self.req
        name = "%s-rank%d-capture%d-%s-%d.json.gz" % (
            req["job_id"] or "job", req["rank"], req["id"], socket.gethostname(), os.getpid())
        path = os.path.join(self.dir, name)
        fd, raw = tempfile.mkstemp(prefix=".sf-capture-", suffix=".json", dir=self.dir)
        os.close(fd)
        try:
            prof.export_chrome_trace(raw)
            tmp = path + ".part"
            with open(raw, "rb") as src, \
                    os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL,
                                      0o600), "wb") as dst, \
                    gzip.GzipFile(fileobj=dst, mode="wb") as gz:
                _copy_with_identity(src, gz, req)
            os.rename(tmp, path)
        finally:
            for p in (raw, path + ".part"):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
        return path
