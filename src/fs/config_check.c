// SPDX-License-Identifier: MIT
/*
 * config_check.c - the checks beyond one value: those of a section once
 * it has ended (required keys, keys of another backend type, keys of
 * another mode, cooldowns, faulty rates), and those that need the whole
 * file ([mount] root, the names a mux lists and a faulty backend wraps,
 * weights of weighted muxes, cycles, the nesting limit SMUX_MAX_DEPTH).
 * They run at load so that `smuxfs --check-config` finds what
 * smux_mux_new would refuse, with the line to fix.
 *
 * Owns the graph fields of each section (member_secs, wraps_sec, depth,
 * visit, used) and the effective [mux] values with defaults.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/config_internal.h"
#include "smux/bunny.h"
#include "smux/ctx.h"

int64_t smux__cfg_mux_ms(const struct smux__cfg_section *s, int key)
{
	if (s->v[key].line)
		return s->v[key].i;
	switch (key) {
	case SMUX__XK_BACKEND_TIMEOUT:
		/* [mount] backend_timeout is every mux's default: a mount
		 * with `backend_timeout = 2s` over a mirror waited 30 s for
		 * a hung replica (s45-t1) */
		return s->opts && s->opts->backend_timeout_ms
			       ? (int64_t)s->opts->backend_timeout_ms
			       : SMUX_DEFAULT_BACKEND_TIMEOUT_MS;
	case SMUX__XK_COOLDOWN:
		return SMUX_DEFAULT_COOLDOWN_MS;
	case SMUX__XK_MAX_COOLDOWN:
		return SMUX_DEFAULT_MAX_COOLDOWN_MS;
	default:
		return 0;
	}
}

unsigned smux__cfg_mux_count(const struct smux__cfg_section *s, int key)
{
	if (s->v[key].line)
		return (unsigned)s->v[key].u;
	return key == SMUX__XK_MAX_INFLIGHT ? SMUX_DEFAULT_MAX_INFLIGHT : 1;
}

/* An error at @line of the file, for the checks below. */
#define E(line, ...) \
	smux__cfg_errorf(errbuf, errlen, cfg->path, (line), __VA_ARGS__)

static int check_mux(const struct smux_config *cfg,
		     const struct smux__cfg_section *s, const char *label,
		     char *errbuf, size_t errlen)
{
	const struct smux__cfg_value *v = s->v;
	char a[32], b[32];
	int64_t cd, max;
	int mode;

	if (!v[SMUX__XK_MODE].line)
		return E(s->line,
			 "%s mode: missing (use failover, round-robin, "
			 "weighted, sticky-by-key, shield, mirror)",
			 label);
	if (!v[SMUX__XK_BACKENDS].line)
		return E(s->line, "%s backends: missing", label);
	mode = (int)v[SMUX__XK_MODE].i;
	if (v[SMUX__XK_WRITE_QUORUM].line) {
		if (mode != SMUX_MODE_MIRROR)
			return E(v[SMUX__XK_WRITE_QUORUM].line,
				 "%s write_quorum: only mirror mode uses it "
				 "(mode is %s)",
				 label, smux_mode_name((enum smux_mode)mode));
		if (v[SMUX__XK_WRITE_QUORUM].u > s->n_members)
			return E(v[SMUX__XK_WRITE_QUORUM].line,
				 "%s write_quorum: %llu is more than the %u "
				 "backends",
				 label,
				 (unsigned long long)v[SMUX__XK_WRITE_QUORUM].u,
				 s->n_members);
	}
	if (v[SMUX__XK_THROW_ON_FANOUT_PARTIAL].line &&
	    mode != SMUX_MODE_SHIELD && mode != SMUX_MODE_MIRROR)
		return E(v[SMUX__XK_THROW_ON_FANOUT_PARTIAL].line,
			 "%s throw_on_fanout_partial: only shield and mirror "
			 "modes use it (mode is %s)",
			 label, smux_mode_name((enum smux_mode)mode));
	cd = smux__cfg_mux_ms(s, SMUX__XK_COOLDOWN);
	max = smux__cfg_mux_ms(s, SMUX__XK_MAX_COOLDOWN);
	if (cd > max) {
		int key = v[SMUX__XK_COOLDOWN].line ? SMUX__XK_COOLDOWN
						    : SMUX__XK_MAX_COOLDOWN;

		return E(v[key].line,
			 "%s %s: cooldown %s is longer than max_cooldown %s%s",
			 label,
			 key == SMUX__XK_COOLDOWN ? "cooldown" : "max_cooldown",
			 smux__cfg_fmt_duration(cd, a, sizeof(a)),
			 smux__cfg_fmt_duration(max, b, sizeof(b)),
			 v[SMUX__XK_MAX_COOLDOWN].line ? "" : " (the default)");
	}
	return 0;
}

