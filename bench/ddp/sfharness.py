"""Runs the real sfd for the DDP evaluation and reads its reports.

Owns the plumbing between the Python drivers (run_matrix.py, the ddp tests)
and the programs: locating sfd/sfctl and the binding in a build directory,
starting sfd in a private runtime directory with the evaluation's gates,
waiting for its sockets, querying `sfctl report --json`, and replaying CSVs.
It must not interpret reports: routing.py does that.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(HERE, "train.py")
# Debian's interpreter sees Debian's python3-torch; SF_EVAL_PYTHON names
# another (a host whose PyTorch lives elsewhere).
PYTHON = os.environ.get("SF_EVAL_PYTHON", "/usr/bin/python3")


def pinned(cmd, cpus):
    """cmd under `taskset -c cpus`, or cmd itself when cpus is None."""
    return ["taskset", "-c", cpus] + cmd if cpus else cmd


class Build(object):
    """Paths of the programs and the binding inside one build directory."""

    def __init__(self, build_dir):
        self.dir = os.path.abspath(build_dir)
        self.sfd = self._find("sfd", ["daemon/sfd/sfd", "daemon/sfd", "sfd"])
        self.sfctl = self._find("sfctl", ["daemon/sfctl/sfctl", "sfctl"])
        self.pythonpath = os.path.join(self.dir, "python")

    def _find(self, name, rels):
        for rel in rels:
            p = os.path.join(self.dir, rel)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
        raise FileNotFoundError("%s not found under %s" % (name, self.dir))

    def env(self, extra=None):
        env = dict(os.environ)
        pp = [self.pythonpath, HERE]
        if env.get("PYTHONPATH"):
            pp.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(pp)
        env.update(extra or {})
        return env


def wait_for(pred, timeout, what, proc=None):
    """Polls a real condition with an overall timeout that only fails."""
    end = time.monotonic() + timeout
    delay = 0.01
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s: process exited with %s" % (what, proc.returncode))
        if time.monotonic() > end:
            raise TimeoutError("timed out waiting for " + what)
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


class Sfd(object):
    """sfd in a private runtime directory; use as a context manager."""

    def __init__(self, build, warmup_steps=20, window_steps=100, extra_gates=None,
                 log=None, limits=None, sfd_keys=None, cpus=None):
        self.build = build
        self.cpus = cpus
        self.dir = tempfile.mkdtemp(prefix="sf-ddp-")
        self.ingest = os.path.join(self.dir, "ingest.sock")
        self.query = os.path.join(self.dir, "query.sock")
        gates = {"warmup_steps": warmup_steps, "window_steps": window_steps}
        gates.update(extra_gates or {})
        self.config = os.path.join(self.dir, "sfd.conf")
        with open(self.config, "w") as f:
            if sfd_keys:        # [sfd] keys: auto_capture, stall_after_s, ...
                f.write("[sfd]\n")
                for k, v in sfd_keys.items():
                    f.write("%s = %s\n" % (k, v))
            f.write("[gates]\n")
            for k, v in gates.items():
                f.write("%s = %s\n" % (k, v))
            if limits:
                f.write("[limits]\n")
                for k, v in limits.items():
                    f.write("%s = %s\n" % (k, v))
        self.log_path = log or os.path.join(self.dir, "sfd.log")
        self.proc = None

    def __enter__(self):
        self.logf = open(self.log_path, "w")
        cmd = [self.build.sfd, "--runtime-dir", self.dir, "--foreground", "--config",
               self.config, "--state-dir", os.path.join(self.dir, "state")]
        self.proc = subprocess.Popen(pinned(cmd, self.cpus), stdout=self.logf,
                                     stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(self.ingest) and os.path.exists(self.query), 30,
                 "sfd sockets", self.proc)
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def json(self, *args):
        """The parsed --json answer of an sfctl command, or None when it failed."""
        r = self.sfctl(*(list(args) + ["--json"]))
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "logf", None):
            self.logf.close()
            self.logf = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def sfctl(self, *args):
        return subprocess.run([self.build.sfctl, "--socket", self.query] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)

    def report(self, job, human=False):
        r = self.sfctl("report", job) if human else self.sfctl("report", job, "--json")
        if r.returncode != 0:
            raise RuntimeError("sfctl report %s: rc %d: %s" % (job, r.returncode, r.stderr.strip()))
        return r.stdout if human else json.loads(r.stdout)

    def windows(self, job, want, timeout=60):
        """The report's windows once `want` non-partial windows are closed.

        The job has finished when this is called; a window closes when every
        rank has reported its steps, which may lag the job's exit slightly.
        """
        got = []

        def ready():
            r = self.sfctl("report", job, "--last", str(max(want, 1) + 1), "--json")
            if r.returncode != 0:
                return False
            try:
                wins = json.loads(r.stdout)
            except ValueError:
                return False
            if isinstance(wins, dict):
                wins = [wins]
            full = [w for w in wins if "window_partial" not in (w.get("downgrade_reasons") or [])]
            got[:] = wins
            return len(full) >= want

        wait_for(ready, timeout, "%d closed windows of job %s" % (want, job), self.proc)
        return got


def train(build, job, args, sf_socket=None, timeout=900, extra_env=None, quiet=True, cpus=None):
    """Runs train.py's launcher (its ranks on `cpus`, a taskset list, when
    given); returns its rank-0 JSON summary."""
    fd, result = tempfile.mkstemp(prefix="sf-ddp-result-", suffix=".json")
    os.close(fd)
    env = {"SF_JOB_ID": job}
    if sf_socket:
        env["SF_SOCKET"] = sf_socket
    env.update(extra_env or {})
    cmd = pinned([PYTHON, TRAIN, "--job-id", job, "--result", result] + list(args), cpus)
    try:
        out = subprocess.run(cmd, env=build.env(env), timeout=timeout,
                             stdout=subprocess.PIPE if quiet else None,
                             stderr=subprocess.STDOUT if quiet else None,
                             universal_newlines=True)
        if out.returncode != 0:
            raise RuntimeError("training job failed (rc %d): %s\n%s" %
                               (out.returncode, " ".join(cmd), (out.stdout or "")[-3000:]))
        with open(result) as f:
            return json.loads(f.read())
    finally:
        os.unlink(result)


def replay(build, csv_path, warmup, window):
    r = subprocess.run([build.sfctl, "replay", csv_path, "--json", "--warmup-steps", str(warmup),
                        "--window-steps", str(window)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("sfctl replay: %s" % r.stderr.strip())
    return json.loads(r.stdout)


def merge_csv(csv_dir, out_path):
    """Concatenates the per-rank CSVs (one header) into one wide replay CSV."""
    files = sorted(f for f in os.listdir(csv_dir) if f.startswith("rank") and f.endswith(".csv"))
    rows = []
    header = None
    for name in files:
        with open(os.path.join(csv_dir, name)) as f:
            lines = f.read().splitlines()
        header = lines[0]
        rows.extend(lines[1:])
    rows.sort(key=lambda l: tuple(int(x) for x in l.split(",")[:2]))
    with open(out_path, "w") as f:
        f.write(header + "\n" + "\n".join(rows) + "\n")
    return out_path


def has_torch():
    r = subprocess.run([PYTHON, "-c", "import torch, torch.distributed as d; "
                        "assert d.is_gloo_available()"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


if __name__ == "__main__":
    # The one command-line use: merge train.py --csv output for sfctl replay.
    if len(sys.argv) == 4 and sys.argv[1] == "merge-csv":
        merge_csv(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit("usage: sfharness.py merge-csv CSV_DIR OUT.csv (otherwise import this module)")


def free_port():
    """A loopback TCP port free now, for a job's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_ranks(script, argv, env, world=4, timeout=300):
    """Starts `world` ranks of the Python `script` with `argv`, each with
    `env` plus its RANK, WORLD_SIZE, LOCAL_RANK and a loopback rendezvous
    (one thread, no heartbeat, no SF_PARALLEL from outside: each rank
    declares its own); returns the first non-zero exit status, -9 for a rank
    killed at the timeout."""
    port = free_port()
    procs = []
    for r in range(world):
        e = dict(env, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                 SF_HEARTBEAT_MS="0")
        e.pop("SF_PARALLEL", None)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(script)] + argv, env=e))
    deadline = time.monotonic() + timeout
    rc = 0
    for p in procs:
        try:
            code = p.wait(max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = -9
        rc = rc or code
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    return rc


def leave_rank():
    """Ends a rank without tearing its Gloo group down (torch 1.13's
    destructor can hang or throw at exit), as bench/ddp/train.py does; the
    records are flushed by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
