/* SPDX-License-Identifier: MIT */
/*
 * backends/http_client.h - the one HTTP layer every network backend (http,
 * s3, swift, bunny) goes through. Not a public header.
 *
 * Owns: libcurl (curl_global_init once, after OpenSSL's init without its
 * exit handler: workers may still be in a call at exit), a small pool of
 * easy handles kept alive between calls (each handle keeps its
 * connections, so a run of requests from one thread reuses one TCP
 * connection), the timeouts derived
 * from a call's struct smux_ctx, retries with full-jitter backoff, and THE
 * mapping of curl errors and HTTP statuses to smux error codes. It never
 * interprets a response body: a backend parses what it asked for.
 *
 * Streaming: a request body is read from a struct smux_source as curl asks
 * for it, a 2xx response body is written to a struct smux_sink as it
 * arrives; nothing holds a whole object. A non-2xx body is kept, bounded
 * (SMUX__HTTP_ERRBODY_MAX), for the backend to read (S3 error XML).
 *
 * Timeouts: connect timeout (opts.connect_timeout_ms, never past the
 * deadline), an idle timeout (no byte moved either way for
 * opts.idle_timeout_ms fails the attempt, so a slow but steady transfer
 * finishes and a stalled one fails fast), and the call's deadline and
 * cancel tokens, checked by the progress callback (an abort within about
 * 100 ms of the token firing) and as CURLOPT_TIMEOUT_MS.
 *
 * Threads: a struct smux__http is shared by every thread of a backend; a
 * call borrows one easy handle from the pool (or makes one) and gives it
 * back, so a handle is used by one thread at a time. Credentials are held
 * by the client, passed to curl as CURLOPT_USERNAME/PASSWORD and never
 * written into an error, a log line or a stat.
 */
#ifndef SMUX_BACKENDS_HTTP_CLIENT_H
#define SMUX_BACKENDS_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smux/ctx.h"
#include "smux/error.h"
#include "smux/io.h"

/* What of a non-2xx response body is kept (bytes; the rest is dropped). */
#define SMUX__HTTP_ERRBODY_MAX 4096
/* Longest response header value kept in struct smux__http_resp. */
#define SMUX__HTTP_HDR_MAX 128

struct smux__http_opts {
	const char *backend;	    /* name in errors (copied) */
	const char *ca_file;	    /* PEM bundle to verify TLS with; NULL:
				      the system's (copied) */
	const char *username;	    /* Basic auth; NULL: none (copied) */
	const char *password;	    /* with username (copied, never shown) */
	int64_t connect_timeout_ms; /* 0: 10 s */
	int64_t idle_timeout_ms;    /* 0: 30 s */
	unsigned max_attempts;	    /* 0: 5 (1 = never retry) */
	int64_t backoff_base_ms;    /* 0: 100 ms */
	int64_t backoff_cap_ms;	    /* 0: 10 s; also caps Retry-After */
	unsigned max_idle_handles;  /* pool size kept; 0: 16 */
	bool insecure;		    /* skip TLS verification (tests only) */
};

struct smux__http;

/* Creates a client. 0, or a negative errno with @err. */
int smux__http_new(const struct smux__http_opts *opts, struct smux__http **out,
		   struct smux_error *err);
/* Frees the client and its pooled handles (no call may be running). NULL
 * is a no-op. */
void smux__http_free(struct smux__http *h);

/*
 * Called once per response header line of the final response (not of a
 * 1xx), with the name and value trimmed (not NUL-terminated; lengths
 * given). Return 0 to go on, a negative errno to fail the request with
 * BAD_RESPONSE. Runs on the calling thread.
 */
typedef int (*smux__http_header_fn)(void *arg, const char *name, size_t nlen,
				    const char *value, size_t vlen);

struct smux__http_req {
	const char *method; /* "GET", "HEAD", "PUT", "PROPFIND", ... */
	const char *url;    /* absolute, already percent-encoded */
	/* extra request headers "Name: value", NULL-terminated; NULL: none */
	const char *const *headers;
	/* request body; NULL: none. A smux_source can always be read again
	 * from the start, so a request with a body is retried like one
	 * without, unless body_once says otherwise. */
	const struct smux_source *body;
	bool body_once;		/* the body must not be sent twice: no retry */
	bool no_retry;		/* not idempotent: never retried */
	struct smux_sink *sink; /* 2xx body goes here; NULL: discarded */
	/* longest 2xx body accepted (bytes); 0: unlimited. More fails the
	 * request with BAD_RESPONSE (a listing that never ends). */
	uint64_t max_body;
	smux__http_header_fn on_header; /* NULL: none */
	void *header_arg;
	/* What the request is about, for error messages ("GET a/b"); never
	 * a URL with credentials. NULL: the method. */
	const char *what;
	/* Called before every attempt, retries included, to rebuild the
	 * request headers (a signature with a fresh time: SigV4 must be
	 * re-signed per attempt). Sets *@headers to the NULL-terminated list
	 * the attempt sends (valid until the next call or the end of
	 * smux__http_do). 0, or a negative errno with @err filled: the
	 * request fails with it. NULL: req.headers is sent every time. */
	int (*prepare)(void *arg, const char *const **headers,
		       struct smux_error *err);
	void *prepare_arg;
};

