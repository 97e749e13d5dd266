// SPDX-License-Identifier: MIT
/*
 * swift_auth.c - tokens of the swift backend: tempauth / v1.0 and
 * identity v2.0 (RAX-KSKEY or password credentials, endpoint from the
 * service catalog parsed with jansson), renewal before expiry and after a
 * 401, and swift__do, the one place a storage request gets its token.
 *
 * Threads: the token is kept under auth->mu; the thread that finds it
 * missing or expiring authenticates while holding the lock (the others
 * wait for the new token rather than asking for one each).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backends/swift_internal.h"

#define SWIFT_DEFAULT_MARGIN_NS (60LL * 1000000000LL)
#define SWIFT_MAX_HEADERS	16

static int64_t now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

int swift__auth_init(struct swift_auth *a, const char *name,
		     const struct smux_swift_opts *o, struct smux_error *err)
{
	memset(a, 0, sizeof(*a));
	a->kind = o->auth ? o->auth : SMUX_SWIFT_AUTH_V1;
	if (a->kind != SMUX_SWIFT_AUTH_V1 && a->kind != SMUX_SWIFT_AUTH_V2)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "auth_version must be 1 or 2");
	if (!o->auth_url || (strncasecmp(o->auth_url, "http://", 7) != 0 &&
			     strncasecmp(o->auth_url, "https://", 8) != 0))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "auth_url must start with http:// or "
				      "https://");
	if (strchr(o->auth_url, '@') || strpbrk(o->auth_url, " \t\r\n#"))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "auth_url must hold no credentials, "
				      "space or fragment");
	if (!o->username || !o->username[0])
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "a swift backend needs a user name "
				      "(credentials_file or credentials_env)");
	if ((!o->key || !o->key[0]) && (!o->password || !o->password[0]))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "a swift backend needs a key or a "
				      "password");
	if (a->kind == SMUX_SWIFT_AUTH_V1 && (!o->key || !o->key[0]))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "auth_version 1 needs a key");
	if (pthread_mutex_init(&a->mu, NULL) != 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	a->auth_url = strdup(o->auth_url);
	a->username = strdup(o->username);
	a->key = dup_or_null(o->key && o->key[0] ? o->key : NULL);
	a->password =
		dup_or_null(o->password && o->password[0] ? o->password : NULL);
	a->tenant = dup_or_null(o->tenant);
	a->region = dup_or_null(o->region && o->region[0] ? o->region : NULL);
	a->internal = o->internal;
	a->margin_ns = o->reauth_margin_ms > 0 ? o->reauth_margin_ms * 1000000LL
					       : SWIFT_DEFAULT_MARGIN_NS;
	if (!a->auth_url || !a->username || (o->key && o->key[0] && !a->key) ||
	    (o->password && o->password[0] && !a->password) ||
	    (o->tenant && !a->tenant) ||
	    (o->region && o->region[0] && !a->region)) {
		swift__auth_release(a);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	return 0;
}

void swift__auth_release(struct swift_auth *a)
{
	free(a->auth_url);
	wipe_free(a->username);
	wipe_free(a->key);
	wipe_free(a->password);
	free(a->tenant);
	free(a->region);
	wipe_free(a->token);
	free(a->storage_url);
	pthread_mutex_destroy(&a->mu);
	memset(a, 0, sizeof(*a));
}

/* ---- v1: tempauth ---- */

struct v1_answer {
	char token[SWIFT_AUTH_VALUE_MAX];
	char url[SWIFT_AUTH_VALUE_MAX];
	int64_t expires_s; /* -1: not given */
	bool too_long;
};

static int v1_header(void *arg, const char *name, size_t nlen,
		     const char *value, size_t vlen)
{
	struct v1_answer *v = arg;
	char num[32];
	char *end;

	if (nlen == 12 && strncasecmp(name, "X-Auth-Token", 12) == 0) {
		if (vlen >= sizeof(v->token))
			return -E2BIG;
		memcpy(v->token, value, vlen);
		v->token[vlen] = '\0';
	} else if (nlen == 13 && strncasecmp(name, "X-Storage-Url", 13) == 0) {
		if (vlen >= sizeof(v->url))
			return -E2BIG;
		memcpy(v->url, value, vlen);
		v->url[vlen] = '\0';
	} else if (nlen == 20 &&
		   strncasecmp(name, "X-Auth-Token-Expires", 20) == 0 &&
		   vlen < sizeof(num)) {
		memcpy(num, value, vlen);
		num[vlen] = '\0';
		errno = 0;
		v->expires_s = strtoll(num, &end, 10);
		if (errno || *end || end == num || v->expires_s < 0)
			v->expires_s = -1;
	}
	return 0;
}

