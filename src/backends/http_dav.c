// SPDX-License-Identifier: MIT
/*
 * http_dav.c - the http backend (smux/http.h): WebDAV or a plain
 * read-only HTTP mirror, over the HTTP layer (http_client.h), with the
 * PROPFIND answers parsed by http_dav_xml.c.
 *
 * The instance is immutable after smux_http_new(); the HTTP client it
 * owns is thread-safe, so every operation runs on any thread with no lock
 * here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/http_client.h"
#include "backends/http_dav.h"
#include "smux/http.h"

/* Longest PROPFIND answer read (bytes): a listing past it is refused
 * rather than held. About 200 bytes per entry: ~300k entries. */
#define DAVB_LIST_MAX (64ull << 20)

/* Permission bits reported for what a WebDAV server stores (no modes). */
#define DAVB_FILE_MODE 0644
#define DAVB_DIR_MODE  0755

static const char propfind_body[] =
	"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
	"<D:propfind xmlns:D=\"DAV:\" xmlns:S=\"" SMUX__DAV_NS "\"><D:prop>"
	"<D:resourcetype/><D:getcontentlength/><D:getlastmodified/>"
	"<D:getetag/><S:mtime/><S:mode/>"
	"</D:prop></D:propfind>\n";

struct davb {
	struct smux_backend base; /* first: downcast by davb_from */
	struct smux__http *http;
	char *base_url;	 /* ends in '/' */
	char *base_path; /* decoded path of base_url, ends in '/' */
	bool webdav;
	/* enum davb_etags, learned once (davb_learn_etags); atomic: any
	 * thread may learn it, all learn the same */
	atomic_int etags;
	/* the server refused PROPPATCH once (nginx): modes and exact mtimes
	 * are not kept, and not asked for again */
	atomic_bool no_props;
	/* the server kept only one property of a PROPPATCH of two and said
	 * 2xx (lighttpd 1.4.69): one property per PROPPATCH from then on */
	atomic_bool one_prop;
};

/* Where version tokens come from, for the whole instance (head, list and
 * get must agree). */
enum davb_etags {
	DAVB_ETAGS_UNKNOWN = 0,
	DAVB_ETAGS_SERVER, /* the server's (Apache: size + mtime in us) */
	DAVB_ETAGS_SYNTH,  /* size + mtime in s (nginx gives no getetag) */
};

static const struct smux_backend_ops davb_ops;

static struct davb *davb_from(struct smux_backend *b)
{
	return b && b->ops == &davb_ops ? (struct davb *)b : NULL;
}

static const char *name_of(struct davb *d)
{
	return d->base.name;
}

static bool key_is_dir(const char *key)
{
	size_t n = strlen(key);

	return n == 0 || key[n - 1] == '/';
}

/* "<base_url><escaped key>" (+ '/' when @slash and the key has none) in a
 * new heap string; NULL when out of memory. */
static char *davb_url(struct davb *d, const char *key, bool slash)
{
	return smux__http_key_url(d->base_url, key, slash);
}

static int davb_nomem(struct davb *d, struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_NO_MEMORY, name_of(d), NULL);
}

/* "METHOD key" for error messages (never a URL: it could carry more
 * than the key), the key cut at 200 bytes. */
static const char *what_of(char *buf, size_t cap, const char *method,
			   const char *key)
{
	snprintf(buf, cap, "%s \"%.200s\"", method, key);
	return buf;
}

static int davb_read_only(struct davb *d, const char *what, const char *key,
			  struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_NOT_SUPPORTED, name_of(d),
			      "%s \"%s\": read-only plain HTTP backend "
			      "(webdav = false)",
			      what, key);
}

/*
 * Fills @info. The version token is the server's etag when the instance
 * uses them (weak or not: Apache marks an etag weak during the second its
 * file changed, the same version a second later is strong), else size and
 * mtime in seconds.
 */
static void davb_fill_info(struct davb *d, struct smux_info *info, bool is_dir,
			   uint64_t size, int64_t mtime_ns,
			   const char *server_etag)
{
	smux_info_clear(info);
	info->mode =
		is_dir ? (S_IFDIR | DAVB_DIR_MODE) : (S_IFREG | DAVB_FILE_MODE);
	info->mode_default = true; /* until a kept mode says otherwise */
	info->size = is_dir ? 0 : size;
	info->mtime_ns = mtime_ns;
	info->nlink = 1;
	if (is_dir)
		return;
	if (atomic_load(&d->etags) == DAVB_ETAGS_SERVER && server_etag &&
	    server_etag[0]) {
		if (strncmp(server_etag, "W/", 2) == 0)
			server_etag += 2;
		snprintf(info->etag, sizeof(info->etag), "%s", server_etag);
		return;
	}
	snprintf(info->etag, sizeof(info->etag), "%llx-%llx",
		 (unsigned long long)size,
		 (unsigned long long)(mtime_ns / 1000000000LL));
}

/* Fills @info from a PROPFIND entry, smuxfs's properties first. */
static void davb_fill_entry(struct davb *d, struct smux_info *info,
			    const struct smux__dav_entry *e)
{
	davb_fill_info(d, info, e->is_dir, e->size,
		       e->has_smtime ? e->smtime_ns : e->mtime_ns, e->etag);
	if (e->has_smode && !e->is_dir) {
		info->mode = S_IFREG | (e->smode & 07777);
		info->mode_default = false;
	}
	/* the synthesized token stays the server's mtime: a rewrite moves
	 * it even when the kept mtime is the same */
	if (atomic_load(&d->etags) != DAVB_ETAGS_SERVER && !e->is_dir)
		snprintf(info->etag, sizeof(info->etag), "%llx-%llx",
			 (unsigned long long)e->size,
			 (unsigned long long)(e->mtime_ns / 1000000000LL));
}

/* ---- PROPFIND ---- */

static int parser_sink_write(void *arg, const void *data, size_t len)
{
	int rc = smux__dav_parser_feed(arg, data, len, false);

	/* a parse error is the server's, not the sink's: -ECANCELED keeps
	 * it from being taken for a local failure */
	return rc < 0 ? -ECANCELED : 0;
}

static int parser_sink_rewind(void *arg)
{
	return smux__dav_parser_reset(arg);
}

/*
 * PROPFIND @depth ("0" or "1") on @key (as a collection when @as_dir).
 * On success *@out is the parser holding the answer (the caller frees it).
 * 404 is KEY_NOT_FOUND.
 */
static int davb_propfind(struct davb *d, const struct smux_ctx *ctx,
			 const char *key, bool as_dir, const char *depth,
			 struct smux__dav_parser **out, struct smux_error *err)
{
	const char *hdrs[3];
	char depth_hdr[16], target[SMUX_KEY_MAX + 512], what[256];
	struct smux__http_req req = {.method = "PROPFIND"};
	struct smux__http_resp resp;
	struct smux__dav_parser *p = NULL;
	struct smux_source body;
	struct smux_sink sink;
	char *url;
	int rc;

