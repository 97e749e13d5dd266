// SPDX-License-Identifier: MIT
/*
 * swift_slo.c - large objects of the swift backend: the cluster's limits
 * from /info (read once, jansson), the segment plan, the upload of a
 * static large object (SLO: segments in "<container>_segments", in order,
 * each PUT with its MD5 as ETag, then the manifest "PUT
 * key?multipart-manifest=put" with the JSON list [{path, etag,
 * size_bytes}]), and the segments of an existing large object (an SLO's
 * manifest read with ?multipart-manifest=get, or a DLO's prefix listed),
 * so an overwrite or a delete can remove them.
 *
 * Segment names follow python-swiftclient's
 * "<key>/slo/<time>/<size>/<segment size>/<8 digits>", with a counter in
 * <time> so two uploads of one key never share a segment name; a key too
 * long for that uses "slo-long/<md5 of the key>/..." instead.
 */
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backends/swift_internal.h"

/* Swift's object name limit (constraints.py MAX_OBJECT_NAME_LENGTH). */
#define SWIFT_NAME_MAX 1024
/* Longest /info answer read (bytes). */
#define SWIFT_INFO_MAX (1u << 20)
/* Bytes of one manifest entry beyond its path: {"path":"","etag":"<32>",
 * "size_bytes":<20>}, (JSON_COMPACT) */
#define SWIFT_ENTRY_OVERHEAD 80

/* ---- limits ---- */

static uint64_t uint_in(json_t *o, const char *name, uint64_t dflt,
			uint64_t max)
{
	json_t *v = json_object_get(o, name);

	if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return dflt; /* absent or absurd: Swift's default */
	return (uint64_t)json_integer_value(v);
}

int swift__limits_parse(const char *body, size_t len, struct swift_limits *out)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *slo, *bulk;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(root)) {
		json_decref(root);
		return -EINVAL;
	}
	slo = json_object_get(root, "slo");
	bulk = json_object_get(root, "bulk_delete");
	out->known = true;
	out->slo = json_is_object(slo);
	out->bulk = json_is_object(bulk);
	if (out->slo) {
		out->max_segments = uint_in(slo, "max_manifest_segments",
					    SWIFT_SLO_MAX_SEGMENTS, 1000000);
		out->min_segment =
			uint_in(slo, "min_segment_size", 1, SWIFT_MAX_OBJECT);
		out->max_manifest = uint_in(slo, "max_manifest_size",
					    SWIFT_SLO_MAX_MANIFEST, 1ULL << 30);
	}
	if (out->bulk) {
		json_t *sw = json_object_get(root, "swift");

		out->max_deletes = uint_in(bulk, "max_deletes_per_request",
					   SWIFT_BULK_MAX_DELETES, 1000000);
		/* bulk.py's max_path_length: the longest line it takes */
		out->max_line = uint_in(sw, "max_object_name_length",
					SWIFT_MAX_OBJECT_NAME, 1u << 20) +
				uint_in(sw, "max_container_name_length",
					SWIFT_MAX_CONTAINER_NAME, 1u << 20) +
				2;
	}
	json_decref(root);
	return 0;
}

/* What is assumed while /info cannot be read: SLO with Swift's defaults
 * (the manifest PUT says it when it is not there), no bulk delete. */
static void limits_default(struct swift_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->slo = true;
	l->max_segments = SWIFT_SLO_MAX_SEGMENTS;
	l->min_segment = 1;
	l->max_manifest = SWIFT_SLO_MAX_MANIFEST;
}

/* GET <scheme://host[:port]>/info (no token: it is public). */
static int read_info(struct swiftb *s, const struct smux_ctx *ctx,
		     struct swift_limits *out)
{
	struct smux__http_req req = {.method = "GET", .what = "GET /info"};
	struct smux__http_resp resp;
	struct smux_error err = {0};
	struct smux_sink sink;
	char *token = NULL, *base = NULL, *url = NULL, *p;
	unsigned char *body;
	uint64_t gen;
	size_t len = 0;
	int rc;