/*
 * region, internal, tenant and password_credentials mean something to
 * identity v2.0 only: tempauth (auth_version 1, the default) has no
 * catalog, regions or tenants and takes a key, so with it they would be
 * ignored without a word. The earliest one set is refused, whatever its
 * value: a file that names it was written for identity v2.0.
 */
static int check_swift_v2_keys(const struct smux_config *cfg,
			       const struct smux__cfg_section *s,
			       const char *label, char *errbuf, size_t errlen)
{
	static const int v2_only[] = {SMUX__BK_REGION, SMUX__BK_INTERNAL,
				      SMUX__BK_TENANT,
				      SMUX__BK_PASSWORD_CREDENTIALS};
	const struct smux__cfg_value *v = s->v;
	const struct smux__cfg_keydef *keys;
	int bad = -1;
	unsigned nk;

	if (v[SMUX__BK_AUTH_VERSION].line && v[SMUX__BK_AUTH_VERSION].u == 2)
		return 0;
	for (size_t i = 0; i < sizeof(v2_only) / sizeof(v2_only[0]); i++)
		if (v[v2_only[i]].line &&
		    (bad < 0 || v[v2_only[i]].line < v[bad].line))
			bad = v2_only[i];
	if (bad < 0)
		return 0;
	keys = smux__cfg_keys(SMUX__CFG_BACKEND, &nk);
	return E(v[bad].line,
		 "%s %s: needs auth_version = 2 (identity v2.0); "
		 "auth_version is %s (tempauth), which would ignore it",
		 label, keys[bad].name,
		 v[SMUX__BK_AUTH_VERSION].line ? "1" : "1, the default");
}

