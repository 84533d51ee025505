"""Loopback ports for tests that start real processes on real sockets.
Reads no environment at import (unlike sfdtest.py, which needs SFD), so any
test script can use it: put tests/sfd on sys.path and import it."""

import socket


def free_port():
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
