// SPDX-License-Identifier: MIT
/*
 * swift.c - the swift backend (smux/swift.h): objects of one container of
 * OpenStack Swift over the HTTP layer (http_client.h), the token from
 * swift_auth.c, listings from swift_list.c.
 *
 * The configuration is immutable after smux_swift_new(); the token and the
 * memory of recent writes have their own locks, so every operation runs on
 * any thread.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "backends/swift_internal.h"

/* Swift's object name limit (constraints.py MAX_OBJECT_NAME_LENGTH). */
#define SWIFT_KEY_MAX 1024

static const struct smux_backend_ops swiftb_ops;

static struct swiftb *swiftb_from(struct smux_backend *b)
{
	return b && b->ops == &swiftb_ops ? (struct swiftb *)b : NULL;
}

struct swiftb *swift__from(struct smux_backend *b)
{
	return swiftb_from(b);
}

static const char *name_of(struct swiftb *s)
{
	return s->base.name;
}

static int nomem(struct swiftb *s, struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_NO_MEMORY, name_of(s), NULL);
}

/* "/<escaped key>" plus @query (may be ""), in a new heap string. */
char *swift__obj_path(const char *key, const char *query)
{
	size_t kl = strlen(key), cap = 3 * kl + strlen(query) + 2;
	char *p = malloc(cap);
	long n;

	if (!p)
		return NULL;
	p[0] = '/';
	n = smux__http_escape(key, kl, true, p + 1, cap - 1);
	if (n < 0) {
		free(p);
		return NULL;
	}
	memcpy(p + 1 + n, query, strlen(query) + 1);
	return p;
}

const char *swift__what(char *buf, size_t cap, const char *method,
			const char *key)
{
	snprintf(buf, cap, "%s \"%.200s\"", method, key);
	return buf;
}

void swift__fill_dir(struct smux_info *info)
{
	smux_info_clear(info);
	info->mode = S_IFDIR | SWIFT_DIR_MODE;
	info->nlink = 1;
}

int64_t swift__parse_iso(const char *s)
{
	struct tm tm = {0};
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	int64_t ns = 0, scale = 100000000LL, off = 0;
	time_t t;

	if (!p)
		return -1;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9') {
			ns += (*p - '0') * scale;
			scale /= 10;
			p++;
		}
	}
	if (*p == 'Z') {
		p++;
	} else if ((*p == '+' || *p == '-') && p[1] >= '0' && p[1] <= '9' &&
		   p[2] >= '0' && p[2] <= '9' && p[3] == ':' && p[4] >= '0' &&
		   p[4] <= '9' && p[5] >= '0' && p[5] <= '9') {
		off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 +
		      ((p[4] - '0') * 10 + (p[5] - '0')) * 60;
		if (*p == '+')
			off = -off;
		p += 6;
	}
	if (*p)
		return -1;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -1;
	return smux_time_ns((int64_t)t + off, (long)ns);
}

/* ---- put ---- */

/* MD5 of @src, in hex, read ahead of the PUT so the server verifies it. */
int swift__source_md5(const struct smux_source *src, char hex[33])
{
	unsigned char buf[65536], md[EVP_MAX_MD_SIZE];
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	uint64_t pos = 0;
	unsigned mdlen = 0;
	int rc = 0;

	if (!c || EVP_DigestInit_ex(c, EVP_md5(), NULL) != 1) {
		rc = -ENOMEM;
		goto out;
	}
	while (pos < src->length) {
		uint64_t want = src->length - pos;
		long n = smux_source_read(src, pos, buf,
					  want < sizeof(buf) ? (size_t)want
							     : sizeof(buf));

		if (n <= 0) {
			rc = n < 0 ? (int)n : -EIO;
			goto out;
		}
		EVP_DigestUpdate(c, buf, (size_t)n);
		pos += (uint64_t)n;
	}
	EVP_DigestFinal_ex(c, md, &mdlen);
	for (unsigned i = 0; i < mdlen && i < 16; i++)
		snprintf(hex + (size_t)2 * i, 3, "%02x", md[i]);
out:
	EVP_MD_CTX_free(c);
	return rc;
}

/* PUT of the container itself (made on the first write). */
static int make_container(struct swiftb *s, const struct smux_ctx *ctx,
			  struct smux_error *err)
{
	struct smux__http_req req = {.method = "PUT", .what = "PUT container"};
	struct smux__http_resp resp;
	struct smux_source empty;
	int rc;