static int check_backend(const struct smux_config *cfg,
			 const struct smux__cfg_section *s, const char *label,
			 char *errbuf, size_t errlen)
{
	static const int rates[] = {SMUX__BK_HANG_RATE, SMUX__BK_ERROR_RATE,
				    SMUX__BK_SEMANTIC_RATE,
				    SMUX__BK_TIMEOUT_RATE};
	const struct smux__cfg_value *v = s->v;
	const struct smux__cfg_keydef *keys;
	enum smux__cfg_type type;
	int bad = -1, last = -1;
	double sum = 0;
	unsigned nk;

	keys = smux__cfg_keys(SMUX__CFG_BACKEND, &nk);
	if (!v[SMUX__BK_TYPE].line)
		return E(s->line,
			 "%s type: missing (use file, memory, faulty, http, "
			 "s3, swift or bunny)",
			 label);
	type = (enum smux__cfg_type)v[SMUX__BK_TYPE].i;
	/* keys set before the type line; report the first one */
	for (int k = 0; k < SMUX__BK_COUNT; k++)
		if (v[k].line && keys[k].types &&
		    !(keys[k].types & (1u << type)) &&
		    (bad < 0 || v[k].line < v[bad].line))
			bad = k;
	if (bad >= 0)
		return E(v[bad].line, "%s %s: unknown key for type %s", label,
			 keys[bad].name, smux__cfg_type_name(type));
	if (type == SMUX__CFG_T_FILE && !v[SMUX__BK_PATH].line)
		return E(s->line, "%s path: missing", label);
	if (type == SMUX__CFG_T_HTTP && !v[SMUX__BK_URL].line)
		return E(s->line, "%s url: missing", label);
	if (type == SMUX__CFG_T_S3 && !v[SMUX__BK_ENDPOINT].line)
		return E(s->line, "%s endpoint: missing", label);
	if (type == SMUX__CFG_T_S3 && !v[SMUX__BK_BUCKET].line)
		return E(s->line, "%s bucket: missing", label);
	if (type == SMUX__CFG_T_BUNNY && !v[SMUX__BK_ZONE].line)
		return E(s->line, "%s zone: missing (the storage zone name)",
			 label);
	if (type == SMUX__CFG_T_BUNNY && v[SMUX__BK_REGION].line &&
	    !smux_bunny_region_host(v[SMUX__BK_REGION].s))
		return E(v[SMUX__BK_REGION].line,
			 "%s region: unknown (use de, uk, ny, la, sg, se, br, "
			 "jh or syd)",
			 label);
	if (type == SMUX__CFG_T_BUNNY && !v[SMUX__BK_CREDENTIALS_FILE].line &&
	    !v[SMUX__BK_CREDENTIALS_ENV].line)
		return E(s->line,
			 "%s credentials_file or credentials_env: missing "
			 "(the zone password)",
			 label);
	if (type == SMUX__CFG_T_SWIFT) {
		if (!v[SMUX__BK_AUTH_URL].line)
			return E(s->line, "%s auth_url: missing", label);
		if (!v[SMUX__BK_CONTAINER].line)
			return E(s->line, "%s container: missing", label);
		if (v[SMUX__BK_AUTH_VERSION].line &&
		    v[SMUX__BK_AUTH_VERSION].u > 2)
			return E(v[SMUX__BK_AUTH_VERSION].line,
				 "%s auth_version: must be 1 (tempauth) or 2 "
				 "(identity v2.0)",
				 label);
		if (!v[SMUX__BK_CREDENTIALS_FILE].line &&
		    !v[SMUX__BK_CREDENTIALS_ENV].line)
			return E(s->line,
				 "%s credentials_file or credentials_env: "
				 "missing (user:key)",
				 label);
		return check_swift_v2_keys(cfg, s, label, errbuf, errlen);
	}
	if (type != SMUX__CFG_T_FAULTY)
		return 0;
	if (!v[SMUX__BK_WRAPS].line)
		return E(s->line,
			 "%s wraps: missing (name the backend or mux "
			 "to wrap)",
			 label);
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		if (!v[rates[i]].line)
			continue;
		sum += v[rates[i]].d;
		if (last < 0 || v[rates[i]].line > v[last].line)
			last = rates[i];
	}
	if (sum > 1 + 1e-9)
		return E(v[last].line,
			 "%s %s: the rates add up to %g (at most 1)", label,
			 keys[last].name, sum);
	return 0;
}

int smux__cfg_check_section(const struct smux_config *cfg,
			    const struct smux__cfg_section *s, char *errbuf,
			    size_t errlen)
{
	char label[96];

	smux__cfg_label(s, label, sizeof(label));
	if (s->kind == SMUX__CFG_MUX)
		return check_mux(cfg, s, label, errbuf, errlen);
	if (s->kind == SMUX__CFG_BACKEND)
		return check_backend(cfg, s, label, errbuf, errlen);
	return 0;
}

static const char *kind_name(const struct smux__cfg_section *s)
{
	return s->kind == SMUX__CFG_MUX ? "mux" : "backend";
}

/* The weight of @s as a member, or NULL when it has none. */
static const struct smux__cfg_value *
weight_of(const struct smux__cfg_section *s)
{
	const struct smux__cfg_value *v;

	v = &s->v[s->kind == SMUX__CFG_MUX ? SMUX__XK_WEIGHT : SMUX__BK_WEIGHT];
	return v->line ? v : NULL;
}

