// SPDX-License-Identifier: MIT
/*
 * bunny_list.c - the bunny backend's listings: GET dir/ (one JSON array
 * per directory, parsed by bunny_json.c), walked for flat listings.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "backends/bunny_internal.h"
#include "backends/http_client.h"

/* The entries of directory @dir ("" or "a/b/"): GET dir/ and its JSON. */
int smux__bunny_list_one(struct bunnyb *z, const struct smux_ctx *ctx,
			 const char *dir, struct smux__bunny_obj **out,
			 size_t *n, struct smux_error *err)
{
	struct smux__http_req req = {.method = "GET"};
	const char *hdrs[2] = {"Accept: application/json", NULL};
	struct smux__http_resp resp;
	struct smux_sink sink;
	char what[256], why[128];
	unsigned char *body;
	size_t len = 0;
	char *url;
	int rc;

	*out = NULL;
	*n = 0;
	url = smux__bunny_url(z, dir, true);
	if (!url)
		return smux__bunny_nomem(z, err);
	smux_sink_dyn(&sink);
	req.url = url;
	req.headers = hdrs;
	req.sink = &sink;
	req.max_body = BUNNY_LIST_MAX;
	req.what = smux__bunny_what(what, sizeof(what), "LIST", dir);
	rc = smux__bunny_do(z, ctx, &req, &resp, err);
	free(url);
	if (rc < 0) {
		smux_sink_release(&sink);
		if (rc == -ENOENT) { /* an absent directory lists empty */
			smux_error_clear(err);
			return 0;
		}
		return rc;
	}
	body = smux_sink_dyn_take(&sink, &len);
	rc = smux__bunny_parse_list(body ? (const char *)body : "[]",
				    body ? len : 2, out, n, why, sizeof(why));
	free(body);
	if (rc == -ENOMEM)
		return smux__bunny_nomem(z, err);
	if (rc < 0)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE,
				      smux__bunny_name(z), "%s: %s", what, why);
	return 0;
}

/* ---- list ---- */

struct list_item {
	char *key;
	bool is_prefix;
	struct smux_info info;
};

struct list_acc {
	struct list_item *v;
	size_t n, cap;
};

static int acc_add(struct list_acc *a, const char *key, bool is_prefix,
		   const struct smux_info *info)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct list_item *nv = realloc(a->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = cap;
	}
	a->v[a->n].key = strdup(key);
	if (!a->v[a->n].key)
		return -ENOMEM;
	a->v[a->n].is_prefix = is_prefix;
	a->v[a->n].info = *info;
	a->n++;
	return 0;
}

static void acc_free(struct list_acc *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i].key);
	free(a->v);
}

static int item_cmp(const void *x, const void *y)
{
	const struct list_item *a = x, *b = y;

	return strcmp(a->key, b->key); /* byte-wise */
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/*
 * Lists directory @dir ("" or "a/b/") into @a: with @flat, walks into
 * subdirectories that may hold keys under @prefix (an empty one becomes
 * its marker); else a subdirectory is one common prefix.
 */
static int list_dir(struct bunnyb *z, const struct smux_ctx *ctx,
		    const char *dir, const char *prefix, bool flat,
		    struct list_acc *a, unsigned depth, struct smux_error *err)
{
	struct smux__bunny_obj *v;
	size_t n;
	int rc;

	if (depth > SMUX_KEY_MAX / 2)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE,
				      smux__bunny_name(z),
				      "list: directories nested too deep");
	rc = smux__bunny_list_one(z, ctx, dir, &v, &n, err);
	if (rc < 0)
		return rc;
	if (flat && n == 0 && dir[0] && starts_with(dir, prefix)) {
		/* an empty directory lists as its marker; the one asked for
		 * first may be absent (Bunny lists that as [] too), the
		 * ones found in a listing are there */
		struct smux__bunny_obj o;
		struct smux_info info;

		if (depth == 0) {
			rc = smux__bunny_describe(z, ctx, dir, &o, err);
			if (rc == 0) {
				free(o.name);
				if (!o.is_dir)
					rc = -ENOENT;
			}
			if (rc == -ENOENT) {
				smux_error_clear(err);
				smux__bunny_objs_free(v, n);
				return 0;
			}
		}
		smux__bunny_fill_dir(&info, 0);
		if (rc == 0 && acc_add(a, dir, false, &info) < 0)
			rc = smux__bunny_nomem(z, err);
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		char key[SMUX_KEY_MAX + 2];
		struct smux_info info;
		int kl;

		kl = snprintf(key, sizeof(key), "%s%s%s", dir, v[i].name,
			      v[i].is_dir ? "/" : "");
		if (kl < 0 || (size_t)kl >= sizeof(key) ||
		    smux_key_check(key, SMUX_KEY_ALLOW_DIR, NULL, NULL) < 0)
			continue; /* a name no key can have: not ours */
		if (v[i].is_dir) {
			smux__bunny_fill_dir(&info, v[i].mtime_ns);
			if (flat && (starts_with(key, prefix) ||
				     starts_with(prefix, key)))
				rc = list_dir(z, ctx, key, prefix, true, a,
					      depth + 1, err);
			else if (!flat && starts_with(key, prefix) &&
				 acc_add(a, key, true, &info) < 0)
				rc = smux__bunny_nomem(z, err);
			continue;
		}
		/* what a whole get of it may take without a DESCRIBE,
		 * checked by its SHA-256 (bunny_seen.c) */
		smux__bunny_seen_note(z, key, &v[i]);
		if (!starts_with(key, prefix))
			continue;
		smux__bunny_fill_obj(&info, &v[i]);
		if (acc_add(a, key, false, &info) < 0)
			rc = smux__bunny_nomem(z, err);
	}
	smux__bunny_objs_free(v, n);
	return rc;
}

/* The directory a listing of @prefix reads: "a/b/" for "a/b/" and
 * "a/b/c", "" for "a". */
static void list_base(const char *prefix, char *out, size_t cap)
{
	size_t n = strlen(prefix);

	while (n && prefix[n - 1] != '/')
		n--;
	if (n >= cap)
		n = 0;
	memcpy(out, prefix, n);
	out[n] = '\0';
}

int smux__bunny_list(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *prefix, const char *delimiter, smux_list_fn fn,
		     void *arg, struct smux_error *err)
{
	struct bunnyb *z = smux__bunny_from(b);
	char dir[SMUX_KEY_MAX + 1];
	struct list_acc a = {0};
	int rc;

	if (delimiter && strcmp(delimiter, "/") != 0)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED,
				      smux__bunny_name(z),
				      "list: only \"/\" delimits");
	list_base(prefix, dir, sizeof(dir));
	rc = list_dir(z, ctx, dir, prefix, delimiter == NULL, &a, 0, err);
	if (rc == 0 && a.n) {
		qsort(a.v, a.n, sizeof(*a.v), item_cmp);
		for (size_t i = 0; i < a.n; i++) {
			struct smux_list_entry e = {.key = a.v[i].key,
						    .is_prefix =
							    a.v[i].is_prefix,
						    .info = a.v[i].info};

			if (fn(arg, &e) != 0)
				break;
		}
	}
	acc_free(&a);
	return rc;
}
