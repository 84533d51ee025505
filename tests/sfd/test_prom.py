"""With prom_dir set, sfd writes the Prometheus textfile export after windows
close: the file appears atomically with the job's latest window, and
promtool accepts it when promtool is installed."""

import os
import shutil
import signal
import subprocess

from sfdtest import Sfd, check, run_job, wait_for


def main():
    sfd = Sfd("", start=False)
    prom = os.path.join(sfd.dir, "prom")
    os.mkdir(prom)
    with open(sfd.conf, "w") as f:
        f.write("[sfd]\nprom_dir = %s\n[gates]\nwarmup_steps = 0\nwindow_steps = 10\n" % prom)
    path = os.path.join(prom, "stagefrontier.prom")
    try:
        sfd.start()
        run_job(sfd, "promjob", 2, 20, extra={1: dict(slow_rank=1, slow_stage=0,
                                                        slow_ns=3000000)})

        def exported():
            if not os.path.exists(path):
                return False
            with open(path) as f:
                text = f.read()
            return 'job_id="promjob"' in text and text

        text = wait_for(exported, "the export to name the job")
        check(all(not n.startswith(".") or n == "." for n in os.listdir(prom)) or
              os.listdir(prom) == ["stagefrontier.prom"], "temporary files left in prom_dir")
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
