// SPDX-License-Identifier: MIT
/*
 * backends/s3_xml.c - S3 response bodies parsed with expat (s3_xml.h).
 *
 * Owns: one expat parser per document, created with namespace processing
 * so element names arrive as "uri\x1flocal" and are matched on the local
 * part only; a stack of the element names (depth bounded); the text of
 * the current leaf element (length bounded); the result being built.
 * Everything the server sends is checked: the root element, the number
 * of entries, integer and date syntax, URL-encoded keys. A DTD or an
 * entity declaration stops the parse (no entity expansion attacks).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <expat.h>

#include "backends/s3_xml.h"
#include "smux/backend.h"

#define NS_SEP	  '\x1f'
#define DEPTH_MAX 16
#define NAME_MAX_ 64

struct smux_s3_xml {
	XML_Parser p;
	enum smux_s3_doc kind;
	struct smux_s3_result r;
	size_t fed; /* bytes fed so far */
	int depth;  /* elements open */
	char path[DEPTH_MAX][NAME_MAX_];
	char *text; /* text of the innermost element */
	size_t tlen;
	bool failed; /* the parse is over, with an error */
	int fail_rc;
	char fail_msg[160];
	bool saw_root;
	bool finished;
	size_t nitems; /* entries so far (objects, prefixes, deletes) */
	size_t cap_objs, cap_prefixes, cap_derrs;
	char *encoding; /* <EncodingType> */
};

static void fail(struct smux_s3_xml *x, int rc, const char *msg)
{
	if (!x->failed) {
		x->failed = true;
		x->fail_rc = rc;
		snprintf(x->fail_msg, sizeof(x->fail_msg), "%s", msg);
	}
	XML_StopParser(x->p, XML_FALSE);
}

static const char *local_name(const char *name)
{
	const char *sep = strrchr(name, NS_SEP);
	return sep ? sep + 1 : name;
}

static const char *root_of(enum smux_s3_doc kind)
{
	switch (kind) {
	case SMUX_S3_DOC_LIST:
		return "ListBucketResult";
	case SMUX_S3_DOC_INITIATE:
		return "InitiateMultipartUploadResult";
	case SMUX_S3_DOC_COMPLETE:
		return "CompleteMultipartUploadResult";
	case SMUX_S3_DOC_COPY:
		return "CopyObjectResult";
	case SMUX_S3_DOC_DELETE:
		return "DeleteResult";
	case SMUX_S3_DOC_ERROR:
		break;
	}
	return "Error";
}

/* Grows *arr (of *cap elements of @size) to hold n+1; false on OOM. */
static bool grow(void **arr, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return true;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *a = realloc(*arr, ncap * size);
	if (!a)
		return false;
	memset((char *)a + *cap * size, 0, (ncap - *cap) * size);
	*arr = a;
	*cap = ncap;
	return true;
}

