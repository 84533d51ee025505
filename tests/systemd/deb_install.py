#!/usr/bin/python3
"""The Debian packages (.ci/build-debs) installed by dpkg into a throwaway root.

The root is made by this test from the host's own installed packages: the
dependency closure of the .debs plus the Essential set, each package's files
copied from the host and its dpkg database entry (status, info, triggers)
kept, so `dpkg --root` checks every dependency for real (no --force-depends)
and runs the maintainer scripts chrooted in the root. Then, inside the root:
the ldconfig trigger, the sysusers user, the tmpfiles entries, the socket
units' enablement and the byte-compiled module are checked; the installed sfctl replays an example CSV;
the installed python3 module is imported by /usr/bin/python3; a job built
against libsfclient-dev (pkg-config and the CMake package) records through
the installed libsfclient0 to the installed sfd; and a purge removes it all.

usage: deb_install.py SRC BUILD_SFCTL
Needs root (chroot). The packages come from $SF_DEB_DIR when it is set
(.ci/run builds them once), otherwise this test runs .ci/build-debs itself.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svc_helpers as h  # noqa: E402

TRIPLET = subprocess.run(['dpkg-architecture', '-qDEB_HOST_MULTIARCH'], capture_output=True,
                         text=True).stdout.strip() if shutil.which('dpkg-architecture') else ''
PACKAGES = {
    'stagefrontier': ['usr/sbin/sfd', 'usr/bin/sfctl', 'etc/stagefrontier/sfd.conf',
                      'lib/systemd/system/sfd.service', 'lib/systemd/system/sfd.socket',
                      'lib/systemd/system/sfd-query.socket',
                      'usr/lib/sysusers.d/stagefrontier.conf',
                      'usr/lib/tmpfiles.d/stagefrontier.conf',
                      'usr/share/man/man8/sfd.8.gz', 'usr/share/man/man1/sfctl.1.gz',
                      'usr/share/stagefrontier/grafana/stagefrontier-dashboard.json',
                      'usr/share/doc/stagefrontier/copyright'],
    'libsfclient0': [f'usr/lib/{TRIPLET}/libsfclient.so.0'],
    'libsfclient-dev': ['usr/include/stagefrontier/client.h',
                        'usr/include/stagefrontier/parallel.h', f'usr/lib/{TRIPLET}/libsfclient.so',
                        f'usr/lib/{TRIPLET}/pkgconfig/sfclient.pc',
                        f'usr/lib/{TRIPLET}/cmake/StageFrontierClient/StageFrontierClientConfig.cmake'],
    'python3-stagefrontier': ['usr/lib/python3/dist-packages/stagefrontier/__init__.py'],
    'stagefrontier-plot': ['usr/libexec/stagefrontier/sfctl-plot'],
}
PLOT_PACKAGE = 'stagefrontier-plot'
# What a headless node must not get with sfd: the graphics stack of sfctl plot.
GRAPHICS = re.compile(r'libcairo|libfontconfig|libfreetype|libpixman|libpng|libx11|libxcb|libxrender|libxext',
                      re.I)
NCCL_PACKAGE = ('stagefrontier-nccl-plugin',
                [f'usr/lib/{TRIPLET}/stagefrontier/libnccl-profiler-stagefrontier.so'])
EXAMPLE = 'docs/examples/straggler.csv'
JOB, WORLD, STEPS, WINDOW = 'deb-job', 2, 8, 4
PY_JOB = 'deb-py'

# One rank through the installed Python module, as a trainer would use it.
PY_RANK = """
import sys, time, stagefrontier
assert stagefrontier.__file__.startswith('/usr/lib/python3/dist-packages/'), stagefrontier.__file__
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

CMAKE_CONSUMER = """cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(StageFrontierClient 0.1 REQUIRED)
add_executable(sf_record_job_cmake {src})
target_link_libraries(sf_record_job_cmake PRIVATE StageFrontier::sfclient)
"""


def run(cmd, **kw):
    kw.setdefault('timeout', 900)
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise AssertionError(f'{cmd} failed ({p.returncode}):\n{p.stdout}{p.stderr}')
    return p.stdout


def in_root(root, *cmd, **kw):
    return run(['chroot', root] + list(cmd), **kw)


# ---- the host's dpkg database

