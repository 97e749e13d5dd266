// SPDX-License-Identifier: MIT
/*
 * swift_list.c - listings of the swift backend: the JSON container listing
 * (?format=json&prefix=&delimiter=/&marker=&limit=, parsed with jansson),
 * paged until a short page, merged with the backend's memory of its own
 * recent writes and deletes (Swift's container listings are eventually
 * consistent: an object just written may be missing from them for a
 * while, one just deleted may still be there).
 *
 * A listing is gathered whole, then sorted and folded the way the memory
 * backend does it: folded, the directory listed is not an entry of itself;
 * unfolded, a marker shows only for an empty directory.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backends/swift_internal.h"

/* Longest listing page read (bytes): 10,000 entries of ~2 KiB at most. */
#define SWIFT_PAGE_BODY_MAX (64u << 20)
/* Most recent writes/deletes remembered (the oldest is dropped first). */
#define SWIFT_RECENT_MAX 4096

static int64_t now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static bool starts_with(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* ---- recent writes and deletes ---- */

static void recent_prune(struct swiftb *s, int64_t now)
{
	/* notes go in time order: the oldest first, past the cap too */
	size_t drop = s->n_recent > SWIFT_RECENT_MAX
			      ? s->n_recent - SWIFT_RECENT_MAX
			      : 0,
	       j = 0;

	for (size_t i = 0; i < s->n_recent; i++) {
		if (i < drop || now - s->recent[i].at_ns > s->recent_ns) {
			free(s->recent[i].key);
			continue;
		}
		s->recent[j++] = s->recent[i];
	}
	s->n_recent = j;
}

void swift__recent_note(struct swiftb *s, const char *key, bool deleted,
			const struct smux_info *info)
{
	int64_t now = now_mono_ns();
	struct swift_recent *r = NULL;

	/* every own write and delete comes here: the attribute cache learns
	 * what it made (last_modified: from the first listing of it) */
	if (!deleted && info)
		smux__attrstore_put(s->attrs, key, info, 0);
	else
		smux__attrstore_forget(s->attrs, key);
	if (s->recent_ns <= 0)
		return;
	pthread_mutex_lock(&s->recent_mu);
	recent_prune(s, now);
	for (size_t i = 0; i < s->n_recent; i++) {
		if (strcmp(s->recent[i].key, key) == 0) {
			/* the newest note of a key goes last */
			struct swift_recent keep = s->recent[i];

			memmove(&s->recent[i], &s->recent[i + 1],
				(s->n_recent - i - 1) * sizeof(*r));
			s->recent[s->n_recent - 1] = keep;
			r = &s->recent[s->n_recent - 1];
			break;
		}
	}
	if (!r) {
		char *k = strdup(key);

		if (s->n_recent == s->cap_recent) {
			size_t cap = s->cap_recent ? 2 * s->cap_recent : 64;
			struct swift_recent *nv =
				realloc(s->recent, cap * sizeof(*nv));

			if (!nv) {
				free(k);
				k = NULL;
			} else {
				s->recent = nv;
				s->cap_recent = cap;
			}
		}
		if (!k) { /* out of memory: the listing may lag, no more */
			pthread_mutex_unlock(&s->recent_mu);
			return;
		}
		r = &s->recent[s->n_recent++];
		r->key = k;
	}
	r->deleted = deleted;
	r->at_ns = now;
	if (info)
		r->info = *info;
	else
		smux_info_clear(&r->info);
	pthread_mutex_unlock(&s->recent_mu);
}

void swift__recent_free(struct swiftb *s)
{
	for (size_t i = 0; i < s->n_recent; i++)
		free(s->recent[i].key);
	free(s->recent);
	s->recent = NULL;
	s->n_recent = s->cap_recent = 0;
}

/* ---- gathering ---- */

struct item {
	char *key;
	bool is_prefix;
	bool gone; /* deleted by this backend, still listed */
	struct smux_info info;
};

struct acc {
	struct item *v;
	size_t n, cap;
};

static int acc_add(struct acc *a, const char *key, size_t klen, bool is_prefix,
		   const struct smux_info *info)
{
	struct item *it;

	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct item *nv = realloc(a->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = cap;
	}
	it = &a->v[a->n];
	it->key = strndup(key, klen);
	if (!it->key)
		return -ENOMEM;
	it->is_prefix = is_prefix;
	it->gone = false;
	if (info)
		it->info = *info;
	else
		smux_info_clear(&it->info);
	a->n++;
	return 0;
}

static void acc_free(struct acc *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i].key);
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

