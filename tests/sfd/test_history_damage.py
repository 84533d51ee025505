"""A damaged history store never ends durability. A store whose pages were
written over after reports were committed, and a store that is garbage from
byte 0, both fail SQLite's quick_check at start: the file is renamed aside
as history.sqlite.damaged-<UTC time> in the state directory (its bytes kept
for the operator), logged once with that name, counted, and a fresh store is
started, so history is on in this process and restores on the next start. A
history.sqlite that is a symbolic link is refused by name and counted, and
the file it points to is left untouched."""

import glob
import os
import shutil
import subprocess

from sfdtest import Sfd, check, run_job, wait_for

CONF = """[sfd]
window_grace_ms = 300
[gates]
warmup_steps = 0
window_steps = 10
"""
PAGE = 4096


def history(sfd):
    return sfd.status()["history"]


def store(sfd):
    return os.path.join(sfd.state, "history.sqlite")


def run_windows(sfd, job, windows):
    run_job(sfd, job, 2, windows * 10)
    wait_for(lambda: sfd.jobs().get(job, {}).get("latest_window") == windows - 1,
             "the windows of " + job)


def written(sfd, n):
    wait_for(lambda: history(sfd)["written"] == n, "%d reports written" % n)


def set_aside_checks(sfd, what, original, prom=False):
    """sfd started on a damaged store: it is kept aside, history is on."""
    h = history(sfd)
    check(h["enabled"] and h["damaged"] == 1 and h["open_errors"] == 1,
          "%s: set aside, counted, history on: %s" % (what, h))
    kept = glob.glob(store(sfd) + ".damaged-*")
    check(len(kept) == 1, "%s: one damaged file kept: %s" % (what, os.listdir(sfd.state)))
    name = os.path.basename(kept[0])
    check(name[len("history.sqlite.damaged-"):].endswith("Z"), "a UTC time in %s" % name)
    with open(kept[0], "rb") as f:
        check(f.read() == original, "%s: the damaged bytes are kept as they were" % what)
    text = sfd.sfctl("status").stdout.decode()
    check("  history      on," in text and "    damaged                1" in text
          and "    open_errors            1" in text, "%s: sfctl status shows it: %s" % (what, text))
    log = sfd.logtext()
    check(log.count("is damaged") == 1 and name in log, "%s: logged once with %s" % (what, name))
    # History works again in this process ...
    run_windows(sfd, "after", 3)
    written(sfd, h["written"] + 3)
    check(history(sfd)["write_errors"] == 0, "%s: no write error after" % what)
    if prom:
        prom_case(sfd)
    check(sfd.stop() == 0, "%s: sfd did not exit cleanly" % what)
    # ... and on the next start: the fresh store restores, nothing is damaged.
    sfd.start()
    h = history(sfd)
    check(h["enabled"] and h["damaged"] == 0 and h["restored"] == 3 and h["open_errors"] == 0,
          "%s: the fresh store restores: %s" % (what, h))
    sfd.sfctl("report", "after", "--window", "2")
    check(sfd.stop() == 0, "%s: sfd did not exit cleanly after restoring" % what)


def damaged_pages_case():
    sfd = Sfd(CONF)
    try:
        run_windows(sfd, "old", 6)
        written(sfd, 6)
        check(sfd.stop() == 0, "sfd did not exit cleanly")
        path = store(sfd)
        size = os.path.getsize(path)
        check(size >= 3 * PAGE, "a store of several pages: %d bytes" % size)
        # Every page after the first (which keeps the header and the schema)
        # is written over with the same bytes: the check fails every time.
        with open(path, "r+b") as f:
            f.seek(PAGE)
            f.write(b"\xa5" * (size - PAGE))
        with open(path, "rb") as f:
            original = f.read()
        sfd.start()
        set_aside_checks(sfd, "damaged pages", original)
    finally:
        sfd.close()


def prom_case(sfd):
    """The counters reach Prometheus too."""
    path = os.path.join(sfd.dir, "prom", "stagefrontier.prom")

    def lines():
        try:
            with open(path) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []
    want = ['stagefrontier_history_errors_total{kind="damaged"} 1',
            'stagefrontier_history_errors_total{kind="open"} 1',
            "stagefrontier_history_enabled 1"]
    wait_for(lambda: all(w in lines() for w in want), "the history counters exported")
    check('stagefrontier_history_errors_total{kind="write"} 0' in lines(),
          "no write error exported: %s" % [x for x in lines() if "history" in x])
    if shutil.which("promtool"):
        with open(path, "rb") as f:
            p = subprocess.run(["promtool", "check", "metrics"], stdin=f, capture_output=True,
                               timeout=60)
        check(p.returncode == 0, "promtool accepts the export: %s" % (p.stdout + p.stderr))


def garbage_case():
    sfd = Sfd(CONF, start=False)
    try:
        os.makedirs(sfd.state, mode=0o700)
        os.makedirs(os.path.join(sfd.dir, "prom"), mode=0o755)
        with open(sfd.conf, "w") as f:
            f.write(CONF.replace("[sfd]\n", "[sfd]\nprom_dir = %s/prom\n" % sfd.dir))
        original = b"not a database " * 4096
        with open(store(sfd), "wb") as f:
            f.write(original)
        os.chmod(store(sfd), 0o600)
        sfd.start()
        set_aside_checks(sfd, "garbage", original, prom=True)
    finally:
        sfd.close()


def symlink_case():
    sfd = Sfd(CONF, start=False)
    try:
        os.makedirs(sfd.state, mode=0o700)
        elsewhere = os.path.join(sfd.dir, "elsewhere.sqlite")
        open(elsewhere, "wb").close()
        os.symlink(elsewhere, store(sfd))
        sfd.start()
        h = history(sfd)
        check(not h["enabled"] and h["refused"] == 1 and h["open_errors"] == 1,
              "symlink: refused, counted, history off: %s" % h)
        text = sfd.sfctl("status").stdout.decode()
        check("  history      off," in text and "    refused                1" in text,
              "symlink: sfctl status shows it: %s" % text)
        log = sfd.logtext()
        check(log.count("history off") == 1 and "history.sqlite: is a symbolic link, refused" in log,
              "symlink: refused by name, once: %s" % log[-400:])
        run_windows(sfd, "mem", 2)
        sfd.sfctl("report", "mem", "--window", "1")
        check(sfd.stop() == 0, "symlink: sfd did not exit cleanly")
        check(os.path.getsize(elsewhere) == 0 and not os.path.exists(elsewhere + "-wal")
              and not os.path.exists(elsewhere + ".reserve"),
              "symlink: its target untouched: %s" % os.listdir(sfd.dir))
        check(os.path.islink(store(sfd)), "symlink: the link itself left as it was")
    finally:
        sfd.close()


def main():
    damaged_pages_case()
    garbage_case()
    symlink_case()
    print("ok")


main()
