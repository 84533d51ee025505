"""After sfd restarts on the same state dir: a job's windows restored from
history answer `report`, and `plot` and `export` draw the job's last full
window from the rows the history keeps, byte for byte as before the restart;
`record` lists the windows whose rows came back (the last full one and the
last partial one) with each rank's parallel coordinates, an older window has
no rows to draw (exit 5, no file);
with `history_rows = false` nothing is drawn after a restart;
`ranks` shows no placeholders (PID 0, LAST_STEP -1) and says the ranks are
from a previous run; `watch` on the restored job draws it and exits."""

import json

import os

from sfdtest import Sfd, check, run_job, wait_for

CONF = """[sfd]
window_grace_ms = 300
[gates]
warmup_steps = 0
window_steps = 10
"""


def rows_off_case():
    """history_rows = false: only reports are stored, so after a restart the
    job has no rows to draw."""
    sfd = Sfd(CONF + "[limits]\nhistory_rows = false\n")
    try:
        run_job(sfd, "off", 2, 20)
        wait_for(lambda: sfd.jobs().get("off", {}).get("windows") == 2, "2 windows of off")
        wait_for(lambda: sfd.status()["history"]["written"] == 2, "the two reports written")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
        sfd.start()
        wait_for(lambda: sfd.jobs().get("off", {}).get("windows") == 2, "off restored")
        check(sfd.status()["history"]["rows_restored"] == 0, "rows stored with history_rows off")
        p = sfd.sfctl("plot", "off", "-o", os.path.join(sfd.dir, "off.svg"), check_rc=5)
        check(b"no rows to draw" in p.stderr, "plot with history_rows off: %r" % p.stderr)
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()


def main():
    rows_off_case()
    sfd = Sfd(CONF)
    try:
        # Windows 0 and 1 full, window 2 partial at the end; each rank declares
        # its pipeline stage, so its windows compare ranks inside cohorts.
        run_job(sfd, "pic", 2, 25, extra={0: {"parallel": "pp=0/2"}, 1: {"parallel": "pp=1/2"}})
        wait_for(lambda: sfd.jobs().get("pic", {}).get("windows") == 3, "3 windows of pic")
        before = sfd.sfctl("report", "pic", "--window", "1").stdout
        drawn = {}
        for cmd, out in (("plot", "before.svg"), ("export", "before.json")):
            path = os.path.join(sfd.dir, out)
            sfd.sfctl(cmd, "pic", "-o", path)
            with open(path, "rb") as f:
                drawn[cmd] = f.read()
            check(len(drawn[cmd]) > 0, "%s before the restart" % cmd)
        check(sfd.stop() == 0, "sfd did not exit cleanly")
        sfd.start()
        wait_for(lambda: sfd.jobs().get("pic", {}).get("windows") == 3, "pic restored")
        history = sfd.status()["history"]
        check(history["rows_restored"] == 2 and history["restore_errors"] == 0,
              "rows restored: %r" % history)

        check(sfd.sfctl("report", "pic", "--window", "1").stdout == before,
              "the restored report differs")
        for cmd, out in (("plot", "after.svg"), ("export", "after.json")):
            path = os.path.join(sfd.dir, out)
            sfd.sfctl(cmd, "pic", "-o", path)
            with open(path, "rb") as f:
                check(f.read() == drawn[cmd], "%s after a restart draws otherwise" % cmd)
        recording = sfd.sfctl("record", "pic").stdout.decode().splitlines()
        windows = [json.loads(line)["index"] for line in recording
                   if json.loads(line).get("type") == "window"]
        check(windows == [1, 2], "windows recorded after a restart: %r" % windows)
        coords = set(json.loads(line).get("parallel") for line in recording
                     if json.loads(line).get("type") == "row")
        check(coords == {"pp=0/2", "pp=1/2"}, "coordinates after a restart: %r" % coords)

        path = os.path.join(sfd.dir, "old.svg")
        p = sfd.sfctl("plot", "pic", "--window", "0", "-o", path, check_rc=5)
        check(b"no window 0" in p.stderr and not os.path.exists(path),
              "an old window without rows: %r" % p.stderr)
        left = [f for f in os.listdir(sfd.dir) if f.startswith("old.svg")]
        check(left == [], "plot left temporary files: %s" % left)

        text = sfd.sfctl("ranks", "pic").stdout.decode()
        rows = [line.split() for line in text.splitlines()[2:] if line[:6].strip().isdigit()]
        check(len(rows) == 2, "ranks rows: %r" % text)
        for r in rows:          # RANK CONNECTED PID HOST ROLE RECORDS LAST_STEP ...
            check(r[2] == "-" and r[6] == "-", "placeholder pid or step: %r" % r)
        check("from a previous run" in text, "ranks does not say where they come from: %r" % text)

        p = sfd.sfctl("watch", "pic", "--interval", "20")
        check(p.stdout.decode().startswith("window 1"), "watch on the restored job: %r" % p.stdout)
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
