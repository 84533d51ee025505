#!/usr/bin/python3
"""The .deb built by CPack from this build tree: its contents, control data
and maintainer scripts, then a working sfd from the extracted tree. A real
two-rank job records through the extracted libsfclient, and the extracted
sfctl queries the extracted sfd.

usage: deb_package.py SRC BUILD RECORD_JOB
"""
import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svc_helpers as h  # noqa: E402

EXPECTED = [
    'etc/stagefrontier/sfd.conf',
    'usr/sbin/sfd',
    'usr/bin/sfctl',
    'usr/lib/systemd/system/sfd.service',
    'usr/lib/systemd/system/sfd.socket',
    'usr/lib/systemd/system/sfd-query.socket',
    'usr/lib/sysusers.d/stagefrontier.conf',
    'usr/lib/tmpfiles.d/stagefrontier.conf',
    'usr/share/man/man8/sfd.8.gz',
    'usr/share/man/man1/sfctl.1.gz',
]
JOB, WORLD, STEPS, WINDOW = 'deb-job', 2, 8, 4
PY_JOB = 'deb-py'

# One rank through the packaged Python binding, as a trainer would use it.
PY_RANK = """
import sys, time, stagefrontier
rec = stagefrontier.Recorder(job_id=sys.argv[2], socket=sys.argv[1], rank=0,
                             world_size=1, local_rank=0)
for t in range(4):
    with rec.step():
        with rec.stage('data.next_wait'):
            time.sleep(0.001)
        with rec.stage('model.fwd_loss_cpu_wall'):
            pass
deadline = time.monotonic() + 60
while rec.stats()['records_sent'] < 4 and time.monotonic() < deadline:
    rec.flush()
    time.sleep(0.01)
sent = rec.stats()['records_sent']
rec.close()
sys.exit(0 if sent == 4 else 1)
"""


def run(cmd, **kw):
    kw.setdefault('timeout', 600)
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise AssertionError(f'{cmd} failed ({p.returncode}):\n{p.stdout}{p.stderr}')
    return p.stdout


def build_deb(build, out):
    run(['cpack', '-G', 'DEB', '-B', out], cwd=build)
    debs = glob.glob(os.path.join(out, '*.deb'))
    assert len(debs) == 1, debs
    return debs[0]


def check_contents(deb):
    listing = run(['dpkg-deb', '-c', deb])
    paths = [line.split()[5].lstrip('./') for line in listing.splitlines()]
    missing = [p for p in EXPECTED if p not in paths]
    assert not missing, f'missing from the package: {missing}\n{listing}'
    assert any(p.startswith('usr/lib') and '/libsfclient.so.0' in '/' + p for p in paths), listing
    stray = [p for p in paths if p and not (p.startswith('usr/') or p.startswith('etc/'))]
    assert not stray and not any(p.startswith('usr/local') for p in paths), stray

    fields = {k: run(['dpkg-deb', '-f', deb, k]).strip() for k in ('Package', 'Depends')}
    assert fields['Package'] == 'stagefrontier', fields
    # Dependencies come from the linked shared libraries (dpkg-shlibdeps).
    for lib in ('libuv1', 'libsystemd0', 'libc6'):
        assert lib in fields['Depends'], fields['Depends']


def check_control(deb, tmp):
    ctl = os.path.join(tmp, 'control')
    run(['dpkg-deb', '-e', deb, ctl])
    with open(os.path.join(ctl, 'conffiles')) as f:
        assert f.read().split() == ['/etc/stagefrontier/sfd.conf']
    for script in ('postinst', 'prerm', 'postrm'):
        mode = os.stat(os.path.join(ctl, script)).st_mode
        assert mode & stat.S_IXUSR, f'{script} is not executable'
    return ctl


