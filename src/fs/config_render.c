// SPDX-License-Identifier: MIT
/*
 * config_render.c - the two renderings of a loaded configuration: the
 * indented tree for `smuxfs --check-config` (smux_config_describe) and the
 * effective values as JSON for .smux/config (smux_config_json).
 *
 * Both show the mount options as they are after -o. Secrets never appear:
 * a key marked secret in the key tables renders as "***" in JSON and not
 * at all in the tree.
 */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/config_internal.h"

/* ---- the tree ---- */

struct desc {
	FILE *f;
	bool *shown; /* per section index: already printed in full */
	const struct smux_config *cfg;
};

static unsigned index_of(const struct smux_config *cfg,
			 const struct smux__cfg_section *s)
{
	unsigned i = 0;

	while (i < cfg->n_secs && cfg->secs[i] != s)
		i++;
	return i;
}

/* Opens "(" before the first option and "," before the others. */
static void opt(FILE *f, bool *first, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void opt(FILE *f, bool *first, const char *fmt, ...)
{
	va_list ap;

	fputs(*first ? " (" : ", ", f);
	*first = false;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
}

static void mux_opts(FILE *f, const struct smux__cfg_section *s, bool *first)
{
	static const struct {
		int key;
		int64_t def;
	} ms[] = {
		{SMUX__XK_BACKEND_TIMEOUT, SMUX_DEFAULT_BACKEND_TIMEOUT_MS},
		{SMUX__XK_COOLDOWN, SMUX_DEFAULT_COOLDOWN_MS},
		{SMUX__XK_MAX_COOLDOWN, SMUX_DEFAULT_MAX_COOLDOWN_MS},
		{SMUX__XK_HEALTHCHECK_INTERVAL, 0},
	};
	const struct smux__cfg_keydef *keys;
	unsigned nk, n;
	char b[32];

	keys = smux__cfg_keys(SMUX__CFG_MUX, &nk);
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		int64_t v = smux__cfg_mux_ms(s, ms[i].key);

		if (v != ms[i].def)
			opt(f, first, "%s %s", keys[ms[i].key].name,
			    smux__cfg_fmt_duration(v, b, sizeof(b)));
	}
	n = smux__cfg_mux_count(s, SMUX__XK_WRITE_QUORUM);
	if (n != 1)
		opt(f, first, "write_quorum %u", n);
	if (s->v[SMUX__XK_THROW_ON_FANOUT_PARTIAL].line &&
	    s->v[SMUX__XK_THROW_ON_FANOUT_PARTIAL].b)
		opt(f, first, "throw_on_fanout_partial");
	n = smux__cfg_mux_count(s, SMUX__XK_MAX_INFLIGHT);
	if (n != SMUX_DEFAULT_MAX_INFLIGHT)
		opt(f, first, "max_inflight %u", n);
	if (s->v[SMUX__XK_WEIGHT].line)
		opt(f, first, "weight %g", s->v[SMUX__XK_WEIGHT].d);
}

static void faulty_opts(FILE *f, const struct smux__cfg_section *s, bool *first)
{
	static const int keys_shown[] = {
		SMUX__BK_LATENCY,	SMUX__BK_HANG_RATE,
		SMUX__BK_HANG,		SMUX__BK_ERROR_RATE,
		SMUX__BK_SEMANTIC_RATE, SMUX__BK_TIMEOUT_RATE,
		SMUX__BK_SEED,		SMUX__BK_FAULT_AFTER,
		SMUX__BK_FAULT_FOR,
	};
	const struct smux__cfg_keydef *keys;
	unsigned nk;
	char b[32];

	keys = smux__cfg_keys(SMUX__CFG_BACKEND, &nk);
	for (size_t i = 0; i < sizeof(keys_shown) / sizeof(keys_shown[0]);
	     i++) {
		const struct smux__cfg_value *v = &s->v[keys_shown[i]];
		const struct smux__cfg_keydef *k = &keys[keys_shown[i]];

		if (!v->line)
			continue;
		if (k->vt == SMUX__VT_DURATION)
			opt(f, first, "%s %s", k->name,
			    smux__cfg_fmt_duration(v->i, b, sizeof(b)));
		else if (k->vt == SMUX__VT_RATE)
			opt(f, first, "%s %g", k->name, v->d);
		else
			opt(f, first, "%s %" PRIu64, k->name, v->u);
	}
}

