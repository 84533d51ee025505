"""Two real daemons on one runtime directory: the second must refuse to start
(exit 1, "in use") and leave the first daemon's sockets alone; a socket left
behind by a daemon that died is still taken over."""

import os
import signal
import subprocess

from sfdtest import SFD, TIMEOUT, Sfd, check, fail


def second_daemon(first):
    try:
        return subprocess.run([SFD, "--config", first.conf, "--runtime-dir", first.run,
                               "--foreground"], capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        fail("the second sfd kept running on the first one's runtime directory")


def main():
    first = Sfd()
    try:
        ino = os.stat(first.ingest).st_ino, os.stat(first.query).st_ino
        p = second_daemon(first)
        err = p.stderr.decode()
        check(p.returncode == 1, "second sfd exit %d (want 1): %s" % (p.returncode, err))
        check("in use" in err and first.ingest in err, "second sfd says why: %r" % err)
        check("listening" not in err, "second sfd claims to listen: %r" % err)
        check((os.stat(first.ingest).st_ino, os.stat(first.query).st_ino) == ino,
              "the first daemon's sockets were replaced")
        check(first.answers(), "the first daemon no longer answers")
        first.sfctl("status")

        # A daemon killed outright leaves stale sockets: the next one takes them.
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=TIMEOUT)
        check(os.path.exists(first.ingest), "SIGKILL left no stale socket to test with")
        first.start()
        first.sfctl("status")
        check(first.stop() == 0, "restarted sfd did not exit cleanly")
        check(not os.path.exists(first.ingest) and not os.path.exists(first.query),
              "sockets left after a clean stop")
    finally:
        first.close()


if __name__ == "__main__":
    main()
