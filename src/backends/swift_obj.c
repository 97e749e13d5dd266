// SPDX-License-Identifier: MIT
/*
 * swift_obj.c - reading objects of the swift backend: the object headers
 * (X-Object-Meta-Mtime/-Mode/-Uid/-Gid, the type, the etag) into struct
 * smux_info, head (an object, or a directory implied by what is under
 * "key/"), and get (GET with Range and If-Match, the answer's version
 * checked before a byte reaches the sink, Swift's 404 race on an
 * overwrite asked again). Writing is swift.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "backends/swift_internal.h"

/* ---- object headers ---- */

static void copy_val(char *dst, size_t cap, const char *v, size_t vlen)
{
	if (vlen >= cap) {
		dst[0] = '\0'; /* too long: not ours, ignored */
		return;
	}
	memcpy(dst, v, vlen);
	dst[vlen] = '\0';
}

int swift__meta_header(void *arg, const char *name, size_t nlen,
		       const char *value, size_t vlen)
{
	static const char pre[] = "X-Object-Meta-";
	struct swift_meta *m = arg;
	const char *n = name + sizeof(pre) - 1;
	size_t rest = nlen - (sizeof(pre) - 1);

	if (nlen == 11 && strncasecmp(name, "X-Timestamp", 11) == 0) {
		copy_val(m->timestamp, sizeof(m->timestamp), value, vlen);
		return 0;
	}
	if (nlen <= sizeof(pre) - 1 ||
	    strncasecmp(name, pre, sizeof(pre) - 1) != 0)
		return 0;
	if (rest == 5 && strncasecmp(n, "Mtime", 5) == 0)
		copy_val(m->mtime, sizeof(m->mtime), value, vlen);
	else if (rest == 4 && strncasecmp(n, "Mode", 4) == 0)
		copy_val(m->mode, sizeof(m->mode), value, vlen);
	else if (rest == 3 && strncasecmp(n, "Uid", 3) == 0)
		copy_val(m->uid, sizeof(m->uid), value, vlen);
	else if (rest == 3 && strncasecmp(n, "Gid", 3) == 0)
		copy_val(m->gid, sizeof(m->gid), value, vlen);
	return 0;
}

/* "1700000000.123456789" (float seconds, as swiftclient and rclone write
 * them) into ns; -1 when it is not one. */
static int64_t parse_mtime(const char *s)
{
	int64_t sec = 0, ns = 0, scale = 100000000LL;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		if (sec > (INT64_MAX / 1000000000LL) / 10)
			return -1;
		sec = sec * 10 + (*p++ - '0');
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			ns += (*p - '0') * scale;
			scale /= 10;
			p++;
		}
	}
	return *p ? -1 : sec * 1000000000LL + ns;
}

