// SPDX-License-Identifier: MIT
/*
 * http_dav_xml.c - the PROPFIND multistatus parser (http_dav.h), with
 * expat in namespace mode: elements are matched on ("DAV:", local name),
 * whatever prefix the server uses (D:, d:, lp1:, none).
 *
 * What it reads of each <response>: <href>, and from each <propstat>
 * whose <status> is 2xx: <resourcetype><collection/>, <getcontentlength>,
 * <getlastmodified>, <getetag>. A propstat with another status (the 404
 * one for properties the server does not have) is ignored.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <expat.h>

#include "backends/http_client.h"
#include "backends/http_dav.h"

/* Namespace separator expat puts between the URI and the local name. */
#define NS_SEP '\x01'

/* The DAV: elements the parser cares about. */
enum el {
	EL_OTHER,
	EL_MULTISTATUS,
	EL_RESPONSE,
	EL_HREF,
	EL_PROPSTAT,
	EL_PROP,
	EL_STATUS,
	EL_RESOURCETYPE,
	EL_COLLECTION,
	EL_LENGTH,
	EL_MODIFIED,
	EL_ETAG,
	EL_SMTIME, /* urn:x-smuxfs: mtime */
	EL_SMODE,  /* urn:x-smuxfs: mode */
};

#define DEPTH_MAX 64

struct smux__dav_parser {
	XML_Parser xp;
	char *target; /* decoded path asked for, no trailing '/' */
	size_t target_len;
	int err;	 /* sticky negative errno */
	const char *why; /* reason of err */
	enum el stack[DEPTH_MAX];
	unsigned depth;
	bool seen_root; /* a DAV:multistatus root was found */
	char text[SMUX__DAV_TEXT_MAX + 1];
	size_t text_len;
	bool text_over; /* text longer than the bound */
	/* the <response> being read */
	char href[SMUX__DAV_TEXT_MAX + 1];
	bool has_href;
	struct smux__dav_entry cur; /* props of accepted propstats */
	struct smux__dav_entry ps;  /* props of the propstat being read */
	long ps_status;
	bool any_ok; /* some propstat was 2xx */
	/* results */
	struct smux__dav_entry *ents;
	size_t n, cap;
	struct smux__dav_entry self;
	bool has_self;
	size_t skipped; /* children no key can name */
};

static void fail(struct smux__dav_parser *p, int err, const char *why)
{
	if (!p->err) {
		p->err = err;
		p->why = why;
	}
	XML_StopParser(p->xp, XML_FALSE);
}

static enum el classify(const char *name)
{
	static const struct {
		const char *local;
		enum el el;
	} names[] = {
		{"multistatus", EL_MULTISTATUS},
		{"response", EL_RESPONSE},
		{"href", EL_HREF},
		{"propstat", EL_PROPSTAT},
		{"prop", EL_PROP},
		{"status", EL_STATUS},
		{"resourcetype", EL_RESOURCETYPE},
		{"collection", EL_COLLECTION},
		{"getcontentlength", EL_LENGTH},
		{"getlastmodified", EL_MODIFIED},
		{"getetag", EL_ETAG},
	};

	static const size_t sl = sizeof(SMUX__DAV_NS) - 1;

	if (strncmp(name, SMUX__DAV_NS, sl) == 0 && name[sl] == NS_SEP) {
		if (strcmp(name + sl + 1, "mtime") == 0)
			return EL_SMTIME;
		if (strcmp(name + sl + 1, "mode") == 0)
			return EL_SMODE;
		return EL_OTHER;
	}
	if (strncmp(name, "DAV:", 4) != 0 || name[4] != NS_SEP)
		return EL_OTHER;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name + 5, names[i].local) == 0)
			return names[i].el;
	return EL_OTHER;
}

static enum el parent(const struct smux__dav_parser *p, unsigned up)
{
	return p->depth > up ? p->stack[p->depth - 1 - up] : EL_OTHER;
}

static void XMLCALL on_start(void *arg, const XML_Char *name,
			     const XML_Char **attrs)
{
	struct smux__dav_parser *p = arg;
	enum el el = classify(name);

	(void)attrs;
	if (p->depth == 0) {
		if (el != EL_MULTISTATUS)
			return fail(p, -EBADMSG, "root is not DAV:multistatus");
		p->seen_root = true;
	}
	if (p->depth >= DEPTH_MAX)
		return fail(p, -EBADMSG, "elements nested too deep");
	p->stack[p->depth++] = el;
	p->text_len = 0;
	p->text_over = false;
	switch (el) {
	case EL_RESPONSE:
		memset(&p->cur, 0, sizeof(p->cur));
		p->has_href = false;
		p->any_ok = false;
		break;
	case EL_PROPSTAT:
		memset(&p->ps, 0, sizeof(p->ps));
		p->ps_status = 0;
		break;
	case EL_COLLECTION:
		if (parent(p, 1) == EL_RESOURCETYPE)
			p->ps.is_dir = true;
		break;
	default:
		break;
	}
}

