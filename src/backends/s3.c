// SPDX-License-Identifier: MIT
/*
 * s3.c - the s3 backend (smux/s3.h): the instance, signed requests over
 * the HTTP layer (re-signed per attempt), and head, get, put, del. Listing
 * is s3_list.c, copies and attribute changes s3_copy.c, multipart uploads
 * s3_mpu.c, the writer s3_writer.c, DeleteObjects s3_del.c.
 *
 * The instance is immutable after smux_s3_new() but for the signer (its
 * own lock); every operation runs on any thread with no lock here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "backends/s3_internal.h"

static const struct smux_backend_ops s3b_ops;

struct s3b *smux__s3_from(struct smux_backend *b)
{
	return b && b->ops == &s3b_ops ? (struct s3b *)b : NULL;
}

static bool key_is_dir(const char *key)
{
	size_t n = strlen(key);

	return n == 0 || key[n - 1] == '/';
}

void smux__s3_etag_copy(char *out, size_t cap, const char *etag)
{
	size_t n = strlen(etag);

	if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"') {
		etag++;
		n -= 2;
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(out, etag, n);
	out[n] = '\0';
}

/* ---- one signed request ---- */

int smux__s3_call_init(struct s3b_call *c, struct s3b *s, const char *method,
		       const char *key, struct smux_error *err)
{
	size_t n;

	memset(c, 0, sizeof(*c));
	c->s = s;
	c->method = method;
	if (!key) {
		c->path = strdup(s->bucket_path[0] ? s->bucket_path : "/");
	} else {
		n = strlen(s->bucket_path) + 1 + s->prefix_len + strlen(key) +
		    1;
		c->path = malloc(n);
		if (c->path)
			snprintf(c->path, n, "%s/%s%s", s->bucket_path,
				 s->prefix, key);
	}
	if (!c->path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	/* what errors say: the method and the key, never a credential */
	snprintf(c->what, sizeof(c->what), "%s \"%.200s\"", method,
		 key ? key : "");
	return 0;
}

void smux__s3_call_header(struct s3b_call *c, const char *name,
			  const char *value)
{
	if (c->nhdr < S3B_HDR_MAX) {
		c->hdr[c->nhdr].name = name;
		c->hdr[c->nhdr].value = value;
		c->nhdr++;
	}
}

static void call_drop_attempt(struct s3b_call *c)
{
	for (size_t i = 0; i < sizeof(c->lines) / sizeof(c->lines[0]); i++) {
		free(c->lines[i]);
		c->lines[i] = NULL;
	}
	smux__s3_signed_release(&c->sig);
	memset(&c->sig, 0, sizeof(c->sig));
}

void smux__s3_call_release(struct s3b_call *c)
{
	call_drop_attempt(c);
	free(c->path);
	c->path = NULL;
}

static int call_sign(struct s3b_call *c, struct smux_error *err)
{
	struct smux_s3_request r = {
		.method = c->method,
		.host = c->s->host,
		.path = c->path,
		.query = c->query,
		.nquery = c->nquery,
		.headers = c->hdr,
		.nheaders = c->nhdr,
		.payload_hash = c->payload_hash,
		.now = time(NULL),
		.region = c->s->region,
	};
	int rc;

	call_drop_attempt(c);
	rc = smux__s3_sign(&c->s->signer, &r, &c->sig, err);
	if (rc < 0)
		smux_error_set(err,
			       err->e.code ? err->e.code
					   : SMUX_E_INVALID_ARGUMENT,
			       c->s->base.name, "%s: cannot sign", c->what);
	return rc;
}

static char *line_of(const char *name, const char *value)
{
	char *l;

	if (asprintf(&l, "%s: %s", name, value) < 0)
		return NULL;
	return l;
}

/* struct smux__http_req.prepare: a fresh signature for every attempt. */
static int call_prepare(void *arg, const char *const **headers,
			struct smux_error *err)
{
	struct s3b_call *c = arg;
	size_t n = 0, i;
	int rc;

	rc = call_sign(c, err);
	if (rc < 0)
		return rc;
	c->lines[n++] = line_of("Host", c->s->host);
	c->lines[n++] = line_of("Authorization", c->sig.authorization);
	c->lines[n++] = line_of("X-Amz-Date", c->sig.amz_date);
	c->lines[n++] = line_of("X-Amz-Content-Sha256", c->sig.payload_hash);
	if (c->sig.security_token)
		c->lines[n++] =
			line_of("X-Amz-Security-Token", c->sig.security_token);
	for (i = 0; i < c->nhdr; i++)
		c->lines[n++] = line_of(c->hdr[i].name, c->hdr[i].value);
	for (i = 0; i < n; i++) {
		if (!c->lines[i])
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      c->s->base.name, NULL);
		c->hdrs[i] = c->lines[i];
	}
	c->hdrs[n] = NULL;
	*headers = c->hdrs;
	return 0;
}

