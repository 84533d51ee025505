"""With prom_dir set, sfd writes the Prometheus textfile export after windows
close: the file appears atomically with the job's latest window, names the
slow rank as the routed group's leader and suspect, carries the daemon's
build and counters, and promtool accepts it when promtool is installed."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from sfdtest import SFD, Sfd, check, reap, run_job, wait_for

CLIENT_JOB = os.environ["SF_CLIENT_JOB"]


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def captures_exported(sfd, read):
    """A real capture that is done (rank 1 has a handler) and one that fails
    (rank 0 has none) show as operator captures by state, with the time of
    the latest one."""
    capdir = tempfile.mkdtemp(prefix="sf-capdir-")
    procs = []
    try:
        for rank in (0, 1):
            env = dict(os.environ, SF_HEARTBEAT_MS="0")
            if rank == 1:
                env["SF_TEST_CAPTURE_DIR"] = capdir
            procs.append(subprocess.Popen(
                [CLIENT_JOB, sfd.ingest, "capjob", str(rank), "2", "4000", "-1", "0", "0", "300",
                 "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: sfd.jobs().get("capjob", {}).get("connected_ranks") == 2,
                 "capjob connected")
        before = time.time()
        ids = []
        for rank in ("1", "0"):
            ids.append(int(sfd.sfctl("capture", "capjob", "--ranks", rank, "--steps",
                                     "2").stdout.decode().strip()))
            k = wait_for(lambda: sfd.capture_settled("capjob", ids[-1]), "capture %d" % ids[-1])
            check(k["state"] == ("done" if rank == "1" else "failed"), "capture: %s" % k)
        j = '{job_id="capjob",trigger="operator"'
        text = wait_for(lambda: (metric(read(), "stagefrontier_job_captures_total",
                                        j + ',state="failed"}') == 1 and read()),
                        "the failed capture in the export")
        check(metric(text, "stagefrontier_job_captures_total", j + ',state="done"}') == 1,
              "one done capture:\n" + text)
        check(metric(text, "stagefrontier_job_captures_started_total", j + "}") == 2,
              "two started")
        check(metric(text, "stagefrontier_job_captures_started_total",
                     '{job_id="capjob",trigger="auto"}') == 0, "no automatic capture")
        stamp = metric(text, "stagefrontier_job_last_capture_timestamp_seconds",
                       '{job_id="capjob"}')
        check(stamp is not None and before - 1 <= stamp <= time.time() + 1,
              "latest capture time %s" % stamp)
        check(metric(text, "stagefrontier_job_stalled", '{job_id="capjob"}') == 0,
              "capjob is not stalled")
        for rank in ("0", "1"):
            seen = metric(text, "stagefrontier_rank_last_seen_timestamp_seconds",
                          '{job_id="capjob",rank="%s"}' % rank)
            check(seen is not None and before - 60 <= seen <= time.time() + 1,
                  "rank %s last seen %s" % (rank, seen))
    finally:
        reap(procs)
        shutil.rmtree(capdir, ignore_errors=True)


def main():
    sfd = Sfd("", start=False)
    prom = os.path.join(sfd.dir, "prom")
    os.mkdir(prom)
    with open(sfd.conf, "w") as f:
        f.write("[sfd]\nprom_dir = %s\n[gates]\nwarmup_steps = 0\nwindow_steps = 10\n" % prom)
    path = os.path.join(prom, "stagefrontier.prom")
    try:
        started = time.time()
        sfd.start()
        run_job(sfd, "promjob", 2, 20, extra={1: dict(slow_rank=1, slow_stage=0,
                                                        slow_ns=3000000)})

        def exported():
            if not os.path.exists(path):
                return False
            with open(path) as f:
                text = f.read()
            return 'job_id="promjob"' in text and text

        text = wait_for(lambda: (exported() or "").count("\nstagefrontier_job_window_index"
                                                       '{job_id="promjob"} 1\n') and
                        metric(exported(), "stagefrontier_daemon_records_total") == 40 and
                        exported(), "the export of window 1 and every record")
        j = '{job_id="promjob"'
        check(metric(text, "stagefrontier_job_leader_steps",
                     j + ',group="data.next_wait",rank="1"}') > 0,
              "the slow rank leads the routed group:\n" + text)
        check((metric(text, "stagefrontier_job_suspect_rank_steps", j + ',rank="1"}') or 0) > 0,
              "the slow rank is a suspect")
        stamp = metric(text, "stagefrontier_job_window_timestamp_seconds", j + "}")
        check(stamp is not None and started - 1 <= stamp <= time.time() + 1,
              "window timestamp %s" % stamp)
        version = subprocess.run([SFD, "--version"], capture_output=True,
                                 text=True).stdout.split()[1]
        check(metric(text, "stagefrontier_build_info", '{version="%s"}' % version) == 1,
              "build info")
        check(metric(text, "stagefrontier_daemon_rejected_total", '{reason="duplicate_rank"}')
              == 0, "rejections by reason")
        check(metric(text, "stagefrontier_daemon_windows_closed_total") >= 2, "windows closed")
        check("_share" not in text, "a _share name is left")
        check(all(not n.startswith(".") or n == "." for n in os.listdir(prom)) or
              os.listdir(prom) == ["stagefrontier.prom"], "temporary files left in prom_dir")
        captures_exported(sfd, lambda: exported() or "")
        text = exported()
        promtool = shutil.which("promtool")
        if promtool:
            p = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                               capture_output=True, timeout=60)
            check(p.returncode == 0, "promtool: %s" % (p.stdout + p.stderr).decode())

        # A reload can move the export to another directory.
        prom2 = os.path.join(sfd.dir, "prom2")
        os.mkdir(prom2)
        with open(sfd.conf, "w") as f:
            f.write("[sfd]\nprom_dir = %s\n[gates]\nwarmup_steps = 0\nwindow_steps = 10\n"
                    % prom2)
        sfd.proc.send_signal(signal.SIGHUP)
        path = os.path.join(prom2, "stagefrontier.prom")
        wait_for(exported, "the export in the reloaded prom_dir")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