static void XMLCALL on_text(void *arg, const XML_Char *s, int len)
{
	struct smux__dav_parser *p = arg;

	if (len <= 0)
		return;
	if (p->text_len + (size_t)len > SMUX__DAV_TEXT_MAX) {
		p->text_over = true;
		return;
	}
	memcpy(p->text + p->text_len, s, (size_t)len);
	p->text_len += (size_t)len;
}

/* The text of the element just closed, trimmed, NUL-terminated. */
static char *text(struct smux__dav_parser *p)
{
	char *s = p->text;
	size_t n = p->text_len;

	while (n && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
		     s[n - 1] == '\n'))
		n--;
	s[n] = '\0';
	return s;
}

/* "HTTP/1.1 200 OK" -> 200; 0 when not a status line. */
static long status_of(const char *s)
{
	const char *sp = strchr(s, ' ');

	if (strncmp(s, "HTTP/", 5) != 0 || !sp || sp[1] < '1' || sp[1] > '5' ||
	    sp[2] < '0' || sp[2] > '9' || sp[3] < '0' || sp[3] > '9')
		return 0;
	return (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
}

static int parse_len(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s || strlen(s) > 19)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

/*
 * The decoded path of an href: an absolute URL loses its scheme and
 * authority; a query or fragment is cut. Returns the length or -EBADMSG.
 */
static long href_path(const char *href, char *out, size_t cap)
{
	const char *s = href, *end;
	long n;

	if (strncasecmp(s, "http://", 7) == 0 ||
	    strncasecmp(s, "https://", 8) == 0) {
		s = strstr(s, "//") + 2;
		s = strchr(s, '/');
		if (!s)
			s = "/";
	}
	if (*s != '/')
		return -EBADMSG;
	end = s + strcspn(s, "?#");
	n = smux__http_unescape(s, (size_t)(end - s), out, cap);
	return n < 0 ? -EBADMSG : n;
}

/* Files the finished <response> under self or the children. */
static void finish_response(struct smux__dav_parser *p)
{
	char path[SMUX__DAV_TEXT_MAX + 1];
	struct smux__dav_entry *e;
	const char *name;
	long n;

	if (!p->has_href)
		return fail(p, -EBADMSG, "a response without href");
	if (!p->any_ok)
		return; /* nothing known about it (a 404 propstat only) */
	n = href_path(p->href, path, sizeof(path));
	if (n < 0)
		return fail(p, -EBADMSG, "an href that is not a path");
	while (n > 0 && path[n - 1] == '/') /* the root becomes "" */
		path[--n] = '\0';
	if ((size_t)n == p->target_len &&
	    memcmp(path, p->target, (size_t)n) == 0) {
		p->self = p->cur;
		p->self.name = NULL;
		p->has_self = true;
		return;
	}
	/* a child: target + "/" + one segment. An href outside the
	 * collection fails the listing (a proxy that rewrote the prefix
	 * would list every directory empty: a rejoin resync would take that
	 * for "nothing there" and drop the other replica's keys) */
	if ((size_t)n < p->target_len + 2 ||
	    memcmp(path, p->target, p->target_len) != 0 ||
	    path[p->target_len] != '/')
		return fail(p, -EBADMSG, "an href outside the collection");
	name = path + p->target_len + 1;
	/* a name no key can have (an encoded '/': "a%2Fb", "." or ".."):
	 * left out of the listing, not the listing's failure (every other
	 * name of the directory went with it, and the backend down: every
	 * file of the mount EIO), but counted: the collection is not empty
	 * (davb_del) */
	if (strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0) {
		p->skipped++;
		return;
	}
	if (p->n >= SMUX__DAV_ENTRIES_MAX)
		return fail(p, -E2BIG, "too many entries");
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		struct smux__dav_entry *ne =
			realloc(p->ents, cap * sizeof(*ne));

		if (!ne)
			return fail(p, -ENOMEM, "out of memory");
		p->ents = ne;
		p->cap = cap;
	}
	e = &p->ents[p->n];
	*e = p->cur;
	e->name = strdup(name);
	if (!e->name)
		return fail(p, -ENOMEM, "out of memory");
	p->n++;
}