/* Parses a decimal number of at most 19 digits; -1 when not one. */
static int64_t parse_i64(const char *v, size_t len)
{
	int64_t x = 0;

	if (len == 0 || len > 18)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	return x;
}

/* "sec" (s3fs) or "sec.fraction" (rclone) into ns; -1 when neither. */
static int64_t parse_mtime(const char *v, size_t len)
{
	const char *dot = memchr(v, '.', len);
	size_t sl = dot ? (size_t)(dot - v) : len;
	int64_t sec = parse_i64(v, sl), frac = 0;
	size_t fl;

	if (sec < 0 || sec > INT64_MAX / 1000000000 - 1)
		return -1;
	if (dot) {
		fl = len - sl - 1;
		if (fl == 0 || fl > 64)
			return -1;
		for (size_t i = 0; i < fl; i++) {
			char d = dot[1 + i];

			if (d < '0' || d > '9')
				return -1;
			if (i < 9)
				frac = frac * 10 + (d - '0');
		}
		for (size_t i = fl; i < 9; i++)
			frac *= 10;
	}
	return sec * 1000000000 + frac;
}

static bool name_is(const char *name, size_t nlen, const char *want)
{
	return strlen(want) == nlen && strncasecmp(name, want, nlen) == 0;
}

/* Response headers: the x-amz-meta-* conventions of s3fs and rclone. A
 * malformed value is ignored (another tool's metadata), never trusted. */
static int call_on_header(void *arg, const char *name, size_t nlen,
			  const char *value, size_t vlen)
{
	struct s3b_meta *m = &((struct s3b_call *)arg)->meta;
	int64_t x;

	if ((name_is(name, nlen, "x-amz-server-side-encryption") && vlen >= 7 &&
	     strncasecmp(value, "aws:kms", 7) == 0) ||
	    name_is(name, nlen,
		    "x-amz-server-side-encryption-customer-algorithm"))
		m->etag_not_md5 = true;
	if (nlen < 11 || strncasecmp(name, "x-amz-meta-", 11) != 0)
		return 0;
	if (name_is(name, nlen, "x-amz-meta-mode")) {
		x = parse_i64(value, vlen);
		if (x >= 0 && x <= 0177777) {
			m->has_mode = true;
			m->mode = (uint32_t)x;
		}
	} else if (name_is(name, nlen, "x-amz-meta-uid")) {
		x = parse_i64(value, vlen);
		if (x >= 0 && x < UINT32_MAX) {
			m->has_uid = true;
			m->uid = (uint32_t)x;
		}
	} else if (name_is(name, nlen, "x-amz-meta-gid")) {
		x = parse_i64(value, vlen);
		if (x >= 0 && x < UINT32_MAX) {
			m->has_gid = true;
			m->gid = (uint32_t)x;
		}
	} else if (name_is(name, nlen, "x-amz-meta-mtime")) {
		x = parse_mtime(value, vlen);
		if (x >= 0) {
			m->has_mtime = true;
			m->mtime_ns = x;
		}
	}
	return 0;
}

/* Maps a failed answer: the S3 error document when there is one. */
static int call_fail(struct s3b_call *c, int rc, struct smux_error *err)
{
	struct smux__http_resp *r = &c->resp;
	struct smux_s3_xml *x = NULL;
	struct smux_error perr = {0};
	unsigned attempts = err->e.attempts;

	if (r->status < 300)
		return rc; /* a transfer failure: the HTTP layer's mapping */
	c->not_found = r->status == 404;
	if (r->errbody_len > 0 &&
	    smux__s3_xml_parse(SMUX_S3_DOC_ERROR, r->errbody, r->errbody_len,
			       &x, &perr) < 0)
		x = NULL;
	rc = smux__s3_error_fill(err, (int)r->status,
				 x ? smux__s3_xml_result(x) : NULL,
				 c->s->base.name, c->what);
	smux__s3_xml_free(x);
	err->e.attempts = attempts;
	return rc;
}

int smux__s3_call(struct s3b_call *c, const struct smux_ctx *ctx,
		  struct smux_error *err)
{
	struct smux__http_req req = {.method = c->method};
	char *url = NULL;
	int rc;

	/* the first signature gives the URL (path and query as signed) */
	rc = call_sign(c, err);
	if (rc < 0)
		return rc;
	if (asprintf(&url, "%s://%s%s%s%s", c->s->scheme, c->s->host,
		     c->sig.url_path, c->sig.url_query[0] ? "?" : "",
		     c->sig.url_query) < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, c->s->base.name,
				      NULL);
	memset(&c->resp, 0, sizeof(c->resp));
	memset(&c->meta, 0, sizeof(c->meta));
	req.url = url;
	req.body = c->body;
	req.sink = c->sink;
	req.max_body = c->max_body;
	req.no_retry = c->no_retry;
	req.on_header = call_on_header;
	req.header_arg = c;
	req.what = c->what;
	req.prepare = call_prepare;
	req.prepare_arg = c;
	rc = smux__http_do(c->s->http, ctx, &req, &c->resp, err);
	free(url);
	if (rc < 0)
		return call_fail(c, rc, err);
	return 0;
}