	smux_source_buf(&empty, "", 0);
	req.body = &empty;
	rc = swift__do(s, ctx, &req, "", &resp, err);
	if (rc == 0)
		atomic_store(&s->container_ok, true);
	return rc;
}

/* Does @req on @path, making the container once when it answers 404. */
int swift__do_writing(struct swiftb *s, const struct smux_ctx *ctx,
		      struct smux__http_req *req, const char *path,
		      struct smux__http_resp *resp, struct smux_error *err)
{
	int rc = swift__do(s, ctx, req, path, resp, err);

	if (rc == -ENOENT && !atomic_load(&s->container_ok) && !req->no_retry) {
		smux_error_clear(err);
		rc = make_container(s, ctx, err);
		if (rc == 0)
			rc = swift__do(s, ctx, req, path, resp, err);
	}
	return rc;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int swiftb_put(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, const struct smux_source *src,
		      const struct smux_put_opts *opts, struct smux_info *info,
		      struct smux_error *err)
{
	struct swiftb *s = swiftb_from(b);
	struct smux__http_req req = {.method = "PUT"};
	struct smux__http_resp resp;
	char h_mtime[64], h_mode[48], h_uid[48], h_gid[48], h_etag[48],
		what[256], md5[33] = "";
	const char *hdrs[9];
	bool is_dir = swift__key_is_dir(key), large, old_slo = false;
	bool if_absent = false, plain = false;
	char **old_segs = NULL;
	size_t n_old = 0;
	uint32_t mode = 0;
	int64_t mtime =
		opts && smux_put_has_mtime(opts) ? opts->mtime_ns : now_ns();
	size_t nh = 0;
	char *path;
	int rc;

