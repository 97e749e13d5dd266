// SPDX-License-Identifier: MIT
/*
 * config.c - the model of a configuration: the key tables of [mount],
 * [mux] and [backend] (names, value syntax, which backend types take a
 * key, which keys are secret), the mount options as [mount] and the
 * defaults make them, -o options, the fstab options a daemon ignores,
 * and smux_config_free.
 *
 * Reading the file is config_parse.c; checks are config_check.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/vfs.h>

#include "fs/config_internal.h"

#define T(x)	(1u << SMUX__CFG_T_##x)
#define T_CREDS (T(S3) | T(HTTP) | T(SWIFT) | T(BUNNY))

static const struct smux__cfg_keydef mount_keys[SMUX__MK_COUNT] = {
	[SMUX__MK_ROOT] = {"root", SMUX__VT_NAME},
	[SMUX__MK_CACHE_DIR] = {"cache_dir", SMUX__VT_ABSPATH},
	[SMUX__MK_STATE_DIR] = {"state_dir", SMUX__VT_ABSPATH},
	[SMUX__MK_PREFIX] = {"prefix", SMUX__VT_PREFIX},
	[SMUX__MK_ATTR_TIMEOUT] = {"attr_timeout", SMUX__VT_DURATION},
	[SMUX__MK_ENTRY_TIMEOUT] = {"entry_timeout", SMUX__VT_DURATION},
	[SMUX__MK_NEGATIVE_TIMEOUT] = {"negative_timeout", SMUX__VT_DURATION},
	[SMUX__MK_DIR_CACHE_TIMEOUT] = {"dir_cache_timeout", SMUX__VT_DURATION},
	[SMUX__MK_CACHE_SIZE] = {"cache_size", SMUX__VT_SIZE},
	[SMUX__MK_ALLOW_OTHER] = {"allow_other", SMUX__VT_BOOL},
	[SMUX__MK_DEFAULT_PERMISSIONS] = {"default_permissions", SMUX__VT_BOOL},
	[SMUX__MK_RO] = {"ro", SMUX__VT_BOOL},
	[SMUX__MK_UID] = {"uid", SMUX__VT_UID},
	[SMUX__MK_GID] = {"gid", SMUX__VT_GID},
	[SMUX__MK_UMASK] = {"umask", SMUX__VT_UMASK},
	[SMUX__MK_READ_CACHE] = {"read_cache", SMUX__VT_AUTO},
	[SMUX__MK_READ_AHEAD] = {"read_ahead", SMUX__VT_SIZE},
	[SMUX__MK_BACKEND_TIMEOUT] = {"backend_timeout", SMUX__VT_DURATION},
	[SMUX__MK_XATTR] = {"xattr", SMUX__VT_AUTO},
	[SMUX__MK_PASSTHROUGH] = {"passthrough", SMUX__VT_AUTO},
	[SMUX__MK_DELETE_BATCH] = {"delete_batch", SMUX__VT_AUTO},
	[SMUX__MK_OTLP_ENDPOINT] = {"otlp_endpoint", SMUX__VT_STRING},
	[SMUX__MK_EVENT_WEBHOOK] = {"event_webhook", SMUX__VT_STRING},
};

static const struct smux__cfg_keydef mux_keys[SMUX__XK_COUNT] = {
	[SMUX__XK_MODE] = {"mode", SMUX__VT_MODE},
	[SMUX__XK_BACKENDS] = {"backends", SMUX__VT_NAMES},
	[SMUX__XK_BACKEND_TIMEOUT] = {"backend_timeout", SMUX__VT_DURATION},
	[SMUX__XK_COOLDOWN] = {"cooldown", SMUX__VT_DURATION},
	[SMUX__XK_MAX_COOLDOWN] = {"max_cooldown", SMUX__VT_DURATION},
	[SMUX__XK_HEALTHCHECK_INTERVAL] = {"healthcheck_interval",
					   SMUX__VT_DURATION},
	[SMUX__XK_WRITE_QUORUM] = {"write_quorum", SMUX__VT_COUNT},
	[SMUX__XK_THROW_ON_FANOUT_PARTIAL] = {"throw_on_fanout_partial",
					      SMUX__VT_BOOL},
	[SMUX__XK_MAX_INFLIGHT] = {"max_inflight", SMUX__VT_COUNT},
	[SMUX__XK_WEIGHT] = {"weight", SMUX__VT_WEIGHT},
};

static const struct smux__cfg_keydef backend_keys[SMUX__BK_COUNT] = {
	[SMUX__BK_TYPE] = {"type", SMUX__VT_TYPE, 0},
	[SMUX__BK_WEIGHT] = {"weight", SMUX__VT_WEIGHT, 0},
	[SMUX__BK_PATH] = {"path", SMUX__VT_ABSPATH, T(FILE)},
	[SMUX__BK_NO_FSYNC] = {"no_fsync", SMUX__VT_BOOL, T(FILE)},
	[SMUX__BK_WRAPS] = {"wraps", SMUX__VT_NAME, T(FAULTY)},
	[SMUX__BK_LATENCY] = {"latency", SMUX__VT_DURATION, T(FAULTY)},
	[SMUX__BK_HANG_RATE] = {"hang_rate", SMUX__VT_RATE, T(FAULTY)},
	[SMUX__BK_ERROR_RATE] = {"error_rate", SMUX__VT_RATE, T(FAULTY)},
	[SMUX__BK_SEMANTIC_RATE] = {"semantic_rate", SMUX__VT_RATE, T(FAULTY)},
	[SMUX__BK_TIMEOUT_RATE] = {"timeout_rate", SMUX__VT_RATE, T(FAULTY)},
	[SMUX__BK_HANG] = {"hang", SMUX__VT_DURATION, T(FAULTY)},
	[SMUX__BK_SEED] = {"seed", SMUX__VT_U64, T(FAULTY)},
	[SMUX__BK_FAULT_AFTER] = {"fault_after", SMUX__VT_DURATION, T(FAULTY)},
	[SMUX__BK_FAULT_FOR] = {"fault_for", SMUX__VT_DURATION, T(FAULTY)},
	/* keys of the network types to come (DESIGN section 6) */
	[SMUX__BK_ENDPOINT] = {"endpoint", SMUX__VT_STRING, T(S3) | T(BUNNY)},
	[SMUX__BK_BUCKET] = {"bucket", SMUX__VT_STRING, T(S3)},
	[SMUX__BK_REGION] = {"region", SMUX__VT_STRING,
			     T(S3) | T(BUNNY) | T(SWIFT)},
	[SMUX__BK_PREFIX] = {"prefix", SMUX__VT_PREFIX, T(S3)},
	[SMUX__BK_PATH_STYLE] = {"path_style", SMUX__VT_BOOL, T(S3)},
	[SMUX__BK_URL] = {"url", SMUX__VT_STRING, T(HTTP)},
	[SMUX__BK_WEBDAV] = {"webdav", SMUX__VT_BOOL, T(HTTP)},
	[SMUX__BK_CREDENTIALS_FILE] = {"credentials_file", SMUX__VT_ABSPATH,
				       T_CREDS, true},
	[SMUX__BK_CREDENTIALS_ENV] = {"credentials_env", SMUX__VT_STRING,
				      T_CREDS, true},
	[SMUX__BK_ZONE] = {"zone", SMUX__VT_STRING, T(BUNNY)},
	[SMUX__BK_MAX_CONCURRENCY] = {"max_concurrency", SMUX__VT_COUNT,
				      T(BUNNY)},
	[SMUX__BK_RCLONE_LINKS] = {"rclone_links", SMUX__VT_BOOL,
				   T(HTTP) | T(BUNNY)},
	[SMUX__BK_AUTH_URL] = {"auth_url", SMUX__VT_STRING, T(SWIFT)},
	[SMUX__BK_AUTH_VERSION] = {"auth_version", SMUX__VT_COUNT, T(SWIFT)},
	[SMUX__BK_CONTAINER] = {"container", SMUX__VT_STRING, T(SWIFT)},
	[SMUX__BK_TENANT] = {"tenant", SMUX__VT_STRING, T(SWIFT)},
	[SMUX__BK_INTERNAL] = {"internal", SMUX__VT_BOOL, T(SWIFT)},
	[SMUX__BK_PASSWORD_CREDENTIALS] = {"password_credentials",
					   SMUX__VT_BOOL, T(SWIFT)},
	[SMUX__BK_CA_FILE] = {"ca_file", SMUX__VT_ABSPATH, T_CREDS},
	[SMUX__BK_CONNECT_TIMEOUT] = {"connect_timeout", SMUX__VT_DURATION,
				      T_CREDS},
	[SMUX__BK_IDLE_TIMEOUT] = {"idle_timeout", SMUX__VT_DURATION, T_CREDS},
	[SMUX__BK_PART_SIZE] = {"part_size", SMUX__VT_SIZE, T(S3)},
	[SMUX__BK_PART_PARALLEL] = {"part_parallel", SMUX__VT_COUNT, T(S3)},
	[SMUX__BK_MULTIPART_THRESHOLD] = {"multipart_threshold", SMUX__VT_SIZE,
					  T(S3)},
	[SMUX__BK_SEGMENT_THRESHOLD] = {"segment_threshold", SMUX__VT_SIZE,
					T(SWIFT)},
	[SMUX__BK_SEGMENT_SIZE] = {"segment_size", SMUX__VT_SIZE, T(SWIFT)},
	[SMUX__BK_ATTR_STORE] = {"attr_store", SMUX__VT_BOOL, T(S3) | T(SWIFT)},
	[SMUX__BK_ATTR_STORE_MAX] = {"attr_store_max", SMUX__VT_COUNT,
				     T(S3) | T(SWIFT)},
};