/* ---- metadata ---- */

void smux__s3_meta_headers(struct s3b_call *c, char bufs[4][32], uint32_t mode,
			   int64_t mtime_ns, bool owner, uint32_t uid,
			   uint32_t gid)
{
	if (mtime_ns < 0)
		mtime_ns = 0;
	snprintf(bufs[0], 32, "%" PRIu32, mode);
	smux__s3_call_header(c, "x-amz-meta-mode", bufs[0]);
	snprintf(bufs[1], 32, "%" PRId64 ".%09" PRId64, mtime_ns / 1000000000,
		 mtime_ns % 1000000000);
	smux__s3_call_header(c, "x-amz-meta-mtime", bufs[1]);
	/* one id alone is kept too (chown of the uid of an object that had
	 * no owner); the other shows as the mount's */
	if (owner && uid != SMUX_ID_NONE) {
		snprintf(bufs[2], 32, "%" PRIu32, uid);
		smux__s3_call_header(c, "x-amz-meta-uid", bufs[2]);
	}
	if (owner && gid != SMUX_ID_NONE) {
		snprintf(bufs[3], 32, "%" PRIu32, gid);
		smux__s3_call_header(c, "x-amz-meta-gid", bufs[3]);
	}
}

void smux__s3_info_from(const struct s3b_call *c, const char *key,
			uint64_t size, struct smux_info *info)
{
	const struct s3b_meta *m = &c->meta;
	int64_t lm = smux__http_parse_date(c->resp.last_modified);
	uint32_t type;

	smux_info_clear(info);
	info->size = size;
	smux__s3_etag_copy(info->etag, sizeof(info->etag), c->resp.etag);
	info->mtime_ns = m->has_mtime ? m->mtime_ns : (lm > 0 ? lm : 0);
	if (key_is_dir(key)) {
		/* a marker's mode with the directory type (s3fs's, ours) is
		 * kept also when it is 0000; a bare 0 is no mode */
		info->mode = S_IFDIR |
			     (m->has_mode && ((m->mode & 07777) ||
					      (m->mode & S_IFMT) == S_IFDIR)
				      ? (m->mode & 07777)
				      : S3B_DIR_MODE);
	} else if (m->has_mode) {
		type = m->mode & S_IFMT;
		if (type != S_IFLNK && type != S_IFIFO && type != S_IFSOCK)
			type = S_IFREG;
		info->mode = type | (m->mode & 07777);
	} else {
		info->mode = S_IFREG | S3B_FILE_MODE;
	}
	/* an id missing stays SMUX_ID_NONE: the mount's shows */
	if (m->has_uid)
		info->uid = m->uid;
	if (m->has_gid)
		info->gid = m->gid;
	info->has_owner = m->has_uid || m->has_gid;
}

/* ---- head ---- */

static void dir_info(struct smux_info *info)
{
	smux_info_clear(info);
	info->mode = S_IFDIR | S3B_DIR_MODE;
}

/* HEAD of the object @key itself. */
static int head_object(struct s3b *s, const struct smux_ctx *ctx,
		       const char *key, struct smux_info *info,
		       struct smux_error *err)
{
	struct smux_info got;
	struct s3b_call c;
	int rc;

	rc = smux__s3_call_init(&c, s, "HEAD", key, err);
	if (rc < 0)
		return rc;
	rc = smux__s3_call(&c, ctx, err);
	if (rc == 0) {
		smux__s3_info_from(&c, key,
				   c.resp.content_length > 0
					   ? (uint64_t)c.resp.content_length
					   : 0,
				   &got);
		/* what the server holds now, for the listings to come */
		smux__attrstore_put(
			s->attrs, key, &got,
			smux__http_parse_date(c.resp.last_modified));
		if (info)
			*info = got;
	} else if (rc == -ENOENT) {
		smux__attrstore_forget(s->attrs, key);
	}
	smux__s3_call_release(&c);
	return rc;
}

/* A directory "a/" (marker or implied by keys under it). */
static int head_dir(struct s3b *s, const struct smux_ctx *ctx, const char *dkey,
		    struct smux_info *info, struct smux_error *err)
{
	int rc;

	if (dkey[0] == '\0') { /* the root always exists */
		if (info)
			dir_info(info);
		return 0;
	}
	rc = head_object(s, ctx, dkey, info, err);
	if (rc != -ENOENT)
		return rc; /* the marker, or a real failure */
	smux_error_clear(err);
	rc = smux__s3_any_under(s, ctx, dkey, err);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return smux_error_set(err, SMUX_E_KEY_NOT_FOUND, s->base.name,
				      "head \"%s\": no such key", dkey);
	if (info)
		dir_info(info);
	return 0;
}