	rc = swift__auth_get(s, ctx, &token, &base, &gen, &err);
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (rc < 0)
		return rc;
	p = strstr(base, "://");
	p = p ? strchr(p + 3, '/') : NULL;
	if (p)
		*p = '\0';
	if (asprintf(&url, "%s/info", base) < 0) {
		free(base);
		return -ENOMEM;
	}
	free(base);
	smux_sink_dyn(&sink);
	req.url = url;
	req.sink = &sink;
	req.max_body = SWIFT_INFO_MAX;
	rc = smux__http_do(s->http, ctx, &req, &resp, &err);
	free(url);
	if (rc < 0) {
		smux_sink_release(&sink);
		if (resp.status == 404 || resp.status == 400 ||
		    resp.status == 401 || resp.status == 403) {
			/* no /info here: SLO is tried (the manifest PUT's
			 * answer tells), bulk delete is not */
			limits_default(out);
			out->known = true;
			return 0;
		}
		return rc;
	}
	body = smux_sink_dyn_take(&sink, &len);
	rc = swift__limits_parse(body ? (const char *)body : "", len, out);
	free(body);
	return rc;
}

void swift__limits(struct swiftb *s, const struct smux_ctx *ctx,
		   struct swift_limits *out)
{
	struct swift_limits l;

	pthread_mutex_lock(&s->limits_mu);
	if (!s->limits.known && read_info(s, ctx, &l) == 0)
		s->limits = l;
	if (s->limits.known)
		*out = s->limits;
	else
		limits_default(out);
	pthread_mutex_unlock(&s->limits_mu);
}

/* ---- plan ---- */

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

int swift__slo_plan(uint64_t size, uint64_t seg_size,
		    const struct swift_limits *l, size_t entry_bytes,
		    uint64_t *seg, uint64_t *count)
{
	uint64_t max =
		l->max_segments ? l->max_segments : SWIFT_SLO_MAX_SEGMENTS;
	uint64_t mbytes =
		l->max_manifest ? l->max_manifest : SWIFT_SLO_MAX_MANIFEST;
	uint64_t sz = seg_size ? seg_size : SWIFT_SEG_SIZE_DEFAULT;

	if (entry_bytes && mbytes / entry_bytes < max)
		max = mbytes / entry_bytes; /* the manifest must fit too */
	if (max == 0 || size == 0)
		return -EFBIG;
	if (l->min_segment && sz < l->min_segment)
		sz = l->min_segment;
	if (div_up(size, sz) > max)
		sz = div_up(size, max);
	if (sz > SWIFT_MAX_OBJECT)
		return -EFBIG;
	*seg = sz;
	*count = div_up(size, sz);
	return 0;
}

/* ---- upload ---- */

struct sub_src {
	const struct smux_source *src;
	uint64_t off;
};

static long sub_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	struct sub_src *u = arg;

	return smux_source_read(u->src, u->off + pos, dst, len);
}

static int64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* "<key>/slo/<t>.<seq>/<size>/<seg>/" (or "slo-long/<md5>/...") */
static char *seg_prefix(struct swiftb *s, const char *key, uint64_t size,
			uint64_t seg)
{
	unsigned long seq = atomic_fetch_add(&s->seg_seq, 1);
	int64_t t = real_ns();
	char tail[128], *out = NULL;

	snprintf(tail, sizeof(tail), "slo/%lld.%09lld.%lu/%llu/%llu/",
		 (long long)(t / 1000000000LL), (long long)(t % 1000000000LL),
		 seq, (unsigned long long)size, (unsigned long long)seg);
	if (strlen(key) + 1 + strlen(tail) + 8 <= SWIFT_NAME_MAX) {
		if (asprintf(&out, "%s/%s", key, tail) < 0)
			out = NULL;
	} else {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned mdlen = 0;
		char hex[33];

		EVP_Digest(key, strlen(key), md, &mdlen, EVP_md5(), NULL);
		for (unsigned i = 0; i < 16; i++)
			snprintf(hex + (size_t)i * 2, 3, "%02x", md[i]);
		if (asprintf(&out, "slo-long/%s/%s", hex, tail) < 0)
			out = NULL;
	}
	return out;
}

/* PUT of the segments container (made on the first large put). */
static int make_seg_container(struct swiftb *s, const struct smux_ctx *ctx,
			      struct smux_error *err)
{
	struct smux__http_req req = {.method = "PUT",
				     .what = "PUT segments container"};
	struct smux__http_resp resp;
	struct smux_source empty;
	int rc;

	smux_source_buf(&empty, "", 0);
	req.body = &empty;
	rc = swift__do_in(s, ctx, &req, s->seg_container_esc, "", &resp, err);
	if (rc == 0)
		atomic_store(&s->seg_container_ok, true);
	return rc;
}

