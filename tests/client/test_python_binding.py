#!/usr/bin/python3
"""The stagefrontier Python binding against a real SOCK_SEQPACKET listener.

Decodes the datagrams with a small protobuf wire reader (field numbers from
proto/ingest.proto) and checks the hello, the record count, stage names,
step indices, closure and the data-wait charge made by Recorder.data().
"""
import os
import socket
import sys
import tempfile
import time
import warnings

import stagefrontier as sf

# The fake listener below counts connections: the liveness thread's own
# connection (docs/CLIENT.md, "Liveness") is tested in tests/sfd/test_liveness.py.
os.environ["SF_HEARTBEAT_MS"] = "0"

TIMEOUT = 20.0


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(buf):
    """Yields (field number, wire type, value) of one message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = bytes(buf[i:i + n]), i + n
        elif wt == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_hello(buf):
    h = {"stage_names": [], "stage_groups": []}
    for num, _, v in fields(buf):
        if num == 2:
            h["job_id"] = v.decode()
        elif num == 3:
            h["rank"] = v
        elif num == 4:
            h["world_size"] = v
        elif num == 8:
            h["stage_names"].append(v.decode())
        elif num == 9:
            h["stage_groups"].append(v.decode())
        elif num == 10:
            h["schema_hash"] = v
        elif num == 12:
            h["accumulation"] = v
        elif num == 13:
            h["role"] = v.decode()
        elif num == 16:
            h["channel"] = v
        elif num == 18:
            h["window_steps"] = v
        elif num == 19:
            h["warmup_steps"] = v
        elif num == 17:
            i = 0
            while i < len(v):
                k, i = varint(v, i)
                h.setdefault("sync_stages", []).append(k)
    return h


def decode_record(buf):
    r = {"durations": []}
    for num, wt, v in fields(buf):
        if num == 1:
            r["step"] = signed(v)
        elif num == 2 and wt == 2:
            i = 0
            while i < len(v):
                d, i = varint(v, i)
                r["durations"].append(signed(d))
        elif num == 3:
            r["wall"] = signed(v)
        elif num == 4:
            r["violations"] = v
        elif num == 8:
            a = dict((("stage", "own_ns", "issue_ns", "complete_ns")[n - 1], signed(x))
                     for n, _, x in fields(v) if n in (1, 2, 3, 4))
            r.setdefault("arrivals", []).append(a)
    return r


def decode(buf):
    """ClientMessage -> ("hello", dict) or ("batch", [records], dropped)."""
    for num, _, v in fields(buf):
        if num == 1:
            return ("hello", decode_hello(v))
        if num == 2:
            recs, hash_, dropped = [], None, 0
            for n2, _, v2 in fields(v):
                if n2 == 1:
                    recs.append(decode_record(v2))
                elif n2 == 2:
                    hash_ = v2
                elif n2 == 3:
                    dropped = v2
            return ("batch", recs, hash_, dropped)
    raise ValueError("empty message")


class Listener:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sfpy-")
        self.path = os.path.join(self.dir, "ingest.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.sock.settimeout(TIMEOUT)
        self.conn = None

    def accept(self):
        self.conn, _ = self.sock.accept()
        self.conn.settimeout(TIMEOUT)

    def recv(self):
        return decode(self.conn.recv(1 << 17))

    def close(self):
        if self.conn:
            self.conn.close()
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def slow_loader(n, wait_s):
    for i in range(n):
        t0 = time.monotonic()
        while time.monotonic() - t0 < wait_s:
            pass
        yield i


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def test_default_schema_records():
    lst = Listener()
    rec = sf.Recorder(job_id="py-job", socket=lst.path, rank=1, world_size=2,
                      local_rank=1, role="pytest")
    lst.accept()
    kind, hello = lst.recv()
    check(kind == "hello", "first datagram is the hello")
    check(hello["job_id"] == "py-job" and hello["rank"] == 1 and hello["world_size"] == 2,
          "hello identity")
    check(tuple(hello["stage_names"]) == sf.DEFAULT_STAGES, "hello stage names")
    check(tuple(rec.stages) == sf.DEFAULT_STAGES, "Recorder.stages")
    check(hello["schema_hash"] == rec.schema_hash, "schema hash")
    check(hello.get("role") == "pytest" and hello.get("channel") == 0, "role and channel")
    check("window_steps" not in hello and "warmup_steps" not in hello,
          "no window geometry asked by default")

    n = 10
    for batch in rec.data(slow_loader(n, 0.002)):
        with rec.step():
            with rec.stage("model.fwd_loss_cpu_wall"):
                sum(range(1000))
            with rec.stage("model.backward_cpu_wall"):
                sum(range(1000))
            with rec.probe("side"):
                pass
    rec.flush()
    records = []
    while len(records) < n:
        msg = lst.recv()
        check(msg[0] == "batch", "batches after the hello")
        check(msg[2] == rec.schema_hash, "batch schema hash")
        records.extend(msg[1])
    check(len(records) == n, "record count %d" % len(records))
    for i, r in enumerate(records):
        check(r["step"] == i, "step index %d" % r["step"])
        check(len(r["durations"]) == 6, "durations per record")
        check(r["durations"][0] >= 2_000_000, "data wait charged to its step: %r" % r)
        check(r["durations"][1] > 0 and r["durations"][2] > 0, "forward and backward timed")
        check(sum(r["durations"]) == r["wall"], "residual closes the step")
        check(r.get("violations", 0) == 0, "no violations")
    st = rec.stats()
    check(st["steps"] == n and st["records_sent"] == n and st["records_dropped"] == 0,
          "stats %r" % st)
    rec.close()
    lst.close()


class DoneFuture:
    """A completed future with add_done_callback (torch >= 1.10): the
    callback runs at once, given the future."""
    def __init__(self):
        self.calls = 0

    def add_done_callback(self, cb):
        self.calls += 1
        cb(self)


class ThenFuture:
    """A completed future with then() only: the callback's result is the
    chained future's."""
    def __init__(self):
        self.calls = 0

    def then(self, cb):
        self.calls += 1
        return cb(self)