static int item_cmp(const void *x, const void *y)
{
	const struct item *a = x, *b = y;
	int c = strcmp(a->key, b->key);

	/* an object before a common prefix of the same name */
	return c ? c : (int)a->is_prefix - (int)b->is_prefix;
}

/* Adds one JSON entry of a page; *@last is its name or subdir. */
static int add_entry(struct swiftb *s, json_t *e, struct acc *a, bool folded,
		     const char **last)
{
	const char *sub = json_string_value(json_object_get(e, "subdir"));
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *hash, *lm, *ct;
	struct smux_info info;
	json_t *bytes, *slo;
	int64_t t;

	if (sub) {
		*last = sub;
		if (smux_key_check(sub, SMUX_KEY_ALLOW_DIR, NULL, NULL) < 0)
			return 0; /* a name no key can have: not ours */
		return acc_add(a, sub, strlen(sub), true, NULL);
	}
	if (!name)
		return -EPROTO;
	*last = name;
	if (smux_key_check(name, SMUX_KEY_ALLOW_DIR, NULL, NULL) < 0)
		return 0;
	hash = json_string_value(json_object_get(e, "hash"));
	slo = json_object_get(e, "slo_etag");
	lm = json_string_value(json_object_get(e, "last_modified"));
	ct = json_string_value(json_object_get(e, "content_type"));
	bytes = json_object_get(e, "bytes");
	if (ct && strncmp(ct, "application/directory", 21) == 0) {
		size_t nl = strlen(name);

		swift__fill_dir(&info);
		if (nl && name[nl - 1] != '/') {
			/* python-swiftclient's marker of an empty directory
			 * "a/d" (no slash): the directory "a/d/" */
			char k[SMUX_KEY_MAX + 2];

			if (nl + 1 >= sizeof(k))
				return 0;
			memcpy(k, name, nl);
			k[nl] = '/';
			k[nl + 1] = '\0';
			return acc_add(a, k, nl + 1, folded, &info);
		}
	} else {
		smux_info_clear(&info);
		info.nlink = 1;
		/* the type and mode are in the object's metadata, not in
		 * the listing: 0 = unknown, the daemon looks it up */
		info.mode = 0;
		if (json_is_integer(bytes) && json_integer_value(bytes) >= 0)
			info.size = (uint64_t)json_integer_value(bytes);
		if (json_is_string(slo)) {
			/* an SLO: "hash" is its manifest's MD5; HEAD and GET
			 * report the quoted slo_etag */
			const char *v = json_string_value(slo);
			size_t vl = strlen(v);

			if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
				v++;
				vl -= 2;
			}
			snprintf(info.etag, sizeof(info.etag), "%.*s", (int)vl,
				 v);
		} else if (hash) {
			snprintf(info.etag, sizeof(info.etag), "%s", hash);
		}
	}
	t = lm ? swift__parse_iso(lm) : -1;
	info.mtime_ns = t > 0 ? t : 0;
	/* ... unless this very version's attributes are known here: its
	 * etag, size and last_modified match what the backend last saw of
	 * it (its own put, copy, setattr or HEAD; core/attrstore.c). Such a
	 * version with bytes and no slo_etag is a plain object, so deleting
	 * or replacing it needs no HEAD for segments: a listing cannot tell
	 * a DLO manifest from a plain object (it shows the manifest's own
	 * body), but a DLO's HEAD (what the store would hold of it) shows
	 * its segments' size and ETag, never its body's */
	if (!info.mode && smux__attrstore_fill(s->attrs, name, &info) &&
	    !json_is_string(slo) && info.size > 0)
		swift__plain_note(s, name, true);
	return acc_add(a, name, strlen(name), false, &info);
}

/* Appends "&name=<escaped value>" to @q (cap bytes). */
static int q_add(char *q, size_t cap, const char *name, const char *value)
{
	size_t n = strlen(q);
	long e;

	if (n + strlen(name) + 2 >= cap)
		return -ENAMETOOLONG;
	n += (size_t)snprintf(q + n, cap - n, "&%s=", name);
	e = smux__http_escape(value, strlen(value), false, q + n, cap - n);
	return e < 0 ? (int)e : 0;
}

/*
 * One page of the listing after @marker: entries go to @a, *@count is how
 * many the page held. A missing container lists as empty.
 */
