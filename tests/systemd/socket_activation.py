#!/usr/bin/python3
"""sfd started by systemd-socket-activate with named SOCK_SEQPACKET ingest and
query sockets, as sfd.socket and sfd-query.socket start it: a real two-rank
job records through the passed ingest socket, sfctl reads the report through
the passed query socket, sfd notifies READY/STATUS/WATCHDOG on a socket the
test owns, and the Prometheus export follows the closed windows.

Run as root, sfd gets what sfd.service gives it: another uid (User=), no
capabilities (CapabilityBoundingSet=), no_new_privs (NoNewPrivileges=) and
umask 077 (UMask=), through setpriv.

usage: socket_activation.py SRC SFD SFCTL RECORD_JOB [PROMTOOL]
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svc_helpers as h  # noqa: E402

JOB = 'sa-job-1'
WORLD, STEPS, WINDOW = 2, 8, 4
SLOW_STAGE = 2      # model.backward_cpu_wall, slow on the last rank


def main():
    src, sfd, sfctl, record = sys.argv[1:5]
    promtool = sys.argv[5] if len(sys.argv) > 5 else ''
    activate = shutil.which('systemd-socket-activate')
    if activate is None:
        h.skip('systemd-socket-activate is not installed')
    for b in (sfd, sfctl, record):
        if not os.access(b, os.X_OK):
            h.skip(f'{b} was not built')

    tmp = tempfile.mkdtemp(prefix='sfsa.')
    run, prom = os.path.join(tmp, 'run'), os.path.join(tmp, 'prom')
    state = os.path.join(tmp, 'state')
    os.mkdir(run)
    os.mkdir(prom)
    os.mkdir(state, 0o700)
    ingest, query = os.path.join(run, 'ingest.sock'), os.path.join(run, 'query.sock')
    conf = os.path.join(tmp, 'sfd.conf')
    with open(conf, 'w') as f:
        f.write(h.shipped_config(src, {
            'runtime_dir': run, 'prom_dir': prom, 'state_dir': state, 'status_interval_ms': '100',
            'warmup_steps': '0', 'window_steps': str(WINDOW), 'log_level': 'debug'}))
    notify = h.Notify(os.path.join(tmp, 'notify.sock'))
    log = open(os.path.join(tmp, 'sfd.log'), 'wb')
    cmd = [activate, '--seqpacket', '-l', ingest, '-l', query, '--fdname=ingest:query',
           '-E', f'NOTIFY_SOCKET={notify.path}', '-E', 'WATCHDOG_USEC=200000']
    for k, v in h.sanitizer_env().items():
        cmd += ['-E', f'{k}={v}']
    unprivileged = os.geteuid() == 0 and shutil.which('setpriv') is not None
    if unprivileged:
        nobody = 65534
        cmd += ['setpriv', f'--reuid={nobody}', f'--regid={nobody}', '--clear-groups',
                '--no-new-privs', '--inh-caps=-all', '--bounding-set=-all', '--']
        os.chmod(tmp, 0o755)
        os.chmod(conf, 0o644)
        os.chown(prom, nobody, nobody)
        os.chown(state, nobody, nobody)
        os.chmod(notify.path, 0o777)
    else:
        print('not root: sfd keeps the test\'s uid and capabilities')
    cmd += [sfd, '--config', conf, '--foreground']
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: os.umask(0o077))
    ok = False
    try:
        h.wait_for('the activation sockets',
                   lambda: os.path.exists(ingest) and os.path.exists(query), proc=proc)
        inode = (os.stat(ingest).st_ino, os.stat(query).st_ino)
        # Nothing has connected: sfd is not running yet, only the activator.
        assert os.path.basename(os.readlink(f'/proc/{proc.pid}/exe')) == \
            'systemd-socket-activate'
        assert notify.lines('READY=1') == []

        # The first client starts sfd; its records wait in the socket meanwhile.
        r = subprocess.run([record, ingest, JOB, str(WORLD), str(STEPS), str(SLOW_STAGE)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f'client job failed:\n{r.stdout}{r.stderr}'

        ready = h.wait_for('READY=1', lambda: notify.lines('READY=1'), proc=proc)
        assert ready[0][0] == proc.pid, ready      # sent by sfd, exec'd in place
        assert os.path.realpath(f'/proc/{proc.pid}/exe') == os.path.realpath(sfd)
        if unprivileged:
            st = open(f'/proc/{proc.pid}/status').read()
            assert re.search(r'^Uid:\s+65534\s', st, re.M), st
            assert re.search(r'^CapBnd:\s+0+$', st, re.M), st
            assert re.search(r'^NoNewPrivs:\s+1$', st, re.M), st
        status = h.wait_for('STATUS=', lambda: notify.lines('STATUS='), proc=proc)
        assert 'jobs' in status[-1][1], status

        prom_file = os.path.join(prom, 'stagefrontier.prom')
        want = f'stagefrontier_job_window_index{{job_id="{JOB}"}} {STEPS // WINDOW - 1}\n'
        h.wait_for('the export of the last window',
                   lambda: os.path.exists(prom_file) and want in open(prom_file).read(),
                   proc=proc)

        # Readable by node_exporter's user despite UMask=0077.
        assert stat.S_IMODE(os.stat(prom_file).st_mode) == 0o644

        rc, out, err = h.sfctl(sfctl, query, 'report', JOB, '--json')
        assert rc == 0, f'sfctl report: rc {rc}\n{err}'
        windows = json.loads(out)
        assert isinstance(windows, list) and windows, out
        w = windows[-1]
        assert w['window']['index'] == STEPS // WINDOW - 1, w['window']
        assert w['window']['ranks'] == WORLD, w['window']
        # The injected stage routes within the top two (scheduling noise on a
        # loaded machine may reorder the rest, never hide 40 ms per step).
        assert 'model.backward_cpu_wall' in w['routing_set'][:2], w['routing_set']

        rc, out, err = h.sfctl(sfctl, query, 'jobs')
        assert rc == 0 and JOB in out, f'sfctl jobs: rc {rc}\n{out}{err}'

        # The history store works as the service user, private despite its reports.
        def history():
            rc, out, err = h.sfctl(sfctl, query, 'status', '--json')
            return json.loads(out)['history'] if rc == 0 else {}
        h.wait_for('the reports in the history store',
                   lambda: history().get('written', 0) >= STEPS // WINDOW, proc=proc)
        store = os.path.join(state, 'history.sqlite')
        assert stat.S_IMODE(os.stat(store).st_mode) == 0o600, oct(os.stat(store).st_mode)

        # sfd served the passed sockets: it never bound new ones.
        assert (os.stat(ingest).st_ino, os.stat(query).st_ino) == inode

        h.wait_for('3 WATCHDOG=1', lambda: len(notify.lines('WATCHDOG=1')) >= 3, proc=proc)
        if promtool:
            with open(prom_file, 'rb') as f:
                p = subprocess.run([promtool, 'check', 'metrics'], stdin=f,
                                   capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stdout + p.stderr

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, f'sfd exited with {proc.returncode}'
        assert notify.lines('STOPPING=1'), notify.messages
        ok = True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        notify.close()
        if not ok:
            with open(os.path.join(tmp, 'sfd.log'), 'rb') as f:
                sys.stderr.write(f.read().decode('utf-8', 'replace')[-8000:])
            sys.stderr.write(f'export directory: {os.listdir(prom)}\n')
            sys.stderr.write(f'notifications: {notify.messages[:8]}\n')
        shutil.rmtree(tmp, ignore_errors=True)
    print('socket activation: client recorded, sfctl reported, notify and export OK')


if __name__ == '__main__':
    main()