def host_status(arch):
    """Installed packages of the host: name -> (fields, stanza text)."""
    pkgs = {}
    with open('/var/lib/dpkg/status') as f:
        for stanza in f.read().split('\n\n'):
            if 'Status: install ok installed' not in stanza:
                continue
            fields = dict(re.findall(r'^([A-Za-z-]+): ?(.*)$', stanza, re.M))
            name = fields['Package']
            # Multi-Arch: same packages of another architecture stay out.
            if fields.get('Architecture') not in ('all', arch):
                continue
            pkgs[name] = (fields, stanza.strip('\n'))
    return pkgs



def closure(pkgs, seeds):
    """The seeds and everything they depend on, among installed packages."""
    provides = {}
    for name, (fields, _) in pkgs.items():
        for p in fields.get('Provides', '').split(','):
            p = p.strip().split(' ')[0]
            if p:
                provides.setdefault(p, name)
    seen, todo = set(), list(seeds)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        assert name in pkgs, f'{name} is not installed on this host'
        seen.add(name)
        for field in ('Depends', 'Pre-Depends'):
            for group in pkgs[name][0].get(field, '').split(','):
                for alt in group.split('|'):
                    dep = alt.strip().split(' ')[0].split(':')[0]
                    if dep in pkgs or dep in provides:
                        todo.append(dep if dep in pkgs else provides[dep])
                        break
    return seen


def deb_depends(debs, built):
    """The packages the .debs need, without the ones they provide."""
    seeds = set()
    for deb in debs:
        for field in ('Depends', 'Pre-Depends'):
            text = run(['dpkg-deb', '-f', deb, field]).strip()
            for group in filter(None, (g.strip() for g in text.split(','))):
                alts = [a.strip().split(' ')[0].split(':')[0] for a in group.split('|')]
                if not any(a in built for a in alts):
                    seeds.add(alts[0])
    return seeds


def copy_files(pkg, root):
    """The files of an installed host package, into root (directories made,
    symbolic links kept, paths gone from the host skipped: path-excluded
    documentation)."""
    listing = run(['dpkg-query', '-L', pkg]).splitlines()
    for path in listing:
        if not path.startswith('/') or path == '/.':
            continue
        dest = root + path
        if os.path.isdir(path) and not os.path.islink(path):
            os.makedirs(dest, exist_ok=True)
        elif os.path.lexists(path):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if not os.path.lexists(dest):
                shutil.copy2(path, dest, follow_symlinks=False)


def make_root(root, debs, built):
    """A minimal Debian root with a real dpkg database, from the host."""
    pkgs = host_status(run(['dpkg', '--print-architecture']).strip())
    essential = [n for n, (f, _) in pkgs.items() if f.get('Essential') == 'yes']
    names = sorted(closure(pkgs, sorted(deb_depends(debs, built)) + essential))
    # Merged /usr, as the host and Debian 12 lay it out.
    for link in ('bin', 'sbin', 'lib', 'lib64'):
        if os.path.islink('/' + link):
            target = os.readlink('/' + link)
            os.makedirs(os.path.join(root, target.lstrip('/')), exist_ok=True)
            os.symlink(target, os.path.join(root, link))
    for name in names:
        copy_files(name, root)
    admin = os.path.join(root, 'var/lib/dpkg')
    os.makedirs(os.path.join(admin, 'info'), exist_ok=True)
    os.makedirs(os.path.join(admin, 'updates'), exist_ok=True)
    os.makedirs(os.path.join(admin, 'triggers'), exist_ok=True)
    with open(os.path.join(admin, 'status'), 'w') as f:
        f.write('\n\n'.join(pkgs[n][1] for n in names) + '\n')
    for name in names:
        for info in glob.glob(f'/var/lib/dpkg/info/{name}.*') + \
                glob.glob(f'/var/lib/dpkg/info/{name}:*.*'):
            shutil.copy2(info, os.path.join(admin, 'info'))
    # Trigger interests of the packages in the root only.
    for path in glob.glob('/var/lib/dpkg/triggers/*'):
        base = os.path.basename(path)
        if base in ('Lock', 'Unincorp') or not os.path.isfile(path):
            continue
        keep = [line for line in open(path)
                if line.split()[-1].split('/')[0].split(':')[0] in names]
        if keep:
            with open(os.path.join(admin, 'triggers', base), 'w') as f:
                f.writelines(keep)
    for empty in ('available', 'diversions', 'statoverride', 'triggers/Unincorp'):
        open(os.path.join(admin, empty), 'a').close()
    # The base accounts, as base-passwd's postinst makes them.
    for db in ('passwd', 'group'):
        shutil.copy(f'/usr/share/base-passwd/{db}.master', os.path.join(root, 'etc', db))
    for d in ('tmp', 'run', 'proc', 'dev', 'var/tmp'):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, 'tmp'), 0o1777)
    return names


