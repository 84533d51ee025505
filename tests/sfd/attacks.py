"""Hostile local clients of sfd, run as a process of their own (usually under
`setpriv --reuid N --regid N` so they act as another user), shared by the
fairness tests and bench/hostile. Each scenario opens its connections, prints
one line `ready`, keeps its connections up (reopening those sfd closes, unless
--once) until stdin closes, then prints a JSON line of what it saw.

Adding a scenario: write a function (args, stop) -> dict and list it in
SCENARIOS; `stop()` turns true when the scenario should end.

    python3 attacks.py idle-ingest --socket INGEST --count 300
    python3 attacks.py idle-query --socket QUERY --count 8
    python3 attacks.py unread-answer --socket QUERY --count 4 --kind ranks --job J
    python3 attacks.py probe-status --socket QUERY --interval-ms 50
"""

import argparse
import json
import select
import socket
import sys
import threading
import time

KINDS = {"status": 0, "jobs": 1, "report": 2, "ranks": 3, "record": 4, "peers": 5}


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def query_request(kind, job=None):
    """A QueryRequest (proto/query.proto) encoded by hand: kind, job_id."""
    msg = b"\x08" + varint(KINDS[kind])
    if job:
        j = job.encode()
        msg += b"\x12" + varint(len(j)) + j
    return msg


def parse_response(buf):
    """(status, error, chunk, more) of one QueryResponse datagram."""
    fields, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("unexpected wire type %d" % wt)
        fields[num] = v
    status = fields.get(1, 0)
    if status >= 1 << 63:
        status -= 1 << 64
    return status, fields.get(2, b"").decode(), fields.get(3, b""), bool(fields.get(4, 0))


def read_varint(buf, i):
    n, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    return s


def ask(path, kind, job=None, timeout=30.0):
    """One request, read to the end: (status, error, answer bytes)."""
    s = connect(path)
    s.settimeout(timeout)
    try:
        s.send(query_request(kind, job))
        out = bytearray()
        while True:
            status, err, chunk, more = parse_response(s.recv(1 << 20))
            if status < 0:
                return status, err, bytes(out)
            out += chunk
            if not more:
                return 0, "", bytes(out)
    finally:
        s.close()


class Held:
    """Connections kept open; those sfd closed are noticed with poll."""

    def __init__(self, path, request=None):
        self.path, self.request = path, request
        self.socks = {}
        self.poll = select.poll()
        self.opened = self.closed_by_sfd = self.connect_failed = 0

    def top_up(self, count):
        while len(self.socks) < count:
            try:
                s = connect(self.path)
                if self.request is not None:
                    s.send(self.request)
            except OSError:
                self.connect_failed += 1
                return
            self.opened += 1
            self.socks[s.fileno()] = s
            self.poll.register(s, select.POLLHUP | select.POLLRDHUP | select.POLLERR)

    def reap(self, wait_ms=0):
        """Counts the connections sfd has closed; returns how many this time."""
        ready = self.poll.poll(wait_ms)
        for fd, _ in ready:
            self.poll.unregister(fd)
            self.socks.pop(fd).close()
            self.closed_by_sfd += 1
        return len(ready)

    def stats(self):
        return {"opened": self.opened, "closed_by_sfd": self.closed_by_sfd,
                "held": len(self.socks), "connect_failed": self.connect_failed}


def hold(held, args, stop):
    held.top_up(args.count)
    print("ready", flush=True)
    while not stop():
        held.reap(50)
        if not args.once:
            held.top_up(args.count)
    # sfd counts a close before its loop finishes it: take the closes still
    # in flight, until none comes for 200 ms, so "held" is what sfd kept.
    while held.socks and held.reap(200):
        pass
    return held.stats()


def idle_ingest(args, stop):
    """Ingest connections that never send a hello."""
    return hold(Held(args.socket), args, stop)


def idle_query(args, stop):
    """Query connections that never ask anything."""
    return hold(Held(args.socket), args, stop)


def unread_answer(args, stop):
    """Query connections that ask for a large answer and never read it."""
    return hold(Held(args.socket, query_request(args.kind, args.job)), args, stop)


def probe_status(args, stop):
    """STATUS requests one after another (interval apart): their latencies."""
    lat = []
    failed = 0
    print("ready", flush=True)
    while not stop():
        t0 = time.monotonic()
        try:
            status, _, _ = ask(args.socket, "status", timeout=10)
            failed += status < 0
        except OSError:
            failed += 1
        lat.append(time.monotonic() - t0)
        time.sleep(args.interval_ms / 1000)
    lat.sort()
    return {"n": len(lat), "failed": failed,
            "p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
            "max_ms": 1000 * lat[-1] if lat else None}


class Attack:
    """A scenario running as uid (and gid uid) in its own process."""

    def __init__(self, uid, scenario, socket_path, wait=True, **kw):
        import os
        import subprocess
        cmd = ["/usr/bin/python3", os.path.abspath(__file__), scenario, "--socket", socket_path]
        for k, v in kw.items():
            flag = "--" + k.replace("_", "-")
            cmd += [flag] if v is True else [flag, str(v)]
        if uid is not None:
            cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.scenario = scenario
        if wait:
            self.ready()

    def ready(self):
        """Waits for the scenario's connections to be open."""
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError("%s did not start: %r %s" % (self.scenario, line,
                                                             self.proc.stderr.read()))
        return self

    @property
    def pid(self):
        return self.proc.pid

    def end(self, timeout=30):
        """Stops the scenario; returns its JSON summary."""
        out, err = self.proc.communicate(input="", timeout=timeout)
        if self.proc.returncode != 0:
            raise RuntimeError("attack failed: " + err)
        return json.loads(out.strip().splitlines()[-1])


SCENARIOS = {"idle-ingest": idle_ingest, "idle-query": idle_query,
             "unread-answer": unread_answer, "probe-status": probe_status}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--socket", required=True)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--once", action="store_true", help="never reopen what sfd closed")
    ap.add_argument("--kind", choices=sorted(KINDS), default="ranks")
    ap.add_argument("--job")
    ap.add_argument("--interval-ms", type=float, default=50)
    args = ap.parse_args()
    done = threading.Event()

    def wait_stdin():
        sys.stdin.read()
        done.set()
    threading.Thread(target=wait_stdin, daemon=True).start()
    print(json.dumps(SCENARIOS[args.scenario](args, done.is_set)), flush=True)


if __name__ == "__main__":
    main()