static void XMLCALL on_start(void *ud, const XML_Char *name,
			     const XML_Char **attrs)
{
	struct smux_s3_xml *x = ud;
	const char *ln = local_name(name);
	if (x->failed)
		return;
	if (x->depth >= DEPTH_MAX || strlen(ln) >= NAME_MAX_) {
		fail(x, -EIO, "elements nested too deep or name too long");
		return;
	}
	if (x->depth == 0) {
		bool copy_part = x->kind == SMUX_S3_DOC_COPY &&
				 !strcmp(ln, "CopyPartResult");
		if (!strcmp(ln, "Error"))
			x->r.is_error = true;
		else if (strcmp(ln, root_of(x->kind)) != 0 && !copy_part) {
			fail(x, -EIO, "unexpected root element");
			return;
		}
		x->saw_root = true;
	}
	snprintf(x->path[x->depth], NAME_MAX_, "%s", ln);
	x->depth++;
	x->tlen = 0;
	x->text[0] = '\0';

	/* Entries are allocated when they open. */
	if (x->depth != 2 || x->r.is_error)
		return;
	bool item = false;
	if (x->kind == SMUX_S3_DOC_LIST && !strcmp(ln, "Contents")) {
		item = true;
		if (!grow((void **)&x->r.objs, &x->cap_objs, x->r.nobjs,
			  sizeof(*x->r.objs)))
			goto oom;
		x->r.nobjs++;
	} else if (x->kind == SMUX_S3_DOC_LIST &&
		   !strcmp(ln, "CommonPrefixes")) {
		item = true;
		if (!grow((void **)&x->r.prefixes, &x->cap_prefixes,
			  x->r.nprefixes, sizeof(*x->r.prefixes)))
			goto oom;
		x->r.nprefixes++;
	} else if (x->kind == SMUX_S3_DOC_DELETE && !strcmp(ln, "Error")) {
		item = true;
		if (!grow((void **)&x->r.delete_errors, &x->cap_derrs,
			  x->r.ndelete_errors, sizeof(*x->r.delete_errors)))
			goto oom;
		x->r.ndelete_errors++;
	} else if (x->kind == SMUX_S3_DOC_DELETE && !strcmp(ln, "Deleted")) {
		item = true;
		x->r.ndeleted++;
	}
	if (item && ++x->nitems > SMUX_S3_XML_ITEMS_MAX)
		fail(x, -EIO, "too many entries");
	return;
oom:
	fail(x, -ENOMEM, "out of memory");
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	struct smux_s3_xml *x = ud;
	if (x->failed || len <= 0)
		return;
	if (x->tlen + (size_t)len >= SMUX_S3_XML_TEXT_MAX) {
		fail(x, -EIO, "text field too long");
		return;
	}
	memcpy(x->text + x->tlen, s, (size_t)len);
	x->tlen += (size_t)len;
	x->text[x->tlen] = '\0';
}

/* Replaces a previous value (a repeated element keeps the last one). */
static bool set_str(char **slot, const char *v, size_t n)
{
	char *s = strndup(v, n);
	if (!s)
		return false;
	free(*slot);
	*slot = s;
	return true;
}

