#!/usr/bin/python3
"""The Python capture backend's default directory, /tmp/stagefrontier-$UID/
captures (no XDG_RUNTIME_DIR, no SF_CAPTURE_DIR, as in batch jobs), against
squatting: a real sfd, a real one-rank trainer (capture_trainer.py) run as a
uid of its own through setpriv, and `sfctl capture` for two steps.

- clean:   nothing there yet: the trace lands in the directory, mode 0600.
- squat:   /tmp/stagefrontier-UID made by root and given to nobody: refused,
           the error names that directory.
- symlink: captures is a symbolic link into another directory: refused, and
           nothing is written where it points.
- file:    captures is a regular file: refused.
Each refusal fails the capture only: the trainer goes on training and ends
cleanly. Exit 77 without root, setpriv or torch.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
import sfdtest  # noqa: E402  (path set above)
from sfdtest import check, wait_for  # noqa: E402

SKIP = 77
UID = 64352          # a uid no account uses, so its /tmp directory is this test's
NOBODY = 65534
HERE = os.path.dirname(os.path.abspath(__file__))


def trainer(daemon, job):
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "SF_CAPTURE_DIR")}
    cmd = sfdtest.as_uid(str(UID), [sys.executable, os.path.join(HERE, "capture_trainer.py"),
                                    daemon.ingest, job])
    return subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd="/")


def run_capture(daemon, job):
    """Starts the trainer, captures two steps, stops it; (capture, counters)."""
    p = trainer(daemon, job)
    job = "%d/%s" % (UID, job)   # another user's job, as root names it
    try:
        wait_for(lambda: p.poll() is not None
                 or daemon.sfctl("captures", job, check_rc=None).returncode == 0, "job %s" % job)
        if p.poll() is not None:
            sfdtest.fail("trainer died: %s" % p.stderr.read().decode())
        cid = int(daemon.sfctl("capture", job, "--ranks", "0", "--steps", "2").stdout)
        k = wait_for(lambda: daemon.capture_settled(job, cid), "capture %d to end" % cid)
        out, err = p.communicate(b"stop\n", timeout=sfdtest.TIMEOUT)
        check(p.returncode == 0, "trainer exit %d: %s" % (p.returncode, err.decode()))
        return k, json.loads(out)
    finally:
        sfdtest.reap([p])


def expect_refused(daemon, job, words):
    k, st = run_capture(daemon, job)
    err = k["ranks"][0].get("error") or ""
    check(k["state"] == "failed" and words in err, "%s: capture %r" % (job, k))
    # Training carried on past the capture's steps and ended cleanly.
    check(st["captures_failed"] >= 1 and st["trained_steps"] > 2, "%s: counters %r" % (job, st))
    return err


def main():
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        print("SKIP: needs root and setpriv to run the trainer as uid %d" % UID)
        return SKIP
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode:
        print("SKIP: no torch for the capture backend")
        return SKIP
    parent = "/tmp/stagefrontier-%d" % UID
    captures = os.path.join(parent, "captures")
    elsewhere = os.path.join("/tmp", "sf-elsewhere-%d" % os.getpid())
    daemon = sfdtest.Sfd()
    shutil.rmtree(parent, ignore_errors=True)
    try:
        k, _ = run_capture(daemon, "clean")
        path = k["ranks"][0].get("path") or ""
        check(k["state"] == "done" and path.startswith(captures + "/"), "clean: %r" % k)
        st = os.stat(path)
        check(st.st_uid == UID and st.st_mode & 0o777 == 0o600, "clean: trace %o" % st.st_mode)
        shutil.rmtree(parent)

        os.mkdir(parent, 0o755)
        os.chown(parent, NOBODY, NOBODY)
        err = expect_refused(daemon, "squat", "%s is owned by uid %d" % (parent, NOBODY))
        check(not os.path.exists(captures), "squat: captures made in nobody's directory")
        shutil.rmtree(parent)

        os.mkdir(parent, 0o700)
        os.chown(parent, UID, UID)
        os.mkdir(elsewhere, 0o777)
        os.chmod(elsewhere, 0o777)
        os.symlink(elsewhere, captures)
        expect_refused(daemon, "symlink", "%s is a symbolic link" % captures)
        check(os.listdir(elsewhere) == [], "symlink: written through the link: %r"
              % os.listdir(elsewhere))
        os.unlink(captures)

        with open(captures, "w"):
            pass
        expect_refused(daemon, "file", "%s is not a directory" % captures)
        check(daemon.stop() == 0, "sfd exit status %s" % daemon.proc.returncode)
        print("ok: clean capture at %s; squat refused: %s" % (path, err))
        return 0
    finally:
        daemon.close()
        shutil.rmtree(parent, ignore_errors=True)
        shutil.rmtree(elsewhere, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