static int resolve(struct smux_config *cfg, char *errbuf, size_t errlen)
{
	char label[96];

	for (unsigned i = 0; i < cfg->n_secs; i++) {
		struct smux__cfg_section *s = cfg->secs[i];
		struct smux__cfg_value *w = &s->v[SMUX__BK_WRAPS];

		smux__cfg_label(s, label, sizeof(label));
		if (s->kind == SMUX__CFG_BACKEND && w->line) {
			s->wraps_sec = smux__cfg_find(cfg, w->s);
			if (!s->wraps_sec)
				return smux__cfg_errorf(
					errbuf, errlen, cfg->path, w->line,
					"%s wraps: unknown backend or mux "
					"\"%s\"",
					label, w->s);
		}
		if (s->kind != SMUX__CFG_MUX)
			continue;
		s->member_secs = calloc(s->n_members,
					sizeof(struct smux__cfg_section *));
		if (!s->member_secs) {
			smux__cfg_errorf(errbuf, errlen, cfg->path, 0,
					 "out of memory");
			return -ENOMEM;
		}
		for (unsigned m = 0; m < s->n_members; m++) {
			s->member_secs[m] = smux__cfg_find(cfg, s->members[m]);
			if (!s->member_secs[m])
				return smux__cfg_errorf(
					errbuf, errlen, cfg->path,
					s->v[SMUX__XK_BACKENDS].line,
					"%s backends: unknown backend or mux "
					"\"%s\"",
					label, s->members[m]);
		}
	}
	return 0;
}

static int check_weights(struct smux_config *cfg, char *errbuf, size_t errlen)
{
	char label[96];

	for (unsigned i = 0; i < cfg->n_secs; i++) {
		struct smux__cfg_section *s = cfg->secs[i];
		double sum = 0;

		if (s->kind != SMUX__CFG_MUX ||
		    s->v[SMUX__XK_MODE].i != SMUX_MODE_WEIGHTED)
			continue;
		smux__cfg_label(s, label, sizeof(label));
		for (unsigned m = 0; m < s->n_members; m++) {
			const struct smux__cfg_section *c = s->member_secs[m];
			const struct smux__cfg_value *w = weight_of(c);

			if (!w)
				return smux__cfg_errorf(
					errbuf, errlen, cfg->path,
					s->v[SMUX__XK_BACKENDS].line,
					"%s backends: weighted mode needs a "
					"weight on %s \"%s\" (set weight in "
					"[%s %s])",
					label, kind_name(c), c->name,
					kind_name(c), c->name);
			sum += w->d;
		}
		if (sum <= 0)
			return smux__cfg_errorf(
				errbuf, errlen, cfg->path,
				s->v[SMUX__XK_BACKENDS].line,
				"%s backends: weighted mode needs a weight "
				"above 0 on at least one member",
				label);
	}
	return 0;
}

/* The sections @s points at: members of a mux, what a faulty wraps. */
static unsigned children(struct smux__cfg_section *s,
			 struct smux__cfg_section ***out)
{
	if (s->kind == SMUX__CFG_MUX) {
		*out = s->member_secs;
		return s->n_members;
	}
	*out = &s->wraps_sec;
	return s->wraps_sec ? 1 : 0;
}

/* The line of the key that names @s's children. */
static int edge_line(const struct smux__cfg_section *s)
{
	return s->kind == SMUX__CFG_MUX ? s->v[SMUX__XK_BACKENDS].line
					: s->v[SMUX__BK_WRAPS].line;
}

static const char *edge_key(const struct smux__cfg_section *s)
{
	return s->kind == SMUX__CFG_MUX ? "backends" : "wraps";
}

struct walk {
	struct smux_config *cfg;
	struct smux__cfg_section **stack;
	unsigned depth;
	char *errbuf;
	size_t errlen;
};

/* "a -> b -> a" from the stack entry of @c to the top. */
static int __attribute__((noinline))
cycle_error(struct walk *w, struct smux__cfg_section *c)
{
	char path[1024], label[96];
	unsigned from = 0;
	size_t o = 0;

	while (w->stack[from] != c)
		from++;
	for (unsigned k = from; k < w->depth && o < sizeof(path); k++)
		o += (size_t)snprintf(path + o, sizeof(path) - o, "%s -> ",
				      w->stack[k]->name);
	if (o < sizeof(path))
		snprintf(path + o, sizeof(path) - o, "%s", c->name);
	return smux__cfg_errorf(w->errbuf, w->errlen, w->cfg->path,
				edge_line(c), "%s %s: cycle: %s",
				smux__cfg_label(c, label, sizeof(label)),
				edge_key(c), path);
}

