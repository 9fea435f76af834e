"""Sweeps on a real SLURM: a single-node cluster on this machine (tests/slurm_cluster.py) and
python train.py -m hydra/launcher=slurm through submitit. It skips where SLURM cannot start
(not root, slurm-wlm or munge missing) outside CI; with CI=true it fails."""
import json
import os
import subprocess
import sys
import time

import pytest

import slurm_cluster
from gsexp.sweep.results import read_csv
from test_sweep import sweep_dir_of
from test_train_run import REPO, TINY, run_train


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """The cluster, with SLURM_CONF in this process's environment (the sweeps' sbatch reads it)."""
    try:
        cluster = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.SlurmUnavailable as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"SLURM did not start and CI=true (.ci/run installs slurm-wlm munge): {err}")
        pytest.skip(f"SLURM did not start: {err}; CI runs this test")
    saved = os.environ.get("SLURM_CONF")
    os.environ.update(cluster.env)
    yield cluster
    cluster.stop()
    if saved is None:
        os.environ.pop("SLURM_CONF")
    else:
        os.environ["SLURM_CONF"] = saved


def slurm_launcher(cluster) -> list[str]:
    """hydra/launcher=slurm fitted to the test node: its partition, no GPUs, one core a job, no
    memory request (the defaults ask for a GPU node's 64 GB)."""
    return ["hydra/launcher=slurm", f"hydra.launcher.partition={cluster.partition}", "hydra.launcher.gpus_per_node=null",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=null", "hydra.launcher.timeout_min=5"]


def job_state(cluster, job_id: str) -> dict:
    """scontrol's record of a job (slurmctld keeps finished jobs for MinJobAge, 300 s)."""
    fields = cluster.run("scontrol", "show", "job", "-o", job_id).split()
    return dict(f.split("=", 1) for f in fields if "=" in f)


@pytest.mark.slow
def test_sweep_on_slurm(slurm, tmp_path):
    """A 2x2 sweep (seed x points) of tiny trainings, each a SLURM job: the jobs without SfM
    points fail inside their job (init from points), the others train; results.csv/md as for a
    local sweep, plus each job's SLURM id and stdout file."""
    tiny = [o for o in TINY if "num_points" not in o]
    run_train(["-m", *slurm_launcher(slurm), *tiny, "model.init=points", "iterations=10",
               "seed=0,1", "data.options.num_points=0,200"], tmp_path)
    sweep = sweep_dir_of(tmp_path)
    rows = read_csv(sweep / "results.csv")
    status = {(r["seed"], r["variant"]): r["status"] for r in rows}
    assert status == {(s, f"data.options.num_points={n}"): ("failed" if n == 0 else "ok")
                      for s in ("0", "1") for n in (0, 200)}
    assert all("no SfM points" in r["error"] for r in rows if r["status"] == "failed")
    assert all(r["psnr"] > 5 for r in rows if r["status"] == "ok")
    assert slurm.wait_for_empty_queue()  # submitit has each result before SLURM has the job's end
    ids = [r["slurm_job_id"] for r in rows]
    assert len(set(ids)) == 4 and all(i for i in ids)
    for r in rows:  # every id is a job this cluster ran to its end, on its partition
        state = job_state(slurm, r["slurm_job_id"])
        assert state["JobState"] == "COMPLETED" and state["Partition"] == slurm.partition, state
        log = sweep / r["slurm_log"]  # submitit's stdout file, beside its .err
        assert log.parent.parent == sweep / ".submitit"
        if r["status"] == "ok":
            assert "test PSNR" in log.read_text()
        else:
            assert "no SfM points" in log.with_suffix(".err").read_text()
    md = (sweep / "results.md").read_text()
    assert "## SLURM" in md and "4 of 4 jobs ran as SLURM jobs" in md
    assert all(f"| {r['slurm_job_id']} | {r['status']} | {r['slurm_log']} |" in md for r in rows)
    assert "## Did not finish" in md and "no SfM points" in md


@pytest.mark.slow
def test_scancel_interrupts_and_resume_continues(slurm, tmp_path):
    """A job cancelled with scancel mid-run checkpoints and reports status 'interrupted'; the same
    sweep submitted again (same sweep dir) with resume=auto continues from that checkpoint. The job
    returns its summary as its result, so the first launcher ends and lists it (without accounting,
    submitit cannot learn that a job that wrote no result has ended)."""
    sweep = tmp_path / "sweep"
    args = ["-m", *slurm_launcher(slurm), *TINY, "iterations=150", "checkpoint_every=20", "seed=0",
            f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "train.py", "-m", f"paths.root={tmp_path}", *args[1:]]
    launcher = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert slurm_cluster.wait_until(lambda: any(sweep.glob("0_*/checkpoints/step_*.pt")), 120), "no checkpoint"
        (job_id,) = slurm.run("squeue", "-h", "-o", "%i").split()
        slurm.run("scancel", job_id)
        assert slurm.wait_for_empty_queue(60)
        # the job returns its interrupted summary, so submitit has a result and the sweep ends
        assert slurm_cluster.wait_until(lambda: launcher.poll() is not None, 60), "the launcher kept waiting"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    (run,) = sweep.glob("0_*")
    path = run / "summary.json"
    assert path.exists(), "the cancelled job wrote no summary.json: nothing caught SLURM's SIGTERM (submitit ignores it)"
    assert json.loads(path.read_text())["status"] == "interrupted"
    assert launcher.returncode == 0 and "| interrupted |" in (sweep / "results.md").read_text()
    run_train([*args, "resume=auto"], tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["attempts"] == 2 and summary["iterations"] == 150
    assert "resumed from step" in (run / "train.log").read_text()


@pytest.mark.slow
def test_preemption_signal_requeues_and_resumes(slurm, tmp_path):
    """SLURM's warning before preemption (SIGUSR2, as submitit's sbatch --signal=USR2@90 has it
    sent; here by scancel): the job checkpoints its last step, submitit requeues it, and the job's second start
    resumes from that checkpoint by itself (no resume=auto given) and finishes; the launcher ends
    with the finished result."""
    sweep = tmp_path / "sweep"
    launcher_args = [a if not a.startswith("hydra.launcher.timeout_min=") else "hydra.launcher.timeout_min=60"
                     for a in slurm_launcher(slurm)]  # 60 min: submitit reads a signal this early as preemption
    cmd = [sys.executable, "train.py", "-m", f"paths.root={tmp_path}", *launcher_args, *TINY, "iterations=300",
           "checkpoint_every=20", "seed=0", f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONUNBUFFERED": "1"}
    launcher = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert slurm_cluster.wait_until(lambda: any(sweep.glob("0_*/checkpoints/step_*.pt")), 120), "no checkpoint"
        (job_id,) = slurm.run("squeue", "-h", "-o", "%i").split()
        slurm.run("scancel", "--signal=USR2", job_id)

        def requeued():
            state = job_state(slurm, job_id)
            return state.get("Restarts") == "1" and state["JobState"] == "PENDING"

        assert slurm_cluster.wait_until(requeued, 60), job_state(slurm, job_id)
        # SLURM holds a requeued job ~2 min; started at once, its new credential must still be
        # dated after the old one's revocation (whole seconds), or slurmd refuses the job
        time.sleep(3)
        slurm.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")
        assert slurm_cluster.wait_until(lambda: launcher.poll() is not None, 120), "the requeued job did not finish"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    (run,) = sweep.glob("0_*")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["attempts"] == 2 and summary["iterations"] == 300
    assert "resumed from step" in (run / "train.log").read_text()
    assert job_state(slurm, job_id)["Restarts"] == "1"
    assert launcher.returncode == 0 and "| ok |" in (sweep / "results.md").read_text()
