#!/usr/bin/python3
"""A small transformer trained under DistributedDataParallel (Gloo, CPU).

Owns the training job of the real-workload evaluation: the model, the data,
the loop and its stagefrontier instrumentation, plus a launcher that starts
one process per rank (torchrun-style environment). It must not compute any
accounting: stage records go to sfd through the binding only. With --csv the
job also writes its own per-rank stage durations (wide replay CSV) for
offline checks; with --profile it also runs under torch.profiler (CPU) and
writes one Chrome trace per rank for `sfctl import kineto`.

Run:  PYTHONPATH=<build>/python /usr/bin/python3 bench/ddp/train.py \
          --ranks 4 --fault data_wait --seed 1 --magnitude 0.5
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

STAGES = ["data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
          "callbacks.cpu_wall", "optim.step_cpu_wall"]
RESIDUAL = "step.other_cpu_wall"
MICRO = STAGES[:3]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4, help="world size (launcher)")
    p.add_argument("--fault", default="none", help="fault row (see faults.py)")
    p.add_argument("--seed", type=int, default=0, help="picks the hidden rank")
    p.add_argument("--magnitude", type=float, default=0.5,
                   help="delay as a fraction of the clean median step")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=100, help="measured steps")
    p.add_argument("--phases", default="B",
                   help="fault on/off per measured block, e.g. ABA (A = off)")
    p.add_argument("--accumulation", type=int, default=1)
    p.add_argument("--zero", action="store_true", help="ZeroRedundancyOptimizer")
    p.add_argument("--instrument", choices=["on", "off"], default="on")
    p.add_argument("--arrivals", choices=["on", "off"], default="on",
                   help="arrival points: backward synchronizing, marked by the DDP comm "
                        "hook; callbacks too when the row has a barrier there")
    p.add_argument("--issue-marks", choices=["on", "off"], default="on",
                   help="off: the backward's arrival is marked by hand at the last bucket, "
                        "without the binding's hook, so no collective's issue is marked "
                        "(an old client)")
    p.add_argument("--broadcast-buffers", choices=["on", "off"], default="off",
                   help="DDP's per-forward buffer broadcast (on: the job of the routing "
                        "tables measured before arrival points existed)")
    p.add_argument("--interleave", type=int, default=0, metavar="STEPS",
                   help="overhead mode: rotate off / on with sfd / on without sfd in "
                        "blocks of STEPS measured steps inside this one job")
    p.add_argument("--absent-socket", default=None,
                   help="with --interleave: an ingest path nothing listens on")
    p.add_argument("--job-id", default=None)
    p.add_argument("--csv", default=None, help="directory for per-rank CSVs")
    p.add_argument("--result", default=None, help="rank 0 writes a JSON summary here")
    p.add_argument("--profile", default=None,
                   help="directory for per-rank torch.profiler Chrome traces (rankN.json)")
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    return p.parse_args(argv)


# ---------------------------------------------------------------------------
# launcher

def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, argv):
    """Start one process per rank with torchrun's environment; wait for all.

    Returns the first non-zero exit code, or 0. A rank that dies takes the
    others down (Gloo would otherwise hang them on the next collective).
    """
    port = _free_port()
    job = args.job_id or "ddp-%d-%d" % (os.getpid(), port)
    procs = []
    for r in range(args.ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.ranks),
                   LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(args.ranks),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   SF_JOB_ID=job, OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv,
                                      env=env))
    rc = 0
    live = list(procs)
    while live:
        for p in list(live):
            code = p.poll()
            if code is None:
                continue
            live.remove(p)
            if code != 0 and rc == 0:
                rc = code
                for q in live:
                    q.terminate()
        if live:
            time.sleep(0.05)
    return rc


# ---------------------------------------------------------------------------
# model and data

def build_model(torch, args, vocab):
    nn = torch.nn

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, args.d_model)
            self.pos = nn.Parameter(torch.zeros(args.seq, args.d_model))
            layer = nn.TransformerEncoderLayer(args.d_model, 4, 2 * args.d_model,
                                               dropout=0.0, batch_first=True)
            self.blocks = nn.TransformerEncoder(layer, args.layers)
            self.head = nn.Linear(args.d_model, vocab)
            mask = torch.triu(torch.full((args.seq, args.seq), float("-inf")), 1)
            self.register_buffer("mask", mask)

        def forward(self, x):
            h = self.embed(x) + self.pos
            h = self.blocks(h, mask=self.mask)
            return self.head(h)

    return TinyLM()


class MarkovText(object):
    """Token sequences from a fixed random bigram chain: learnable, cheap."""

    def __init__(self, torch, vocab, seq, seed):
        self.torch = torch
        g = torch.Generator()
        g.manual_seed(1234)
        logits = torch.randn(vocab, vocab, generator=g) * 3.0
        self.trans = torch.softmax(logits, dim=1)
        self.seq = seq
        self.seed = seed

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        torch = self.torch
        g = torch.Generator()
        g.manual_seed(self.seed * 1000003 + i)
        toks = [int(torch.randint(self.trans.shape[0], (1,), generator=g))]
        rows = torch.multinomial(self.trans, self.seq, replacement=True, generator=g)
        for _ in range(self.seq):
            toks.append(int(rows[toks[-1], len(toks) - 1]))
        t = torch.tensor(toks)
        return t[:-1], t[1:]


# ---------------------------------------------------------------------------
# instrumentation

class NullRecorder(object):
    """Instrumentation off: the same calls, doing nothing."""

    class _Ctx(object):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    _ctx = _Ctx()

    def step(self, *_a):
        return self._ctx

    def stage(self, _name):
        return self._ctx

    def data(self, loader):
        return loader

    def sync(self):
        return self._ctx

    def close(self):
        pass


class CsvTap(object):
    """Wraps a recorder and also keeps this rank's own stage durations.

    Used only with --csv, for offline replay of exactly what the job timed.
    The step wall runs from the start of the batch fetch to the step's end,
    matching the charge of a data wait to the consuming step.
    """

    def __init__(self, rec, names):
        self.rec = rec
        self.names = names
        self.rows = []
        self.cur = None
        self.fetch_ns = 0
        self.fetch_start = None

    def data(self, loader):
        inner = self.rec.data(loader)
        tap = self

        class It(object):
            def __iter__(self):
                it = iter(inner)
                while True:
                    t0 = time.perf_counter_ns()
                    try:
                        b = next(it)
                    except StopIteration:
                        return
                    tap.fetch_start = t0
                    tap.fetch_ns = time.perf_counter_ns() - t0
                    yield b

        return It()

    def step(self, *a):
        tap = self
        inner = self.rec.step(*a)

        class Ctx(object):
            def __enter__(self):
                tap.cur = dict.fromkeys(tap.names, 0)
                start = time.perf_counter_ns()
                if tap.fetch_start is not None:
                    tap.cur["data.next_wait"] = tap.fetch_ns
                    start = tap.fetch_start
                    tap.fetch_start = None
                self.start = start
                inner.__enter__()
                return self

            def __exit__(self, *exc):
                r = inner.__exit__(*exc)
                tap.cur["__wall"] = time.perf_counter_ns() - self.start
                tap.rows.append(tap.cur)
                return r

        return Ctx()

    def stage(self, name):
        tap = self
        inner = self.rec.stage(name)

        class Ctx(object):
            def __enter__(self):
                inner.__enter__()
                self.t0 = time.perf_counter_ns()
                return self

            def __exit__(self, *exc):
                tap.cur[name] = tap.cur.get(name, 0) + time.perf_counter_ns() - self.t0
                return inner.__exit__(*exc)

        return Ctx()

    def sync(self):
        return self.rec.sync()

    def close(self):
        self.rec.close()

    def write(self, path, rank, first_step):
        with open(path, "w") as f:
            f.write(",".join(["step", "rank"] + self.names + [RESIDUAL, "step_wall"]) + "\n")
            for i, row in enumerate(self.rows):
                d = [row[n] for n in self.names]
                resid = max(0, row["__wall"] - sum(d))
                cells = ["%.9f" % (x / 1e9) for x in d + [resid, row["__wall"]]]
                f.write("%d,%d," % (first_step + i, rank) + ",".join(cells) + "\n")


class ProfileTap(object):
    """Wraps a recorder and marks the same work in torch.profiler's trace.

    Every stage becomes a record_function range named after the stage, and
    the batch fetch a "data.next_wait" range, so `sfctl import kineto` maps
    them with its built-in mapping. Steps are "ProfilerStep#N" ranges (see
    run_rank): the name Kineto's prof.step() writes, which this Debian torch
    build (legacy profiler, no Kineto) does not emit by itself.
    """

    def __init__(self, rec, torch):
        self.rec = rec
        self.rf = torch.profiler.record_function

    def data(self, loader):
        inner = self.rec.data(loader)
        rf = self.rf

        class It(object):
            def __iter__(self):
                it = iter(inner)
                while True:
                    with rf("data.next_wait"):
                        try:
                            b = next(it)
                        except StopIteration:
                            return
                    yield b

        return It()

    def step(self, *a):
        return self.rec.step(*a)

    def stage(self, name):
        inner = self.rec.stage(name)
        rf = self.rf(name)

        class Ctx(object):
            def __enter__(self):
                inner.__enter__()
                rf.__enter__()
                return self

            def __exit__(self, *exc):
                rf.__exit__(*exc)
                return inner.__exit__(*exc)

        return Ctx()

    def sync(self):
        return self.rec.sync()

    def close(self):
        self.rec.close()

    def write(self, *a):
        self.rec.write(*a)


def stage_names(k):
    if k <= 1:
        return list(STAGES)
    names = ["%s@%d" % (s, m) for m in range(k) for s in MICRO]
    return names + STAGES[3:]


def sync_stages(args, inj):
    """The stages that end in a collective, when arrival points are on:
    backward (DDP's gradient all-reduce, marked by the comm hook) and, in a
    row whose callbacks end in a barrier, callbacks (marked by rec.sync()).
    Accumulation runs keep the plain schema."""
    if args.arrivals == "off" or args.instrument == "off" or args.accumulation > 1 or \
            args.interleave:
        return []
    return ["model.backward_cpu_wall"] + (["callbacks.cpu_wall"] if inj.needs_barrier() else [])


def make_recorder(args, rank, world, sync=()):
    """Returns (recorder, the stagefrontier Recorder or None)."""
    names = stage_names(args.accumulation)
    core = None
    if args.instrument == "off":
        rec = NullRecorder()
    else:
        import stagefrontier as sf
        kw = {}
        if args.accumulation > 1:
            kw["accumulation"] = args.accumulation
        if sync:
            kw["sync_stages"] = list(sync)
        rec = core = sf.Recorder(**kw)
    if args.csv:
        rec = CsvTap(rec, names)
    if args.profile:
        import torch
        rec = ProfileTap(rec, torch)
    return rec, core


# ---------------------------------------------------------------------------
# the loop

def run_rank(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import faults

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)

    vocab = 64
    model = build_model(torch, args, vocab)
    hidden = faults.faulty_rank(args.seed, world)
    inj = faults.Injector(args.fault, enabled=(rank == hidden))
    inj.install_model_hooks(model)
    # The only buffer is the constant causal mask: broadcasting it before
    # every forward (DDP's default) would put a collective at the start of
    # the forward stage, where a slow loader's delay is absorbed before any
    # arrival point (docs/EVALUATION.md, "Straggler verdicts").
    ddp = DDP(model, broadcast_buffers=args.broadcast_buffers == "on")
    sync = sync_stages(args, inj)
    rec, core = make_recorder(args, rank, world, sync)
    wrap = None
    if "model.backward_cpu_wall" in sync:
        import stagefrontier as sf

        def wrap(inner):
            if args.issue_marks == "on":
                return sf.ddp_comm_hook(core, inner)

            def arrival_only(state, bucket):
                if bucket.is_last():
                    core.arrive()
                return inner(state, bucket)
            return arrival_only
    inj.install_comm_hook(ddp, wrap)

    if args.zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=1e-3)
    else:
        opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)

    data = MarkovText(torch, vocab, args.seq, seed=rank)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=False,
                                         num_workers=0)
    K = max(1, args.accumulation)
    total = args.warmup + args.steps
    nphase = max(1, len(args.phases))
    per_phase = -(-args.steps // nphase)

    if args.interleave:
        recs, iters = interleaved_recorders(args, inj.wrap_loader(loader))
        rec, batches = recs["off"], iters["off"]
        blocks = []
    elif K == 1:
        batches = iter(rec.data(inj.wrap_loader(loader)))
    else:
        # Each micro-batch fetch is its own accumulation-indexed stage.
        micro = iter(inj.wrap_loader(loader))
    walls = []
    losses = []
    t_measure = None
    prof = None
    for step in range(total):
        if step == args.warmup:
            # Agree on the clean median step, then arm the fault on the
            # hidden rank only. Outside any step: not part of the records.
            med = torch.tensor([statistics.median(walls[2:] or walls)])
            dist.all_reduce(med, op=dist.ReduceOp.MAX)
            median_step = float(med.item())
            inj.arm(args.magnitude * median_step, K)
            dist.barrier()
            t_measure = time.perf_counter()
            if args.profile:
                # Measured steps only: warmup steps are in no report.
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
                prof.__enter__()
        if step >= args.warmup:
            phase = args.phases[min((step - args.warmup) // per_phase, nphase - 1)]
            inj.active = (phase == "B")
            if args.interleave and (step - args.warmup) % args.interleave == 0:
                setting = block_setting((step - args.warmup) // args.interleave)
                close_block(dist, blocks)
                blocks.append({"setting": setting, "steps": 0, "t0": time.perf_counter()})
                rec, batches = recs[setting], iters[setting]
            if args.interleave:
                blocks[-1]["steps"] += 1
        t0 = time.perf_counter()
        prof_step = None
        if prof is not None:
            prof_step = torch.profiler.record_function("ProfilerStep#%d" % step)
            prof_step.__enter__()
        if K == 1:
            xb, yb = next(batches)
        ctx = rec.step()
        ctx.__enter__()
        for m in range(K):
            suffix = "" if K == 1 else "@%d" % m
            if K > 1:
                with rec.stage("data.next_wait" + suffix):
                    xb, yb = next(micro)
            inj.begin_step()
            sync_ctx = ddp.no_sync() if m < K - 1 else _nullctx()
            with sync_ctx:
                with rec.stage("model.fwd_loss_cpu_wall" + suffix):
                    out = ddp(xb)
                    loss = torch.nn.functional.cross_entropy(out.reshape(-1, vocab),
                                                             yb.reshape(-1)) / K
                inj.begin_backward()
                with rec.stage("model.backward_cpu_wall" + suffix):
                    loss.backward()
        with rec.stage("callbacks.cpu_wall"):
            losses.append(float(loss.detach()) * K)
            inj.callback()
            if inj.needs_barrier():
                if "callbacks.cpu_wall" in sync:
                    with rec.sync():
                        dist.barrier()
                else:  # without arrival points a mark would break the contract
                    dist.barrier()
        with rec.stage("optim.step_cpu_wall"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        ctx.__exit__(None, None, None)
        if prof_step is not None:
            prof_step.__exit__(None, None, None)
        walls.append(time.perf_counter() - t0)

    if args.interleave:
        close_block(dist, blocks)
        for r in recs.values():
            r.close()
    dist.barrier()
    elapsed = time.perf_counter() - t_measure
    rec.close()
    if prof is not None:
        prof.__exit__(None, None, None)
        os.makedirs(args.profile, exist_ok=True)
        prof.export_chrome_trace(os.path.join(args.profile, "rank%d.json" % rank))
        # Exports take unequal times: leave together, or a rank's exit breaks
        # the Gloo connections of ranks still writing.
        dist.barrier()
    if args.csv:
        os.makedirs(args.csv, exist_ok=True)
        rec.write(os.path.join(args.csv, "rank%d.csv" % rank), rank, 0)
    if rank == 0:
        res = {"ranks": world, "fault": args.fault, "seed": args.seed,
               "magnitude": args.magnitude, "hidden_rank": hidden,
               "median_step_s": median_step, "delay_s": args.magnitude * median_step
               if args.fault != "none" else 0.0,
               "steps": args.steps, "elapsed_s": elapsed,
               "steps_per_s": args.steps / elapsed,
               "loss_first": losses[0], "loss_last": statistics.mean(losses[-10:]),
               "instrument": args.instrument, "accumulation": K, "zero": args.zero}
        if args.interleave:
            res["blocks"] = blocks
        line = json.dumps(res)
        if args.result:
            with open(args.result, "w") as f:
                f.write(line + "\n")
        else:
            print(line)
    # Leave without tearing the process group down: in torch 1.13 the Gloo
    # destructor can join a worker thread that waits for the GIL held by the
    # destructor's caller, hanging the rank at exit. Everything worth keeping
    # (records, CSVs, the summary) is flushed by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


SETTINGS = ["off", "on_sfd", "on_nosfd"]


def block_setting(b):
    """Blocks come in triples; each triple rotates the order of the three
    settings so that none always runs first (drift and neighbours cancel)."""
    triple, pos = divmod(b, 3)
    return SETTINGS[(pos + triple) % 3]


def close_block(dist, blocks):
    """Aligns the ranks, then closes the open block's wall time."""
    dist.barrier()
    if blocks and "elapsed_s" not in blocks[-1]:
        blocks[-1]["elapsed_s"] = time.perf_counter() - blocks[-1].pop("t0")


def interleaved_recorders(args, loader):
    """Three instrumentations of one job: none, a Recorder on sfd's socket
    (SF_SOCKET), and a Recorder on a socket nothing listens on. They share
    one underlying batch stream; each wraps it with its own data timing."""
    import stagefrontier as sf
    shared = iter(loader)

    def feed():
        while True:
            yield next(shared)

    recs = {"off": NullRecorder(), "on_sfd": sf.Recorder(),
            "on_nosfd": sf.Recorder(socket=args.absent_socket)}
    iters = {k: iter(r.data(feed())) for k, r in recs.items()}
    return recs, iters


class _nullctx(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    argv = sys.argv[1:]
    args = parse_args(argv)
    if "RANK" not in os.environ:
        return launch(args, argv)
    return run_rank(args)


if __name__ == "__main__":
    sys.exit(main())
