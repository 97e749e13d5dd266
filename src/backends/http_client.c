// SPDX-License-Identifier: MIT
/*
 * http_client.c - the HTTP layer of the network backends (http_client.h):
 * a pool of curl easy handles, each paired with its own multi handle (the
 * multi keeps the connection cache, so a handle taken again reuses its
 * connection), one driver loop per attempt that polls at most
 * SMUX__HTTP_POLL_MS so cancellation is seen promptly, retries, and the
 * error mapping.
 *
 * Locks: h->lock protects only the idle-handle stack; no lock is held
 * while a transfer runs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "backends/http_client.h"

/* Longest a driver loop waits in curl_multi_poll before looking at the
 * call's cancel tokens and deadline again. */
#define SMUX__HTTP_POLL_MS 100

struct http_handle {
	CURL *easy;
	CURLM *multi;
};

struct smux__http {
	char *backend;
	char *ca_file;
	char *username;
	char *password;
	int64_t connect_timeout_ms;
	int64_t idle_timeout_ms;
	unsigned max_attempts;
	int64_t backoff_base_ms;
	int64_t backoff_cap_ms;
	bool insecure;
	pthread_mutex_t lock;
	struct http_handle *idle; /* protected by lock */
	unsigned n_idle;	  /* protected by lock */
	unsigned cap_idle;
	atomic_uint_fast64_t rng; /* xorshift state for the jitter */
};

/* One attempt's state, shared with the curl callbacks. */
struct xfer {
	struct smux__http *h;
	const struct smux_ctx *ctx;
	const struct smux__http_req *req;
	struct smux__http_resp *resp;
	uint64_t up_pos;  /* next body byte to send */
	int src_errno;	  /* the body source failed (positive errno) */
	int sink_errno;	  /* the sink refused bytes */
	bool too_big;	  /* the body passed req->max_body */
	bool header_bad;  /* on_header refused a header */
	bool idle_fired;  /* no byte moved for idle_timeout_ms */
	bool tls_refused; /* the server's certificate failed verification */
	enum smux_cancel_reason cancelled;
	int64_t last_move_ns;
	curl_off_t last_dl, last_ul;
	int64_t retry_after_ms; /* -1 when absent */
	bool deadline_bound;	/* CURLOPT_TIMEOUT_MS is the deadline */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

/*
 * OpenSSL first, without its exit handler: a worker stuck in a call is
 * left to finish it in the background (core/bulkhead_orphans.c), so at an
 * unmount one may still be inside curl and OpenSSL when the process exits,
 * and OpenSSL's handler would free its providers and tables under it (a
 * crash at the unmount of a mount probing an untrusted or silent TLS
 * server: test_http_exit.c). Nothing is lost by skipping it: the process
 * is ending, and what OpenSSL holds stays reachable from its globals. This
 * must be the process's first use of OpenSSL for the flag to count; the
 * network backends make their client before they hash or sign anything.
 */
static void global_init(void)
{
	if (!OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL)) {
		global_rc = CURLE_FAILED_INIT;
		return;
	}
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int smux__http_new(const struct smux__http_opts *opts, struct smux__http **out,
		   struct smux_error *err)
{
	const char *name = opts->backend ? opts->backend : "http";
	struct smux__http *h;
	uint64_t seed = 0;

