// SPDX-License-Identifier: MIT
/*
 * bunny.c - the bunny backend (smux/bunny.h): one BunnyCDN Storage zone
 * over the HTTP layer (http_client.h). Here: the instance and its
 * construction, the one request path (slots, AccessKey, 429 rounds, 401),
 * DESCRIBE and head. get is bunny_get.c, put and del bunny_put.c, list
 * bunny_list.c, the JSON answers bunny_json.c.
 *
 * The instance is immutable after smux_bunny_new() but for the request
 * slots (a mutex and a condition variable: max_concurrency requests at
 * once) and one learned fact (the server ignores Range); the HTTP client
 * is thread-safe, so every operation runs on any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "backends/bunny_internal.h"
#include "backends/http_client.h"
#include "smux/bunny.h"

static const struct smux_backend_ops bunnyb_ops;

struct bunnyb *smux__bunny_from(struct smux_backend *b)
{
	return b && b->ops == &bunnyb_ops ? (struct bunnyb *)b : NULL;
}

const char *smux__bunny_name(struct bunnyb *z)
{
	return z->base.name;
}

bool smux__bunny_key_is_dir(const char *key)
{
	size_t n = strlen(key);

	return n == 0 || key[n - 1] == '/';
}

int smux__bunny_nomem(struct bunnyb *z, struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_NO_MEMORY, smux__bunny_name(z), NULL);
}

/* "<base_url><escaped key>" in a new heap string; NULL when out of
 * memory. @slash: end it in '/' (a directory) when the key has none. */
char *smux__bunny_url(struct bunnyb *z, const char *key, bool slash)
{
	return smux__http_key_url(z->base_url, key, slash);
}

/* ---- request slots and the one request path ---- */

/* Takes a request slot, waiting (bounded by the context) for one. */
static int slot_take(struct bunnyb *z, const struct smux_ctx *ctx,
		     struct smux_error *err)
{
	int rc = 0;

	pthread_mutex_lock(&z->lock);
	while (z->inflight >= z->max_inflight) {
		struct timespec ts;

		rc = smux_ctx_check(ctx, smux__bunny_name(z), err);
		if (rc < 0)
			break;
		/* wake at least every 100 ms to see the context fire */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&z->cond, &z->lock, &ts);
	}
	if (rc == 0)
		z->inflight++;
	pthread_mutex_unlock(&z->lock);
	return rc;
}

static void slot_give(struct bunnyb *z)
{
	pthread_mutex_lock(&z->lock);
	z->inflight--;
	pthread_cond_signal(&z->cond);
	pthread_mutex_unlock(&z->lock);
}

/*
 * Performs @req (its AccessKey added) in a request slot. A 401 becomes a
 * configuration error that names the zone and region: Bunny answers 401
 * to a wrong password and to a zone asked at another region's host alike,
 * and neither goes away by retrying. Its parts are cut so that the
 * message ends with "(check region =)" within SMUX_ERROR_MSG_MAX: the
 * mux reads the key to fix from it (smux_error_option).
 */
int smux__bunny_do(struct bunnyb *z, const struct smux_ctx *ctx,
		   const struct smux__http_req *in,
		   struct smux__http_resp *resp, struct smux_error *err)
{
	struct smux__http_req r = *in;
	const struct smux__http_req *req = &r;
	const char *hdrs[6];
	size_t n = 0;
	int rc;

