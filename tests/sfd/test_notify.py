"""systemd notification: with NOTIFY_SOCKET at a socket the test owns, sfd
sends READY=1 once its sockets exist, STATUS= lines with its counters,
WATCHDOG=1 when WATCHDOG_USEC is set, and STOPPING=1 on SIGTERM."""

import os
import socket
import time

from sfdtest import Sfd, TIMEOUT, check, fail

CONF = """[sfd]
status_interval_ms = 100
"""


def main():
    sfd = Sfd(CONF, start=False)
    path = os.path.join(sfd.dir, "notify.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(path)
    ns.settimeout(TIMEOUT)
    sfd.env.update({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"})
    try:
        sfd.start(wait=False)
        seen = {"READY": 0, "STATUS": 0, "WATCHDOG": 0}
        deadline = time.monotonic() + TIMEOUT
        while not (seen["READY"] and seen["STATUS"] >= 2 and seen["WATCHDOG"] >= 2):
            if time.monotonic() > deadline:
                fail("notifications seen: %s" % seen)
            try:
                msg = ns.recv(4096).decode()
            except socket.timeout:
                fail("no notification; seen %s" % seen)
            for line in msg.splitlines():
                if line == "READY=1":
                    check(os.path.exists(sfd.ingest) and os.path.exists(sfd.query),
                          "READY=1 before the sockets exist")
                    check(sfd.answers(), "READY=1 but the query socket does not answer")
                    seen["READY"] += 1
                elif line.startswith("STATUS="):
                    check("records" in line and "rejected" in line, "status line: " + line)
                    seen["STATUS"] += 1
                elif line == "WATCHDOG=1":
                    check(seen["READY"] or True, "")
                    seen["WATCHDOG"] += 1
        check(seen["READY"] == 1, "READY=1 sent %d times" % seen["READY"])
        sfd.proc.send_signal(15)
        stopping = False
        while not stopping:
            try:
                stopping = "STOPPING=1" in ns.recv(4096).decode()
            except socket.timeout:
                fail("no STOPPING=1")
        rc = sfd.stop(None)
        check(rc == 0, "sfd did not exit cleanly: %s" % rc)
        check(not os.path.exists(sfd.ingest) and not os.path.exists(sfd.query),
              "sockets left behind after SIGTERM")
    finally:
        ns.close()
        sfd.close()
    print("ok")


main()