class WorkLike:
    """A c10d Work: its future through get_future()."""
    def __init__(self):
        self.fut = DoneFuture()

    def get_future(self):
        return self.fut


class LastBucket:
    def is_last(self):
        return True


def test_completion_marks():
    """rec.sync()'s issued() and the DDP hook wrapper hang the completion
    mark on what the collective returns: add_done_callback, else then(),
    else a Work's get_future(); an object with none gets the issue mark
    only."""
    lst = Listener()
    back = "model.backward_cpu_wall"
    rec = sf.Recorder(job_id="py-marks", socket=lst.path, rank=0, world_size=1,
                      sync_stages=[back])
    lst.accept()
    check(lst.recv()[0] == "hello", "hello")
    futs = [DoneFuture(), ThenFuture(), WorkLike(), object()]
    hook_fut = [None]
    hook = sf.ddp_comm_hook(rec, inner=lambda state, bucket: hook_fut[0])
    for i, f in enumerate(futs * 2):
        with rec.step(), rec.stage(back):
            if i < len(futs):
                with rec.sync() as s:
                    s.issued(f)
            else:
                hook_fut[0] = f
                check(hook(None, LastBucket()) is f, "the hook returns the inner future")
    rec.flush()
    records = []
    while len(records) < 2 * len(futs):
        msg = lst.recv()
        check(msg[0] == "batch", "batches after the hello")
        records.extend(msg[1])
    for i, r in enumerate(records):
        a = (r.get("arrivals") or [{}])[0]
        check("issue_ns" in a and a["issue_ns"] >= a["own_ns"], "issue mark %d: %r" % (i, a))
        if i % len(futs) == 3:
            check("complete_ns" not in a, "no completion without a future: %r" % a)
        else:
            check(a.get("complete_ns", -1) >= a["issue_ns"], "completion mark %d: %r" % (i, a))
        check(r.get("violations", 0) == 0, "no violations: %r" % r)
    check([futs[0].calls, futs[1].calls, futs[2].fut.calls] == [2, 2, 2],
          "one callback a step on each future")
    rec.close()
    lst.close()


def test_custom_schema_and_misuse():
    lst = Listener()
    rec = sf.Recorder(job_id="py-custom", socket=lst.path, rank=0, world_size=1,
                      stages=["load", "fwd@0", "fwd@1", "rest"], groups=["io", None, "", ""],
                      accumulation=2, window_steps=50, warmup_steps=0)
    lst.accept()
    kind, hello = lst.recv()
    check((hello.get("window_steps"), hello.get("warmup_steps")) == (50, 0),
          "the job's window geometry in the hello: %r" % hello)
    check(hello["stage_names"] == ["load", "fwd@0", "fwd@1", "rest"], "custom names")
    check(hello["stage_groups"] == ["io", "fwd", "fwd", "rest"], "effective groups")
    check(hello["accumulation"] == 2, "accumulation")
    try:
        rec.stage("fwd@O")                  # a typo: the fix is in the message
        check(False, "an unknown stage name was accepted")
    except ValueError as e:
        check("'fwd@O'" in str(e) and "'fwd@0'" in str(e) and "'load'" in str(e) and
              "'rest'" not in str(e), "unknown stage message: %s" % e)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for step in (100, 101):
            with rec.step(step):
                with rec.stage("load"):
                    with rec.stage("fwd@0"):    # nested: a violation, never an exception
                        pass
    said = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    check(len(said) == 1 and "contract violation" in said[0],
          "violations warned once per process: %r" % said)
    rec.flush()
    msg = lst.recv()
    check(msg[0] == "batch" and len(msg[1]) == 2, "two records")
    check(msg[1][0]["step"] == 100 and msg[1][0]["violations"] == 1, "violations recorded")
    check(rec.stats()["violations"] == 2, "violations counted")
    rec.close()
    lst.close()


