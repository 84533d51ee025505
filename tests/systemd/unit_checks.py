#!/usr/bin/python3
"""Static checks of what sfd ships around its binary.

usage: unit_checks.py verify   SRC SFD   systemd-analyze verify on the units and the
                                         drop-ins docs/OPERATIONS.md shows
       unit_checks.py security SRC       offline exposure score <= 2.0, as documented
       unit_checks.py install  SRC BUILD cmake --install layout for two prefixes
       unit_checks.py keys     SRC       sfd.conf lists exactly the keys sfd parses
       unit_checks.py man      SRC SFD [SFCTL]  man pages render without warnings and
                                         document every flag and config key

SRC is the source tree, SFD the built sfd. Exit 77 (skip) only when a tool or
the binary is missing.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

UNITS = ['sfd.service', 'sfd.socket', 'sfd-query.socket']
SKIP = 77


def need(tool):
    path = shutil.which(tool)
    if path is None:
        print(f'SKIP: {tool} is not installed')
        sys.exit(SKIP)
    return path


def man_tree(src, tmp):
    """A MANPATH with our pages, so `man sfd(8)` in Documentation= resolves."""
    root = os.path.join(tmp, 'man')
    for page, sec in (('sfd.8', '8'), ('sfctl.1', '1')):
        d = os.path.join(root, 'man' + sec)
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(src, 'docs', 'man', page), d)
    return root


def run_verify(unit_dir, units, manpath):
    env = dict(os.environ, MANPATH=manpath)
    p = subprocess.run(['systemd-analyze', 'verify'] + [os.path.join(unit_dir, u) for u in units],
                       capture_output=True, text=True, env=env, cwd=unit_dir, timeout=120)
    ours = [l for l in (p.stdout + p.stderr).splitlines()
            if any(u in l for u in units)]
    return p.returncode, ours


def unit_value(text, key):
    m = re.findall(r'^' + key + r'=(\S+)\s*$', text, re.M)
    return m[-1] if m else None


def resource_limits(src):
    """The unit bounds memory and tasks, and its descriptor limit holds the
    shipped max_connections plus the 64 query slots and some room; sfd cannot
    raise it under the unit's @resources filter."""
    text = open(os.path.join(src, 'systemd', 'sfd.service')).read()
    conf = open(os.path.join(src, 'systemd', 'sfd.conf')).read()
    m = re.search(r'^#max_connections = (\d+)$', conf, re.M)
    assert m, 'sfd.conf lists no max_connections'
    nofile = unit_value(text, 'LimitNOFILE')
    assert nofile and nofile.isdigit(), 'sfd.service has no numeric LimitNOFILE='
    need_fds = int(m.group(1)) + 64 + 256
    if not need_fds <= int(nofile) <= 4 * need_fds:
        sys.exit(f'LimitNOFILE={nofile} does not fit max_connections {m.group(1)} '
                 f'(want {need_fds}..{4 * need_fds})')
    for key in ('MemoryMax', 'TasksMax'):
        v = unit_value(text, key)
        if v is None or v in ('infinity', '0'):
            sys.exit(f'sfd.service needs a finite {key}=')


def documented_drop_ins(src):
    """Each `systemctl edit UNIT` block of docs/OPERATIONS.md, as (unit, text):
    the drop-ins operators are told to write must parse too."""
    found, unit, body = [], None, []
    for line in open(os.path.join(src, 'docs', 'OPERATIONS.md')):
        bare = line.strip().removeprefix('# ')
        if bare.startswith('systemctl edit '):
            unit, body = bare.split()[2], []
        elif unit and bare == '```':
            found.append((unit, '\n'.join(body) + '\n'))
            unit = None
        elif unit:
            body.append(bare)
    assert found, 'docs/OPERATIONS.md shows no drop-in'
    return found


def write_drop_ins(units, drop_ins):
    for i, (unit, text) in enumerate(drop_ins):
        d = os.path.join(units, unit + '.d')
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f'doc-{i}.conf'), 'w') as f:
            f.write(text)