/* PUT of one segment @name (unescaped) with its MD5 as ETag. */
static int put_segment(struct swiftb *s, const struct smux_ctx *ctx,
		       const char *name, const struct smux_source *src,
		       const char *md5, struct smux_error *err)
{
	struct smux__http_req req = {.method = "PUT"};
	struct smux__http_resp resp;
	char h_etag[48], what[256], *path = swift__obj_path(name, "");
	const char *hdrs[2] = {h_etag, NULL};
	int rc;

	if (!path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	snprintf(h_etag, sizeof(h_etag), "ETag: %s", md5);
	req.headers = hdrs;
	req.body = src;
	req.what = swift__what(what, sizeof(what), "PUT segment", name);
	rc = swift__do_in(s, ctx, &req, s->seg_container_esc, path, &resp, err);
	if (rc == -ENOENT && !atomic_load(&s->seg_container_ok)) {
		smux_error_clear(err);
		rc = make_seg_container(s, ctx, err);
		if (rc == 0)
			rc = swift__do_in(s, ctx, &req, s->seg_container_esc,
					  path, &resp, err);
	}
	free(path);
	if (rc < 0 && resp.status == 422)
		rc = smux_error_wrap(err, SMUX_E_BAD_RESPONSE, s->base.name,
				     "put segment \"%.200s\": the server's "
				     "MD5 of the content differs from ours",
				     name);
	return rc;
}

/* Whether an ETag header value (maybe quoted) is @hex. */
static bool etag_is(const char *v, const char *hex)
{
	size_t n = strlen(hex);

	if (v[0] == '"')
		return strncasecmp(v + 1, hex, n) == 0 && v[n + 1] == '"' &&
		       v[n + 2] == '\0';
	return strcasecmp(v, hex) == 0;
}

/* Whether @key now is the large object of ETag @etag (a manifest PUT
 * whose answer was lost may have been stored): 1 yes, 0 no, <0 unknown. */
static int manifest_landed(struct swiftb *s, const struct smux_ctx *ctx,
			   const char *key, const char *etag)
{
	struct smux_error e = {0};
	struct smux_info info;
	int rc = swift__head_obj(s, ctx, key, &info, &e);

	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	return strcasecmp(info.etag, etag) == 0;
}

int swift__put_slo(struct swiftb *s, const struct smux_ctx *ctx,
		   const char *key, const struct smux_source *src,
		   const char *const *hdrs, char etag[33],
		   struct smux_error *err)
{
	struct smux__http_req req = {.method = "PUT"};
	struct smux__http_resp resp;
	struct swift_limits l;
	struct smux_source body;
	uint64_t seg, count, done = 0;
	char **paths = NULL, *prefix, *manifest = NULL, *mpath = NULL;
	char what[256];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *all = NULL;
	json_t *arr = NULL;
	size_t n = 0;
	int rc;

	swift__limits(s, ctx, &l);
	if (!l.slo)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, s->base.name,
				      "put \"%s\": %llu bytes needs a large "
				      "object and this Swift offers no SLO "
				      "(/info)",
				      key, (unsigned long long)src->length);
	/* the segment size is in the names: plan with the configured one */
	prefix = seg_prefix(s, key, src->length, s->seg_size);
	if (!prefix)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	rc = swift__slo_plan(src->length, s->seg_size, &l,
			     strlen(s->seg_container) + strlen(prefix) + 10 +
				     SWIFT_ENTRY_OVERHEAD,
			     &seg, &count);
	if (rc < 0) {
		free(prefix);
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, s->base.name,
				      "put \"%s\": %llu bytes do not fit in "
				      "one large object of this Swift (at "
				      "most %llu segments of 5 GiB)",
				      key, (unsigned long long)src->length,
				      (unsigned long long)l.max_segments);
	}
	paths = calloc(count, sizeof(*paths));
	arr = json_array();
	all = EVP_MD_CTX_new();
	if (!paths || !arr || !all ||
	    EVP_DigestInit_ex(all, EVP_md5(), NULL) != 1) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
		goto out;
	}
	for (uint64_t i = 0; i < count; i++) {
		uint64_t off = i * seg;
		uint64_t len =
			src->length - off < seg ? src->length - off : seg;
		struct sub_src u = {.src = src, .off = off};
		struct smux_source part;
		char md5[33], *name = NULL;
		json_t *e;

		smux_source_cb(&part, sub_read, &u, len);
		rc = swift__source_md5(&part, md5);
		if (rc < 0) {
			rc = smux_error_set(err, SMUX_E_LOCAL_IO, s->base.name,
					    "put \"%s\": cannot read the "
					    "source: %s",
					    key, strerror(-rc));
			goto fail;
		}
		if (asprintf(&name, "%s%08llu", prefix, (unsigned long long)i) <
			    0 ||
		    asprintf(&paths[n], "/%s/%s", s->seg_container, name) < 0) {
			free(name);
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
			goto fail;
		}
		n++; /* listed before its PUT: a lost answer may have stored it */
		rc = put_segment(s, ctx, name, &part, md5, err);
		e = json_pack("{s:s, s:s, s:I}", "path", paths[n - 1], "etag",
			      md5, "size_bytes", (json_int_t)len);
		free(name);
		if (rc == 0 && (!e || json_array_append_new(arr, e) < 0))
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
		else if (rc < 0)
			json_decref(e);
		if (rc < 0)
			goto fail;
		EVP_DigestUpdate(all, md5, 32);
		done += len;
	}
	EVP_DigestFinal_ex(all, md, &mdlen);
	for (unsigned i = 0; i < 16; i++)
		snprintf(etag + (size_t)i * 2, 3, "%02x", md[i]);
	manifest = json_dumps(arr, JSON_COMPACT);
	mpath = swift__obj_path(key, "?multipart-manifest=put");
	if (!manifest || !mpath) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
		goto fail;
	}
	smux_source_buf(&body, manifest, strlen(manifest));
	req.headers = hdrs;
	req.body = &body;
	req.what = swift__what(what, sizeof(what), "PUT manifest", key);
	rc = swift__do_writing(s, ctx, &req, mpath, &resp, err);
	if (rc == 0 && resp.etag[0] && !etag_is(resp.etag, etag)) {
		/* a Swift without the slo middleware stores the JSON list
		 * as a plain object: remove it, and the segments */
		struct smux__http_req dreq = {.method = "DELETE"};
		struct smux__http_resp dresp;
		struct smux_error e2 = {0};
		char *dpath = swift__obj_path(key, "");

		dreq.what = req.what;
		if (dpath)
			swift__do(s, ctx, &dreq, dpath, &dresp, &e2);
		free(dpath);
		rc = smux_error_set(err, SMUX_E_NOT_SUPPORTED, s->base.name,
				    "put \"%s\": this Swift stored the SLO "
				    "manifest as a plain object (no static "
				    "large objects)",
				    key);
		goto fail;
	}
	if (rc == 0)
		goto out;
	if (resp.status == 0 || smux__http_status_retryable(resp.status)) {
		/* the answer may be lost, not the manifest: keep the
		 * segments of a manifest that is there */
		int landed = manifest_landed(s, ctx, key, etag);

		if (landed == 1) {
			smux_error_clear(err);
			rc = 0;
			goto out;
		}
		if (landed < 0) {
			atomic_fetch_add(&s->n_orphans, n);
			goto out;
		}
	}
