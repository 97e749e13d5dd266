// SPDX-License-Identifier: MIT
/*
 * config_build.c - turns a loaded configuration into live backends:
 * bottom-up from the root, each reachable section built once (a section
 * listed by two muxes is one shared instance), through smux_file_new,
 * smux_memory_new, smux_faulty_new and smux_mux_new.
 *
 * Owns nothing after it returns: the tree holds its own references and
 * the caller gets one on the root. Sections not reachable from the root
 * are not built (a spare backend may name a directory that is not there).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/config_internal.h"
#include "fs/fs.h"
#include "smux/bunny.h"
#include "smux/faulty.h"
#include "smux/file.h"
#include "smux/http.h"
#include "smux/linkobj.h"
#include "smux/memory.h"
#include "smux/s3.h"
#include "smux/swift.h"

struct build {
	struct smux_config *cfg;
	struct smux_events *events;
	char *errbuf;
	size_t errlen;
	bool reported; /* errbuf holds the error */
};

/* "[backend x] path: /nope: No such file or directory" and the like. */
static int build_error(struct build *b, const struct smux__cfg_section *s,
		       const struct smux_error *err, int rc)
{
	char label[96], msg[2 * SMUX_ERROR_MSG_MAX];
	const struct smux__cfg_value *path = &s->v[SMUX__BK_PATH];

	b->reported = true;
	smux__cfg_label(s, label, sizeof(label));
	if (s->kind == SMUX__CFG_BACKEND &&
	    s->v[SMUX__BK_TYPE].i == SMUX__CFG_T_FILE && err->e.sys_errno &&
	    err->e.code != SMUX_E_INVALID_OPTIONS &&
	    err->e.code != SMUX_E_NOT_SUPPORTED) {
		smux__cfg_errorf(b->errbuf, b->errlen, b->cfg->path, path->line,
				 "%s path: %s: %s", label, path->s,
				 strerror(err->e.sys_errno));
	} else {
		smux__cfg_errorf(b->errbuf, b->errlen, b->cfg->path, s->line,
				 "%s %s", label,
				 smux_error_format(err, msg, sizeof(msg)));
	}
	return rc < 0 ? rc : -EINVAL;
}

/*
 * Basic credentials of an http backend: credentials_file (one line
 * "user:password") or credentials_env (the name of a variable holding
 * "user:password"). Neither: none. The strings are the caller's to wipe
 * and free; an error never quotes them.
 */
static int http_credentials(const struct smux__cfg_section *s, char **user,
			    char **pass, struct smux_error *err)
{
	const struct smux__cfg_value *f = &s->v[SMUX__BK_CREDENTIALS_FILE];
	const struct smux__cfg_value *e = &s->v[SMUX__BK_CREDENTIALS_ENV];
	const char *val, *colon;

	*user = *pass = NULL;
	if (f->line)
		return smux_http_read_credentials(f->s, user, pass, err);
	if (!e->line)
		return 0;
	val = getenv(e->s);
	colon = val ? strchr(val, ':') : NULL;
	if (!colon || colon == val)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->name,
				      "credentials_env: $%s must hold "
				      "user:password",
				      e->s);
	*user = strndup(val, (size_t)(colon - val));
	*pass = strdup(colon + 1);
	if (!*user || !*pass) {
		free(*user);
		free(*pass);
		*user = *pass = NULL;
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->name, NULL);
	}
	return 0;
}

static void wipe_free(char *secret)
{
	if (secret) {
		explicit_bzero(secret, strlen(secret));
		free(secret);
	}
}

/* The HTTP layer's keys, common to every network type. */
struct net_opts {
	const char *ca_file;
	int64_t connect_timeout_ms, idle_timeout_ms;
};

/*
 * rclone_links = true: the backend just built keeps symlinks as
 * NAME.rclonelink objects (smux/linkobj.h), behind a wrapper of its name.
 */