int smux__s3_head(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *key, struct smux_info *info,
		  struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	size_t n = strlen(key);
	char *dkey;
	int rc;

	if (key_is_dir(key))
		return head_dir(s, ctx, key, info, err);
	rc = head_object(s, ctx, key, info, err);
	if (rc != -ENOENT)
		return rc;
	/* "a" names a directory when "a/" does */
	dkey = malloc(n + 2);
	if (!dkey)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	memcpy(dkey, key, n);
	memcpy(dkey + n, "/", 2);
	smux_error_clear(err);
	rc = head_dir(s, ctx, dkey, info, err);
	free(dkey);
	if (rc == -ENOENT)
		smux_error_set(err, SMUX_E_KEY_NOT_FOUND, s->base.name,
			       "head \"%s\": no such key", key);
	return rc;
}

/* ---- get ---- */

/* The caller's sink behind a check of the answer's version: a server that
 * ignores If-Match (s3rver) must not hand another version to the caller. */
struct get_state {
	struct s3b_call *c;
	struct smux_sink *out;
	const char *if_match;
	uint64_t off, len;
	struct smux__http_range range;
	bool checked, stale;
	bool bad; /* an answer without ETag: no object store's */
};

static int get_check(struct get_state *g)
{
	char etag[SMUX_ETAG_MAX];

	if (g->checked)
		return g->stale || g->bad ? -ECANCELED : 0;
	g->checked = true;
	smux__s3_etag_copy(etag, sizeof(etag), g->c->resp.etag);
	/* an object store's GET always names its version: a read of a
	 * version that gets an answer naming none (a proxy's error page
	 * sent as a 200: s43-t2) got no answer, and goes to another
	 * member, not ESTALE */
	if (!etag[0] && g->if_match && g->if_match[0]) {
		g->bad = true;
		return -ECANCELED;
	}
	if (g->if_match && g->if_match[0] && strcmp(g->if_match, etag) != 0) {
		g->stale = true;
		return -ECANCELED;
	}
	return 0;
}

static int get_sink_write(void *arg, const void *data, size_t len)
{
	struct get_state *g = arg;
	int rc;

	if (!g->checked) {
		rc = get_check(g);
		if (rc < 0)
			return rc;
		/* a server that ignored the Range sends it all (200) */
		smux__http_range_start(&g->range, &g->c->resp, g->off, g->len);
	} else if (g->stale || g->bad) {
		return -ECANCELED;
	}
	return smux__http_range_write(&g->range, data, len, g->out);
}

static int get_sink_rewind(void *arg)
{
	struct get_state *g = arg;

	g->checked = false;
	g->stale = false;
	g->bad = false;
	return smux_sink_rewind(g->out);
}

/* Total size of the object from a (ranged) GET answer. */
static uint64_t answer_size(const struct smux__http_resp *r)
{
	uint64_t size;

	return smux__http_answer_size(r, &size) ? size : 0;
}

static int stale_error(struct s3b *s, const char *key, struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_PRECONDITION_FAILED, s->base.name,
			      "get \"%s\": version changed", key);
}

/* The error of @g's answer: BAD_RESPONSE for one without ETag, else
 * another version (stale_error). */
static int answer_error(struct s3b *s, const char *key,
			const struct get_state *g, struct smux_error *err)
{
	if (!g->bad)
		return stale_error(s, key, err);
	return smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
			      "get \"%s\": a %ld answer without ETag", key,
			      g->c->resp.status);
}

/* No bytes wanted (or none there): the version check and info only. */
static int get_nothing(struct s3b *s, const struct smux_ctx *ctx,
		       const char *key, const char *if_match,
		       struct smux_info *info, struct smux_error *err)
{
	struct smux_info h;
	int rc;

	smux_info_clear(&h);
	rc = smux__s3_head(&s->base, ctx, key, &h, err);
	if (rc < 0)
		return rc;
	if ((h.mode & S_IFMT) == S_IFDIR)
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, s->base.name,
				      "get \"%s\": is a directory", key);
	if (if_match && if_match[0] && strcmp(if_match, h.etag) != 0)
		return stale_error(s, key, err);
	if (info)
		*info = h;
	return 0;
}

/* A follow-up of a ranged GET (smux__http_range_rest): signed anew. */
struct get_more {
	struct s3b *s;
	const struct smux_ctx *ctx;
	const char *key;
	struct s3b_call c; /* the answer stays in c.resp after the call */
};

static int get_more_fetch(void *arg, const char *range, const char *if_match,
			  struct smux_sink *sink, struct smux_error *err)
{
	struct get_more *m = arg;
	int rc = smux__s3_call_init(&m->c, m->s, "GET", m->key, err);

