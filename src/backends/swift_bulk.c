// SPDX-License-Identifier: MIT
/*
 * swift_bulk.c - deleting many objects of the swift backend at once: the
 * bulk middleware's "POST /?bulk-delete" (a newline-separated list of
 * percent-encoded "/container/object" paths, answered with JSON: "Number
 * Deleted", "Number Not Found", "Response Status", "Errors" as
 * [[path, status], ...]) when the cluster's /info offers bulk_delete, in
 * batches of its max_deletes_per_request; else one DELETE per object.
 *
 * The backend interface has no multi-key delete (a directory's removal is
 * one del per key, from the daemon), so this serves the segments of large
 * objects: a failed upload's, an overwritten or deleted object's.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/swift_internal.h"

/* A status line "409 Conflict" (or a bare number) into its code; 0 when it
 * is not one. */
static long status_of(const char *s)
{
	long v = 0;
	int i;

	for (i = 0; i < 3; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	return s[3] == '\0' || s[3] == ' ' ? v : 0;
}

static unsigned long count_of(json_t *root, const char *name)
{
	json_t *v = json_object_get(root, name);

	return json_is_integer(v) && json_integer_value(v) >= 0
		       ? (unsigned long)json_integer_value(v)
		       : 0;
}

int swift__bulk_answer(const char *body, size_t len, const char *backend,
		       unsigned long *deleted, unsigned long *not_found,
		       struct smux_error *err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *st, *errs, *e;
	long status;
	int rc = 0;

	*deleted = *not_found = 0;
	if (!json_is_object(root)) {
		json_decref(root);
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
				      "bulk delete: the answer is not a JSON "
				      "object");
	}
	*deleted = count_of(root, "Number Deleted");
	*not_found = count_of(root, "Number Not Found");
	st = json_object_get(root, "Response Status");
	errs = json_object_get(root, "Errors");
	status = json_is_string(st) ? status_of(json_string_value(st)) : 0;
	if (!status || (errs && !json_is_array(errs))) {
		rc = smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
				    "bulk delete: the answer has no valid "
				    "\"Response Status\" or \"Errors\"");
		goto out;
	}
	if (json_array_size(errs) > 0) {
		/* [path, status] for each object that failed */
		json_t *p, *s;
		char what[320];
		long es;

		e = json_array_get(errs, 0);
		p = json_array_get(e, 0);
		s = json_array_get(e, 1);
		es = json_is_string(s) ? status_of(json_string_value(s)) : 0;
		snprintf(what, sizeof(what),
			 "bulk delete: %zu object(s) not deleted, first "
			 "\"%.200s\" (%.40s)",
			 json_array_size(errs),
			 json_is_string(p) ? json_string_value(p) : "?",
			 json_is_string(s) ? json_string_value(s) : "?");
		/* an object's 404 is not a failure of a delete: the answer
		 * counts those apart, so any status here is one */
		rc = smux__http_status_error(err, es && es != 404 ? es : 502,
					     true, backend, what);
		goto out;
	}
	if (status < 200 || status > 299)
		rc = smux__http_status_error(err, status, true, backend,
					     "bulk delete");
out:
	json_decref(root);
	return rc;
}

/* One request for paths [from, to): its body is their escaped lines. */
static int bulk_batch(struct swiftb *s, const struct smux_ctx *ctx,
		      char *const *paths, size_t from, size_t to,
		      struct smux_error *err)
{
	static const char *const hdrs[] = {"Content-Type: text/plain",
					   "Accept: application/json", NULL};
	struct smux__http_req req = {.method = "POST"};
	struct smux__http_resp resp;
	struct smux_source body;
	struct smux_sink sink;
	unsigned long del, nf;
	size_t cap = 1, len = 0;
	unsigned char *ans;
	char *text;
	size_t alen = 0;
	int rc;

	for (size_t i = from; i < to; i++)
		cap += 3 * strlen(paths[i]) + 1;
	text = malloc(cap);
	if (!text)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	for (size_t i = from; i < to; i++) {
		long n = smux__http_escape(paths[i], strlen(paths[i]), true,
					   text + len, cap - len);

		if (n < 0) {
			free(text);
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      s->base.name, NULL);
		}
		len += (size_t)n;
		text[len++] = '\n';
	}
	smux_source_buf(&body, text, len);
	smux_sink_dyn(&sink);
	req.headers = hdrs;
	req.body = &body;
	req.sink = &sink;
	req.max_body = SWIFT_BULK_ANSWER_MAX;
	req.what = "POST bulk-delete";
	atomic_fetch_add(&s->n_bulk, 1);
	rc = swift__do_in(s, ctx, &req, NULL, "/?bulk-delete", &resp, err);
	free(text);
	if (rc < 0) {
		smux_sink_release(&sink);
		return rc;
	}
	ans = smux_sink_dyn_take(&sink, &alen);
	rc = swift__bulk_answer(ans ? (const char *)ans : "", alen,
				s->base.name, &del, &nf, err);
	free(ans);
	return rc;
}

/* One DELETE of "/container/object". */
static int delete_one(struct swiftb *s, const struct smux_ctx *ctx,
		      const char *path, struct smux_error *err)
{
	struct smux__http_req req = {.method = "DELETE"};
	struct smux__http_resp resp;
	size_t cap = 3 * strlen(path) + 1;
	char what[256], *esc = malloc(cap);
	int rc;

	if (!esc || smux__http_escape(path, strlen(path), true, esc, cap) < 0) {
		free(esc);
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	}
	req.what = swift__what(what, sizeof(what), "DELETE", path);
	rc = swift__do_in(s, ctx, &req, NULL, esc, &resp, err);
	free(esc);
	if (rc == -ENOENT) {
		smux_error_clear(err);
		rc = 0;
	}
	return rc;
}

int swift__delete_paths(struct swiftb *s, const struct smux_ctx *ctx,
			char *const *paths, size_t n, struct smux_error *err)
{
	struct swift_limits l;
	size_t step;
	int rc = 0;

	if (n == 0)
		return 0;
	swift__limits(s, ctx, &l);
	if (!l.bulk || n == 1) {
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = delete_one(s, ctx, paths[i], err);
		return rc;
	}
	step = l.max_deletes ? (size_t)l.max_deletes : SWIFT_BULK_MAX_DELETES;
	for (size_t i = 0; i < n && rc == 0; i += step)
		rc = bulk_batch(s, ctx, paths, i, i + step < n ? i + step : n,
				err);
	return rc;
}

int swift__delete_slo(struct swiftb *s, const struct smux_ctx *ctx,
		      const char *key, struct smux_error *err)
{
	static const char *const hdrs[] = {"Accept: application/json", NULL};
	struct smux__http_req req = {.method = "DELETE"};
	struct smux__http_resp resp;
	struct smux_sink sink;
	unsigned long del, nf;
	unsigned char *ans;
	char what[256],
		*path = swift__obj_path(key, "?multipart-manifest=delete");
	size_t alen = 0;
	int rc;

	if (!path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	smux_sink_dyn(&sink);
	req.headers = hdrs;
	req.sink = &sink;
	req.max_body = SWIFT_BULK_ANSWER_MAX;
	req.what = swift__what(what, sizeof(what), "DELETE large object", key);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	free(path);
	if (rc < 0) {
		smux_sink_release(&sink);
		if (rc == -ENOENT) { /* absent already */
			smux_error_clear(err);
			rc = 0;
		}
		return rc;
	}
	ans = smux_sink_dyn_take(&sink, &alen);
	rc = swift__bulk_answer(ans ? (const char *)ans : "", alen,
				s->base.name, &del, &nf, err);
	free(ans);
	return rc;
}
