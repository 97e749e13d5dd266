// SPDX-License-Identifier: MIT
/*
 * swift_dlo.c - the segments of a dynamic large object (DLO: a manifest
 * whose X-Object-Manifest header, "container/prefix" percent-encoded,
 * names every object under the prefix), listed page by page with the JSON
 * container listing so a delete or an overwrite of the manifest can
 * remove them (python-swiftclient and rclone write DLOs).
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/swift_internal.h"

/* Objects listed per page, and at most in all (a prefix matching more
 * is not a set of segments this backend deletes). */
#define DLO_PAGE     1000
#define DLO_MAX_SEGS 100000

struct seglist {
	char **paths;
	size_t n, cap;
};

static int seg_add(struct seglist *l, const char *cont, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **p = realloc(l->paths, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->paths = p;
		l->cap = cap;
	}
	if (asprintf(&l->paths[l->n], "/%s/%s", cont, name) < 0)
		return -ENOMEM;
	l->n++;
	return 0;
}

/* One page: the names in it appended; *@last the last one (heap). */
static int dlo_page(struct swiftb *s, const struct smux_ctx *ctx,
		    const char *cont, const char *cont_esc, const char *pfx_esc,
		    char **last, struct seglist *l, size_t *got,
		    struct smux_error *err)
{
	struct smux__http_req req = {.method = "GET", .what = "GET DLO list"};
	struct smux__http_resp resp;
	struct smux_sink sink;
	json_error_t je;
	json_t *root, *e;
	unsigned char *body;
	char *q = NULL, mk[3 * SMUX_KEY_MAX + 1] = "";
	size_t len = 0, i;
	int rc;

	if (*last &&
	    smux__http_escape(*last, strlen(*last), false, mk, sizeof(mk)) < 0)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
				      "DLO listing: a name is too long");
	if (asprintf(&q, "?format=json&limit=%d&prefix=%s&marker=%s", DLO_PAGE,
		     pfx_esc, mk) < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	smux_sink_dyn(&sink);
	req.sink = &sink;
	req.max_body = 8u << 20; /* 1000 entries of at most ~1.3 KiB */
	rc = swift__do_in(s, ctx, &req, cont_esc, q, &resp, err);
	free(q);
	if (rc < 0) {
		smux_sink_release(&sink);
		if (rc == -ENOENT) { /* no such container: no segments */
			smux_error_clear(err);
			*got = 0;
			return 0;
		}
		return rc;
	}
	body = smux_sink_dyn_take(&sink, &len);
	root = json_loadb(body ? (const char *)body : "", len, 0, &je);
	free(body);
	if (!json_is_array(root)) {
		json_decref(root);
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
				      "DLO listing: not a JSON array");
	}
	*got = json_array_size(root);
	json_array_foreach(root, i, e)
	{
		json_t *nm = json_object_get(e, "name");
		const char *v =
			json_is_string(nm) ? json_string_value(nm) : NULL;

		if (!v || !v[0] || strlen(v) > SMUX_KEY_MAX ||
		    strpbrk(v, "\r\n")) {
			json_decref(root);
			return smux_error_set(err, SMUX_E_BAD_RESPONSE,
					      s->base.name,
					      "DLO listing: an entry has no "
					      "valid \"name\"");
		}
		if (seg_add(l, cont, v) < 0) {
			json_decref(root);
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      s->base.name, NULL);
		}
		if (i + 1 == *got) {
			free(*last);
			*last = strdup(v);
		}
	}
	json_decref(root);
	return 0;
}

int swift__dlo_segments(struct swiftb *s, const struct smux_ctx *ctx,
			const char *key, const char *manifest, char ***paths,
			size_t *n, struct smux_error *err)
{
	struct seglist l = {0};
	char *raw = curl_easy_unescape(NULL, manifest, 0, NULL), *slash, *pfx;
	char *cont_esc = NULL, *pfx_esc = NULL, *last = NULL;
	size_t got = DLO_PAGE, plen, clen;
	int rc = 0;

	*paths = NULL;
	*n = 0;
	if (!raw)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	slash = strchr(raw, '/');
	if (!slash || slash == raw || strpbrk(raw, "\r\n")) {
		curl_free(raw);
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
				      "X-Object-Manifest is not "
				      "container/prefix");
	}
	*slash = '\0';
	pfx = slash + 1;
	plen = strlen(pfx);
	clen = strlen(raw);
	if (!plen || (strcmp(raw, s->container) == 0 && strlen(key) >= plen &&
		      memcmp(key, pfx, plen) == 0)) {
		/* an empty prefix, or one the manifest itself is under:
		 * not a set of segments to delete (it could be the whole
		 * container); they stay */
		curl_free(raw);
		return 0;
	}
	/* each byte escapes to at most 3 */
	cont_esc = malloc(clen * 3 + 1);
	pfx_esc = malloc(plen * 3 + 1);
	if (!cont_esc || !pfx_esc ||
	    smux__http_escape(raw, clen, false, cont_esc, clen * 3 + 1) < 0 ||
	    smux__http_escape(pfx, plen, false, pfx_esc, plen * 3 + 1) < 0) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
		goto out;
	}
	while (got == DLO_PAGE && rc == 0) {
		if (l.n > DLO_MAX_SEGS) {
			rc = smux_error_set(
				err, SMUX_E_NOT_SUPPORTED, s->base.name,
				"a DLO of more than %d segments", DLO_MAX_SEGS);
			break;
		}
		rc = dlo_page(s, ctx, raw, cont_esc, pfx_esc, &last, &l, &got,
			      err);
		if (rc == 0 && got == DLO_PAGE && !last)
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
	}
out:
	if (rc < 0) {
		swift__paths_free(l.paths, l.n);
	} else {
		*paths = l.paths;
		*n = l.n;
	}
	free(last);
	free(cont_esc);
	free(pfx_esc);
	curl_free(raw);
	return rc;
}