/* What of a refused auth the caller sees: CREDENTIAL_EXPIRED with the
 * identity service's answer as the cause. */
static int auth_refused(struct swiftb *s, struct smux_error *err)
{
	return smux_error_wrap(err, SMUX_E_CREDENTIAL_EXPIRED, s->base.name,
			       "the identity service refused the "
			       "credentials (wrong, expired or revoked)");
}

static int auth_v1(struct swiftb *s, const struct smux_ctx *ctx,
		   struct smux_error *err)
{
	struct swift_auth *a = &s->auth;
	struct smux__http_req req = {.method = "GET", .what = "auth v1.0"};
	struct smux__http_resp resp;
	struct v1_answer *v = calloc(1, sizeof(*v));
	char *hu = NULL, *hk = NULL;
	const char *hdrs[3];
	int rc;

	if (!v || asprintf(&hu, "X-Auth-User: %s", a->username) < 0 ||
	    asprintf(&hk, "X-Auth-Key: %s", a->key) < 0) {
		hu = hk = NULL;
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
		goto out;
	}
	v->expires_s = -1;
	hdrs[0] = hu;
	hdrs[1] = hk;
	hdrs[2] = NULL;
	req.url = a->auth_url;
	req.headers = hdrs;
	req.on_header = v1_header;
	req.header_arg = v;
	rc = smux__http_do(s->http, ctx, &req, &resp, err);
	if (rc < 0 && (resp.status == 401 || resp.status == 403)) {
		rc = auth_refused(s, err);
		goto out;
	}
	if (rc < 0)
		goto out;
	if (!v->token[0] || strncasecmp(v->url, "http", 4) != 0) {
		rc = smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
				    "auth v1.0: no X-Auth-Token or "
				    "X-Storage-Url in the answer");
		goto out;
	}
	wipe_free(a->token);
	free(a->storage_url);
	a->token = strdup(v->token);
	a->storage_url = strdup(v->url);
	a->expires_ns = v->expires_s >= 0
				? now_real_ns() + v->expires_s * 1000000000LL
				: 0;
	if (!a->token || !a->storage_url)
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
out:
	wipe_free(hu);
	wipe_free(hk);
	if (v)
		explicit_bzero(v, sizeof(*v));
	free(v);
	return rc;
}

/* ---- v2: identity with a service catalog ---- */

static char *v2_body(const struct swift_auth *a)
{
	json_t *cred, *auth, *root;
	char *out;

	if (a->key)
		cred = json_pack("{s:{s:s,s:s}}", "RAX-KSKEY:apiKeyCredentials",
				 "username", a->username, "apiKey", a->key);
	else
		cred = json_pack("{s:{s:s,s:s}}", "passwordCredentials",
				 "username", a->username, "password",
				 a->password);
	if (!cred)
		return NULL;
	if (a->tenant)
		json_object_set_new(cred, "tenantName", json_string(a->tenant));
	auth = cred;
	root = json_pack("{s:o}", "auth", auth);
	if (!root)
		return NULL;
	out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return out;
}

/* The catalog's regions with an object-store endpoint, for an error. */
static void v2_regions(json_t *endpoints, char *out, size_t cap)
{
	size_t i, n = 0;
	json_t *ep;

	out[0] = '\0';
	json_array_foreach(endpoints, i, ep)
	{
		const char *r =
			json_string_value(json_object_get(ep, "region"));

		if (r && n < cap)
			n += (size_t)snprintf(out + n, cap - n, "%s%.32s",
					      n ? ", " : "", r);
	}
	if (!out[0])
		snprintf(out, cap, "none");
}