	if (!key[0] || (is_dir && src->length))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name_of(s),
				      "put \"%s\": %s", key,
				      key[0] ? "a directory marker holds no "
					       "bytes"
					     : "cannot put the root");
	large = !is_dir && src->length > s->seg_threshold;
	if (!large) {
		rc = swift__source_md5(src, md5);
		if (rc < 0)
			return smux_error_set(err, SMUX_E_LOCAL_IO, name_of(s),
					      "put \"%s\": cannot read the "
					      "source: %s",
					      key, strerror(-rc));
	}
	/* a key seen absent (here, or by the caller's create) is put with
	 * "If-None-Match: *" and without the HEAD below: nothing is
	 * replaced, so no segments are left behind; Swift refuses it (412)
	 * when the key exists after all. A key seen a plain object has no
	 * segments (the worst case when it became a large object since:
	 * swift_absent.c). */
	if_absent = !is_dir && !large &&
		    ((opts && (opts->flags & SMUX_PUT_NEW)) ||
		     swift__absent_seen(s, key));
	plain = !is_dir && !if_absent && swift__plain_seen(s, key);
	if (!is_dir && !if_absent && !plain) {
		/* a large object replaced leaves its segments behind unless
		 * they are deleted after the new one is in place */
		rc = swift__segments_of(s, ctx, key, true, &old_segs, &n_old,
					&old_slo, err);
		if (rc < 0)
			return rc;
	}
	/* before 1970: the epoch, as the s3 backend stores it (a negative
	 * "sec.-nnn" is no time another client reads) */
	if (mtime < 0)
		mtime = 0;
	snprintf(h_mtime, sizeof(h_mtime), "X-Object-Meta-Mtime: %lld.%09lld",
		 (long long)(mtime / 1000000000LL),
		 (long long)(mtime % 1000000000LL));
	hdrs[nh++] = h_mtime;
	hdrs[nh++] = is_dir ? "Content-Type: " SWIFT_DIR_TYPE
			    : "Content-Type: application/octet-stream";
	if (opts && (opts->mode || (opts->flags & SMUX_PUT_MODE))) {
		mode = opts->mode;
		if (is_dir)
			mode = (mode & 07777) | S_IFDIR;
		else if ((mode & S_IFMT) == 0 || (mode & S_IFMT) == S_IFDIR)
			mode = (mode & 07777) | S_IFREG;
		snprintf(h_mode, sizeof(h_mode), "X-Object-Meta-Mode: %o",
			 (unsigned)mode);
		hdrs[nh++] = h_mode;
	}
	if (opts && (opts->flags & SMUX_PUT_OWNER)) {
		if (opts->uid != SMUX_ID_NONE) {
			snprintf(h_uid, sizeof(h_uid), "X-Object-Meta-Uid: %u",
				 opts->uid);
			hdrs[nh++] = h_uid;
		}
		if (opts->gid != SMUX_ID_NONE) {
			snprintf(h_gid, sizeof(h_gid), "X-Object-Meta-Gid: %u",
				 opts->gid);
			hdrs[nh++] = h_gid;
		}
	}
	if (large) {
		hdrs[nh] = NULL;
		rc = swift__put_slo(s, ctx, key, src, hdrs, md5, err);
		if (rc < 0)
			goto out;
		goto stored;
	}
	snprintf(h_etag, sizeof(h_etag), "ETag: %s", md5);
	hdrs[nh++] = h_etag;
	hdrs[nh] = if_absent ? "If-None-Match: *" : NULL;
	hdrs[nh + 1] = NULL;
	path = swift__obj_path(key, "");
	if (!path) {
		rc = nomem(s, err);
		goto out;
	}
	req.headers = hdrs;
	req.body = src;
	req.what = swift__what(what, sizeof(what), "PUT", key);
	rc = swift__do_writing(s, ctx, &req, path, &resp, err);
	if (rc < 0 && if_absent && resp.status == 412) {
		/* there after all: the HEAD for its segments, a plain PUT */
		smux_error_clear(err);
		swift__absent_note(s, key, false);
		hdrs[nh] = NULL;
		rc = swift__segments_of(s, ctx, key, true, &old_segs, &n_old,
					&old_slo, err);
		if (rc == 0)
			rc = swift__do_writing(s, ctx, &req, path, &resp, err);
	}
	free(path);
	if (rc < 0 && resp.status == 422)
		rc = smux_error_wrap(err, SMUX_E_BAD_RESPONSE, name_of(s),
				     "put \"%s\": the server's MD5 of the "
				     "content differs from ours",
				     key);
	if (rc < 0)
		goto out;
	if (resp.etag[0] && strcasecmp(resp.etag, md5) != 0 &&
	    !(resp.etag[0] == '"' &&
	      strncasecmp(resp.etag + 1, md5, 32) == 0)) {
		rc = smux_error_set(err, SMUX_E_BAD_RESPONSE, name_of(s),
				    "put \"%s\": stored ETag %.40s is not "
				    "the content's MD5",
				    key, resp.etag);
		goto out;
	}
stored:
	if (n_old) {
		/* the new object is in place: the old one's segments go
		 * (a failure leaves orphans, counted, not a failed put) */
		struct smux_error e2 = {0};

		if (swift__delete_paths(s, ctx, old_segs, n_old, &e2) < 0)
			atomic_fetch_add(&s->n_orphans, n_old);
	}
	{
		struct smux_info st;

		if (is_dir) {
			swift__fill_dir(&st);
			st.mtime_ns = mtime;
			if (mode)
				st.mode = mode;
		} else {
			smux_info_clear(&st);
			st.nlink = 1;
			st.size = src->length;
			st.mtime_ns = mtime;
			st.mode = mode ? mode : (S_IFREG | SWIFT_FILE_MODE);
			snprintf(st.etag, sizeof(st.etag), "%s", md5);
			if (opts && (opts->flags & SMUX_PUT_OWNER)) {
				st.has_owner = true;
				st.uid = opts->uid;
				st.gid = opts->gid;
			}
		}
		swift__recent_note(s, key, false, &st);
		swift__absent_note(s, key, false);
		if (!is_dir) /* ours now: plain, or an SLO */
			swift__plain_note(s, key, !large);
		if (info)
			*info = st;
	}
out:
	/* a large put that failed may have left its manifest in place */
	if (rc < 0 && large)
		swift__plain_note(s, key, false);
	swift__paths_free(old_segs, n_old);
	return rc;
}

/* ---- delete, copy, rename ---- */

static int swiftb_del(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_error *err)
{
	struct swiftb *s = swiftb_from(b);
	struct smux__http_req req = {.method = "DELETE"};
	struct smux__http_resp resp;
	char what[256], *path, **segs = NULL;
	size_t n_segs = 0;
	bool is_slo = false;
	int rc;

	if (!key[0])
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name_of(s),
				      "cannot delete the root");
	/* a large object's segments go with it; a key seen a plain object
	 * has none (the worst case when it became one since: its segments
	 * stay behind, swift_absent.c) */
	if (!swift__key_is_dir(key) && !swift__plain_seen(s, key)) {
		rc = swift__segments_of(s, ctx, key, false, &segs, &n_segs,
					&is_slo, err);
		if (rc < 0)
			return rc;
		if (is_slo) {
			rc = swift__delete_slo(s, ctx, key, err);
			if (rc == 0) {
				swift__recent_note(s, key, true, NULL);
				swift__absent_note(s, key, true);
			}
			return rc;
		}
	}
	path = swift__obj_path(key, "");
	if (!path) {
		rc = nomem(s, err);
		goto out;
	}
	req.what = swift__what(what, sizeof(what), "DELETE", key);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	free(path);
	if (rc == -ENOENT) { /* absent already: deleting is idempotent */
		smux_error_clear(err);
		rc = 0;
	}
	/* the manifest first: a failure then leaves segments nothing reads
	 * (found again by no one: counted), never a manifest without them */
	if (rc == 0 && n_segs)
		rc = swift__delete_paths(s, ctx, segs, n_segs, err);
	if (rc == 0) {
		swift__recent_note(s, key, true, NULL);
		swift__absent_note(s, key, true);
	}
