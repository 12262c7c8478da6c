/* SPDX-License-Identifier: Apache-2.0 */
/* yaml.h - a small reader for the YAML that configuration files of other
 * tools are written in (a kubeconfig: store_k8s.c), into a cJSON tree.
 *
 * The subset: block mappings and block sequences (a sequence may sit at
 * its key's indentation, as kubectl writes them), "- key: value" items,
 * plain, 'single-quoted' and "double-quoted" scalars on one line, flow
 * collections ([a, b], {k: v}; they may span lines), comments, one leading
 * "---". A document that starts with '{' or '[' is JSON (kubeconfigs
 * written as JSON). Plain scalars become strings, except true/false
 * (booleans) and null, ~ and an empty value (null); quoted ones are always
 * strings; numbers stay strings (callers convert what they need).
 *
 * Refused, with a message naming the line: block scalars ('|', '>'),
 * anchors, aliases and tags ('&', '*', '!'), multi-line plain or quoted
 * scalars, tabs in indentation, duplicate keys, more than one document,
 * nesting deeper than 64 levels.
 */
#ifndef S3LECT_YAML_H
#define S3LECT_YAML_H

#include <stddef.h>

struct cJSON;

/* Parses text[0..len) into a tree (free with cJSON_Delete), or NULL with a
 * one-line reason in err ("line 3: ..."); out of memory says so. */
struct cJSON *u_yaml_parse(const char *text, size_t len, char *err, size_t errlen);

#endif
