// SPDX-License-Identifier: MIT
/*
 * backends/s3_sign.c - AWS Signature Version 4 (s3_sign.h).
 *
 * Owns: building the canonical request and the string to sign, deriving
 * and caching the signing key, and formatting the Authorization header or
 * the presigned query. Uses OpenSSL's HMAC and EVP SHA-256 only; nothing
 * here does I/O. The secret never leaves the signer except as the HMAC key.
 *
 * The rules follow the AWS SigV4 documentation for S3:
 *  - canonical URI: every byte of the path outside the unreserved set and
 *    '/' encoded once (%XX upper-case); no dot-segment normalisation;
 *  - canonical query: names and values encoded ('/' too), sorted by name
 *    then value, a bare name signed as "name=";
 *  - canonical headers: names lower-cased, values trimmed with inner runs
 *    of blanks collapsed, repeated names joined with ',', sorted by name;
 *  - signing key: HMAC chain "AWS4"+secret, date, region, service,
 *    "aws4_request"; cached for the last (date, region, service).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "backends/s3_sign.h"

#define S3S_ALGO       "AWS4-HMAC-SHA256"
#define S3S_MAX_ITEMS  256 /* query parameters or headers in one request */
#define S3S_NAME_MAX   128 /* longest header name */
#define S3S_REGION_MAX 64

/* A growing string; on allocation failure it stays failed (oom). */
struct s3s_buf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void buf_add_mem(struct s3s_buf *b, const char *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->oom = true;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void buf_add(struct s3s_buf *b, const char *s)
{
	buf_add_mem(b, s, strlen(s));
}

static void buf_addc(struct s3s_buf *b, char c)
{
	buf_add_mem(b, &c, 1);
}

static bool is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

static void buf_add_encoded(struct s3s_buf *b, const char *in, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (is_unreserved(*p) || (keep_slash && *p == '/')) {
			buf_addc(b, (char)*p);
		} else {
			char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
			buf_add_mem(b, e, 3);
		}
	}
}

/* Moves the buffer's string out (NULL after oom); the buffer is empty. */
static char *buf_take(struct s3s_buf *b)
{
	char *s = b->oom ? NULL : b->s;
	if (!s && !b->oom)
		s = strdup("");
	if (b->oom)
		free(b->s);
	memset(b, 0, sizeof(*b));
	return s;
}

char *smux__s3_uri_encode(const char *in, bool keep_slash)
{
	struct s3s_buf b = {0};
	buf_add_encoded(&b, in ? in : "", keep_slash);
	return buf_take(&b);
}

static void to_hex(const unsigned char *md, size_t n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * n] = '\0';
}

void smux__s3_sha256_hex(const void *data, size_t len, char hex[SMUX_S3_HEX256])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != 32) {
		/* EVP_Digest of SHA-256 cannot fail short of a broken
		 * library; an impossible hash makes the signature fail. */
		memset(hex, '0', 64);
		hex[64] = '\0';
		return;
	}
	to_hex(md, 32, hex);
}

static void hmac256(const void *key, size_t klen, const char *msg,
		    unsigned char out[32])
{
	unsigned int olen = 32;
	if (!HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
		  strlen(msg), out, &olen))
		memset(out, 0, 32);
}

/* ---- credentials ---- */

void smux__s3_creds_release(struct smux_s3_creds *c)
{
	if (!c)
		return;
	char **fields[] = {&c->access_key, &c->secret_key, &c->session_token};
	for (size_t i = 0; i < 3; i++) {
		if (*fields[i]) {
			OPENSSL_cleanse(*fields[i], strlen(*fields[i]));
			free(*fields[i]);
			*fields[i] = NULL;
		}
	}
}

static bool printable_ascii(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return false;
	return true;
}