static const char *const type_names[SMUX__CFG_T_COUNT] = {
	[SMUX__CFG_T_NONE] = "none",	 [SMUX__CFG_T_FILE] = "file",
	[SMUX__CFG_T_MEMORY] = "memory", [SMUX__CFG_T_FAULTY] = "faulty",
	[SMUX__CFG_T_S3] = "s3",	 [SMUX__CFG_T_HTTP] = "http",
	[SMUX__CFG_T_SWIFT] = "swift",	 [SMUX__CFG_T_BUNNY] = "bunny",
};

const struct smux__cfg_keydef *smux__cfg_keys(enum smux__cfg_kind kind,
					      unsigned *n)
{
	switch (kind) {
	case SMUX__CFG_MOUNT:
		*n = SMUX__MK_COUNT;
		return mount_keys;
	case SMUX__CFG_MUX:
		*n = SMUX__XK_COUNT;
		return mux_keys;
	case SMUX__CFG_BACKEND:
	default:
		*n = SMUX__BK_COUNT;
		return backend_keys;
	}
}

const char *smux__cfg_type_name(enum smux__cfg_type t)
{
	return (unsigned)t < SMUX__CFG_T_COUNT ? type_names[t] : "?";
}

char *smux__cfg_label(const struct smux__cfg_section *s, char *buf, size_t len)
{
	if (s->kind == SMUX__CFG_MOUNT)
		snprintf(buf, len, "[mount]");
	else
		snprintf(buf, len, "[%s %s]",
			 s->kind == SMUX__CFG_MUX ? "mux" : "backend", s->name);
	return buf;
}

