"""What a job run by SLURM records about itself (hydra/launcher=slurm, through submitit): its
SLURM job id and the file submitit sends its stdout to, so that the sweep's results.md can say
which SLURM job each row was and where to read its output."""
from __future__ import annotations

import os


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