/* Control characters (and DEL) become '?': safe to put in a message. */
static void sanitize(char *s)
{
	for (unsigned char *p = (unsigned char *)s; p && *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
}

static bool parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

/* "2009-10-12T17:50:30.000Z" (fraction optional) -> ns since the epoch. */
static bool parse_time(const char *s, int64_t *out)
{
	struct tm tm = {0};
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return false;
	int64_t frac = 0, scale = 1000000000;
	if (*end == '.') {
		end++;
		if (*end < '0' || *end > '9')
			return false;
		for (; *end >= '0' && *end <= '9'; end++) {
			if (scale > 1) {
				scale /= 10;
				frac += (*end - '0') * scale;
			}
		}
	}
	if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
		return false;
	time_t t = timegm(&tm);
	if (t == (time_t)-1 || t < 0)
		return false;
	*out = smux_time_ns((int64_t)t, (long)frac);
	return true;
}

/* The text without surrounding blanks and, for ETags, quotes. */
static const char *trimmed(char *t, size_t *n, bool unquote)
{
	while (*t == ' ' || *t == '\n' || *t == '\r' || *t == '\t')
		t++;
	size_t len = strlen(t);
	while (len && strchr(" \n\r\t", t[len - 1]))
		len--;
	if (unquote && len >= 2 && t[0] == '"' && t[len - 1] == '"') {
		t++;
		len -= 2;
	}
	*n = len;
	return t;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	struct smux_s3_xml *x = ud;
	if (x->failed)
		return;
	const char *ln = local_name(name);
	int d = x->depth; /* depth of the element closing */
	const char *parent = d >= 2 ? x->path[d - 2] : "";
	struct smux_s3_result *r = &x->r;
	size_t n;
	const char *t = trimmed(x->text, &n, !strcmp(ln, "ETag"));
	bool ok = true;
	x->depth--;

	if (r->is_error && d == 2) {
		if (!strcmp(ln, "Code"))
			ok = set_str(&r->code, t, n < 64 ? n : 64);
		else if (!strcmp(ln, "Message"))
			ok = set_str(&r->message, t, n < 255 ? n : 255);
		else if (!strcmp(ln, "Region"))
			ok = set_str(&r->region, t, n < 64 ? n : 64);
		else if (!strcmp(ln, "Endpoint"))
			ok = set_str(&r->endpoint, t, n < 255 ? n : 255);
		else if (!strcmp(ln, "RequestId"))
			ok = set_str(&r->request_id, t, n < 128 ? n : 128);
		goto out;
	}
	if (r->is_error)
		goto out;

	if (x->kind == SMUX_S3_DOC_LIST && d == 3 &&
	    !strcmp(parent, "Contents")) {
		struct smux_s3_obj *o = &r->objs[r->nobjs - 1];
		if (!strcmp(ln, "Key")) { /* as sent: blanks are its own */
			ok = set_str(&o->key, x->text, x->tlen);
		} else if (!strcmp(ln, "Size")) {
			char buf[32];
			if (n >= sizeof(buf))
				goto bad;
			memcpy(buf, t, n);
			buf[n] = '\0';
			if (!parse_u64(buf, &o->size))
				goto bad;
		} else if (!strcmp(ln, "ETag")) {
			ok = set_str(&o->etag, t, n);
		} else if (!strcmp(ln, "LastModified")) {
			char buf[64];
			if (n >= sizeof(buf))
				goto bad;
			memcpy(buf, t, n);
			buf[n] = '\0';
			if (!parse_time(buf, &o->mtime_ns))
				goto bad;
		}
	} else if (x->kind == SMUX_S3_DOC_LIST && d == 3 &&
		   !strcmp(parent, "CommonPrefixes") && !strcmp(ln, "Prefix")) {
		ok = set_str(&r->prefixes[r->nprefixes - 1], x->text, x->tlen);
	} else if (x->kind == SMUX_S3_DOC_LIST && d == 2) {
		if (!strcmp(ln, "IsTruncated")) {
			if (n == 4 && !strncmp(t, "true", 4))
				r->truncated = true;
			else if (n == 5 && !strncmp(t, "false", 5))
				r->truncated = false;
			else
				goto bad;
		} else if (!strcmp(ln, "NextContinuationToken")) {
			ok = set_str(&r->next_token, t, n);
		} else if (!strcmp(ln, "EncodingType")) {
			ok = set_str(&x->encoding, t, n);
		} else if (!strcmp(ln, "KeyCount")) {
			char buf[16];
			uint64_t v;
			if (n >= sizeof(buf))
				goto bad;
			memcpy(buf, t, n);
			buf[n] = '\0';
			if (!parse_u64(buf, &v) || v > SMUX_S3_XML_ITEMS_MAX)
				goto bad;
			r->key_count = (long)v;
		}
	} else if (x->kind == SMUX_S3_DOC_DELETE && d == 3 &&
		   !strcmp(parent, "Error")) {
		struct smux_s3_delete_error *e =
			&r->delete_errors[r->ndelete_errors - 1];
		if (!strcmp(ln, "Key")) /* as sent: blanks are its own */
			ok = set_str(&e->key, x->text, x->tlen);
		else if (!strcmp(ln, "Code"))
			ok = set_str(&e->code, t, n < 64 ? n : 64);
		else if (!strcmp(ln, "Message"))
			ok = set_str(&e->message, t, n < 255 ? n : 255);
	} else if (d == 2) {
		if (!strcmp(ln, "UploadId") && x->kind == SMUX_S3_DOC_INITIATE)
			ok = set_str(&r->upload_id, t, n);
		else if (!strcmp(ln, "ETag") &&
			 (x->kind == SMUX_S3_DOC_COPY ||
			  x->kind == SMUX_S3_DOC_COMPLETE))
			ok = set_str(&r->etag, t, n);
		else if (!strcmp(ln, "Key") &&
			 (x->kind == SMUX_S3_DOC_COMPLETE ||
			  x->kind == SMUX_S3_DOC_INITIATE))
			ok = set_str(&r->key, x->text, x->tlen);
		else if (!strcmp(ln, "LastModified") &&
			 x->kind == SMUX_S3_DOC_COPY) {
			char buf[64];
			if (n >= sizeof(buf))
				goto bad;
			memcpy(buf, t, n);
			buf[n] = '\0';
			if (!parse_time(buf, &r->mtime_ns))
				goto bad;
		}
	}
out:
	x->tlen = 0;
	x->text[0] = '\0';
	if (!ok)
		fail(x, -ENOMEM, "out of memory");
	return;
bad:
	fail(x, -EIO, "malformed value");
}

/* Any DTD or entity declaration ends the parse. */
static void XMLCALL on_doctype(void *ud, const XML_Char *name,
			       const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal)
{
	fail(ud, -EIO, "document type declarations are refused");
}

static void XMLCALL on_entity(void *ud, const XML_Char *name, int pe,
			      const XML_Char *value, int len,
			      const XML_Char *base, const XML_Char *sysid,
			      const XML_Char *pubid, const XML_Char *notation)
{
	fail(ud, -EIO, "entity declarations are refused");
}

struct smux_s3_xml *smux__s3_xml_new(enum smux_s3_doc kind)
{
	struct smux_s3_xml *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->kind = kind;
	x->r.key_count = -1;
	x->text = malloc(SMUX_S3_XML_TEXT_MAX);
	x->p = XML_ParserCreateNS(NULL, NS_SEP);
	if (!x->text || !x->p) {
		smux__s3_xml_free(x);
		return NULL;
	}
	x->text[0] = '\0';
	XML_SetUserData(x->p, x);
	XML_SetElementHandler(x->p, on_start, on_end);
	XML_SetCharacterDataHandler(x->p, on_text);
	XML_SetStartDoctypeDeclHandler(x->p, on_doctype);
	XML_SetEntityDeclHandler(x->p, on_entity);
	return x;
}

void smux__s3_xml_free(struct smux_s3_xml *x)
{
	if (!x)
		return;
	struct smux_s3_result *r = &x->r;
	for (size_t i = 0; i < r->nobjs; i++) {
		free(r->objs[i].key);
		free(r->objs[i].etag);
	}
	free(r->objs);
	for (size_t i = 0; i < r->nprefixes; i++)
		free(r->prefixes[i]);
	free(r->prefixes);
	for (size_t i = 0; i < r->ndelete_errors; i++) {
		free(r->delete_errors[i].key);
		free(r->delete_errors[i].code);
		free(r->delete_errors[i].message);
	}
	free(r->delete_errors);
	free(r->code);
	free(r->message);
	free(r->region);
	free(r->endpoint);
	free(r->request_id);
	free(r->next_token);
	free(r->upload_id);
	free(r->etag);
	free(r->key);
	free(x->encoding);
	free(x->text);
	if (x->p)
		XML_ParserFree(x->p);
	free(x);
}

static int report(struct smux_s3_xml *x, struct smux_error *err)
{
	if (x->fail_rc == -ENOMEM)
		return smux_error_set(err, SMUX_E_NO_MEMORY, NULL, NULL);
	return smux_error_set(err, SMUX_E_BAD_RESPONSE, NULL,
			      "s3 response body: %s", x->fail_msg);
}

int smux__s3_xml_feed(struct smux_s3_xml *x, const void *buf, size_t len,
		      struct smux_error *err)
{
	if (x->failed)
		return report(x, err);
	if (x->finished) {
		fail(x, -EIO, "data after the end");
		return report(x, err);
	}
	if (len > SMUX_S3_XML_DOC_MAX - x->fed) {
		fail(x, -EIO, "document too large");
		return report(x, err);
	}
	x->fed += len;
	const char *p = buf;
	while (len) {
		int chunk = len > (1 << 20) ? (1 << 20) : (int)len;
		if (XML_Parse(x->p, p, chunk, XML_FALSE) != XML_STATUS_OK) {
			char msg[120];
			snprintf(msg, sizeof(msg), "not XML (%s, line %lu)",
				 XML_ErrorString(XML_GetErrorCode(x->p)),
				 (unsigned long)XML_GetCurrentLineNumber(x->p));
			fail(x, -EIO, msg);
			return report(x, err);
		}
		if (x->failed)
			return report(x, err);
		p += chunk;
		len -= (size_t)chunk;
	}
	return 0;
}

/* Undoes encoding-type=url in place ('+' is a space, %XX a byte); false
 * for a malformed escape or an encoded NUL. */
static bool url_decode(char *s)
{
	char *w = s;
	for (const char *r = s; *r; r++) {
		if (*r == '+') {
			*w++ = ' ';
		} else if (*r == '%') {
			int v = 0;
			for (int i = 1; i <= 2; i++) {
				char c = r[i];
				v <<= 4;
				if (c >= '0' && c <= '9')
					v |= c - '0';
				else if (c >= 'a' && c <= 'f')
					v |= c - 'a' + 10;
				else if (c >= 'A' && c <= 'F')
					v |= c - 'A' + 10;
				else
					return false;
			}
			if (!v)
				return false;
			*w++ = (char)v;
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
	return true;
}

int smux__s3_xml_finish(struct smux_s3_xml *x, struct smux_error *err)
{
	if (x->failed)
		return report(x, err);
	if (!x->finished) {
		x->finished = true;
		if (XML_Parse(x->p, NULL, 0, XML_TRUE) != XML_STATUS_OK) {
			char msg[120];
			snprintf(msg, sizeof(msg), "not XML (%s)",
				 XML_ErrorString(XML_GetErrorCode(x->p)));
			fail(x, -EIO, msg);
		} else if (!x->saw_root) {
			fail(x, -EIO, "empty document");
		}
		if (x->failed)
			return report(x, err);
	}
	struct smux_s3_result *r = &x->r;
	if (r->is_error) {
		if (!r->code || !*r->code) {
			fail(x, -EIO, "error document without a code");
			return report(x, err);
		}
		sanitize(r->code);
		sanitize(r->message);
		sanitize(r->region);
		sanitize(r->endpoint);
		sanitize(r->request_id);
		return 0;
	}
	if (x->kind == SMUX_S3_DOC_ERROR) {
		fail(x, -EIO, "not an error document");
		return report(x, err);
	}
	if (x->kind == SMUX_S3_DOC_LIST) {
		r->url_encoded = x->encoding && !strcmp(x->encoding, "url");
		for (size_t i = 0; i < r->nobjs; i++) {
			char *k = r->objs[i].key;
			if (!k || !*k ||
			    (r->url_encoded && (!url_decode(k) || !*k))) {
				fail(x, -EIO,
				     "listed object without a valid "
				     "key");
				return report(x, err);
			}
		}
		for (size_t i = 0; i < r->nprefixes; i++) {
			char *k = r->prefixes[i];
			if (!k || !*k ||
			    (r->url_encoded && (!url_decode(k) || !*k))) {
				fail(x, -EIO,
				     "common prefix without a valid "
				     "value");
				return report(x, err);
			}
		}
		if (r->truncated && (!r->next_token || !*r->next_token)) {
			fail(x, -EIO,
			     "truncated listing without a "
			     "continuation token");
			return report(x, err);
		}
	}
	if (x->kind == SMUX_S3_DOC_INITIATE &&
	    (!r->upload_id || !*r->upload_id)) {
		fail(x, -EIO, "no UploadId");
		return report(x, err);
	}
	if ((x->kind == SMUX_S3_DOC_COMPLETE || x->kind == SMUX_S3_DOC_COPY) &&
	    (!r->etag || !*r->etag)) {
		fail(x, -EIO, "no ETag");
		return report(x, err);
	}
	for (size_t i = 0; i < r->ndelete_errors; i++) {
		struct smux_s3_delete_error *e = &r->delete_errors[i];
		if (!e->key || !e->code) {
			fail(x, -EIO, "delete error without key or code");
			return report(x, err);
		}
		sanitize(e->code);
		sanitize(e->message);
	}
	return 0;
}

const struct smux_s3_result *smux__s3_xml_result(const struct smux_s3_xml *x)
{
	return &x->r;
}

int smux__s3_xml_parse(enum smux_s3_doc kind, const void *buf, size_t len,
		       struct smux_s3_xml **out, struct smux_error *err)
{
	*out = NULL;
	struct smux_s3_xml *x = smux__s3_xml_new(kind);
	if (!x)
		return smux_error_set(err, SMUX_E_NO_MEMORY, NULL, NULL);
	int rc = smux__s3_xml_feed(x, buf, len, err);
	if (!rc)
		rc = smux__s3_xml_finish(x, err);
	if (rc) {
		smux__s3_xml_free(x);
		return rc;
	}
	*out = x;
	return 0;
}

static const struct {
	const char *code;
	enum smux_code smux;
} s3_codes[] = {
	{"NoSuchKey", SMUX_E_KEY_NOT_FOUND},
	{"NoSuchUpload", SMUX_E_KEY_NOT_FOUND},
	{"AccessDenied", SMUX_E_PERMISSION_DENIED},
	{"SignatureDoesNotMatch", SMUX_E_PERMISSION_DENIED},
	{"InvalidAccessKeyId", SMUX_E_PERMISSION_DENIED},
	{"ExpiredToken", SMUX_E_CREDENTIAL_EXPIRED},
	{"TokenRefreshRequired", SMUX_E_CREDENTIAL_EXPIRED},
	{"PreconditionFailed", SMUX_E_PRECONDITION_FAILED},
	{"KeyTooLongError", SMUX_E_KEY_TOO_LONG},
	{"NotImplemented", SMUX_E_NOT_SUPPORTED},
	{"InvalidArgument", SMUX_E_INVALID_ARGUMENT},
	{"EntityTooLarge", SMUX_E_INVALID_ARGUMENT},
	{"EntityTooSmall", SMUX_E_INVALID_ARGUMENT},
	{"InvalidPart", SMUX_E_INVALID_ARGUMENT},
	{"InvalidPartOrder", SMUX_E_INVALID_ARGUMENT},
	{"MalformedXML", SMUX_E_INVALID_ARGUMENT},
};

int smux__s3_error_fill(struct smux_error *err, int status,
			const struct smux_s3_result *res, const char *backend,
			const char *what)
{
	const char *code = res && res->is_error ? res->code : NULL;
	const char *msg =
		res && res->is_error && res->message ? res->message : "";
	int rc = 0;
	bool mapped = false;
	for (size_t i = 0; code && i < sizeof(s3_codes) / sizeof(s3_codes[0]);
	     i++) {
		if (!strcmp(code, s3_codes[i].code)) {
			rc = smux_error_set(err, s3_codes[i].smux, backend,
					    "%s: %s: %s", what, code, msg);
			mapped = true;
			break;
		}
	}
	if (!mapped) {
		rc = smux_error_from_http(err, status, backend, what);
		if (code && err) {
			char buf[SMUX_ERROR_MSG_MAX];
			snprintf(buf, sizeof(buf), "%s: %s: %s (HTTP %d)", what,
				 code, msg, status);
			snprintf(err->e.message, sizeof(err->e.message), "%s",
				 buf);
		}
	}
	if (err)
		err->e.http_status = status;
	return rc;
}