/* What came back. Header fields are "" / -1 when absent. */
struct smux__http_resp {
	long status;		/* final HTTP status; 0 when none arrived */
	unsigned attempts;	/* attempts made */
	int64_t content_length; /* -1 when absent */
	char etag[SMUX__HTTP_HDR_MAX];
	char last_modified[SMUX__HTTP_HDR_MAX];
	char content_range[SMUX__HTTP_HDR_MAX];
	char content_type[SMUX__HTTP_HDR_MAX];
	char location[SMUX__HTTP_HDR_MAX];
	/* bounded copy of a non-2xx body, NUL-terminated */
	char errbody[SMUX__HTTP_ERRBODY_MAX + 1];
	size_t errbody_len;
	uint64_t body_bytes; /* 2xx body bytes written to the sink */
};

/*
 * Performs @req under @ctx: retries transient failures (connection errors,
 * timeouts of an attempt, 408, 429, 5xx, a truncated or garbled answer)
 * with full-jitter backoff, honouring Retry-After on 429 and 503, while the
 * deadline allows and the body and sink can be replayed (a sink that took
 * bytes must rewind).
 *
 * Returns 0 when the final status is 2xx. Otherwise a negative errno with
 * @err filled by the one mapping (smux__http_status_error for a status,
 * smux__http_curl_error for a transfer failure, BACKEND_TIMEOUT /
 * BACKEND_ABORTED for the context, LOCAL_IO_ERROR when the sink or source
 * failed); @resp (never NULL) says what came back either way, so a
 * backend may treat a status as success (404 on DELETE).
 */
int smux__http_do(struct smux__http *h, const struct smux_ctx *ctx,
		  const struct smux__http_req *req,
		  struct smux__http_resp *resp, struct smux_error *err);

/*
 * THE mapping of an HTTP status to an error: 404/410 -> KEY_NOT_FOUND,
 * 401 with credentials sent -> CREDENTIAL_EXPIRED (rejected or expired;
 * caused by the 401), 401 without / 403 -> PERMISSION_DENIED, 412 ->
 * PRECONDITION_FAILED, 507 -> NO_SPACE, 3xx and anything else ->
 * STORAGE.HTTP_ERROR with the status kept (4xx semantic except 408/429,
 * the rest transient). Returns -errno.
 */
int smux__http_status_error(struct smux_error *err, long status,
			    bool had_credentials, const char *backend,
			    const char *what);

/* Whether a final status is worth another attempt (408, 429, 5xx but
 * 501/505). */
bool smux__http_status_retryable(long status);

/*
 * Percent-encodes @in (@len bytes) into @out (@cap bytes, NUL-terminated)
 * keeping RFC 3986 unreserved characters and, when @keep_slash, '/'.
 * Returns the length written, or -ENAMETOOLONG when it does not fit.
 */
long smux__http_escape(const char *in, size_t len, bool keep_slash, char *out,
		       size_t cap);

/*
 * "<@base><escaped @key>" ('/' kept), plus a '/' when @slash and the key
 * does not end in one (a directory), in a new heap string; NULL when out of
 * memory or too long.
 */
char *smux__http_key_url(const char *base, const char *key, bool slash);

/*
 * Decodes %XX escapes of @in (@len bytes) into @out (@cap bytes,
 * NUL-terminated). A malformed escape or a decoded NUL is -EINVAL; too
 * long -ENAMETOOLONG. Returns the decoded length.
 */
long smux__http_unescape(const char *in, size_t len, char *out, size_t cap);

/*
 * Parses an HTTP date (RFC 1123, RFC 850 or asctime, as curl_getdate
 * takes them) into ns since the epoch; -1 when it is not one.
 */
int64_t smux__http_parse_date(const char *s);

/* ---- ranged GETs (http_range.c), shared by every network backend ---- */

/*
 * The object's total size from an answer: the total of Content-Range
 * ("bytes A-B/N"), else a 200's Content-Length. False when the answer does
 * not say (a "*" total, a 206 without Content-Range, no length).
 */
bool smux__http_answer_size(const struct smux__http_resp *r, uint64_t *size);

/*
 * The bytes of a ranged GET's body the caller asked for. A server that
 * ignored the Range answers 200 with the whole object: the bytes before
 * the range are dropped and delivery stops after its length. What the
 * answer says it holds is checked against what was asked and what came:
 * a 206 for another range than asked (its Content-Range) and a body cut
 * short (a connection closed early on an answer without Content-Length:
 * libcurl reports success) are errors, never a short read handed on as
 * the content. A 206 that covers less of the range than the object has
 * (RFC 9110 allows it: CDNs and object stores cap range sizes) is kept,
 * and smux__http_range_rest asks for the rest.
 */
