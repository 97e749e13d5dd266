// SPDX-License-Identifier: MIT
/*
 * swift_bulk.c - deleting many objects of the swift backend at once: the
 * bulk middleware's "POST /?bulk-delete" (a newline-separated list of
 * percent-encoded "/container/object" paths, answered with JSON: "Number
 * Deleted", "Number Not Found", "Response Status", "Errors" as
 * [[path, status], ...]) when the cluster's /info offers bulk_delete, in
 * batches of its max_deletes_per_request; else one DELETE per object.
 *
 * It serves the segments of large objects (a failed upload's, an
 * overwritten or deleted object's) and the backend's del_many (swift.c:
 * rm -r's batches of keys seen plain objects). The answer is read per
 * object: each path in "Errors" (Swift quotes it again: decoded before it
 * is matched) fails its object with its status, an object's 404 is no
 * failure; the objects not named are gone when the "Response Status" is
 * 2xx or the counts account for every object sent (an object's failure
 * makes the status 400 or 502), else they fail with that status (a whole
 * request refused, a run cut short after max_failed_deletes failures).
 *
 * The POST is answered 200 before its deletes run (whitespace keeps the
 * connection alive): a token that expired shows as a 401 for each object,
 * not as the POST's status, so a batch that met one is sent once more
 * with a new token. A path whose escaped line is longer than the
 * middleware reads (its max_path_length) would make it refuse the whole
 * request: such a path is one DELETE.
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

static bool status_ok(long status)
{
	return status >= 200 && status <= 299;
}

/* " of \"first\"" and how many more, for messages about a batch. */
static const char *batch_name(char *buf, size_t cap, char *const *paths,
			      size_t n)
{
	if (n == 0)
		buf[0] = '\0';
	else if (n == 1)
		snprintf(buf, cap, " of \"%.200s\"", paths[0]);
	else
		snprintf(buf, cap, " of \"%.200s\" and %zu more", paths[0],
			 n - 1);
	return buf;
}

/* The answer's @quoted path decoded, in a new heap string; NULL when it
 * is not one (or no memory). */
static char *unquote(const char *quoted)
{
	size_t len = strlen(quoted);
	char *plain = malloc(len + 1);

	if (plain && smux__http_unescape(quoted, len, plain, len + 1) < 0) {
		free(plain);
		plain = NULL;
	}
	return plain;
}

/*
 * Reads an answer for the @n objects @paths of its request (none for an
 * SLO's delete, whose segments the answer alone names): see the header.
 * *@unauthorized: some object was answered 401.
 */