	if (rc < 0)
		return rc;
	smux__s3_call_header(&m->c, "Range", range);
	if (if_match)
		smux__s3_call_header(&m->c, "If-Match", if_match);
	m->c.sink = sink;
	rc = smux__s3_call(&m->c, m->ctx, err);
	smux__s3_call_release(&m->c);
	return rc;
}

static int s3b_get(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, const struct smux_get_opts *opts,
		   struct smux_sink *sink, struct smux_info *info,
		   struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	uint64_t off = opts ? opts->offset : 0;
	uint64_t len = opts ? opts->length : SMUX_LEN_ALL;
	const char *if_match = opts ? opts->if_match : NULL;
	struct get_state g = {.out = sink, .if_match = if_match};
	char range[64], quoted[SMUX_ETAG_MAX + 3];
	struct smux_info h;
	struct smux_sink wrap;
	struct s3b_call c;
	bool started;
	int rc;

	if (key_is_dir(key)) {
		rc = smux__s3_head(b, ctx, key, &h, err);
		if (rc < 0)
			return rc;
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, s->base.name,
				      "get \"%s\": is a directory", key);
	}
	if (len == 0 || off >= (uint64_t)INT64_MAX)
		return get_nothing(s, ctx, key, if_match, info, err);
	rc = smux__s3_call_init(&c, s, "GET", key, err);
	if (rc < 0)
		return rc;
	g.c = &c;
	g.off = off;
	g.len = len;
	if (off > 0 || len != SMUX_LEN_ALL) {
		if (len == SMUX_LEN_ALL || off + len < off)
			snprintf(range, sizeof(range), "bytes=%llu-",
				 (unsigned long long)off);
		else
			snprintf(range, sizeof(range), "bytes=%llu-%llu",
				 (unsigned long long)off,
				 (unsigned long long)(off + len - 1));
		smux__s3_call_header(&c, "Range", range);
	}
	if (if_match && if_match[0]) {
		snprintf(quoted, sizeof(quoted), "\"%s\"", if_match);
		smux__s3_call_header(&c, "If-Match", quoted);
	}
	smux_sink_cb(&wrap, get_sink_write,
		     smux_sink_can_rewind(sink) ? get_sink_rewind : NULL, &g);
	c.sink = &wrap;
	rc = smux__s3_call(&c, ctx, err);
	if (g.stale || g.bad) {
		rc = answer_error(s, key, &g, err);
		goto out;
	}
	if (g.range.bad) { /* not the range asked for: refused */
		rc = smux__http_range_check(&g.range, true, &c.resp, off, len,
					    s->base.name, key, err);
		goto out;
	}
	if (rc < 0 && sink->error) { /* the caller's sink failed: LOCAL */
		rc = smux_error_make_local(err, sink->error);
		goto out;
	}
	if (rc < 0 &&
	    ((c.resp.status == 416) ||
	     (c.resp.status == 206 && strstr(c.resp.content_range, "/0") &&
	      strcmp(strstr(c.resp.content_range, "/0"), "/0") == 0))) {
		/* a range past the end: no bytes, but the object exists
		 * (s3rver answers a range of an empty object with a 206 "0-0/0"
		 * that promises one byte and sends none) */
		smux_error_clear(err);
		rc = get_nothing(s, ctx, key, if_match, info, err);
		goto out;
	}
	if (rc == -ENOENT) {
		/* "a" may name a directory */
		struct smux_error e2 = {0};

		if (smux__s3_head(b, ctx, key, &h, &e2) == 0 &&
		    (h.mode & S_IFMT) == S_IFDIR)
			rc = smux_error_set(err, SMUX_E_IS_DIRECTORY,
					    s->base.name,
					    "get \"%s\": is a directory", key);
		goto out;
	}
	if (rc < 0)
		goto out;
	started = g.checked;
	if (get_check(&g) < 0) { /* an empty answer reaches no sink write */
		rc = answer_error(s, key, &g, err);
		goto out;
	}
	/* every byte of the range came (a body cut short is no content) */
	rc = smux__http_range_check(&g.range, started, &c.resp, off, len,
				    s->base.name, key, err);
	if (rc == 0) { /* a 206 that covered less than asked: the rest */
		struct get_more m = {.s = s, .ctx = ctx, .key = key};

		rc = smux__http_range_rest(&g.range, get_more_fetch, &m,
					   &m.c.resp, sink, s->base.name, key,
					   err);
	}
	if (rc < 0)
		goto out;
	if (info)
		smux__s3_info_from(&c, key, answer_size(&c.resp), info);
out:
	smux__s3_call_release(&c);
	return rc;
}

/* ---- put ---- */

