"""Rank identity from launchers: four real client processes started as srun
starts them (Slurm's variables only) form one job of four ranks; Open MPI's
variables win over Slurm's; a process with no rank at all says so once."""

import json
import os
import subprocess

from sfdtest import TIMEOUT, Sfd, check, wait_for

CLIENT = os.environ.get("SF_CLIENT_JOB")
STEPS = 20
CONF = """[gates]
warmup_steps = 0
window_steps = 10
"""
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SF_JOB_ID", "TORCHELASTIC_RUN_ID")


def launcher_env(extra):
    env = {k: v for k, v in os.environ.items()
           if k not in LAUNCHER_VARS and not k.startswith(("SLURM_", "OMPI_"))}
    env.update(extra)
    return env


def launch(sfd, envs, job="-"):
    """Starts one client per environment, with the identity left to it."""
    procs = [subprocess.Popen([CLIENT, sfd.ingest, job, "-1", "-1", str(STEPS), "-2", "0", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=launcher_env(e)) for e in envs]
    outs = []
    for p in procs:
        o, e = p.communicate(timeout=TIMEOUT * 2)
        check(p.returncode == 0, "client rc %d: %s" % (p.returncode, e.decode()))
        outs.append((o.decode(), e.decode()))
    return outs


def ranks_of(sfd, job):
    p = sfd.sfctl("ranks", job, "--json", check_rc=None)
    if p.returncode != 0:
        return None
    return {r["rank"]: r["records"] for r in json.loads(p.stdout)["ranks"]}


def main():
    if not CLIENT:
        print("skipped: the client library is not part of this build")
        return
    sfd = Sfd(CONF)
    try:
        slurm = [{"SLURM_JOB_ID": "4242", "SLURM_PROCID": str(i), "SLURM_NTASKS": "4",
                  "SLURM_LOCALID": str(i)} for i in range(4)]
        outs = launch(sfd, slurm)
        check(all("no rank" not in e for _, e in outs), "srun ranks reported missing")
        want = {r: STEPS for r in range(4)}
        wait_for(lambda: ranks_of(sfd, "4242") == want, "four srun ranks with every record")
        check(sfd.rejected("duplicate_rank") == 0, "duplicate_rank under srun")

        # mpirun inside an allocation: Open MPI's ranks, not the one Slurm task.
        ompi = [{"SLURM_JOB_ID": "4343", "SLURM_PROCID": "0", "SLURM_NTASKS": "1",
                 "SLURM_LOCALID": "0", "OMPI_COMM_WORLD_RANK": str(i),
                 "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": str(i)}
                for i in range(2)]
        launch(sfd, ompi)
        wait_for(lambda: ranks_of(sfd, "4343") == {0: STEPS, 1: STEPS}, "two mpirun ranks")

        (_, err), = launch(sfd, [{"SF_JOB_ID": "norank"}])
        check(err.count("no rank in the environment") == 1, "no-rank warning: %r" % err)
        check(sfd.rejected("duplicate_rank") == 0, "duplicate_rank")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()


if __name__ == "__main__":
    main()
