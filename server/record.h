/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.h - a test aid: with RINGD_RECORD_RESPONSES=FILE in its environment, ringd appends
 * one JSON line per response it sends to FILE:
 *
 *   {"method": "GET", "target": "/v1/jobs/x?rank=0", "status": 200,
 *    "content_type": "application/json", "body": {...}, "kind": "json"}
 *
 * kind is "json" (body holds the parsed answer; "body_text" instead when it does not parse),
 * "empty" (no body), "file" (a log or a backup, not copied), "stream" (SSE or a log follow,
 * not copied) or "text" (/metrics, not copied). The integration suites turn it on
 * (tests/integration/lib.sh) and tests/contract/check_responses.py validates every line
 * against api/openapi.json. Bodies hold whatever the API answered, tokens included: it is
 * for test runs only, which is why it is an environment variable and not a ringd.conf key.
 */
#ifndef RINGD_RECORD_H
#define RINGD_RECORD_H

#include "api/api.h"

struct record;

/*
 * Opens the file that RINGD_RECORD_RESPONSES names (0600, appended to). Returns 0 with
 * *out NULL when the variable is unset or empty; 0 with *out set; or -1 with err when the
 * file cannot be opened (a test that asked for a record must not silently get none).
 */
int record_open(struct record **out, struct error *err);
/* Closes; accepts NULL. */
void record_close(struct record *r);
/*
 * Appends resp (borrowed; its body as resp->json_text or resp->body) as the answer to
 * method target (the request target as sent). content_type is what the response carries
 * (NULL: none); kind as above. A write that fails is reported on stderr once. Thread-safe;
 * a NULL r does nothing.
 */
void record_response(struct record *r, const char *method, const char *target,
                     const struct api_response *resp, const char *content_type, const char *kind);

#endif /* RINGD_RECORD_H */