static int read_answer(const char *body, size_t len, const char *backend,
		       char *const *paths, size_t n, int *rcs,
		       unsigned long *deleted, unsigned long *not_found,
		       bool *unauthorized, struct smux_error *err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *st, *errs, *e, *rb;
	struct smux_error rest_err;
	char what[400], of[300];
	size_t i, n_err = 0, n_failed = 0;
	bool *named = NULL;
	int first = 0, rest = 0;
	long status;

	*deleted = *not_found = 0;
	*unauthorized = false;
	smux_error_clear(&rest_err);
	if (!json_is_object(root)) {
		first = smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
				       "bulk delete%s: the answer is not a "
				       "JSON object",
				       batch_name(of, sizeof(of), paths, n));
		goto all;
	}
	*deleted = count_of(root, "Number Deleted");
	*not_found = count_of(root, "Number Not Found");
	st = json_object_get(root, "Response Status");
	errs = json_object_get(root, "Errors");
	status = json_is_string(st) ? status_of(json_string_value(st)) : 0;
	if (!status || (errs && !json_is_array(errs))) {
		first = smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
				       "bulk delete%s: the answer has no valid "
				       "\"Response Status\" or \"Errors\"",
				       batch_name(of, sizeof(of), paths, n));
		goto all;
	}
	named = calloc(n ? n : 1, sizeof(*named));
	if (!named) {
		first = smux_error_set(err, SMUX_E_NO_MEMORY, backend, NULL);
		goto all;
	}
	n_err = json_array_size(errs);
	json_array_foreach(errs, i, e)
	{
		json_t *s = json_array_get(e, 1);
		long es =
			json_is_string(s) ? status_of(json_string_value(s)) : 0;

		n_failed += es != 404;
	}
	/* [path, status] for each object that failed */
	json_array_foreach(errs, i, e)
	{
		json_t *p = json_array_get(e, 0), *s = json_array_get(e, 1);
		const char *ps =
			json_is_string(p) ? json_string_value(p) : NULL;
		const char *ss = json_is_string(s) ? json_string_value(s) : "?";
		const char *shown = ps ? ps : "?";
		char *plain = ps ? unquote(ps) : NULL;
		long es = status_of(ss);
		struct smux_error one;
		bool matched = false;
		int orc = 0;

		smux_error_clear(&one);
		if (es == 401)
			*unauthorized = true;
		for (size_t k = 0; plain && k < n; k++) {
			if (strcmp(paths[k], plain) != 0)
				continue;
			if (!matched) /* as it was sent, not quoted back */
				shown = paths[k];
			matched = true;
		}
		if (es != 404) {
			/* an object's 404 is a delete done; an unreadable
			 * status a failure all the same */
			snprintf(what, sizeof(what),
				 "bulk delete: %zu object(s) not deleted, "
				 "first \"%.200s\" (%.40s)",
				 n_failed, shown, ss);
			orc = smux__http_status_error(&one, es ? es : 502, true,
						      backend, what);
		}
		for (size_t k = 0; matched && k < n; k++) {
			/* a path named twice keeps its failure */
			if (strcmp(paths[k], plain) == 0 &&
			    (!named[k] || rcs[k] == 0)) {
				rcs[k] = orc;
				named[k] = true;
			}
		}
		free(plain);
		if (orc && !first) {
			first = orc;
			*err = one;
		}
		/* a failure of no path sent: any object not named */
		if (orc && !matched && !rest) {
			rest = orc;
			rest_err = one;
		}
	}
	if (status == 401)
		*unauthorized = true;
	if (!rest && !status_ok(status) &&
	    !(n_err && *deleted + *not_found + n_err >= n)) {
		/* refused whole, or cut short: the objects not named are
		 * not known to be gone */
		char *const *unnamed = NULL;

		rb = json_object_get(root, "Response Body");
		for (i = 0; i < n && !unnamed; i++)
			if (!named[i])
				unnamed = &paths[i];
		snprintf(what, sizeof(what), "bulk delete%s: %.40s%s%.120s",
			 unnamed ? batch_name(of, sizeof(of), unnamed, 1) : "",
			 json_string_value(st),
			 json_string_length(rb) ? ": " : "",
			 json_is_string(rb) ? json_string_value(rb) : "");
		if (!n || unnamed)
			rest = smux__http_status_error(&rest_err, status, true,
						       backend, what);
	}
	if (rest && !first) {
		first = rest;
		*err = rest_err;
	}
	for (i = 0; i < n; i++)
		if (!named[i])
			rcs[i] = rest;
	goto out;
all:
	for (i = 0; i < n; i++)
		rcs[i] = first;
out:
	free(named);
	json_decref(root);
	return first;
}

int swift__bulk_answer(const char *body, size_t len, const char *backend,
		       unsigned long *deleted, unsigned long *not_found,
		       struct smux_error *err)
{
	bool unauthorized;

	return read_answer(body, len, backend, NULL, 0, NULL, deleted,
			   not_found, &unauthorized, err);
}

int swift__bulk_answer_paths(const char *body, size_t len, const char *backend,
			     char *const *paths, size_t n, int *rcs,
			     bool *unauthorized, struct smux_error *err)
{
	unsigned long del, nf;

	return read_answer(body, len, backend, paths, n, rcs, &del, &nf,
			   unauthorized, err);
}

/* The @n paths escaped, a line each, into @text (@cap bytes: 3 per byte
 * and 1 per line are enough): their length, 0 when they do not fit. */
static size_t escape_lines(char *const *paths, size_t n, char *text, size_t cap)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		long w = smux__http_escape(paths[i], strlen(paths[i]), true,
					   text + len, cap - len);

		if (w < 0 || len + (size_t)w + 1 >= cap)
			return 0;
		len += (size_t)w;
		text[len++] = '\n';
	}
	return len;
}

/* One request for the @n objects @paths: its body is their escaped lines.
 * Sent once more with a new token when an object was answered 401. */