struct smux__cfg_section *smux__cfg_find(const struct smux_config *cfg,
					 const char *name)
{
	for (unsigned i = 0; i < cfg->n_secs; i++)
		if (cfg->secs[i]->name && strcmp(cfg->secs[i]->name, name) == 0)
			return cfg->secs[i];
	return NULL;
}

int smux__cfg_errorf(char *buf, size_t len, const char *path, int line,
		     const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!buf || len == 0)
		return -EINVAL;
	if (line > 0)
		n = snprintf(buf, len, "%s:%d: ", path, line);
	else
		n = snprintf(buf, len, "%s: ", path);
	if (n < 0 || (size_t)n >= len)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* ---- mount options ---- */

static int dup_dir(char **out, const struct smux__cfg_value *v, const char *def,
		   const char *root)
{
	if (v->line)
		*out = strdup(v->s);
	else if (asprintf(out, "%s/%s", def, root) < 0)
		*out = NULL;
	return *out ? 0 : -ENOMEM;
}

static double seconds(const struct smux__cfg_value *v)
{
	return v->line ? (double)v->i / 1000.0 : 1.0;
}

/* struct smux_fs_opts from [mount] and the defaults. */
int smux__cfg_fill_opts(struct smux_config *cfg)
{
	struct smux_fs_opts *o = &cfg->opts;
	const struct smux__cfg_value *v = cfg->mount->v;

	o->root = strdup(v[SMUX__MK_ROOT].s);
	o->prefix = strdup(v[SMUX__MK_PREFIX].line ? v[SMUX__MK_PREFIX].s : "");
	if (!o->root || !o->prefix ||
	    dup_dir(&o->cache_dir, &v[SMUX__MK_CACHE_DIR],
		    SMUX_FS_DEFAULT_CACHE_DIR, o->root) ||
	    dup_dir(&o->state_dir, &v[SMUX__MK_STATE_DIR],
		    SMUX_FS_DEFAULT_STATE_DIR, o->root))
		return -ENOMEM;
	o->attr_timeout = seconds(&v[SMUX__MK_ATTR_TIMEOUT]);
	o->entry_timeout = seconds(&v[SMUX__MK_ENTRY_TIMEOUT]);
	o->negative_timeout = seconds(&v[SMUX__MK_NEGATIVE_TIMEOUT]);
	o->dir_cache_timeout = v[SMUX__MK_DIR_CACHE_TIMEOUT].line
				       ? seconds(&v[SMUX__MK_DIR_CACHE_TIMEOUT])
				       : SMUX_FS_DEFAULT_DIR_CACHE_TIMEOUT;
	o->cache_size = v[SMUX__MK_CACHE_SIZE].line ? v[SMUX__MK_CACHE_SIZE].u
						    : (uint64_t)1 << 30;
	o->read_ahead = v[SMUX__MK_READ_AHEAD].line
				? v[SMUX__MK_READ_AHEAD].u
				: SMUX_FS_DEFAULT_READ_AHEAD;
	o->read_ahead_line = v[SMUX__MK_READ_AHEAD].line;
	o->allow_other =
		v[SMUX__MK_ALLOW_OTHER].line && v[SMUX__MK_ALLOW_OTHER].b;
	o->default_permissions = v[SMUX__MK_DEFAULT_PERMISSIONS].line &&
				 v[SMUX__MK_DEFAULT_PERMISSIONS].b;
	o->no_default_permissions = v[SMUX__MK_DEFAULT_PERMISSIONS].line &&
				    !v[SMUX__MK_DEFAULT_PERMISSIONS].b;
	o->ro = v[SMUX__MK_RO].line && v[SMUX__MK_RO].b;
	o->has_uid = v[SMUX__MK_UID].line != 0;
	o->uid = (uid_t)v[SMUX__MK_UID].u;
	o->has_gid = v[SMUX__MK_GID].line != 0;
	o->gid = (gid_t)v[SMUX__MK_GID].u;
	o->has_umask = v[SMUX__MK_UMASK].line != 0;
	o->umask = (mode_t)v[SMUX__MK_UMASK].u;
	o->read_cache = v[SMUX__MK_READ_CACHE].line
				? (enum smux_fs_auto)v[SMUX__MK_READ_CACHE].i
				: SMUX_FS_AUTO;
	if (v[SMUX__MK_OTLP_ENDPOINT].line &&
	    !(o->otlp_endpoint = strdup(v[SMUX__MK_OTLP_ENDPOINT].s)))
		return -ENOMEM;
	if (v[SMUX__MK_EVENT_WEBHOOK].line &&
	    !(o->event_webhook = strdup(v[SMUX__MK_EVENT_WEBHOOK].s)))
		return -ENOMEM;
	o->xattr = v[SMUX__MK_XATTR].line
			   ? (enum smux_fs_auto)v[SMUX__MK_XATTR].i
			   : SMUX_FS_AUTO;
	o->passthrough = v[SMUX__MK_PASSTHROUGH].line
				 ? (enum smux_fs_auto)v[SMUX__MK_PASSTHROUGH].i
				 : SMUX_FS_AUTO;
	o->delete_batch =
		v[SMUX__MK_DELETE_BATCH].line
			? (enum smux_fs_auto)v[SMUX__MK_DELETE_BATCH].i
			: SMUX_FS_AUTO;
	o->backend_timeout_ms =
		v[SMUX__MK_BACKEND_TIMEOUT].line
			? (uint64_t)v[SMUX__MK_BACKEND_TIMEOUT].i
			: SMUX_DEFAULT_BACKEND_TIMEOUT_MS;
	return 0;
}