static int rclone_links(struct smux__cfg_section *s, struct smux_error *err)
{
	struct smux_backend *wrapped;
	int rc;

	if (!s->v[SMUX__BK_RCLONE_LINKS].line || !s->v[SMUX__BK_RCLONE_LINKS].b)
		return 0;
	rc = smux_linkobj_new(s->built, &wrapped, err);
	smux_backend_unref(s->built);
	s->built = rc < 0 ? NULL : wrapped;
	return rc;
}

/*
 * ca_file, connect_timeout and idle_timeout of @s. A ca_file that cannot
 * be read is refused here, naming the key and the path, rather than as a
 * TLS failure of every request later.
 */
static int net_opts(const struct smux__cfg_section *s, struct net_opts *o,
		    struct smux_error *err)
{
	const struct smux__cfg_value *v = s->v;

	*o = (struct net_opts){0};
	if (v[SMUX__BK_CA_FILE].line) {
		o->ca_file = v[SMUX__BK_CA_FILE].s;
		if (access(o->ca_file, R_OK) != 0)
			return smux_error_set(err, SMUX_E_INVALID_OPTIONS,
					      s->name, "ca_file: %s: %s",
					      o->ca_file, strerror(errno));
	}
	if (v[SMUX__BK_CONNECT_TIMEOUT].line) {
		o->connect_timeout_ms = v[SMUX__BK_CONNECT_TIMEOUT].i;
		if (o->connect_timeout_ms <= 0)
			return smux_error_set(err, SMUX_E_INVALID_OPTIONS,
					      s->name,
					      "connect_timeout: must be more "
					      "than 0");
	}
	if (v[SMUX__BK_IDLE_TIMEOUT].line) {
		o->idle_timeout_ms = v[SMUX__BK_IDLE_TIMEOUT].i;
		if (o->idle_timeout_ms <= 0)
			return smux_error_set(err, SMUX_E_INVALID_OPTIONS,
					      s->name,
					      "idle_timeout: must be more "
					      "than 0");
	}
	return 0;
}

static int build_http(struct smux__cfg_section *s, struct smux_error *err)
{
	const struct smux__cfg_value *v = s->v;
	struct smux_http_opts ho = {0};
	char *user = NULL, *pass = NULL;
	struct net_opts no;
	int rc;

	rc = net_opts(s, &no, err);
	if (rc < 0)
		return rc;
	ho.ca_file = no.ca_file;
	ho.connect_timeout_ms = no.connect_timeout_ms;
	ho.idle_timeout_ms = no.idle_timeout_ms;
	rc = http_credentials(s, &user, &pass, err);
	if (rc < 0)
		return rc;
	ho.url = v[SMUX__BK_URL].s;
	/* WebDAV unless the operator says it is a plain static mirror */
	ho.webdav = !v[SMUX__BK_WEBDAV].line || v[SMUX__BK_WEBDAV].b;
	ho.username = user;
	ho.password = pass;
	rc = smux_http_new(s->name, &ho, &s->built, err);
	wipe_free(user);
	wipe_free(pass);
	return rc < 0 ? rc : rclone_links(s, err);
}

/*
 * A bunny backend: the zone password from credentials_file (one line) or
 * the variable credentials_env names; never quoted in an error.
 */
