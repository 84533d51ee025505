"""Parallel coordinates for Recorder(parallel=...) (docs/CLIENT.md,
"Parallel coordinates").

The Recorder takes the SF_PARALLEL text ("pp=1/4,tp=0/8,dp=3/16"), a dict, or
a torch DeviceMesh; the C library parses the text strictly and checks that
the sizes multiply to the world size. These helpers only spell the text:

    parallel_text(pp=(1, 4), tp=(0, 8), dp=(3, 16), schedule="1f1b")
    from_dict({"pp": (1, 4), "dp": (3, 16)})
    from_device_mesh(mesh)          # dims named pp, tp, dp, cp, ep
"""

DIMS = ("pp", "tp", "dp", "cp", "ep")

# Names a DeviceMesh's dims often carry, mapped onto ours.
_ALIASES = {"pipeline": "pp", "pp": "pp", "tensor": "tp", "tp": "tp", "data": "dp", "dp": "dp",
            "replicate": "dp", "shard": "dp", "dp_shard": "dp", "dp_replicate": "dp",
            "context": "cp", "cp": "cp", "expert": "ep", "ep": "ep"}


def _pair(name, value):
    try:
        index, size = value
        index, size = int(index), int(size)
    except (TypeError, ValueError):
        raise ValueError("stagefrontier: %s must be (index, size), got %r" % (name, value))
    if not 0 <= index < size:
        raise ValueError("stagefrontier: %s index %d not in 0..%d" % (name, index, size - 1))
    return index, size


def parallel_text(pp=None, tp=None, dp=None, cp=None, ep=None, schedule=None):
    """The SF_PARALLEL text of the given (index, size) pairs and schedule
    ("gpipe", "1f1b" or "interleaved:V")."""
    given = dict(pp=pp, tp=tp, dp=dp, cp=cp, ep=ep)
    items = []
    for name in DIMS:
        if given[name] is not None:
            items.append("%s=%d/%d" % ((name,) + _pair(name, given[name])))
    if not items:
        raise ValueError("stagefrontier: parallel coordinates name no dimension")
    if schedule is not None:
        items.append("schedule=%s" % schedule)
    return ",".join(items)


def from_dict(coords):
    """{"pp": (1, 4), "dp": (3, 16), "schedule": "1f1b"} as the text. Keys
    outside pp, tp, dp, cp, ep and schedule are refused."""
    unknown = set(coords) - set(DIMS) - {"schedule"}
    if unknown:
        raise ValueError("stagefrontier: unknown parallel dimensions %s" % sorted(unknown))
    return parallel_text(**coords)


def from_device_mesh(mesh, schedule=None):
    """The text of this process's place in a torch DeviceMesh, whose dim
    names say which dimension each is (pp, tp, dp, cp, ep, or the common
    spellings "pipeline", "tensor", "data", "replicate", "shard"). Two mesh
    dims that both map to dp (HSDP's replicate and shard) multiply into one."""
    names = getattr(mesh, "mesh_dim_names", None)
    if not names:
        raise ValueError("stagefrontier: the DeviceMesh needs mesh_dim_names")
    coords = {}
    for name in names:
        dim = _ALIASES.get(name)
        if dim is None:
            raise ValueError("stagefrontier: mesh dim %r is none of %s" % (name, DIMS))
        index, size = int(mesh.get_local_rank(name)), int(mesh.size(name))
        if dim in coords:  # row-major: the earlier mesh dim is the outer one
            outer_index, outer_size = coords[dim]
            index, size = outer_index * size + index, outer_size * size
        coords[dim] = (index, size)
    return parallel_text(schedule=schedule, **coords)


def to_text(value):
    """What Recorder(parallel=value) sends: text as given, a dict through
    from_dict, anything with mesh_dim_names through from_device_mesh."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return from_dict(value)
    if hasattr(value, "mesh_dim_names"):
        return from_device_mesh(value)
    raise TypeError("stagefrontier: parallel= takes a str, a dict or a DeviceMesh, not %s"
                    % type(value).__name__)