static void describe(struct desc *d, const struct smux__cfg_section *s,
		     unsigned indent)
{
	const struct smux__cfg_value *v = s->v;
	unsigned idx = index_of(d->cfg, s);
	bool first = true;

	fprintf(d->f, "%*s%s: ", (int)indent * 2, "", s->name);
	if (d->shown[idx]) {
		fputs("(shared, shown above)\n", d->f);
		return;
	}
	d->shown[idx] = true;
	if (s->kind == SMUX__CFG_MUX) {
		fprintf(d->f, "mux %s",
			smux_mode_name((enum smux_mode)v[SMUX__XK_MODE].i));
		mux_opts(d->f, s, &first);
	} else {
		enum smux__cfg_type t = (enum smux__cfg_type)v[SMUX__BK_TYPE].i;

		fputs(smux__cfg_type_name(t), d->f);
		if (t == SMUX__CFG_T_FILE)
			fprintf(d->f, " %s", v[SMUX__BK_PATH].s);
		if (t == SMUX__CFG_T_FAULTY)
			fprintf(d->f, " over %s", s->wraps_sec->name);
		if (v[SMUX__BK_WEIGHT].line)
			opt(d->f, &first, "weight %g", v[SMUX__BK_WEIGHT].d);
		if (v[SMUX__BK_NO_FSYNC].line && v[SMUX__BK_NO_FSYNC].b)
			opt(d->f, &first, "no_fsync");
		if (t == SMUX__CFG_T_FAULTY)
			faulty_opts(d->f, s, &first);
	}
	fputs(first ? "\n" : ")\n", d->f);
	if (s->kind == SMUX__CFG_MUX)
		for (unsigned i = 0; i < s->n_members; i++)
			describe(d, s->member_secs[i], indent + 1);
	else if (s->wraps_sec)
		describe(d, s->wraps_sec, indent + 1);
}

static const char *yes_no(bool b)
{
	return b ? "yes" : "no";
}

static const char *auto_name(enum smux_fs_auto v)
{
	return v == SMUX_FS_ON ? "on" : v == SMUX_FS_OFF ? "off" : "auto";
}

static int64_t to_ms(double seconds)
{
	return (int64_t)llround(seconds * 1000.0);
}

static void describe_mount(FILE *f, const struct smux_fs_opts *o)
{
	char a[32], b[32], c[32], d[32];

	fprintf(f,
		"mount: root %s, prefix \"%s\", cache_dir %s, state_dir %s, "
		"attr_timeout %s, entry_timeout %s, negative_timeout %s, "
		"cache_size %s, allow_other %s, default_permissions %s, "
		"ro %s",
		o->root, o->prefix, o->cache_dir, o->state_dir,
		smux__cfg_fmt_duration(to_ms(o->attr_timeout), a, sizeof(a)),
		smux__cfg_fmt_duration(to_ms(o->entry_timeout), b, sizeof(b)),
		smux__cfg_fmt_duration(to_ms(o->negative_timeout), c,
				       sizeof(c)),
		smux__cfg_fmt_size(o->cache_size, d, sizeof(d)),
		yes_no(o->allow_other), yes_no(smux_fs_default_permissions(o)),
		yes_no(o->ro));
	if (o->has_uid)
		fprintf(f, ", uid %u", (unsigned)o->uid);
	if (o->has_gid)
		fprintf(f, ", gid %u", (unsigned)o->gid);
	if (o->has_umask)
		fprintf(f, ", umask %03o", (unsigned)o->umask);
	if (o->read_cache != SMUX_FS_AUTO)
		fprintf(f, ", read_cache %s", auto_name(o->read_cache));
	if (o->dir_cache_timeout != SMUX_FS_DEFAULT_DIR_CACHE_TIMEOUT)
		fprintf(f, ", dir_cache_timeout %s",
			smux__cfg_fmt_duration(to_ms(o->dir_cache_timeout), a,
					       sizeof(a)));
	if (o->xattr != SMUX_FS_AUTO)
		fprintf(f, ", xattr %s", auto_name(o->xattr));
	if (o->passthrough != SMUX_FS_AUTO)
		fprintf(f, ", passthrough %s", auto_name(o->passthrough));
	if (o->delete_batch != SMUX_FS_AUTO)
		fprintf(f, ", delete_batch %s", auto_name(o->delete_batch));
	if (o->backend_timeout_ms != SMUX_DEFAULT_BACKEND_TIMEOUT_MS)
		fprintf(f, ", backend_timeout %s",
			smux__cfg_fmt_duration((int64_t)o->backend_timeout_ms,
					       a, sizeof(a)));
	fputc('\n', f);
}

