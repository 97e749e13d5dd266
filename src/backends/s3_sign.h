/* SPDX-License-Identifier: MIT */
/*
 * backends/s3_sign.h - AWS Signature Version 4 for the s3 backend, and the
 * credentials it signs with.
 *
 * Owns: the canonical request (method, S3's encode-once canonical URI, the
 * sorted and encoded query, lower-cased trimmed sorted headers, the payload
 * hash), the string to sign, the signing key (cached per day, region and
 * service), the Authorization header and presigned query auth; loading
 * credentials from an AWS shared-credentials file (inih) or the environment.
 * Never touches the network: inputs in, header values out, so the backend
 * re-signs every retry with a fresh time.
 *
 * Secrets: the secret key and session token live only in a struct
 * smux_s3_creds (wiped on release) and inside the signer. No error message,
 * canonical request or string to sign ever contains the secret; the session
 * token is part of what is signed (it is sent as a header) and so may
 * appear in canonical_request, which must not be logged either.
 *
 * Threads: a signer may be used from any number of threads at once (the
 * key cache and the credentials are behind the signer's own lock, never
 * held across anything but a few HMACs).
 */
#ifndef SMUX_BACKENDS_S3_SIGN_H
#define SMUX_BACKENDS_S3_SIGN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "smux/error.h"

/* Hex SHA-256 of the empty string: the payload hash of a bodiless request. */
#define SMUX_S3_EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/* Payload hash value for a body that is not hashed (streamed uploads). */
#define SMUX_S3_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

#define SMUX_S3_HEX256	    65	   /* 64 hex digits + NUL */
#define SMUX_S3_AMZ_DATE    17	   /* "20130524T000000Z" + NUL */
#define SMUX_S3_KEY_MAX	    256	   /* longest access key or secret accepted */
#define SMUX_S3_TOKEN_MAX   8192   /* longest session token accepted */
#define SMUX_S3_PRESIGN_MAX 604800 /* 7 days: the longest X-Amz-Expires */

/* Credentials. All strings owned (heap); session_token NULL when none. */
struct smux_s3_creds {
	char *access_key;
	char *secret_key;
	char *session_token;
};

/* Wipes and frees the strings of @c and zeroes it (NULL allowed). */
void smux__s3_creds_release(struct smux_s3_creds *c);

/*
 * Loads profile @profile (NULL: "default") of the AWS shared-credentials
 * file @path (INI: [profile] sections with aws_access_key_id,
 * aws_secret_access_key and optionally aws_session_token). Fills @out (the
 * caller releases it). Errors (file missing or unreadable, syntax error,
 * profile or key missing, value too long) name the file, line, profile and
 * key, never a value: -ENOENT or -EACCES (the file), -EINVAL (code
 * INVALID_OPTIONS: the user must fix the file).
 */
int smux__s3_creds_from_file(const char *path, const char *profile,
			     struct smux_s3_creds *out, struct smux_error *err);

/*
 * Loads credentials from the environment: PREFIX_ACCESS_KEY_ID,
 * PREFIX_SECRET_ACCESS_KEY and optionally PREFIX_SESSION_TOKEN, with
 * @prefix NULL meaning "AWS" (AWS_ACCESS_KEY_ID, ...). -EINVAL (code
 * INVALID_OPTIONS, naming the variable, never its value) when the key id
 * or secret is unset or empty or a value is too long.
 */
int smux__s3_creds_from_env(const char *prefix, struct smux_s3_creds *out,
			    struct smux_error *err);

/* A name and a value. For query parameters, value NULL is a bare name
 * ("?uploads"); both are decoded (raw) strings that the signer encodes. */
struct smux_s3_kv {
	const char *name;
	const char *value;
};