static void XMLCALL on_end(void *arg, const XML_Char *name)
{
	struct smux__dav_parser *p = arg;
	enum el el, up;
	char *t;

	(void)name;
	if (p->depth == 0)
		return;
	el = p->stack[p->depth - 1];
	up = parent(p, 1);
	if (p->text_over && el != EL_OTHER && el != EL_PROP)
		return fail(p, -E2BIG, "a value too long");
	t = text(p);
	switch (el) {
	case EL_HREF:
		if (up == EL_RESPONSE) {
			memcpy(p->href, t, strlen(t) + 1);
			p->has_href = true;
		}
		break;
	case EL_STATUS:
		if (up == EL_PROPSTAT)
			p->ps_status = status_of(t);
		break;
	case EL_LENGTH:
		if (up == EL_PROP && t[0]) { /* Apache: empty on collections */
			if (parse_len(t, &p->ps.size) < 0)
				return fail(p, -EBADMSG,
					    "a getcontentlength that is not "
					    "a number");
			p->ps.has_size = true;
		}
		break;
	case EL_MODIFIED:
		if (up == EL_PROP) {
			int64_t ns = smux__http_parse_date(t);

			p->ps.mtime_ns = ns > 0 ? ns : 0;
		}
		break;
	case EL_ETAG:
		if (up == EL_PROP) {
			size_t n = strlen(t);

			if (n >= sizeof(p->ps.etag))
				n = sizeof(p->ps.etag) - 1;
			memcpy(p->ps.etag, t, n);
			p->ps.etag[n] = '\0';
		}
		break;
	case EL_SMTIME:
	case EL_SMODE:
		if (up == EL_PROP && t[0]) {
			uint64_t v;

			/* ours, but stored on a server: checked all the same */
			if (parse_len(t, &v) < 0 ||
			    (el == EL_SMODE && v > 0177777) ||
			    (el == EL_SMTIME && v > (uint64_t)INT64_MAX))
				return fail(p, -EBADMSG,
					    "a smuxfs property that is not a "
					    "number");
			if (el == EL_SMTIME) {
				p->ps.has_smtime = true;
				p->ps.smtime_ns = (int64_t)v;
			} else {
				p->ps.has_smode = true;
				p->ps.smode = (uint32_t)v;
			}
		}
		break;
	case EL_PROPSTAT:
		if (p->ps_status >= 200 && p->ps_status < 300) {
			if (p->ps.has_smtime) {
				p->cur.has_smtime = true;
				p->cur.smtime_ns = p->ps.smtime_ns;
			}
			if (p->ps.has_smode) {
				p->cur.has_smode = true;
				p->cur.smode = p->ps.smode;
			}
			p->any_ok = true;
			p->cur.is_dir |= p->ps.is_dir;
			if (p->ps.has_size) {
				p->cur.has_size = true;
				p->cur.size = p->ps.size;
			}
			if (p->ps.mtime_ns)
				p->cur.mtime_ns = p->ps.mtime_ns;
			if (p->ps.etag[0])
				memcpy(p->cur.etag, p->ps.etag,
				       sizeof(p->cur.etag));
		}
		break;
	case EL_RESPONSE:
		if (up == EL_MULTISTATUS)
			finish_response(p);
		break;
	default:
		break;
	}
	p->depth--;
	p->text_len = 0;
	p->text_over = false;
}

/* No DTD, no entities: a multistatus has no use for them. */
static void XMLCALL on_doctype(void *arg, const XML_Char *name,
			       const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal)
{
	(void)name;
	(void)sysid;
	(void)pubid;
	(void)has_internal;
	fail(arg, -EBADMSG, "a DOCTYPE in a multistatus");
}

static int setup_xp(struct smux__dav_parser *p)
{
	if (!p->xp)
		p->xp = XML_ParserCreateNS("UTF-8", NS_SEP);
	else if (!XML_ParserReset(p->xp, "UTF-8"))
		return -ENOMEM;
	if (!p->xp)
		return -ENOMEM;
	XML_SetUserData(p->xp, p);
	XML_SetElementHandler(p->xp, on_start, on_end);
	XML_SetCharacterDataHandler(p->xp, on_text);
	XML_SetStartDoctypeDeclHandler(p->xp, on_doctype);
	XML_SetParamEntityParsing(p->xp, XML_PARAM_ENTITY_PARSING_NEVER);
	return 0;
}

static void clear_results(struct smux__dav_parser *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->ents[i].name);
	p->n = 0;
	p->skipped = 0;
	p->has_self = false;
	p->err = 0;
	p->why = NULL;
	p->depth = 0;
	p->seen_root = false;
	p->text_len = 0;
}

int smux__dav_parser_new(const char *target, struct smux__dav_parser **out)
{
	struct smux__dav_parser *p = calloc(1, sizeof(*p));
	size_t n = strlen(target);

	*out = NULL;
	if (!p)
		return -ENOMEM;
	while (n > 0 && target[n - 1] == '/') /* the root becomes "" */
		n--;
	p->target = strndup(target, n);
	if (!p->target || setup_xp(p) < 0) {
		smux__dav_parser_free(p);
		return -ENOMEM;
	}
	p->target_len = n;
	*out = p;
	return 0;
}