char *smux_config_describe(struct smux_config *cfg)
{
	struct desc d = {.cfg = cfg};
	bool any = false;
	char *out = NULL;
	size_t len = 0;
	int bad;

	d.shown = calloc(cfg->n_secs, sizeof(*d.shown));
	if (!d.shown)
		return NULL;
	d.f = open_memstream(&out, &len);
	if (!d.f) {
		free(d.shown);
		return NULL;
	}
	describe(&d, cfg->root, 0);
	describe_mount(d.f, &cfg->opts);
	for (unsigned i = 0; i < cfg->n_secs; i++) {
		const struct smux__cfg_section *s = cfg->secs[i];
		char label[96];

		if (s->kind == SMUX__CFG_MOUNT || s->used)
			continue;
		fprintf(d.f, "%s %s", any ? "," : "unused:",
			smux__cfg_label(s, label, sizeof(label)));
		any = true;
	}
	if (any)
		fputc('\n', d.f);
	bad = ferror(d.f);
	if (fclose(d.f) != 0 || bad) {
		free(out);
		out = NULL;
	}
	free(d.shown);
	return out;
}

/* ---- JSON ---- */

/* Sets @key to @v (which it steals); false when either is missing. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

static json_t *duration(int64_t ms)
{
	char b[32];

	return json_string(smux__cfg_fmt_duration(ms, b, sizeof(b)));
}

static json_t *size(uint64_t bytes)
{
	char b[32];

	return json_string(smux__cfg_fmt_size(bytes, b, sizeof(b)));
}

static json_t *mount_json(const struct smux_fs_opts *o)
{
	json_t *j = json_object();
	char um[8];
	bool ok;

	if (!j)
		return NULL;
	snprintf(um, sizeof(um), "%03o", (unsigned)o->umask);
	ok = put(j, "root", json_string(o->root)) &&
	     put(j, "cache_dir", json_string(o->cache_dir)) &&
	     put(j, "state_dir", json_string(o->state_dir)) &&
	     put(j, "prefix", json_string(o->prefix)) &&
	     put(j, "attr_timeout", duration(to_ms(o->attr_timeout))) &&
	     put(j, "entry_timeout", duration(to_ms(o->entry_timeout))) &&
	     put(j, "negative_timeout", duration(to_ms(o->negative_timeout))) &&
	     put(j, "dir_cache_timeout",
		 duration(to_ms(o->dir_cache_timeout))) &&
	     put(j, "cache_size", size(o->cache_size)) &&
	     put(j, "read_ahead", size(o->read_ahead)) &&
	     put(j, "read_cache", json_string(auto_name(o->read_cache))) &&
	     put(j, "xattr", json_string(auto_name(o->xattr))) &&
	     put(j, "passthrough", json_string(auto_name(o->passthrough))) &&
	     put(j, "delete_batch", json_string(auto_name(o->delete_batch))) &&
	     put(j, "event_webhook",
		 o->event_webhook ? json_string(o->event_webhook)
				  : json_null()) &&
	     put(j, "otlp_endpoint",
		 o->otlp_endpoint ? json_string(o->otlp_endpoint)
				  : json_null()) &&
	     put(j, "backend_timeout",
		 duration((int64_t)o->backend_timeout_ms)) &&
	     put(j, "allow_other", json_boolean(o->allow_other)) &&
	     put(j, "default_permissions",
		 json_boolean(smux_fs_default_permissions(o))) &&
	     put(j, "ro", json_boolean(o->ro)) &&
	     put(j, "uid", o->has_uid ? json_integer(o->uid) : json_null()) &&
	     put(j, "gid", o->has_gid ? json_integer(o->gid) : json_null()) &&
	     put(j, "umask", o->has_umask ? json_string(um) : json_null());
	if (!ok) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* The effective value of key @k of @s (defaults filled in), or NULL with
 * *@skip when the key is left out. */