struct smux__http_range {
	uint64_t skip;	    /* bytes still to drop (a 200 to a Range) */
	uint64_t room;	    /* bytes still to deliver */
	uint64_t delivered; /* bytes delivered, by every answer */
	int64_t expect; /* bytes delivered once this answer is in; -1: unknown */
	const char *bad;    /* why the answer is not the range asked */
	bool stale;	    /* @bad: a follow-up of another version */
	bool partial;	    /* a 206: its Content-Range bounds its body */
	uint64_t body_left; /* bytes the 206 under way may still bring */
	uint64_t got_from, got_to; /* a 206's Content-Range, for @bad */
	/* a 206 that covered less: the rest of the range is [next, end) */
	uint64_t next, end;
	unsigned followups; /* follow-up requests made */
	unsigned trickles;  /* those that brought < SMUX__HTTP_RANGE_TRICKLE */
	/* the first answer's version, which every follow-up must have */
	char etag[SMUX__HTTP_HDR_MAX];
	char last_modified[SMUX__HTTP_HDR_MAX];
	uint64_t size; /* the object's size it said; with @sized */
	bool sized;
};

/* Follow-ups of one ranged GET that brought less than
 * SMUX__HTTP_RANGE_TRICKLE bytes each, at most: a server sending a byte an
 * answer must not keep a read going for hours, while one capping answers
 * at 1 MiB (a CDN) serves a 10 GiB read in 10240 of them. */
#define SMUX__HTTP_RANGE_FOLLOWUPS 1024
#define SMUX__HTTP_RANGE_TRICKLE   4096

/* Starts delivering @len bytes from @off of the answer @resp (its status
 * and headers are in). An answer that is not the range asked for is
 * marked bad: smux__http_range_write then refuses its bytes. */
void smux__http_range_start(struct smux__http_range *r,
			    const struct smux__http_resp *resp, uint64_t off,
			    uint64_t len);

/* Passes the part of @data (@len body bytes, in order) within the range to
 * @out. 0, the sink's negative errno, or -EPROTO for a bad answer. */
int smux__http_range_write(struct smux__http_range *r, const void *data,
			   size_t len, struct smux_sink *out);

/*
 * After the transfer: BAD_RESPONSE naming @backend and @key when the
 * answer was not the range asked for or delivered less than it said
 * (@started false: no body byte came, the range is started from @resp
 * here). 0 when the bytes delivered are the answer's part of the range
 * (smux__http_range_rest then fetches what it left).
 */
int smux__http_range_check(struct smux__http_range *r, bool started,
			   const struct smux__http_resp *resp, uint64_t off,
			   uint64_t len, const char *backend, const char *key,
			   struct smux_error *err);

/*
 * One follow-up GET of the backend's object: the request with
 * "Range: @range" ("bytes=A-B") and, when @if_match is not NULL,
 * "If-Match: @if_match", its body into @sink (which cannot be rewound:
 * a retry is only possible before its first byte), its status and
 * headers into the struct smux__http_resp given to
 * smux__http_range_rest (as smux__http_do fills it: in before the first
 * body byte). Returns what smux__http_do returned.
 */
typedef int (*smux__http_range_fetch_fn)(void *arg, const char *range,
					 const char *if_match,
					 struct smux_sink *sink,
					 struct smux_error *err);

/* The headers of a follow-up GET: "Range: @range" and, when @if_match is
 * not NULL, "If-Match: @if_match"; @list is the NULL-terminated array for
 * smux__http_req.headers. */
struct smux__http_range_hdrs {
	char range[96];
	char if_match[SMUX__HTTP_HDR_MAX + 16];
	const char *list[3];
};
void smux__http_range_hdrs(struct smux__http_range_hdrs *h, const char *range,
			   const char *if_match);

/*
 * After a successful smux__http_range_check: asks for the rest of a range
 * a 206 covered only part of, through @fetch (its answers land in
 * @resp), into @out, until the range (as far as the object goes) is in.
 * Every follow-up must be a 206 from where the bytes so far end, of the
 * first answer's version (ETag, Last-Modified, size; If-Match is sent
 * when it had a strong ETag), delivered whole, and at most
 * SMUX__HTTP_RANGE_FOLLOWUPS of them bring less than
 * SMUX__HTTP_RANGE_TRICKLE bytes. 0 when the range is in (at once when
 * nothing is left); BAD_RESPONSE, PRECONDITION_FAILED (another version),
 * LOCAL_IO_ERROR (@out failed) or @fetch's error otherwise, naming
 * @backend and @key.
 */
int smux__http_range_rest(struct smux__http_range *r,
			  smux__http_range_fetch_fn fetch, void *arg,
			  const struct smux__http_resp *resp,
			  struct smux_sink *out, const char *backend,
			  const char *key, struct smux_error *err);

#endif /* SMUX_BACKENDS_HTTP_CLIENT_H */
