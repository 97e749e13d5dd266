// SPDX-License-Identifier: MIT
/*
 * s3_list.c - the s3 backend's listing: ListObjectsV2 pages (prefix,
 * delimiter, continuation tokens, encoding-type=url) parsed with expat as
 * they arrive (s3_xml.c), merged into one ascending stream of entries.
 *
 * Directory markers: folded (with a delimiter) the listed directory's own
 * marker is not an entry of itself; unfolded, a marker is listed only when
 * nothing lies under it (the marker of an empty directory), which needs a
 * one-entry look-ahead across pages.
 *
 * Every answer is hostile: a key outside the prefix asked for, a page
 * out of order, a continuation token that repeats are BAD_RESPONSE, never
 * a silently partial listing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/s3_internal.h"

/* Most pages one listing follows (20 000 000 keys at 1000 a page). */
#define S3L_PAGES_MAX 20000
/* Longest page body accepted (bytes). */
#define S3L_PAGE_MAX SMUX_S3_XML_DOC_MAX

struct list_sink {
	struct smux_s3_xml *x;
	struct smux_error perr;
};

static int xml_sink_write(void *arg, const void *data, size_t len)
{
	struct list_sink *ls = arg;

	return smux__s3_xml_feed(ls->x, data, len, &ls->perr) < 0 ? -EIO : 0;
}

static int xml_sink_rewind(void *arg)
{
	struct list_sink *ls = arg;
	enum smux_s3_doc kind = SMUX_S3_DOC_LIST;

	smux__s3_xml_free(ls->x);
	ls->x = smux__s3_xml_new(kind);
	return ls->x ? 0 : -ENOMEM;
}

/* One page under the full (bucket) prefix @fprefix. On 0, *@out holds
 * the parsed page (free it). */
static int list_page(struct s3b *s, const struct smux_ctx *ctx,
		     const char *fprefix, const char *delimiter,
		     const char *token, const char *max_keys,
		     struct smux_s3_xml **out, struct smux_error *err)
{
	struct smux_s3_kv q[6];
	struct list_sink ls = {0};
	struct smux_sink sink;
	struct s3b_call c;
	size_t n = 0;
	int rc;

	*out = NULL;
	q[n++] = (struct smux_s3_kv){"list-type", "2"};
	q[n++] = (struct smux_s3_kv){"prefix", fprefix};
	q[n++] = (struct smux_s3_kv){"encoding-type", "url"};
	if (delimiter && delimiter[0])
		q[n++] = (struct smux_s3_kv){"delimiter", delimiter};
	if (token)
		q[n++] = (struct smux_s3_kv){"continuation-token", token};
	if (max_keys)
		q[n++] = (struct smux_s3_kv){"max-keys", max_keys};
	rc = smux__s3_call_init(&c, s, "GET", NULL, err);
	if (rc < 0)
		return rc;
	snprintf(c.what, sizeof(c.what), "LIST \"%.200s\"", fprefix);
	c.query = q;
	c.nquery = n;
	ls.x = smux__s3_xml_new(SMUX_S3_DOC_LIST);
	if (!ls.x) {
		smux__s3_call_release(&c);
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	}
	smux_sink_cb(&sink, xml_sink_write, xml_sink_rewind, &ls);
	c.sink = &sink;
	c.max_body = S3L_PAGE_MAX;
	rc = smux__s3_call(&c, ctx, err);
	if (rc < 0 && ls.perr.e.code) {
		/* the parser refused the body: that is the error */
		*err = ls.perr;
		snprintf(err->e.backend, sizeof(err->e.backend), "%s",
			 s->base.name);
		rc = -EIO;
	}
	if (rc == 0 && smux__s3_xml_finish(ls.x, err) < 0) {
		snprintf(err->e.backend, sizeof(err->e.backend), "%s",
			 s->base.name);
		rc = -EIO;
	}
	if (rc == 0 && smux__s3_xml_result(ls.x)->is_error)
		rc = smux__s3_error_fill(err, 500, smux__s3_xml_result(ls.x),
					 s->base.name, c.what);
	smux__s3_call_release(&c);
	if (rc < 0) {
		smux__s3_xml_free(ls.x);
		return rc;
	}
	*out = ls.x;
	return 0;
}