out:
	swift__paths_free(segs, n_segs);
	return rc;
}

/* A key of a del_many and where it was given. */
struct many_key {
	const char *key;
	size_t i;
};

static int many_cmp(const void *a, const void *b)
{
	const struct many_key *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : (x->i > y->i) - (x->i < y->i);
}

/*
 * Many deletes. The keys seen a plain object (swift_absent.c: no segments
 * to look for, the worst case as for del) go in bulk-delete requests when
 * /info offers bulk delete and there are two or more of them, each key
 * once (one given twice takes its first's result); every other key (maybe
 * a large object, or no bulk delete) is one swiftb_del, as alone.
 */
static int swiftb_del_many(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *const *keys, size_t n, int *rcs,
			   struct smux_error *err)
{
	struct swiftb *s = swiftb_from(b);
	struct swift_limits l = {0};
	struct many_key *mk = malloc((n ? n : 1) * sizeof(*mk));
	/* what each key is: its own del (SIZE_MAX), or in the bulk delete
	 * as the key of that index (itself, or its first when twice) */
	size_t *bulk = malloc((n ? n : 1) * sizeof(*bulk));
	char **paths = NULL;
	size_t nb = 0, np = 0;
	int *brc = NULL, first = 0, rc;

	if (!mk || !bulk) {
		rc = nomem(s, err);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		bulk[i] = SIZE_MAX;
		if (!swift__key_is_dir(keys[i]) &&
		    swift__plain_seen(s, keys[i]))
			mk[nb++] = (struct many_key){.key = keys[i], .i = i};
	}
	if (nb >= 2) {
		swift__limits(s, ctx, &l);
		if (!l.bulk)
			nb = 0;
	} else {
		nb = 0; /* one DELETE costs what a bulk delete of one does */
	}
	qsort(mk, nb, sizeof(*mk), many_cmp);
	paths = calloc(nb ? nb : 1, sizeof(*paths));
	brc = malloc((nb ? nb : 1) * sizeof(*brc));
	if (!paths || !brc) {
		rc = nomem(s, err);
		goto out;
	}
	for (size_t j = 0; j < nb; j++) {
		if (np && strcmp(mk[j].key, mk[np - 1].key) == 0) {
			bulk[mk[j].i] = mk[np - 1].i; /* sent once */
			continue;
		}
		if (asprintf(&paths[np], "/%s/%s", s->container, mk[j].key) <
		    0) {
			paths[np] = NULL;
			rc = nomem(s, err);
			goto out;
		}
		bulk[mk[j].i] = mk[j].i;
		mk[np++] = mk[j];
	}
	if (np)
		first = swift__bulk_delete(s, ctx, paths, np, &l, brc, err);
	for (size_t j = 0; j < np; j++) {
		rcs[mk[j].i] = brc[j];
		if (brc[j] == 0) {
			swift__recent_note(s, mk[j].key, true, NULL);
			swift__absent_note(s, mk[j].key, true);
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct smux_error one;

		if (bulk[i] != SIZE_MAX) {
			rcs[i] = rcs[bulk[i]];
			continue;
		}
		smux_error_clear(&one);
		rcs[i] = swiftb_del(b, ctx, keys[i], &one);
		if (rcs[i] && !first) {
			first = rcs[i];
			*err = one;
		}
	}
	rc = first;
out:
	for (size_t j = 0; j < np; j++)
		free(paths[j]);
	free(paths);
	free(brc);
	free(bulk);
	free(mk);
	return rc;
}

/* The info of a copy of the object @src_info from the copy's answer: its
 * ETag (an MD5, unquoted: a plain object's). False when the answer has
 * none that is one. */
static bool copied_info(const struct smux_info *src_info,
			const struct smux__http_resp *resp,
			struct smux_info *out)
{
	const char *e = resp->etag;