	*out = NULL;
	url = davb_url(d, key, as_dir);
	if ((size_t)snprintf(target, sizeof(target), "%s%s", d->base_path,
			     key) >= sizeof(target) ||
	    !url || smux__dav_parser_new(target, &p) < 0) {
		free(url);
		return davb_nomem(d, err);
	}
	snprintf(depth_hdr, sizeof(depth_hdr), "Depth: %s", depth);
	hdrs[0] = depth_hdr;
	hdrs[1] = "Content-Type: application/xml; charset=\"utf-8\"";
	hdrs[2] = NULL;
	smux_source_buf(&body, propfind_body, sizeof(propfind_body) - 1);
	smux_sink_cb(&sink, parser_sink_write, parser_sink_rewind, p);
	req.url = url;
	req.headers = hdrs;
	req.body = &body;
	req.sink = &sink;
	req.max_body = DAVB_LIST_MAX;
	req.what = what_of(what, sizeof(what), "PROPFIND", key);
	rc = smux__http_do(d->http, ctx, &req, &resp, err);
	if (rc == 0 && resp.status != 207) {
		rc = smux_error_set(err, SMUX_E_BAD_RESPONSE, name_of(d),
				    "PROPFIND \"%s\": HTTP %ld, not 207", key,
				    resp.status);
		err->e.http_status = (int)resp.status;
	}
	if (rc == 0 || (rc < 0 && sink.error == 0 && resp.status == 207 &&
			err->e.code != SMUX_E_BAD_RESPONSE)) {
		if (smux__dav_parser_feed(p, "", 0, true) < 0)
			rc = smux_error_set(err, SMUX_E_BAD_RESPONSE,
					    name_of(d), "PROPFIND \"%s\": %s",
					    key, smux__dav_parser_error(p));
	} else if (rc < 0 && smux__dav_parser_feed(p, "", 0, false) < 0 &&
		   resp.status == 207) {
		/* the parser stopped the transfer */
		rc = smux_error_set(err, SMUX_E_BAD_RESPONSE, name_of(d),
				    "PROPFIND \"%s\": %s", key,
				    smux__dav_parser_error(p));
	}
	free(url);
	if (rc < 0) {
		smux__dav_parser_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/*
 * Decides once where version tokens come from: a PROPFIND of the root
 * tells whether the server has getetag. Plain HTTP uses the ETag header
 * (HEAD and GET agree). A failure leaves it undecided (asked again).
 */
static int davb_learn_etags(struct davb *d, const struct smux_ctx *ctx,
			    struct smux_error *err)
{
	struct smux__dav_parser *p;
	const struct smux__dav_entry *self;
	int rc, mode;

	if (atomic_load(&d->etags) != DAVB_ETAGS_UNKNOWN)
		return 0;
	if (!d->webdav) {
		atomic_store(&d->etags, DAVB_ETAGS_SERVER);
		return 0;
	}
	rc = davb_propfind(d, ctx, "", true, "0", &p, err);
	if (rc < 0)
		return rc;
	self = smux__dav_parser_self(p);
	mode = self && self->etag[0] ? DAVB_ETAGS_SERVER : DAVB_ETAGS_SYNTH;
	atomic_store(&d->etags, mode);
	smux__dav_parser_free(p);
	return 0;
}

/* ---- head ---- */

static int davb_head_dav(struct davb *d, const struct smux_ctx *ctx,
			 const char *key, struct smux_info *info,
			 struct smux_error *err)
{
	const struct smux__dav_entry *self;
	struct smux__dav_parser *p;
	bool want_dir = key_is_dir(key);
	int rc;

	rc = davb_learn_etags(d, ctx, err);
	if (rc < 0)
		return rc;
	rc = davb_propfind(d, ctx, key, want_dir, "0", &p, err);
	if (rc == -EIO && err->e.http_status >= 300 &&
	    err->e.http_status < 400 && !want_dir) {
		/* a collection named without its slash: ask it so */
		rc = davb_propfind(d, ctx, key, true, "0", &p, err);
	}
	if (rc < 0)
		return rc;
	self = smux__dav_parser_self(p);
	if (!self || (want_dir && !self->is_dir)) {
		smux__dav_parser_free(p);
		return smux_error_set(err, SMUX_E_KEY_NOT_FOUND, name_of(d),
				      "no such key: %s", key);
	}
	davb_fill_entry(d, info, self);
	smux__dav_parser_free(p);
	return 0;
}

static int davb_head_plain(struct davb *d, const struct smux_ctx *ctx,
			   const char *key, struct smux_info *info,
			   struct smux_error *err)
{
	struct smux__http_req req = {.method = "HEAD"};
	struct smux__http_resp resp;
	char *url = davb_url(d, key, false), what[256];
	size_t ll;
	int rc;

	if (!url)
		return davb_nomem(d, err);
	req.url = url;
	req.what = what_of(what, sizeof(what), "HEAD", key);
	rc = smux__http_do(d->http, ctx, &req, &resp, err);
	free(url);
	ll = strlen(resp.location);
	if (rc < 0 && (resp.status == 301 || resp.status == 302) && ll &&
	    resp.location[ll - 1] == '/') {
		smux_error_clear(err);
		davb_fill_info(d, info, true, 0, 0, NULL);
		return 0;
	}
	if (rc < 0)
		return rc;
	davb_fill_info(d, info, key_is_dir(key),
		       resp.content_length > 0 ? (uint64_t)resp.content_length
					       : 0,
		       smux__http_parse_date(resp.last_modified) > 0
			       ? smux__http_parse_date(resp.last_modified)
			       : 0,
		       resp.etag);
	return 0;
}

static int davb_head(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_info *info,
		     struct smux_error *err)
{
	struct davb *d = davb_from(b);
	struct smux_info scratch;
	int rc = davb_learn_etags(d, ctx, err);

	if (rc < 0)
		return rc;
	if (!info)
		info = &scratch;
	return d->webdav ? davb_head_dav(d, ctx, key, info, err)
			 : davb_head_plain(d, ctx, key, info, err);
}

/* ---- get ---- */

/* The caller's sink behind a check of the answer's version. */
struct get_state {
	struct davb *d;
	struct smux_sink *out;
	const char *if_match;
	struct smux__http_resp *resp;
	uint64_t off, len;	       /* the range asked for */
	struct smux__http_range range; /* what of the body is asked for */
	bool checked;
	bool stale;  /* the answer is another version than if_match */
	bool bad;    /* an answer of no version: not the object's size */
	bool untold; /* the answer carried no validator (lighttpd) */
	struct smux_info info;
};

/* Size and mtime of the answer: the total of Content-Range, else
 * Content-Length. */
static void get_answer_info(struct get_state *g)
{
	uint64_t size = 0;

	if (!smux__http_answer_size(g->resp, &size))
		size = 0;
	davb_fill_info(g->d, &g->info, false, size,
		       smux__http_parse_date(g->resp->last_modified) > 0
			       ? smux__http_parse_date(g->resp->last_modified)
			       : 0,
		       g->resp->etag);
}

static int get_check(struct get_state *g)
{
	bool told;

	if (g->checked)
		return g->stale || g->bad ? -ECANCELED : 0;
	g->checked = true;
	get_answer_info(g);
	/* an answer without the validator the version token is made of
	 * cannot say which version it is: lighttpd's mod_webdav sends GETs
	 * without ETag or Last-Modified while its PROPFIND gives getetag,
	 * and every read was ESTALE (s40-t2). Taken for the version asked
	 * for; the daemon still checks that it holds that version's size */
	told = atomic_load(&g->d->etags) == DAVB_ETAGS_SERVER
		       ? g->resp->etag[0] != '\0'
		       : g->resp->last_modified[0] != '\0';
	g->untold = !told;
	if (!told && g->if_match && g->if_match[0]) {
		unsigned long long tsize, tsec;
		uint64_t size;

		/* a token of size and mtime (davb_fill_info) tells the size:
		 * an answer of another size that does not say its version is
		 * no answer (a proxy's error page sent as a 200: s43-t2),
		 * and the read goes to another member */
		if (atomic_load(&g->d->etags) != DAVB_ETAGS_SERVER &&
		    sscanf(g->if_match, "%llx-%llx", &tsize, &tsec) == 2 &&
		    smux__http_answer_size(g->resp, &size) && size != tsize) {
			g->bad = true;
			return -ECANCELED;
		}
		snprintf(g->info.etag, sizeof(g->info.etag), "%s", g->if_match);
	}
	if (told && g->if_match && g->if_match[0] &&
	    strcmp(g->if_match, g->info.etag) != 0) {
		g->stale = true;
		return -ECANCELED;
	}
	return 0;
}

static int get_sink_write(void *arg, const void *data, size_t len)
{
	struct get_state *g = arg;
	int rc;

	if (!g->checked) {
		rc = get_check(g);
		if (rc < 0)
			return rc;
		/* a server that ignored the Range sends it all (200) */
		smux__http_range_start(&g->range, g->resp, g->off, g->len);
	} else if (g->stale || g->bad) {
		return -ECANCELED;
	}
	return smux__http_range_write(&g->range, data, len, g->out);
}

static int get_sink_rewind(void *arg)
{
	struct get_state *g = arg;

	g->checked = false;
	g->stale = false;
	g->bad = false;
	return smux_sink_rewind(g->out);
}

/* @g's answer names no version and is not of the version's size: the
 * version changed (a head says so: PRECONDITION_FAILED, as a told answer
 * would; s43-t3), else no answer of the object (BAD_RESPONSE). */
static int bad_answer(struct smux_backend *b, const struct smux_ctx *ctx,
		      struct davb *d, const char *key,
		      const struct get_state *g, struct smux_error *err)
{
	struct smux_info now;
	struct smux_error e;

	if (davb_head(b, ctx, key, &now, &e) == 0 &&
	    strcmp(now.etag, g->if_match) != 0)
		return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				      name_of(d), "get \"%s\": version changed",
				      key);
	return smux_error_set(err, SMUX_E_BAD_RESPONSE, name_of(d),
			      "get \"%s\": a %ld answer of %llu bytes without "
			      "ETag or Last-Modified for a version of another "
			      "size (%s)",
			      key, g->resp->status,
			      (unsigned long long)g->info.size, g->if_match);
}

/* A follow-up of a ranged GET (smux__http_range_rest). */
struct get_more {
	struct davb *d;
	const struct smux_ctx *ctx;
	const char *key;
	struct smux__http_resp resp;
};

static int get_more_fetch(void *arg, const char *range, const char *if_match,
			  struct smux_sink *sink, struct smux_error *err)
{
	struct get_more *m = arg;
	struct smux__http_range_hdrs h;
	char what[256];
	struct smux__http_req req = {
		.method = "GET", .headers = h.list, .sink = sink};
	char *url = davb_url(m->d, m->key, false);
	int rc;