# ---- the packages

def find_debs(src, tmp):
    deb_dir = os.environ.get('SF_DEB_DIR')
    if not deb_dir:
        for tool in ('dpkg-buildpackage', 'dh', 'lintian'):
            if shutil.which(tool) is None:
                h.skip(f'{tool} is not installed and SF_DEB_DIR is not set')
        deb_dir = os.path.join(tmp, 'debs')
        run([os.path.join(src, '.ci/build-debs'), deb_dir], timeout=1800)
    debs = {}
    for deb in glob.glob(os.path.join(deb_dir, '*.deb')):
        name = run(['dpkg-deb', '-f', deb, 'Package']).strip()
        if not name.endswith('-dbgsym'):
            debs[name] = deb
    return debs


def check_contents(debs, expected):
    assert sorted(debs) == sorted(expected), f'packages {sorted(debs)}, expected {sorted(expected)}'
    for name, paths in expected.items():
        listing = run(['dpkg-deb', '-c', debs[name]])
        have = {line.split()[5].lstrip('./') for line in listing.splitlines()}
        missing = [p for p in paths if p not in have]
        assert not missing, f'{name} lacks {missing}:\n{listing}'
        assert not any(p.startswith('usr/local') for p in have), listing


def check_installed(root, debs):
    for name in debs:
        status = run(['dpkg-query', '--root', root, '-W', '-f', '${Status}', name])
        assert status == 'install ok installed', f'{name}: {status}'
    conffiles = run(['dpkg-query', '--root', root, '-W', '-f', '${Conffiles}', 'stagefrontier'])
    assert '/etc/stagefrontier/sfd.conf' in conffiles, conffiles
    # The ldconfig trigger ran: the loader's cache knows libsfclient.
    cache = in_root(root, '/sbin/ldconfig', '-p')
    assert f'libsfclient.so.0 (libc6,x86-64) => /lib/{TRIPLET}/libsfclient.so.0' in cache or \
        f'/usr/lib/{TRIPLET}/libsfclient.so.0' in cache, cache
    # sysusers made the user, tmpfiles the state directory, the sockets are
    # enabled (the service starts on the first connection).
    passwd = open(os.path.join(root, 'etc/passwd')).read()
    user = re.search(r'^stagefrontier:x:(\d+):(\d+):', passwd, re.M)
    assert user, passwd
    # systemd-tmpfiles needs /proc, which a chroot lacks: the postinst's call
    # is allowed to fail there (the boot runs it again). Run it as the boot
    # would, on this root, for the packaged entries and the user sysusers made.
    run(['systemd-tmpfiles', f'--root={root}', '--create', 'stagefrontier.conf'])
    st = os.stat(os.path.join(root, 'var/lib/stagefrontier/prometheus'))
    assert (st.st_uid, st.st_gid) == (int(user.group(1)), int(user.group(2))), st
    wants = os.path.join(root, 'etc/systemd/system/sockets.target.wants')
    assert sorted(os.listdir(wants)) == ['sfd-query.socket', 'sfd.socket'], os.listdir(wants)
    assert not os.path.exists(os.path.join(root, 'etc/systemd/system/multi-user.target.wants/sfd.service'))
    # dh_python3's postinst byte-compiled the module.
    assert glob.glob(os.path.join(root, 'usr/lib/python3/dist-packages/stagefrontier/__pycache__/*.pyc'))


def check_replay(src, root, build_sfctl):
    shutil.copy(os.path.join(src, EXAMPLE), os.path.join(root, 'tmp/example.csv'))
    human = in_root(root, '/usr/bin/sfctl', 'replay', '/tmp/example.csv')
    assert 'straggler: rank 3' in human, human
    packaged = in_root(root, '/usr/bin/sfctl', 'replay', '--json', '/tmp/example.csv')
    json.loads(packaged)
    # The packaged build answers byte for byte as the build tree's sfctl.
    built = run([build_sfctl, 'replay', '--json', os.path.join(src, EXAMPLE)])
    assert packaged == built, 'packaged and built sfctl replay differ'