static int __attribute__((noinline))
chain_error(struct walk *w, struct smux__cfg_section *s)
{
	char label[96];

	return smux__cfg_errorf(w->errbuf, w->errlen, w->cfg->path,
				edge_line(s),
				"%s %s: sections nest more than %d deep",
				smux__cfg_label(s, label, sizeof(label)),
				edge_key(s), SMUX__CFG_CHAIN_MAX);
}

/*
 * Depth-first walk; a grey child is a cycle (reported from that child).
 * Paths are at most SMUX__CFG_CHAIN_MAX sections long, which bounds the
 * recursion here and in the build and the renderings.
 */
static int dfs(struct walk *w, struct smux__cfg_section *s)
{
	struct smux__cfg_section **kids;
	unsigned n = children(s, &kids);
	unsigned depth = 0;
	int rc;

	if (n && w->depth >= SMUX__CFG_CHAIN_MAX)
		return chain_error(w, s);
	s->visit = 1;
	w->stack[w->depth++] = s;
	for (unsigned i = 0; i < n; i++) {
		struct smux__cfg_section *c = kids[i];

		if (c->visit == 1)
			return cycle_error(w, c);
		if (c->visit == 0) {
			rc = dfs(w, c);
			if (rc)
				return rc;
		}
		if (c->depth > depth)
			depth = c->depth;
		if (c->height + 1 > s->height)
			s->height = c->height + 1;
	}
	if (s->height > SMUX__CFG_CHAIN_MAX)
		return chain_error(w, s);
	s->depth = s->kind == SMUX__CFG_MUX ? depth + 1 : depth;
	s->visit = 2;
	w->depth--;
	return 0;
}

/* Marks @s and what is below it as reached in @pass through @member;
 * the first section an earlier member of the same pass reached already
 * is the clash (the graph has no cycle any more: each section is walked
 * once per member). */
static struct smux__cfg_section *mark_reach(struct smux__cfg_section *s,
					    unsigned pass, unsigned member)
{
	struct smux__cfg_section **kids, *clash = NULL;
	unsigned n;

	if (s->reach_pass == pass)
		return s->reach_member == member ? NULL : s;
	s->reach_pass = pass;
	s->reach_member = member;
	n = children(s, &kids);
	for (unsigned i = 0; i < n && !clash; i++)
		clash = mark_reach(kids[i], pass, member);
	return clash;
}

/*
 * A mirror or shield writes every member: one section below two of its
 * members (a backend listed directly and again inside a nested mux, or
 * behind a faulty wrapper) would take every write twice, an append
 * doubled, and its two copies would count as two replicas.
 */
static int reached_twice(struct smux_config *cfg, char *errbuf, size_t errlen)
{
	char label[96];

	for (unsigned k = 0; k < cfg->n_secs; k++)
		cfg->secs[k]->reach_pass = 0; /* a check run again */
	for (unsigned k = 0; k < cfg->n_secs; k++) {
		struct smux__cfg_section *m = cfg->secs[k];
		struct smux__cfg_section *clash = NULL;
		int mode = (int)m->v[SMUX__XK_MODE].i;
		unsigned i;

		if (m->kind != SMUX__CFG_MUX || !m->member_secs ||
		    (mode != SMUX_MODE_MIRROR && mode != SMUX_MODE_SHIELD))
			continue;
		for (i = 0; i < m->n_members && !clash; i++)
			clash = mark_reach(m->member_secs[i], k + 1, i);
		if (clash)
			return smux__cfg_errorf(
				errbuf, errlen, cfg->path, edge_line(m),
				"%s backends: \"%s\" is reached through both "
				"\"%s\" and \"%s\": every write would be "
				"made on it twice",
				smux__cfg_label(m, label, sizeof(label)),
				clash->name,
				m->member_secs[clash->reach_member]->name,
				m->member_secs[i - 1]->name);
	}
	return 0;
}

