/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spec_yaml.h - job specs written in YAML, for ringctl submit -f spec.yaml.
 *
 * The first document of the file becomes JSON with YAML 1.2's core schema: plain scalars
 * null, ~ and the empty scalar are null; true/false booleans; decimal, 0x and 0o numbers
 * integers; decimal fractions and .inf/.nan reals; everything else, and every quoted
 * scalar, a string. Mapping keys must be scalars and must not repeat; anchors and aliases
 * are followed.
 */
#ifndef RINGCTL_SPEC_YAML_H
#define RINGCTL_SPEC_YAML_H

#include <jansson.h>
#include <stddef.h>

/* The document as a new JSON value, or NULL with "path:line:column: what" in err. */
json_t *spec_yaml_load_file(const char *path, char *err, size_t errlen);
/* The same for len bytes of text (need not end in NUL), named name in err. */
json_t *spec_yaml_load_string(const char *text, size_t len, const char *name, char *err,
                              size_t errlen);

#endif /* RINGCTL_SPEC_YAML_H */