def test_disabled_and_absent():
    rec = sf.Recorder(disabled=True)
    with rec.step():
        with rec.stage("anything"):
            pass
    check(rec.stats()["steps"] == 0, "disabled does nothing")
    rec.close()
    d = tempfile.mkdtemp(prefix="sfpy-")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rec = sf.Recorder(job_id="absent", socket=os.path.join(d, "none.sock"))
        sf.Recorder(job_id="absent2", socket=os.path.join(d, "none.sock")).close()
    said = [w for w in seen if issubclass(w.category, RuntimeWarning)
            and "no sfd socket at %s" % os.path.join(d, "none.sock") in str(w.message)]
    check(len(said) == 1, "a missing socket is warned of once: %r" % [str(w.message) for w in seen])
    for _ in rec.data(range(20)):
        with rec.step():
            with rec.stage("data.next_wait"):
                pass
    rec.flush()
    st = rec.stats()
    check(st["steps"] == 20 and st["records_dropped"] == 20 and not st["connected"],
          "absent daemon: drops counted %r" % st)
    rec.close()
    os.environ.update(SF_JOB_ID="from-env", SF_SOCKET=os.path.join(d, "none.sock"),
                      RANK="1", WORLD_SIZE="3")
    rec = sf.Recorder()     # everything from the environment
    with rec.step():
        pass
    check(rec.stats()["steps"] == 1, "Recorder() from the environment")
    rec.close()
    os.environ["RANK"] = "3"
    try:
        sf.Recorder()
        check(False, "rank >= world size accepted")
    except ValueError:
        pass
    for name in ("SF_JOB_ID", "SF_SOCKET", "RANK", "WORLD_SIZE"):
        del os.environ[name]
    os.rmdir(d)
    try:
        sf.Recorder(job_id="bad id", socket="/x")
        check(False, "bad job id accepted")
    except ValueError as e:
        check("malformed job id 'bad id' (from job_id)" in str(e), "bad job id: %s" % e)
    saved = {k: os.environ.pop(k) for k in ("SF_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")
             if k in os.environ}
    try:
        sf.Recorder(socket="/x")
        check(False, "no job id accepted")
    except ValueError as e:
        check("no job id: pass job_id=, or set SF_JOB_ID" in str(e), "missing job id: %s" % e)
    os.environ["SLURM_JOB_ID"] = "x" * 200
    try:
        sf.Recorder(socket="/x")
        check(False, "overlong job id accepted")
    except ValueError as e:
        check("malformed job id" in str(e) and "(from SLURM_JOB_ID)" in str(e),
              "overlong job id: %s" % e)
    del os.environ["SLURM_JOB_ID"]
    os.environ.update(saved)


def test_fork_and_loader_workers():
    lst = Listener()
    rec = sf.Recorder(job_id="py-fork", socket=lst.path, rank=0, world_size=1)
    lst.accept()
    check(lst.recv()[0] == "hello", "hello")
    before = rec.stats()["send_syscalls"]
    pid = os.fork()
    if pid == 0:
        # The inherited client must stay silent: no send as the parent rank.
        for i in range(5):
            with rec.step(1000 + i):
                with rec.stage("data.next_wait"):
                    pass
        rec.flush()
        st = rec.stats()
        rec.close()
        os._exit(0 if st["send_syscalls"] == before and not st["connected"] else 1)
    _, status = os.waitpid(pid, 0)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "child exited cleanly")

    n = 6
    try:
        import torch.utils.data as tud
        # Forked DataLoader workers inherit the Recorder and tear it down at exit.
        loader = tud.DataLoader(list(range(2 * n)), batch_size=2, num_workers=2)
        print("DataLoader with 2 forked workers")
    except ImportError:
        loader = [[2 * i, 2 * i + 1] for i in range(n)]
    for batch in rec.data(loader):
        with rec.step():
            with rec.stage("model.fwd_loss_cpu_wall"):
                pass
    rec.close()     # drains, then closes: the stream ends after our records
    steps = []
    while True:
        try:
            buf = lst.conn.recv(1 << 17)
        except socket.timeout:
            check(False, "stream did not end")
        if not buf:
            break
        msg = decode(buf)
        check(msg[0] == "batch", "only batches after the hello")
        steps.extend(r["step"] for r in msg[1])
    check(steps == list(range(n)), "only the parent's steps arrive: %r" % steps)
    lst.sock.setblocking(False)
    try:
        lst.sock.accept()
        check(False, "a forked copy opened a second connection")
    except BlockingIOError:
        pass
    lst.close()


if __name__ == "__main__":
    for name in ("SF_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "RANK", "WORLD_SIZE",
                 "SF_DISABLE"):
        os.environ.pop(name, None)
    test_default_schema_records()
    test_completion_marks()
    test_custom_schema_and_misuse()
    test_disabled_and_absent()
    test_fork_and_loader_workers()
    print("ok")