	if (strlen(e) != 32 || strspn(e, "0123456789abcdefABCDEF") != 32)
		return false;
	*out = *src_info;
	snprintf(out->etag, sizeof(out->etag), "%s", e);
	return true;
}

/* PUT @dst with X-Copy-From @src; @query "?multipart-manifest=get"
 * copies an SLO's manifest (sharing its segments) instead of the bytes.
 * @src_info (may be NULL): @src's info as a HEAD just read it; a copy of
 * the bytes keeps its metadata and answers the new object's ETag, so the
 * copy's info is that with the answer's ETag, without a HEAD of @dst. */
static int copy_as(struct swiftb *s, const struct smux_ctx *ctx,
		   const char *src, const char *dst, const char *query,
		   const struct smux_info *src_info, struct smux_error *err)
{
	struct smux__http_req req = {.method = "PUT"};
	struct smux__http_resp resp;
	struct smux_source empty;
	struct smux_info info;
	const char *hdrs[2];
	char what[256], *path, *from = NULL, *spath;
	int rc;

	spath = swift__obj_path(src, "");
	path = swift__obj_path(dst, query);
	if (!spath || !path ||
	    asprintf(&from, "X-Copy-From: /%s%s", s->container_esc, spath) <
		    0) {
		from = NULL;
		rc = nomem(s, err);
		goto out;
	}
	hdrs[0] = from;
	hdrs[1] = NULL;
	smux_source_buf(&empty, "", 0);
	req.headers = hdrs;
	req.body = &empty;
	req.what = swift__what(what, sizeof(what), "COPY", src);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	/* a copy of a plain object's bytes (@src_info given) is one; of
	 * anything else, or a manifest, not known to be */
	swift__plain_note(s, dst, rc == 0 && src_info && !query[0]);
	if (rc == 0 && src_info && !query[0] &&
	    copied_info(src_info, &resp, &info)) {
		swift__recent_note(s, dst, false, &info);
		swift__absent_note(s, dst, false);
	} else if (rc == 0) {
		if (swift__head_obj(s, ctx, dst, &info, err) == 0)
			swift__recent_note(s, dst, false, &info);
		smux_error_clear(err); /* the copy is done either way */
	}
out:
	free(spath);
	free(path);
	free(from);
	return rc;
}

/* Deletes the old segments @segs of a replaced object, but none that
 * @keep (the segments of the object now in its place) lists. */
static void drop_old_segments(struct swiftb *s, const struct smux_ctx *ctx,
			      char **segs, size_t n, char **keep, size_t nk)
{
	struct smux_error e2 = {0};
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		bool kept = false;

		for (size_t k = 0; k < nk && !kept; k++)
			kept = strcmp(segs[i], keep[k]) == 0;
		if (kept) {
			free(segs[i]);
			continue;
		}
		segs[m++] = segs[i];
	}
	if (m && swift__delete_paths(s, ctx, segs, m, &e2) < 0)
		atomic_fetch_add(&s->n_orphans, m);
	for (size_t i = 0; i < m; i++)
		free(segs[i]);
	free(segs);
}

/* copy, with @src's info when a HEAD just read it (may be NULL). */
static int copy_with(struct swiftb *s, const struct smux_ctx *ctx,
		     const char *src, const char *dst,
		     const struct smux_info *src_info, struct smux_error *err)
{
	char **old = NULL;
	size_t n_old = 0;
	bool slo;
	int rc;

	if (swift__key_is_dir(src) || swift__key_is_dir(dst))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name_of(s),
				      "copy: object keys only");
	/* a large object at @dst leaves its segments behind otherwise */
	rc = swift__segments_of(s, ctx, dst, true, &old, &n_old, &slo, err);
	if (rc < 0)
		return rc;
	rc = copy_as(s, ctx, src, dst, "", src_info, err);
	if (rc == 0)
		drop_old_segments(s, ctx, old, n_old, NULL, 0);
	else
		swift__paths_free(old, n_old);
	return rc;
}

static int swiftb_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *src, const char *dst, struct smux_error *err)
{
	return copy_with(swiftb_from(b), ctx, src, dst, NULL, err);
}