static int creds_copy(const struct smux_s3_creds *in, struct smux_s3_creds *out,
		      struct smux_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!in || !in->access_key || !in->secret_key || !*in->access_key ||
	    !*in->secret_key)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "s3 credentials: access key id or "
				      "secret key missing");
	if (strlen(in->access_key) >= SMUX_S3_KEY_MAX ||
	    strlen(in->secret_key) >= SMUX_S3_KEY_MAX ||
	    (in->session_token &&
	     strlen(in->session_token) >= SMUX_S3_TOKEN_MAX))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "s3 credentials: a value is too long");
	/* Credentials go into headers: no blanks or control bytes. */
	if (!printable_ascii(in->access_key) ||
	    !printable_ascii(in->secret_key) ||
	    (in->session_token && !printable_ascii(in->session_token)))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "s3 credentials: a value holds blanks "
				      "or control characters");
	out->access_key = strdup(in->access_key);
	out->secret_key = strdup(in->secret_key);
	if (in->session_token && *in->session_token)
		out->session_token = strdup(in->session_token);
	if (!out->access_key || !out->secret_key ||
	    (in->session_token && *in->session_token && !out->session_token)) {
		smux__s3_creds_release(out);
		return smux_error_set(err, SMUX_E_NO_MEMORY, NULL, NULL);
	}
	return 0;
}

/* ---- the signer ---- */

int smux__s3_signer_init(struct smux_s3_signer *s,
			 const struct smux_s3_creds *creds,
			 struct smux_error *err)
{
	memset(s, 0, sizeof(*s));
	int rc = creds_copy(creds, &s->creds, err);
	if (rc)
		return rc;
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

void smux__s3_signer_release(struct smux_s3_signer *s)
{
	if (!s)
		return;
	smux__s3_creds_release(&s->creds);
	OPENSSL_cleanse(s->key, sizeof(s->key));
	pthread_mutex_destroy(&s->lock);
}

int smux__s3_signer_set_creds(struct smux_s3_signer *s,
			      const struct smux_s3_creds *creds,
			      struct smux_error *err)
{
	struct smux_s3_creds fresh;
	int rc = creds_copy(creds, &fresh, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&s->lock);
	struct smux_s3_creds old = s->creds;
	s->creds = fresh;
	s->key_scope[0] = '\0';
	OPENSSL_cleanse(s->key, sizeof(s->key));
	pthread_mutex_unlock(&s->lock);
	smux__s3_creds_release(&old);
	return 0;
}

void smux__s3_signed_release(struct smux_s3_signed *s)
{
	if (!s)
		return;
	free(s->authorization);
	free(s->url_path);
	free(s->url_query);
	free(s->canonical_request);
	free(s->string_to_sign);
	if (s->security_token) {
		OPENSSL_cleanse(s->security_token, strlen(s->security_token));
		free(s->security_token);
	}
	memset(s, 0, sizeof(*s));
}

/* The signing key for @scope ("date/region/service"), from the cache or
 * derived; copies the access key id and token out under the same lock so
 * one request never mixes two credential sets. */
static int signer_key(struct smux_s3_signer *s, const char *date,
		      const char *region, const char *service,
		      unsigned char key[32], char *akid, size_t akid_size,
		      char **token)
{
	char scope[sizeof(s->key_scope)];
	snprintf(scope, sizeof(scope), "%s/%s/%s", date, region, service);
	pthread_mutex_lock(&s->lock);
	if (strcmp(scope, s->key_scope) != 0) {
		unsigned char k[32];
		char secret[SMUX_S3_KEY_MAX + 8];
		snprintf(secret, sizeof(secret), "AWS4%s", s->creds.secret_key);
		hmac256(secret, strlen(secret), date, k);
		OPENSSL_cleanse(secret, sizeof(secret));
		hmac256(k, 32, region, k);
		hmac256(k, 32, service, k);
		hmac256(k, 32, "aws4_request", s->key);
		OPENSSL_cleanse(k, sizeof(k));
		snprintf(s->key_scope, sizeof(s->key_scope), "%s", scope);
		s->key_derivations++;
	}
	memcpy(key, s->key, 32);
	snprintf(akid, akid_size, "%s", s->creds.access_key);
	*token = s->creds.session_token ? strdup(s->creds.session_token) : NULL;
	bool oom = s->creds.session_token && !*token;
	pthread_mutex_unlock(&s->lock);
	return oom ? -ENOMEM : 0;
}

/* One item of a sorted list: the encoded (query) or lower-cased (header)
 * name and the value to sign, plus the input position for stable order. */
struct s3s_item {
	char *name;
	char *value;
	size_t pos;
};

static int item_cmp(const void *a, const void *b)
{
	const struct s3s_item *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	c = strcmp(x->value, y->value);
	if (c)
		return c;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static void items_free(struct s3s_item *it, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(it[i].name);
		free(it[i].value);
	}
	free(it);
}

/* Header value as signed: leading/trailing blanks dropped, inner runs of
 * blanks collapsed to one space. NULL when out of memory. */
static char *trim_value(const char *v)
{
	struct s3s_buf b = {0};
	bool space = false;
	if (!v)
		v = "";
	for (const char *p = v; *p; p++) {
		if (*p == ' ' || *p == '\t') {
			space = true;
			continue;
		}
		if (space && b.len)
			buf_addc(&b, ' ');
		space = false;
		buf_addc(&b, *p);
	}
	return buf_take(&b);
}

static bool header_name_ok(const char *n)
{
	size_t len = strlen(n);
	if (!len || len >= S3S_NAME_MAX)
		return false;
	for (const unsigned char *p = (const unsigned char *)n; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f ||
		    strchr("()<>@,;:\\\"/[]?={}", *p))
			return false;
	return true;
}

static bool header_value_ok(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p == '\r' || *p == '\n' || (*p < 0x20 && *p != '\t') ||
		    *p == 0x7f)
			return false;
	return true;
}