def verify_drop_ins(src, units, manpath):
    """The documented drop-ins, on the shipped units; and a misspelt value in
    one must be reported."""
    drop_ins = documented_drop_ins(src)
    write_drop_ins(units, drop_ins)
    rc, ours = run_verify(units, UNITS, manpath)
    if rc != 0 or ours:
        sys.exit(f'a drop-in of docs/OPERATIONS.md fails verify (rc {rc}):\n' + '\n'.join(ours))
    write_drop_ins(units, [('sfd.service', '[Service]\nCPUAffinity=zz\n')])
    rc, ours = run_verify(units, UNITS, manpath)
    assert any('CPU affinity' in l for l in ours), ours
    shutil.rmtree(os.path.join(units, 'sfd.service.d'))
    print(f'systemd-analyze verify: {len(drop_ins)} documented drop-ins OK')


def socket_modes(src):
    """Both sockets are 0666 (any user sends, any user queries: sfd decides
    per request), and docs/OPERATIONS.md's table says what the units do."""
    doc = open(os.path.join(src, 'docs', 'OPERATIONS.md')).read()
    for unit in ('sfd.socket', 'sfd-query.socket'):
        mode = unit_value(open(os.path.join(src, 'systemd', unit)).read(), 'SocketMode')
        assert mode == '0666', f'{unit}: SocketMode={mode}, want 0666'
        row = re.search(r'^\| \S+ \(SOCK_SEQPACKET\) \| `' + re.escape(unit) + r'` \|[^|]*\| (\d+) \|',
                        doc, re.M)
        assert row and row.group(1) == mode, f'docs/OPERATIONS.md: {unit} row says ' + (
            row.group(1) if row else 'nothing')


def verify(src, sfd):
    need('systemd-analyze')
    socket_modes(src)
    if not os.access(sfd, os.X_OK):
        print(f'SKIP: sfd binary {sfd} was not built')
        sys.exit(SKIP)
    with tempfile.TemporaryDirectory(prefix='sfunits.') as tmp:
        manpath = man_tree(src, tmp)
        units = os.path.join(tmp, 'units')
        os.mkdir(units)
        for u in UNITS:
            text = open(os.path.join(src, 'systemd', u)).read()
            # The packaged path does not exist here: point at the built binary.
            assert '/usr/sbin/sfd' in text or u != 'sfd.service'
            with open(os.path.join(units, u), 'w') as f:
                f.write(text.replace('/usr/sbin/sfd', os.path.abspath(sfd)))
        rc, ours = run_verify(units, UNITS, manpath)
        if rc != 0 or ours:
            sys.exit(f'systemd-analyze verify failed (rc {rc}):\n' + '\n'.join(ours))
        resource_limits(src)
        verify_drop_ins(src, units, manpath)

        # The check can fail: a unit with a misspelt key and a missing
        # binary must be reported.
        bad = os.path.join(tmp, 'bad')
        os.mkdir(bad)
        text = open(os.path.join(units, 'sfd.service')).read()
        text = text.replace('ProtectHome=yes', 'ProtectHomes=yes')
        text = text.replace(os.path.abspath(sfd), '/nonexistent/sfd')
        with open(os.path.join(bad, 'sfd.service'), 'w') as f:
            f.write(text)
        for u in UNITS[1:]:
            shutil.copy(os.path.join(units, u), bad)
        rc, ours = run_verify(bad, UNITS, manpath)
        assert rc != 0, 'verify accepted a unit with a missing binary'
        assert any('ProtectHomes' in l for l in ours), ours
    print('systemd-analyze verify: units OK')