	*out = NULL;
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "curl_global_init: %s",
				      curl_easy_strerror(global_rc));
	h = calloc(1, sizeof(*h));
	if (!h)
		goto out_nomem;
	h->backend = strdup(name);
	h->ca_file = dup_or_null(opts->ca_file);
	h->username = dup_or_null(opts->username);
	h->password = dup_or_null(opts->username ? opts->password : NULL);
	if (!h->backend || (opts->ca_file && !h->ca_file) ||
	    (opts->username && !h->username) ||
	    (opts->username && opts->password && !h->password))
		goto out_free;
	h->connect_timeout_ms =
		opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : 10000;
	h->idle_timeout_ms =
		opts->idle_timeout_ms > 0 ? opts->idle_timeout_ms : 30000;
	h->max_attempts = opts->max_attempts ? opts->max_attempts : 5;
	h->backoff_base_ms =
		opts->backoff_base_ms > 0 ? opts->backoff_base_ms : 100;
	h->backoff_cap_ms =
		opts->backoff_cap_ms > 0 ? opts->backoff_cap_ms : 10000;
	h->cap_idle = opts->max_idle_handles ? opts->max_idle_handles : 16;
	h->insecure = opts->insecure;
	h->idle = calloc(h->cap_idle, sizeof(*h->idle));
	if (!h->idle)
		goto out_free;
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed) || seed == 0)
		seed = (uint64_t)smux_now_ns() | 1;
	atomic_init(&h->rng, seed);
	pthread_mutex_init(&h->lock, NULL);
	*out = h;
	return 0;
out_free:
	smux__http_free(h);
out_nomem:
	return smux_error_set(err, SMUX_E_NO_MEMORY, name,
			      "out of memory creating the HTTP client");
}

static void handle_destroy(struct http_handle *hd)
{
	if (hd->multi)
		curl_multi_cleanup(hd->multi);
	if (hd->easy)
		curl_easy_cleanup(hd->easy);
}

void smux__http_free(struct smux__http *h)
{
	if (!h)
		return;
	if (h->idle) {
		for (unsigned i = 0; i < h->n_idle; i++)
			handle_destroy(&h->idle[i]);
		free(h->idle);
		pthread_mutex_destroy(&h->lock);
	}
	if (h->password) {
		/* not left behind in freed memory */
		explicit_bzero(h->password, strlen(h->password));
		free(h->password);
	}
	free(h->username);
	free(h->ca_file);
	free(h->backend);
	free(h);
}

/* A handle for this thread's call: the most recently used idle one (its
 * connection is the likeliest to be alive) or a new one. */
static int handle_take(struct smux__http *h, struct http_handle *out)
{
	pthread_mutex_lock(&h->lock);
	if (h->n_idle) {
		*out = h->idle[--h->n_idle];
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	pthread_mutex_unlock(&h->lock);
	out->easy = curl_easy_init();
	out->multi = curl_multi_init();
	if (!out->easy || !out->multi) {
		handle_destroy(out);
		return -ENOMEM;
	}
	/* one connection per handle is what the pool is for */
	curl_multi_setopt(out->multi, CURLMOPT_MAXCONNECTS, 2L);
	return 0;
}

static void handle_give(struct smux__http *h, struct http_handle *hd)
{
	curl_easy_reset(hd->easy); /* keeps the multi's connections */
	pthread_mutex_lock(&h->lock);
	if (h->n_idle < h->cap_idle) {
		h->idle[h->n_idle++] = *hd;
		pthread_mutex_unlock(&h->lock);
		return;
	}
	pthread_mutex_unlock(&h->lock);
	handle_destroy(hd);
}

/* ---- small parsers (every response byte is hostile) ---- */

static void trim(const char **s, size_t *len)
{
	while (*len && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*len)--;
	}
	while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t' ||
			(*s)[*len - 1] == '\r' || (*s)[*len - 1] == '\n'))
		(*len)--;
}

static void keep_value(char *dst, const char *v, size_t len)
{
	if (len >= SMUX__HTTP_HDR_MAX)
		len = SMUX__HTTP_HDR_MAX - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

/* Digits only, no sign, no overflow; -1 when not a number. */
static int64_t parse_u63(const char *v, size_t len)
{
	int64_t n = 0;

	if (len == 0 || len > 18)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (v[i] - '0');
	}
	return n;
}

int64_t smux__http_parse_date(const char *s)
{
	time_t t;

	if (!s || !*s)
		return -1;
	t = curl_getdate(s, NULL);
	if (t == (time_t)-1)
		return -1;
	return (int64_t)t * 1000000000LL;
}

