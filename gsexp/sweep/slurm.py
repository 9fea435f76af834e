"""A job run by SLURM (hydra/launcher=slurm, through submitit): what it records about itself (its
SLURM job id and the file submitit sends its stdout to, so that the sweep's results.md can say
which SLURM job each row was and where to read its output), and how it is requeued: SLURM's
warning before preemption or the time limit goes to submitit, which requeues the job, and the
job's next start resumes."""
from __future__ import annotations

import os
import signal


def job_record() -> dict:
    """{"slurm_job_id", "slurm_log"} inside a SLURM job (slurm_log only under submitit), else {}."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if job_id is None:
        return {}
    record = {"slurm_job_id": job_id}
    if "SUBMITIT_FOLDER" in os.environ:  # set by submitit's job runner
        import submitit

        record["slurm_log"] = str(submitit.JobEnvironment().paths.stdout)
    return record


def requeued() -> bool:
    """This SLURM job ran before and was requeued (SLURM counts the restarts)."""
    return int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0


def requeue_warning() -> int:
    """The signal submitit has SLURM send before preemption or the time limit (sbatch
    --signal=USR2@90: SIGUSR2 unless SUBMITIT_PREEMPT_SIGNAL names another, as submitit reads it)."""
    return getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), signal.SIGUSR2)


def hands_over(signum: int) -> bool:
    """Whether a job stopped by `signum` should hand over to submitit, which requeues it: a
    submitit job on SLURM, sent SLURM's warning."""
    return signum == requeue_warning() and "SLURM_JOB_ID" in os.environ and "SUBMITIT_FOLDER" in os.environ
