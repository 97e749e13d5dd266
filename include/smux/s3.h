/* SPDX-License-Identifier: MIT */
/*
 * smux/s3.h - a backend on an S3-compatible object store (AWS S3, Swift's
 * s3api, s3rver, ...), signed with AWS Signature Version 4.
 *
 * Key "a/b/c" is the object <prefix>a/b/c of the bucket. Directories are
 * zero-byte marker objects "a/b/" (the s3fs convention) plus the implicit
 * directories of common prefixes: head("a") and head("a/") answer a
 * directory when a marker "a/" or any key under "a/" exists.
 *
 * get is a ranged GET pinned with If-Match (and the answer's ETag checked
 * as well: some servers ignore If-Match); head is HEAD; put is one PUT
 * streamed from the source with an UNSIGNED-PAYLOAD hash; del is DELETE;
 * del_many is DeleteObjects (up to 1000 keys a request; one DELETE a key
 * for keys XML cannot carry and on servers without it);
 * list is ListObjectsV2 (prefix, delimiter, continuation tokens,
 * encoding-type=url); copy is CopyObject (UploadPartCopy in parts above
 * the copy threshold); rename is copy + DELETE; setattr is a CopyObject of
 * the object onto itself with replaced metadata.
 *
 * Metadata as s3fs writes it: x-amz-meta-mode (decimal st_mode, file type
 * included), x-amz-meta-uid, x-amz-meta-gid and x-amz-meta-mtime (seconds
 * since the epoch, "sec" as s3fs or "sec.fraction" as rclone; written as
 * "sec.nnnnnnnnn"). A symlink is an object with mode S_IFLNK whose body
 * is its target (as s3fs stores it). A listing carries no metadata: its
 * entries report S_IFREG 0644 (S_IFDIR 0755 for markers) and the server's
 * LastModified.
 *
 * Credentials: an access key and secret (and optionally a session token),
 * given here or read from an AWS shared-credentials file or the
 * environment. They are held by the signer only and never appear in an
 * error, a log line or a stat.
 */
#ifndef SMUX_S3_H
#define SMUX_S3_H

#include "smux/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest object one PUT or CopyObject may move (S3's limit). */
#define SMUX_S3_SINGLE_MAX (5ull << 30)
/* Smallest part of a multipart upload but the last one (S3's limit). */
#define SMUX_S3_PART_MIN (5ull << 20)
/* Most parts of one upload in flight at once (part_parallel). */
#define SMUX_S3_PARALLEL_MAX 32
/* Most parts of one multipart upload (S3's limit). */
#define SMUX_S3_PARTS_MAX 10000u
/* Default multipart_threshold: objects up to this size go in one PUT
 * (rclone's --s3-upload-cutoff, 200 MiB). */
#define SMUX_S3_MULTIPART_DEFAULT (200ull << 20)

struct smux_s3_opts {
	const char *endpoint; /* http:// or https:// host[:port], no path */
	const char *bucket;   /* DNS-compatible when !path_style */
	const char *region;   /* NULL: "us-east-1" */
	const char *prefix;   /* key prefix in the bucket; NULL/"": none,
				 else it ends in '/' */
	bool path_style;      /* endpoint/bucket/key; false:
				 bucket.endpoint/key (virtual host) */
	/* Credentials: access_key + secret_key (+ session_token) when set;
	 * else credentials_file (AWS shared-credentials INI, profile
	 * `profile`, NULL: "default"); else the environment (AWS_ACCESS_KEY_ID,
	 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; credentials_env renames
	 * the AWS prefix). */
	const char *access_key;
	const char *secret_key;
	const char *session_token;
	const char *credentials_file;
	const char *profile;
	const char *credentials_env;
	const char *ca_file;	    /* PEM bundle for TLS; NULL: the system's */
	int64_t connect_timeout_ms; /* 0: 10 s */
	int64_t idle_timeout_ms;    /* 0: 30 s */
	unsigned max_attempts;	    /* per request, 0: 5 */
	/* A copy (rename) of an object larger than this goes in parts
	 * (UploadPartCopy), each at most this large; 0: SMUX_S3_SINGLE_MAX.
	 * At least SMUX_S3_PART_MIN. A knob for tests. */
	uint64_t copy_part_size;
	/* A put larger than this goes as a multipart upload of parts this
	 * large, uploaded in parallel; 0: 8 MiB. SMUX_S3_PART_MIN to
	 * SMUX_S3_SINGLE_MAX; grown when an object would need more than
	 * SMUX_S3_PARTS_MAX parts. */
	uint64_t part_size;
	unsigned part_parallel; /* parts in flight per upload, 0: 4; at most
				   SMUX_S3_PARALLEL_MAX */
	/* A put up to this size is one PUT; a larger one a multipart upload
	 * of part_size parts, which a writer (smux_backend_writer_open)
	 * starts once the file it stages passes this size. Why not always
	 * parts: one PUT is one request with the metadata in it, where an
	 * upload is initiate + parts + complete + a copy for the metadata,
	 * and a server that joins the parts on complete (s3rver copies
	 * every byte again) pays the object twice. 0:
	 * SMUX_S3_MULTIPART_DEFAULT; at most SMUX_S3_SINGLE_MAX; a value up
	 * to part_size means any object above one part goes in parts. */
	uint64_t multipart_threshold;
	/* A directory (created 0700) journaling the multipart uploads in
	 * flight, so the uploads a crash left on the server are aborted
	 * at the next start (in the background); NULL: none. */
	const char *upload_journal;
	/* The attribute cache (what the backend last knew of each object's
	 * mode, owner, mtime, symlink marker), so a listing entry whose
	 * etag, size and Last-Modified match needs no HEAD: an SQLite file
	 * (its directories are made), NULL: kept in memory only. */
	const char *attr_store;
	size_t attr_store_max; /* its bound on entries, 0: 1,000,000 */
	bool attr_store_off;   /* no attribute cache at all */
};

/*
 * Opens the backend (no request is made: a server that is down at mount
 * time is a member that is down). Returns 0 and *@out (one reference), or
 * a negative errno with @err (INVALID_OPTIONS naming the option; a
 * credentials error names the file or variable, never a value).
 */
int smux_s3_new(const char *name, const struct smux_s3_opts *opts,
		struct smux_backend **out, struct smux_error *err);

/* DeleteObjects requests @b sent so far (del_many); 0 when @b is not an s3
 * backend. */
unsigned long smux_s3_delete_objects_count(struct smux_backend *b);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_S3_H */