int smux__s3_any_under(struct s3b *s, const struct smux_ctx *ctx,
		       const char *key_prefix, struct smux_error *err)
{
	struct smux_s3_xml *x;
	const struct smux_s3_result *r;
	char *fp;
	int rc;

	if (asprintf(&fp, "%s%s", s->prefix, key_prefix) < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	rc = list_page(s, ctx, fp, NULL, NULL, "1", &x, err);
	free(fp);
	if (rc < 0)
		return rc;
	r = smux__s3_xml_result(x);
	rc = r->nobjs > 0 || r->nprefixes > 0;
	smux__s3_xml_free(x);
	return rc;
}

/* The state of one listing across pages. */
struct lister {
	struct s3b *s;
	const char *prefix; /* the smux prefix asked for */
	bool folded;
	smux_list_fn fn;
	void *arg;
	bool stopped;
	char *last;    /* the last key emitted (order check) */
	char *pending; /* unfolded: a marker held until we know it is empty */
	struct smux_info pending_info;
};

static int emit(struct lister *l, const char *key, bool is_prefix,
		const struct smux_info *info, struct smux_error *err)
{
	struct smux_list_entry e = {.key = key, .is_prefix = is_prefix};
	char *k;

	if (l->last && strcmp(key, l->last) <= 0)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, l->s->base.name,
				      "LIST \"%.200s\": keys out of order",
				      l->prefix);
	k = strdup(key);
	if (!k)
		return smux_error_set(err, SMUX_E_NO_MEMORY, l->s->base.name,
				      NULL);
	free(l->last);
	l->last = k;
	if (info)
		e.info = *info;
	else
		smux_info_clear(&e.info);
	if (l->fn(l->arg, &e) != 0)
		l->stopped = true;
	return 0;
}

/* The pending marker (unfolded), before @next (NULL: the end). */
static int flush_pending(struct lister *l, const char *next,
			 struct smux_error *err)
{
	int rc = 0;

	if (!l->pending)
		return 0;
	if (!next || strncmp(next, l->pending, strlen(l->pending)) != 0)
		rc = emit(l, l->pending, false, &l->pending_info, err);
	free(l->pending);
	l->pending = NULL;
	return rc;
}

/* One object of a page, its key already stripped of the bucket prefix. */
static int take_obj(struct lister *l, const char *key,
		    const struct smux_s3_obj *o, struct smux_error *err)
{
	struct smux_info info;
	size_t n = strlen(key);
	int rc;

	/* the backend's prefix itself as an object ("res/" of prefix =
	 * res, the folder an S3 console's "Create folder" makes): the
	 * root's own marker, no key (a rejoin's resync copied "" forever,
	 * INVALID_KEY at every try: s40-t2) */
	if (n == 0)
		return 0;
	smux_info_clear(&info);
	info.size = o->size;
	info.mtime_ns = o->mtime_ns;
	if (o->etag)
		smux__s3_etag_copy(info.etag, sizeof(info.etag), o->etag);
	/*
	 * ListObjectsV2 carries no metadata: a directory marker is known by
	 * its name, an object's type and mode (x-amz-meta-mode: a symlink,
	 * 0600) only by a HEAD. Mode 0 says "unknown", so the daemon has each
	 * looked up instead of showing it as a 0644 file.
	 */
	info.mode = n && key[n - 1] == '/' ? S_IFDIR | S3B_DIR_MODE : 0;
	/* ... unless this very version's attributes are known here: its
	 * etag, size and Last-Modified match what the backend last saw of
	 * it (its own put, copy or HEAD; core/attrstore.c) */
	if (!info.mode)
		smux__attrstore_fill(l->s->attrs, key, &info);
	if (l->folded) {
		/* a directory is not an entry of itself */
		if (n && key[n - 1] == '/' && strcmp(key, l->prefix) == 0)
			return 0;
		return emit(l, key, false, &info, err);
	}
	rc = flush_pending(l, key, err);
	if (rc < 0 || l->stopped)
		return rc;
	if (n && key[n - 1] == '/') {
		l->pending = strdup(key);
		if (!l->pending)
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      l->s->base.name, NULL);
		l->pending_info = info;
		return 0;
	}
	return emit(l, key, false, &info, err);
}