/* Whether @t is @s or lies below it. */
static bool reaches(struct smux__cfg_section *s,
		    const struct smux__cfg_section *t, unsigned depth)
{
	struct smux__cfg_section **kids;
	unsigned n;

	if (s == t)
		return true;
	if (depth > SMUX__CFG_CHAIN_MAX)
		return false;
	n = children(s, &kids);
	for (unsigned i = 0; i < n; i++)
		if (reaches(kids[i], t, depth + 1))
			return true;
	return false;
}

int smux_config_check_added_reach(struct smux_config *cfg, const char *added,
				  const char *mux, const char *const *members,
				  unsigned n, char *errbuf, size_t errlen)
{
	struct smux__cfg_section *a = smux__cfg_find(cfg, added), *clash;
	unsigned pass = cfg->n_secs + 1; /* no section's index + 1 */

	if (!a)
		return 0;
	for (unsigned k = 0; k < cfg->n_secs; k++)
		cfg->secs[k]->reach_pass = 0;
	/* the running members as one: they run together already */
	for (unsigned i = 0; i < n; i++) {
		struct smux__cfg_section *m = smux__cfg_find(cfg, members[i]);

		if (m)
			(void)mark_reach(m, pass, 0);
	}
	clash = mark_reach(a, pass, 1);
	if (!clash)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		struct smux__cfg_section *m = smux__cfg_find(cfg, members[i]);

		if (m && reaches(m, clash, 0))
			return smux__cfg_errorf(
				errbuf, errlen, cfg->path, a->line,
				"[%s %s]: \"%s\" is reached through both "
				"\"%s\", a member of %s, and \"%s\": every "
				"write would be made on it twice",
				a->kind == SMUX__CFG_MUX ? "mux" : "backend",
				a->name, clash->name, m->name, mux, a->name);
	}
	return 0;
}

static void mark_used(struct smux__cfg_section *s)
{
	struct smux__cfg_section **kids;
	unsigned n;

	if (s->used)
		return;
	s->used = true;
	n = children(s, &kids);
	for (unsigned i = 0; i < n; i++)
		mark_used(kids[i]);
}

int smux__cfg_check(struct smux_config *cfg, char *errbuf, size_t errlen)
{
	struct smux__cfg_value *root;
	struct walk w = {.cfg = cfg, .errbuf = errbuf, .errlen = errlen};
	char label[96];
	int rc;

	if (!cfg->mount)
		return smux__cfg_errorf(errbuf, errlen, cfg->path, 0,
					"[mount] root: missing (add a [mount] "
					"section with root = NAME)");
	root = &cfg->mount->v[SMUX__MK_ROOT];
	if (!root->line)
		return smux__cfg_errorf(errbuf, errlen, cfg->path,
					cfg->mount->line,
					"[mount] root: missing");
	rc = resolve(cfg, errbuf, errlen);
	if (rc)
		return rc;
	cfg->root = smux__cfg_find(cfg, root->s);
	if (!cfg->root)
		return smux__cfg_errorf(errbuf, errlen, cfg->path, root->line,
					"[mount] root: unknown backend or mux "
					"\"%s\"",
					root->s);
	rc = check_weights(cfg, errbuf, errlen);
	if (rc)
		return rc;
	w.stack = calloc(SMUX__CFG_CHAIN_MAX + 1,
			 sizeof(struct smux__cfg_section *));
	if (!w.stack) {
		smux__cfg_errorf(errbuf, errlen, cfg->path, 0, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < cfg->n_secs && rc == 0; i++)
		if (cfg->secs[i]->visit == 0)
			rc = dfs(&w, cfg->secs[i]);
	free(w.stack);
	if (rc)
		return rc;
	for (unsigned i = 0; i < cfg->n_secs; i++) {
		struct smux__cfg_section *s = cfg->secs[i];

		if (s->kind == SMUX__CFG_MUX && s->depth > SMUX_MAX_DEPTH)
			return smux__cfg_errorf(
				errbuf, errlen, cfg->path, edge_line(s),
				"%s backends: muxes nest %u deep here (at "
				"most %d)",
				smux__cfg_label(s, label, sizeof(label)),
				s->depth, SMUX_MAX_DEPTH);
	}
	rc = reached_twice(cfg, errbuf, errlen);
	if (rc)
		return rc;
	mark_used(cfg->root);
	return 0;
}