/* Takes token, expiry and endpoint from the answer @root. */
static int v2_parse(struct swiftb *s, json_t *root, struct smux_error *err)
{
	struct swift_auth *a = &s->auth;
	json_t *access = json_object_get(root, "access");
	json_t *token = json_object_get(access, "token");
	json_t *user = json_object_get(access, "user");
	json_t *catalog = json_object_get(access, "serviceCatalog");
	const char *id = json_string_value(json_object_get(token, "id"));
	const char *expires =
		json_string_value(json_object_get(token, "expires"));
	const char *region = a->region;
	const char *which = a->internal ? "internalURL" : "publicURL";
	json_t *svc, *endpoints = NULL, *ep;
	const char *url = NULL;
	char regions[256];
	size_t i;
	int64_t exp_ns = 0;

	if (!id || !id[0] || strlen(id) >= SWIFT_AUTH_VALUE_MAX ||
	    !json_is_array(catalog))
		return smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
				      "identity v2.0: no token id or service "
				      "catalog in the answer");
	if (expires) {
		exp_ns = swift__parse_iso(expires);
		if (exp_ns < 0)
			return smux_error_set(err, SMUX_E_BAD_RESPONSE,
					      s->base.name,
					      "identity v2.0: token expiry "
					      "\"%.40s\" is not a time",
					      expires);
	}
	if (!region)
		region = json_string_value(
			json_object_get(user, "RAX-AUTH:defaultRegion"));
	json_array_foreach(catalog, i, svc)
	{
		const char *type =
			json_string_value(json_object_get(svc, "type"));

		if (type && strcmp(type, "object-store") == 0) {
			endpoints = json_object_get(svc, "endpoints");
			break;
		}
	}
	if (!json_is_array(endpoints))
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->base.name,
				      "identity v2.0: the service catalog "
				      "has no object-store service");
	if (!region) {
		v2_regions(endpoints, regions, sizeof(regions));
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->base.name,
				      "identity v2.0: no region set and the "
				      "user has no default region; set region "
				      "(check region =; object-store "
				      "regions: %.100s)",
				      regions);
	}
	json_array_foreach(endpoints, i, ep)
	{
		const char *r =
			json_string_value(json_object_get(ep, "region"));

		if (r && strcmp(r, region) == 0) {
			url = json_string_value(json_object_get(ep, which));
			break;
		}
	}
	if (!url || strncasecmp(url, "http", 4) != 0 ||
	    strlen(url) >= SWIFT_AUTH_VALUE_MAX) {
		v2_regions(endpoints, regions, sizeof(regions));
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->base.name,
				      "identity v2.0: region \"%.64s\" has no "
				      "object-store %s (check region =%s; "
				      "regions: %.100s)",
				      region, which,
				      a->internal ? ", internal =" : "",
				      regions);
	}
	wipe_free(a->token);
	free(a->storage_url);
	a->token = strdup(id);
	a->storage_url = strdup(url);
	a->expires_ns = exp_ns;
	if (!a->token || !a->storage_url)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	return 0;
}

static int auth_v2(struct swiftb *s, const struct smux_ctx *ctx,
		   struct smux_error *err)
{
	struct swift_auth *a = &s->auth;
	static const char *const hdrs[] = {"Content-Type: application/json",
					   "Accept: application/json", NULL};
	struct smux__http_req req = {.method = "POST",
				     .what = "identity v2.0 tokens"};
	struct smux__http_resp resp;
	struct smux_source src;
	struct smux_sink sink;
	json_error_t jerr;
	json_t *root = NULL;
	unsigned char *body = NULL;
	size_t blen = 0, ul = strlen(a->auth_url);
	char *payload = v2_body(a), *url = NULL;
	int rc;

	smux_sink_dyn(&sink);
	if (!payload ||
	    asprintf(&url, "%s%stokens", a->auth_url,
		     ul && a->auth_url[ul - 1] == '/' ? "" : "/") < 0) {
		url = NULL;
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name, NULL);
		goto out;
	}
	smux_source_buf(&src, payload, strlen(payload));
	req.url = url;
	req.headers = hdrs;
	req.body = &src;
	req.sink = &sink;
	req.max_body = SWIFT_AUTH_BODY_MAX;
	rc = smux__http_do(s->http, ctx, &req, &resp, err);
	if (rc < 0 && (resp.status == 401 || resp.status == 403)) {
		rc = auth_refused(s, err);
		goto out;
	}
	if (rc < 0)
		goto out;
	body = smux_sink_dyn_take(&sink, &blen);
	root = json_loadb((const char *)body, blen, 0, &jerr);
	if (!root) {
		rc = smux_error_set(err, SMUX_E_BAD_RESPONSE, s->base.name,
				    "identity v2.0: answer is not JSON "
				    "(line %d: %.80s)",
				    jerr.line, jerr.text);
		goto out;
	}
	rc = v2_parse(s, root, err);
out:
	json_decref(root);
	if (body) {
		explicit_bzero(body, blen);
		free(body);
	}
	smux_sink_release(&sink);
	wipe_free(payload);
	free(url);
	return rc;
}