static int build_bunny(struct smux__cfg_section *s, struct smux_error *err)
{
	const struct smux__cfg_value *v = s->v;
	struct smux_bunny_opts bo = {0};
	char *key = NULL;
	struct net_opts no;
	const char *env;
	int rc;

	rc = net_opts(s, &no, err);
	if (rc < 0)
		return rc;
	bo.ca_file = no.ca_file;
	bo.connect_timeout_ms = no.connect_timeout_ms;
	bo.idle_timeout_ms = no.idle_timeout_ms;
	if (v[SMUX__BK_CREDENTIALS_FILE].line) {
		rc = smux_bunny_read_key(v[SMUX__BK_CREDENTIALS_FILE].s, &key,
					 err);
		if (rc < 0)
			return rc;
	} else {
		env = getenv(v[SMUX__BK_CREDENTIALS_ENV].s);
		if (!env || !env[0])
			return smux_error_set(err, SMUX_E_INVALID_OPTIONS,
					      s->name,
					      "credentials_env: $%s is not "
					      "set (the zone password)",
					      v[SMUX__BK_CREDENTIALS_ENV].s);
		key = strdup(env);
		if (!key)
			return smux_error_set(err, SMUX_E_NO_MEMORY, s->name,
					      NULL);
	}
	bo.zone = v[SMUX__BK_ZONE].s;
	bo.access_key = key;
	bo.region = v[SMUX__BK_REGION].line ? v[SMUX__BK_REGION].s : NULL;
	bo.endpoint = v[SMUX__BK_ENDPOINT].line ? v[SMUX__BK_ENDPOINT].s : NULL;
	bo.max_concurrency = v[SMUX__BK_MAX_CONCURRENCY].line
				     ? (unsigned)v[SMUX__BK_MAX_CONCURRENCY].u
				     : 0;
	rc = smux_bunny_new(s->name, &bo, &s->built, err);
	wipe_free(key);
	return rc < 0 ? rc : rclone_links(s, err);
}

/*
 * The attribute cache of an s3 or swift backend (core/attrstore.c):
 * state_dir/attrs/KIND-NAME.db in *@path (the caller frees it; NULL
 * without a state_dir: in memory), attr_store_max, attr_store = false.
 */
static int attr_store_opts(struct smux__cfg_section *s, const char *state_dir,
			   const char *kind, char **path, size_t *max,
			   bool *off, struct smux_error *err)
{
	const struct smux__cfg_value *v = s->v;

	*off = v[SMUX__BK_ATTR_STORE].line && !v[SMUX__BK_ATTR_STORE].b;
	*max = v[SMUX__BK_ATTR_STORE_MAX].line
		       ? (size_t)v[SMUX__BK_ATTR_STORE_MAX].u
		       : 0;
	*path = NULL;
	if (state_dir &&
	    asprintf(path, "%s/attrs/%s-%s.db", state_dir, kind, s->name) < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->name, NULL);
	return 0;
}

/* A swift backend: user:key (or user:password with
 * password_credentials) from credentials_file / credentials_env; with
 * auth_version 1 the user is tempauth's account:user, so the line is
 * account:user:key. */
static int build_swift(struct smux__cfg_section *s, const char *state_dir,
		       struct smux_error *err)
{
	const struct smux__cfg_value *v = s->v;
	struct smux_swift_opts so = {0};
	char *user = NULL, *secret = NULL, *attrs = NULL;
	struct net_opts no;
	int rc;