/* The stored mode of a put: type and permission bits as s3fs keeps them. */
static uint32_t put_mode(const char *key, const struct smux_put_opts *o)
{
	uint32_t type = o ? o->mode & S_IFMT : 0;
	uint32_t perm = o ? o->mode & 07777 : 0;
	bool meant = o && (o->flags & SMUX_PUT_MODE);

	if (key_is_dir(key))
		return S_IFDIR | (perm || meant ? perm : S3B_DIR_MODE);
	if (type != S_IFLNK && type != S_IFIFO && type != S_IFSOCK)
		type = S_IFREG;
	if (type == S_IFLNK && !perm)
		perm = 0777;
	return type | (perm || meant ? perm : S3B_FILE_MODE);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void smux__s3_put_attrs(const char *key, const struct smux_put_opts *opts,
			uint64_t size, struct smux_info *info)
{
	bool owner = opts && (opts->flags & SMUX_PUT_OWNER) &&
		     (opts->uid != SMUX_ID_NONE || opts->gid != SMUX_ID_NONE);

	smux_info_clear(info);
	info->size = size;
	info->mode = put_mode(key, opts);
	info->mtime_ns = smux_put_has_mtime(opts) ? opts->mtime_ns : now_ns();
	if (owner) {
		info->uid = opts->uid;
		info->gid = opts->gid;
		info->has_owner = true;
	}
}

int smux__s3_put(struct smux_backend *b, const struct smux_ctx *ctx,
		 const char *key, const struct smux_source *src,
		 const struct smux_put_opts *opts, struct smux_info *info,
		 struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	struct smux_source empty;
	char meta[4][32], etag[SMUX_ETAG_MAX];
	struct smux_info a;
	struct s3b_call c;
	int rc;

	smux__s3_put_attrs(key, opts, src ? src->length : 0, &a);
	if (key_is_dir(key) && src && src->length > 0)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      s->base.name,
				      "put \"%s\": a directory marker holds "
				      "no bytes",
				      key);
	if ((a.mode & S_IFMT) == S_IFLNK &&
	    (!src || src->length == 0 || src->length >= 4096))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      s->base.name,
				      "put \"%s\": a symlink target is 1 to "
				      "4095 bytes",
				      key);
	if (!src) {
		smux_source_buf(&empty, "", 0);
		src = &empty;
	}
	rc = smux__s3_call_init(&c, s, "PUT", key, err);
	if (rc < 0)
		return rc;
	smux__s3_meta_headers(&c, meta, a.mode, a.mtime_ns, a.has_owner,
			      a.has_owner ? a.uid : 0, a.has_owner ? a.gid : 0);
	if (src->length > s->mpu_above) {
		rc = smux__s3_mpu_put(s, ctx, key, src, &c, etag, sizeof(etag),
				      err);
	} else {
		unsigned char md5[16];
		char b64[25];

		/* the server refuses a body that did not arrive whole, and
		 * the ETag says which one it stored */
		bool have = false;

		rc = smux__s3_md5(s, src, md5, b64, &have, err);
		if (rc == 0) {
			if (have)
				smux__s3_call_header(&c, "Content-MD5", b64);
			c.body = src;
			c.payload_hash = SMUX_S3_UNSIGNED_PAYLOAD;
			rc = smux__s3_call(&c, ctx, err);
		}
		if (rc == 0) {
			smux__s3_etag_copy(etag, sizeof(etag), c.resp.etag);
			if (have && !c.meta.etag_not_md5)
				rc = smux__s3_md5_etag(s, c.what, etag, md5,
						       err);
		}
	}
	if (rc == 0) {
		snprintf(a.etag, sizeof(a.etag), "%s", etag);
		/* the metadata sent and the ETag answered; Last-Modified is
		 * recorded by the first listing that shows this version */
		smux__attrstore_put(s->attrs, key, &a, 0);
		if (info)
			*info = a;
	} else {
		smux__attrstore_forget(s->attrs, key); /* may have landed */
	}
	smux__s3_call_release(&c);
	return rc;
}

/* ---- del ---- */

int smux__s3_del(struct smux_backend *b, const struct smux_ctx *ctx,
		 const char *key, struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	struct s3b_call c;
	int rc;

	if (key[0] == '\0') /* the root is no object */
		return 0;
	rc = smux__s3_call_init(&c, s, "DELETE", key, err);
	if (rc < 0)
		return rc;
	rc = smux__s3_call(&c, ctx, err);
	smux__attrstore_forget(s->attrs, key); /* gone, or not known */
	if (rc == -ENOENT) { /* absent: deleting is idempotent */
		smux_error_clear(err);
		rc = 0;
	}
	smux__s3_call_release(&c);
	return rc;
}

/* ---- the instance ---- */

static size_t s3b_key_max(struct smux_backend *b)
{
	struct s3b *s = smux__s3_from(b);

	return 1024 - s->prefix_len;
}

/*
 * Owners are kept: put and setattr store uid/gid in x-amz-meta-uid/gid as
 * s3fs does, and head reads them back. Without the capability the daemon
 * answered chown with EPERM and created files as itself, not the caller.
 */