/* Retry-After: delay-seconds or an HTTP date. */
static int64_t parse_retry_after(const char *v, size_t len)
{
	char buf[SMUX__HTTP_HDR_MAX];
	int64_t n = parse_u63(v, len), at;

	if (n >= 0)
		return n > 86400 ? 86400000 : n * 1000;
	keep_value(buf, v, len);
	at = smux__http_parse_date(buf);
	if (at < 0)
		return -1;
	n = (at - (int64_t)time(NULL) * 1000000000LL) / 1000000;
	return n < 0 ? 0 : n;
}

/* "HTTP/1.1 200 OK": the status, or -1 when the line is not one. */
static long parse_status_line(const char *line, size_t len)
{
	size_t i = 5;

	if (len < 12 || memcmp(line, "HTTP/", 5) != 0)
		return -1;
	while (i < len && line[i] != ' ')
		i++;
	if (i + 4 > len || line[i + 1] < '1' || line[i + 1] > '5' ||
	    line[i + 2] < '0' || line[i + 2] > '9' || line[i + 3] < '0' ||
	    line[i + 3] > '9')
		return -1;
	return (line[i + 1] - '0') * 100 + (line[i + 2] - '0') * 10 +
	       (line[i + 3] - '0');
}

static void resp_reset_headers(struct smux__http_resp *r)
{
	r->content_length = -1;
	r->etag[0] = r->last_modified[0] = r->content_range[0] = '\0';
	r->content_type[0] = r->location[0] = '\0';
}

static bool is_2xx(long status)
{
	return status >= 200 && status < 300;
}

/* ---- curl callbacks ---- */

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	struct smux__http_resp *r = x->resp;
	size_t len = size * n, nlen, vlen;
	const char *colon, *name = buf, *value;
	long st;

	if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
		st = parse_status_line(buf, len);
		if (st < 0) {
			x->header_bad = true;
			return 0;
		}
		r->status = st;
		resp_reset_headers(r);
		x->retry_after_ms = -1;
		return len;
	}
	colon = memchr(buf, ':', len);
	if (!colon) /* the empty line after the headers */
		return len;
	nlen = (size_t)(colon - buf);
	value = colon + 1;
	vlen = len - nlen - 1;
	trim(&name, &nlen);
	trim(&value, &vlen);
	if (r->status < 200) /* an interim response's headers */
		return len;
	if (nlen == 4 && strncasecmp(name, "ETag", 4) == 0)
		keep_value(r->etag, value, vlen);
	else if (nlen == 13 && strncasecmp(name, "Last-Modified", 13) == 0)
		keep_value(r->last_modified, value, vlen);
	else if (nlen == 13 && strncasecmp(name, "Content-Range", 13) == 0)
		keep_value(r->content_range, value, vlen);
	else if (nlen == 12 && strncasecmp(name, "Content-Type", 12) == 0)
		keep_value(r->content_type, value, vlen);
	else if (nlen == 8 && strncasecmp(name, "Location", 8) == 0)
		keep_value(r->location, value, vlen);
	else if (nlen == 14 && strncasecmp(name, "Content-Length", 14) == 0) {
		r->content_length = parse_u63(value, vlen);
		if (r->content_length < 0) {
			x->header_bad = true;
			return 0;
		}
	} else if (nlen == 11 && strncasecmp(name, "Retry-After", 11) == 0)
		x->retry_after_ms = parse_retry_after(value, vlen);
	if (x->req->on_header && x->req->on_header(x->req->header_arg, name,
						   nlen, value, vlen) < 0) {
		x->header_bad = true;
		return 0;
	}
	return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	struct smux__http_resp *r = x->resp;
	size_t len = size * n, room;
	int rc;

	if (!is_2xx(r->status)) {
		room = SMUX__HTTP_ERRBODY_MAX - r->errbody_len;
		if (len < room)
			room = len;
		memcpy(r->errbody + r->errbody_len, buf, room);
		r->errbody_len += room;
		r->errbody[r->errbody_len] = '\0';
		return len;
	}
	if (x->req->max_body && r->body_bytes + len > x->req->max_body) {
		x->too_big = true;
		return 0;
	}
	if (x->req->sink) {
		rc = smux_sink_write(x->req->sink, buf, len);
		if (rc < 0) {
			x->sink_errno = -rc;
			return 0;
		}
	}
	r->body_bytes += len;
	return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	long got;

	got = smux_source_read(x->req->body, x->up_pos, buf, size * n);
	if (got < 0) {
		x->src_errno = (int)-got;
		return CURL_READFUNC_ABORT;
	}
	x->up_pos += (uint64_t)got;
	return (size_t)got;
}

