#!/usr/bin/python3
"""Is the hardening of sfd.service compatible with sfd? A real sfd runs a
real job, answers sfctl, writes the Prometheus export, reloads on SIGHUP and
stops on SIGTERM under strace; every system call it makes must pass the
unit's SystemCallFilter= lines, and every socket family it opens must be in
RestrictAddressFamilies=.

An instrumented (sanitizer) build runs its runtime's own code before main
and at exit, so there only the calls from sfd's first epoll_wait on count,
and leak checking (which uses ptrace) is off for this run. strace always
starts sfd itself, so no ptrace attach permission is needed.

usage: syscall_filter.py SRC SFD SFCTL RECORD_JOB
"""
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svc_helpers as h  # noqa: E402

JOB, WORLD, STEPS, WINDOW = 'sc-job', 2, 8, 4


def expand(group, seen=None):
    """System calls of a filter group, nested groups included."""
    seen = set() if seen is None else seen
    if group in seen:
        return set()
    seen.add(group)
    out = subprocess.run(['systemd-analyze', 'syscall-filter', group], capture_output=True,
                         text=True, timeout=60).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        item = line.strip()
        if not item or item.startswith('#'):
            continue
        calls |= expand(item, seen) if item.startswith('@') else {item}
    return calls


def unit_filter(unit):
    """(allowed system calls, allowed address families) of the unit."""
    allowed, families = None, set()
    for line in open(unit):
        m = re.match(r'^SystemCallFilter=(~?)(.*)$', line.strip())
        if m:
            names = set()
            for item in m.group(2).split():
                names |= expand(item) if item.startswith('@') else {item}
            if m.group(1):
                allowed = (allowed or set()) - names
            else:
                allowed = (allowed or set()) | names
        m = re.match(r'^RestrictAddressFamilies=(.*)$', line.strip())
        if m:
            families |= set(m.group(1).split())
    assert allowed, 'no SystemCallFilter= in the unit'
    assert families, 'no RestrictAddressFamilies= in the unit'
    return allowed, families


def sanitized(binary):
    out = subprocess.run(['ldd', binary], capture_output=True, text=True).stdout
    return 'libasan' in out or 'libubsan' in out


