"""History on a full disk, made deterministic: the state directory is a small
tmpfs that the test fills with a file until write(2) answers ENOSPC, and only
then acts.

- Writing: sfd gives back its spare file, evicts the oldest reports, retries
  once, and the newest job's reports are stored; every report is accounted
  for (written, failed, dropped).
- Restarting on the full disk: the store cannot be opened for writing (no
  room for its WAL index), so it is read read-only and the reports come back;
  writes are retried with each record, counted while the disk stays full, and
  succeed again once it has room.

The tmpfs needs mount(2) as root. A user namespace (unshare -Urm) would
allow the mount but not the run: in it the real root's directories ("/",
"/tmp") show as the overflow uid, and sfd's ownership walk rightly refuses
them. Without the right the test exits 77, which CTest reports as skipped."""

import errno
import os
import sys

from sfdtest import Sfd, check, mount_tmpfs, run_job, stop_and_unmount, wait_for

SKIP = 77

CONF = """[sfd]
window_grace_ms = 300
max_history_mb = 1
[gates]
warmup_steps = 0
window_steps = 10
"""
TMPFS = "size=3m,mode=0700"


def history(sfd):
    return sfd.status()["history"]


def fill(path):
    """Writes until the file system answers ENOSPC, smaller writes last so
    that not a block is left. Returns the bytes written."""
    total = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (1 << 16, 4096, 512, 1):
            buf = b"\0" * chunk
            while True:
                try:
                    total += os.write(fd, buf)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    st = os.statvfs(os.path.dirname(path))
    check(st.f_bavail == 0, "the disk is full: %d blocks free" % st.f_bavail)
    return total


def run_windows(sfd, job, windows):
    run_job(sfd, job, 2, windows * 10)
    wait_for(lambda: sfd.jobs().get(job, {}).get("latest_window") == windows - 1,
             "the windows of " + job)


def accounted(sfd, n):
    def done():
        h = history(sfd)
        return h["written"] + h["write_errors"] + h["queue_dropped"] == n
    wait_for(done, "%d reports accounted for" % n)
    return history(sfd)


def write_case(sfd):
    sfd.start()
    # STATUS is answered once the loop runs, after the store was opened.
    check(history(sfd)["enabled"], "history on before the disk fills")
    check(os.path.exists(os.path.join(sfd.state, "history.sqlite.reserve")),
          "the spare file is made with the store")
    run_windows(sfd, "old", 20)
    wait_for(lambda: history(sfd)["written"] == 20, "the old job's reports written")
    fill(os.path.join(sfd.state, "filler"))
    run_windows(sfd, "new", 10)
    h = accounted(sfd, 30)
    print("history full, writing:", h)
    check(h["full_retries"] >= 1, "a write met the full disk and was retried: %s" % h)
    check(h["evicted"] >= 1, "the oldest reports were evicted for room: %s" % h)
    check(h["written"] == 30 and h["write_errors"] == 0,
          "every report of the new job stored on the full disk: %s" % h)
    check(sfd.stop() == 0, "sfd did not exit cleanly on a full disk")


def restart_case(sfd):
    # SQLite rebuilds the -shm from the file; without it no read-write open
    # has room for one. The disk is filled again to the last byte.
    shm = os.path.join(sfd.state, "history.sqlite-shm")
    if os.path.exists(shm):
        os.unlink(shm)
    fill(os.path.join(sfd.state, "filler"))
    sfd.start()
    h = history(sfd)
    print("history full, restarted:", h)
    check(h["enabled"] and h["readonly_restores"] == 1, "restored read-only: %s" % h)
    check(h["restored"] >= 1 and h["read_errors"] == 0 and h["damaged"] == 0,
          "reports restored from the full disk: %s" % h)
    check("new" in sfd.jobs(), "the newest job is back: %s" % sorted(sfd.jobs()))
    sfd.sfctl("report", "new", "--window", "9")
    # Still full: writing is retried with each record, and counted.
    run_windows(sfd, "full", 2)
    h = accounted(sfd, 2)
    check(h["written"] == 0 and h["write_errors"] == 2 and h["reopen_errors"] >= 1,
          "writes on the full disk counted: %s" % h)
    # Room again: the next records open the store for writing and are stored.
    os.unlink(os.path.join(sfd.state, "filler"))
    run_windows(sfd, "room", 3)
    h = accounted(sfd, 5)
    check(h["written"] == 3, "written once the disk has room: %s" % h)
    check(sfd.logtext().count("open for writing again") == 1, "the reopen logged once")
    check(sfd.stop() == 0, "sfd did not exit cleanly")
    sfd.start()
    h = history(sfd)
    check(h["readonly_restores"] == 0 and h["restored"] >= 3, "a normal start after: %s" % h)
    sfd.sfctl("report", "room", "--window", "2")
    check(sfd.stop() == 0, "sfd did not exit cleanly")


def main():
    sfd = Sfd(CONF, start=False)
    try:
        ok, why = mount_tmpfs(sfd.state, TMPFS)
        if not ok:
            stop_and_unmount(sfd)
            print("history full: SKIPPED, cannot mount a tmpfs (needs root): %s" % why)
            sys.exit(SKIP)
        write_case(sfd)
        restart_case(sfd)
    finally:
        stop_and_unmount(sfd)
    print("ok")


main()
