/* SPDX-License-Identifier: MIT */
/*
 * backends/s3_internal.h - what the s3 backend's modules share: s3.c (the
 * instance, signed requests, head/get/put/del), s3_list.c (ListObjectsV2)
 * and s3_copy.c (CopyObject, UploadPartCopy, setattr, rename),
 * s3_mpu.c (multipart uploads of large puts), s3_writer.c (the writer,
 * whose upload starts while the file is written) and s3_del.c (del_many:
 * DeleteObjects). Not a public header.
 *
 * Every request goes through smux__s3_call(): the request is signed again
 * before every attempt of the HTTP layer (a retry carries a fresh
 * X-Amz-Date), its URL is the signer's encoding of the decoded path and
 * query, and a failure's S3 error document is parsed (bounded) into the
 * smux error.
 */
#ifndef SMUX_BACKENDS_S3_INTERNAL_H
#define SMUX_BACKENDS_S3_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/http_client.h"
#include "backends/s3_sign.h"
#include "backends/s3_xml.h"
#include "core/attrstore.h"
#include "smux/s3.h"

/* Extra signed headers one request may carry. */
#define S3B_HDR_MAX 12
/* Longest body of a small XML answer (copy, initiate, complete). */
#define S3B_SMALL_BODY_MAX (1u << 20)
/* Default permission bits of objects and markers without x-amz-meta-mode. */
#define S3B_FILE_MODE 0644
#define S3B_DIR_MODE  0755

struct s3b {
	struct smux_backend base; /* first: downcast by smux__s3_from */
	struct smux__http *http;
	struct smux_s3_signer signer;
	char *scheme;	   /* "http" or "https" */
	char *host;	   /* Host header: endpoint host[:port], or
				bucket.host[:port] (virtual host) */
	char *bucket;	   /* owned */
	char *bucket_path; /* decoded path of the bucket: "/bucket" or "" */
	char *prefix;	   /* "" or ends in '/' */
	size_t prefix_len;
	char *region;
	uint64_t copy_part_size;
	uint64_t part_size;
	unsigned part_parallel;
	/* larger puts go in parts: multipart_threshold, at least part_size */
	uint64_t mpu_above;
	struct s3b_orphans *orphans; /* s3_orphans.c; NULL: no journal */
	/* what was last known of each object's attributes, so a listing
	 * needs no HEAD per entry (core/attrstore.c); NULL: off */
	struct smux__attrstore *attrs;
	/* DeleteObjects (s3_del.c): requests sent, and whether the server
	 * turned it down once (every later del_many goes key by key) */
	atomic_ulong n_delete_objects;
	atomic_bool no_delete_objects;
};

struct s3b *smux__s3_from(struct smux_backend *b);

/* What x-amz-meta-* headers said (s3fs and rclone conventions). */
struct s3b_meta {
	bool has_mode, has_uid, has_gid, has_mtime;
	uint32_t mode, uid, gid;
	int64_t mtime_ns;
	/* the answer says the object is encrypted with KMS or a customer
	 * key: its ETag is no MD5 of the data (s3_md5.c) */
	bool etag_not_md5;
};

/* One request. Fill with smux__s3_call_init, add headers, call. */
struct s3b_call {
	struct s3b *s;
	const char *method;
	char *path; /* decoded: bucket_path + "/" + prefix + key */
	const struct smux_s3_kv *query;
	size_t nquery;
	struct smux_s3_kv hdr[S3B_HDR_MAX];
	size_t nhdr;
	const char *payload_hash; /* NULL: empty body */
	/* request body and answer (as struct smux__http_req) */
	const struct smux_source *body;
	struct smux_sink *sink;
	uint64_t max_body;
	bool no_retry;
	/* meta: parsed x-amz-meta-* of the answer */
	struct s3b_meta meta;
	/* set per attempt */
	struct smux_s3_signed sig;
	char *lines[S3B_HDR_MAX + 6];
	const char *hdrs[S3B_HDR_MAX + 7];
	char what[256];
	struct smux__http_resp resp;
	/* the parsed S3 error document of a failure; NULL when none */
	bool not_found; /* the final status was 404 */
};

/* @key: the smux key (NULL: the bucket itself). 0 or -ENOMEM with @err. */
int smux__s3_call_init(struct s3b_call *c, struct s3b *s, const char *method,
		       const char *key, struct smux_error *err);
/* s3_md5.c: the MD5 of @body (read whole) in @md5 and base64 in @b64,
 * for a Content-MD5 header; *@have false when the host has no MD5 (a
 * FIPS build: the put goes without). 0, or a local error (the body's
 * read) or NO_MEMORY. */
int smux__s3_md5(struct s3b *s, const struct smux_source *body,
		 unsigned char md5[16], char b64[25], bool *have,
		 struct smux_error *err);
/* s3_md5.c: BAD_RESPONSE when @etag (unquoted) is an MD5 other than
 * @md5 (the server stored another body than the one sent); 0 when it is
 * that one, or no MD5 at all. @what names the request. */
int smux__s3_md5_etag(struct s3b *s, const char *what, const char *etag,
		      const unsigned char md5[16], struct smux_error *err);
/* Adds a signed header (@name and @value borrowed until the call ends). */
void smux__s3_call_header(struct s3b_call *c, const char *name,
			  const char *value);
/* Sends it. 0 on 2xx; else -errno with @err (S3 error document mapped). */
int smux__s3_call(struct s3b_call *c, const struct smux_ctx *ctx,
		  struct smux_error *err);
/* Frees what the call holds. */
void smux__s3_call_release(struct s3b_call *c);

/* "x-amz-meta-mode" etc. for a put of @mode/@mtime/owner, written into
 * @bufs (4 x 32 bytes) and added to @c. */
