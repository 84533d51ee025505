#!/usr/bin/python3
"""Recorder(parallel=...) and the stagefrontier.parallel helpers: the text
they spell from pairs, a dict and a DeviceMesh (a duck-typed one, and torch's
own over a one-process Gloo group where torch is installed), and the
ValueErrors of malformed coordinates or sizes that do not tile the world."""
import os
import sys
import tempfile
import warnings

import stagefrontier as sf
from stagefrontier import parallel as par

os.environ["SF_HEARTBEAT_MS"] = "0"
os.environ.pop("SF_PARALLEL", None)
SOCKET = os.path.join(tempfile.mkdtemp(prefix="sfpar-"), "absent.sock")


def check(cond, msg):
    if not cond:
        print("FAIL: " + msg, file=sys.stderr)
        sys.exit(1)


def raises(exc, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        return str(e)
    check(False, "%s did not raise %s" % (fn.__name__, exc.__name__))


class FakeMesh:
    """A DeviceMesh as the helper reads it: dim names, local ranks, sizes."""

    def __init__(self, dims):
        self.dims = dims
        self.mesh_dim_names = tuple(name for name, _, _ in dims)

    def get_local_rank(self, name):
        return next(i for n, i, _ in self.dims if n == name)

    def size(self, name):
        return next(s for n, _, s in self.dims if n == name)


def recorder(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no sfd at SOCKET
        return sf.Recorder(job_id="par", socket=SOCKET, **kw)


def main():
    check(par.parallel_text(pp=(1, 4), tp=(0, 8), dp=(3, 16)) == "pp=1/4,tp=0/8,dp=3/16",
          "pairs")
    check(par.from_dict({"dp": (1, 2), "pp": (0, 2), "schedule": "1f1b"})
          == "pp=0/2,dp=1/2,schedule=1f1b", "dict")
    raises(ValueError, par.from_dict, {"xp": (0, 2)})
    raises(ValueError, par.parallel_text, pp=(2, 2))
    raises(ValueError, par.parallel_text)
    mesh = FakeMesh([("pipeline", 1, 2), ("dp_replicate", 1, 2), ("dp_shard", 0, 3),
                     ("tensor", 1, 2)])
    check(par.from_device_mesh(mesh) == "pp=1/2,tp=1/2,dp=3/6", par.from_device_mesh(mesh))
    raises(ValueError, par.from_device_mesh, FakeMesh([("rows", 0, 2)]))
    raises(TypeError, par.to_text, 42)

    r = recorder(rank=3, world_size=4, parallel="pp=1/2,dp=1/2,schedule=gpipe")
    r.close()
    r = recorder(rank=1, world_size=4, parallel={"pp": (0, 2), "dp": (1, 2)})
    r.close()
    r = recorder(rank=1, world_size=4, parallel=FakeMesh([("pp", 0, 2), ("dp", 1, 2)]))
    r.close()
    why = raises(ValueError, recorder, rank=1, world_size=4, parallel="pp=0/2,,dp=1/2")
    check("empty item" in why, why)
    why = raises(ValueError, recorder, rank=1, world_size=4, parallel="pp=0/2,pp=1/2")
    check("twice" in why, why)
    raises(ValueError, recorder, rank=1, world_size=8, parallel="pp=0/2,dp=1/2")  # 4 != 8
    raises(TypeError, recorder, rank=0, world_size=1, parallel=3.5)
    os.environ["SF_PARALLEL"] = "pp=0/2,dp=5/2"
    raises(ValueError, recorder, rank=0, world_size=4)  # the environment's, checked too
    del os.environ["SF_PARALLEL"]

    try:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:
        print("torch DeviceMesh: not in this torch, skipped")
        return
    store = os.path.join(tempfile.mkdtemp(prefix="sfpar-"), "store")
    dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("pp", "dp"))
        check(par.from_device_mesh(mesh) == "pp=0/1,dp=0/1", par.from_device_mesh(mesh))
        recorder(rank=0, world_size=1, parallel=mesh).close()
    finally:
        dist.destroy_process_group()
    print("ok")


if __name__ == "__main__":
    main()
