"""A real single-node SLURM for the tests: munged, slurmctld and slurmd on this machine, every
file (key, socket, state, spool, logs, slurm.conf) in one temporary folder. Debian's slurm-wlm
and munge; root only (slurmd starts jobs as their user). No cgroups, GPUs or accounting:
proctrack/linuxproc, task/none, accounting_storage/none (sacct answers "accounting storage is
disabled", so submitit learns a job is done from its result file alone)."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo")
PARTITION = "gsexp"


class SlurmUnavailable(RuntimeError):
    """SLURM cannot run here (not root, binaries missing, a daemon that did not start)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(root: Path, host: str, cpus: int) -> str:
    return f"""\
ClusterName=gsexptest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class Cluster:
    root: Path
    env: dict  # SLURM_CONF: what the clients (sbatch, squeue, submitit) need to find it
    partition: str = PARTITION
    cpus: int = 2

    def run(self, *cmd: str, check: bool = True) -> str:
        out = subprocess.run(cmd, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=60)
        if check and out.returncode != 0:
            raise SlurmUnavailable(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
        return out.stdout

    def logs(self) -> str:
        """The daemons' last log lines, for a failure message."""
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                         for p in sorted((self.root / "log").glob("*.log")))

    def wait_for_empty_queue(self, timeout_s: float = 30) -> bool:
        """Until no job is pending, running or completing (squeue lists none)."""
        return wait_until(lambda: not self.run("squeue", "-h", check=False).strip(), timeout_s)

    def stop(self, timeout_s: float = 30) -> None:
        """Cancel every job and wait for the queue to empty (a job's step still reports to
        slurmctld, through munged, after submitit has its result); then shut the daemons down,
        and kill whatever of this cluster outlives that: the daemons by their pid files, and its
        slurmstepd and job processes by the SLURM_CONF they inherited (this process excepted)."""
        self.run("scancel", "--partition", self.partition, check=False)
        self.wait_for_empty_queue(timeout_s)
        daemons = [pid_of(self.root / f"{name}.pid") for name in ("slurmctld", "slurmd")]
        self.run("scontrol", "shutdown", check=False)
        wait_until(lambda: not any(alive(p) for p in daemons), timeout_s)
        mine = f"SLURM_CONF={self.env['SLURM_CONF']}".encode()
        left = [int(p.name) for p in Path("/proc").iterdir()
                if p.name.isdigit() and int(p.name) != os.getpid() and mine in environ(p).split(b"\0")]
        for pid in [*daemons, *left]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        munged = pid_of(self.root / "munge" / "munged.pid")
        if alive(munged):
            os.kill(munged, signal.SIGTERM)


def pid_of(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    """Running (a daemon's exited process may linger as a zombie of an init that does not reap)."""
    try:
        return pid is not None and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def environ(proc: Path) -> bytes:
    try:
        return (proc / "environ").read_bytes()
    except OSError:
        return b""


def wait_until(done, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def start(root: Path, cpus: int = 2, timeout_s: float = 30) -> Cluster:
    """munged, slurmctld and slurmd under `root`; returns once the node is idle. Raises
    SlurmUnavailable with the reason (and the daemons' logs) where it cannot."""
    if os.geteuid() != 0:
        raise SlurmUnavailable("the test SLURM needs root (slurmd runs jobs as their user)")
    missing = [b for b in (*DAEMONS, *CLIENTS) if shutil.which(b) is None]
    if missing:
        raise SlurmUnavailable(f"{', '.join(missing)} not found (apt-get install slurm-wlm munge)")
    root = Path(root)
    for d in ("munge", "state", "spool", "log"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    host = socket.gethostname().split(".")[0]
    cpus = max(1, min(cpus, os.cpu_count() or 1))  # slurmd drains a node that claims more than it has
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf(root, host, cpus))
    cluster = Cluster(root, {"SLURM_CONF": str(conf)}, cpus=cpus)
    m = root / "munge"
    commands = [["munged", "--force", f"--key-file={key}", f"--socket={m}/munge.socket", f"--pid-file={m}/munged.pid",
                 f"--seed-file={m}/munged.seed", f"--log-file={root}/log/munged.log"],
                ["slurmctld", "-f", str(conf)], ["slurmd", "-f", str(conf)]]
    for cmd in commands:  # each daemonizes; a non-zero exit means it did not start
        out = subprocess.run(cmd, env={**os.environ, **cluster.env}, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            cluster.stop()
            raise SlurmUnavailable(f"{cmd[0]} did not start ({out.returncode}): {out.stderr.strip()}\n{cluster.logs()}")
    if wait_until(lambda: cluster.run("sinfo", "-h", "-N", "-o", "%t", check=False).strip() == "idle", timeout_s):
        return cluster
    state = cluster.run("sinfo", "-h", "-N", "-o", "%t", check=False).strip()
    cluster.stop()
    raise SlurmUnavailable(f"the node is not idle after {timeout_s:.0f} s (sinfo: {state!r})\n{cluster.logs()}")
