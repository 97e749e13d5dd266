// SPDX-License-Identifier: MIT
/*
 * s3_del.c - del_many of the s3 backend: S3 DeleteObjects ("POST
 * /bucket?delete" with an XML list of object names, a Content-MD5 and the
 * body's SHA-256 as the payload hash), in Quiet mode, so the answer names
 * only the keys that failed; up to 1000 keys and 1 MiB of XML a request.
 *
 * A key the XML cannot carry safely goes through the one-key DELETE of
 * s3.c instead: a control character (C0, tab and line ends included, DEL,
 * C1), text that is not UTF-8 or holds U+FFFE/U+FFFF, and two shapes that
 * lossy server parsers read as another key (s3rver's fast-xml-parser trims
 * text and reads "0123" as the number 123): a name starting or ending in a
 * space, a name that looks like a number or a boolean.
 *
 * A server without DeleteObjects (501, 405, NotImplemented, a 400 that is
 * no S3 error document) gets one DELETE per key for that batch, and every
 * later call of the backend goes key by key at once (no_delete_objects).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "backends/s3_internal.h"

/* Most keys of one DeleteObjects request (S3's limit). */
#define S3D_KEYS_MAX 1000
/* Most bytes of one request's XML: Swift's s3api refuses more than 2 KB a
 * key, and escaping can make a 1 KB key 6 KB long. */
#define S3D_BODY_MAX (1u << 20)

static const char s3d_head[] =
	"<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Quiet>true</Quiet>";
static const char s3d_tail[] = "</Delete>";
static const char s3d_open[] = "<Object><Key>";
static const char s3d_close[] = "</Key></Object>";

/* One key to send: the caller's keys sorted, a key given twice adjacent. */
struct s3d_ent {
	const char *key;
	size_t idx; /* in the caller's arrays */
};

/* One del_many call: the outcome of each key and the first failure. */
struct s3d {
	struct s3b *s;
	const struct smux_ctx *ctx;
	int *rcs;
	size_t first; /* index of the first key failed; SIZE_MAX: none */
	struct smux_error err;
};

static void note(struct s3d *d, size_t idx, int rc,
		 const struct smux_error *err)
{
	d->rcs[idx] = rc;
	if (rc < 0 && idx < d->first) {
		d->first = idx;
		d->err = *err;
	}
}