	hdrs[n++] = z->key_header;
	for (size_t i = 0; in->headers && in->headers[i] && n < 5; i++)
		hdrs[n++] = in->headers[i];
	hdrs[n] = NULL;
	r.headers = hdrs;
	memset(resp, 0, sizeof(*resp));
	rc = slot_take(z, ctx, err);
	if (rc < 0)
		return rc;
	/* throttling is Bunny's normal answer to a busy zone: a request
	 * still answered 429 after the HTTP layer's attempts gets a few
	 * more rounds (each with its backoff; the deadline bounds them) */
	for (unsigned round = 0;; round++) {
		rc = smux__http_do(z->http, ctx, req, resp, err);
		if (rc == 0 || resp->status != 429 ||
		    round + 1 >= BUNNY_429_ROUNDS)
			break;
	}
	slot_give(z);
	if (rc < 0 && resp->status == 401)
		return smux_error_set(
			err, SMUX_E_INVALID_OPTIONS, smux__bunny_name(z),
			"%.40s: 401 Unauthorized from %.40s: the access key "
			"is not the password of storage zone \"%.24s\", or "
			"the zone's primary region is not \"%.8s\" (check "
			"region =)",
			req->what, z->host, z->zone, z->region);
	return rc;
}

/* "METHOD key" for error messages (never a URL), the key cut at 200. */
const char *smux__bunny_what(char *buf, size_t cap, const char *method,
			     const char *key)
{
	snprintf(buf, cap, "%s \"%.200s\"", method, key);
	return buf;
}

/* ---- info ---- */

void smux__bunny_fill_dir(struct smux_info *info, int64_t mtime_ns)
{
	smux_info_clear(info);
	info->mode = S_IFDIR | BUNNY_DIR_MODE;
	info->mtime_ns = mtime_ns;
	info->nlink = 1;
}

/* The version token: the SHA-256 when the server gave one, else size and
 * LastChanged (ms). */
void smux__bunny_fill_obj(struct smux_info *info,
			  const struct smux__bunny_obj *o)
{
	if (o->is_dir) {
		smux__bunny_fill_dir(info, o->mtime_ns);
		return;
	}
	smux_info_clear(info);
	info->mode = S_IFREG | BUNNY_FILE_MODE;
	info->size = o->length;
	info->mtime_ns = o->mtime_ns;
	info->nlink = 1;
	if (o->checksum[0])
		snprintf(info->etag, sizeof(info->etag), "%s", o->checksum);
	else
		snprintf(info->etag, sizeof(info->etag), "%llx-%llx",
			 (unsigned long long)o->length,
			 (unsigned long long)(o->mtime_ns / 1000000LL));
}

/*
 * DESCRIBE @key (as a directory when it ends in '/'): *@o on success (the
 * caller frees o->name). 404 is KEY_NOT_FOUND.
 */
/* One DESCRIBE request. */
static int describe_once(struct bunnyb *z, const struct smux_ctx *ctx,
			 const char *key, struct smux__bunny_obj *o,
			 struct smux_error *err)
{
	struct smux__http_req req = {.method = "DESCRIBE"};
	struct smux__http_resp resp;
	struct smux_sink sink;
	char what[256], why[128];
	unsigned char *body;
	size_t len = 0;
	char *url;
	int rc;

	memset(o, 0, sizeof(*o));
	url = smux__bunny_url(z, key, false);
	if (!url)
		return smux__bunny_nomem(z, err);
	smux_sink_dyn(&sink);
	req.url = url;
	req.sink = &sink;
	req.max_body = BUNNY_DESCRIBE_MAX;
	req.what = smux__bunny_what(what, sizeof(what), "DESCRIBE", key);
	rc = smux__bunny_do(z, ctx, &req, &resp, err);
	free(url);
	if (rc < 0) {
		smux_sink_release(&sink);
		return rc;
	}
	body = smux_sink_dyn_take(&sink, &len);
	rc = smux__bunny_parse_obj(body ? (const char *)body : "", len, o, why,
				   sizeof(why));
	free(body);
	if (rc == -ENOMEM)
		return smux__bunny_nomem(z, err);
	if (rc < 0)
		return smux_error_set(err, SMUX_E_BAD_RESPONSE,
				      smux__bunny_name(z), "%s: %s", what, why);
	return 0;
}

/*
 * @key's entry in its parent's listing (a directory DESCRIBE did not
 * answer for): 0 and *@o, or -ENOENT.
 */
