"""After sfd restarts on the same state dir (issue 49, item 2): a job's
windows restored from history answer `report`, but `plot` and `export` have
no rows to draw, so they exit 5 with a message that says why and write no
file; `ranks` shows no placeholders (PID 0, LAST_STEP -1) and says the ranks
are from a previous run; `watch` on the restored job draws it and exits."""

import os

from sfdtest import Sfd, check, run_job, wait_for

CONF = """[sfd]
window_grace_ms = 300
[gates]
warmup_steps = 0
window_steps = 10
"""


def main():
    sfd = Sfd(CONF)
    try:
        run_job(sfd, "pic", 2, 20)
        wait_for(lambda: sfd.jobs().get("pic", {}).get("windows") == 2, "2 windows of pic")
        before = sfd.sfctl("report", "pic", "--window", "1").stdout
        pic = os.path.join(sfd.dir, "before.svg")
        sfd.sfctl("plot", "pic", "-o", pic)          # while it runs: rows are there
        check(os.path.getsize(pic) > 0, "plot before the restart")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
        sfd.start()
        wait_for(lambda: sfd.jobs().get("pic", {}).get("windows") == 2, "pic restored")

        check(sfd.sfctl("report", "pic", "--window", "1").stdout == before,
              "the restored report differs")
        for cmd, out in (("plot", "after.svg"), ("export", "after.json")):
            path = os.path.join(sfd.dir, out)
            p = sfd.sfctl(cmd, "pic", "-o", path, check_rc=5)
            err = p.stderr.decode()
            check("sfctl %s: job 'pic': no rows to draw" % cmd in err and "restored from history"
                  in err and "malformed" not in err, "%s after a restart: %r" % (cmd, err))
            check(not os.path.exists(path) and p.stdout == b"", "%s wrote output" % cmd)
            left = [f for f in os.listdir(sfd.dir) if f.startswith(out)]
            check(left == [], "%s left temporary files: %s" % (cmd, left))

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