def check_postinst(ctl, tmp):
    """postinst under stub tools: it creates the user and the directories
    and enables both sockets, and touches nothing else of the host."""
    stubs = os.path.join(tmp, 'stubs')
    os.mkdir(stubs)
    log = os.path.join(tmp, 'calls.log')
    for tool in ('systemd-sysusers', 'systemd-tmpfiles', 'deb-systemd-helper', 'systemctl'):
        with open(os.path.join(stubs, tool), 'w') as f:
            f.write(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\nexit 0\n')
        os.chmod(os.path.join(stubs, tool), 0o755)
    env = dict(os.environ, PATH=stubs + ':/usr/bin:/bin')
    run(['sh', os.path.join(ctl, 'postinst'), 'configure', ''], env=env)
    calls = open(log).read().splitlines()
    want = ['systemd-sysusers /usr/lib/sysusers.d/stagefrontier.conf',
            'systemd-tmpfiles --create /usr/lib/tmpfiles.d/stagefrontier.conf',
            'deb-systemd-helper enable sfd.socket sfd-query.socket']
    for w in want:
        assert w in calls, f'postinst did not run "{w}": {calls}'
    if not os.path.isdir('/run/systemd/system'):
        assert not any(c.startswith('systemctl') for c in calls), calls


def check_units(root, build):
    for unit in ('sfd.service', 'sfd.socket', 'sfd-query.socket'):
        text = open(os.path.join(root, 'usr/lib/systemd/system', unit)).read()
        assert os.path.realpath(build) not in text, f'{unit} names the build tree'
    svc = open(os.path.join(root, 'usr/lib/systemd/system/sfd.service')).read()
    assert 'ExecStart=/usr/sbin/sfd --config /etc/stagefrontier/sfd.conf' in svc, svc


def config_from(path, overrides):
    """The extracted sfd.conf with the given keys set."""
    out = []
    for line in open(path):
        key = line[1:].split(' = ')[0] if line.startswith('#') and ' = ' in line else None
        if key in overrides:
            line = f'{key} = {overrides.pop(key)}\n'
        out.append(line)
    assert not overrides, overrides
    return ''.join(out)


def run_python_rank(root, ingest, env):
    """The packaged module, found where Debian's python3 looks (the install
    directory inside the extracted tree)."""
    mods = glob.glob(os.path.join(root, 'usr/lib/python3*/**/stagefrontier/_stagefrontier*.so'),
                     recursive=True)
    assert len(mods) == 1, mods
    env = dict(env, PYTHONPATH=os.path.dirname(os.path.dirname(mods[0])))
    # A sanitizer build of the module needs its runtime loaded first.
    for line in run(['ldd', mods[0]]).splitlines():
        if 'libasan' in line and '=>' in line:
            env['LD_PRELOAD'] = line.split('=>')[1].split()[0]
            env['ASAN_OPTIONS'] = (env.get('ASAN_OPTIONS', '') + ':detect_leaks=0').lstrip(':')
    run(['/usr/bin/python3', '-c', PY_RANK, ingest, PY_JOB], env=env)


def run_extracted(root, tmp, record):
    sfd = os.path.join(root, 'usr/sbin/sfd')
    sfctl = os.path.join(root, 'usr/bin/sfctl')
    libdir = os.path.dirname(glob.glob(os.path.join(root, 'usr/lib/**/libsfclient.so.0'),
                                       recursive=True)[0])
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    # The client resolves libsfclient from the extracted tree.
    trace = run([record], env=dict(env, LD_TRACE_LOADED_OBJECTS='1'))
    assert os.path.join(libdir, 'libsfclient.so.0') in trace, trace

    rundir = os.path.join(tmp, 'run')
    conf = os.path.join(tmp, 'sfd.conf')
    with open(conf, 'w') as f:
        f.write(config_from(os.path.join(root, 'etc/stagefrontier/sfd.conf'),
                            {'warmup_steps': '0', 'window_steps': str(WINDOW)}))
    query = os.path.join(rundir, 'query.sock')
    ingest = os.path.join(rundir, 'ingest.sock')
    log = open(os.path.join(tmp, 'sfd.log'), 'wb')
    proc = subprocess.Popen([sfd, '--config', conf, '--runtime-dir', rundir, '--foreground',
                             '--state-dir', os.path.join(tmp, 'state')],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    ok = False
    try:
        h.wait_for('the query socket', lambda: h.connectable(query), proc=proc)
        # sfd creates its own sockets with the documented modes.
        assert stat.S_IMODE(os.stat(ingest).st_mode) == 0o666
        rc, out, err = h.sfctl(sfctl, query, 'status', env=env)
        assert rc == 0, f'sfctl status: {rc}\n{err}'
        r = subprocess.run([record, ingest, JOB, str(WORLD), str(STEPS), '0'], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr

        def last_window():
            rc, out, _ = h.sfctl(sfctl, query, 'report', JOB, '--json', env=env)
            if rc != 0:
                return None
            w = json.loads(out)[-1]
            return w if w['window']['index'] == STEPS // WINDOW - 1 else None
        w = h.wait_for('the last window', last_window, proc=proc)
        assert w['window']['ranks'] == WORLD, w['window']
        assert 'data.next_wait' in w['routing_set'][:2], w['routing_set']
        run_python_rank(root, ingest, env)
        h.wait_for('the Python job', lambda: PY_JOB in h.sfctl(sfctl, query, 'jobs', env=env)[1],
                   proc=proc)
        rc, out, err = h.sfctl(sfctl, query, 'report', 'no-such-job', env=env)
        assert rc == 5, f'unknown job gave {rc}'
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        ok = True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        if not ok:
            with open(os.path.join(tmp, 'sfd.log'), 'rb') as f:
                sys.stderr.write(f.read().decode('utf-8', 'replace')[-8000:])


def main():
    src, build, record = sys.argv[1:4]
    for tool in ('cpack', 'dpkg-deb', 'dpkg-shlibdeps'):
        if shutil.which(tool) is None:
            h.skip(f'{tool} is not installed')
    for b in (os.path.join(build, 'daemon/sfd/sfd'), os.path.join(build, 'daemon/sfctl/sfctl'),
              record):
        if not os.access(b, os.X_OK):
            h.skip(f'{b} was not built')
    tmp = tempfile.mkdtemp(prefix='sfdeb.')
    try:
        deb = build_deb(build, os.path.join(tmp, 'out'))
        check_contents(deb)
        ctl = check_control(deb, tmp)
        check_postinst(ctl, tmp)
        root = os.path.join(tmp, 'root')
        run(['dpkg-deb', '-x', deb, root])
        check_units(root, build)
        run_extracted(root, tmp, record)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f'package OK: {os.path.basename(deb)}')


if __name__ == '__main__':
    main()