static int on_seek(void *arg, curl_off_t off, int origin)
{
	struct xfer *x = arg;

	if (origin != SEEK_SET || off < 0 ||
	    (uint64_t)off > x->req->body->length)
		return CURL_SEEKFUNC_CANTSEEK;
	x->up_pos = (uint64_t)off;
	return CURL_SEEKFUNC_OK;
}

/* Called at least every SMUX__HTTP_POLL_MS by the driver loop: stops the
 * transfer when the call is cancelled, its deadline passed, or nothing
 * moved for the idle timeout. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	struct xfer *x = arg;
	int64_t now = smux_now_ns();

	(void)dltotal;
	(void)ultotal;
	x->cancelled = smux_ctx_state(x->ctx);
	if (x->cancelled != SMUX_CANCEL_NONE)
		return 1;
	if (dlnow != x->last_dl || ulnow != x->last_ul) {
		x->last_dl = dlnow;
		x->last_ul = ulnow;
		x->last_move_ns = now;
	} else if (now - x->last_move_ns > x->h->idle_timeout_ms * 1000000LL) {
		x->idle_fired = true;
		return 1;
	}
	return 0;
}

/* ---- the error mapping ---- */

bool smux__http_status_retryable(long status)
{
	return status == 408 || status == 429 ||
	       (status >= 500 && status != 501 && status != 505);
}

int smux__http_status_error(struct smux_error *err, long status,
			    bool had_credentials, const char *backend,
			    const char *what)
{
	int rc;

	if (status < 100 || status > 999) /* not a status: garbage */
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, backend,
				      "%s: no valid HTTP status", what);
	rc = smux_error_from_http(err, (int)status, backend, what);
	if (status == 401 && had_credentials)
		rc = smux_error_wrap(err, SMUX_E_CREDENTIAL_EXPIRED, backend,
				     "%s: credentials rejected (HTTP 401)",
				     what);
	return rc;
}

/* Fills @err for a failed transfer; returns -errno. */
static int transfer_error(struct xfer *x, CURLcode cc, const char *errbuf,
			  struct smux_error *err)
{
	const char *b = x->h->backend, *what = x->req->what;
	const char *detail = errbuf[0] ? errbuf : curl_easy_strerror(cc);
	int rc;