static int describe_by_listing(struct bunnyb *z, const struct smux_ctx *ctx,
			       const char *key, struct smux__bunny_obj *o,
			       struct smux_error *err)
{
	char dir[SMUX_KEY_MAX + 1], name[SMUX_KEY_MAX + 1];
	struct smux__bunny_obj *v;
	size_t n, kl = strlen(key), dl;
	int rc;

	if (kl && key[kl - 1] == '/')
		kl--;
	if (kl == 0 || kl >= sizeof(name))
		return smux_error_set(err, SMUX_E_KEY_NOT_FOUND,
				      smux__bunny_name(z), "\"%s\": not found",
				      key);
	dl = kl;
	while (dl && key[dl - 1] != '/')
		dl--;
	memcpy(dir, key, dl);
	dir[dl] = '\0';
	memcpy(name, key + dl, kl - dl);
	name[kl - dl] = '\0';
	rc = smux__bunny_list_one(z, ctx, dir, &v, &n, err);
	if (rc < 0)
		return rc;
	rc = -ENOENT;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i].name, name) != 0)
			continue;
		*o = v[i];
		v[i].name = NULL; /* now o's */
		rc = 0;
		break;
	}
	smux__bunny_objs_free(v, n);
	if (rc < 0)
		return smux_error_set(err, SMUX_E_KEY_NOT_FOUND,
				      smux__bunny_name(z), "\"%s\": not found",
				      key);
	return 0;
}

/*
 * DESCRIBE, by the official SDK's use, answers for files; whether Bunny
 * answers it for a directory is not documented. Until a DESCRIBE has
 * answered for one (then it does: describe_dirs), a 404 is checked in
 * the parent's listing, where directories are entries like files.
 */
int smux__bunny_describe(struct bunnyb *z, const struct smux_ctx *ctx,
			 const char *key, struct smux__bunny_obj *o,
			 struct smux_error *err)
{
	int rc = describe_once(z, ctx, key, o, err);

	if (rc == 0 && o->is_dir)
		atomic_store(&z->describe_dirs, true);
	if (rc != -ENOENT || atomic_load(&z->describe_dirs))
		return rc;
	smux_error_clear(err);
	return describe_by_listing(z, ctx, key, o, err);
}

int smux__bunny_head(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_info *info,
		     struct smux_error *err)
{
	struct bunnyb *z = smux__bunny_from(b);
	struct smux__bunny_obj o;
	struct smux_info scratch;
	int rc;

	if (!info)
		info = &scratch;
	if (!key[0]) { /* the zone's root always exists */
		smux__bunny_fill_dir(info, 0);
		return 0;
	}
	rc = smux__bunny_describe(z, ctx, key, &o, err);
	if (rc < 0)
		return rc;
	if (smux__bunny_key_is_dir(key) && !o.is_dir) {
		free(o.name);
		/* "a/" of a file names no directory */
		return smux_error_set(err, SMUX_E_KEY_NOT_FOUND,
				      smux__bunny_name(z),
				      "head \"%s\": not a directory", key);
	}
	smux__bunny_fill_obj(info, &o);
	free(o.name);
	return 0;
}

/* A DESCRIBE of a key that is never there: 404 is a zone that answers
 * and takes the key; 401 is the configuration error. */
static int bunnyb_healthcheck(struct smux_backend *b,
			      const struct smux_ctx *ctx,
			      struct smux_error *err)
{
	struct bunnyb *z = smux__bunny_from(b);
	struct smux__bunny_obj o;
	int rc = smux__bunny_describe(z, ctx, BUNNY_PROBE_KEY, &o, err);

	if (rc == 0)
		free(o.name);
	if (rc == -ENOENT) {
		smux_error_clear(err);
		rc = 0;
	}
	return rc;
}

/* Bunny's own path limit is not published; what object stores take. */
static size_t bunnyb_key_max(struct smux_backend *b)
{
	(void)b;
	return 1024;
}

