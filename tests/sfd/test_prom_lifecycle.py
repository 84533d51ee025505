"""The Prometheus textfile over a job's life and sfd's, with a real sfd and
real clients (libsfclient): a running job is `running` with its ranks' host,
local rank and GPU (from CUDA_VISIBLE_DEVICES) as labels and in `sfctl ranks
--json`; an ended job is `ended`, then leaves the file prom_ended_keep_s
later; an idle sfd still rewrites the file (its write timestamp advances);
a clean stop removes it; an unwritable prom_dir is logged once, not every
second. promtool checks each file, and a real node_exporter serves it."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import tempfile

from sfdtest import SFD, Sfd, check, fail, free_port, reap, wait_for

CLIENT_JOB = os.environ["SF_CLIENT_JOB"]
KEEP_S = 3
JOB = "lifejob"
SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels)): value} of an exposition text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        check(m is not None, "unparsable line %r" % line)
        out[(m.group(1), frozenset(LABEL_RE.findall(m.group(3) or "")))] = float(m.group(4))
    return out


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def names(samples, name):
    return [dict(k[1]) for k in samples if k[0] == name]


def promtool_ok(path):
    promtool = shutil.which("promtool")
    if promtool is None:
        print("promtool not installed: the file's lint is not checked")
        return
    with open(path, "rb") as f:
        p = subprocess.run([promtool, "check", "metrics"], stdin=f, capture_output=True,
                           timeout=60)
    check(p.returncode == 0, "promtool check metrics: %s %s" % (p.stdout, p.stderr))


class Export:
    def __init__(self, prom):
        self.path = os.path.join(prom, "stagefrontier.prom")

    def read(self):
        try:
            with open(self.path) as f:
                return parse(f.read())
        except FileNotFoundError:
            return None

    def when(self, pred, what, timeout=None):
        """The samples once pred(samples) holds."""
        def probe():
            s = self.read()
            return s if s is not None and pred(s) else None
        return wait_for(probe, what, **({"timeout": timeout} if timeout else {}))


def state_of(s, job=JOB):
    on = [st for st in ("running", "stalled", "ended")
          if value(s, "stagefrontier_job_state", job_id=job, state=st) == 1]
    return on[0] if len(on) == 1 else None


def start_job(sfd, world=2):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="4,5", SF_HEARTBEAT_MS="200")
    # steps long enough to run until the test kills the ranks
    return [subprocess.Popen([CLIENT_JOB, sfd.ingest, JOB, str(r), str(world), "1000000", "-1",
                              "0", "0", "1000", "1"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for r in range(world)]


def check_running(sfd, export):
    s = export.when(lambda s: state_of(s) == "running" and
                    len(names(s, "stagefrontier_rank_info")) == 2, "the running job in the file")
    check(value(s, "stagefrontier_job_state", job_id=JOB, state="ended") == 0, "ended is 0")
    host = os.uname().nodename
    for rank, gpu in ((0, "4"), (1, "5")):
        check(value(s, "stagefrontier_rank_info", job_id=JOB, rank=str(rank), host=host,
                    local_rank=str(rank), gpu=gpu) == 1,
              "rank %d info: %s" % (rank, names(s, "stagefrontier_rank_info")))
    ranks = json.loads(sfd.sfctl("ranks", JOB, "--json").stdout)["ranks"]
    check([(r["rank"], r["local_rank"], r["gpu"]) for r in ranks] == [(0, 0, "4"), (1, 1, "5")],
          "sfctl ranks --json: %s" % ranks)
    promtool_ok(export.path)


def check_ended(sfd, export, procs):
    for p in procs:
        p.send_signal(signal.SIGKILL)
    reap(procs)
    gone_at = time.monotonic()
    s = export.when(lambda s: state_of(s) == "ended", "the ended job in the file")
    check(value(s, "stagefrontier_job_stalled", job_id=JOB) == 0, "an ended job is not stalled")
    promtool_ok(export.path)
    export.when(lambda s: not any(dict(k[1]).get("job_id") == JOB for k in s),
                "the ended job removed after prom_ended_keep_s")
    kept = time.monotonic() - gone_at
    # the file is checked once a second: the job goes between KEEP_S and KEEP_S + 2 s
    check(kept >= KEEP_S - 0.5, "removed %.2f s after its ranks left, keep is %d s" % (kept, KEEP_S))
    # sfd still knows the job: only its series went
    check(JOB in sfd.jobs(), "sfd forgot the job")


def check_idle_rewrites(export):
    first = export.read()["stagefrontier_textfile_write_timestamp_seconds", frozenset()]
    started = time.monotonic()
    later = export.when(lambda s: s[("stagefrontier_textfile_write_timestamp_seconds",
                                     frozenset())] > first, "an idle rewrite", timeout=30)
    waited = time.monotonic() - started
    stamp = later[("stagefrontier_textfile_write_timestamp_seconds", frozenset())]
    check(waited <= 15, "an idle sfd rewrote its file only after %.1f s" % waited)
    check(abs(stamp - time.time()) < 5, "write timestamp %s is not now" % stamp)


def check_node_exporter(prom):
    exporter = shutil.which("prometheus-node-exporter")
    if exporter is None:
        print("prometheus-node-exporter not installed: not scraped")
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        port = free_port()
        proc = subprocess.Popen([exporter, "--collector.disable-defaults", "--collector.textfile",
                                 "--collector.textfile.directory=" + prom,
                                 "--web.listen-address=127.0.0.1:%d" % port],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def scrape():
                if proc.poll() is not None:
                    return "exited"
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                                timeout=10) as r:
                        return parse(r.read().decode())
                except OSError:
                    return None
            s = wait_for(scrape, "node_exporter on port %d" % port)
            if s == "exited":
                continue            # the port was taken: another one
            check(value(s, "node_textfile_scrape_error") == 0, "node_exporter: a scrape error")
            check(value(s, "stagefrontier_job_state", job_id=JOB, state="running") == 1,
                  "node_exporter does not serve the running job")
            return
        finally:
            reap([proc])
    fail("node_exporter did not come up")


def check_unwritable(tmp):
    """A prom_dir that cannot be written: one warning, not one a second,
    and one line when it works again."""
    missing = os.path.join(tmp, "not-yet")
    sfd = Sfd("[sfd]\nprom_dir = %s\n" % missing)
    try:
        wait_for(lambda: "prometheus export to %s" % missing in sfd.logtext(), "the first warning")
        # the export is retried every second: let a few retries fail (the
        # assertion below holds however long this takes, under a minute)
        time.sleep(3)
        os.mkdir(missing)
        wait_for(lambda: "works again" in sfd.logtext(), "the recovery message")
        check(os.path.exists(os.path.join(missing, "stagefrontier.prom")), "no file after recovery")
        warnings = [l for l in sfd.logtext().splitlines()
                    if "prometheus export to %s:" % missing in l]
        check(len(warnings) == 1, "the failure was logged %d times: %s" % (len(warnings), warnings))
        check(sfd.stop() == 0, "sfd stop")
    finally:
        sfd.close()


def check_keep_range():
    """prom_ended_keep_s out of range: sfd refuses to start and names the range."""
    for bad in ("604801", "-1"):
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write("[sfd]\nprom_ended_keep_s = %s\n" % bad)
        try:
            p = subprocess.run([SFD, "--config", f.name, "--runtime-dir", "/nonexistent/x"],
                               capture_output=True, timeout=60)
        finally:
            os.unlink(f.name)
        err = p.stderr.decode()
        check(p.returncode != 0 and "prom_ended_keep_s = %s: must be 0..604800" % bad in err,
              "keep %s: %s" % (bad, err))


def main():
    check_keep_range()
    sfd = Sfd("", start=False)
    prom = os.path.join(sfd.dir, "prom")
    os.mkdir(prom)
    with open(sfd.conf, "w") as f:
        f.write("[sfd]\nprom_dir = %s\nprom_ended_keep_s = %d\n"
                "[gates]\nwarmup_steps = 0\nwindow_steps = 10\n" % (prom, KEEP_S))
    export = Export(prom)
    procs = []
    try:
        sfd.start()
        procs = start_job(sfd)
        check_running(sfd, export)
        check_node_exporter(prom)
        check_ended(sfd, export, procs)
        check_idle_rewrites(export)
        promtool_ok(export.path)
        check(sfd.stop() == 0, "sfd did not stop cleanly")
        check(not os.path.exists(export.path), "the file outlived a clean stop")
        check(os.listdir(prom) == [], "left in prom_dir: %s" % os.listdir(prom))
        check_unwritable(sfd.dir)
    finally:
        reap(procs)
        sfd.close()
    print("prom lifecycle OK")


if __name__ == "__main__":
    main()
    sys.exit(0)