	rc = net_opts(s, &no, err);
	if (rc < 0)
		return rc;
	so.ca_file = no.ca_file;
	so.connect_timeout_ms = no.connect_timeout_ms;
	so.idle_timeout_ms = no.idle_timeout_ms;
	rc = http_credentials(s, &user, &secret, err);
	if (rc < 0)
		return rc;
	if (!user || !secret) /* refused at load; kept for the builder */
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->name,
				      "credentials_file or credentials_env: "
				      "missing");
	so.auth_url = v[SMUX__BK_AUTH_URL].s;
	so.auth =
		v[SMUX__BK_AUTH_VERSION].line && v[SMUX__BK_AUTH_VERSION].u == 2
			? SMUX_SWIFT_AUTH_V2
			: SMUX_SWIFT_AUTH_V1;
	so.container = v[SMUX__BK_CONTAINER].s;
	so.region = v[SMUX__BK_REGION].line ? v[SMUX__BK_REGION].s : NULL;
	so.tenant = v[SMUX__BK_TENANT].line ? v[SMUX__BK_TENANT].s : NULL;
	so.internal = v[SMUX__BK_INTERNAL].line && v[SMUX__BK_INTERNAL].b;
	/* large objects: 0 would mean the library's default, so a 0 in
	 * the file is refused rather than silently read as 5 GiB / 1 GiB */
	if ((v[SMUX__BK_SEGMENT_THRESHOLD].line &&
	     !v[SMUX__BK_SEGMENT_THRESHOLD].u) ||
	    (v[SMUX__BK_SEGMENT_SIZE].line && !v[SMUX__BK_SEGMENT_SIZE].u)) {
		rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->name,
				    "%s must be 1 byte to 5G",
				    v[SMUX__BK_SEGMENT_SIZE].line &&
						    !v[SMUX__BK_SEGMENT_SIZE].u
					    ? "segment_size"
					    : "segment_threshold");
		goto out;
	}
	so.segment_threshold = v[SMUX__BK_SEGMENT_THRESHOLD].u;
	so.segment_size = v[SMUX__BK_SEGMENT_SIZE].u;
	if (so.auth == SMUX_SWIFT_AUTH_V1) {
		/* "account" + ":" + "user:key": the user takes the first
		 * part of the rest */
		char *colon = strchr(secret, ':'), *full = NULL;

		if (!colon || colon == secret) {
			rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS,
					    s->name,
					    "credentials: auth_version 1 needs "
					    "account:user:key");
			goto out;
		}
		*colon = '\0';
		if (asprintf(&full, "%s:%s", user, secret) < 0) {
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, s->name,
					    NULL);
			goto out;
		}
		{
			size_t klen = strlen(colon + 1);

			memmove(secret, colon + 1, klen + 1);
			/* what is left of the old text past the key */
			explicit_bzero(secret + klen + 1,
				       (size_t)(colon - secret));
		}
		wipe_free(user);
		user = full;
	}
	so.username = user;
	if (v[SMUX__BK_PASSWORD_CREDENTIALS].line &&
	    v[SMUX__BK_PASSWORD_CREDENTIALS].b)
		so.password = secret;
	else
		so.key = secret;
	rc = attr_store_opts(s, state_dir, "swift", &attrs, &so.attr_store_max,
			     &so.attr_store_off, err);
	if (rc < 0)
		goto out;
	so.attr_store = attrs;
	rc = smux_swift_new(s->name, &so, &s->built, err);
out:
	free(attrs);
	wipe_free(user);
	wipe_free(secret);
	return rc;
}

/*
 * An s3 backend: credentials_file is an AWS shared-credentials file
 * (profile "default"), credentials_env the prefix of the variables
 * (PREFIX_ACCESS_KEY_ID...); neither: AWS_ACCESS_KEY_ID... The loaders
 * (s3_creds.c) name the file or variable in errors, never a value.
 */
static int build_s3(struct smux__cfg_section *s, const char *state_dir,
		    struct smux_error *err)
{
	const struct smux__cfg_value *v = s->v;
	struct smux_s3_opts so = {0};
	char *prefix = NULL, *journal = NULL, *attrs = NULL;
	struct net_opts no;
	int rc;