static int fetch_page(struct swiftb *s, const struct smux_ctx *ctx,
		      const char *prefix, const char *delimiter,
		      const char *marker, unsigned limit, struct acc *a,
		      size_t *count, char *next, size_t next_cap,
		      struct smux_error *err)
{
	struct smux__http_req req = {.method = "GET"};
	struct smux__http_resp resp;
	struct smux_sink sink;
	char q[3 * SMUX_KEY_MAX * 2 + 128], what[256];
	unsigned char *body = NULL;
	size_t blen = 0, i;
	json_error_t jerr;
	json_t *root = NULL, *e;
	const char *last = NULL;
	int rc;

	*count = 0;
	snprintf(q, sizeof(q), "?format=json&limit=%u", limit);
	if ((prefix[0] && q_add(q, sizeof(q), "prefix", prefix) < 0) ||
	    (delimiter && q_add(q, sizeof(q), "delimiter", delimiter) < 0) ||
	    (marker[0] && q_add(q, sizeof(q), "marker", marker) < 0))
		return smux_error_set(err, SMUX_E_KEY_TOO_LONG, s->base.name,
				      "list \"%.200s\": too long", prefix);
	snprintf(what, sizeof(what), "LIST \"%.200s\"", prefix);
	smux_sink_dyn(&sink);
	req.sink = &sink;
	req.max_body = SWIFT_PAGE_BODY_MAX;
	req.what = what;
	rc = swift__do(s, ctx, &req, q, &resp, err);
	if (rc == -ENOENT) { /* no container yet: nothing in it */
		smux_error_clear(err);
		smux_sink_release(&sink);
		return 0;
	}
	if (rc < 0)
		goto out;
	if (resp.status == 204) /* an empty container answers no body */
		goto out;
	body = smux_sink_dyn_take(&sink, &blen);
	root = json_loadb((const char *)body, blen, 0, &jerr);
	if (!json_is_array(root)) {
		rc = smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
				    "%s: the listing is not a JSON array "
				    "(%.80s)",
				    what, root ? "" : jerr.text);
		goto out;
	}
	json_array_foreach(root, i, e)
	{
		rc = add_entry(s, e, a, delimiter != NULL, &last);
		if (rc == -ENOMEM) {
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
			goto out;
		}
		if (rc < 0) {
			rc = smux_error_set(err, SMUX_E_BAD_RESPONSE,
					    s->base.name,
					    "%s: an entry without name or "
					    "subdir",
					    what);
			goto out;
		}
	}
	*count = json_array_size(root);
	if (last)
		snprintf(next, next_cap, "%s", last);
out:
	json_decref(root);
	free(body);
	smux_sink_release(&sink);
	return rc;
}

/* Every page of the listing into @a. */
static int fetch_all(struct swiftb *s, const struct smux_ctx *ctx,
		     const char *prefix, const char *delimiter, struct acc *a,
		     struct smux_error *err)
{
	char marker[SMUX_KEY_MAX + 1] = "", next[SMUX_KEY_MAX + 1];
	size_t count;
	int rc;

	for (;;) {
		next[0] = '\0';
		rc = fetch_page(s, ctx, prefix, delimiter, marker, s->list_page,
				a, &count, next, sizeof(next), err);
		if (rc < 0)
			return rc;
		if (count < s->list_page || !next[0])
			return 0;
		if (strcmp(next, marker) <= 0)
			return smux_error_set(err, SMUX_E_BAD_RESPONSE,
					      s->base.name,
					      "list: the listing did not move "
					      "past its marker");
		memcpy(marker, next, sizeof(marker));
	}
}

/*
 * Applies the recent writes and deletes under @prefix to @a: sorts @a,
 * looks each note up (binary search: a listing of 100k entries and 4096
 * notes stays cheap), marks a deleted object gone, adds a written one the
 * listing lacks (after the sorted part; the caller sorts again).
 */
