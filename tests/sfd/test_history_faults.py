"""An unusable or full state directory never takes sfd down: with state_dir
a regular file, or a read-only file system, history is off (counted once,
logged once) and reports are still answered from memory; on a full file
system (a tiny tmpfs) every failed write is counted, logged once, and the
daemon keeps answering and stops cleanly. Corrupt or foreign rows in the
store are skipped at startup and counted, and the rest is restored. The
tmpfs cases need mount(2) rights and are reported as skipped without them."""

import os
import sqlite3

from sfdtest import Sfd, check, mount_tmpfs, run_job, stop_and_unmount, wait_for

CONF = """[sfd]
window_grace_ms = 300
[gates]
warmup_steps = 0
window_steps = 10
"""


def history(sfd):
    return sfd.status()["history"]


def run_and_report(sfd, job, steps):
    run_job(sfd, job, 2, steps)
    wait_for(lambda: sfd.jobs().get(job, {}).get("latest_window") == steps // 10 - 1,
             "the windows of " + job)
    text = sfd.sfctl("report", job).stdout.decode()
    check(text.startswith("window %d" % (steps // 10 - 1)), "report answered: %r" % text[:60])


def history_off_case(prepare, what):
    sfd = Sfd(CONF, start=False)
    try:
        prepare(sfd.state)
        sfd.start()
        h = history(sfd)
        check(not h["enabled"] and h["open_errors"] == 1, "%s: history off, counted: %s"
              % (what, h))
        run_and_report(sfd, "off", 30)
        h = history(sfd)
        check(h["written"] == 0 and h["write_errors"] == 0, "%s: nothing written: %s" % (what, h))
        check(sfd.logtext().count("history off") == 1, "%s: logged once" % what)
        check(sfd.stop() == 0, "%s: sfd did not exit cleanly" % what)
    finally:
        stop_and_unmount(sfd)


def full_disk_case():
    sfd = Sfd(CONF, start=False)
    try:
        if not mount_tmpfs(sfd.state, "size=192k,mode=0700")[0]:
            print("full tmpfs: skipped (no mount rights)")
            return
        sfd.start()
        check(history(sfd)["enabled"], "history on before the file system fills")
        run_job(sfd, "full", 2, 1000)
        wait_for(lambda: history(sfd)["write_errors"] > 0, "a counted write error")
        wait_for(lambda: sfd.jobs()["full"]["latest_window"] == 99, "every window closed")
        h = history(sfd)
        check(h["written"] > 0, "some reports fit before the disk filled: %s" % h)
        # Every report is accounted for: written, failed, dropped by a full queue.
        wait_for(lambda: (lambda x: x["written"] + x["write_errors"] + x["queue_dropped"]
                          == 100)(history(sfd)), "all 100 reports accounted for")
        print("full tmpfs:", history(sfd))
        check(sfd.logtext().count("history: write failed") == 1, "the failure logged once")
        text = sfd.sfctl("report", "full").stdout.decode()
        check(text.startswith("window 99"), "the latest window from memory: %r" % text[:60])
        check(sfd.stop() == 0, "sfd did not exit cleanly on a full disk")
    finally:
        stop_and_unmount(sfd)


def not_a_dir(path):
    with open(path, "w") as f:
        f.write("not a directory\n")


def read_only(path):
    if not mount_tmpfs(path, "ro,size=64k")[0]:
        raise PermissionError


def corrupt_rows_case():
    sfd = Sfd(CONF)
    try:
        run_and_report(sfd, "c", 40)
        wait_for(lambda: history(sfd)["written"] == 4, "four reports written")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
        db = sqlite3.connect(os.path.join(sfd.state, "history.sqlite"))
        db.execute("UPDATE records SET body = x'00' WHERE kind = 1 AND job = 'c' AND window = 1")
        db.execute("INSERT INTO records (kind, uid, job, segment, window, body) SELECT kind,"
                   " uid, 'not a/valid id', segment, window, body FROM records"
                   " WHERE kind = 1 AND job = 'c' AND window = 2")
        # The rows of the last full window (slot 1) cut short by one byte.
        db.execute("UPDATE records SET body = substr(body, 1, length(body) - 1)"
                   " WHERE kind = 2 AND job = 'c' AND window = 1")
        db.commit()
        db.close()
        sfd.start()
        h = history(sfd)
        check(h["restored"] == 3 and h["restore_errors"] == 3 and h["rows_restored"] == 0,
              "corrupt records counted: %s" % h)
        check(sorted(sfd.jobs()) == ["c"], "only the valid job: %s" % sorted(sfd.jobs()))
        sfd.sfctl("report", "c", "--window", "1", check_rc=5)
        for w in (0, 2, 3):
            sfd.sfctl("report", "c", "--window", str(w))
        p = sfd.sfctl("plot", "c", "-o", os.path.join(sfd.dir, "c.svg"), check_rc=5)
        check(b"no rows to draw" in p.stderr, "plot without its rows: %r" % p.stderr)
        check(sfd.stop() == 0, "sfd did not exit cleanly after a corrupt store")
    finally:
        stop_and_unmount(sfd)


def main():
    history_off_case(not_a_dir, "state_dir is a file")
    try:
        history_off_case(read_only, "read-only state_dir")
    except PermissionError:
        print("read-only tmpfs: skipped (no mount rights)")
    full_disk_case()
    corrupt_rows_case()
    print("ok")


main()