	if (!url)
		return davb_nomem(m->d, err);
	smux__http_range_hdrs(&h, range, if_match);
	req.url = url;
	req.what = what_of(what, sizeof(what), "GET", m->key);
	rc = smux__http_do(m->d->http, m->ctx, &req, &m->resp, err);
	free(url);
	return rc;
}

static int davb_get(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_get_opts *opts,
		    struct smux_sink *sink, struct smux_info *info,
		    struct smux_error *err)
{
	struct davb *d = davb_from(b);
	struct smux__http_req req = {.method = "GET"};
	struct smux__http_resp resp;
	struct get_state g = {.d = d, .out = sink, .resp = &resp};
	const char *hdrs[2] = {NULL, NULL};
	struct smux_sink wrap;
	char range[64], what[256];
	uint64_t off = opts ? opts->offset : 0;
	uint64_t len = opts ? opts->length : SMUX_LEN_ALL;
	struct smux_info hinfo = {0};
	size_t ll;
	char *url;
	bool started;
	int rc;

	g.if_match = opts ? opts->if_match : NULL;
	rc = davb_learn_etags(d, ctx, err);
	if (rc < 0)
		return rc;
	if (key_is_dir(key)) {
		rc = davb_head(b, ctx, key, &hinfo, err);
		if (rc < 0)
			return rc;
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, name_of(d),
				      "get \"%s\": is a directory", key);
	}
	g.off = off;
	g.len = len;
	if (len == 0 || off >= (uint64_t)INT64_MAX) {
		/* nothing to fetch: the version check and info only */
		rc = davb_head(b, ctx, key, &hinfo, err);
		if (rc < 0)
			return rc;
		if ((hinfo.mode & S_IFMT) == S_IFDIR)
			return smux_error_set(
				err, SMUX_E_IS_DIRECTORY, name_of(d),
				"get \"%s\": is a directory", key);
		if (g.if_match && g.if_match[0] &&
		    strcmp(g.if_match, hinfo.etag) != 0)
			return smux_error_set(
				err, SMUX_E_PRECONDITION_FAILED, name_of(d),
				"get \"%s\": version changed", key);
		if (info)
			*info = hinfo;
		return 0;
	}
	if (off > 0 || len != SMUX_LEN_ALL) {
		if (len == SMUX_LEN_ALL || off + len < off)
			snprintf(range, sizeof(range), "Range: bytes=%llu-",
				 (unsigned long long)off);
		else
			snprintf(range, sizeof(range), "Range: bytes=%llu-%llu",
				 (unsigned long long)off,
				 (unsigned long long)(off + len - 1));
		hdrs[0] = range;
	}
	url = davb_url(d, key, false);
	if (!url)
		return davb_nomem(d, err);
	smux_sink_cb(&wrap, get_sink_write,
		     smux_sink_can_rewind(sink) ? get_sink_rewind : NULL, &g);
	req.url = url;
	req.headers = hdrs;
	req.sink = &wrap;
	req.what = what_of(what, sizeof(what), "GET", key);
	rc = smux__http_do(d->http, ctx, &req, &resp, err);
	free(url);
	if (g.stale)
		return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				      name_of(d), "get \"%s\": version changed",
				      key);
	if (g.bad)
		return bad_answer(b, ctx, d, key, &g, err);
	if (g.range.bad) /* not the range asked for: refused */
		return smux__http_range_check(&g.range, true, &resp, off, len,
					      name_of(d), key, err);
	if (rc < 0 && sink->error) /* the caller's sink failed: LOCAL */
		return smux_error_make_local(err, sink->error);
	ll = strlen(resp.location);
	if (rc < 0 && (resp.status == 301 || resp.status == 302) && ll &&
	    resp.location[ll - 1] == '/')
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, name_of(d),
				      "get \"%s\": is a directory", key);
	if (rc == -ENOENT && d->webdav) {
		/* Apache answers a GET of a collection named without its
		 * slash with 404: tell a directory from nothing */
		struct smux_error e2 = {0};

		if (davb_head_dav(d, ctx, key, &hinfo, &e2) == 0 &&
		    (hinfo.mode & S_IFMT) == S_IFDIR)
			return smux_error_set(
				err, SMUX_E_IS_DIRECTORY, name_of(d),
				"get \"%s\": is a directory", key);
		return rc;
	}
	if (rc < 0 && resp.status == 416) {
		/* a range past the end: no bytes, but the object exists */
		smux_error_clear(err);
		rc = davb_head(b, ctx, key, &hinfo, err);
		if (rc < 0)
			return rc;
		if (g.if_match && g.if_match[0] &&
		    strcmp(g.if_match, hinfo.etag) != 0)
			return smux_error_set(
				err, SMUX_E_PRECONDITION_FAILED, name_of(d),
				"get \"%s\": version changed", key);
		if (info)
			*info = hinfo;
		return 0;
	}
	if (rc < 0)
		return rc;
	started = g.checked;
	if (get_check(&g) < 0) /* an empty answer reaches no sink write */
		return g.bad ? bad_answer(b, ctx, d, key, &g, err)
			     : smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
					      name_of(d),
					      "get \"%s\": version changed",
					      key);
	/* every byte of the range came (a body cut short is no content) */
	rc = smux__http_range_check(&g.range, started, &resp, off, len,
				    name_of(d), key, err);
	if (rc == 0) { /* a 206 that covered less than asked: the rest */
		struct get_more m = {.d = d, .ctx = ctx, .key = key};

		rc = smux__http_range_rest(&g.range, get_more_fetch, &m,
					   &m.resp, sink, name_of(d), key, err);
	}
	if (rc < 0)
		return rc;
	if (info && d->webdav && !atomic_load(&d->no_props) &&
	    atomic_load(&d->etags) == DAVB_ETAGS_SERVER) {
		/* the kept mode and mtime live in properties a GET does not
		 * carry: one PROPFIND, taken when it names the same version
		 * - or, after an answer that named none and no version was
		 * asked for (lighttpd), one of the size received, with its
		 * token: a setattr that rewrites the object (utimensat of a
		 * closed file) put it back with the GET's default mode and
		 * made every 0600 file 0644 (s44-t2) */
		struct smux_error e2 = {0};
		bool any = g.untold && !(g.if_match && g.if_match[0]);

		if (davb_head_dav(d, ctx, key, &hinfo, &e2) == 0 &&
		    (strcmp(hinfo.etag, g.info.etag) == 0 ||
		     (any && hinfo.size == g.info.size))) {
			g.info.mode = hinfo.mode;
			g.info.mode_default = hinfo.mode_default;
			g.info.mtime_ns = hinfo.mtime_ns;
			memcpy(g.info.etag, hinfo.etag, sizeof(g.info.etag));
		}
	}
	if (info)
		*info = g.info;
	return 0;
}

