#!/usr/bin/python3
"""sfd's directories walked from "/" at start (daemon/sfd/safe_path.c):

- a state_dir that is a symbolic link into a world-writable directory: sfd
  refuses to start, and its log names the link;
- a state_dir inside a world-writable (not sticky) directory: refused, the
  log names that directory; nothing is created in it;
- a runtime_dir owned by another uid (nobody; root only): refused;
- a prom_dir that is a symbolic link: refused at start; on SIGHUP a link
  given as the new prom_dir is refused and the running one kept.
A clean start beside them makes its state directory mode 0700.
"""
import os
import shutil
import signal
import sys
import tempfile

from sfdtest import Sfd, TIMEOUT, check, wait_for

NOBODY = 65534


def refused(args, words, conf=""):
    d = Sfd(conf=conf, start=False, extra_args=args)
    try:
        d.start(wait=False)
        rc = d.proc.wait(timeout=TIMEOUT)
        log = d.logtext()
        check(rc != 0, "sfd started with %s: %s" % (args, log))
        check(words in log, "sfd log lacks %r: %s" % (words, log))
        return log.strip().splitlines()[-1]
    finally:
        d.close()


def main():
    scratch = tempfile.mkdtemp(prefix="sf-dirs-")
    os.chmod(scratch, 0o755)
    try:
        open_dir = os.path.join(scratch, "open")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)              # anyone may replace what is in it
        link = os.path.join(scratch, "state-link")
        os.symlink(open_dir, link)
        line = refused(["--state-dir", link], "state_dir %s refused: %s is a symbolic link"
                       % (link, link))
        check(os.listdir(open_dir) == [], "written through the link: %r" % os.listdir(open_dir))

        inside = os.path.join(open_dir, "state")
        refused(["--state-dir", inside], "%s is writable by group or others" % open_dir)
        check(not os.path.exists(inside), "state dir made inside a world-writable directory")

        if os.geteuid() == 0:
            theirs = os.path.join(scratch, "theirs")
            os.mkdir(theirs, 0o755)
            os.chown(theirs, NOBODY, NOBODY)
            refused(["--runtime-dir", os.path.join(theirs, "run")],
                    "%s is owned by uid %d" % (theirs, NOBODY))

        prom_link = os.path.join(scratch, "prom-link")
        os.symlink(open_dir, prom_link)
        refused([], "prom_dir %s refused" % prom_link, conf="[sfd]\nprom_dir = %s\n" % prom_link)

        prom = os.path.join(scratch, "prom")
        os.mkdir(prom, 0o755)
        d = Sfd(conf="[sfd]\nprom_dir = %s\n" % prom)
        try:
            st = os.stat(d.state)
            check(st.st_mode & 0o777 == 0o700, "state dir mode %o" % (st.st_mode & 0o777))
            wait_for(lambda: os.path.exists(os.path.join(prom, "stagefrontier.prom")),
                     "the Prometheus file")
            with open(d.conf, "w") as f:
                f.write("[sfd]\nprom_dir = %s\n" % prom_link)
            d.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "reload: keeping prom_dir %s" % prom in d.logtext(),
                     "the reload to refuse the link")
            check(os.listdir(open_dir) == [], "prom file written through the link")
            check(d.stop() == 0, "sfd exit status %s" % d.proc.returncode)
        finally:
            d.close()
        print("ok: %s" % line)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