static int bulk_batch(struct swiftb *s, const struct smux_ctx *ctx,
		      char *const *paths, size_t n, int *rcs,
		      struct smux_error *err)
{
	static const char *const hdrs[] = {"Content-Type: text/plain",
					   "Accept: application/json", NULL};
	size_t cap = 1, len = 0;
	char *text, what[320], of[300];
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		cap += 3 * strlen(paths[i]) + 1;
	text = malloc(cap);
	if (text)
		len = escape_lines(paths, n, text, cap);
	if (!text || len == 0) {
		free(text);
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
		for (size_t i = 0; i < n; i++)
			rcs[i] = rc;
		return rc;
	}
	snprintf(what, sizeof(what), "POST bulk-delete%s",
		 batch_name(of, sizeof(of), paths, n));
	for (int round = 0; round < 2; round++) {
		struct smux__http_req req = {.method = "POST"};
		struct smux__http_resp resp;
		struct smux_source body;
		struct smux_sink sink;
		unsigned char *ans;
		bool unauthorized = false;
		size_t alen = 0;
		uint64_t gen;

		smux_source_buf(&body, text, len);
		smux_sink_dyn(&sink);
		req.headers = hdrs;
		req.body = &body;
		req.sink = &sink;
		req.max_body = SWIFT_BULK_ANSWER_MAX;
		req.what = what;
		atomic_fetch_add(&s->n_bulk, 1);
		rc = swift__do_in(s, ctx, &req, NULL, "/?bulk-delete", &resp,
				  err);
		/* the token the request went with, unless renewed since */
		gen = swift__auth_generation(&s->auth);
		if (rc < 0) {
			smux_sink_release(&sink);
			for (size_t i = 0; i < n; i++)
				rcs[i] = rc;
			break;
		}
		ans = smux_sink_dyn_take(&sink, &alen);
		rc = swift__bulk_answer_paths(ans ? (const char *)ans : "",
					      alen, s->base.name, paths, n, rcs,
					      &unauthorized, err);
		free(ans);
		if (rc == 0 || !unauthorized || round > 0)
			break;
		/* the token expired or was revoked: once more with a new
		 * one (the objects deleted already answer 404) */
		swift__auth_invalidate(&s->auth, gen);
		smux_error_clear(err);
	}
	free(text);
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

/* Whether @path escaped is a line of at most @max bytes. */
static bool line_fits(const char *path, size_t max)
{
	size_t len = strlen(path), cap = 3 * len + 1;
	char *esc = malloc(cap);
	long n = esc ? smux__http_escape(path, len, true, esc, cap) : -1;

	free(esc);
	return n >= 0 && (size_t)n <= max;
}

int swift__bulk_delete(struct swiftb *s, const struct smux_ctx *ctx,
		       char *const *paths, size_t n,
		       const struct swift_limits *l, int *rcs,
		       struct smux_error *err)
{
	size_t step = l->max_deletes ? (size_t)l->max_deletes
				     : SWIFT_BULK_MAX_DELETES;
	size_t max_line = l->max_line ? (size_t)l->max_line
				      : SWIFT_MAX_OBJECT_NAME +
						SWIFT_MAX_CONTAINER_NAME + 2;
	char **fit = malloc((n ? n : 1) * sizeof(*fit));
	size_t *at = malloc((n ? n : 1) * sizeof(*at));
	int *frc = malloc((n ? n : 1) * sizeof(*frc));
	size_t nf = 0;
	int first = 0;

	if (!fit || !at || !frc) {
		first = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				       NULL);
		for (size_t i = 0; i < n; i++)
			rcs[i] = first;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct smux_error one;

		if (line_fits(paths[i], max_line)) {
			at[nf] = i;
			fit[nf++] = paths[i];
			continue;
		}
		/* too long a line for the bulk middleware */
		smux_error_clear(&one);
		rcs[i] = delete_one(s, ctx, paths[i], &one);
		if (rcs[i] < 0 && !first) {
			first = rcs[i];
			*err = one;
		}
	}
	for (size_t i = 0; i < nf; i += step) {
		size_t m = nf - i < step ? nf - i : step;
		struct smux_error one;
		int rc;

		smux_error_clear(&one);
		rc = bulk_batch(s, ctx, fit + i, m, frc + i, &one);
		if (rc < 0 && !first) {
			first = rc;
			*err = one;
		}
	}
	for (size_t j = 0; j < nf; j++)
		rcs[at[j]] = frc[j];
out:
	free(fit);
	free(at);
	free(frc);
	return first;
}

int swift__delete_paths(struct swiftb *s, const struct smux_ctx *ctx,
			char *const *paths, size_t n, struct smux_error *err)
{
	struct swift_limits l;
	int *rcs, rc = 0;

	if (n == 0)
		return 0;
	swift__limits(s, ctx, &l);
	if (!l.bulk || n == 1) {
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = delete_one(s, ctx, paths[i], err);
		return rc;
	}
	rcs = malloc(n * sizeof(*rcs));
	if (!rcs)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	rc = swift__bulk_delete(s, ctx, paths, n, &l, rcs, err);
	free(rcs);
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
