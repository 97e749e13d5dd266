// SPDX-License-Identifier: MIT
/*
 * s3_copy.c - server-side copies for the s3 backend: CopyObject (one
 * request up to copy_part_size), UploadPartCopy in parts above it (a
 * multipart upload aborted on any failure), rename as copy + DELETE, and
 * setattr as a CopyObject of an object onto itself with replaced metadata
 * (pinned with x-amz-copy-source-if-match, so a concurrent rewrite is not
 * reverted).
 *
 * A copy answers 200 even when it failed part way (an <Error> body): the
 * body is always parsed before success is reported.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/s3_internal.h"

/* "/bucket/<prefix><key>" encoded, for x-amz-copy-source. */
static char *copy_source(struct s3b *s, const char *key)
{
	char *raw, *enc;

	if (asprintf(&raw, "/%s/%s%s", s->bucket, s->prefix, key) < 0)
		return NULL;
	enc = smux__s3_uri_encode(raw, true);
	free(raw);
	return enc;
}

/* Sends @c with a bounded body sink and parses a COPY answer; an <Error>
 * body with a 200 is the error. @etag_out (may be NULL) gets the ETag,
 * @lastmod_out (may be NULL) the LastModified (0: none). */
static int call_copy(struct s3b_call *c, const struct smux_ctx *ctx,
		     char *etag_out, size_t etag_cap, int64_t *lastmod_out,
		     struct smux_error *err)
{
	struct smux_sink sink;
	struct smux_s3_xml *x = NULL;
	const struct smux_s3_result *r;
	unsigned char *body;
	size_t len;
	int rc;

	smux_sink_dyn(&sink);
	c->sink = &sink;
	c->max_body = S3B_SMALL_BODY_MAX;
	rc = smux__s3_call(c, ctx, err);
	c->sink = NULL; /* the sink is this function's */
	body = smux_sink_dyn_take(&sink, &len);
	smux_sink_release(&sink);
	if (rc == 0) {
		rc = smux__s3_xml_parse(SMUX_S3_DOC_COPY,
					body ? body : (void *)"", len, &x, err);
		if (rc < 0)
			snprintf(err->e.backend, sizeof(err->e.backend), "%s",
				 c->s->base.name);
	}
	if (rc == 0) {
		r = smux__s3_xml_result(x);
		if (r->is_error)
			rc = smux__s3_error_fill(err, 500, r, c->s->base.name,
						 c->what);
		if (!r->is_error && etag_out)
			smux__s3_etag_copy(etag_out, etag_cap,
					   r->etag ? r->etag : "");
		if (!r->is_error && lastmod_out)
			*lastmod_out = r->mtime_ns;
	}
	smux__s3_xml_free(x);
	free(body);
	return rc;
}

/*
 * Whether a copy can be pinned to the source's ETag: not for a multipart
 * object ("md5-N"), whose ETag Swift's s3api does not match in
 * x-amz-copy-source-if-match (PreconditionFailed on the very version
 * just read); such a copy is unpinned.
 */
static bool pin_ok(const char *etag)
{
	return etag && etag[0] && !strchr(etag, '-');
}

/* Adds the metadata of @info (the source) to @c as a REPLACE. */
static void meta_of(struct s3b_call *c, char bufs[4][32],
		    const struct smux_info *info)
{
	smux__s3_meta_headers(c, bufs, info->mode, info->mtime_ns,
			      info->has_owner, info->uid, info->gid);
}