	if (x->src_errno) {
		smux_error_set(err, SMUX_E_IO, b, "%s: reading the body: %s",
			       what, strerror(x->src_errno));
		return smux_error_make_local(err, x->src_errno);
	}
	if (x->sink_errno) {
		smux_error_set(err, SMUX_E_IO, b, "%s: storing the body: %s",
			       what, strerror(x->sink_errno));
		return smux_error_make_local(err, x->sink_errno);
	}
	/* curl's timer for the deadline may fire a hair before our clock
	 * agrees it passed: wait out the rest, it is the deadline */
	if (cc == CURLE_OPERATION_TIMEDOUT && x->deadline_bound &&
	    smux_ctx_remaining_ns(x->ctx) < SMUX__HTTP_POLL_MS * 1000000LL)
		smux_ctx_sleep(x->ctx, smux_ctx_remaining_ns(x->ctx), b, NULL);
	if (x->cancelled != SMUX_CANCEL_NONE ||
	    (cc == CURLE_OPERATION_TIMEDOUT &&
	     smux_ctx_state(x->ctx) != SMUX_CANCEL_NONE)) {
		rc = smux_ctx_check(x->ctx, b, err);
		if (rc < 0)
			return rc;
		/* fired, then... a deadline never un-passes; be safe */
		return smux_error_set(err, SMUX_E_BACKEND_ABORTED, b, "%s",
				      what);
	}
	if (x->idle_fired) {
		(void)smux_error_set(err, SMUX_E_CONNECTION, b,
				     "%s: nothing received or sent for %lld ms",
				     what, (long long)x->h->idle_timeout_ms);
		err->e.sys_errno = ETIMEDOUT;
		return -ETIMEDOUT;
	}
	if (x->too_big)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, b,
				      "%s: response body over %llu bytes", what,
				      (unsigned long long)x->req->max_body);
	if (x->header_bad)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, b,
				      "%s: malformed response header", what);
	switch (cc) {
	case CURLE_OUT_OF_MEMORY:
		return smux_error_set(err, SMUX_E_NO_MEMORY, b, "%s: %s", what,
				      detail);
	case CURLE_UNSUPPORTED_PROTOCOL:
		/* also what curl says of an answer that is not HTTP at all
		 * (no status line: "HTTP/0.9 not allowed") */
		if (strncasecmp(x->req->url, "http://", 7) == 0 ||
		    strncasecmp(x->req->url, "https://", 8) == 0)
			return smux_error_set(err, SMUX_E_BAD_RESPONSE, b,
					      "%s: %s", what, detail);
		/* fall through */
	case CURLE_URL_MALFORMAT:
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b, "%s: %s",
				      what, detail);
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_PARTIAL_FILE:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_TOO_MANY_REDIRECTS:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_RANGE_ERROR:
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, b, "%s: %s",
				      what, detail);
	case CURLE_OPERATION_TIMEDOUT:
		(void)smux_error_set(err, SMUX_E_CONNECTION, b, "%s: %s", what,
				     detail);
		err->e.sys_errno = ETIMEDOUT;
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		(void)smux_error_set(err, SMUX_E_CONNECTION, b, "%s: %s", what,
				     detail);
		err->e.sys_errno = ECONNREFUSED;
		return -ECONNREFUSED;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		/* the member cannot be used as configured (its requests fail
		 * over; it is probed like a down one), and asking again gets
		 * the same certificate: not retried */
		x->tls_refused = true;
		return smux_error_set(err, SMUX_E_CONNECTION, b,
				      "%s: TLS: %s (the server's certificate "
				      "is not trusted: ca_file?)",
				      what, detail);
	default: /* resolve, send, recv, TLS, got nothing: the link */
		return smux_error_set(err, SMUX_E_CONNECTION, b, "%s: %s", what,
				      detail);
	}
}

/* ---- one attempt ---- */

static struct curl_slist *build_headers(const struct smux__http_req *req,
					bool *oom)
{
	struct curl_slist *l = NULL, *t;

	*oom = false;
	/* no "Expect: 100-continue" round trip before a body */
	t = curl_slist_append(l, "Expect:");
	if (!t)
		goto out_oom;
	l = t;
	for (const char *const *p = req->headers; p && *p; p++) {
		t = curl_slist_append(l, *p);
		if (!t)
			goto out_oom;
		l = t;
	}
	return l;
out_oom:
	curl_slist_free_all(l);
	*oom = true;
	return NULL;
}

static void set_options(struct smux__http *h, CURL *c, struct xfer *x,
			struct curl_slist *hdrs, char *errbuf)
{
	const struct smux__http_req *req = x->req;
	int64_t left_ms = smux_ctx_remaining_ns(x->ctx) / 1000000;
	int64_t conn_ms = h->connect_timeout_ms;

	curl_easy_setopt(c, CURLOPT_URL, req->url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	/* keys are paths as given: never squash "." or ".." segments */
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024);
	curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 256L * 1024);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
	if (left_ms < INT64_MAX / 1000000 - 1) {
		/* the deadline bounds the whole attempt, connect included */
		if (left_ms < 1)
			left_ms = 1;
		if (conn_ms > left_ms)
			conn_ms = left_ms;
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)left_ms);
		x->deadline_bound = true;
	}
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)conn_ms);
	if (h->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
	if (h->insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (h->username) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, h->username);
		curl_easy_setopt(c, CURLOPT_PASSWORD,
				 h->password ? h->password : "");
	}
	if (strcmp(req->method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (req->body) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)req->body->length);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
		if (strcmp(req->method, "PUT") != 0)
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
	} else if (strcmp(req->method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
	}
}