int smux__cfg_parse_auto(const char *s, int64_t *v, char *why, size_t len)
{
	char q[SMUX__CFG_QUOTE_MAX];
	bool b;

	if (strcasecmp(s, "auto") == 0) {
		*v = SMUX_FS_AUTO;
		return 0;
	}
	if (smux__cfg_parse_bool(s, &b, why, len) == 0) {
		*v = b ? SMUX_FS_ON : SMUX_FS_OFF;
		return 0;
	}
	snprintf(why, len, "invalid value %s (use auto, on, off)",
		 smux__cfg_quote(s, strlen(s), q, sizeof(q)));
	return -EINVAL;
}

static bool is_string_vt(enum smux__cfg_vt vt)
{
	return vt == SMUX__VT_STRING || vt == SMUX__VT_ABSPATH ||
	       vt == SMUX__VT_NAME || vt == SMUX__VT_PREFIX;
}

void smux_config_free(struct smux_config *cfg)
{
	if (!cfg)
		return;
	for (unsigned i = 0; i < cfg->n_secs; i++) {
		struct smux__cfg_section *s = cfg->secs[i];
		const struct smux__cfg_keydef *keys;
		unsigned nk;

		keys = smux__cfg_keys(s->kind, &nk);
		for (unsigned k = 0; k < nk; k++)
			if (s->v[k].line && is_string_vt(keys[k].vt))
				free(s->v[k].s);
		for (unsigned m = 0; m < s->n_members; m++)
			free(s->members[m]);
		free(s->members);
		free(s->member_secs);
		free(s->name);
		free(s);
	}
	free(cfg->secs);
	free(cfg->opts.root);
	free(cfg->opts.cache_dir);
	free(cfg->opts.state_dir);
	free(cfg->opts.prefix);
	free(cfg->opts.otlp_endpoint);
	free(cfg->opts.event_webhook);
	free(cfg->path);
	free(cfg);
}