/* One CopyObject of @src (version @etag) to @dst with metadata @info. */
static int copy_once(struct s3b *s, const struct smux_ctx *ctx, const char *src,
		     const char *dst, const char *etag,
		     const struct smux_info *info, char *etag_out,
		     size_t etag_cap, struct smux_error *err)
{
	char meta[4][32], quoted[SMUX_ETAG_MAX + 3];
	char *source = copy_source(s, src);
	struct smux_info done = *info;
	int64_t lastmod = 0;
	struct s3b_call c;
	int rc;

	if (!source)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	rc = smux__s3_call_init(&c, s, "PUT", dst, err);
	if (rc < 0) {
		free(source);
		return rc;
	}
	snprintf(c.what, sizeof(c.what), "COPY \"%.100s\" to \"%.100s\"", src,
		 dst);
	smux__s3_call_header(&c, "x-amz-copy-source", source);
	/* REPLACE with the source's own metadata: a copy onto itself is
	 * allowed then, and every server keeps the same headers */
	smux__s3_call_header(&c, "x-amz-metadata-directive", "REPLACE");
	if (pin_ok(etag)) {
		snprintf(quoted, sizeof(quoted), "\"%s\"", etag);
		smux__s3_call_header(&c, "x-amz-copy-source-if-match", quoted);
	}
	meta_of(&c, meta, info);
	rc = call_copy(&c, ctx, done.etag, sizeof(done.etag), &lastmod, err);
	if (rc == 0 && etag_out)
		snprintf(etag_out, etag_cap, "%s", done.etag);
	smux__s3_call_release(&c);
	free(source);
	/* what the copy made: the source's attributes as sent, the ETag and
	 * LastModified of the answer (attrstore.c) */
	if (rc == 0)
		smux__attrstore_put(s->attrs, dst, &done, lastmod);
	else
		smux__attrstore_forget(s->attrs, dst);
	return rc;
}

/* UploadPartCopy of @src (size in @info) to @dst in parts. */
static int copy_parts(struct s3b *s, const struct smux_ctx *ctx,
		      const char *src, const char *dst,
		      const struct smux_info *info, char *etag_out,
		      size_t etag_cap, struct smux_error *err)
{
	uint64_t psize = s->copy_part_size, off;
	unsigned n = (unsigned)((info->size + psize - 1) / psize), i;
	char meta[4][32], num[16], range[64], quoted[SMUX_ETAG_MAX + 3];
	char **etags = NULL, *upload_id = NULL, *source = NULL;
	struct s3b_call init, c;
	int rc;

	if (n > SMUX_S3_PARTS_MAX)
		return smux_error_set(
			err, SMUX_E_INVALID_ARGUMENT, s->base.name,
			"copy \"%s\": too large to copy in parts", src);
	rc = smux__s3_call_init(&init, s, "POST", dst, err);
	if (rc < 0)
		return rc;
	meta_of(&init, meta, info);
	rc = smux__s3_mpu_initiate(s, ctx, dst, &init, &upload_id, err);
	smux__s3_call_release(&init);
	if (rc < 0)
		return rc;
	etags = calloc(n, sizeof(*etags));
	source = copy_source(s, src);
	if (!etags || !source) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
		goto out;
	}
	snprintf(quoted, sizeof(quoted), "\"%s\"", info->etag);
	for (i = 0; i < n; i++) {
		struct smux_s3_kv q[2] = {{"partNumber", num},
					  {"uploadId", upload_id}};

		off = (uint64_t)i * psize;
		snprintf(num, sizeof(num), "%u", i + 1);
		snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64,
			 off,
			 (off + psize < info->size ? off + psize : info->size) -
				 1);
		rc = smux__s3_call_init(&c, s, "PUT", dst, err);
		if (rc < 0)
			goto out;
		c.query = q;
		c.nquery = 2;
		snprintf(c.what, sizeof(c.what), "COPY PART %u of \"%.100s\"",
			 i + 1, src);
		smux__s3_call_header(&c, "x-amz-copy-source", source);
		smux__s3_call_header(&c, "x-amz-copy-source-range", range);
		if (pin_ok(info->etag))
			smux__s3_call_header(&c, "x-amz-copy-source-if-match",
					     quoted);
		etags[i] = malloc(SMUX_ETAG_MAX);
		if (!etags[i]) {
			smux__s3_call_release(&c);
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
			goto out;
		}
		rc = call_copy(&c, ctx, etags[i], SMUX_ETAG_MAX, NULL, err);
		smux__s3_call_release(&c);
		if (rc < 0)
			goto out;
	}
	rc = smux__s3_mpu_complete(s, ctx, dst, upload_id, etags, n, etag_out,
				   etag_cap, err);