static unsigned s3b_caps(struct smux_backend *b)
{
	smux__s3_from(b);
	/* head("a") asks "a/" itself (smux__s3_head); many deletes are
	 * one DeleteObjects request (s3_del.c) */
	return SMUX_CAP_OWNER | SMUX_CAP_HEAD_DIR | SMUX_CAP_DEL_MANY |
	       SMUX_CAP_LISTS_DOTNAMES | SMUX_CAP_SYMLINK | SMUX_CAP_FIFO;
}

static void s3b_destroy(struct smux_backend *b)
{
	struct s3b *s = smux__s3_from(b);

	smux__s3_orphans_close(s); /* its sweeper uses http */
	smux__attrstore_free(s->attrs);
	smux__http_free(s->http);
	smux__s3_signer_release(&s->signer);
	free(s->scheme);
	free(s->host);
	free(s->bucket);
	free(s->bucket_path);
	free(s->prefix);
	free(s->region);
	smux_backend_release(&s->base);
	free(s);
}

static const struct smux_backend_ops s3b_ops = {
	.kind = "s3",
	.get = s3b_get,
	.put = smux__s3_put,
	.writer_open = smux__s3_writer_open,
	.del = smux__s3_del,
	.del_many = smux__s3_del_many,
	.head = smux__s3_head,
	.list = smux__s3_list,
	.copy = smux__s3_copy,
	.rename = smux__s3_rename,
	.setattr = smux__s3_setattr,
	.key_max = s3b_key_max,
	.caps = s3b_caps,
	.destroy = s3b_destroy,
};

static int bad_opt(const char *name, struct smux_error *err, const char *what)
{
	return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name, "%s", what);
}

/* A bucket name S3 takes: 3 to 63 of a-z 0-9 . - (and _ for old buckets,
 * path-style only). */
static bool bucket_ok(const char *b, bool path_style)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = b[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		      ch == '.' || ch == '-' ||
		      (path_style && (ch == '_' || (ch >= 'A' && ch <= 'Z')))))
			return false;
	}
	return true;
}

/* scheme and host[:port] of @endpoint; no path, user or query. */
static int parse_endpoint(struct s3b *s, const char *name, const char *ep,
			  const char *bucket, bool path_style,
			  struct smux_error *err)
{
	const char *h;
	size_t n;

	if (!ep)
		return bad_opt(name, err, "endpoint: missing");
	if (strncmp(ep, "http://", 7) == 0) {
		s->scheme = strdup("http");
		h = ep + 7;
	} else if (strncmp(ep, "https://", 8) == 0) {
		s->scheme = strdup("https");
		h = ep + 8;
	} else {
		return bad_opt(name, err,
			       "endpoint: must start with http:// or https://");
	}
	n = strlen(h);
	if (n && h[n - 1] == '/')
		n--;
	if (n == 0 || n > 200 || memchr(h, '@', n) || memchr(h, '/', n) ||
	    memchr(h, '?', n) || memchr(h, '#', n))
		return bad_opt(name, err,
			       "endpoint: must be scheme://host[:port] with "
			       "no path, user or query");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)h[i] <= ' ' || (unsigned char)h[i] >= 0x7f)
			return bad_opt(name, err,
				       "endpoint: bad character in the host");
	if (path_style) {
		s->host = strndup(h, n);
		if (asprintf(&s->bucket_path, "/%s", bucket) < 0)
			s->bucket_path = NULL;
	} else {
		if (asprintf(&s->host, "%s.%.*s", bucket, (int)n, h) < 0)
			s->host = NULL;
		s->bucket_path = strdup("");
	}
	if (!s->scheme || !s->host || !s->bucket_path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	return 0;
}

static int load_creds(const char *name, const struct smux_s3_opts *o,
		      struct smux_s3_creds *c, struct smux_error *err)
{
	int rc;

	memset(c, 0, sizeof(*c));
	if (o->access_key || o->secret_key) {
		if (!o->access_key || !o->secret_key)
			return bad_opt(name, err,
				       "credentials: an access key needs its "
				       "secret");
		c->access_key = strdup(o->access_key);
		c->secret_key = strdup(o->secret_key);
		c->session_token =
			o->session_token ? strdup(o->session_token) : NULL;
		if (!c->access_key || !c->secret_key ||
		    (o->session_token && !c->session_token)) {
			smux__s3_creds_release(c);
			return smux_error_set(err, SMUX_E_NO_MEMORY, name,
					      NULL);
		}
		return 0;
	}
	if (o->credentials_file)
		rc = smux__s3_creds_from_file(o->credentials_file, o->profile,
					      c, err);
	else
		rc = smux__s3_creds_from_env(o->credentials_env, c, err);
	if (rc < 0)
		snprintf(err->e.backend, sizeof(err->e.backend), "%s", name);
	return rc;
}

/* The attribute cache (core/attrstore.c) of the bucket and prefix at the
 * endpoint: a store left by another configuration is emptied. */