static bool reserved_header(const char *lower)
{
	static const char *const names[] = {
		"host", "x-amz-date", "x-amz-content-sha256",
		"x-amz-security-token", "authorization"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(lower, names[i]))
			return true;
	return false;
}

static bool payload_hash_ok(const char *h)
{
	if (!strcmp(h, SMUX_S3_UNSIGNED_PAYLOAD))
		return true;
	if (strlen(h) != 64)
		return false;
	for (const char *p = h; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static bool token_ok(const char *s, size_t max, const char *extra)
{
	size_t len = s ? strlen(s) : 0;
	if (!len || len > max)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || strchr(extra, *p)))
			return false;
	return true;
}

/* Everything a signature is computed from, built once per request. */
struct s3s_parts {
	const char *service;
	char date[9];
	char scope[160];
	struct s3s_item *hdrs; /* sorted, lower-case names, joined values */
	size_t nhdrs;
	char *signed_headers; /* "host;range;x-amz-date" */
};

static int bad(struct smux_error *err, const char *what)
{
	return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
			      "s3 signer: %s", what);
}

/* Validates @req, fills the fixed fields of @out and @p. */
static int check_request(const struct smux_s3_request *req, bool presign,
			 struct s3s_parts *p, struct smux_s3_signed *out,
			 struct smux_error *err)
{
	p->service = req->service ? req->service : "s3";
	if (!token_ok(req->method, 16, ""))
		return bad(err, "bad method");
	if (!req->host || !*req->host || !header_value_ok(req->host) ||
	    strlen(req->host) > 255 || strpbrk(req->host, " \t/"))
		return bad(err, "bad host");
	if (!token_ok(req->region, S3S_REGION_MAX, "-_") ||
	    !token_ok(p->service, 32, "-_"))
		return bad(err, "bad region or service");
	if (req->path && *req->path && req->path[0] != '/')
		return bad(err, "path does not begin with '/'");
	if (req->nquery > S3S_MAX_ITEMS || req->nheaders > S3S_MAX_ITEMS)
		return bad(err, "too many query parameters or headers");
	const char *ph = req->payload_hash;
	if (!ph)
		ph = presign ? SMUX_S3_UNSIGNED_PAYLOAD : SMUX_S3_EMPTY_SHA256;
	if (!payload_hash_ok(ph))
		return bad(err, "bad payload hash");
	snprintf(out->payload_hash, sizeof(out->payload_hash), "%s", ph);
	struct tm tm;
	if (!gmtime_r(&req->now, &tm) || tm.tm_year + 1900 < 1970 ||
	    tm.tm_year + 1900 > 9999)
		return bad(err, "bad time");
	strftime(out->amz_date, sizeof(out->amz_date), "%Y%m%dT%H%M%SZ", &tm);
	memcpy(p->date, out->amz_date, 8);
	p->date[8] = '\0';
	snprintf(p->scope, sizeof(p->scope), "%s/%s/%s/aws4_request", p->date,
		 req->region, p->service);
	return 0;
}