static bool parse_u32(const char *s, int base, uint32_t *out)
{
	unsigned long v;
	char *end;

	if (!s[0])
		return false;
	errno = 0;
	v = strtoul(s, &end, base);
	if (errno || *end || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool is_dir_type(const char *ct)
{
	return strncasecmp(ct, SWIFT_DIR_TYPE, sizeof(SWIFT_DIR_TYPE) - 1) ==
		       0 &&
	       (ct[sizeof(SWIFT_DIR_TYPE) - 1] == '\0' ||
		ct[sizeof(SWIFT_DIR_TYPE) - 1] == ';');
}

/* Fills @info from an answer: @size given by the caller. */
void swift__fill_obj(struct smux_info *info, const struct smux__http_resp *r,
		     const struct swift_meta *m, uint64_t size)
{
	int64_t mt = parse_mtime(m->mtime);
	uint32_t mode, id;
	const char *e = r->etag;
	size_t el;

	smux_info_clear(info);
	info->nlink = 1;
	if (is_dir_type(r->content_type)) {
		swift__fill_dir(info);
		if (mt > 0)
			info->mtime_ns = mt;
		if (parse_u32(m->mode, 8, &mode))
			info->mode = S_IFDIR | (mode & 07777);
		return;
	}
	info->size = size;
	info->mtime_ns = mt >= 0 ? mt : smux__http_parse_date(r->last_modified);
	if (info->mtime_ns < 0)
		info->mtime_ns = 0;
	info->mode = S_IFREG | SWIFT_FILE_MODE;
	if (parse_u32(m->mode, 8, &mode)) {
		if ((mode & S_IFMT) == 0 || (mode & S_IFMT) == S_IFDIR)
			mode = (mode & 07777) | S_IFREG;
		info->mode = mode;
	}
	if (parse_u32(m->uid, 10, &id)) {
		info->uid = id;
		info->has_owner = true;
	}
	if (parse_u32(m->gid, 10, &id)) {
		info->gid = id;
		info->has_owner = true;
	}
	/* Swift quotes the ETag of a large object's manifest only */
	if (e[0] == '"')
		e++;
	el = strlen(e);
	if (el && e[el - 1] == '"')
		el--;
	snprintf(info->etag, sizeof(info->etag), "%.*s", (int)el, e);
}

/* ---- head ---- */

/* A directory "key/" exists when its marker or anything under it does. */
static int dir_exists(struct swiftb *s, const struct smux_ctx *ctx,
		      const char *dirkey, struct smux_info *info,
		      struct smux_error *err)
{
	bool any = false;
	int rc;

	if (!dirkey[0]) { /* the root always is */
		swift__fill_dir(info);
		return 0;
	}
	rc = swift__any_under(s, ctx, dirkey, &any, err);
	if (rc < 0)
		return rc;
	if (!any)
		return smux_error_set(err, SMUX_E_KEY_NOT_FOUND, s->base.name,
				      "no such key: %s", dirkey);
	swift__fill_dir(info);
	return 0;
}

/* HEAD of the object @key (no fallback to a directory). */
int swift__head_obj(struct swiftb *s, const struct smux_ctx *ctx,
		    const char *key, struct smux_info *info,
		    struct smux_error *err)
{
	struct smux__http_req req = {.method = "HEAD"};
	struct smux__http_resp resp;
	struct swift_meta m = {0};
	char what[256], *path = swift__obj_path(key, "");
	int rc;

	if (!path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	req.on_header = swift__meta_header;
	req.header_arg = &m;
	req.what = swift__what(what, sizeof(what), "HEAD", key);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	for (int i = 0; i < SWIFT_RACE_RETRIES && rc == -ENOENT &&
			swift__recent_present(s, key);
	     i++) {
		smux_error_clear(err);
		memset(&m, 0, sizeof(m));
		rc = swift__do(s, ctx, &req, path, &resp, err);
	}
	free(path);
	if (rc == -ENOENT || rc == 0)
		swift__absent_note(s, key, rc == -ENOENT);
	if (rc == -ENOENT)
		smux__attrstore_forget(s->attrs, key);
	if (rc < 0)
		return rc;
	swift__fill_obj(info, &resp, &m,
			resp.content_length > 0 ? (uint64_t)resp.content_length
						: 0);
	/* what the server holds now, for the listings to come; the exact
	 * X-Timestamp is what listings show as last_modified (the
	 * Last-Modified header is rounded up to the second) */
	smux__attrstore_put(s->attrs, key, info, parse_mtime(m.timestamp));
	return 0;
}

int swift__head(struct smux_backend *b, const struct smux_ctx *ctx,
		const char *key, struct smux_info *info, struct smux_error *err)
{
	struct swiftb *s = swift__from(b);
	char dirkey[SMUX_KEY_MAX + 2];
	struct smux_info scratch;
	int rc;

	if (!info)
		info = &scratch;
	smux_info_clear(info);
	if (!key[0])
		return dir_exists(s, ctx, "", info, err);
	rc = swift__head_obj(s, ctx, key, info, err);
	if (rc == 0 && swift__key_is_dir(key) &&
	    (info->mode & S_IFMT) != S_IFDIR)
		swift__fill_dir(info); /* "a/" stored without its type */
	if (rc != -ENOENT)
		return rc;
	smux_error_clear(err);
	snprintf(dirkey, sizeof(dirkey), "%s%s", key,
		 swift__key_is_dir(key) ? "" : "/");
	return dir_exists(s, ctx, dirkey, info, err);
}

/* ---- get ---- */

struct get_state {
	struct smux_sink *out;
	const char *if_match;
	struct smux__http_resp *resp;
	struct swift_meta *meta;
	uint64_t off, len;
	struct smux__http_range range;
	bool checked, stale, is_dir;
	struct smux_info info;
};

static uint64_t answer_size(const struct smux__http_resp *r)
{
	uint64_t size;

	return smux__http_answer_size(r, &size) ? size : 0;
}

static int get_check(struct get_state *g)
{
	if (g->checked)
		return g->stale || g->is_dir ? -ECANCELED : 0;
	g->checked = true;
	swift__fill_obj(&g->info, g->resp, g->meta, answer_size(g->resp));
	if ((g->info.mode & S_IFMT) == S_IFDIR) {
		g->is_dir = true;
		return -ECANCELED;
	}
	if (g->if_match && g->if_match[0] &&
	    strcmp(g->if_match, g->info.etag) != 0) {
		g->stale = true;
		return -ECANCELED;
	}
	smux__http_range_start(&g->range, g->resp, g->off, g->len);
	return 0;
}

static int get_sink_write(void *arg, const void *data, size_t len)
{
	struct get_state *g = arg;
	int rc = get_check(g);

	if (rc < 0)
		return rc;
	return smux__http_range_write(&g->range, data, len, g->out);
}

static int get_sink_rewind(void *arg)
{
	struct get_state *g = arg;

	g->checked = g->stale = g->is_dir = false;
	return smux_sink_rewind(g->out);
}

static int get_pinned_fail(struct swiftb *s, const char *key,
			   struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_PRECONDITION_FAILED, s->base.name,
			      "get \"%s\": the object changed (etag)", key);
}

/* A follow-up of a ranged GET (smux__http_range_rest). */
struct get_more {
	struct swiftb *s;
	const struct smux_ctx *ctx;
	const char *key;
	struct smux__http_resp resp;
};

static int get_more_fetch(void *arg, const char *range, const char *if_match,
			  struct smux_sink *sink, struct smux_error *err)
{
	struct get_more *m = arg;
	struct smux__http_range_hdrs h;
	char what[256];
	struct smux__http_req req = {
		.method = "GET", .headers = h.list, .sink = sink};
	char *path = swift__obj_path(m->key, "");
	int rc;

	if (!path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, m->s->base.name,
				      NULL);
	smux__http_range_hdrs(&h, range, if_match);
	req.what = swift__what(what, sizeof(what), "GET", m->key);
	rc = swift__do(m->s, m->ctx, &req, path, &m->resp, err);
	free(path);
	return rc;
}

int swift__get(struct smux_backend *b, const struct smux_ctx *ctx,
	       const char *key, const struct smux_get_opts *opts,
	       struct smux_sink *sink, struct smux_info *info,
	       struct smux_error *err)
{
	struct swiftb *s = swift__from(b);
	struct smux__http_req req = {.method = "GET"};
	struct smux__http_resp resp;
	struct swift_meta m = {0};
	struct get_state g = {.out = sink, .resp = &resp, .meta = &m};
	const char *hdrs[3] = {NULL, NULL, NULL};
	char range[64], im[SMUX_ETAG_MAX + 16], what[256], *path;
	struct smux_sink wrap;
	struct smux_info hi;
	size_t nh = 0;
	int rc;

	g.off = opts ? opts->offset : 0;
	g.len = opts ? opts->length : SMUX_LEN_ALL;
	g.if_match = opts ? opts->if_match : NULL;
	if (swift__key_is_dir(key)) {
		rc = swift__head(b, ctx, key, &hi, err);
		if (rc < 0)
			return rc;
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, s->base.name,
				      "get \"%s\": is a directory", key);
	}
	if (g.len == 0) {
		/* nothing to read: what the object is, and its version */
		rc = swift__head(b, ctx, key, &hi, err);
		if (rc < 0)
			return rc;
		if ((hi.mode & S_IFMT) == S_IFDIR)
			return smux_error_set(
				err, SMUX_E_IS_DIRECTORY, s->base.name,
				"get \"%s\": is a directory", key);
		if (g.if_match && g.if_match[0] &&
		    strcmp(g.if_match, hi.etag) != 0)
			return get_pinned_fail(s, key, err);
		if (info)
			*info = hi;
		return 0;
	}
	if (g.off || g.len != SMUX_LEN_ALL) {
		if (g.len == SMUX_LEN_ALL || g.off + g.len < g.off)
			snprintf(range, sizeof(range), "Range: bytes=%llu-",
				 (unsigned long long)g.off);
		else
			snprintf(range, sizeof(range), "Range: bytes=%llu-%llu",
				 (unsigned long long)g.off,
				 (unsigned long long)(g.off + g.len - 1));
		hdrs[nh++] = range;
	}
	if (g.if_match && g.if_match[0]) {
		snprintf(im, sizeof(im), "If-Match: \"%s\"", g.if_match);
		hdrs[nh++] = im;
	}
	path = swift__obj_path(key, "");
	if (!path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	smux_sink_cb(&wrap, get_sink_write, get_sink_rewind, &g);
	req.headers = hdrs;
	req.sink = &wrap;
	req.on_header = swift__meta_header;
	req.header_arg = &m;
	req.what = swift__what(what, sizeof(what), "GET", key);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	for (int i = 0; i < SWIFT_RACE_RETRIES && rc == -ENOENT &&
			swift__recent_present(s, key);
	     i++) {
		smux_error_clear(err);
		memset(&m, 0, sizeof(m));
		g.checked = g.stale = g.is_dir = false;
		rc = swift__do(s, ctx, &req, path, &resp, err);
	}
	free(path);
	if (rc < 0 && resp.status == 416) {
		/* the offset is at or past the end: 0 bytes, if it is a
		 * file of the pinned version */
		smux_error_clear(err);
		rc = swift__head(b, ctx, key, &hi, err);
		if (rc < 0)
			return rc;
		if ((hi.mode & S_IFMT) == S_IFDIR)
			return smux_error_set(
				err, SMUX_E_IS_DIRECTORY, s->base.name,
				"get \"%s\": is a directory", key);
		if (g.if_match && g.if_match[0] &&
		    strcmp(g.if_match, hi.etag) != 0)
			return get_pinned_fail(s, key, err);
		if (info)
			*info = hi;
		return 0;
	}
	if (rc == -ENOENT) {
		/* no object: a directory by that name is IS_DIRECTORY */
		char dirkey[SMUX_KEY_MAX + 2];
		struct smux_error e2 = {0};

		snprintf(dirkey, sizeof(dirkey), "%s/", key);
		if (dir_exists(s, ctx, dirkey, &hi, &e2) == 0)
			return smux_error_set(
				err, SMUX_E_IS_DIRECTORY, s->base.name,
				"get \"%s\": is a directory", key);
		return rc;
	}
	if (g.is_dir ||
	    (rc == 0 && !g.checked && get_check(&g) < 0 && g.is_dir))
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, s->base.name,
				      "get \"%s\": is a directory", key);
	if (g.stale)
		return get_pinned_fail(s, key, err);
	/* not the range asked for, or cut short: refused (get_check
	 * started the range of every answer that got here) */
	if (g.range.bad || rc == 0)
		rc = smux__http_range_check(&g.range, true, &resp, g.off, g.len,
					    s->base.name, key, err);
	if (rc == 0) { /* a 206 that covered less than asked: the rest */
		struct get_more more = {.s = s, .ctx = ctx, .key = key};

		rc = smux__http_range_rest(&g.range, get_more_fetch, &more,
					   &more.resp, sink, s->base.name, key,
					   err);
	}
	if (rc < 0)
		return rc;
	if (info)
		*info = g.info;
	return 0;
}