/* DELETE of @key alone (an SLO's manifest without its segments). */
static int delete_plain(struct swiftb *s, const struct smux_ctx *ctx,
			const char *key, struct smux_error *err)
{
	struct smux__http_req req = {.method = "DELETE"};
	struct smux__http_resp resp;
	char what[256], *path = swift__obj_path(key, "");
	int rc;

	if (!path)
		return nomem(s, err);
	req.what = swift__what(what, sizeof(what), "DELETE", key);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	free(path);
	if (rc == -ENOENT) {
		smux_error_clear(err);
		rc = 0;
	}
	if (rc == 0) {
		swift__recent_note(s, key, true, NULL);
		swift__absent_note(s, key, true);
	}
	return rc;
}

/*
 * Rename is copy then delete. An SLO is renamed by copying its manifest
 * (?multipart-manifest=get: the new name shares the segments, so no size
 * limit and no bytes moved) and deleting the old manifest alone; anything
 * else by a server-side copy of the bytes and a delete with segments.
 */
static int swiftb_rename(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *src, const char *dst,
			 struct smux_error *err)
{
	struct swiftb *s = swiftb_from(b);
	char **mine = NULL, **old = NULL;
	size_t n_mine = 0, n_old = 0;
	bool slo = false, dslo, found;
	struct smux_info sinfo;
	int rc;

	if (swift__key_is_dir(src) || swift__key_is_dir(dst))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name_of(s),
				      "rename: object keys only");
	rc = swift__segments_info(s, ctx, src, true, &mine, &n_mine, &slo,
				  &found, &sinfo, err);
	if (rc < 0)
		return rc;
	if (!slo) {
		/* the bytes are copied; a DLO's segments go with its name
		 * (a DLO's manifest copied is the bytes: no info from it) */
		rc = copy_with(s, ctx, src, dst,
			       found && !n_mine && sinfo.nlink ? &sinfo : NULL,
			       err);
		if (rc == 0)
			rc = delete_plain(s, ctx, src, err);
		if (rc == 0 && n_mine)
			rc = swift__delete_paths(s, ctx, mine, n_mine, err);
		swift__paths_free(mine, n_mine);
		return rc;
	}
	rc = swift__segments_of(s, ctx, dst, true, &old, &n_old, &dslo, err);
	if (rc == 0)
		rc = copy_as(s, ctx, src, dst, "?multipart-manifest=get", NULL,
			     err);
	if (rc == 0)
		rc = delete_plain(s, ctx, src, err);
	if (rc == 0)
		drop_old_segments(s, ctx, old, n_old, mine, n_mine);
	else
		swift__paths_free(old, n_old);
	swift__paths_free(mine, n_mine);
	return rc;
}

/*
 * Changes the kept attributes with one POST of the object's metadata (no
 * rewrite of the content; the etag stays). A POST replaces every
 * X-Object-Meta-* header, so all of smuxfs's are sent again. A directory
 * without a marker object gets one.
 */
static int swiftb_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, const struct smux_setattr *attr,
			  struct smux_error *err)
{
	struct swiftb *s = swiftb_from(b);
	struct smux__http_req req = {.method = "POST"};
	struct smux__http_resp resp;
	struct smux_source empty;
	struct smux_info info;
	char h_mtime[64], h_mode[48], h_uid[48], h_gid[48], what[256], *path;
	const char *hdrs[5];
	size_t nh = 0;
	int rc;