int swift__auth_get(struct swiftb *s, const struct smux_ctx *ctx, char **token,
		    char **url, uint64_t *gen, struct smux_error *err)
{
	struct swift_auth *a = &s->auth;
	int rc = 0;

	*token = *url = NULL;
	pthread_mutex_lock(&a->mu);
	if (a->token && a->expires_ns &&
	    now_real_ns() + a->margin_ns >= a->expires_ns) {
		/* renew before it expires */
		wipe_free(a->token);
		a->token = NULL;
	}
	if (!a->token) {
		atomic_fetch_add(&a->count, 1);
		rc = a->kind == SMUX_SWIFT_AUTH_V2 ? auth_v2(s, ctx, err)
						   : auth_v1(s, ctx, err);
		if (rc == 0)
			a->generation++;
		else {
			wipe_free(a->token);
			a->token = NULL;
		}
	}
	if (rc == 0) {
		*token = strdup(a->token);
		*url = strdup(a->storage_url);
		*gen = a->generation;
		if (!*token || !*url) {
			wipe_free(*token);
			free(*url);
			*token = *url = NULL;
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
		}
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

void swift__auth_invalidate(struct swift_auth *a, uint64_t gen)
{
	pthread_mutex_lock(&a->mu);
	if (a->generation == gen && a->token) {
		wipe_free(a->token);
		a->token = NULL;
	}
	pthread_mutex_unlock(&a->mu);
}

uint64_t swift__auth_generation(struct swift_auth *a)
{
	uint64_t gen;

	pthread_mutex_lock(&a->mu);
	gen = a->generation;
	pthread_mutex_unlock(&a->mu);
	return gen;
}

unsigned long smux_swift_auth_count(struct smux_backend *b)
{
	struct swiftb *s = (struct swiftb *)b;

	return b && b->ops && strcmp(b->ops->kind, "swift") == 0
		       ? atomic_load(&s->auth.count)
		       : 0;
}

int swift__do(struct swiftb *s, const struct smux_ctx *ctx,
	      struct smux__http_req *req, const char *path_q,
	      struct smux__http_resp *resp, struct smux_error *err)
{
	return swift__do_in(s, ctx, req, s->container_esc, path_q, resp, err);
}

int swift__do_in(struct swiftb *s, const struct smux_ctx *ctx,
		 struct smux__http_req *req, const char *cont_esc,
		 const char *path_q, struct smux__http_resp *resp,
		 struct smux_error *err)
{
	const char *const *user_hdrs = req->headers;
	const char *hdrs[SWIFT_MAX_HEADERS + 2];
	char *token = NULL, *base = NULL, *url = NULL, *tokhdr = NULL;
	uint64_t gen = 0;
	size_t n = 0;
	int rc = 0;

	while (user_hdrs && user_hdrs[n] && n < SWIFT_MAX_HEADERS) {
		hdrs[n] = user_hdrs[n];
		n++;
	}
	for (int round = 0; round < 2; round++) {
		rc = swift__auth_get(s, ctx, &token, &base, &gen, err);
		if (rc < 0)
			break;
		if (asprintf(&url, "%s%s%s%s", base, cont_esc ? "/" : "",
			     cont_esc ? cont_esc : "", path_q) < 0 ||
		    asprintf(&tokhdr, "X-Auth-Token: %s", token) < 0) {
			url = tokhdr = NULL;
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
					    NULL);
			break;
		}
		hdrs[n] = tokhdr;
		hdrs[n + 1] = NULL;
		req->headers = hdrs;
		req->url = url;
		rc = smux__http_do(s->http, ctx, req, resp, err);
		req->headers = user_hdrs;
		wipe_free(token);
		wipe_free(tokhdr);
		free(base);
		free(url);
		token = tokhdr = base = url = NULL;
		if (rc == 0 || resp->status != 401)
			break;
		if (round == 0) {
			/* the token expired or was revoked: once more with
			 * a new one */
			swift__auth_invalidate(&s->auth, gen);
			smux_error_clear(err);
			if (req->sink && req->sink->written &&
			    smux_sink_rewind(req->sink) < 0)
				return smux_error_set(err, SMUX_E_LOCAL_IO,
						      s->base.name,
						      "cannot rewind the sink");
			continue;
		}
		rc = smux_error_wrap(err, SMUX_E_CREDENTIAL_EXPIRED,
				     s->base.name,
				     "a new token was refused too");
	}
	wipe_free(token);
	wipe_free(tokhdr);
	free(base);
	free(url);
	return rc;
}
