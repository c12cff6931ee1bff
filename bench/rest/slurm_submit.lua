-- SPDX-License-Identifier: Apache-2.0
-- wrk script: POST /slurm/v0.0.38/job/submit, the peer of ringd's POST /v1/jobs, with the
-- body run.sh puts in SLURM_SUBMIT_BODY (the same one it seeds the queue with).
wrk.method = "POST"
wrk.body = os.getenv("SLURM_SUBMIT_BODY")
wrk.headers["Content-Type"] = "application/json"