fail : {
	/* no orphaned segments: delete what was uploaded */
	struct smux_error e2 = {0};

	if (n && swift__delete_paths(s, ctx, paths, n, &e2) < 0)
		atomic_fetch_add(&s->n_orphans, n);
}
out:
	(void)done;
	swift__paths_free(paths, n);
	free(prefix);
	free(manifest);
	free(mpath);
	json_decref(arr);
	EVP_MD_CTX_free(all);
	return rc;
}

/* ---- segments of an existing object ---- */

void swift__paths_free(char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

struct lo_hdrs {
	bool slo;
	char dlo[SWIFT_NAME_MAX + 260]; /* X-Object-Manifest */
};

static int lo_header(void *arg, const char *name, size_t nlen,
		     const char *value, size_t vlen)
{
	struct lo_hdrs *h = arg;

	if (nlen == 21 && strncasecmp(name, "X-Static-Large-Object", 21) == 0)
		h->slo = vlen == 4 && strncasecmp(value, "true", 4) == 0;
	else if (nlen == 17 &&
		 strncasecmp(name, "X-Object-Manifest", 17) == 0 &&
		 vlen < sizeof(h->dlo)) {
		memcpy(h->dlo, value, vlen);
		h->dlo[vlen] = '\0';
	}
	return 0;
}

/* An SLO manifest's segment paths ("name" of each entry). */
static int manifest_paths(struct swiftb *s, const char *key, const char *body,
			  size_t len, char ***paths, size_t *n,
			  struct smux_error *err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *e;
	size_t i, cnt;

	if (!json_is_array(root)) {
		json_decref(root);
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
				      "\"%s\": the SLO manifest is not a JSON "
				      "array",
				      key);
	}
	cnt = json_array_size(root);
	*paths = calloc(cnt ? cnt : 1, sizeof(**paths));
	if (!*paths) {
		json_decref(root);
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	}
	json_array_foreach(root, i, e)
	{
		json_t *nm = json_object_get(e, "name");
		const char *v =
			json_is_string(nm) ? json_string_value(nm) : NULL;

		/* "/container/object", bounded, one line */
		if (!v || v[0] != '/' || !strchr(v + 1, '/') ||
		    strlen(v) > SWIFT_NAME_MAX + 260 || strpbrk(v, "\r\n")) {
			json_decref(root);
			return smux_error_set(err, SMUX_E_BAD_RESPONSE,
					      s->base.name,
					      "\"%s\": SLO manifest entry %zu "
					      "has no valid \"name\"",
					      key, i);
		}
		(*paths)[*n] = strdup(v);
		if (!(*paths)[*n]) {
			json_decref(root);
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      s->base.name, NULL);
		}
		(*n)++;
	}
	json_decref(root);
	return 0;
}