def main():
    src, sfd, sfctl, record = sys.argv[1:5]
    for tool in ('strace', 'systemd-analyze'):
        if shutil.which(tool) is None:
            h.skip(f'{tool} is not installed')
    for b in (sfd, sfctl, record):
        if not os.access(b, os.X_OK):
            h.skip(f'{b} was not built')
    allowed, families = unit_filter(os.path.join(src, 'systemd', 'sfd.service'))
    from_loop = sanitized(sfd)

    tmp = tempfile.mkdtemp(prefix='sfsc.')
    run, prom1, prom2 = (os.path.join(tmp, d) for d in ('run', 'prom1', 'prom2'))
    for d in (prom1, prom2):
        os.mkdir(d)
    conf = os.path.join(tmp, 'sfd.conf')

    def write_conf(prom):
        with open(conf, 'w') as f:
            f.write(h.shipped_config(src, {'prom_dir': prom, 'warmup_steps': '0',
                                           'window_steps': str(WINDOW)}))
    write_conf(prom1)
    trace = os.path.join(tmp, 'trace')
    env = dict(os.environ)
    env['ASAN_OPTIONS'] = (env.get('ASAN_OPTIONS', '') + ':detect_leaks=0').lstrip(':')
    sfd_cmd = [sfd, '--config', conf, '--runtime-dir', run, '--foreground',
               '--state-dir', os.path.join(tmp, 'state')]
    log = open(os.path.join(tmp, 'sfd.log'), 'wb')
    proc = subprocess.Popen(['strace', '-f', '-qq', '-o', trace] + as_service_user(tmp) + sfd_cmd,
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    query, ingest = os.path.join(run, 'query.sock'), os.path.join(run, 'ingest.sock')
    ok = False
    try:
        h.wait_for('sfd to listen', lambda: h.connectable(query), proc=proc)

        r = subprocess.run([record, ingest, JOB, str(WORLD), str(STEPS), '1'],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        for args in (['status'], ['jobs'], ['ranks', JOB]):
            rc, out, err = h.sfctl(sfctl, query, *args)
            assert rc == 0, f'sfctl {args}: {rc}\n{err}'
        want = f'stagefrontier_job_window_index{{job_id="{JOB}"}} {STEPS // WINDOW - 1}\n'

        def exported(d):
            p = os.path.join(d, 'stagefrontier.prom')
            return os.path.exists(p) and want in open(p).read()
        h.wait_for('the export', lambda: exported(prom1), proc=proc)
        # Reload: the export moves to the directory of the new config (sfd
        # rewrites it when the next window closes).
        write_conf(prom2)
        os.kill(sfd_pid(proc.pid), signal.SIGHUP)
        h.wait_for('the reload', lambda: b'reloaded' in open(log.name, 'rb').read(), proc=proc)
        r = subprocess.run([record, ingest, JOB + '-2', str(WORLD), str(WINDOW), '1'],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        h.wait_for('the export after SIGHUP', lambda: exported(prom2), proc=proc)
        rc, out, err = h.sfctl(sfctl, query, 'report', JOB, '--json')
        assert rc == 0, err

        os.kill(sfd_pid(proc.pid), signal.SIGTERM)
        # strace exits with sfd's status.
        assert proc.wait(timeout=60) == 0, f'sfd exited with {proc.returncode}'
        ok = True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        if not ok:
            with open(os.path.join(tmp, 'sfd.log'), 'rb') as f:
                sys.stderr.write(f.read().decode('utf-8', 'replace')[-6000:])
            shutil.rmtree(tmp, ignore_errors=True)

    used, fams = set(), set()
    counting = not from_loop
    with open(trace) as f:
        for line in f:
            m = re.match(r'^\d+\s+([a-z0-9_]+)\(', line)
            if m and m.group(1) == 'epoll_wait':
                counting = True
            if m and counting:
                used.add(m.group(1))
            m = re.match(r'^\d+\s+socket\((AF_[A-Z0-9]+)', line)
            if m:
                fams.add(m.group(1))
    shutil.rmtree(tmp, ignore_errors=True)
    # The sfd we traced did its job: sockets, ingest, queries, timers.
    assert {'epoll_wait', 'recvmsg'} <= used and used & {'rename', 'renameat', 'renameat2'}, used
    denied = sorted(used - allowed)
    bad_fams = sorted(fams - families)
    mode = 'from the event loop on (sanitizer build)' if from_loop else 'from exec'
    print(f'{len(used)} system calls traced {mode}: {" ".join(sorted(used))}')
    print(f'socket families: {" ".join(sorted(fams)) or "none"}')
    if denied or bad_fams:
        sys.exit(f'outside the unit\'s filter: calls {denied}, families {bad_fams}')


def as_service_user(tmp):
    """strace's options that run sfd as an unprivileged user, as the unit's
    User= does, when the test runs as root: some libraries act on root alone
    (SQLite gives the files it creates their directory's owner with fchown,
    which @privileged denies), and the unit never runs sfd as root."""
    if os.geteuid() != 0:
        return []
    user = pwd.getpwnam('nobody')
    for d, _, files in os.walk(tmp):
        os.chown(d, user.pw_uid, user.pw_gid)
        for name in files:
            os.chown(os.path.join(d, name), user.pw_uid, user.pw_gid)
    return ['-u', 'nobody']


def sfd_pid(strace_pid):
    """sfd is strace's only child."""
    with open(f'/proc/{strace_pid}/task/{strace_pid}/children') as f:
        kids = f.read().split()
    assert len(kids) == 1, kids
    return int(kids[0])


if __name__ == '__main__':
    main()
