#!/usr/bin/python3
"""A real prometheus-node-exporter, textfile collector only, on loopback,
scraping the file that sfd's export writes: our metrics must come through with
their values, without a textfile scrape error, and follow a rewrite.

usage: node_exporter_scrape.py NODE_EXPORTER PROM_SAMPLE
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
from loopback import free_port  # noqa: E402  (path set above)

TIMEOUT_S = 60.0

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels.items())): value} of an exposition text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise AssertionError(f'unparsable line: {line!r}')
        labels = frozenset(LABEL_RE.findall(m.group(3) or ''))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def value(samples, name, **labels):
    key = (name, frozenset(labels.items()))
    if key not in samples:
        have = sorted(k for k in samples if k[0] == name)
        raise AssertionError(f'{name}{labels} not scraped; have {have}')
    return samples[key]


def start_exporter(binary, textdir, logf):
    """Starts the exporter on a free loopback port; retries when the port
    was taken between our probe and its bind."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        port = free_port()
        proc = subprocess.Popen(
            [binary, '--collector.disable-defaults', '--collector.textfile',
             f'--collector.textfile.directory={textdir}',
             f'--web.listen-address=127.0.0.1:{port}'],
            stdout=logf, stderr=logf)
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break                       # bind failed: try another port
            try:
                with socket.create_connection(('127.0.0.1', port), timeout=1):
                    return proc, port
            except OSError:
                time.sleep(0.05)            # polling a real condition
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    raise AssertionError('node exporter did not come up')


def scrape(port):
    with urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=30) as r:
        assert r.status == 200
        return parse(r.read().decode('utf-8'))


def check_variant(samples, variant):
    assert value(samples, 'node_textfile_scrape_error') == 0
    win = value(samples, 'stagefrontier_job_window_index', job_id='train-a')
    assert win == (3 if variant == 1 else 4), win
    lead = 'data.next_wait' if variant == 1 else 'model.bwd'
    assert value(samples, 'stagefrontier_job_routing_info', job_id='train-a',
                 position='1', group=lead) == 1
    role = 'standalone' if variant == 1 else 'root'
    assert value(samples, 'stagefrontier_daemon_role_info', role=role) == 1
    assert value(samples, 'stagefrontier_daemon_term') == 40 + variant
    assert value(samples, 'stagefrontier_build_info', version='0.0.0-sample') == 1
    assert value(samples, 'stagefrontier_daemon_records_total') == 1000 * variant
    assert value(samples, 'stagefrontier_daemon_rejected_total',
                 reason='duplicate_rank') == variant
    assert value(samples, 'stagefrontier_daemon_windows_closed_total') == 3 + variant
    assert value(samples, 'stagefrontier_job_window_timestamp_seconds',
                 job_id='train-a') == 1700000000 + variant / 1000
    assert value(samples, 'stagefrontier_job_dropped_records_total',
                 job_id='train-a') == 5 * variant
    assert value(samples, 'stagefrontier_job_rejected_records_total',
                 job_id='idle-job') == 1
    shares = [v for (n, l), v in samples.items()
              if n == 'stagefrontier_job_stage_ratio' and ('job_id', 'train-a') in l]
    assert len(shares) == 5, shares
    assert abs(sum(shares) - 1.0) < 1e-9, sum(shares)
    # Only the latest file: nothing of the previous variant survives.
    other = 'root' if variant == 1 else 'standalone'
    assert ('stagefrontier_daemon_role_info', frozenset({('role', other)})) not in samples


def main():
    exporter, sample = sys.argv[1], sys.argv[2]
    if not exporter or not os.access(exporter, os.X_OK):
        print('SKIP: prometheus-node-exporter is not installed')
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix='sfnodeexp.')
    proc = None
    ok = False
    try:
        # As docs/OPERATIONS.md advises: one textfile directory per producer
        # under a common parent, and node_exporter reading them all through
        # a glob, so sfd's export never displaces another collector's file.
        parent = os.path.join(tmp, 'textfile.d')
        textdir = os.path.join(parent, 'stagefrontier')
        otherdir = os.path.join(parent, 'node-exporter')
        os.makedirs(textdir)
        os.makedirs(otherdir)
        with open(os.path.join(otherdir, 'apt.prom'), 'w') as f:
            f.write('# TYPE apt_upgrades_pending gauge\napt_upgrades_pending 4\n')
        logf = open(os.path.join(tmp, 'exporter.log'), 'wb')
        subprocess.run([sample, textdir, '1'], check=True)
        proc, port = start_exporter(exporter, os.path.join(parent, '*'), logf)
        samples = scrape(port)
        check_variant(samples, 1)
        assert value(samples, 'apt_upgrades_pending') == 4, 'the other collector was displaced'
        # The collector reads the directory on every scrape.
        subprocess.run([sample, textdir, '2'], check=True)
        check_variant(scrape(port), 2)
        assert sorted(os.listdir(textdir)) == ['stagefrontier.prom']
        ok = True
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        if not ok:
            try:
                with open(os.path.join(tmp, 'exporter.log'), 'rb') as f:
                    sys.stderr.write(f.read().decode('utf-8', 'replace'))
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    print('node exporter scraped the export')


if __name__ == '__main__':
    main()