	rc = net_opts(s, &no, err);
	if (rc < 0)
		return rc;
	so.ca_file = no.ca_file;
	so.connect_timeout_ms = no.connect_timeout_ms;
	so.idle_timeout_ms = no.idle_timeout_ms;
	so.part_size = v[SMUX__BK_PART_SIZE].line ? v[SMUX__BK_PART_SIZE].u : 0;
	so.part_parallel = v[SMUX__BK_PART_PARALLEL].line
				   ? (unsigned)v[SMUX__BK_PART_PARALLEL].u
				   : 0;
	/* 0 in the file: parts above one part (0 in the options is the
	 * library's default) */
	if (v[SMUX__BK_MULTIPART_THRESHOLD].line)
		so.multipart_threshold =
			v[SMUX__BK_MULTIPART_THRESHOLD].u
				? v[SMUX__BK_MULTIPART_THRESHOLD].u
				: 1;
	so.endpoint = v[SMUX__BK_ENDPOINT].s;
	so.bucket = v[SMUX__BK_BUCKET].s;
	so.region = v[SMUX__BK_REGION].line ? v[SMUX__BK_REGION].s : NULL;
	/* path-style unless the operator asks for virtual hosts: it works
	 * with every server and any bucket name */
	so.path_style =
		!v[SMUX__BK_PATH_STYLE].line || v[SMUX__BK_PATH_STYLE].b;
	if (v[SMUX__BK_PREFIX].line && v[SMUX__BK_PREFIX].s[0]) {
		/* stored without slashes; the backend wants "a/b/" */
		if (asprintf(&prefix, "%s/", v[SMUX__BK_PREFIX].s) < 0)
			return smux_error_set(err, SMUX_E_NO_MEMORY, s->name,
					      NULL);
		so.prefix = prefix;
	}
	if (v[SMUX__BK_CREDENTIALS_FILE].line)
		so.credentials_file = v[SMUX__BK_CREDENTIALS_FILE].s;
	else if (v[SMUX__BK_CREDENTIALS_ENV].line)
		so.credentials_env = v[SMUX__BK_CREDENTIALS_ENV].s;
	/* multipart uploads in flight, aborted at the next start after a
	 * crash (s3_orphans.c) */
	if (state_dir &&
	    asprintf(&journal, "%s/s3-uploads/%s", state_dir, s->name) < 0) {
		free(prefix);
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->name, NULL);
	}
	so.upload_journal = journal;
	/* the attribute cache beside it; no state_dir: in memory */
	rc = attr_store_opts(s, state_dir, "s3", &attrs, &so.attr_store_max,
			     &so.attr_store_off, err);
	if (rc < 0) {
		free(journal);
		free(prefix);
		return rc;
	}
	so.attr_store = attrs;
	rc = smux_s3_new(s->name, &so, &s->built, err);
	free(attrs);
	free(journal);
	free(prefix);
	return rc;
}

static int build_section(struct build *b, struct smux__cfg_section *s);

/* The fault options a faulty section gives (0 for keys not set). */
void smux_config_faulty_opts(const struct smux__cfg_section *s,
			     struct smux_faulty_opts *out)
{
	const struct smux__cfg_value *v = s->v;
	struct smux_faulty_opts fo = {0};

	fo.latency_ms = v[SMUX__BK_LATENCY].line ? v[SMUX__BK_LATENCY].i : 0;
	fo.hang_ms = v[SMUX__BK_HANG].line ? v[SMUX__BK_HANG].i : 0;
	fo.hang_rate = v[SMUX__BK_HANG_RATE].line ? v[SMUX__BK_HANG_RATE].d : 0;
	fo.error_rate =
		v[SMUX__BK_ERROR_RATE].line ? v[SMUX__BK_ERROR_RATE].d : 0;
	fo.semantic_rate = v[SMUX__BK_SEMANTIC_RATE].line
				   ? v[SMUX__BK_SEMANTIC_RATE].d
				   : 0;
	fo.timeout_rate =
		v[SMUX__BK_TIMEOUT_RATE].line ? v[SMUX__BK_TIMEOUT_RATE].d : 0;
	fo.seed = v[SMUX__BK_SEED].line ? v[SMUX__BK_SEED].u : 0;
	fo.after_ms =
		v[SMUX__BK_FAULT_AFTER].line ? v[SMUX__BK_FAULT_AFTER].i : 0;
	fo.for_ms = v[SMUX__BK_FAULT_FOR].line ? v[SMUX__BK_FAULT_FOR].i : 0;
	*out = fo;
}

static int build_backend(struct build *b, struct smux__cfg_section *s,
			 struct smux_error *err)
{
	const struct smux__cfg_value *v = s->v;
	struct smux_faulty_opts fo = {0};
	struct smux_file_opts file = {0};
	int rc;

