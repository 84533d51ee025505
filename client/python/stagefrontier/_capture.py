"""The default capture backend: torch.profiler for the steps sfd asked for.

The binding (capture_glue.c) calls start(), step_begin()/step_end() around
each captured step, stage_begin()/stage_end() around each stage, and stop(),
which writes a gzipped Chrome trace into the capture directory and returns
its path (docs/CLIENT.md, "Captures"). Any exception is reported to sfd as a
failed capture and never reaches the training loop. This module must not be
imported on the hot path: the binding imports it once, and torch only when a
request arrives.
"""
import errno
import gzip
import os
import shutil
import socket
import stat

CPU, CUDA = 1, 2


def capture_dir():
    """SF_CAPTURE_DIR, else $XDG_RUNTIME_DIR/stagefrontier/captures, else
    /tmp/stagefrontier-$UID/captures (docs/CLIENT.md, "Captures")."""
    d = os.environ.get("SF_CAPTURE_DIR")
    if not d:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isdir(xdg):
            d = os.path.join(xdg, "stagefrontier", "captures")
        else:
            d = os.path.join("/tmp", "stagefrontier-%d" % os.getuid(), "captures")
    return os.path.abspath(d)


def _check_component(path, st, uid, leaf):
    """The rule of daemon/sfd/safe_path.c: owned by this user or root (the
    capture directory itself by this user), and writable by no one else
    unless sticky and root's, like /tmp."""
    if not stat.S_ISDIR(st.st_mode):
        raise PermissionError("capture directory: %s is not a directory" % path)
    if st.st_uid != uid and (leaf or st.st_uid != 0):
        raise PermissionError("capture directory: %s is owned by uid %d, not %d"
                              % (path, st.st_uid, uid))
    shared_tmp = st.st_mode & stat.S_ISVTX and st.st_uid == 0
    if st.st_mode & 0o022 and not (shared_tmp and not leaf):
        raise PermissionError("capture directory: %s is writable by group or others (mode %o)"
                              % (path, stat.S_IMODE(st.st_mode)))


def open_capture_dir(d):
    """Walks d from "/" one component at a time with O_NOFOLLOW | O_DIRECTORY,
    making missing components mode 0700, and returns the descriptor of d: a
    symbolic link or another user's directory anywhere on the way is refused
    with the component named, so a trace never lands where someone else chose."""
    uid = os.getuid()
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    parts = [p for p in d.split("/") if p and p != "."]
    if ".." in parts:
        raise PermissionError("capture directory: %s contains '..'" % d)
    fd = os.open("/", flags)
    try:
        _check_component("/", os.fstat(fd), uid, not parts)
        path = ""
        for i, name in enumerate(parts):
            path += "/" + name
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                link = stat.S_ISLNK(os.lstat(name, dir_fd=fd).st_mode)
                raise PermissionError("capture directory: %s is %s" % (
                    path, "a symbolic link" if link else "not a directory"))
            os.close(fd)
            fd = nxt
            _check_component(path, os.fstat(fd), uid, i == len(parts) - 1)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _unlink_quietly(name, dirfd):
    try:
        os.unlink(name, dir_fd=dirfd)
    except FileNotFoundError:
        pass


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
    and CUDA when asked or, by default, when a GPU is present; with
    record_shapes when the request is for communication."""

    def __init__(self):
        import torch
        import torch.profiler
        self.torch = torch
        self.prof = None
        self.step_range = None
        self.stages = []
        self.req = None
        self.dir = None
        self.dirfd = None

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
        if self.dirfd is not None:
            os.close(self.dirfd)
        self.dirfd = open_capture_dir(self.dir)
        # For a collective that started late (sfd's communication verdict),
        # the shapes too: each collective's sizes and process group in the
        # trace; on CUDA the NCCL kernels come with the CUDA activity.
        self.prof = self.torch.profiler.profile(activities=self._activities(req["kinds"]),
                                                record_shapes=bool(req.get("communication")))
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
        dirfd, self.dirfd = self.dirfd, None
        raw, tmp = ".sf-capture-%d-%d.json" % (os.getpid(), req["id"]), name + ".part"
        excl = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            os.close(os.open(raw, excl, 0o600, dir_fd=dirfd))
            # torch writes by name: through the held descriptor, which no
            # rename of a directory on the way can redirect.
            prof.export_chrome_trace("/proc/self/fd/%d/%s" % (dirfd, raw))
            with open(os.open(raw, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd),
                      "rb") as src, \
                    open(os.open(tmp, excl, 0o600, dir_fd=dirfd), "wb") as dst, \
                    gzip.GzipFile(fileobj=dst, mode="wb") as gz:
                _copy_with_identity(src, gz, req)
            os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        finally:
            _unlink_quietly(raw, dirfd)
            _unlink_quietly(tmp, dirfd)
            os.close(dirfd)
        return os.path.join(self.dir, name)