void smux__dav_parser_free(struct smux__dav_parser *p)
{
	if (!p)
		return;
	clear_results(p);
	free(p->ents);
	if (p->xp)
		XML_ParserFree(p->xp);
	free(p->target);
	free(p);
}

int smux__dav_parser_reset(struct smux__dav_parser *p)
{
	clear_results(p);
	return setup_xp(p);
}

int smux__dav_parser_feed(struct smux__dav_parser *p, const void *buf,
			  size_t len, bool final)
{
	if (p->err)
		return p->err;
	if (len > (size_t)INT32_MAX)
		return p->err = -E2BIG;
	if (XML_Parse(p->xp, buf, (int)len, final) != XML_STATUS_OK) {
		if (!p->err) {
			p->err = -EBADMSG;
			p->why = XML_ErrorString(XML_GetErrorCode(p->xp));
		}
		return p->err;
	}
	if (final && !p->seen_root) {
		p->err = -EBADMSG;
		p->why = "no DAV:multistatus";
	}
	return p->err;
}

const char *smux__dav_parser_error(const struct smux__dav_parser *p)
{
	return p->why ? p->why : "malformed multistatus";
}

size_t smux__dav_parser_count(const struct smux__dav_parser *p)
{
	return p->n;
}

size_t smux__dav_parser_skipped(const struct smux__dav_parser *p)
{
	return p->skipped;
}

const struct smux__dav_entry *
smux__dav_parser_entry(const struct smux__dav_parser *p, size_t i)
{
	return i < p->n ? &p->ents[i] : NULL;
}

const struct smux__dav_entry *
smux__dav_parser_self(const struct smux__dav_parser *p)
{
	return p->has_self ? &p->self : NULL;
}

/* ---- the outcome of a 207 to a change (DELETE, MOVE, COPY) ---- */

/* What smux__dav_multistatus_failure reads: the first status that is no
 * 2xx, of a <response> or a <propstat>. */
struct ms_outcome {
	XML_Parser xp;
	unsigned depth;
	bool root, in_status, bad;
	char text[64];
	size_t text_len;
	long failure;
};

static void XMLCALL ms_start(void *arg, const XML_Char *name,
			     const XML_Char **attrs)
{
	struct ms_outcome *o = arg;
	enum el el = classify(name);

	(void)attrs;
	if (o->depth == 0 && el != EL_MULTISTATUS)
		o->bad = true;
	if (o->depth == 0)
		o->root = true;
	if (++o->depth > DEPTH_MAX)
		o->bad = true;
	if (o->bad) {
		XML_StopParser(o->xp, XML_FALSE);
		return;
	}
	o->in_status = el == EL_STATUS;
	o->text_len = 0;
}

static void XMLCALL ms_text(void *arg, const XML_Char *s, int len)
{
	struct ms_outcome *o = arg;

	size_t room = sizeof(o->text) - 1 - o->text_len;

	/* the status line's start is all it takes: a long reason phrase
	 * is cut, not dropped */
	if (!o->in_status || len <= 0)
		return;
	if ((size_t)len < room)
		room = (size_t)len;
	memcpy(o->text + o->text_len, s, room);
	o->text_len += room;
}

static void XMLCALL ms_end(void *arg, const XML_Char *name)
{
	struct ms_outcome *o = arg;
	const char *s = o->text;
	long st;

	(void)name;
	o->depth--;
	if (!o->in_status)
		return;
	o->in_status = false;
	o->text[o->text_len] = '\0';
	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	st = status_of(s);
	if (!o->failure && (st < 200 || st > 299))
		o->failure = st ? st : 500; /* no status line: no success */
}

static void XMLCALL ms_doctype(void *arg, const XML_Char *name,
			       const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal)
{
	struct ms_outcome *o = arg;

	(void)name;
	(void)sysid;
	(void)pubid;
	(void)has_internal;
	o->bad = true;
	XML_StopParser(o->xp, XML_FALSE);
}

long smux__dav_multistatus_failure(const char *body, size_t len)
{
	struct ms_outcome o = {0};
	enum XML_Status st;

	o.xp = XML_ParserCreateNS("UTF-8", NS_SEP);
	if (!o.xp)
		return -ENOMEM;
	XML_SetUserData(o.xp, &o);
	XML_SetElementHandler(o.xp, ms_start, ms_end);
	XML_SetCharacterDataHandler(o.xp, ms_text);
	XML_SetStartDoctypeDeclHandler(o.xp, ms_doctype);
	XML_SetParamEntityParsing(o.xp, XML_PARAM_ENTITY_PARSING_NEVER);
	st = XML_Parse(o.xp, body, len > INT_MAX ? INT_MAX : (int)len, 1);
	XML_ParserFree(o.xp);
	if (st != XML_STATUS_OK || o.bad || !o.root)
		return -EBADMSG;
	return o.failure;
}