static void bunnyb_destroy(struct smux_backend *b)
{
	struct bunnyb *z = smux__bunny_from(b);

	smux__http_free(z->http);
	if (z->key_header) {
		explicit_bzero(z->key_header, strlen(z->key_header));
		free(z->key_header);
	}
	free(z->base_url);
	free(z->zone);
	free(z->region);
	free(z->host);
	pthread_mutex_destroy(&z->lock);
	pthread_cond_destroy(&z->cond);
	smux__bunny_seen_free(z);
	smux_backend_release(&z->base);
	free(z);
}

/* Its listings show every name, dot names too. */
static unsigned bunnyb_caps(struct smux_backend *b)
{
	(void)b;
	return SMUX_CAP_LISTS_DOTNAMES;
}

static const struct smux_backend_ops bunnyb_ops = {
	.kind = "bunny",
	.caps = bunnyb_caps,
	.get = smux__bunny_get,
	.put = smux__bunny_put,
	.del = smux__bunny_del,
	.head = smux__bunny_head,
	.list = smux__bunny_list,
	.rename = smux__bunny_rename,
	.healthcheck = bunnyb_healthcheck,
	.key_max = bunnyb_key_max,
	.destroy = bunnyb_destroy,
};

/* ---- construction ---- */

static const struct {
	const char *code, *host;
} regions[] = {
	{"de", "storage.bunnycdn.com"},	     {"uk", "uk.storage.bunnycdn.com"},
	{"ny", "ny.storage.bunnycdn.com"},   {"la", "la.storage.bunnycdn.com"},
	{"sg", "sg.storage.bunnycdn.com"},   {"se", "se.storage.bunnycdn.com"},
	{"br", "br.storage.bunnycdn.com"},   {"jh", "jh.storage.bunnycdn.com"},
	{"syd", "syd.storage.bunnycdn.com"},
};

const char *smux_bunny_region_host(const char *region)
{
	if (!region || !region[0])
		return regions[0].host;
	for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++)
		if (strcasecmp(region, regions[i].code) == 0)
			return regions[i].host;
	return NULL;
}

/* Checks an endpoint URL: http(s)://host[:port][/path], nothing else.
 * Its host part goes to *@host (heap). */
static int check_endpoint(const char *name, const char *url, char **host,
			  struct smux_error *err)
{
	const char *auth, *end;

	if (strncasecmp(url, "http://", 7) == 0)
		auth = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		auth = url + 8;
	else
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "endpoint must start with http:// or "
				      "https://");
	end = strchr(auth, '/');
	if (!end)
		end = auth + strlen(auth);
	if (end == auth || memchr(auth, '@', (size_t)(end - auth)) ||
	    strpbrk(url, "?# \t\r\n"))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "endpoint needs a host and no "
				      "credentials, query, fragment or space");
	*host = strndup(auth, (size_t)(end - auth));
	return *host ? 0 : smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
}