/* ---- writes ---- */

/* The longest 207 body to a change read for its outcome. */
#define DAV_OUTCOME_MAX ((size_t)64 * 1024)

/* The body of an answer to a change, kept (up to DAV_OUTCOME_MAX bytes,
 * the rest dropped: a success page of any length is no error) for a 207's
 * outcome. */
struct dav_body {
	char *buf;
	size_t len, cap;
	bool over; /* bytes were dropped */
};

static int dav_body_write(void *arg, const void *data, size_t len)
{
	struct dav_body *b = arg;

	if (b->over || b->len + len > DAV_OUTCOME_MAX) {
		b->over = true;
		return 0;
	}
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *nb;

		while (cap < b->len + len)
			cap *= 2;
		nb = realloc(b->buf, cap);
		if (!nb)
			return -ENOMEM;
		b->buf = nb;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, data, len);
	b->len += len;
	return 0;
}

static int dav_body_rewind(void *arg)
{
	struct dav_body *b = arg;

	b->len = 0;
	b->over = false;
	return 0;
}

/*
 * The outcome of a change answered 207 Multi-Status with @b: 0 when every
 * status in it is 2xx; else a negative errno with @err filled for @what,
 * and *@status the first status that is not 2xx (0 when the body is no
 * readable multistatus, or one too long to read).
 */
static int dav_outcome(struct davb *d, const struct dav_body *b,
		       const char *what, long *status, struct smux_error *err)
{
	long failed = b->over ? -EBADMSG
			      : smux__dav_multistatus_failure(
					b->buf ? b->buf : "", b->len);

	*status = failed > 0 ? failed : 0;
	if (failed == 0)
		return 0;
	if (failed == -ENOMEM)
		return davb_nomem(d, err);
	if (failed < 0)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, name_of(d),
				      "%s: a 207 that is no readable "
				      "multistatus",
				      what);
	return smux__http_status_error(err, failed, false, name_of(d), what);
}

/*
 * A request without a body (MKCOL, DELETE, MOVE, COPY) or with the given
 * headers. A 207 Multi-Status is a success only when every status in it
 * is: a server answers a DELETE or MOVE of a locked resource (or one it
 * may not touch) with a 207 whose response says 423 or 403, and taken for
 * done, the file stayed or kept its old name while a mirror's other
 * replica changed, with nothing left to replay (s40-t2).
 */
static int davb_simple(struct davb *d, const struct smux_ctx *ctx,
		       const char *method, const char *key, const char *url,
		       const char *const *hdrs, bool no_retry,
		       struct smux__http_resp *resp, struct smux_error *err)
{
	char what[256];
	struct dav_body body = {0};
	struct smux_sink sink;
	struct smux__http_req req = {
		.method = method,
		.url = url,
		.headers = hdrs,
		.no_retry = no_retry,
		.sink = &sink,
		.what = what_of(what, sizeof(what), method, key)};
	long status;
	int rc;

	smux_sink_cb(&sink, dav_body_write, dav_body_rewind, &body);
	rc = smux__http_do(d->http, ctx, &req, resp, err);
	if (rc == 0 && resp->status == 207)
		rc = dav_outcome(d, &body, what, &status, err);
	free(body.buf);
	return rc;
}

/*
 * Makes the collection @dir ("a/b/", ending in '/') and the missing ones
 * above it: MKCOL the deepest first, climbing only on 409 (parent
 * missing), so an existing tree costs one request.
 */
static int davb_mkcol(struct davb *d, const struct smux_ctx *ctx,
		      const char *dir, unsigned depth, bool verify,
		      struct smux_error *err)
{
	struct smux__http_resp resp;
	char parent[SMUX_KEY_MAX + 1];
	size_t n = strlen(dir);
	char *url;
	int rc;