static int ent_cmp(const void *a, const void *b)
{
	const struct s3d_ent *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Whether @s is UTF-8 of characters XML 1.0 carries as they are: no C0
 * control (tab, LF, CR neither: a parser rewrites line ends), no DEL or C1
 * (discouraged), no U+FFFE/U+FFFF, no surrogate, overlong form or byte
 * that is not UTF-8.
 */
static bool xml_text_ok(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s, cp, n;

		if (c < 0x80) {
			if (c < 0x20 || c == 0x7f)
				return false;
			s++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		for (unsigned i = 1; i <= n; i++) {
			if ((s[i] & 0xc0) != 0x80) /* a NUL stops here too */
				return false;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) ||
		    (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		if (cp <= 0x9f || (cp >= 0xd800 && cp <= 0xdfff) ||
		    cp == 0xfffe || cp == 0xffff)
			return false;
		s += n + 1;
	}
	return true;
}

/* Whether a parser that guesses types could take @name for a number or a
 * boolean (s3rver: "0123" is 123, "1e3" 1000, "0x1f" 31, "true" true). */
static bool looks_typed(const char *name)
{
	bool digit = false;

	if (!strcasecmp(name, "true") || !strcasecmp(name, "false"))
		return true;
	for (const char *p = name; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digit = true;
		else if (!strchr("abcdefABCDEFxX+-.", *p))
			return false;
	}
	return digit;
}

/* Whether the object name of @key goes into a DeleteObjects list. */
static bool in_xml(const struct s3b *s, const char *key)
{
	size_t n = strlen(key);
	const char *first = s->prefix_len ? s->prefix : key;

	if (!n || !xml_text_ok((const unsigned char *)s->prefix) ||
	    !xml_text_ok((const unsigned char *)key))
		return false;
	if (first[0] == ' ' || key[n - 1] == ' ')
		return false; /* a parser that trims names another key */
	return s->prefix_len || !looks_typed(key);
}

/* Bytes of @t XML-escaped. */
static size_t xml_len(const char *t)
{
	size_t n = 0;

	for (; *t; t++)
		n += *t == '&'		       ? 5
		     : *t == '<' || *t == '>'  ? 4
		     : *t == '"' || *t == '\'' ? 6
					       : 1;
	return n;
}

/* Writes @t XML-escaped at @o; returns the end. */
static char *xml_put(char *o, const char *t)
{
	for (; *t; t++) {
		const char *e = *t == '&'    ? "&amp;"
				: *t == '<'  ? "&lt;"
				: *t == '>'  ? "&gt;"
				: *t == '"'  ? "&quot;"
				: *t == '\'' ? "&apos;"
					     : NULL;

		if (e)
			o = stpcpy(o, e); /* its NUL is written over */
		else
			*o++ = *t;
	}
	return o;
}

/* Bytes one key adds to the document. */
static size_t object_len(const struct s3b *s, const char *key)
{
	return sizeof(s3d_open) - 1 + xml_len(s->prefix) + xml_len(key) +
	       sizeof(s3d_close) - 1;
}

/* The Delete document of the @distinct keys of @e[0..m) (@len bytes);
 * NULL: no memory. */
static char *build(const struct s3b *s, const struct s3d_ent *e, size_t m,
		   size_t *len, size_t *distinct)
{
	size_t cap = sizeof(s3d_head) + sizeof(s3d_tail);
	char *doc, *o;

	*distinct = 0;
	for (size_t i = 0; i < m; i++) {
		if (!i || strcmp(e[i].key, e[i - 1].key) != 0) {
			cap += object_len(s, e[i].key);
			++*distinct;
		}
	}
	doc = malloc(cap);
	if (!doc)
		return NULL;
	o = doc;
	memcpy(o, s3d_head, sizeof(s3d_head) - 1);
	o += sizeof(s3d_head) - 1;
	for (size_t i = 0; i < m; i++) {
		if (i && strcmp(e[i].key, e[i - 1].key) == 0)
			continue;
		memcpy(o, s3d_open, sizeof(s3d_open) - 1);
		o += sizeof(s3d_open) - 1;
		o = xml_put(o, s->prefix);
		o = xml_put(o, e[i].key);
		memcpy(o, s3d_close, sizeof(s3d_close) - 1);
		o += sizeof(s3d_close) - 1;
	}
	memcpy(o, s3d_tail, sizeof(s3d_tail));
	*len = (size_t)(o - doc) + sizeof(s3d_tail) - 1;
	return doc;
}

/* Content-MD5: the base64 of the body's MD5. */
static int md5_b64(const char *doc, size_t len, char out[32])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;

	if (EVP_Digest(doc, len, md, &mdlen, EVP_md5(), NULL) != 1 ||
	    mdlen != 16)
		return -EIO;
	EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
	return 0;
}

/* The answer, parsed as it arrives (again from the start on a retry). */
struct s3d_sink {
	struct smux_s3_xml *x;
	struct smux_error perr;
};

static int answer_write(void *arg, const void *data, size_t len)
{
	struct s3d_sink *a = arg;

	return smux__s3_xml_feed(a->x, data, len, &a->perr) < 0 ? -EIO : 0;
}

static int answer_rewind(void *arg)
{
	struct s3d_sink *a = arg;

	smux__s3_xml_free(a->x);
	memset(&a->perr, 0, sizeof(a->perr));
	a->x = smux__s3_xml_new(SMUX_S3_DOC_DELETE);
	return a->x ? 0 : -ENOMEM;
}

/*
 * Whether a failed DeleteObjects says the server has none: 501, 405, the
 * code NotImplemented, or a 400 whose body is no S3 error document (a
 * server that took the POST for something else). Taking a server that
 * has it for one without costs one DELETE a key; the other way round,
 * every delete of many keys would fail.
 */
static bool not_offered(const struct s3b_call *c, const struct smux_error *err)
{
	long st = c->resp.status;
	struct smux_s3_xml *x = NULL;
	struct smux_error perr;
	bool s3doc;

	if (st == 501 || st == 405 ||
	    (st >= 300 && err->e.code == SMUX_E_NOT_SUPPORTED))
		return true;
	if (st != 400)
		return false;
	s3doc = c->resp.errbody_len > 0 &&
		smux__s3_xml_parse(SMUX_S3_DOC_ERROR, c->resp.errbody,
				   c->resp.errbody_len, &x, &perr) == 0;
	smux__s3_xml_free(x);
	return !s3doc;
}

/* The first of @e[0..m) holding the smux key of object name @name, or
 * NULL when the batch has no such key. */
static const struct s3d_ent *find(const struct s3b *s, const struct s3d_ent *e,
				  size_t m, const char *name)
{
	size_t lo = 0, hi = m;

	if (strncmp(name, s->prefix, s->prefix_len) != 0)
		return NULL;
	name += s->prefix_len;
	while (lo < hi) { /* the first not below @name */
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(e[mid].key, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m && !strcmp(e[lo].key, name) ? &e[lo] : NULL;
}

/* The outcome of one <Error> entry for its key: 0 for NoSuchKey (gone, as
 * for del), else the S3 code mapped as a failed request's. */
static int entry_rc(const struct s3b *s, const struct smux_s3_delete_error *de,
		    struct smux_error *err)
{
	struct smux_s3_result r = {
		.is_error = true,
		.code = de->code,
		.message = de->message,
	};
	char what[256];
	int rc;

	if (!strcmp(de->code, "NoSuchKey"))
		return 0;
	snprintf(what, sizeof(what), "DELETE \"%.200s\"",
		 de->key + s->prefix_len);
	/* a code with no mapping of its own is the server's trouble (the
	 * status only makes the error transient: the answer was a 200) */
	rc = smux__s3_error_fill(err, !strcmp(de->code, "SlowDown") ? 503 : 500,
				 &r, s->base.name, what);
	if (err->e.code == SMUX_E_HTTP)
		snprintf(err->e.message, sizeof(err->e.message),
			 "%.150s: %s: %s (in a DeleteObjects answer)", what,
			 de->code, de->message ? de->message : "");
	return rc;
}

/* Every key of @e[0..m) fails with @rc and @err. */
static void fail_all(struct s3d *d, const struct s3d_ent *e, size_t m, int rc,
		     const struct smux_error *err)
{
	for (size_t i = 0; i < m; i++)
		note(d, e[i].idx, rc, err);
}

/* Applies a DeleteResult to the keys of @e[0..m): every <Error> must name
 * one of them (else BAD_RESPONSE for all); a key not named is gone. */
static void apply(struct s3d *d, const struct s3d_ent *e, size_t m,
		  const struct smux_s3_result *r, const char *what)
{
	struct smux_error err = {0};
	int rc;

	for (size_t i = 0; i < r->ndelete_errors; i++) {
		if (find(d->s, e, m, r->delete_errors[i].key))
			continue;
		rc = smux_error_set(&err, SMUX_E_BAD_RESPONSE, d->s->base.name,
				    "%s: the answer names \"%.120s\", a key "
				    "not asked for",
				    what, r->delete_errors[i].key);
		fail_all(d, e, m, rc, &err);
		return;
	}
	for (size_t i = 0; i < m; i++)
		note(d, e[i].idx, 0, &err);
	for (size_t i = 0; i < r->ndelete_errors; i++) {
		const struct s3d_ent *k =
			find(d->s, e, m, r->delete_errors[i].key);

		smux_error_clear(&err);
		rc = entry_rc(d->s, &r->delete_errors[i], &err);
		/* the key, and its copies given after it */
		for (size_t j = (size_t)(k - e);
		     j < m && !strcmp(e[j].key, k->key); j++)
			note(d, e[j].idx, rc, &err);
	}
}

/*
 * One DeleteObjects request for the keys of @e[0..m) (sorted, at most
 * S3D_KEYS_MAX distinct ones). Sets the outcome of each, or returns false
 * and sets none when the server has no DeleteObjects.
 */
static bool batch(struct s3d *d, const struct s3d_ent *e, size_t m)
{
	struct s3b *s = d->s;
	struct smux_s3_kv q[1] = {{"delete", NULL}};
	char hash[SMUX_S3_HEX256], md5[32];
	struct s3d_sink ans = {0};
	struct smux_error err = {0};
	struct smux_source body;
	struct smux_sink sink;
	struct s3b_call c;
	bool offered = true;
	size_t len = 0, distinct;
	char *doc;
	int rc;

	doc = build(s, e, m, &len, &distinct);
	if (!doc || md5_b64(doc, len, md5) < 0) {
		free(doc);
		rc = smux_error_set(&err, SMUX_E_NO_MEMORY, s->base.name,
				    "no memory for a DeleteObjects body");
		fail_all(d, e, m, rc, &err);
		return true;
	}
	smux__s3_sha256_hex(doc, len, hash);
	rc = smux__s3_call_init(&c, s, "POST", NULL, &err);
	if (rc < 0) {
		free(doc);
		fail_all(d, e, m, rc, &err);
		return true;
	}
	snprintf(c.what, sizeof(c.what),
		 "DELETE OBJECTS (%zu keys, from \"%.180s\")", distinct,
		 e[0].key);
	c.query = q;
	c.nquery = 1;
	smux__s3_call_header(&c, "Content-MD5", md5);
	smux__s3_call_header(&c, "Content-Type", "application/xml");
	c.payload_hash = hash;
	smux_source_buf(&body, doc, len);
	c.body = &body;
	ans.x = smux__s3_xml_new(SMUX_S3_DOC_DELETE);
	if (!ans.x) {
		rc = smux_error_set(&err, SMUX_E_NO_MEMORY, s->base.name, NULL);
		goto out;
	}
	smux_sink_cb(&sink, answer_write, answer_rewind, &ans);
	c.sink = &sink;
	c.max_body = SMUX_S3_XML_DOC_MAX;
	atomic_fetch_add(&s->n_delete_objects, 1);
	rc = smux__s3_call(&c, d->ctx, &err);
	if (rc < 0 && ans.perr.e.code) { /* a 2xx body the parser refused */
		err = ans.perr;
		rc = -err.e.sys_errno;
	} else if (rc < 0 && not_offered(&c, &err)) {
		offered = false;
		goto out;
	}
	if (rc == 0)
		rc = smux__s3_xml_finish(ans.x, &err);
	if (rc == 0 && smux__s3_xml_result(ans.x)->is_error) {
		/* an <Error> document with a 2xx: the request failed */
		rc = smux__s3_error_fill(&err, 500, smux__s3_xml_result(ans.x),
					 s->base.name, c.what);
		offered = err.e.code != SMUX_E_NOT_SUPPORTED;
	}
	if (err.e.code == SMUX_E_BAD_RESPONSE)
		snprintf(err.e.backend, sizeof(err.e.backend), "%s",
			 s->base.name);
out:
	if (!offered) {
		/* this batch and every later one: one DELETE a key */
		atomic_store(&s->no_delete_objects, true);
	} else {
		if (rc == 0)
			apply(d, e, m, smux__s3_xml_result(ans.x), c.what);
		else
			fail_all(d, e, m, rc, &err);
		/* gone, or not known: as for del */
		for (size_t i = 0; i < m; i++)
			if (!i || strcmp(e[i].key, e[i - 1].key) != 0)
				smux__attrstore_forget(s->attrs, e[i].key);
	}
	smux__s3_xml_free(ans.x);
	smux__s3_call_release(&c);
	free(doc);
	return offered;
}

/* How many of @e[0..n) the next request takes: at most S3D_KEYS_MAX
 * distinct keys and S3D_BODY_MAX bytes of XML (one key at least). */
static size_t batch_len(const struct s3b *s, const struct s3d_ent *e, size_t n)
{
	size_t bytes = sizeof(s3d_head) + sizeof(s3d_tail), keys = 0, i;

	for (i = 0; i < n; i++) {
		if (i && strcmp(e[i].key, e[i - 1].key) == 0)
			continue; /* sent once */
		bytes += object_len(s, e[i].key);
		if (keys && (keys == S3D_KEYS_MAX || bytes > S3D_BODY_MAX))
			break;
		keys++;
	}
	return i;
}

int smux__s3_del_many(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *const *keys, size_t n, int *rcs,
		      struct smux_error *err)
{
	struct s3d d = {
		.s = smux__s3_from(b),
		.ctx = ctx,
		.rcs = rcs,
		.first = SIZE_MAX,
	};
	struct s3d_ent *e = NULL;
	size_t ne = 0;

	for (size_t i = 0; i < n; i++)
		rcs[i] = 1; /* to do */
	if (!atomic_load(&d.s->no_delete_objects)) {
		e = malloc((n ? n : 1) * sizeof(*e));
		if (!e)
			return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
					      "no memory for %zu "
					      "deletes",
					      n);
		for (size_t i = 0; i < n; i++)
			if (in_xml(d.s, keys[i]))
				e[ne++] = (struct s3d_ent){keys[i], i};
		qsort(e, ne, sizeof(*e), ent_cmp);
	}
	for (size_t at = 0, m; at < ne; at += m) {
		m = batch_len(d.s, e + at, ne - at);
		/* once the server turned DeleteObjects down, key by key */
		if (atomic_load(&d.s->no_delete_objects) ||
		    !batch(&d, e + at, m))
			break;
	}
	free(e);
	/* the keys left: one DELETE each */
	for (size_t i = 0; i < n; i++) {
		struct smux_error one = {0};

		if (rcs[i] == 1)
			note(&d, i, smux__s3_del(b, ctx, keys[i], &one), &one);
	}
	if (d.first == SIZE_MAX)
		return 0;
	*err = d.err;
	return rcs[d.first];
}

unsigned long smux_s3_delete_objects_count(struct smux_backend *b)
{
	struct s3b *s = smux__s3_from(b);

	return s ? atomic_load(&s->n_delete_objects) : 0;
}