struct smux_fs_opts *smux_config_opts(struct smux_config *cfg)
{
	return &cfg->opts;
}

/* -o options that are no [mount] key */
#define OPT_RW			   (-1)
#define OPT_NO_DEFAULT_PERMISSIONS (-2)

static const struct {
	const char *name;
	int key; /* SMUX__MK_*; OPT_RW, OPT_NO_DEFAULT_PERMISSIONS */
	bool flag;
} mount_opts[] = {
	{"cache_dir", SMUX__MK_CACHE_DIR, false},
	{"state_dir", SMUX__MK_STATE_DIR, false},
	{"attr_timeout", SMUX__MK_ATTR_TIMEOUT, false},
	{"entry_timeout", SMUX__MK_ENTRY_TIMEOUT, false},
	{"negative_timeout", SMUX__MK_NEGATIVE_TIMEOUT, false},
	{"dir_cache_timeout", SMUX__MK_DIR_CACHE_TIMEOUT, false},
	{"cache_size", SMUX__MK_CACHE_SIZE, false},
	{"read_cache", SMUX__MK_READ_CACHE, false},
	{"read_ahead", SMUX__MK_READ_AHEAD, false},
	{"backend_timeout", SMUX__MK_BACKEND_TIMEOUT, false},
	{"xattr", SMUX__MK_XATTR, false},
	{"passthrough", SMUX__MK_PASSTHROUGH, false},
	{"delete_batch", SMUX__MK_DELETE_BATCH, false},
	{"uid", SMUX__MK_UID, false},
	{"gid", SMUX__MK_GID, false},
	{"umask", SMUX__MK_UMASK, false},
	{"allow_other", SMUX__MK_ALLOW_OTHER, true},
	{"default_permissions", SMUX__MK_DEFAULT_PERMISSIONS, true},
	{"ro", SMUX__MK_RO, true},
	{"no_default_permissions", OPT_NO_DEFAULT_PERMISSIONS, true},
	{"rw", OPT_RW, true},
};