	if (n == 0 || depth > SMUX_KEY_MAX / 2)
		return 0; /* the root always exists */
	url = davb_url(d, dir, true);
	if (!url)
		return davb_nomem(d, err);
	rc = davb_simple(d, ctx, "MKCOL", dir, url, NULL, false, &resp, err);
	if (rc < 0 && resp.status == 409 && n < sizeof(parent)) {
		/* the parent is missing: make it, then this one */
		memcpy(parent, dir, n + 1);
		parent[n - 1] = '\0';
		{
			char *slash = strrchr(parent, '/');

			if (slash)
				slash[1] = '\0';
			else
				parent[0] = '\0';
		}
		rc = davb_mkcol(d, ctx, parent, depth + 1, false, err);
		if (rc == 0)
			rc = davb_simple(d, ctx, "MKCOL", dir, url, NULL, false,
					 &resp, err);
	}
	free(url);
	if (rc < 0 && resp.status == 405 && !verify) {
		/* something is there: a collection, or a file that the
		 * request it makes way for will stumble on */
		smux_error_clear(err);
		return 0;
	}
	if (rc < 0 && resp.status == 405) {
		/* something is there already: fine when a collection */
		struct smux_info info;

		smux_error_clear(err);
		rc = davb_head_dav(d, ctx, dir, &info, err);
		if (rc == -ENOENT)
			return smux_error_set(err, SMUX_E_NOT_DIRECTORY,
					      name_of(d),
					      "mkdir \"%s\": a file is in the "
					      "way",
					      dir);
	}
	return rc;
}

/* The parent collection of @key ("a/b/c" -> "a/b/", "a" -> ""). */
static void parent_of(const char *key, char *out, size_t cap)
{
	size_t n = strlen(key);

	if (n && key[n - 1] == '/')
		n--;
	while (n && key[n - 1] != '/')
		n--;
	if (n >= cap)
		n = 0;
	memcpy(out, key, n);
	out[n] = '\0';
}

/* "Date: <RFC 1123>" for an mtime: nginx keeps it as the file's mtime. */
static void date_header(int64_t mtime_ns, char *out, size_t cap)
{
	time_t t = (time_t)(mtime_ns / 1000000000LL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "Date: %a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* The smuxfs properties of a put's @opts, as PROPPATCH elements ("" when
 * not asked for). */
static void prop_mtime(const struct smux_put_opts *opts, char *out, size_t cap)
{
	out[0] = '\0';
	if (opts->mtime_ns > 0)
		snprintf(out, cap, "<S:mtime>%lld</S:mtime>",
			 (long long)opts->mtime_ns);
}

static void prop_mode(const struct smux_put_opts *opts, char *out, size_t cap)
{
	out[0] = '\0';
	if ((opts->flags & SMUX_PUT_MODE) || (opts->mode & 07777))
		snprintf(out, cap, "<S:mode>%u</S:mode>",
			 (unsigned)(opts->mode & 07777));
}

/* One PROPPATCH setting @props (smuxfs elements) on @key. A server
 * without PROPPATCH (nginx: 405) is remembered and not asked again. */
static int davb_proppatch_send(struct davb *d, const struct smux_ctx *ctx,
			       const char *key, const char *props,
			       struct smux_error *err)
{
	const char *hdrs[] = {
		"Content-Type: application/xml; charset=\"utf-8\"", NULL};
	struct smux__http_req req = {.method = "PROPPATCH"};
	struct smux__http_resp resp;
	struct smux_source body;
	struct smux_sink out;
	struct dav_body kept = {0};
	char xml[512], what[256];
	long status;
	char *url;
	int n, rc;

	n = snprintf(xml, sizeof(xml),
		     "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
		     "<D:propertyupdate xmlns:D=\"DAV:\" xmlns:S=\"%s\">"
		     "<D:set><D:prop>%s</D:prop></D:set>"
		     "</D:propertyupdate>\n",
		     SMUX__DAV_NS, props);
	url = davb_url(d, key, false);
	if (!url)
		return davb_nomem(d, err);
	smux_source_buf(&body, xml, (uint64_t)n);
	smux_sink_cb(&out, dav_body_write, dav_body_rewind, &kept);
	req.what = what_of(what, sizeof(what), "PROPPATCH", key);
	req.url = url;
	req.headers = hdrs;
	req.body = &body;
	req.sink = &out;
	rc = smux__http_do(d->http, ctx, &req, &resp, err);
	free(url);
	/* a 207 whose propstat refused the properties (rclone serve
	 * webdav: 403) kept nothing, as a 405 says; another refusal (a
	 * lock: 423) is this put's, not the server's for good */
	if (rc == 0 && resp.status == 207) {
		rc = dav_outcome(d, &kept, what, &status, err);
		if (rc < 0)
			resp.status = status;
	}
	free(kept.buf);
	if (rc < 0 &&
	    (resp.status == 405 || resp.status == 501 || resp.status == 403)) {
		atomic_store(&d->no_props, true);
		smux_error_clear(err);
		return 0;
	}
	return rc;
}

/*
 * Keeps the mtime and mode of a put as smuxfs dead properties (one
 * PROPPATCH, or one per property on a server that keeps only one of
 * several; Apache stores them, COPY and MOVE carry them). A server without
 * PROPPATCH keeps the mtime of the Date header at best.
 */
static int davb_proppatch(struct davb *d, const struct smux_ctx *ctx,
			  const char *key, const struct smux_put_opts *opts,
			  bool *sent_both, struct smux_error *err)
{
	char mode[64], mtime[64], both[128];

	*sent_both = false;
	if (atomic_load(&d->no_props))
		return 0;
	prop_mtime(opts, mtime, sizeof(mtime));
	prop_mode(opts, mode, sizeof(mode));
	if (!mode[0] || !mtime[0])
		return mode[0] || mtime[0]
			       ? davb_proppatch_send(d, ctx, key,
						     mode[0] ? mode : mtime,
						     err)
			       : 0;
	if (atomic_load(&d->one_prop)) {
		int rc = davb_proppatch_send(d, ctx, key, mtime, err);

		return rc < 0 ? rc
			      : davb_proppatch_send(d, ctx, key, mode, err);
	}
	snprintf(both, sizeof(both), "%s%s", mtime, mode);
	*sent_both = true;
	return davb_proppatch_send(d, ctx, key, both, err);
}

/*
 * After a put's PROPPATCH of both properties (this put's: a put of another
 * thread that did the same sets one_prop meanwhile) and its PROPFIND
 * (@info, the put's own version): a property the server answered 2xx for
 * but did not keep (lighttpd 1.4.69 keeps only the first of a PROPPATCH's
 * properties: install -m 755 made a 0644 file, s44-t2) is set again on
 * its own, and the server is asked one property at a time from then on.
 */
static int davb_props_recheck(struct davb *d, const struct smux_ctx *ctx,
			      const char *key, const struct smux_put_opts *opts,
			      struct smux_info *info, struct smux_error *err)
{
	char mode[64], mtime[64];
	bool lost_mode, lost_mtime;
	int rc = 0;

	if (atomic_load(&d->no_props))
		return 0;
	prop_mtime(opts, mtime, sizeof(mtime));
	prop_mode(opts, mode, sizeof(mode));
	lost_mode = (info->mode & 07777) != (opts->mode & 07777);
	lost_mtime = info->mtime_ns != opts->mtime_ns;
	if (!lost_mode && !lost_mtime)
		return 0;
	atomic_store(&d->one_prop, true);
	if (lost_mtime)
		rc = davb_proppatch_send(d, ctx, key, mtime, err);
	if (rc == 0 && lost_mode)
		rc = davb_proppatch_send(d, ctx, key, mode, err);
	/* what the server keeps now, not what was asked (one that answers
	 * 2xx and keeps no property at all shows its defaults) */
	if (rc == 0)
		rc = davb_head_dav(d, ctx, key, info, err);
	return rc;
}

static int davb_put(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, const struct smux_source *src,
		    const struct smux_put_opts *opts, struct smux_info *info,
		    struct smux_error *err)
{
	struct davb *d = davb_from(b);
	struct smux__http_req req = {.method = "PUT"};
	struct smux__http_resp resp;
	char date[64], parent[SMUX_KEY_MAX + 1], what[256];
	const char *hdrs[3] = {"Content-Type: application/octet-stream", NULL,
			       NULL};
	struct smux_info hinfo = {0};
	bool both = false;
	char *url;
	int rc;

	if (!d->webdav)
		return davb_read_only(d, "put", key, err);
	if (opts && (opts->mode & S_IFMT) && (opts->mode & S_IFMT) != S_IFREG &&
	    (opts->mode & S_IFMT) != S_IFDIR)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, name_of(d),
				      "put \"%s\": WebDAV stores no symlinks "
				      "or special files",
				      key);
	if (key_is_dir(key)) {
		rc = davb_mkcol(d, ctx, key, 0, true, err);
		if (rc == 0 && info)
			rc = davb_head_dav(d, ctx, key, info, err);
		return rc;
	}
	if (opts && opts->mtime_ns > 0) {
		date_header(opts->mtime_ns, date, sizeof(date));
		hdrs[1] = date;
	}
	url = davb_url(d, key, false);
	if (!url)
		return davb_nomem(d, err);
	req.url = url;
	req.headers = hdrs;
	req.body = src;
	req.what = what_of(what, sizeof(what), "PUT", key);
	rc = smux__http_do(d->http, ctx, &req, &resp, err);
	/* a missing parent collection (409: Apache, lighttpd; nginx
	 * without create_full_put_path; 404: rclone serve webdav, Go's
	 * x/net/webdav): make it and put again - a few times, as writers
	 * of keys under the same new directory race to make it
	 * (conf_test_concurrent_keys on Apache: a put still answered 409
	 * right after another thread's MKCOL of its parent). A 404 of a
	 * key at the root is no missing parent: the error stands */
	for (int tries = 0;
	     rc < 0 &&
	     (resp.status == 409 || (resp.status == 404 && strchr(key, '/'))) &&
	     tries < 3;
	     tries++) {
		parent_of(key, parent, sizeof(parent));
		smux_error_clear(err);
		rc = davb_mkcol(d, ctx, parent, 0, false, err);
		if (rc == 0)
			rc = smux__http_do(d->http, ctx, &req, &resp, err);
	}
	free(url);
	if (rc < 0 && (resp.status == 405 || resp.status == 409)) {
		/* a collection is in the way, or a file above the key */
		struct smux_error e2 = {0};

		if (davb_head_dav(d, ctx, key, &hinfo, &e2) == 0 &&
		    (hinfo.mode & S_IFMT) == S_IFDIR)
			return smux_error_set(
				err, SMUX_E_IS_DIRECTORY, name_of(d),
				"put \"%s\": is a directory", key);
		return smux_error_set(err, SMUX_E_NOT_DIRECTORY, name_of(d),
				      "put \"%s\": a parent is not a "
				      "directory",
				      key);
	}
	if (rc < 0)
		return rc;
	if (opts) {
		rc = davb_proppatch(d, ctx, key, opts, &both, err);
		if (rc < 0)
			return rc;
	}
	/* what the server stored (its mtime): one PROPFIND, which also
	 * says whether it stored all of it (a server that answered before
	 * it read the whole body acknowledged a cut file; libcurl may have
	 * taken the whole body into its buffers by then, http_client.c
	 * cannot always tell; a server or proxy may just drop bytes, or
	 * all of them: acknowledged, the file was half there or gone,
	 * s40-t2). Another version there, one the PUT's ETag does not
	 * name, is another writer's, whatever its size; without an ETag in
	 * the answer (nginx, Apache), fewer bytes than sent are taken for
	 * a cut, more for another writer's (a writer racing this one on
	 * the key may get this error: conformance's CONF_F_RACY_PUT; the
	 * bytes it found are not this put's all the same). Asked for
	 * every put: the daemon's commit wants no attributes back, and it
	 * is the put that must not be acknowledged. */
	if (!info)
		info = &hinfo;
	rc = davb_head_dav(d, ctx, key, info, err);
	if (rc == -ENOENT)
		return smux_error_set(
			err, SMUX_E_BAD_RESPONSE, name_of(d),
			"put \"%s\": answered %ld, yet the server "
			"holds nothing there",
			key, resp.status);
	/* the check itself failed (a timeout, a 5xx): the PUT's answer
	 * stands, unverified, unless its caller wanted what it stored */
	if (rc < 0 && info == &hinfo) {
		smux_error_clear(err);
		return 0;
	}
	if (rc == 0 && info->size != src->length &&
	    ((!resp.etag[0] && info->size < src->length) ||
	     strcmp(strncmp(resp.etag, "W/", 2) == 0 ? resp.etag + 2
						     : resp.etag,
		    info->etag) == 0))
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, name_of(d),
				      "put \"%s\": the server holds %llu bytes "
				      "of the %llu sent",
				      key, (unsigned long long)info->size,
				      (unsigned long long)src->length);
	/* its properties: only on what looks like this put's version */
	if (rc == 0 && both && info->size == src->length)
		rc = davb_props_recheck(d, ctx, key, opts, info, err);
	return rc;
}