/* A zone name: what Bunny allows (letters, digits, '-'), 1..64 bytes. */
static bool zone_ok(const char *zone)
{
	size_t n = strlen(zone);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = zone[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

/* A password fit for a header: printable ASCII, no spaces around it. */
static bool key_ok(const char *key)
{
	size_t n = strlen(key);

	if (n == 0 || n > SMUX_BUNNY_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)key[i] <= ' ' ||
		    (unsigned char)key[i] >= 127)
			return false;
	return true;
}

int smux_bunny_new(const char *name, const struct smux_bunny_opts *opts,
		   struct smux_backend **out, struct smux_error *err)
{
	struct smux__http_opts ho = {0};
	const char *rhost;
	struct bunnyb *z;
	size_t n;
	int rc;

	*out = NULL;
	if (!opts || !opts->zone || !zone_ok(opts->zone))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "zone: a storage zone name (letters, "
				      "digits, '-') is required");
	if (!opts->access_key || !key_ok(opts->access_key))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "the access key (zone password) is "
				      "missing, empty, too long or holds "
				      "spaces or control characters");
	rhost = smux_bunny_region_host(opts->region);
	if (!rhost)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "region \"%.32s\": not one of de, uk, "
				      "ny, la, sg, se, br, jh, syd",
				      opts->region);
	if (opts->max_concurrency > BUNNY_CONCURRENCY_MAX)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "max_concurrency %u: at most %u (Bunny "
				      "throttles a zone past a few)",
				      opts->max_concurrency,
				      BUNNY_CONCURRENCY_MAX);
	z = calloc(1, sizeof(*z));
	if (!z)
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	if (smux_backend_init(&z->base, &bunnyb_ops, name) < 0) {
		free(z);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	pthread_mutex_init(&z->lock, NULL);
	pthread_cond_init(&z->cond, NULL);
	smux__bunny_seen_init(z); /* without its table: no hints, no error */
	z->max_inflight = opts->max_concurrency ? opts->max_concurrency : 4;
	z->zone = strdup(opts->zone);
	z->region =
		strdup(opts->region && opts->region[0] ? opts->region : "de");
	if (opts->endpoint && opts->endpoint[0]) {
		rc = check_endpoint(name, opts->endpoint, &z->host, err);
		if (rc < 0)
			goto out_free;
	} else {
		z->host = strdup(rhost);
	}
	n = strlen(opts->access_key) + sizeof("AccessKey: ");
	z->key_header = malloc(n);
	if (!z->zone || !z->region || !z->host || !z->key_header) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		goto out_free;
	}
	snprintf(z->key_header, n, "AccessKey: %s", opts->access_key);
	{
		const char *ep = opts->endpoint && opts->endpoint[0]
					 ? opts->endpoint
					 : NULL;
		size_t el = ep ? strlen(ep) : strlen(rhost) + 8;

		z->base_url = malloc(el + strlen(z->zone) + 4);
		if (!z->base_url) {
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
			goto out_free;
		}
		if (ep)
			snprintf(z->base_url, el + strlen(z->zone) + 4,
				 "%.*s/%s/",
				 (int)(ep[el - 1] == '/' ? el - 1 : el), ep,
				 z->zone);
		else
			snprintf(z->base_url, el + strlen(z->zone) + 4,
				 "https://%s/%s/", rhost, z->zone);
	}
	ho.backend = name;
	ho.ca_file = opts->ca_file;
	ho.connect_timeout_ms = opts->connect_timeout_ms;
	ho.idle_timeout_ms = opts->idle_timeout_ms;
	ho.max_attempts = opts->max_attempts ? opts->max_attempts : 8;
	ho.backoff_base_ms = opts->backoff_base_ms;
	ho.backoff_cap_ms = opts->backoff_cap_ms ? opts->backoff_cap_ms : 5000;
	ho.max_idle_handles = z->max_inflight;
	rc = smux__http_new(&ho, &z->http, err);
	if (rc < 0)
		goto out_free;
	*out = &z->base;
	return 0;
out_free:
	z->http = NULL;
	bunnyb_destroy(&z->base);
	return rc;
}

int smux_bunny_read_key(const char *path, char **key, struct smux_error *err)
{
	char buf[SMUX_BUNNY_KEY_MAX + 3];
	char *nl;
	ssize_t n;
	int fd;

	*key = NULL;
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
	if (!key_ok(buf)) {
		explicit_bzero(buf, sizeof(buf));
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "%s: expected one line holding the "
				      "storage zone password (at most %d "
				      "printable bytes, no spaces)",
				      path, SMUX_BUNNY_KEY_MAX);
	}
	*key = strdup(buf);
	explicit_bzero(buf, sizeof(buf));
	if (!*key)
		return smux_error_set(err, SMUX_E_NO_MEMORY, NULL, NULL);
	return 0;
}
