"""Helpers for sfd's black-box tests: a real sfd in a private temporary
directory, sender processes, sfctl calls, and waiting on real conditions
(a socket that answers, a counter that moved) with generous overall timeouts
that only ever fail a test."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import loopback

SFD = os.environ["SFD"]
SFCTL = os.environ["SFCTL"]
SENDER = os.environ.get("SF_TEST_SENDER", "")   # only tests that send need it
TIMEOUT = float(os.environ.get("SF_TEST_TIMEOUT", "60"))

free_port = loopback.free_port  # tests call sfdtest.free_port


FAILED = []


def fail(msg):
    FAILED.append(msg)
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def wait_for(pred, what, timeout=TIMEOUT, interval=0.02):
    """Polls pred() until it returns a true value; fails the test after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            fail("timed out waiting for " + what)
        time.sleep(interval)


def as_uid(uid, args):
    """A command line that runs args as uid (and gid) uid, without groups."""
    return ["setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups"] + args


def reap(procs):
    """Kills what is still running of a list of Popen and waits for each."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


class Sfd:
    def __init__(self, conf="", name="sfd", env=None, extra_args=(), start=True):
        self.dir = tempfile.mkdtemp(prefix="sfdtest-")
        os.chmod(self.dir, 0o755)
        self.run = os.path.join(self.dir, "run")
        self.ingest = os.path.join(self.run, "ingest.sock")
        self.query = os.path.join(self.run, "query.sock")
        self.conf = os.path.join(self.dir, "sfd.conf")
        self.state = os.path.join(self.dir, "state")    # history: private to each test
        with open(self.conf, "w") as f:
            f.write(conf)
        self.log = open(os.path.join(self.dir, name + ".log"), "w")
        self.env = dict(os.environ)
        self.env.pop("NOTIFY_SOCKET", None)
        self.env.pop("WATCHDOG_USEC", None)
        self.env.update(env or {})
        self.extra = list(extra_args)
        self.proc = None
        if start:
            self.start()

    def start(self, wait=True):
        self.proc = subprocess.Popen(
            [SFD, "--config", self.conf, "--runtime-dir", self.run, "--state-dir", self.state,
             "--foreground", "--log-level", "info"] + self.extra,
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        if wait:
            wait_for(self.answers, "sfd query socket")
        return self

    def answers(self):
        if self.proc.poll() is not None:
            fail("sfd exited early with %s; log %s" % (self.proc.returncode, self.log.name))
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(self.query)
            s.close()
            return True
        except OSError:
            return False

    def pid(self):
        return self.proc.pid

    def sfctl(self, *args, check_rc=0, user=None):
        cmd = [SFCTL, "--socket", self.query] + list(args)
        if user:
            cmd = ["setpriv", "--reuid=" + user, "--regid=nogroup", "--clear-groups"] + cmd
        p = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT)
        if check_rc is not None and p.returncode != check_rc:
            fail("sfctl %s: rc %d (want %d): %s" % (" ".join(args), p.returncode, check_rc,
                                                     p.stderr.decode()))
        return p

    def status(self):
        return json.loads(self.sfctl("status", "--json").stdout)

    def rejected(self, reason):
        return self.status()["rejected"][reason]

    def jobs(self):
        """The newest incarnation of each job id."""
        listed = json.loads(self.sfctl("jobs", "--json").stdout)
        return {j["job_id"]: j for j in sorted(listed, key=lambda j: j.get("incarnation", 1))}

    def captures(self, job):
        return json.loads(self.sfctl("captures", job, "--json").stdout)

    def capture_settled(self, job, cid):
        """Capture cid of the job once it has ended (done or failed), else None."""
        return next((k for k in self.captures(job) if k["id"] == cid and k["state"] != "running"),
                    None)

    def stop(self, sig=signal.SIGTERM):
        """Sends sig (None: only waits) and returns the exit status."""
        if self.proc is None:
            return None
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("sfd did not stop on signal %d" % sig)
        log = self.logtext()
        for bad in ("summary failed", "report failed", "live handles", "ERROR: AddressSanitizer",
                    "runtime error"):
            if bad in log:
                fail("sfd log has %r (see %s)" % (bad, self.log.name))
        return rc

    def close(self, keep=False):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        if not keep and not FAILED:
            shutil.rmtree(self.dir, ignore_errors=True)

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()


def sender_args(sfd, **kw):
    args = [SENDER, "--socket", sfd.ingest]
    for k, v in kw.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            args.append(flag)
        else:
            args += [flag, str(v)]
    return args


def send(sfd, user=None, **kw):
    """Runs a sender to completion; returns (rc, parsed key=value output)."""
    args = sender_args(sfd, **kw)
    if user:
        args = ["setpriv", "--reuid=" + user, "--regid=nogroup", "--clear-groups"] + args
    p = subprocess.run(args, capture_output=True, timeout=TIMEOUT * 2)
    return p.returncode, parse_kv(p.stdout.decode()), p


def spawn(sfd, **kw):
    """Starts a sender with a stdin pipe (for --hold / storm)."""
    return subprocess.Popen(sender_args(sfd, **kw), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def parse_kv(text):
    out = {}
    for tok in text.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def run_job(sfd, job, world, steps, start=0, batch=16, extra=None):
    """Runs one sender per rank concurrently; returns their parsed outputs."""
    extra = extra or {}
    procs = []
    for r in range(world):
        kw = dict(job=job, rank=r, world=world, steps=steps, start=start, batch=batch)
        kw.update(extra.get(r, {}))
        kw.update(extra.get("all", {}))
        procs.append(subprocess.Popen(sender_args(sfd, **kw), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    outs = []
    for p in procs:
        o, e = p.communicate(timeout=TIMEOUT * 4)
        if p.returncode != 0:
            fail("sender rc %d: %s" % (p.returncode, e.decode()))
        outs.append(parse_kv(o.decode()))
    return outs


def pooled_before(live, first):
    """Whether a live window's change pooled a window before `first`, the
    oldest the recording kept (docs/CHANGE.md, "Pooled windows")."""
    measured = ((live.get("change") or {}).get("measured") or {}).get("windows", [])
    return any(i < first for i in measured)


def same_but_pool_cut(live, replay):
    """Whether two report arrays are equal, but for the change and what-if of
    the first windows, whose pool reached before the recording: replay
    pools only the windows of theirs that it has."""
    a, b = json.loads(live), json.loads(replay)
    if len(a) != len(b) or not a:
        return False
    first = min(w["window"]["index"] for w in a)
    for x, y in zip(a, b):
        if pooled_before(x, first):
            kept = [i for i in x["change"]["measured"]["windows"] if i >= first]
            if y["change"]["measured"]["windows"] != kept:
                return False
            x, y = dict(x, change=None, whatif=None), dict(y, change=None, whatif=None)
        if x != y:
            return False
    return True


def live_equals_replay(sfd, job):
    """The job's live report JSON, failing unless `sfctl replay` of its
    `sfctl record` dump prints the same bytes (both kept in sfd.dir), but
    where sfd no longer keeps a window the change pooled."""
    live = sfd.sfctl("report", job, "--last", "100", "--json").stdout
    rec = os.path.join(sfd.dir, job + ".jsonl")
    sfd.sfctl("record", job, "-o", rec)
    p = subprocess.run([SFCTL, "replay", "--json", rec], capture_output=True, timeout=60)
    check(p.returncode == 0, "replay failed: %s" % p.stderr.decode())
    if p.stdout != live and not same_but_pool_cut(live, p.stdout):
        with open(os.path.join(sfd.dir, "live.json"), "wb") as f:
            f.write(live)
        with open(os.path.join(sfd.dir, "replay.json"), "wb") as f:
            f.write(p.stdout)
        fail("live report and replay differ for %s (see %s)" % (job, sfd.dir))
    return live


def vm_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def mount_tmpfs(path, opts):
    """Mounts a tmpfs with opts on path (created); (ok, mount's stderr)."""
    os.makedirs(path, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", path],
                       capture_output=True, timeout=60)
    return p.returncode == 0, p.stderr.decode().strip()


def stop_and_unmount(sfd):
    """Stops sfd (a failed check leaves it running), then unmounts its state
    dir, so that no mount outlives the test, and removes its directory."""
    if sfd.proc is not None and sfd.proc.poll() is None:
        sfd.proc.kill()
        sfd.proc.wait()
    if os.path.ismount(sfd.state):
        subprocess.run(["umount", sfd.state], capture_output=True, timeout=60)
    sfd.close()