static int davb_del(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err)
{
	struct davb *d = davb_from(b);
	/* Depth 0: a server refuses it on a collection instead of deleting
	 * the whole tree (a plain key never removes a directory) */
	const char *hdrs[2] = {"Depth: 0", NULL};
	struct smux__http_resp resp;
	struct smux__dav_parser *p;
	struct smux_info info = {0};
	char *url;
	int rc;

	if (!d->webdav)
		return davb_read_only(d, "delete", key, err);
	if (key_is_dir(key)) {
		if (!key[0])
			return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
					      name_of(d),
					      "cannot delete the root");
		rc = davb_propfind(d, ctx, key, true, "1", &p, err);
		if (rc == -ENOENT) {
			smux_error_clear(err);
			return 0;
		}
		if (rc < 0)
			return rc;
		if (!smux__dav_parser_self(p) ||
		    !smux__dav_parser_self(p)->is_dir) {
			smux__dav_parser_free(p);
			return 0; /* "a/" of a file names no marker */
		}
		if (smux__dav_parser_count(p) > 0 ||
		    smux__dav_parser_skipped(p) > 0) {
			smux__dav_parser_free(p);
			return smux_error_set(err, SMUX_E_NOT_EMPTY, name_of(d),
					      "delete \"%s\": not empty", key);
		}
		smux__dav_parser_free(p);
		hdrs[0] = NULL; /* an empty collection: WebDAV's default */
	}
	url = davb_url(d, key, key_is_dir(key));
	if (!url)
		return davb_nomem(d, err);
	rc = davb_simple(d, ctx, "DELETE", key, url, hdrs, false, &resp, err);
	free(url);
	if (rc == -ENOENT) {
		smux_error_clear(err);
		return 0;
	}
	if (rc < 0 && !key_is_dir(key) &&
	    (resp.status == 400 || resp.status == 403 || resp.status == 409 ||
	     (resp.status >= 300 && resp.status < 400))) {
		struct smux_error e2 = {0};

		if (davb_head_dav(d, ctx, key, &info, &e2) == 0 &&
		    (info.mode & S_IFMT) == S_IFDIR)
			return smux_error_set(
				err, SMUX_E_IS_DIRECTORY, name_of(d),
				"delete \"%s\": is a directory", key);
	}
	return rc;
}