def security(src):
    need('systemd-analyze')
    unit = os.path.join(src, 'systemd', 'sfd.service')
    p = subprocess.run(['systemd-analyze', 'security', '--offline=yes', '--no-pager', unit],
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    m = re.search(r'Overall exposure level for sfd\.service: (\d+\.\d)', out)
    if not m:
        sys.exit('no exposure level in:\n' + out)
    score = float(m.group(1))
    print(f'exposure level {score}')
    if score > 2.0:
        sys.exit(f'exposure {score} above 2.0:\n' + out)
    # The figure operators read in OPERATIONS.md is the one the unit gives.
    doc = open(os.path.join(src, 'docs', 'OPERATIONS.md')).read()
    m = re.search(r'exposure level[^0-9]*(\d+\.\d)', doc)
    if not m or float(m.group(1)) != score:
        sys.exit(f'docs/OPERATIONS.md records {m.group(1) if m else "no score"}, '
                 f'the unit gives {score}')
    # --threshold is the exposure times ten: the tool agrees with our bound.
    t = subprocess.run(['systemd-analyze', 'security', '--offline=yes', '--threshold=20', unit],
                       capture_output=True, timeout=120)
    if t.returncode != 0:
        sys.exit('systemd-analyze security --threshold=20 failed')


def groff_warnings(page):
    p = subprocess.run(['groff', '-man', '-Tutf8', '-ww', '-z', page],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stderr.strip()


def man_text(page):
    env = dict(os.environ, MANWIDTH='100', MAN_KEEP_FORMATTING='0')
    p = subprocess.run(['man', '--warnings', '-l', page], capture_output=True, text=True,
                       env=env, timeout=60)
    # Without a terminal man may still embolden by overstriking.
    return p.returncode, re.sub('.\x08', '', p.stdout), p.stderr.strip()


def conf_keys(conf):
    """(section, key) of every '#key = value' line of the shipped config."""
    keys, section = [], None
    for line in open(conf):
        s = re.match(r'^\[(\w+)\]', line)
        if s:
            section = s.group(1)
        k = re.match(r'^#([a-z_]+) =', line)
        if k:
            keys.append((section, k.group(1)))
    return keys


def roff_words(page):
    """The page source with font and dash escapes removed: what a reader
    sees, without the line breaks and hyphenation of a rendering."""
    text = open(page).read().replace('\\-', '-')
    return re.sub(r'\\f[BIRP]', '', text)


def long_flags(help_text):
    return sorted(set(re.findall(r'--([a-z][a-z-]+)', help_text)))


def man(src, sfd):
    need('groff')
    need('man')
    pages = {n: os.path.join(src, 'docs', 'man', n) for n in ('sfd.8', 'sfctl.1')}
    for name, page in pages.items():
        rc, err = groff_warnings(page)
        if rc != 0 or err:
            sys.exit(f'groff warnings in {name}:\n{err}')
        rc, text, err = man_text(page)
        if rc != 0 or err or 'SYNOPSIS' not in text:
            sys.exit(f'man -l {name} failed (rc {rc}):\n{err}')
    # A warning must be caught: a page with an unknown macro fails.
    with tempfile.TemporaryDirectory() as tmp:
        broken = os.path.join(tmp, 'broken.8')
        with open(broken, 'w') as f:
            f.write(open(pages['sfd.8']).read().replace('.SH NAME', '.SHX NAME', 1))
        rc, err = groff_warnings(broken)
        assert err, 'groff -ww did not warn about an unknown macro'

    sfd8 = roff_words(pages['sfd.8'])
    keys = conf_keys(os.path.join(src, 'systemd', 'sfd.conf'))
    assert len(keys) > 30, keys
    missing = [f'[{s}] {k}' for s, k in keys if k not in sfd8]
    if missing:
        sys.exit('sfd.conf keys missing from sfd(8): ' + ', '.join(missing))

    if not os.access(sfd, os.X_OK):
        print(f'SKIP: sfd binary {sfd} was not built; pages render cleanly')
        sys.exit(SKIP)
    h = subprocess.run([sfd, '--help'], capture_output=True, text=True, timeout=60)
    flags = long_flags(h.stdout + h.stderr)
    assert 'config' in flags, h.stdout
    missing = [f for f in flags if f'--{f}' not in sfd8]
    if missing:
        sys.exit('sfd flags missing from sfd(8): ' + ', '.join(missing))
    if len(sys.argv) > 4 and os.access(sys.argv[4], os.X_OK):
        sfctl1 = roff_words(pages['sfctl.1'])
        h = subprocess.run([sys.argv[4], '--help'], capture_output=True, text=True, timeout=60)
        cmds = re.findall(r'^  ([a-z]+) ', h.stdout, re.M)
        assert 'report' in cmds, h.stdout
        words = long_flags(h.stdout) + [c for c in cmds]
        missing = [w for w in words if w not in sfctl1]
        if missing:
            sys.exit('sfctl commands/flags missing from sfctl(1): ' + ', '.join(missing))
    print(f'man pages OK; sfd(8) documents {len(keys)} keys and flags {flags}')


# Where each section's keys are parsed, and how a key appears there.
KEY_SOURCES = [
    ('sfd/limits', 'daemon/sfd/config.c', r'!strcmp\(k, "([a-z_]+)"\)'),
    ('gates', 'daemon/core/gates.c', r'GATE\(([a-z_]+), GATE_'),
    ('peer', 'daemon/peer/peer_config.c', r'strcmp\(key, "([a-z_]+)"\) == 0'),
]


def keys(src):
    """Every key the parsers accept appears in the shipped sfd.conf, in its
    section, and the file lists no key that no parser accepts."""
    shipped = {}
    for section, key in conf_keys(os.path.join(src, 'systemd', 'sfd.conf')):
        shipped.setdefault(section, set()).add(key)
    checked = 0
    for sections, path, pattern in KEY_SOURCES:
        full = os.path.join(src, path)
        if not os.path.exists(full):
            print(f'{path} not present: its keys are not checked')
            continue
        parsed = set(re.findall(pattern, open(full).read()))
        assert parsed, f'no keys found in {path}: the pattern is stale'
        listed = set().union(*(shipped.get(s, set()) for s in sections.split('/')))
        if parsed != listed:
            sys.exit(f'{path} and sfd.conf [{sections}] differ: only parsed '
                     f'{sorted(parsed - listed)}, only listed {sorted(listed - parsed)}')
        checked += len(parsed)
    print(f'sfd.conf lists all {checked} keys the parsers accept')
    state_dir(src)


def state_dir(src):
    """The default state_dir (history store) is where the unit's
    StateDirectory= puts it, and the unit can write there."""
    unit = open(os.path.join(src, 'systemd', 'sfd.service')).read()
    conf = open(os.path.join(src, 'systemd', 'sfd.conf')).read()
    unit_dir = re.search(r'^StateDirectory=(\S+)$', unit, re.M)
    conf_dir = re.search(r'^#state_dir = (\S+)$', conf, re.M)
    if not unit_dir or not conf_dir:
        sys.exit('sfd.service has no StateDirectory= or sfd.conf no state_dir')
    if conf_dir.group(1) != '/var/lib/' + unit_dir.group(1):
        sys.exit(f'state_dir {conf_dir.group(1)} is not the unit\'s StateDirectory= '
                 f'/var/lib/{unit_dir.group(1)}')
    config_c = open(os.path.join(src, 'daemon', 'sfd', 'config.c')).read()
    if f'"{conf_dir.group(1)}"' not in config_c:
        sys.exit(f'config.c does not default state_dir to {conf_dir.group(1)}')
    print(f'state_dir {conf_dir.group(1)} = StateDirectory={unit_dir.group(1)}')


def install(build):
    """cmake --install of the files around the binaries, for two prefixes,
    staged with DESTDIR: the units name the prefix's binary and config, /usr
    keeps its config in /etc, and an edited config survives a reinstall."""
    cmake = need('cmake')
    with tempfile.TemporaryDirectory(prefix='sfinst.') as tmp:
        for prefix, etc in (('/opt/sf', '/opt/sf/etc'), ('/usr', '/etc')):
            dest = os.path.join(tmp, prefix.strip('/').replace('/', '_'))
            env = dict(os.environ, DESTDIR=dest)
            cmd = [cmake, '--install', build, '--prefix', prefix, '--component', 'daemon']
            subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)
            unitdir = dest + prefix + '/lib/systemd/system'
            svc = open(os.path.join(unitdir, 'sfd.service')).read()
            want = f'ExecStart={prefix}/sbin/sfd --config {etc}/stagefrontier/sfd.conf '
            assert want in svc, f'{want!r} not in the installed unit'
            for f in ('sfd.socket', 'sfd-query.socket'):
                assert os.path.exists(os.path.join(unitdir, f)), f
            for f in ('lib/sysusers.d/stagefrontier.conf', 'lib/tmpfiles.d/stagefrontier.conf',
                      'share/man/man8/sfd.8.gz', 'share/man/man1/sfctl.1.gz'):
                assert os.path.exists(os.path.join(dest + prefix, f)), f
            conf = dest + etc + '/stagefrontier/sfd.conf'
            with open(conf, 'a') as f:
                f.write('# edited by the operator\n')
            subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)
            assert open(conf).read().endswith('# edited by the operator\n'), 'config overwritten'
    print('cmake --install: /opt/sf and /usr layouts OK, edited config kept')


def main():
    mode, src = sys.argv[1], sys.argv[2]
    if mode == 'verify':
        verify(src, sys.argv[3])
    elif mode == 'security':
        security(src)
    elif mode == 'install':
        install(sys.argv[3])
    elif mode == 'keys':
        keys(src)
    elif mode == 'man':
        man(src, sys.argv[3])
    else:
        sys.exit(f'unknown mode {mode}')


if __name__ == '__main__':
    main()