static int add_item(struct s3s_item *it, size_t *n, const char *name,
		    const char *value)
{
	it[*n].name = strdup(name);
	it[*n].value = trim_value(value);
	it[*n].pos = *n;
	(*n)++;
	return it[*n - 1].name && it[*n - 1].value ? 0 : -ENOMEM;
}

/* The sorted canonical headers: the caller's plus host, x-amz-date,
 * x-amz-content-sha256 and x-amz-security-token as the mode asks. */
static int build_headers(const struct smux_s3_request *req, bool presign,
			 const struct smux_s3_signed *out, const char *token,
			 struct s3s_parts *p, struct smux_error *err)
{
	struct s3s_item *it = calloc(req->nheaders + 4, sizeof(*it));
	size_t n = 0;
	int rc = 0;
	if (!it)
		return smux_error_set(err, SMUX_E_NO_MEMORY, NULL, NULL);
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct smux_s3_kv *h = &req->headers[i];
		char lower[S3S_NAME_MAX];
		if (!h->name || !header_name_ok(h->name)) {
			rc = bad(err, "bad header name");
			goto out_free;
		}
		if (!h->value || !header_value_ok(h->value)) {
			rc = bad(err, "bad header value");
			goto out_free;
		}
		size_t k = 0;
		for (; h->name[k]; k++)
			lower[k] =
				(char)((h->name[k] >= 'A' && h->name[k] <= 'Z')
					       ? h->name[k] + 32
					       : h->name[k]);
		lower[k] = '\0';
		if (reserved_header(lower)) {
			rc = bad(err, "a header the signer sets was passed");
			goto out_free;
		}
		if (add_item(it, &n, lower, h->value))
			goto out_oom;
	}
	if (add_item(it, &n, "host", req->host))
		goto out_oom;
	if (!presign) {
		if (add_item(it, &n, "x-amz-date", out->amz_date))
			goto out_oom;
		if (!req->no_content_sha256 &&
		    add_item(it, &n, "x-amz-content-sha256", out->payload_hash))
			goto out_oom;
		if (token && add_item(it, &n, "x-amz-security-token", token))
			goto out_oom;
	}
	/* Sort by name keeping the input order of repeated names. */
	for (size_t i = 0; i < n; i++) {
		free(it[i].value);
		it[i].value = strdup("");
		if (!it[i].value)
			goto out_oom;
	}
	qsort(it, n, sizeof(*it), item_cmp);
	/* Values again, now joined per name in input order (pos). */
	{
		const struct smux_s3_kv *src = req->headers;
		for (size_t i = 0; i < n; i++) {
			free(it[i].value);
			it[i].value = NULL;
			const char *v;
			if (it[i].pos < req->nheaders)
				v = src[it[i].pos].value;
			else if (!strcmp(it[i].name, "host"))
				v = req->host;
			else if (!strcmp(it[i].name, "x-amz-date"))
				v = out->amz_date;
			else if (!strcmp(it[i].name, "x-amz-content-sha256"))
				v = out->payload_hash;
			else
				v = token;
			it[i].value = trim_value(v);
			if (!it[i].value)
				goto out_oom;
		}
	}
	/* Merge repeated names (adjacent after the sort). */
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && !strcmp(it[m - 1].name, it[i].name)) {
			struct s3s_buf b = {0};
			buf_add(&b, it[m - 1].value);
			buf_addc(&b, ',');
			buf_add(&b, it[i].value);
			char *joined = buf_take(&b);
			if (!joined)
				goto out_oom;
			free(it[m - 1].value);
			it[m - 1].value = joined;
			free(it[i].name);
			free(it[i].value);
			continue;
		}
		it[m++] = it[i];
	}
	n = m;
	struct s3s_buf sh = {0};
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_addc(&sh, ';');
		buf_add(&sh, it[i].name);
	}
	p->signed_headers = buf_take(&sh);
	if (!p->signed_headers)
		goto out_oom;
	p->hdrs = it;
	p->nhdrs = n;
	return 0;