out:
	if (rc < 0)
		smux__s3_mpu_abort(s, ctx, dst, upload_id);
	/* a multipart result's ETag is not known here: the next listing of
	 * @dst asks it with a HEAD */
	smux__attrstore_forget(s->attrs, dst);
	for (i = 0; etags && i < n; i++)
		free(etags[i]);
	free(etags);
	free(source);
	free(upload_id);
	return rc;
}

int smux__s3_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *src, const char *dst, struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	struct smux_info info;
	int rc;

	rc = smux__s3_head(b, ctx, src, &info, err);
	if (rc < 0)
		return rc;
	if ((info.mode & S_IFMT) == S_IFDIR)
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, s->base.name,
				      "copy \"%s\": is a directory", src);
	if (strcmp(src, dst) == 0)
		return 0;
	if (info.size > s->copy_part_size)
		return copy_parts(s, ctx, src, dst, &info, NULL, 0, err);
	return copy_once(s, ctx, src, dst, info.etag, &info, NULL, 0, err);
}

int smux__s3_rename(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *src, const char *dst, struct smux_error *err)
{
	int rc;

	if (strcmp(src, dst) == 0)
		return smux__s3_head(b, ctx, src, NULL, err);
	rc = smux__s3_copy(b, ctx, src, dst, err);
	if (rc < 0)
		return rc;
	return smux_backend_del(b, ctx, src, err);
}

int smux__s3_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_setattr *attr,
		     struct smux_error *err)
{
	struct s3b *s = smux__s3_from(b);
	struct smux_info info;
	size_t n = strlen(key);
	int rc;

	rc = smux__s3_head(b, ctx, key, &info, err);
	if (rc < 0)
		return rc;
	if ((info.mode & S_IFMT) == S_IFDIR && (n == 0 || key[n - 1] != '/'))
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, s->base.name,
				      "setattr \"%s\": a directory is \"%s/\"",
				      key, key);
	if (n == 0)
		return 0; /* the root keeps nothing */
	if (attr->flags & SMUX_SET_MODE)
		info.mode = (info.mode & S_IFMT) | (attr->mode & 07777);
	if (attr->flags & SMUX_SET_MTIME)
		info.mtime_ns = attr->mtime_ns;
	if (attr->flags & SMUX_SET_OWNER) {
		if (attr->uid != SMUX_ID_NONE)
			info.uid = attr->uid;
		if (attr->gid != SMUX_ID_NONE)
			info.gid = attr->gid;
		info.has_owner =
			info.uid != SMUX_ID_NONE || info.gid != SMUX_ID_NONE;
	}
	if (key[n - 1] == '/' && !info.etag[0]) {
		/* an implied directory: make its marker with the attributes */
		struct smux_put_opts po;
		struct smux_source src;

		smux_put_opts_keep(&po, &info);
		smux_source_buf(&src, "", 0);
		return smux_backend_put(b, ctx, key, &src, &po, NULL, err);
	}
	if (info.size > s->copy_part_size)
		return copy_parts(s, ctx, key, key, &info, NULL, 0, err);
	return copy_once(s, ctx, key, key, info.etag, &info, NULL, 0, err);
}

int smux__s3_copy_meta(struct s3b *s, const struct smux_ctx *ctx,
		       const char *key, const struct smux_info *info,
		       char *etag_out, size_t etag_cap, struct smux_error *err)
{
	if (info->size > s->copy_part_size)
		return copy_parts(s, ctx, key, key, info, etag_out, etag_cap,
				  err);
	return copy_once(s, ctx, key, key, info->etag, info, etag_out, etag_cap,
			 err);
}