/*
 * COPY or MOVE @src to @dst, replacing it, making @dst's parents. A
 * directory "a/" renamed to "b/" (SMUX_CAP_DIR_RENAME) is one MOVE of the
 * collection, atomic on the server, carrying what listings do not show
 * (nginx's PROPFIND hides names starting with '.': moved key by key, a
 * tree's .env stayed under the old name and went with its DELETE); never
 * onto an existing collection (Overwrite: F; it may hold such names too):
 * that one is NOT_SUPPORTED, and the caller moves the keys.
 */
static int davb_transfer(struct davb *d, const struct smux_ctx *ctx,
			 const char *method, const char *src, const char *dst,
			 struct smux_error *err)
{
	bool move = method[0] == 'M';
	bool dir = move && key_is_dir(src) && key_is_dir(dst);
	const char *hdrs[4] = {NULL, dir ? "Overwrite: F" : "Overwrite: T",
			       "Depth: 0", NULL};
	char parent[SMUX_KEY_MAX + 1];
	struct smux__http_resp resp;
	char *url = NULL, *to = NULL, *dest = NULL;
	size_t n;
	int rc;

	if (!d->webdav)
		return davb_read_only(d, method, dst, err);
	if (!dir && (key_is_dir(src) || key_is_dir(dst)))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name_of(d),
				      "%s: object keys only", method);
	url = davb_url(d, src, dir);
	to = davb_url(d, dst, dir);
	n = to ? strlen(to) + sizeof("Destination: ") : 0;
	dest = to ? malloc(n) : NULL;
	if (!url || !dest) {
		rc = davb_nomem(d, err);
		goto out;
	}
	snprintf(dest, n, "Destination: %s", to);
	hdrs[0] = dest;
	if (move)
		hdrs[2] = NULL; /* MOVE takes Depth: infinity only */
	/* the destination's collection first: nginx answers a COPY or
	 * MOVE into a missing one with 500, not 409 */
	parent_of(dst, parent, sizeof(parent));
	rc = davb_mkcol(d, ctx, parent, 0, false, err);
	if (rc < 0)
		goto out;
	/* a MOVE is not repeated after an unknown outcome (the source may
	 * be gone already); a COPY may be */
	rc = davb_simple(d, ctx, method, src, url, hdrs, move, &resp, err);
	if (rc < 0 && resp.status == 409) {
		parent_of(dst, parent, sizeof(parent));
		smux_error_clear(err);
		rc = davb_mkcol(d, ctx, parent, 0, false, err);
		if (rc == 0)
			rc = davb_simple(d, ctx, method, src, url, hdrs, move,
					 &resp, err);
	}
	if (dir && rc < 0 && resp.status == 412)
		rc = smux_error_set(err, SMUX_E_NOT_SUPPORTED, name_of(d),
				    "MOVE \"%s\": \"%s\" exists", src, dst);
out:
	free(url);
	free(to);
	free(dest);
	return rc;
}

static int davb_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *src, const char *dst, struct smux_error *err)
{
	return davb_transfer(davb_from(b), ctx, "COPY", src, dst, err);
}

static int davb_rename(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *src, const char *dst, struct smux_error *err)
{
	return davb_transfer(davb_from(b), ctx, "MOVE", src, dst, err);
}

/* A WebDAV server moves a collection in one MOVE (davb_transfer), and
 * its PROPFIND of "a" answers for the collection "a/" too (a 207 of the
 * collection, or a redirect to "a/" that davb_head_dav follows): a name
 * it does not know is neither. */
static unsigned davb_caps(struct smux_backend *b)
{
	return davb_from(b)->webdav ? SMUX_CAP_DIR_RENAME | SMUX_CAP_HEAD_DIR
				    : 0;
}

/* ---- list ---- */

struct list_item {
	char *key;
	bool is_prefix;
	struct smux_info info;
};

struct list_acc {
	struct list_item *v;
	size_t n, cap;
};

static int acc_add(struct list_acc *a, const char *dir, const char *name,
		   bool is_prefix, const struct smux_info *info)
{
	size_t dl = strlen(dir), nl = strlen(name);
	struct list_item *it;

	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct list_item *nv = realloc(a->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = cap;
	}
	it = &a->v[a->n];
	it->key = malloc(dl + nl + 2);
	if (!it->key)
		return -ENOMEM;
	memcpy(it->key, dir, dl);
	memcpy(it->key + dl, name, nl);
	it->key[dl + nl] = '\0';
	if (is_prefix) {
		it->key[dl + nl] = '/';
		it->key[dl + nl + 1] = '\0';
	}
	it->is_prefix = is_prefix;
	if (info)
		it->info = *info;
	else
		smux_info_clear(&it->info);
	a->n++;
	return 0;
}

static void acc_free(struct list_acc *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i].key);
	free(a->v);
}

static int item_cmp(const void *x, const void *y)
{
	const struct list_item *a = x, *b = y;

	return strcmp(a->key, b->key); /* byte-wise: strcmp compares
					  unsigned chars */
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/*
 * Lists the collection @dir ("" or "a/b/") into @a: with @flat, walks
 * into sub-collections that may hold keys under @prefix (an empty one
 * becomes its marker); else a sub-collection is one common prefix.
 */
static int list_dir(struct davb *d, const struct smux_ctx *ctx, const char *dir,
		    const char *prefix, bool flat, struct list_acc *a,
		    unsigned depth, struct smux_error *err)
{
	struct smux__dav_parser *p;
	size_t n, dl = strlen(dir);
	int rc = 0;

	if (depth > SMUX_KEY_MAX / 2)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, name_of(d),
				      "list: collections nested too deep");
	rc = davb_propfind(d, ctx, dir, true, "1", &p, err);
	if (rc == -ENOENT ||
	    (rc < 0 && err->e.code == SMUX_E_HTTP &&
	     (err->e.http_status == 400 || err->e.http_status == 409))) {
		/* nothing there, or a file where a collection would be
		 * (Apache: 400): an empty listing */
		smux_error_clear(err);
		return 0;
	}
	if (rc < 0)
		return rc;
	if (!smux__dav_parser_self(p) || !smux__dav_parser_self(p)->is_dir) {
		smux__dav_parser_free(p);
		return 0; /* a file where a directory was asked: empty */
	}
	n = smux__dav_parser_count(p);
	if (flat && n == 0 && dl > 0 && starts_with(dir, prefix)) {
		/* an empty directory lists as its marker */
		char name[SMUX_KEY_MAX + 1];

		memcpy(name, dir, dl - 1);
		name[dl - 1] = '\0';
		if (acc_add(a, "", name, true, NULL) < 0) {
			rc = davb_nomem(d, err);
		} else {
			davb_fill_info(d, &a->v[a->n - 1].info, true, 0, 0,
				       NULL);
			a->v[a->n - 1].is_prefix = false;
		}
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct smux__dav_entry *e = smux__dav_parser_entry(p, i);
		char key[SMUX_KEY_MAX + 2];
		struct smux_info info;
		int kl;

		kl = snprintf(key, sizeof(key), "%s%s%s", dir, e->name,
			      e->is_dir ? "/" : "");
		if (kl < 0 || (size_t)kl >= sizeof(key) ||
		    smux_key_check(key, SMUX_KEY_ALLOW_DIR, NULL, NULL) < 0)
			continue; /* a name no key can have: not ours */
		if (e->is_dir) {
			if (flat && (starts_with(key, prefix) ||
				     starts_with(prefix, key)))
				rc = list_dir(d, ctx, key, prefix, true, a,
					      depth + 1, err);
			else if (!flat && starts_with(key, prefix))
				rc = acc_add(a, dir, e->name, true, NULL) < 0
					     ? davb_nomem(d, err)
					     : 0;
			continue;
		}
		if (!starts_with(key, prefix))
			continue;
		davb_fill_entry(d, &info, e);
		if (acc_add(a, dir, e->name, false, &info) < 0)
			rc = davb_nomem(d, err);
	}
	smux__dav_parser_free(p);
	return rc;
}