	smux_info_clear(&info);
	rc = key[0] ? swift__head_obj(s, ctx, key, &info, err) : -ENOENT;
	if (rc == -ENOENT && swift__key_is_dir(key)) {
		struct smux_put_opts po = {0};

		smux_error_clear(err);
		rc = swift__head(b, ctx, key, &info, err);
		if (rc < 0)
			return rc;
		if (!key[0])
			return 0; /* the root keeps nothing */
		po.mtime_ns = attr->flags & SMUX_SET_MTIME ? attr->mtime_ns
							   : info.mtime_ns;
		if (attr->flags & SMUX_SET_MTIME)
			po.flags |= SMUX_PUT_MTIME;
		if (attr->flags & SMUX_SET_MODE) {
			po.mode = S_IFDIR | (attr->mode & 07777);
			po.flags |= SMUX_PUT_MODE;
		}
		smux_source_buf(&empty, "", 0);
		return swiftb_put(b, ctx, key, &empty, &po, NULL, err);
	}
	if (rc < 0)
		return rc;
	if (attr->flags & SMUX_SET_MODE)
		info.mode = (info.mode & S_IFMT) | (attr->mode & 07777);
	if (attr->flags & SMUX_SET_MTIME)
		info.mtime_ns = attr->mtime_ns;
	if (attr->flags & SMUX_SET_OWNER) {
		if (attr->uid != SMUX_ID_NONE)
			info.uid = attr->uid;
		if (attr->gid != SMUX_ID_NONE)
			info.gid = attr->gid;
		info.has_owner = true;
	}
	snprintf(h_mtime, sizeof(h_mtime), "X-Object-Meta-Mtime: %lld.%09lld",
		 (long long)(info.mtime_ns / 1000000000LL),
		 (long long)(info.mtime_ns % 1000000000LL));
	hdrs[nh++] = h_mtime;
	snprintf(h_mode, sizeof(h_mode), "X-Object-Meta-Mode: %o",
		 (unsigned)info.mode);
	hdrs[nh++] = h_mode;
	if (info.has_owner && info.uid != SMUX_ID_NONE) {
		snprintf(h_uid, sizeof(h_uid), "X-Object-Meta-Uid: %u",
			 info.uid);
		hdrs[nh++] = h_uid;
	}
	if (info.has_owner && info.gid != SMUX_ID_NONE) {
		snprintf(h_gid, sizeof(h_gid), "X-Object-Meta-Gid: %u",
			 info.gid);
		hdrs[nh++] = h_gid;
	}
	hdrs[nh] = NULL;
	path = swift__obj_path(key, "");
	if (!path)
		return nomem(s, err);
	smux_source_buf(&empty, "", 0);
	req.headers = hdrs;
	req.body = &empty;
	req.what = swift__what(what, sizeof(what), "POST", key);
	rc = swift__do(s, ctx, &req, path, &resp, err);
	free(path);
	if (rc == 0)
		swift__recent_note(s, key, false, &info);
	return rc;
}

static int swiftb_list(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *prefix, const char *delimiter,
		       smux_list_fn fn, void *arg, struct smux_error *err)
{
	struct swiftb *s = swiftb_from(b);

	if (delimiter && strcmp(delimiter, "/") != 0)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, name_of(s),
				      "list: only \"/\" delimits");
	return swift__list(s, ctx, prefix, delimiter, fn, arg, err);
}

static int swiftb_healthcheck(struct smux_backend *b,
			      const struct smux_ctx *ctx,
			      struct smux_error *err)
{
	struct swiftb *s = swiftb_from(b);
	struct smux__http_req req = {.method = "HEAD",
				     .what = "HEAD container"};
	struct smux__http_resp resp;
	int rc = swift__do(s, ctx, &req, "", &resp, err);

	if (rc == -ENOENT) { /* made on the first write */
		smux_error_clear(err);
		rc = 0;
	}
	return rc;
}

static size_t swiftb_key_max(struct smux_backend *b)
{
	(void)b;
	return SWIFT_KEY_MAX;
}

static void swiftb_destroy(struct smux_backend *b)
{
	struct swiftb *s = swiftb_from(b);

	smux__http_free(s->http);
	swift__auth_release(&s->auth);
	swift__recent_free(s);
	swift__absent_free(s);
	smux__attrstore_free(s->attrs);
	pthread_mutex_destroy(&s->recent_mu);
	pthread_mutex_destroy(&s->limits_mu);
	free(s->container);
	free(s->container_esc);
	free(s->seg_container);
	free(s->seg_container_esc);
	smux_backend_release(&s->base);
	free(s);
}

unsigned long smux_swift_bulk_count(struct smux_backend *b)
{
	struct swiftb *s = swiftb_from(b);

	return s ? atomic_load(&s->n_bulk) : 0;
}

unsigned long smux_swift_orphan_count(struct smux_backend *b)
{
	struct swiftb *s = swiftb_from(b);

	return s ? atomic_load(&s->n_orphans) : 0;
}

/* head("a") asks the directory "a/" itself (swift__head); del_many
 * sends bulk deletes (swiftb_del_many). */
static unsigned swiftb_caps(struct smux_backend *b)
{
	(void)b;
	/* symlinks and FIFOs: objects with their type in X-Object-Meta-Mode */
	return SMUX_CAP_HEAD_DIR | SMUX_CAP_DEL_MANY | SMUX_CAP_LISTS_DOTNAMES |
	       SMUX_CAP_SYMLINK | SMUX_CAP_FIFO;
}

static const struct smux_backend_ops swiftb_ops = {
	.kind = "swift",
	.get = swift__get,
	.put = swiftb_put,
	.del = swiftb_del,
	.del_many = swiftb_del_many,
	.head = swift__head,
	.list = swiftb_list,
	.copy = swiftb_copy,
	.rename = swiftb_rename,
	.setattr = swiftb_setattr,
	.healthcheck = swiftb_healthcheck,
	.key_max = swiftb_key_max,
	.caps = swiftb_caps,
	.destroy = swiftb_destroy,
};