out_oom:
	rc = smux_error_set(err, SMUX_E_NO_MEMORY, NULL, NULL);
out_free:
	items_free(it, n);
	return rc;
}

/* The canonical (= URL) query: encoded, sorted, "name=value&...". Bare
 * names sign as "name=" and go into the URL as "name". */
static int build_query(const struct smux_s3_kv *q, size_t nq, char **canon,
		       char **url)
{
	struct s3s_item *it = calloc(nq ? nq : 1, sizeof(*it));
	int rc = -ENOMEM;
	size_t n = 0;
	if (!it)
		return -ENOMEM;
	for (; n < nq; n++) {
		if (!q[n].name)
			break;
		it[n].name = smux__s3_uri_encode(q[n].name, false);
		/* a bare name sorts and signs like an empty value; pos
		 * remembers which ones were bare (odd) */
		it[n].value = smux__s3_uri_encode(q[n].value ? q[n].value : "",
						  false);
		it[n].pos = 2 * n + (q[n].value ? 0 : 1);
		if (!it[n].name || !it[n].value) {
			n++;
			goto out_free;
		}
	}
	if (n != nq) {
		rc = -EINVAL;
		goto out_free;
	}
	qsort(it, n, sizeof(*it), item_cmp);
	struct s3s_buf c = {0}, u = {0};
	for (size_t i = 0; i < n; i++) {
		if (i) {
			buf_addc(&c, '&');
			buf_addc(&u, '&');
		}
		buf_add(&c, it[i].name);
		buf_addc(&c, '=');
		buf_add(&c, it[i].value);
		buf_add(&u, it[i].name);
		if (!(it[i].pos & 1)) {
			buf_addc(&u, '=');
			buf_add(&u, it[i].value);
		}
	}
	*canon = buf_take(&c);
	*url = buf_take(&u);
	rc = (*canon && *url) ? 0 : -ENOMEM;
out_free:
	items_free(it, n);
	return rc;
}

static void parts_release(struct s3s_parts *p)
{
	items_free(p->hdrs, p->nhdrs);
	free(p->signed_headers);
	memset(p, 0, sizeof(*p));
}

/* Shared by sign and presign: everything from the canonical request on. */
static int sign_common(struct smux_s3_signer *s,
		       const struct smux_s3_request *req, bool presign,
		       unsigned expires, struct smux_s3_signed *out,
		       struct smux_error *err)
{
	struct s3s_parts p = {0};
	unsigned char key[32], sig[32];
	char akid[SMUX_S3_KEY_MAX];
	char *token = NULL;
	char *canon_query = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = check_request(req, presign, &p, out, err);
	if (rc)
		return rc;
	if (presign && (expires < 1 || expires > SMUX_S3_PRESIGN_MAX))
		return bad(err, "presign expiry out of range");
	rc = signer_key(s, p.date, req->region, p.service, key, akid,
			sizeof(akid), &token);
	if (rc)
		goto out_oom;
	rc = build_headers(req, presign, out, token, &p, err);
	if (rc)
		goto out;