def check_headless(root, debs):
    """stagefrontier depends on no graphics library, and neither sfd nor sfctl
    links one; without stagefrontier-plot `sfctl plot` names the package."""
    depends = run(['dpkg-deb', '-f', debs['stagefrontier'], 'Depends'])
    assert not GRAPHICS.search(depends), f'stagefrontier depends on graphics: {depends}'
    for binary in ('usr/bin/sfctl', 'usr/sbin/sfd'):
        needed = run(['readelf', '-d', os.path.join(root, binary)])
        assert not GRAPHICS.search(needed), f'{binary} links graphics:\n{needed}'
    p = subprocess.run(['chroot', root, '/usr/bin/sfctl', 'plot', '--file', '/tmp/example.csv',
                        '-o', '/tmp/example.svg'], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and 'stagefrontier-plot' in p.stderr, (p.returncode, p.stderr)
    assert not os.path.exists(os.path.join(root, 'tmp/example.svg'))


def check_plot(root):
    """With stagefrontier-plot, the same command draws."""
    in_root(root, '/usr/bin/sfctl', 'plot', '--file', '/tmp/example.csv', '-o', '/tmp/example.svg')
    with open(os.path.join(root, 'tmp/example.svg')) as f:
        assert '<svg' in f.read(4096), 'no SVG drawn'


def check_python(root):
    out = in_root(root, '/usr/bin/python3', '-c',
                  'import stagefrontier, sys; print(stagefrontier.__file__); '
                  'print(stagefrontier.__version__); print(sorted(stagefrontier.DEFAULT_STAGES)[0])')
    path, version = out.splitlines()[:2]
    assert path == '/usr/lib/python3/dist-packages/stagefrontier/__init__.py', out
    assert version == '0.1.0', out


def build_consumers(src, root, tmp):
    """sf_record_job built against libsfclient-dev in the root, once through
    pkg-config and once through the CMake package; both land in root/tmp."""
    job_src = os.path.join(src, 'tests/systemd/sf_record_job.c')
    pcdir = os.path.join(root, f'usr/lib/{TRIPLET}/pkgconfig')
    env = dict(os.environ, PKG_CONFIG_LIBDIR=pcdir, PKG_CONFIG_PATH='')
    flags = run(['pkg-config', '--cflags', '--libs', 'sfclient'], env=env).split()
    assert f'-I{os.path.realpath(root)}/usr/include' in [f'-I{os.path.realpath(f[2:])}'
                                                           for f in flags if f.startswith('-I')], flags
    run(['cc', '-std=gnu17', '-o', os.path.join(root, 'tmp/sf_record_job'), job_src] + flags)

    proj = os.path.join(tmp, 'consumer')
    os.makedirs(proj)
    with open(os.path.join(proj, 'CMakeLists.txt'), 'w') as f:
        f.write(CMAKE_CONSUMER.format(src=job_src))
    run(['cmake', '-S', proj, '-B', os.path.join(proj, 'build'),
         f'-DCMAKE_PREFIX_PATH={root}/usr', '-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF'])
    run(['cmake', '--build', os.path.join(proj, 'build')])
    shutil.copy(os.path.join(proj, 'build/sf_record_job_cmake'), os.path.join(root, 'tmp/'))


def live_job(root, tmp):
    """The installed sfd, fed by the consumers (through the installed
    libsfclient0, found by the loader's cache) and the Python module, queried
    by the installed sfctl; all inside the root."""
    conf = os.path.join(root, 'tmp/sfd.conf')
    with open(conf, 'w') as f:
        f.write(config_from(os.path.join(root, 'etc/stagefrontier/sfd.conf'),
                            {'warmup_steps': '0', 'window_steps': str(WINDOW)}))
    query, ingest = '/tmp/run/query.sock', '/tmp/run/ingest.sock'
    log = open(os.path.join(tmp, 'sfd.log'), 'wb')
    proc = subprocess.Popen(['chroot', root, '/usr/sbin/sfd', '--config', '/tmp/sfd.conf',
                             '--runtime-dir', '/tmp/run', '--state-dir', '/tmp/state',
                             '--foreground'], stdout=log, stderr=subprocess.STDOUT)
    ok = False

    def sfctl(*args):
        p = subprocess.run(['chroot', root, '/usr/bin/sfctl', '--socket', query] + list(args),
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr
    try:
        h.wait_for('the query socket', lambda: h.connectable(root + query), proc=proc)
        # env sets the variable past chroot, whose own loader would answer.
        trace = in_root(root, '/usr/bin/env', 'LD_TRACE_LOADED_OBJECTS=1', '/tmp/sf_record_job')
        assert f'/lib/{TRIPLET}/libsfclient.so.0' in trace, trace
        for i, binary in enumerate(('/tmp/sf_record_job', '/tmp/sf_record_job_cmake')):
            in_root(root, binary, ingest, f'{JOB}-{i}', str(WORLD), str(STEPS), '0')

            def last_window(job=f'{JOB}-{i}'):
                rc, out, _ = sfctl('report', job, '--json')
                if rc != 0:
                    return None
                w = json.loads(out)[-1]
                return w if w['window']['index'] == STEPS // WINDOW - 1 else None
            w = h.wait_for(f'the last window of {binary}', last_window, proc=proc)
            assert w['window']['ranks'] == WORLD, w['window']
        in_root(root, '/usr/bin/python3', '-c', PY_RANK, ingest, PY_JOB)
        h.wait_for('the Python job', lambda: PY_JOB in sfctl('jobs')[1], proc=proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        ok = True
    finally:
        h.end_daemon(proc, log, ok)


def config_from(path, overrides):
    """The installed sfd.conf with the given keys set."""
    out = []
    for line in open(path):
        key = line[1:].split(' = ')[0] if line.startswith('#') and ' = ' in line else None
        if key in overrides:
            line = f'{key} = {overrides.pop(key)}\n'
        out.append(line)
    assert not overrides, overrides
    return ''.join(out)


def check_purge(root, debs):
    run(['dpkg', '--root', root, '--purge'] + sorted(debs))
    for name in debs:
        status = subprocess.run(['dpkg-query', '--root', root, '-W', '-f', '${Status}', name],
                                capture_output=True, text=True).stdout
        assert status in ('', 'unknown ok not-installed'), f'{name} after purge: {status}'
    for gone in ('usr/sbin/sfd', 'usr/libexec/stagefrontier', 'etc/stagefrontier',
                 'var/lib/stagefrontier',
                 'etc/systemd/system/sockets.target.wants/sfd.socket',
                 'usr/lib/python3/dist-packages/stagefrontier'):
        assert not os.path.lexists(os.path.join(root, gone)), f'{gone} left after purge'


def main():
    src, build_sfctl = sys.argv[1:3]
    if os.geteuid() != 0:
        h.skip('installing into a root with dpkg --root needs root (chroot)')
    for tool in ('dpkg', 'dpkg-deb', 'dpkg-query', 'chroot', 'pkg-config', 'cc', 'cmake',
                 'systemd-tmpfiles'):
        if shutil.which(tool) is None:
            h.skip(f'{tool} is not installed')
    if not os.access(build_sfctl, os.X_OK):
        h.skip(f'{build_sfctl} was not built')
    tmp = tempfile.mkdtemp(prefix='sfdebroot.')
    try:
        debs = find_debs(src, tmp)
        expected = dict(PACKAGES)
        if NCCL_PACKAGE[0] in debs:
            expected[NCCL_PACKAGE[0]] = NCCL_PACKAGE[1]
        check_contents(debs, expected)
        root = os.path.join(tmp, 'root')
        os.mkdir(root)
        names = make_root(root, list(debs.values()), set(debs))
        print(f'root: {len(names)} host packages')
        run(['dpkg', '--root', root, '--install'] +
            sorted(d for n, d in debs.items() if n != PLOT_PACKAGE))
        check_replay(src, root, build_sfctl)
        check_headless(root, debs)
        run(['dpkg', '--root', root, '--install', debs[PLOT_PACKAGE]])
        check_plot(root)
        check_installed(root, debs)
        check_python(root)
        build_consumers(src, root, tmp)
        live_job(root, tmp)
        check_purge(root, debs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f'packages OK: {", ".join(sorted(debs))} installed into a dpkg --root, used and purged')


if __name__ == '__main__':
    main()