	switch ((enum smux__cfg_type)v[SMUX__BK_TYPE].i) {
	case SMUX__CFG_T_FILE:
		file.path = v[SMUX__BK_PATH].s;
		file.no_fsync =
			v[SMUX__BK_NO_FSYNC].line && v[SMUX__BK_NO_FSYNC].b;
		file.read_only = b->cfg->opts.ro; /* -o ro changes nothing */
		rc = smux_file_new(s->name, &file, &s->built, err);
		if (!rc && smux_file_swept(s->built))
			smux_log(
				LOG_NOTICE,
				"backend \"%s\": removed %u leftover temp "
				"file(s) of an earlier run from %s/.smuxfs-tmp",
				s->name, smux_file_swept(s->built), file.path);
		return rc;
	case SMUX__CFG_T_MEMORY:
		return smux_memory_new(s->name, &s->built, err);
	case SMUX__CFG_T_HTTP:
		return build_http(s, err);
	case SMUX__CFG_T_BUNNY:
		return build_bunny(s, err);
	case SMUX__CFG_T_SWIFT:
		return build_swift(s, b->cfg->opts.state_dir, err);
	case SMUX__CFG_T_S3:
		return build_s3(s, b->cfg->opts.state_dir, err);
	case SMUX__CFG_T_FAULTY:
		rc = build_section(b, s->wraps_sec);
		if (rc)
			return rc;
		smux_config_faulty_opts(s, &fo);
		return smux_faulty_new(s->name, s->wraps_sec->built, &fo,
				       &s->built, err);
	default:
		/* refused at load; kept for a type added to the table only */
		return smux_error_set(
			err, SMUX_E_NOT_SUPPORTED, s->name,
			"backend type \"%s\" is not available",
			smux__cfg_type_name(
				(enum smux__cfg_type)v[SMUX__BK_TYPE].i));
	}
}

static int build_mux(struct build *b, struct smux__cfg_section *s,
		     struct smux_error *err)
{
	const struct smux__cfg_value *v = s->v;
	struct smux_mux_opts mo = {0};
	struct smux_mux_member *m;
	int rc;

	if (s->n_members == 0) /* refused at load */
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->name,
				      "a mux needs at least one backend");
	for (unsigned i = 0; i < s->n_members; i++) {
		rc = build_section(b, s->member_secs[i]);
		if (rc)
			return rc;
	}
	m = calloc(s->n_members, sizeof(*m));
	if (!m)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->name, NULL);
	for (unsigned i = 0; i < s->n_members; i++) {
		const struct smux__cfg_section *c = s->member_secs[i];
		const struct smux__cfg_value *w;

		w = &c->v[c->kind == SMUX__CFG_MUX ? SMUX__XK_WEIGHT
						   : SMUX__BK_WEIGHT];
		m[i].backend = c->built;
		m[i].has_weight = w->line != 0;
		m[i].weight = w->line ? w->d : 0;
	}
	mo.mode = (enum smux_mode)v[SMUX__XK_MODE].i;
	mo.backend_timeout_ms = smux__cfg_mux_ms(s, SMUX__XK_BACKEND_TIMEOUT);
	mo.cooldown_ms = smux__cfg_mux_ms(s, SMUX__XK_COOLDOWN);
	mo.max_cooldown_ms = smux__cfg_mux_ms(s, SMUX__XK_MAX_COOLDOWN);
	mo.healthcheck_interval_ms =
		smux__cfg_mux_ms(s, SMUX__XK_HEALTHCHECK_INTERVAL);
	mo.write_quorum = smux__cfg_mux_count(s, SMUX__XK_WRITE_QUORUM);
	mo.throw_on_fanout_partial = v[SMUX__XK_THROW_ON_FANOUT_PARTIAL].line &&
				     v[SMUX__XK_THROW_ON_FANOUT_PARTIAL].b;
	mo.max_inflight = smux__cfg_mux_count(s, SMUX__XK_MAX_INFLIGHT);
	mo.state_dir = b->cfg->opts.state_dir;
	mo.events = b->events;
	mo.tracer = b->cfg->tracer;
	rc = smux_mux_new(s->name, &mo, m, s->n_members, &s->built, err);
	free(m);
	return rc;
}

