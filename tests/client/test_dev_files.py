#!/usr/bin/python3
"""libsfclient's development files as a trainer's build uses them: the
"client" component installed into a throwaway prefix (client.h its only
header), then a program built once with `pkg-config --cflags --libs sfclient`
and once through find_package(StageFrontierClient), each run against the
installed library.

usage: test_dev_files.py SRC BUILD
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if p.returncode != 0:
        raise AssertionError(f'{cmd} failed ({p.returncode}):\n{p.stdout}{p.stderr}')
    return p.stdout


def main():
    build = sys.argv[2]
    for tool in ('cmake', 'pkg-config', 'cc'):
        if shutil.which(tool) is None:
            print(f'skipped: {tool} is not installed')
            sys.exit(77)
    tmp = tempfile.mkdtemp(prefix='sfdev.')
    try:
        prefix = os.path.join(tmp, 'prefix')
        run(['cmake', '--install', build, '--prefix', prefix, '--component', 'client'])
        # client.h and the parallel.h it includes are the public headers;
        # internal ones (strutil.h) stay out.
        incdir = os.path.join(prefix, 'include')
        headers = sorted(os.path.relpath(os.path.join(d, f), incdir)
                         for d, _, fs in os.walk(incdir) for f in fs)
        assert headers == ['stagefrontier/client.h', 'stagefrontier/parallel.h'], headers
        pcs = [os.path.join(d, f) for d, _, fs in os.walk(prefix) for f in fs if f == 'sfclient.pc']
        assert len(pcs) == 1, pcs
        libdir = os.path.dirname(os.path.dirname(pcs[0]))
        # A sanitized build's library needs its runtime; the order check
        # cannot hold for a program that does not link it first.
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]),
                   ASAN_OPTIONS='verify_asan_link_order=0:detect_leaks=0')
        flags = run(['pkg-config', '--cflags', '--libs', 'sfclient'], env=env).split()
        dirs = [os.path.realpath(f[2:]) for f in flags if f.startswith('-L')]
        assert os.path.realpath(libdir) in dirs and '-lsfclient' in flags, flags
        exe = os.path.join(tmp, 'with-pkg-config')
        run(['cc', os.path.join(HERE, 'dev', 'consumer.c'), '-o', exe] + flags, env=env)
        out = run([exe], env=dict(env, LD_LIBRARY_PATH=libdir))
        assert out == 'stages=6\n', out

        cbuild = os.path.join(tmp, 'cmake-build')
        run(['cmake', '-S', os.path.join(HERE, 'dev'), '-B', cbuild,
             f'-DCMAKE_PREFIX_PATH={prefix}'], env=env)
        run(['cmake', '--build', cbuild], env=env)
        out = run([os.path.join(cbuild, 'consumer')], env=dict(env, LD_LIBRARY_PATH=libdir))
        assert out == 'stages=6\n', out
        # The imported target carries the installed library, not the build tree's.
        cache = open(os.path.join(cbuild, 'CMakeCache.txt')).read()
        assert os.path.realpath(build) not in cache, 'the package points into the build tree'
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print('pkg-config and find_package(StageFrontierClient) both build and run')


if __name__ == '__main__':
    main()