static int attrs_open(struct s3b *s, const struct smux_s3_opts *o)
{
	char *id;

	if (asprintf(&id, "s3 %s://%s%s/%s", s->scheme, s->host, s->bucket_path,
		     s->prefix) < 0)
		return -ENOMEM;
	s->attrs = smux__attrstore_open(o->attr_store, id, o->attr_store_max);
	free(id);
	return s->attrs ? 0 : -ENOMEM;
}

int smux_s3_new(const char *name, const struct smux_s3_opts *o,
		struct smux_backend **out, struct smux_error *err)
{
	struct smux__http_opts ho = {0};
	struct smux_s3_creds creds;
	const char *pfx = o && o->prefix ? o->prefix : "";
	struct s3b *s;
	int rc;

	*out = NULL;
	if (!o || !o->bucket || !bucket_ok(o->bucket, o->path_style))
		return bad_opt(name, err,
			       "bucket: 3 to 63 characters a-z 0-9 . - "
			       "(virtual-host addressing needs a DNS name)");
	if (pfx[0] &&
	    (pfx[0] == '/' || pfx[strlen(pfx) - 1] != '/' || strlen(pfx) > 512))
		return bad_opt(name, err,
			       "prefix: must end in '/', not start with it, "
			       "at most 512 bytes");
	if (o->part_size && (o->part_size < SMUX_S3_PART_MIN ||
			     o->part_size > SMUX_S3_SINGLE_MAX))
		return bad_opt(name, err, "part_size: 5 MiB to 5 GiB");
	if (o->part_parallel > SMUX_S3_PARALLEL_MAX)
		return bad_opt(name, err, "part_parallel: 1 to 32");
	if (o->copy_part_size && (o->copy_part_size < SMUX_S3_PART_MIN ||
				  o->copy_part_size > SMUX_S3_SINGLE_MAX))
		return bad_opt(name, err, "copy_part_size: 5 MiB to 5 GiB");
	if (o->multipart_threshold > SMUX_S3_SINGLE_MAX)
		return bad_opt(name, err, "multipart_threshold: at most 5 GiB");
	s = calloc(1, sizeof(*s));
	if (!s)
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	rc = smux_backend_init(&s->base, &s3b_ops, name);
	if (rc < 0) {
		free(s);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	rc = parse_endpoint(s, name, o->endpoint, o->bucket, o->path_style,
			    err);
	if (rc < 0)
		goto fail;
	s->bucket = strdup(o->bucket);
	s->prefix = strdup(pfx);
	s->prefix_len = strlen(pfx);
	s->region = strdup(o->region && o->region[0] ? o->region : "us-east-1");
	s->copy_part_size =
		o->copy_part_size ? o->copy_part_size : SMUX_S3_SINGLE_MAX;
	s->part_size = o->part_size ? o->part_size : (8ull << 20);
	s->part_parallel = o->part_parallel ? o->part_parallel : 4;
	s->mpu_above = o->multipart_threshold ? o->multipart_threshold
					      : SMUX_S3_MULTIPART_DEFAULT;
	if (s->mpu_above < s->part_size)
		s->mpu_above = s->part_size;
	if (!s->bucket || !s->prefix || !s->region) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		goto fail;
	}
	rc = load_creds(name, o, &creds, err);
	if (rc < 0)
		goto fail;
	rc = smux__s3_signer_init(&s->signer, &creds, err);
	smux__s3_creds_release(&creds);
	if (rc < 0)
		goto fail;
	ho.backend = name;
	ho.ca_file = o->ca_file;
	ho.connect_timeout_ms = o->connect_timeout_ms;
	ho.idle_timeout_ms = o->idle_timeout_ms;
	ho.max_attempts = o->max_attempts;
	rc = smux__http_new(&ho, &s->http, err);
	if (rc < 0)
		goto fail;
	if (o->upload_journal) {
		rc = smux__s3_orphans_open(s, o->upload_journal, err);
		if (rc < 0)
			goto fail;
	}
	if (!o->attr_store_off) {
		rc = attrs_open(s, o);
		if (rc < 0) {
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
			goto fail;
		}
	}
	*out = &s->base;
	return 0;
fail:
	s3b_destroy(&s->base);
	return rc;
}

int smux__s3_make_bucket(struct smux_backend *b, const struct smux_ctx *ctx,
			 struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	struct s3b_call c;
	int rc;

	if (!s)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, "s3",
				      "not an s3 backend");
	rc = smux__s3_call_init(&c, s, "PUT", NULL, err);
	if (rc < 0)
		return rc;
	snprintf(c.what, sizeof(c.what), "CREATE BUCKET \"%.100s\"", s->bucket);
	rc = smux__s3_call(&c, ctx, err);
	if (rc < 0 && c.resp.status == 409) { /* already there: ours */
		smux_error_clear(err);
		rc = 0;
	}
	smux__s3_call_release(&c);
	return rc;
}