static int davb_list(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *prefix, const char *delimiter, smux_list_fn fn,
		     void *arg, struct smux_error *err)
{
	struct davb *d = davb_from(b);
	char dir[SMUX_KEY_MAX + 1];
	struct list_acc a = {0};
	int rc;

	if (!d->webdav)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, name_of(d),
				      "list: a plain HTTP backend cannot "
				      "list (webdav = false)");
	if (delimiter && strcmp(delimiter, "/") != 0)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, name_of(d),
				      "list: only \"/\" delimits");
	rc = davb_learn_etags(d, ctx, err);
	if (rc < 0)
		return rc;
	parent_of(prefix, dir, sizeof(dir));
	if (key_is_dir(prefix) && prefix[0]) /* "a/b/" lists a/b/ itself */
		snprintf(dir, sizeof(dir), "%s", prefix);
	rc = list_dir(d, ctx, dir, prefix, delimiter == NULL, &a, 0, err);
	if (rc == 0 && a.n) {
		qsort(a.v, a.n, sizeof(*a.v), item_cmp);
		for (size_t i = 0; i < a.n; i++) {
			struct smux_list_entry e = {.key = a.v[i].key,
						    .is_prefix =
							    a.v[i].is_prefix,
						    .info = a.v[i].info};

			if (fn(arg, &e) != 0)
				break;
		}
	}
	acc_free(&a);
	return rc;
}

static int davb_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			    struct smux_error *err)
{
	struct smux_info info;

	return davb_head(b, ctx, "", &info, err);
}

/* Keys stay well inside the server's PATH_MAX once under its root (a
 * 4095-byte key is a 500 from nginx): what object stores take. */
static size_t davb_key_max(struct smux_backend *b)
{
	(void)b;
	return 1024;
}

static void davb_destroy(struct smux_backend *b)
{
	struct davb *d = davb_from(b);

	smux__http_free(d->http);
	free(d->base_url);
	free(d->base_path);
	smux_backend_release(&d->base);
	free(d);
}

static const struct smux_backend_ops davb_ops = {
	.kind = "http",
	.get = davb_get,
	.put = davb_put,
	.del = davb_del,
	.head = davb_head,
	.list = davb_list,
	.copy = davb_copy,
	.rename = davb_rename,
	.caps = davb_caps,
	.healthcheck = davb_healthcheck,
	.key_max = davb_key_max,
	.destroy = davb_destroy,
};

/* ---- construction ---- */

/* Checks @url and splits off its path (decoded, ending in '/'). */
static int parse_base(const char *name, const char *url, char **base_url,
		      char **base_path, struct smux_error *err)
{
	const char *auth, *path, *at;
	size_t n = strlen(url), pl;
	char *dec;
	long dl;

	if (strncasecmp(url, "http://", 7) == 0)
		auth = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		auth = url + 8;
	else
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "url must start with http:// or "
				      "https://");
	path = strchr(auth, '/');
	if (!path)
		path = auth + strlen(auth);
	at = memchr(auth, '@', (size_t)(path - auth));
	if (at)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "url must not hold credentials (use "
				      "credentials_file)");
	if (path == auth || strpbrk(url, "?# \t\r\n"))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "url needs a host and no query, "
				      "fragment or space");
	*base_url = malloc(n + 2);
	pl = strlen(path);
	dec = malloc(pl + 3);
	if (!*base_url || !dec)
		goto out_nomem;
	memcpy(*base_url, url, n + 1);
	if (n == 0 || url[n - 1] != '/') {
		(*base_url)[n] = '/';
		(*base_url)[n + 1] = '\0';
	}
	if (pl == 0) {
		memcpy(dec, "/", 2);
	} else {
		dl = smux__http_unescape(path, pl, dec, pl + 1);
		if (dl < 0) {
			free(dec);
			free(*base_url);
			*base_url = NULL;
			return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
					      "url: bad %%-escape");
		}
		if (dec[dl - 1] != '/') {
			dec[dl] = '/';
			dec[dl + 1] = '\0';
		}
	}
	*base_path = dec;
	return 0;
out_nomem:
	free(dec);
	free(*base_url);
	*base_url = NULL;
	return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
}

int smux_http_new(const char *name, const struct smux_http_opts *opts,
		  struct smux_backend **out, struct smux_error *err)
{
	struct smux__http_opts ho = {0};
	struct davb *d;
	int rc;

	*out = NULL;
	if (!opts || !opts->url)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "an http backend needs a url");
	d = calloc(1, sizeof(*d));
	if (!d)
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	if (smux_backend_init(&d->base, &davb_ops, name) < 0) {
		free(d);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	rc = parse_base(name, opts->url, &d->base_url, &d->base_path, err);
	if (rc < 0)
		goto out_free;
	ho.backend = name;
	ho.ca_file = opts->ca_file;
	ho.username = opts->username;
	ho.password = opts->password;
	ho.connect_timeout_ms = opts->connect_timeout_ms;
	ho.idle_timeout_ms = opts->idle_timeout_ms;
	ho.max_attempts = opts->max_attempts;
	rc = smux__http_new(&ho, &d->http, err);
	if (rc < 0)
		goto out_free;
	d->webdav = opts->webdav;
	*out = &d->base;
	return 0;
out_free:
	free(d->base_url);
	free(d->base_path);
	smux_backend_release(&d->base);
	free(d);
	return rc;
}

int smux_http_read_credentials(const char *path, char **user, char **pass,
			       struct smux_error *err)
{
	char buf[1024];
	char *colon, *nl;
	ssize_t n;
	int fd;

	*user = *pass = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return smux_error_from_errno(err, errno, NULL, path);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return smux_error_from_errno(err, errno, NULL, path);
	buf[n] = '\0';
	nl = strpbrk(buf, "\r\n");
	if (nl)
		*nl = '\0';
	colon = strchr(buf, ':');
	if (!colon || colon == buf) {
		explicit_bzero(buf, sizeof(buf));
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "%s: expected one line user:password",
				      path);
	}
	*colon = '\0';
	*user = strdup(buf);
	*pass = strdup(colon + 1);
	explicit_bzero(buf, sizeof(buf));
	if (!*user || !*pass) {
		free(*user);
		free(*pass);
		*user = *pass = NULL;
		return smux_error_set(err, SMUX_E_NO_MEMORY, NULL, NULL);
	}
	return 0;
}