/* Both header readers of the HEAD: the large-object headers and the
 * object's metadata. */
struct lo_meta {
	struct lo_hdrs lo;
	struct swift_meta meta;
};

static int lo_meta_header(void *arg, const char *name, size_t nlen,
			  const char *value, size_t vlen)
{
	struct lo_meta *lm = arg;

	lo_header(&lm->lo, name, nlen, value, vlen);
	return swift__meta_header(&lm->meta, name, nlen, value, vlen);
}

int swift__segments_of(struct swiftb *s, const struct smux_ctx *ctx,
		       const char *key, bool list_slo, char ***paths, size_t *n,
		       bool *is_slo, struct smux_error *err)
{
	bool found;

	return swift__segments_info(s, ctx, key, list_slo, paths, n, is_slo,
				    &found, NULL, err);
}

int swift__segments_info(struct swiftb *s, const struct smux_ctx *ctx,
			 const char *key, bool list_slo, char ***paths,
			 size_t *n, bool *is_slo, bool *found,
			 struct smux_info *info, struct smux_error *err)
{
	struct smux__http_req req = {.method = "HEAD"};
	struct smux__http_resp resp;
	struct lo_meta lm = {0};
	struct lo_hdrs *hp = &lm.lo;
	struct smux_sink sink;
	unsigned char *body;
	char what[256], *path;
	size_t len = 0;
	int rc;

	*paths = NULL;
	*n = 0;
	*is_slo = false;
	*found = false;
	if (info)
		smux_info_clear(info);
	path = swift__obj_path(key, "");
	if (!path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	req.on_header = lo_meta_header;
	req.header_arg = &lm;
	req.what = swift__what(what, sizeof(what), "HEAD", key);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	free(path);
	if (rc == -ENOENT || rc == 0)
		swift__absent_note(s, key, rc == -ENOENT);
	if (rc == -ENOENT) {
		smux_error_clear(err);
		return 0;
	}
	if (rc < 0)
		return rc;
	*found = true;
	swift__plain_note(s, key, !hp->slo && !hp->dlo[0]);
	/* without X-Object-Meta-Mtime the mtime is Last-Modified, which a
	 * copy does not keep: no info then */
	if (info && lm.meta.mtime[0])
		swift__fill_obj(info, &resp, &lm.meta,
				resp.content_length > 0
					? (uint64_t)resp.content_length
					: 0);
	if (hp->dlo[0] && !hp->slo)
		return swift__dlo_segments(s, ctx, key, hp->dlo, paths, n, err);
	if (!hp->slo)
		return 0;
	*is_slo = true;
	if (!list_slo)
		return 0;
	path = swift__obj_path(key, "?multipart-manifest=get");
	if (!path)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	memset(&req, 0, sizeof(req));
	smux_sink_dyn(&sink);
	req.method = "GET";
	req.sink = &sink;
	req.max_body = 2 * SWIFT_SLO_MAX_MANIFEST;
	req.what = swift__what(what, sizeof(what), "GET manifest", key);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	free(path);
	if (rc < 0) {
		smux_sink_release(&sink);
		if (rc == -ENOENT) { /* gone meanwhile */
			smux_error_clear(err);
			return 0;
		}
		return rc;
	}
	body = smux_sink_dyn_take(&sink, &len);
	rc = manifest_paths(s, key, body ? (const char *)body : "", len, paths,
			    n, err);
	free(body);
	if (rc < 0) {
		swift__paths_free(*paths, *n);
		*paths = NULL;
		*n = 0;
	}
	return rc;
}