/* Builds @s (and what it needs) once; 0 or a negative errno + errbuf. */
static int build_section(struct build *b, struct smux__cfg_section *s)
{
	struct smux_error err = {0};
	int rc;

	if (s->built)
		return 0;
	if (s->kind == SMUX__CFG_MUX)
		rc = build_mux(b, s, &err);
	else
		rc = build_backend(b, s, &err);
	/* a failure below us has already written errbuf */
	if (rc && !b->reported)
		return build_error(b, s, &err, rc);
	return rc;
}

/*
 * A root that is one backend gets what a mux member gets: a deadline per
 * call and a bulkhead (DESIGN section 4), by wrapping it in a one-member
 * failover mux named like the backend (so .smux/stats shows the name the
 * operator wrote). A failover of one member never falls through and never
 * hints; reads and writes go to the backend as before.
 */
static int build_single_root(struct build *b, struct smux__cfg_section *s,
			     struct smux_backend **root)
{
	struct smux_mux_member m = {.backend = s->built};
	struct smux_mux_opts mo = {0};
	struct smux_error err = {0};
	int rc;

	mo.mode = SMUX_MODE_FAILOVER;
	mo.backend_timeout_ms = (int64_t)b->cfg->opts.backend_timeout_ms;
	mo.state_dir = NULL; /* one member: nothing to hint */
	mo.events = b->events;
	mo.tracer = b->cfg->tracer;
	rc = smux_mux_new(s->name, &mo, &m, 1, root, &err);
	if (rc)
		return build_error(b, s, &err, rc);
	return 0;
}

int smux_config_build(struct smux_config *cfg, struct smux_events *events,
		      struct smux_backend **root, char *errbuf, size_t errlen)
{
	struct build b = {.cfg = cfg,
			  .events = events,
			  .errbuf = errbuf,
			  .errlen = errlen};
	int rc;

	*root = NULL;
	if (errbuf && errlen)
		errbuf[0] = '\0';
	rc = build_section(&b, cfg->root);
	if (rc == 0 && cfg->root->kind == SMUX__CFG_MUX)
		*root = smux_backend_ref(cfg->root->built);
	else if (rc == 0)
		rc = build_single_root(&b, cfg->root, root);
	/* the tree holds its own references to what it uses */
	for (unsigned i = 0; i < cfg->n_secs; i++) {
		smux_backend_unref(cfg->secs[i]->built);
		cfg->secs[i]->built = NULL;
	}
	return rc;
}

void smux_config_set_tracer(struct smux_config *cfg,
			    const struct smux_tracer *tracer)
{
	cfg->tracer = tracer;
}

int smux_config_build_member(struct smux_config *cfg, const char *name,
			     struct smux_events *events,
			     const struct smux_tracer *tracer,
			     struct smux_mux_member *out, char *errbuf,
			     size_t errlen)
{
	struct smux__cfg_section *s;
	const struct smux__cfg_value *w;
	struct build b = {.cfg = cfg,
			  .events = events,
			  .errbuf = errbuf,
			  .errlen = errlen};
	const struct smux_tracer *was = cfg->tracer;
	int rc;

	memset(out, 0, sizeof(*out));
	s = smux__cfg_find(cfg, name);
	if (!s || s->kind == SMUX__CFG_MOUNT) {
		snprintf(errbuf, errlen, "%s: no [backend %s] or [mux %s]",
			 cfg->path, name, name);
		return -ENOENT;
	}
	cfg->tracer = tracer;
	rc = build_section(&b, s);
	cfg->tracer = was;
	if (rc == 0) {
		w = &s->v[s->kind == SMUX__CFG_MUX ? SMUX__XK_WEIGHT
						   : SMUX__BK_WEIGHT];
		out->backend = smux_backend_ref(s->built);
		out->has_weight = w->line != 0;
		out->weight = w->line ? w->d : 0;
	}
	/* the member holds its own references to what it uses; the
	 * sections forget theirs so the config can build again */
	for (unsigned i = 0; i < cfg->n_secs; i++) {
		smux_backend_unref(cfg->secs[i]->built);
		cfg->secs[i]->built = NULL;
	}
	return rc;
}