static json_t *value_json(const struct smux__cfg_section *s, int k,
			  const struct smux__cfg_keydef *def, bool *skip)
{
	const struct smux__cfg_value *v = &s->v[k];
	json_t *a;

	*skip = false;
	if (def->secret) {
		*skip = !v->line;
		return v->line ? json_string("***") : NULL;
	}
	if (s->kind == SMUX__CFG_MUX) {
		switch (k) {
		case SMUX__XK_BACKEND_TIMEOUT:
		case SMUX__XK_COOLDOWN:
		case SMUX__XK_MAX_COOLDOWN:
		case SMUX__XK_HEALTHCHECK_INTERVAL:
			return duration(smux__cfg_mux_ms(s, k));
		case SMUX__XK_WRITE_QUORUM:
		case SMUX__XK_MAX_INFLIGHT:
			return json_integer(smux__cfg_mux_count(s, k));
		default:
			break;
		}
	}
	if (!v->line && def->vt != SMUX__VT_DURATION &&
	    def->vt != SMUX__VT_BOOL && def->vt != SMUX__VT_RATE &&
	    def->vt != SMUX__VT_U64) {
		*skip = true; /* an unset weight or text */
		return NULL;
	}
	switch (def->vt) {
	case SMUX__VT_DURATION:
		return duration(v->line ? v->i : 0);
	case SMUX__VT_SIZE:
		return size(v->u);
	case SMUX__VT_BOOL:
		return json_boolean(v->line && v->b);
	case SMUX__VT_COUNT:
	case SMUX__VT_UID:
	case SMUX__VT_GID:
		return json_integer((json_int_t)v->u);
	case SMUX__VT_U64:
		if (v->line && v->u > INT64_MAX) {
			char b[32];

			snprintf(b, sizeof(b), "%" PRIu64, v->u);
			return json_string(b);
		}
		return json_integer(v->line ? (json_int_t)v->u : 0);
	case SMUX__VT_RATE:
	case SMUX__VT_WEIGHT:
		return json_real(v->line ? v->d : 0);
	case SMUX__VT_MODE:
		return json_string(smux_mode_name((enum smux_mode)v->i));
	case SMUX__VT_TYPE:
		return json_string(
			smux__cfg_type_name((enum smux__cfg_type)v->i));
	case SMUX__VT_NAMES:
		a = json_array();
		for (unsigned i = 0; a && i < s->n_members; i++) {
			if (json_array_append_new(
				    a, json_string(s->members[i])) != 0) {
				json_decref(a);
				a = NULL;
			}
		}
		return a;
	case SMUX__VT_UMASK: {
		char b[8];

		snprintf(b, sizeof(b), "%03o", (unsigned)v->u);
		return json_string(b);
	}
	default:
		return json_string(v->s);
	}
}

static json_t *section_json(const struct smux__cfg_section *s)
{
	const struct smux__cfg_keydef *keys = NULL;
	json_t *j = json_object();
	unsigned nk, type = 0;

	if (!j)
		return NULL;
	keys = smux__cfg_keys(s->kind, &nk);
	if (s->kind == SMUX__CFG_BACKEND)
		type = (unsigned)s->v[SMUX__BK_TYPE].i;
	for (unsigned k = 0; k < nk; k++) {
		json_t *v;
		bool skip;

		if (keys[k].types && !(keys[k].types & (1u << type)))
			continue;
		v = value_json(s, (int)k, &keys[k], &skip);
		if (skip)
			continue;
		if (!put(j, keys[k].name, v))
			goto out_free;
	}
	if (!put(j, "used", json_boolean(s->used)))
		goto out_free;
	return j;
out_free:
	json_decref(j);
	return NULL;
}

char *smux_config_json(struct smux_config *cfg)
{
	json_t *root = json_object(), *mux = json_object(),
	       *backend = json_object();
	bool ok = root && mux && backend;
	char *out = NULL;

	for (unsigned i = 0; ok && i < cfg->n_secs; i++) {
		const struct smux__cfg_section *s = cfg->secs[i];

		if (s->kind == SMUX__CFG_MOUNT)
			continue;
		ok = put(s->kind == SMUX__CFG_MUX ? mux : backend, s->name,
			 section_json(s));
	}
	if (ok) {
		ok = put(root, "config",
			 smux__cfg_utf8_ok(cfg->path, strlen(cfg->path))
				 ? json_string(cfg->path)
				 : json_null()) &&
		     put(root, "mount", mount_json(&cfg->opts)) &&
		     put(root, "mux", json_incref(mux)) &&
		     put(root, "backend", json_incref(backend));
	}
	if (ok)
		out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
					       JSON_REAL_PRECISION(15));
	json_decref(mux);
	json_decref(backend);
	json_decref(root);
	return out;
}