static int apply_opt(struct smux_fs_opts *o, int key, const char *val,
		     char *why, size_t len)
{
	int64_t ms;
	char *s;
	int rc;

	switch (key) {
	case SMUX__MK_CACHE_DIR:
	case SMUX__MK_STATE_DIR:
		if (!val[0]) {
			snprintf(why, len, "empty value");
			return -EINVAL;
		}
		if (!smux__cfg_utf8_ok(val, strlen(val))) {
			snprintf(why, len, "invalid UTF-8");
			return -EINVAL;
		}
		rc = smux__cfg_parse_abspath(val, why, len);
		if (rc)
			return rc;
		s = strdup(val);
		if (!s)
			return -ENOMEM;
		if (key == SMUX__MK_CACHE_DIR) {
			free(o->cache_dir);
			o->cache_dir = s;
		} else {
			free(o->state_dir);
			o->state_dir = s;
		}
		return 0;
	case SMUX__MK_ATTR_TIMEOUT:
	case SMUX__MK_ENTRY_TIMEOUT:
	case SMUX__MK_NEGATIVE_TIMEOUT:
	case SMUX__MK_DIR_CACHE_TIMEOUT:
		rc = smux__cfg_parse_duration(val, &ms, why, len);
		if (rc)
			return rc;
		if (key == SMUX__MK_ATTR_TIMEOUT)
			o->attr_timeout = (double)ms / 1000.0;
		else if (key == SMUX__MK_ENTRY_TIMEOUT)
			o->entry_timeout = (double)ms / 1000.0;
		else if (key == SMUX__MK_DIR_CACHE_TIMEOUT)
			o->dir_cache_timeout = (double)ms / 1000.0;
		else
			o->negative_timeout = (double)ms / 1000.0;
		return 0;
	case SMUX__MK_BACKEND_TIMEOUT:
		rc = smux__cfg_parse_duration(val, &ms, why, len);
		if (rc == 0 && ms <= 0) {
			snprintf(why, len, "must be more than 0");
			rc = -EINVAL;
		}
		if (rc == 0)
			o->backend_timeout_ms = (uint64_t)ms;
		return rc;
	case SMUX__MK_CACHE_SIZE:
		return smux__cfg_parse_size(val, &o->cache_size, why, len);
	case SMUX__MK_READ_AHEAD:
		o->read_ahead_line = -1;
		return smux__cfg_parse_size(val, &o->read_ahead, why, len);
	case SMUX__MK_READ_CACHE:
		rc = smux__cfg_parse_auto(val, &ms, why, len);
		if (rc == 0)
			o->read_cache = (enum smux_fs_auto)ms;
		return rc;
	case SMUX__MK_XATTR:
		rc = smux__cfg_parse_auto(val, &ms, why, len);
		if (rc == 0)
			o->xattr = (enum smux_fs_auto)ms;
		return rc;
	case SMUX__MK_PASSTHROUGH:
		rc = smux__cfg_parse_auto(val, &ms, why, len);
		if (rc == 0)
			o->passthrough = (enum smux_fs_auto)ms;
		return rc;
	case SMUX__MK_DELETE_BATCH:
		rc = smux__cfg_parse_auto(val, &ms, why, len);
		if (rc == 0)
			o->delete_batch = (enum smux_fs_auto)ms;
		return rc;
	case SMUX__MK_UID:
		rc = smux__cfg_parse_uid(val, &o->uid, why, len);
		o->has_uid = o->has_uid || rc == 0;
		return rc;
	case SMUX__MK_GID:
		rc = smux__cfg_parse_gid(val, &o->gid, why, len);
		o->has_gid = o->has_gid || rc == 0;
		return rc;
	case SMUX__MK_UMASK:
		rc = smux__cfg_parse_umask(val, &o->umask, why, len);
		o->has_umask = o->has_umask || rc == 0;
		return rc;
	case SMUX__MK_ALLOW_OTHER:
		o->allow_other = true;
		return 0;
	case SMUX__MK_DEFAULT_PERMISSIONS:
		o->default_permissions = true;
		o->no_default_permissions = false;
		return 0;
	case OPT_NO_DEFAULT_PERMISSIONS:
		o->default_permissions = false;
		o->no_default_permissions = true;
		return 0;
	case SMUX__MK_RO:
		o->ro = true;
		return 0;
	default:
		o->ro = false; /* rw */
		return 0;
	}
}