/* Drives one attempt on @hd through its multi handle. */
static CURLcode drive(struct http_handle *hd)
{
	CURLcode result = CURLE_OK;
	CURLMsg *msg;
	int running = 1, left;
	CURLMcode mc;

	if (curl_multi_add_handle(hd->multi, hd->easy) != CURLM_OK)
		return CURLE_OUT_OF_MEMORY;
	while (running) {
		mc = curl_multi_perform(hd->multi, &running);
		if (mc != CURLM_OK) {
			result = CURLE_SEND_ERROR;
			break;
		}
		if (!running)
			break;
		mc = curl_multi_poll(hd->multi, NULL, 0, SMUX__HTTP_POLL_MS,
				     NULL);
		if (mc != CURLM_OK) {
			result = CURLE_RECV_ERROR;
			break;
		}
	}
	while ((msg = curl_multi_info_read(hd->multi, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == hd->easy)
			result = msg->data.result;
	curl_multi_remove_handle(hd->multi, hd->easy);
	return result;
}

/* Full jitter: a uniform wait in [0, min(cap, base * 2^n)]. */
static int64_t backoff_ms(struct smux__http *h, unsigned attempt)
{
	uint64_t s = atomic_load(&h->rng), n;
	int64_t top = h->backoff_base_ms;

	do {
		n = s;
		n ^= n << 13;
		n ^= n >> 7;
		n ^= n << 17;
	} while (!atomic_compare_exchange_weak(&h->rng, &s, n));
	for (unsigned i = 1; i < attempt && top < h->backoff_cap_ms; i++)
		top *= 2;
	if (top > h->backoff_cap_ms)
		top = h->backoff_cap_ms;
	return (int64_t)(n % (uint64_t)(top + 1));
}

/* Whether the failure of attempt @x (rc, err filled) may be retried. */
static bool retryable(const struct xfer *x, const struct smux_error *err)
{
	if (x->req->no_retry || (x->req->body && x->req->body_once))
		return false;
	if (x->src_errno || x->sink_errno || x->tls_refused ||
	    x->cancelled != SMUX_CANCEL_NONE)
		return false;
	if (err->e.code == SMUX_E_HTTP)
		return smux__http_status_retryable(err->e.http_status);
	return err->e.code == SMUX_E_CONNECTION ||
	       err->e.code == SMUX_E_BAD_RESPONSE;
}

static int attempt(struct smux__http *h, const struct smux_ctx *ctx,
		   const struct smux__http_req *req,
		   struct smux__http_resp *resp, struct xfer *x,
		   struct smux_error *err)
{
	char errbuf[CURL_ERROR_SIZE];
	struct curl_slist *hdrs;
	struct http_handle hd;
	CURLcode cc;
	bool oom;
	int rc;

	memset(x, 0, sizeof(*x));
	x->h = h;
	x->ctx = ctx;
	x->req = req;
	x->resp = resp;
	x->retry_after_ms = -1;
	x->last_move_ns = smux_now_ns();
	resp->status = 0;
	resp->errbody_len = 0;
	resp->errbody[0] = '\0';
	resp->body_bytes = 0;
	resp_reset_headers(resp);
	errbuf[0] = '\0';
	hdrs = build_headers(req, &oom);
	if (oom || handle_take(h, &hd) < 0) {
		curl_slist_free_all(hdrs);
		return smux_error_set(err, SMUX_E_NO_MEMORY, h->backend,
				      "%s: out of memory", req->what);
	}
	set_options(h, hd.easy, x, hdrs, errbuf);
	cc = drive(&hd);
	curl_slist_free_all(hdrs);
	handle_give(h, &hd);
	if (cc != CURLE_OK)
		return transfer_error(x, cc, errbuf, err);
	if (!is_2xx(resp->status)) {
		rc = smux__http_status_error(err, resp->status,
					     h->username != NULL, h->backend,
					     req->what);
		return rc;
	}
	/* a server that answered before it took the whole body (and
	 * closed): libcurl ends the transfer with CURLE_OK, and the upload
	 * was acknowledged cut short */
	if (req->body && x->up_pos < req->body->length)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, h->backend,
				      "%s: answered %ld before the whole body "
				      "was sent (%llu of %llu bytes)",
				      req->what, resp->status,
				      (unsigned long long)x->up_pos,
				      (unsigned long long)req->body->length);
	return 0;
}

int smux__http_do(struct smux__http *h, const struct smux_ctx *ctx,
		  const struct smux__http_req *in, struct smux__http_resp *resp,
		  struct smux_error *err)
{
	struct smux__http_req req = *in;
	uint64_t sink_start = in->sink ? in->sink->written : 0;
	struct smux_error scratch;
	struct xfer x;
	int64_t wait_ms, left_ms;
	unsigned n;
	int rc;

	if (!err)
		err = &scratch;
	if (!req.what)
		req.what = req.method;
	for (n = 1;; n++) {
		rc = smux_ctx_check(ctx, h->backend, err);
		if (rc < 0)
			break;
		if (req.prepare) {
			rc = req.prepare(req.prepare_arg, &req.headers, err);
			if (rc < 0)
				break;
		}
		rc = attempt(h, ctx, &req, resp, &x, err);
		resp->attempts = n;
		if (rc == 0)
			break;
		if (n >= h->max_attempts || !retryable(&x, err))
			break;
		/* bytes already in the sink must go before a retry */
		if (req.sink && req.sink->written > 0) {
			if (sink_start > 0 || smux_sink_rewind(req.sink) < 0)
				break;
		}
		wait_ms = backoff_ms(h, n);
		if ((resp->status == 429 || resp->status == 503) &&
		    x.retry_after_ms >= 0) {
			left_ms = x.retry_after_ms > h->backoff_cap_ms
					  ? h->backoff_cap_ms
					  : x.retry_after_ms;
			if (left_ms > wait_ms)
				wait_ms = left_ms;
		}
		/* a wait that would end past the deadline is not worth it:
		 * report the error we have */
		if (wait_ms * 1000000LL >= smux_ctx_remaining_ns(ctx))
			break;
		if (smux_ctx_sleep(ctx, wait_ms * 1000000LL, h->backend, err) <
		    0) {
			rc = -err->e.sys_errno;
			break;
		}
	}
	err->e.attempts = n;
	return rc;
}

/* ---- escaping ---- */

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

long smux__http_escape(const char *in, size_t len, bool keep_slash, char *out,
		       size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (unreserved(c) || (keep_slash && c == '/')) {
			if (o + 1 >= cap)
				return -ENAMETOOLONG;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= cap)
				return -ENAMETOOLONG;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (o >= cap)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return (long)o;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *smux__http_key_url(const char *base, const char *key, bool slash)
{
	size_t kl = strlen(key), bl = strlen(base);
	size_t cap = bl + 3 * kl + 2;
	char *u = malloc(cap);
	long n;

	if (!u)
		return NULL;
	memcpy(u, base, bl);
	n = smux__http_escape(key, kl, true, u + bl, cap - bl - 1);
	if (n < 0) {
		free(u);
		return NULL;
	}
	if (slash && (kl == 0 || key[kl - 1] != '/')) {
		u[bl + (size_t)n] = '/';
		u[bl + (size_t)n + 1] = '\0';
	}
	return u;
}

long smux__http_unescape(const char *in, size_t len, char *out, size_t cap)
{
	size_t o = 0;
	int hi, lo;

	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (c == '%') {
			if (i + 2 >= len)
				return -EINVAL;
			hi = hexval(in[i + 1]);
			lo = hexval(in[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi * 16 + lo);
			i += 2;
		}
		if (c == '\0')
			return -EINVAL;
		if (o + 1 >= cap)
			return -ENAMETOOLONG;
		out[o++] = c;
	}
	if (o >= cap)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return (long)o;
}