	/* The query, with the presigning parameters for presign. */
	struct smux_s3_kv *q = calloc(req->nquery + 6, sizeof(*q));
	if (!q)
		goto out_oom;
	size_t nq = 0;
	for (size_t i = 0; i < req->nquery; i++)
		q[nq++] = req->query[i];
	char cred[SMUX_S3_KEY_MAX + 200], exp[16];
	if (presign) {
		snprintf(cred, sizeof(cred), "%s/%s", akid, p.scope);
		snprintf(exp, sizeof(exp), "%u", expires);
		q[nq++] = (struct smux_s3_kv){"X-Amz-Algorithm", S3S_ALGO};
		q[nq++] = (struct smux_s3_kv){"X-Amz-Credential", cred};
		q[nq++] = (struct smux_s3_kv){"X-Amz-Date", out->amz_date};
		q[nq++] = (struct smux_s3_kv){"X-Amz-Expires", exp};
		q[nq++] = (struct smux_s3_kv){"X-Amz-SignedHeaders",
					      p.signed_headers};
		if (token)
			q[nq++] = (struct smux_s3_kv){"X-Amz-Security-Token",
						      token};
	}
	rc = build_query(q, nq, &canon_query, &out->url_query);
	free(q);
	if (rc == -EINVAL) {
		rc = bad(err, "query parameter without a name");
		goto out;
	}
	if (rc)
		goto out_oom;
	out->url_path = smux__s3_uri_encode(
		req->path && *req->path ? req->path : "/", true);
	if (!out->url_path)
		goto out_oom;

	struct s3s_buf cr = {0};
	buf_add(&cr, req->method);
	buf_addc(&cr, '\n');
	buf_add(&cr, out->url_path);
	buf_addc(&cr, '\n');
	buf_add(&cr, canon_query);
	buf_addc(&cr, '\n');
	for (size_t i = 0; i < p.nhdrs; i++) {
		buf_add(&cr, p.hdrs[i].name);
		buf_addc(&cr, ':');
		buf_add(&cr, p.hdrs[i].value);
		buf_addc(&cr, '\n');
	}
	buf_addc(&cr, '\n');
	buf_add(&cr, p.signed_headers);
	buf_addc(&cr, '\n');
	buf_add(&cr, out->payload_hash);
	out->canonical_request = buf_take(&cr);
	if (!out->canonical_request)
		goto out_oom;

	char crhash[SMUX_S3_HEX256];
	smux__s3_sha256_hex(out->canonical_request,
			    strlen(out->canonical_request), crhash);
	struct s3s_buf sts = {0};
	buf_add(&sts, S3S_ALGO "\n");
	buf_add(&sts, out->amz_date);
	buf_addc(&sts, '\n');
	buf_add(&sts, p.scope);
	buf_addc(&sts, '\n');
	buf_add(&sts, crhash);
	out->string_to_sign = buf_take(&sts);
	if (!out->string_to_sign)
		goto out_oom;
	hmac256(key, 32, out->string_to_sign, sig);
	to_hex(sig, 32, out->signature);

	if (presign) {
		struct s3s_buf u = {0};
		buf_add(&u, out->url_query);
		buf_add(&u, "&X-Amz-Signature=");
		buf_add(&u, out->signature);
		free(out->url_query);
		out->url_query = buf_take(&u);
		if (!out->url_query)
			goto out_oom;
	} else {
		struct s3s_buf a = {0};
		buf_add(&a, S3S_ALGO " Credential=");
		buf_add(&a, akid);
		buf_addc(&a, '/');
		buf_add(&a, p.scope);
		buf_add(&a, ",SignedHeaders=");
		buf_add(&a, p.signed_headers);
		buf_add(&a, ",Signature=");
		buf_add(&a, out->signature);
		out->authorization = buf_take(&a);
		if (!out->authorization)
			goto out_oom;
		out->security_token = token;
		token = NULL;
	}
	rc = 0;
	goto out;
out_oom:
	rc = smux_error_set(err, SMUX_E_NO_MEMORY, NULL, NULL);
out:
	OPENSSL_cleanse(key, sizeof(key));
	if (token) {
		OPENSSL_cleanse(token, strlen(token));
		free(token);
	}
	free(canon_query);
	parts_release(&p);
	return rc;
}

int smux__s3_sign(struct smux_s3_signer *s, const struct smux_s3_request *req,
		  struct smux_s3_signed *out, struct smux_error *err)
{
	return sign_common(s, req, false, 0, out, err);
}

int smux__s3_presign(struct smux_s3_signer *s,
		     const struct smux_s3_request *req, unsigned expires,
		     struct smux_s3_signed *out, struct smux_error *err)
{
	return sign_common(s, req, true, expires, out, err);
}