int smux_config_mount_opt(struct smux_config *cfg, const char *opt,
			  char *errbuf, size_t errlen)
{
	const char *eq = strchr(opt, '=');
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
	char why[400];
	int rc;

	for (size_t i = 0; i < sizeof(mount_opts) / sizeof(mount_opts[0]);
	     i++) {
		const char *name = mount_opts[i].name;

		if (strlen(name) != klen || memcmp(name, opt, klen) != 0)
			continue;
		if (mount_opts[i].flag && eq) {
			snprintf(errbuf, errlen, "option %s: takes no value",
				 name);
			return -EINVAL;
		}
		if (!mount_opts[i].flag && !eq) {
			snprintf(errbuf, errlen,
				 "option %s: needs a value (%s=...)", name,
				 name);
			return -EINVAL;
		}
		rc = apply_opt(&cfg->opts, mount_opts[i].key, eq ? eq + 1 : "",
			       why, sizeof(why));
		if (rc == -ENOMEM)
			snprintf(why, sizeof(why), "out of memory");
		if (rc) {
			snprintf(errbuf, errlen, "option %s: %s", name, why);
			return rc;
		}
		return 1;
	}
	return 0;
}

int smux_config_check_read_ahead(const struct smux_config *cfg, char *errbuf,
				 size_t errlen)
{
	const struct smux_fs_opts *o = &cfg->opts;
	char ra[32], cs[32], most[32];

	if (!o->read_ahead_line || o->read_ahead <= o->cache_size / 2)
		return 0;
	smux__cfg_fmt_size(o->read_ahead, ra, sizeof(ra));
	smux__cfg_fmt_size(o->cache_size, cs, sizeof(cs));
	smux__cfg_fmt_size(o->cache_size / 2, most, sizeof(most));
	if (o->read_ahead_line < 0) {
		snprintf(errbuf, errlen,
			 "option read_ahead: %s is more than half of "
			 "cache_size (%s): at most %s",
			 ra, cs, most);
		return -EINVAL;
	}
	return smux__cfg_errorf(errbuf, errlen, cfg->path, o->read_ahead_line,
				"read_ahead = %s is more than half of "
				"cache_size (%s): at most %s",
				ra, cs, most);
}

bool smux_fs_default_permissions(const struct smux_fs_opts *o)
{
	return o->default_permissions ||
	       (o->allow_other && !o->no_default_permissions);
}