/* A key of the answer without the backend's prefix; NULL when it lies
 * outside what was asked for. */
static const char *strip(struct lister *l, const char *full)
{
	size_t pl = strlen(l->prefix);

	if (strncmp(full, l->s->prefix, l->s->prefix_len) != 0)
		return NULL;
	full += l->s->prefix_len;
	if (strncmp(full, l->prefix, pl) != 0)
		return NULL;
	return full;
}

/* One entry of a page, for sorting. */
struct page_item {
	const char *key;	       /* without the bucket prefix */
	const struct smux_s3_obj *obj; /* NULL: a common prefix */
};

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct page_item *)a)->key,
		      ((const struct page_item *)b)->key);
}

/* Emits one page: objects and common prefixes in key order (sorted here:
 * s3rver does not answer in S3's byte order). */
static int take_page(struct lister *l, const struct smux_s3_result *r,
		     struct smux_error *err)
{
	size_t n = r->nobjs + r->nprefixes, k = 0;
	struct page_item *v;
	int rc = 0;

	if (r->nprefixes && !l->folded) /* none without a delimiter */
		return smux_error_set(
			err, SMUX_E_BAD_RESPONSE, l->s->base.name,
			"LIST \"%.200s\": an unasked common prefix", l->prefix);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return smux_error_set(err, SMUX_E_NO_MEMORY, l->s->base.name,
				      NULL);
	for (size_t i = 0; i < r->nobjs; i++, k++) {
		v[k].key = strip(l, r->objs[i].key);
		v[k].obj = &r->objs[i];
	}
	for (size_t j = 0; j < r->nprefixes; j++, k++)
		v[k].key = strip(l, r->prefixes[j]);
	for (k = 0; k < n; k++)
		if (!v[k].key) {
			free(v);
			return smux_error_set(
				err, SMUX_E_BAD_RESPONSE, l->s->base.name,
				"LIST \"%.200s\": a key outside the prefix",
				l->prefix);
		}
	qsort(v, n, sizeof(*v), item_cmp);
	for (k = 0; k < n && !l->stopped && rc == 0; k++) {
		if (v[k].obj)
			rc = take_obj(l, v[k].key, v[k].obj, err);
		else
			rc = emit(l, v[k].key, true, NULL, err);
	}
	free(v);
	return rc;
}

int smux__s3_list(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *prefix, const char *delimiter, smux_list_fn fn,
		  void *arg, struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	struct lister l = {.s = s, .prefix = prefix, .fn = fn, .arg = arg};
	const struct smux_s3_result *r;
	struct smux_s3_xml *x = NULL;
	char *fp = NULL, *token = NULL;
	unsigned pages = 0;
	int rc;

	l.folded = delimiter && delimiter[0];
	if (asprintf(&fp, "%s%s", s->prefix, prefix) < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	for (;;) {
		rc = list_page(s, ctx, fp, delimiter, token, NULL, &x, err);
		if (rc < 0)
			break;
		r = smux__s3_xml_result(x);
		rc = take_page(&l, r, err);
		if (rc < 0 || l.stopped || !r->truncated)
			break;
		if (!r->next_token || !r->next_token[0] ||
		    (token && strcmp(token, r->next_token) == 0) ||
		    ++pages >= S3L_PAGES_MAX) {
			rc = smux_error_set(err, SMUX_E_BAD_RESPONSE,
					    s->base.name,
					    "LIST \"%.200s\": a truncated page "
					    "without a new continuation token",
					    prefix);
			break;
		}
		free(token);
		token = strdup(r->next_token);
		smux__s3_xml_free(x);
		x = NULL;
		if (!token) {
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
			break;
		}
	}
	if (rc == 0 && !l.stopped)
		rc = flush_pending(&l, NULL, err);
	smux__s3_xml_free(x);
	free(token);
	free(fp);
	free(l.pending);
	free(l.last);
	return rc;
}
