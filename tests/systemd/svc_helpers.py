"""Helpers of the service tests: a config derived from the shipped sfd.conf,
a notify socket the test owns, and bounded waits on real conditions."""
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

SKIP = 77
TIMEOUT_S = 90.0


def skip(msg):
    print('SKIP: ' + msg)
    sys.exit(SKIP)


def wait_for(what, cond, timeout=TIMEOUT_S, proc=None):
    """Polls cond() until it returns a true value; fails after timeout, or
    at once when proc has exited."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f'{what}: process exited with {proc.returncode}')
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(0.02)


def shipped_config(src, overrides):
    """The shipped sfd.conf with every default of [sfd], [limits] and [gates]
    uncommented (so sfd must accept each key and value as shipped), then
    `overrides` {key: value} applied in place or appended to [sfd]."""
    out, section, seen = [], None, set()
    for line in open(os.path.join(src, 'systemd', 'sfd.conf')):
        s = re.match(r'^\[(\w+)\]', line)
        if s:
            section = s.group(1)
        m = re.match(r'^#([a-z_]+) = ?(.*)$', line.rstrip('\n'))
        if m and section in ('sfd', 'limits', 'gates'):
            key, value = m.group(1), m.group(2)
            if key in overrides:
                value = overrides[key]
                seen.add(key)
            if value != '':
                line = f'{key} = {value}\n'
        out.append(line)
    missing = [k for k in overrides if k not in seen]
    assert not missing, f'keys not in the shipped config: {missing}'
    return ''.join(out)


def end_daemon(proc, log, ok, tail=8000):
    """Kills proc if it still runs, closes its log file, and when the test
    failed (not ok) prints the end of the log."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.close()
    if not ok:
        with open(log.name, 'rb') as f:
            sys.stderr.write(f.read().decode('utf-8', 'replace')[-tail:])


def sanitizer_env():
    """Sanitizer settings the test runner gave us, for children that get a
    clean environment (systemd-socket-activate passes only -E variables)."""
    return {k: v for k, v in os.environ.items()
            if k.endswith('SAN_OPTIONS') or k == 'LD_LIBRARY_PATH'}


class Notify:
    """A NOTIFY_SOCKET the test owns; records (pid, message) pairs. A thread
    reads it all the time, as systemd does: sd_notify blocks when the
    receiver's queue is full, and a test that stopped reading would stall
    sfd's loop."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.bind(path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.settimeout(0.2)
        self.messages = []
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
            except socket.timeout:
                continue
            except OSError:
                return
            pid = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack('iII', payload[:12])[0]
            with self.lock:
                for line in data.decode('utf-8', 'replace').split('\n'):
                    if line:
                        self.messages.append((pid, line))

    def lines(self, prefix):
        with self.lock:
            return [(pid, m) for pid, m in self.messages if m.startswith(prefix)]

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def sfctl(binary, query, *args, env=None):
    p = subprocess.run([binary, '--socket', query] + list(args), capture_output=True,
                       text=True, timeout=60, env=env)
    return p.returncode, p.stdout, p.stderr


def connectable(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()