/* One request to sign. Every pointer is borrowed for the call only. */
struct smux_s3_request {
	const char *method; /* "GET", "PUT", ... */
	/* The Host header exactly as sent: "bucket.s3.amazonaws.com" or
	 * "127.0.0.1:9000" (with the port when the URL has one). */
	const char *host;
	/* The decoded path ("/bucket/a b+c" path-style, "/a b+c" virtual
	 * host), beginning with '/'; NULL or "" means "/". The signer
	 * encodes each byte outside A-Z a-z 0-9 - . _ ~ / once (S3's rule:
	 * no normalisation, no double encoding); out->url_path is that
	 * encoding, to be put in the URL as is. */
	const char *path;
	const struct smux_s3_kv *query; /* decoded parameters, any order */
	size_t nquery;
	/* Headers the request sends besides Host, X-Amz-Date,
	 * X-Amz-Content-Sha256 and X-Amz-Security-Token (which the signer
	 * adds and the caller must not pass), all of them signed: e.g.
	 * Range, Content-Type, Content-MD5, If-Match, x-amz-meta-*. Names
	 * are case-insensitive; a repeated name is joined with ','. Values
	 * are trimmed and inner blanks collapsed for signing (send them
	 * unchanged). A CR, LF or NUL in a value is refused. */
	const struct smux_s3_kv *headers;
	size_t nheaders;
	/* Lower-case hex SHA-256 of the body, SMUX_S3_UNSIGNED_PAYLOAD, or
	 * NULL for an empty body (SMUX_S3_EMPTY_SHA256). */
	const char *payload_hash;
	time_t now;	     /* the request time (re-sign on retries) */
	const char *region;  /* "us-east-1" */
	const char *service; /* NULL: "s3" */
	/* Whether to add and sign X-Amz-Content-Sha256 (S3 requires it; other
	 * services do not send it). Ignored by presigning. */
	bool no_content_sha256;
};

/* A signed request: what to send. Strings owned; release with
 * smux__s3_signed_release. */
struct smux_s3_signed {
	/* Header values to send: "Authorization: <authorization>",
	 * "X-Amz-Date: <amz_date>", "X-Amz-Content-Sha256: <payload_hash>"
	 * (unless no_content_sha256), and when the credentials have a
	 * session token "X-Amz-Security-Token: <security_token>". For a
	 * presigned request, authorization and security_token are NULL:
	 * everything is in url_query. */
	char *authorization;
	char amz_date[SMUX_S3_AMZ_DATE];
	char payload_hash[SMUX_S3_HEX256 + 16];
	char *security_token;
	/* The path and query exactly as signed, to build the URL:
	 * "http://host" + url_path + ("?" + url_query when not empty). */
	char *url_path;
	char *url_query;
	/* For tests and debugging: the canonical request (may hold the
	 * session token: never log it), the string to sign, the signature. */
	char *canonical_request;
	char *string_to_sign;
	char signature[SMUX_S3_HEX256];
};

void smux__s3_signed_release(struct smux_s3_signed *s);

/* A signer: credentials plus the signing-key cache. */
struct smux_s3_signer {
	pthread_mutex_t lock;
	struct smux_s3_creds creds; /* protected by lock */
	/* protected by lock: the last signing key and its scope
	 * ("20130524/us-east-1/s3"); scope "" when none */
	char key_scope[96];
	unsigned char key[32];
	unsigned long key_derivations; /* protected by lock; for tests */
};

/* Copies @creds into @s. -EINVAL when the key id or secret is missing or
 * too long; -ENOMEM. */
int smux__s3_signer_init(struct smux_s3_signer *s,
			 const struct smux_s3_creds *creds,
			 struct smux_error *err);
/* Wipes the credentials and the cached key. */
void smux__s3_signer_release(struct smux_s3_signer *s);
/* Replaces the credentials (rotation of session credentials) and drops
 * the cached key. Same errors as init; on error nothing changes. */
int smux__s3_signer_set_creds(struct smux_s3_signer *s,
			      const struct smux_s3_creds *creds,
			      struct smux_error *err);

/*
 * Signs @req for the Authorization header. Fills @out (released by the
 * caller, also after an error). Returns 0, -EINVAL for a malformed request
 * (bad method, host, header name or value, payload hash, region; the
 * message names the field, never a secret) or -ENOMEM.
 */
int smux__s3_sign(struct smux_s3_signer *s, const struct smux_s3_request *req,
		  struct smux_s3_signed *out, struct smux_error *err);

/*
 * Presigned query authentication: like smux__s3_sign, but X-Amz-Algorithm,
 * -Credential, -Date, -Expires (@expires seconds, 1..SMUX_S3_PRESIGN_MAX),
 * -SignedHeaders, -Security-Token and -Signature go into out->url_query;
 * the payload hash defaults to UNSIGNED-PAYLOAD.
 */
int smux__s3_presign(struct smux_s3_signer *s,
		     const struct smux_s3_request *req, unsigned expires,
		     struct smux_s3_signed *out, struct smux_error *err);

/* Percent-encodes @in per SigV4 (unreserved A-Z a-z 0-9 - . _ ~ kept,
 * '/' kept when @keep_slash, everything else %XX upper-case). Returns a
 * heap string or NULL when out of memory. */
char *smux__s3_uri_encode(const char *in, bool keep_slash);

/* Lower-case hex SHA-256 of @len bytes at @data into @hex. */
void smux__s3_sha256_hex(const void *data, size_t len,
			 char hex[SMUX_S3_HEX256]);

#endif /* SMUX_BACKENDS_S3_SIGN_H */