bool smux_config_ignored_opt(const char *opt)
{
	static const char *const exact[] = {
		"_netdev", "nofail", "noauto", "auto",
		"user",	   "users",  "nouser", "defaults",
	};
	static const char *const prefixes[] = {"x-systemd.", "x-gvfs-",
					       "comment="};

	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (strcmp(opt, exact[i]) == 0)
			return true;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(opt, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/* True when every backend under @s keeps real directories (file, or a
 * faulty wrapping one): a missing key then has no "key/" marker either.
 * Not under failover or shield: there a member skipped for a pending hint
 * on "dir/" may still answer the head of "dir" with "not found". */
static bool real_dirs(const struct smux__cfg_section *s)
{
	if (!s)
		return false;
	if (s->kind == SMUX__CFG_MUX) {
		if (s->v[SMUX__XK_MODE].i == SMUX_MODE_FAILOVER ||
		    s->v[SMUX__XK_MODE].i == SMUX_MODE_SHIELD)
			return false;
		for (unsigned i = 0; i < s->n_members; i++)
			if (!s->member_secs || !real_dirs(s->member_secs[i]))
				return false;
		return s->n_members > 0;
	}
	switch ((enum smux__cfg_type)s->v[SMUX__BK_TYPE].i) {
	case SMUX__CFG_T_FILE:
		return true;
	case SMUX__CFG_T_FAULTY:
		return real_dirs(s->wraps_sec);
	default:
		return false;
	}
}

bool smux_config_real_dirs(const struct smux_config *cfg)
{
	return cfg && real_dirs(cfg->root);
}

/* True when a backend under @s is of type @t. */
static bool has_type(const struct smux__cfg_section *s, enum smux__cfg_type t)
{
	if (!s)
		return false;
	if (s->kind == SMUX__CFG_MUX) {
		for (unsigned i = 0; i < s->n_members; i++)
			if (s->member_secs && has_type(s->member_secs[i], t))
				return true;
		return false;
	}
	if ((enum smux__cfg_type)s->v[SMUX__BK_TYPE].i == SMUX__CFG_T_FAULTY)
		return has_type(s->wraps_sec, t);
	return (enum smux__cfg_type)s->v[SMUX__BK_TYPE].i == t;
}

bool smux_config_has_network(const struct smux_config *cfg)
{
	return cfg && (has_type(cfg->root, SMUX__CFG_T_S3) ||
		       has_type(cfg->root, SMUX__CFG_T_HTTP) ||
		       has_type(cfg->root, SMUX__CFG_T_SWIFT) ||
		       has_type(cfg->root, SMUX__CFG_T_BUNNY));
}

bool smux_config_has_file(const struct smux_config *cfg)
{
	return cfg && has_type(cfg->root, SMUX__CFG_T_FILE);
}

/* Filesystems other hosts (or another daemon) may change under us, whose
 * changes inotify does not report (statfs f_type). */
static bool remote_fs_type(long t)
{
	static const long remote[] = {
		0x6969,	    /* NFS */
		0x517B,	    /* SMB */
		0xFF534D42, /* CIFS */
		0xFE534D42, /* SMB2 */
		0x65735546, /* FUSE (sshfs, another smuxfs, ...) */
		0x00C36400, /* Ceph */
		0x5346414F, /* AFS */
		0x6B414653, /* kAFS */
		0x01021997, /* 9p */
		0x01161970, /* GFS2 */
		0x7461636F, /* OCFS2 */
		0x47504653, /* GPFS */
		0x0BD00BD0, /* Lustre */
		0x73757245, /* Coda */
	};

	for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
		if ((t & 0xFFFFFFFFL) == remote[i])
			return true;
	return false;
}

/* The first file backend under @s whose path is not on a local disk
 * (or cannot be asked), NULL when none. */
static const char *remote_file_path(const struct smux__cfg_section *s)
{
	struct statfs sf;
	const char *p;

	if (!s)
		return NULL;
	if (s->kind == SMUX__CFG_MUX) {
		for (unsigned i = 0; i < s->n_members; i++)
			if (s->member_secs &&
			    (p = remote_file_path(s->member_secs[i])))
				return p;
		return NULL;
	}
	if ((enum smux__cfg_type)s->v[SMUX__BK_TYPE].i == SMUX__CFG_T_FAULTY)
		return remote_file_path(s->wraps_sec);
	if ((enum smux__cfg_type)s->v[SMUX__BK_TYPE].i != SMUX__CFG_T_FILE)
		return NULL;
	p = s->v[SMUX__BK_PATH].s;
	if (!p)
		return NULL;
	return statfs(p, &sf) != 0 || remote_fs_type((long)sf.f_type) ? p
								      : NULL;
}

const char *smux_config_remote_file(const struct smux_config *cfg)
{
	return cfg ? remote_file_path(cfg->root) : NULL;
}

const char *smux_config_remote_file_in(const struct smux_config *cfg,
				       const char *name)
{
	return cfg && name ? remote_file_path(smux__cfg_find(cfg, name)) : NULL;
}

bool smux_config_has_bunny(const struct smux_config *cfg)
{
	return cfg && has_type(cfg->root, SMUX__CFG_T_BUNNY);
}

bool smux_config_has_http(const struct smux_config *cfg)
{
	return cfg && has_type(cfg->root, SMUX__CFG_T_HTTP);
}