static int merge_recent(struct swiftb *s, const char *prefix,
			const char *delimiter, struct acc *a)
{
	size_t pl = strlen(prefix), base;
	char k[SMUX_KEY_MAX + 2];
	int rc = 0;

	if (a->n)
		qsort(a->v, a->n, sizeof(*a->v), item_cmp);
	base = a->n;
	if (s->recent_ns <= 0)
		return 0;
	pthread_mutex_lock(&s->recent_mu);
	recent_prune(s, now_mono_ns());
	for (size_t r = 0; rc == 0 && r < s->n_recent; r++) {
		const struct swift_recent *n = &s->recent[r];
		struct item probe = {.key = k}, *it;
		struct smux_info ni;
		const char *d;
		size_t klen;

		if (!starts_with(n->key, prefix))
			continue;
		d = delimiter ? strstr(n->key + pl, delimiter) : NULL;
		klen = d ? (size_t)(d - n->key) + 1 : strlen(n->key);
		if (klen >= sizeof(k))
			continue;
		memcpy(k, n->key, klen);
		k[klen] = '\0';
		probe.is_prefix = d != NULL;
		it = base ? bsearch(&probe, a->v, base, sizeof(*a->v), item_cmp)
			  : NULL;
		/* as the listing itself: a file's type and mode are
		 * unknown (0), whatever this backend wrote */
		ni = n->info;
		if ((ni.mode & S_IFMT) != S_IFDIR)
			ni.mode = 0;
		if (it && !d) {
			it->gone = n->deleted;
			if (!n->deleted)
				it->info = ni;
		} else if (!it && !n->deleted) {
			rc = acc_add(a, k, klen, d != NULL, d ? NULL : &ni);
		}
	}
	pthread_mutex_unlock(&s->recent_mu);
	return rc;
}

int swift__list(struct swiftb *s, const struct smux_ctx *ctx,
		const char *prefix, const char *delimiter, smux_list_fn fn,
		void *arg, struct smux_error *err)
{
	bool dir_prefix = prefix[0] && prefix[strlen(prefix) - 1] == '/';
	struct acc a = {0};
	int rc;

	rc = fetch_all(s, ctx, prefix, delimiter, &a, err);
	if (rc == 0 && merge_recent(s, prefix, delimiter, &a) < 0)
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
	if (rc < 0)
		goto out;
	if (a.n)
		qsort(a.v, a.n, sizeof(*a.v), item_cmp);
	for (size_t i = 0; i < a.n; i++) {
		const struct item *it = &a.v[i];
		size_t kl = strlen(it->key);
		struct smux_list_entry e = {.key = it->key,
					    .is_prefix = it->is_prefix,
					    .info = it->info};

		if (it->gone)
			continue;
		if (i + 1 < a.n && strcmp(a.v[i + 1].key, it->key) == 0 &&
		    a.v[i + 1].is_prefix == it->is_prefix)
			continue; /* twice (a recent note and the listing) */
		if (delimiter && !it->is_prefix && dir_prefix &&
		    strcmp(it->key, prefix) == 0)
			continue; /* folded: not an entry of itself */
		if (delimiter && !it->is_prefix && kl && it->key[kl - 1] == '/')
			continue; /* a marker also shows as its prefix */
		if (!delimiter && kl && it->key[kl - 1] == '/' && i + 1 < a.n &&
		    starts_with(a.v[i + 1].key, it->key))
			continue; /* unfolded: markers of empty dirs only */
		if (fn(arg, &e) != 0)
			break;
	}
out:
	acc_free(&a);
	return rc;
}

int swift__any_under(struct swiftb *s, const struct smux_ctx *ctx,
		     const char *prefix, bool *any, struct smux_error *err)
{
	char next[SMUX_KEY_MAX + 1];
	struct acc a = {0};
	size_t count;
	int rc;

	*any = false;
	rc = fetch_page(s, ctx, prefix, "/", "", 16, &a, &count, next,
			sizeof(next), err);
	if (rc == 0 && count == 16) {
		/* a full page: trust it (16 recent deletes all in one
		 * directory are what a full listing would be for) */
		*any = true;
		goto out;
	}
	if (rc == 0 && merge_recent(s, prefix, "/", &a) < 0)
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
	for (size_t i = 0; rc == 0 && i < a.n && !*any; i++)
		*any = !a.v[i].gone;
out:
	acc_free(&a);
	return rc;
}

bool swift__recent_present(struct swiftb *s, const char *key)
{
	bool present = false;

	if (s->recent_ns <= 0)
		return false;
	pthread_mutex_lock(&s->recent_mu);
	recent_prune(s, now_mono_ns());
	for (size_t i = 0; i < s->n_recent; i++)
		if (strcmp(s->recent[i].key, key) == 0)
			present = !s->recent[i].deleted;
	pthread_mutex_unlock(&s->recent_mu);
	return present;
}