/* ---- construction ---- */

/* The attribute cache (core/attrstore.c) of the container behind the
 * auth URL: a store left by another configuration is emptied. */
static int attrs_open(struct swiftb *s, const struct smux_swift_opts *o)
{
	char *id;

	if (asprintf(&id, "swift %s %s", o->auth_url, s->container) < 0)
		return -ENOMEM;
	s->attrs = smux__attrstore_open(o->attr_store, id, o->attr_store_max);
	free(id);
	return s->attrs ? 0 : -ENOMEM;
}

int smux_swift_new(const char *name, const struct smux_swift_opts *opts,
		   struct smux_backend **out, struct smux_error *err)
{
	struct smux__http_opts ho = {0};
	struct swiftb *s;
	size_t cl;
	int rc;

	*out = NULL;
	if (!opts)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "a swift backend needs options");
	cl = opts->container ? strlen(opts->container) : 0;
	if (!cl || cl > 256 || strchr(opts->container, '/'))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "container must be 1 to 256 bytes "
				      "without '/'");
	if (opts->list_page > 10000)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "list_page must be 1 to 10000");
	if (opts->segment_threshold > SWIFT_MAX_OBJECT)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "segment_threshold must be at most "
				      "5 GiB (Swift's single-object limit)");
	if (opts->segment_size > SWIFT_MAX_OBJECT)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "segment_size must be 1 byte to 5 GiB");
	if (cl > 256 - 9) /* "_segments" must fit Swift's 256 */
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "container must be at most 247 bytes "
				      "(its segments container adds "
				      "\"_segments\")");
	s = calloc(1, sizeof(*s));
	if (!s)
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	if (smux_backend_init(&s->base, &swiftb_ops, name) < 0) {
		free(s);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	pthread_mutex_init(&s->recent_mu, NULL);
	pthread_mutex_init(&s->limits_mu, NULL);
	swift__absent_init(s); /* without its table: no hints, no error */
	rc = swift__auth_init(&s->auth, name, opts, err);
	if (rc < 0)
		goto out_base;
	s->container = strdup(opts->container);
	s->container_esc = malloc(3 * cl + 1);
	if (!s->container || !s->container_esc ||
	    smux__http_escape(opts->container, cl, false, s->container_esc,
			      3 * cl + 1) < 0) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		goto out_auth;
	}
	s->list_page = opts->list_page ? opts->list_page : 1000;
	s->seg_threshold = opts->segment_threshold
				   ? opts->segment_threshold
				   : SWIFT_SEG_THRESHOLD_DEFAULT;
	s->seg_size = opts->segment_size ? opts->segment_size
					 : SWIFT_SEG_SIZE_DEFAULT;
	if (asprintf(&s->seg_container, "%s_segments", opts->container) < 0)
		s->seg_container = NULL;
	s->seg_container_esc = s->seg_container ? malloc(3 * cl + 32) : NULL;
	if (!s->seg_container_esc ||
	    smux__http_escape(s->seg_container, strlen(s->seg_container), false,
			      s->seg_container_esc, 3 * cl + 32) < 0) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		goto out_auth;
	}
	s->recent_ns = opts->recent_ms == 0  ? 30LL * 1000000000LL
		       : opts->recent_ms < 0 ? 0
					     : opts->recent_ms * 1000000LL;
	ho.backend = name;
	ho.ca_file = opts->ca_file;
	ho.connect_timeout_ms = opts->connect_timeout_ms;
	ho.idle_timeout_ms = opts->idle_timeout_ms;
	ho.max_attempts = opts->max_attempts;
	rc = smux__http_new(&ho, &s->http, err);
	if (rc < 0)
		goto out_auth;
	if (!opts->attr_store_off) {
		rc = attrs_open(s, opts);
		if (rc < 0) {
			swiftb_destroy(&s->base);
			return smux_error_set(err, SMUX_E_NO_MEMORY, name,
					      NULL);
		}
	}
	*out = &s->base;
	return 0;
out_auth:
	free(s->container);
	free(s->container_esc);
	free(s->seg_container);
	free(s->seg_container_esc);
	swift__auth_release(&s->auth);
out_base:
	swift__absent_free(s);
	pthread_mutex_destroy(&s->recent_mu);
	pthread_mutex_destroy(&s->limits_mu);
	smux_backend_release(&s->base);
	free(s);
	return rc;
}
