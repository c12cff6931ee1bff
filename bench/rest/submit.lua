-- SPDX-License-Identifier: Apache-2.0
-- wrk script: POST /v1/jobs with a small JobSpec (the cluster is kept full, so jobs queue).
wrk.method = "POST"
wrk.body = '{"name":"bench","command":["/bin/true"],"labels":{"bench":"rest"}}'
wrk.headers["Content-Type"] = "application/json"