void smux__s3_meta_headers(struct s3b_call *c, char bufs[4][32], uint32_t mode,
			   int64_t mtime_ns, bool owner, uint32_t uid,
			   uint32_t gid);

/* Info of an object from a HEAD/GET answer of @c (key for the type). */
void smux__s3_info_from(const struct s3b_call *c, const char *key,
			uint64_t size, struct smux_info *info);

/* head as the ops table has it (s3.c). */
int smux__s3_head(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *key, struct smux_info *info,
		  struct smux_error *err);
/* del as the ops table has it (s3.c): one DELETE, 404 is success. */
int smux__s3_del(struct smux_backend *b, const struct smux_ctx *ctx,
		 const char *key, struct smux_error *err);
/* del_many as the ops table has it (s3_del.c): DeleteObjects in batches
 * of up to 1000 keys; smux__s3_del for a key the XML cannot carry and
 * for every key once the server turned DeleteObjects down. */
int smux__s3_del_many(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *const *keys, size_t n, int *rcs,
		      struct smux_error *err);
/* Whether any object starts with @key_prefix (a directory's "a/"): 1, 0,
 * or -errno (s3_list.c). */
int smux__s3_any_under(struct s3b *s, const struct smux_ctx *ctx,
		       const char *key_prefix, struct smux_error *err);

/* ops (s3_list.c, s3_copy.c) */
int smux__s3_list(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *prefix, const char *delimiter, smux_list_fn fn,
		  void *arg, struct smux_error *err);
int smux__s3_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *src, const char *dst, struct smux_error *err);
int smux__s3_rename(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *src, const char *dst, struct smux_error *err);
int smux__s3_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_setattr *attr,
		     struct smux_error *err);

/* Rewrites the metadata of the object @key (version @info->etag, of
 * @info->size bytes) to @info's mode, mtime and owner by a copy onto
 * itself (s3_copy.c); @etag_out (may be NULL) gets the new version. */
int smux__s3_copy_meta(struct s3b *s, const struct smux_ctx *ctx,
		       const char *key, const struct smux_info *info,
		       char *etag_out, size_t etag_cap, struct smux_error *err);
/* put as the ops table has it (s3.c), and the attributes it stores for
 * @opts (mode, mtime: now when 0, owner) in @info (cleared first). */
int smux__s3_put(struct smux_backend *b, const struct smux_ctx *ctx,
		 const char *key, const struct smux_source *src,
		 const struct smux_put_opts *opts, struct smux_info *info,
		 struct smux_error *err);
void smux__s3_put_attrs(const char *key, const struct smux_put_opts *opts,
			uint64_t size, struct smux_info *info);
/* The writer (s3_writer.c): SMUX_WRITER_TRUNC opens only, else
 * NOT_SUPPORTED (the caller stages). */
int smux__s3_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, unsigned flags,
			 struct smux_writer **out, struct smux_error *err);

/* Multipart helpers (s3_mpu.c). Upload ids are heap strings. */
int smux__s3_mpu_initiate(struct s3b *s, const struct smux_ctx *ctx,
			  const char *key, struct s3b_call *meta_from,
			  char **upload_id, struct smux_error *err);
/* Sends @body as part @number (1-based) of @upload_id; on 0 *@etag is
 * its ETag (a heap string), else NULL. Thread-safe: the put's workers and
 * the writer's (s3_writer.c) send parts through it. */
int smux__s3_mpu_part(struct s3b *s, const struct smux_ctx *ctx,
		      const char *key, const char *upload_id, unsigned number,
		      const struct smux_source *body, char **etag,
		      struct smux_error *err);
/* Completes @n parts whose ETags are @etags[0..n-1] (numbers 1..n). */
int smux__s3_mpu_complete(struct s3b *s, const struct smux_ctx *ctx,
			  const char *key, const char *upload_id,
			  char *const *etags, unsigned n, char *etag_out,
			  size_t etag_cap, struct smux_error *err);
/* Aborts (best effort, under its own short deadline). 0, -ENOENT (no
 * such upload) or another negative errno. */
int smux__s3_mpu_abort(struct s3b *s, const struct smux_ctx *ctx,
		       const char *key, const char *upload_id);

/*
 * The journal of multipart uploads in flight (s3_orphans.c). open creates
 * @dir, reads what an earlier run left there and starts aborting those
 * uploads in the background (no request before it returns); close stops
 * and joins that. add records an upload the server just started (durable
 * before it returns; best effort: a local failure only loses the record),
 * done forgets it (completed or aborted). All no-ops without a journal.
 */
int smux__s3_orphans_open(struct s3b *s, const char *dir,
			  struct smux_error *err);
void smux__s3_orphans_close(struct s3b *s);
void smux__s3_orphans_add(struct s3b *s, const char *key,
			  const char *upload_id);
void smux__s3_orphans_done(struct s3b *s, const char *upload_id);
/* A put of @src as a multipart upload (s3_mpu.c); @meta_hdrs as for the
 * put. */
int smux__s3_mpu_put(struct s3b *s, const struct smux_ctx *ctx, const char *key,
		     const struct smux_source *src, struct s3b_call *meta_from,
		     char *etag_out, size_t etag_cap, struct smux_error *err);

/* Creates the bucket of @b (tests and tools; 409 "already yours" is 0). */
int smux__s3_make_bucket(struct smux_backend *b, const struct smux_ctx *ctx,
			 struct smux_error *err);

/* Copies @etag without surrounding quotes into @out (@cap bytes). */
void smux__s3_etag_copy(char *out, size_t cap, const char *etag);

#endif /* SMUX_BACKENDS_S3_INTERNAL_H */
