"""Configuration and signals: a bad config is a clear message and a
non-zero exit; --ingest/--query place the sockets; SIGHUP reloads limits and
gates; SIGTERM shuts down cleanly and removes the sockets."""

import json
import os
import signal
import subprocess
import tempfile

from sfdtest import SFD, Sfd, check, run_job, wait_for

BASE = """[sfd]
window_grace_ms = 300
[limits]
keep_windows = 2
[gates]
warmup_steps = 0
window_steps = 10
"""


def bad_config(text, needle):
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write(text)
    try:
        p = subprocess.run([SFD, "--config", f.name, "--runtime-dir", "/nonexistent/x"],
                           capture_output=True, timeout=60)
    finally:
        os.unlink(f.name)
    err = p.stderr.decode()
    check(p.returncode != 0, "sfd accepted a bad config: %r" % text)
    check(needle in err, "message %r lacks %r" % (err, needle))


def main():
    bad_config("[sfd]\nno_such_key = 1\n", "no_such_key")
    bad_config("[limits]\nmax_jobs = 0\n", "max_jobs")
    bad_config("[gates]\ntau = banana\n", "tau")
    bad_config("[gates]\nwindow_steps = 0\n", "window_steps")
    bad_config("[nonsense]\nx = 1\n", "nonsense")
    bad_config("[sfd\n", "line 1")
    p = subprocess.run([SFD, "--config", "/nonexistent/sfd.conf"], capture_output=True,
                       timeout=60)
    check(p.returncode != 0 and "/nonexistent/sfd.conf" in p.stderr.decode(),
          "missing config file")
    p = subprocess.run([SFD, "--bogus-flag"], capture_output=True, timeout=60)
    check(p.returncode == 2, "bad flag exit %d" % p.returncode)

    sfd = Sfd(BASE, start=False)
    ingest = os.path.join(sfd.dir, "in.sock")
    query = os.path.join(sfd.dir, "q.sock")
    sfd.extra = ["--ingest", ingest, "--query", query]
    sfd.ingest, sfd.query = ingest, query
    try:
        sfd.start()
        check(oct(os.stat(ingest).st_mode & 0o777) == "0o666", "ingest socket mode")
        check(oct(os.stat(query).st_mode & 0o777) == "0o666", "query socket mode")
        run_job(sfd, "a", 2, 50)
        wait_for(lambda: sfd.jobs()["a"]["windows"] == 2, "keep_windows = 2")

        with open(sfd.conf, "w") as f:
            f.write(BASE.replace("keep_windows = 2", "keep_windows = 4")
                    + "tau = 0.9\n")
        sfd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in sfd.logtext(), "reload")
        run_job(sfd, "a", 2, 50, start=50)
        wait_for(lambda: sfd.jobs()["a"]["windows"] == 4, "keep_windows = 4 after reload")
        latest = json.loads(sfd.sfctl("report", "a", "--json").stdout)[0]
        check(abs(latest["gates"]["tau"] - 0.9) < 1e-9, "reloaded tau: %s" % latest["gates"])

        # A broken file on reload keeps the running configuration.
        with open(sfd.conf, "w") as f:
            f.write("[limits]\nkeep_windows = banana\n")
        sfd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "keeping the running one" in sfd.logtext(), "rejected reload")
        check(sfd.answers(), "sfd died on a bad reload")

        check(sfd.stop() == 0, "sfd did not exit cleanly")
        check(not os.path.exists(ingest) and not os.path.exists(query), "sockets left behind")
    finally:
        sfd.close()
    print("ok")


main()
