/* SPDX-License-Identifier: MIT */
/*
 * reload.c - live reload (issue 11 item 6): `reload` written to .smux/ctl,
 * or SIGHUP, reads the config file again and applies the difference to
 * the running tree without unmounting:
 *
 *   - a member listed in a mux now and not before is built and added
 *     (backend.added), one no longer listed is drained and removed
 *     (backend.removed; its in-flight calls finish first, open writers
 *     drop it);
 *   - a member's weight that changed is set (weight.changed);
 *   - a faulty backend whose fault keys changed gets them.
 *
 * Everything is checked before anything changes: a file that does not
 * load (its errors are returned, naming file and line), a root, a mux
 * mode or a mux that is no longer a mux, or a new member that cannot be
 * built refuses the whole reload and the running tree stays as it was.
 * What the core cannot change on a running tree is refused the same way,
 * naming the section and key: a running mux's mode, timeouts, cooldowns
 * and other keys, the order of its running members (and a new member
 * listed before a running one: the core adds members at the end), a
 * mirror or shield keeping none of its running members (their data would
 * vanish), a
 * running backend's keys other than its weight and a faulty backend's
 * fault keys, and every [mount] key. So a reload applies the whole file
 * or nothing, and the applied file becomes what .smux/config shows.
 * Members are built from the file as loaded once (never read again per
 * member) with the mount's options, -o included.
 *
 * SIGHUP: the handler only posts a semaphore; a thread of this module
 * does the reload (never in the signal handler, never on a FUSE thread).
 *
 * Locks: reload_lock serializes reloads (and ctl's add); cfg_lock guards
 * fs->live_cfg for .smux/config.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs/config_internal.h"
#include "fs/fs.h"
#include "smux/faulty.h"
#include "smux/mux.h"

#define RELOAD_DRAIN_TIMEOUT_NS (300 * 1000000000LL)
#define RELOAD_MAX_CHANGES	64

enum change_op { CH_ADD, CH_REMOVE, CH_WEIGHT, CH_FAULT };

struct change {
	enum change_op op;
	struct smux_backend *mux; /* a reference (CH_FAULT: the faulty) */
	char name[SMUX_ERROR_NAME_MAX];
	struct smux_mux_member add; /* CH_ADD: built, one reference */
	double weight;
	struct smux_faulty_opts fault;
};

struct plan {
	struct change ch[RELOAD_MAX_CHANGES];
	unsigned n;
	char *why;
	size_t cap;
};

static int refuse(struct plan *p, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int refuse(struct plan *p, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->why, p->cap, fmt, ap);
	va_end(ap);
	return rc;
}

static struct change *plan_new(struct plan *p, enum change_op op,
			       struct smux_backend *mux, const char *name)
{
	struct change *c;

	if (p->n == RELOAD_MAX_CHANGES)
		return NULL;
	c = &p->ch[p->n++];
	memset(c, 0, sizeof(*c));
	c->op = op;
	c->mux = smux_backend_ref(mux);
	snprintf(c->name, sizeof(c->name), "%s", name);
	return c;
}

static void plan_free(struct plan *p)
{
	for (unsigned i = 0; i < p->n; i++) {
		smux_backend_unref(p->ch[i].mux);
		smux_backend_unref(p->ch[i].add.backend);
	}
	p->n = 0;
}

static bool listed(const struct smux__cfg_section *s, const char *name)
{
	for (unsigned i = 0; i < s->n_members; i++)
		if (strcmp(s->members[i], name) == 0)
			return true;
	return false;
}

/* The weight section @s gives as a member (has = false: none). */
static double weight_of(const struct smux__cfg_section *s, bool *has)
{
	const struct smux__cfg_value *w =
		&s->v[s->kind == SMUX__CFG_MUX ? SMUX__XK_WEIGHT
					       : SMUX__BK_WEIGHT];

	*has = w->line != 0;
	return w->line ? w->d : 0;
}

/* Index of @name among @st's members, or -1. */
static int running_index(const struct smux_mux_stats *st, const char *name)
{
	for (unsigned i = 0; i < st->n_backends; i++)
		if (strcmp(st->backends[i].name, name) == 0)
			return (int)i;
	return -1;
}

/*
 * The order of a mux's members is its priority (failover, shield,
 * mirror's reads) or its key placement (sticky-by-key), and the core can
 * only append a member: refused when the new list @ns puts two running
 * members the other way round, or a new member before a running one. In
 * sticky-by-key a removed shard keeps its slot (hidden from the stats),
 * and adding its name back fills the slot in place, so a new name there
 * may be listed anywhere.
 */
static int check_order(const struct smux__cfg_section *ns,
		       const struct smux_mux_stats *st, struct plan *p)
{
	int last = -1;
	const char *last_name = NULL, *new_name = NULL;

	for (unsigned i = 0; i < ns->n_members; i++) {
		int at = running_index(st, ns->members[i]);

		if (at < 0) {
			if (!new_name)
				new_name = ns->members[i];
			continue;
		}
		if (at < last)
			return refuse(p, -EINVAL,
				      "[mux %s] backends: %s is listed after "
				      "%s but runs before it; a running mux "
				      "cannot reorder its members: remount "
				      "to change the order",
				      ns->name, ns->members[i], last_name);
		if (new_name && st->mode != SMUX_MODE_STICKY)
			return refuse(p, -EINVAL,
				      "[mux %s] backends: the new member %s is "
				      "listed before the running member %s; "
				      "a running mux adds members at the "
				      "end: list it after them or remount",
				      ns->name, new_name, ns->members[i]);
		last = at;
		last_name = ns->members[i];
	}
	return 0;
}

/* True when @ns lists at least one of the running members of @st. */
static bool keeps_one(const struct smux__cfg_section *ns,
		      const struct smux_mux_stats *st)
{
	for (unsigned i = 0; i < st->n_backends; i++)
		if (listed(ns, st->backends[i].name))
			return true;
	return false;
}

/* Plans the changes of the running mux @mux (and the muxes under it)
 * that the new config @nc asks for. 0 or a negative errno (p->why). */
static int plan_mux(struct smuxfs *fs, struct smux_config *nc,
		    struct smux_backend *mux, struct plan *p)
{
	const struct smux__cfg_section *ns = smux__cfg_find(nc, mux->name);
	struct smux_mux_stats *st = smux_mux_stats(mux);
	char errbuf[512];
	int rc = 0;

	if (!st)
		return refuse(p, -ENOMEM, "out of memory");
	if (!ns || ns->kind != SMUX__CFG_MUX) {
		smux_mux_stats_free(st);
		return refuse(p, -EINVAL,
			      "mux \"%s\" is not a [mux] of %s any more: "
			      "remount to change that",
			      mux->name, nc->path);
	}
	if ((enum smux_mode)ns->v[SMUX__XK_MODE].i != st->mode) {
		rc = refuse(
			p, -EINVAL, "mux \"%s\": mode %s to %s needs a remount",
			mux->name, smux_mode_name(st->mode),
			smux_mode_name((enum smux_mode)ns->v[SMUX__XK_MODE].i));
		smux_mux_stats_free(st);
		return rc;
	}
	rc = check_order(ns, st, p);
	/* a mirror or shield keeps the copies itself: one that replaced
	 * them all would have none left to fill the new ones from (other
	 * modes' members are the operator's to switch, as a failover's
	 * standbys are kept in sync by other means) */
	if (!rc && st->n_backends &&
	    (st->mode == SMUX_MODE_MIRROR || st->mode == SMUX_MODE_SHIELD) &&
	    !keeps_one(ns, st))
		rc = refuse(p, -EINVAL,
			    "[mux %s] backends: keeps none of its running "
			    "members; what they hold would be gone from the "
			    "mount: add the new members first, let `repair` "
			    "fill them, then remove the old ones",
			    ns->name);
	for (unsigned i = 0; i < st->n_backends && !rc; i++) {
		const struct smux_backend_stats *b = &st->backends[i];
		const struct smux__cfg_section *ms;
		struct smux_backend *child;
		struct change *c;
		bool has;
		double w;

		if (!listed(ns, b->name)) {
			if (!plan_new(p, CH_REMOVE, mux, b->name))
				rc = refuse(p, -E2BIG, "too many changes");
			continue;
		}
		ms = smux__cfg_find(nc, b->name);
		w = ms ? weight_of(ms, &has) : 0;
		if (ms && has && (!b->has_weight || w != b->weight)) {
			c = plan_new(p, CH_WEIGHT, mux, b->name);
			if (!c)
				rc = refuse(p, -E2BIG, "too many changes");
			else
				c->weight = w;
		}
		if (!b->child)
			continue;
		child = smux_mux_member(mux, b->name);
		if (child)
			rc = plan_mux(fs, nc, child, p);
		smux_backend_unref(child);
	}
	for (unsigned i = 0; i < ns->n_members && !rc; i++) {
		struct smux_backend *have =
			smux_mux_member(mux, ns->members[i]);
		struct change *c;

		if (have) {
			smux_backend_unref(have);
			continue;
		}
		c = plan_new(p, CH_ADD, mux, ns->members[i]);
		if (!c) {
			rc = refuse(p, -E2BIG, "too many changes");
			break;
		}
		errbuf[0] = '\0';
		rc = smux_config_build_member(nc, ns->members[i], fs->events,
					      smuxfs_otlp_tracer(fs), &c->add,
					      errbuf, sizeof(errbuf));
		if (rc)
			rc = refuse(p, -EINVAL, "%s", errbuf);
	}
	smux_mux_stats_free(st);
	return rc;
}

/* True when two sets of the fault keys a config gives are the same. */
static bool faults_equal(const struct smux_faulty_opts *a,
			 const struct smux_faulty_opts *b)
{
	return a->latency_ms == b->latency_ms && a->hang_ms == b->hang_ms &&
	       a->hang_rate == b->hang_rate && a->error_rate == b->error_rate &&
	       a->semantic_rate == b->semantic_rate &&
	       a->timeout_rate == b->timeout_rate && a->seed == b->seed &&
	       a->after_ms == b->after_ms && a->for_ms == b->for_ms;
}

/* Plans the fault changes: every faulty section of @nc that is in the
 * running tree and whose keys differ from @oc's. */
static int plan_faults(struct smuxfs *fs, struct smux_config *oc,
		       struct smux_config *nc, struct plan *p)
{
	for (unsigned i = 0; i < nc->n_secs; i++) {
		const struct smux__cfg_section *s = nc->secs[i], *o;
		struct smux_faulty_opts now, before;
		struct smux_backend *b;
		struct change *c;

		if (s->kind != SMUX__CFG_BACKEND ||
		    s->v[SMUX__BK_TYPE].i != SMUX__CFG_T_FAULTY)
			continue;
		o = smux__cfg_find(oc, s->name);
		smux_config_faulty_opts(s, &now);
		if (o && o->kind == SMUX__CFG_BACKEND &&
		    o->v[SMUX__BK_TYPE].i == SMUX__CFG_T_FAULTY) {
			smux_config_faulty_opts(o, &before);
			if (faults_equal(&now, &before))
				continue;
		}
		b = smuxfs_tree_backend(fs->root, s->name);
		if (!b)
			continue; /* not in the tree (or added: built anew) */
		c = strcmp(b->ops->kind, "faulty") == 0
			    ? plan_new(p, CH_FAULT, b, s->name)
			    : NULL;
		smux_backend_unref(b);
		if (c)
			c->fault = now;
	}
	return 0;
}

/* True when a key's value differs between two loads of the file. */
static bool value_changed(enum smux__cfg_vt vt, const struct smux__cfg_value *a,
			  const struct smux__cfg_value *b)
{
	if ((a->line != 0) != (b->line != 0))
		return true;
	if (!a->line)
		return false;
	switch (vt) {
	case SMUX__VT_STRING:
	case SMUX__VT_ABSPATH:
	case SMUX__VT_NAME:
	case SMUX__VT_PREFIX:
		return !a->s || !b->s || strcmp(a->s, b->s) != 0;
	case SMUX__VT_NAMES:
		return false; /* members: plan_mux */
	case SMUX__VT_BOOL:
		return a->b != b->b;
	case SMUX__VT_RATE:
	case SMUX__VT_WEIGHT:
		return a->d != b->d;
	case SMUX__VT_DURATION:
	case SMUX__VT_MODE:
	case SMUX__VT_TYPE:
	case SMUX__VT_AUTO:
		return a->i != b->i;
	default:
		return a->u != b->u;
	}
}

/* True for the keys a reload applies to a running section of kind @kind
 * (a faulty backend's fault keys: @faulty). */
static bool applied_key(enum smux__cfg_kind kind, unsigned k, bool faulty)
{
	if (kind == SMUX__CFG_MUX)
		return k == SMUX__XK_WEIGHT || k == SMUX__XK_BACKENDS ||
		       k == SMUX__XK_MODE; /* mode: plan_mux says why */
	if (kind != SMUX__CFG_BACKEND)
		return false;
	if (k == SMUX__BK_WEIGHT)
		return true;
	return faulty && k >= SMUX__BK_LATENCY && k <= SMUX__BK_FAULT_FOR;
}

/*
 * Refuses what the new file @nc changes that the running tree cannot
 * take, naming the section and the key: any [mount] key, and the keys of
 * a running mux or backend other than those applied_key() names. A
 * section whose name is not in the running tree may change freely (it is
 * built anew when added).
 */
static int check_unchangeable(struct smuxfs *fs, struct smux_config *oc,
			      struct smux_config *nc, struct plan *p)
{
	char label[SMUX_ERROR_NAME_MAX + 16];

	for (unsigned i = 0; i < nc->n_secs; i++) {
		const struct smux__cfg_section *s = nc->secs[i], *o;
		unsigned n;
		const struct smux__cfg_keydef *keys =
			smux__cfg_keys(s->kind, &n);
		struct smux_backend *running = NULL;
		bool faulty;

		if (s->kind == SMUX__CFG_MOUNT) {
			o = oc->mount;
		} else {
			o = smux__cfg_find(oc, s->name);
			running = smuxfs_tree_backend(fs->root, s->name);
			smux_backend_unref(running);
			if (!running)
				continue;
		}
		if (!o)
			continue; /* added with `add` after the file it ran */
		smux__cfg_label(s, label, sizeof(label));
		if (o->kind != s->kind)
			return refuse(p, -EINVAL,
				      "%s: \"%s\" runs as a [%s]: remount to "
				      "change what it is",
				      label, s->name,
				      o->kind == SMUX__CFG_MUX ? "mux"
							       : "backend");
		faulty = s->kind == SMUX__CFG_BACKEND &&
			 s->v[SMUX__BK_TYPE].i == SMUX__CFG_T_FAULTY &&
			 o->v[SMUX__BK_TYPE].i == SMUX__CFG_T_FAULTY;
		for (unsigned k = 0; k < n; k++) {
			if (applied_key(s->kind, k, faulty))
				continue;
			/* a mux's timeout as it runs: its own, or the
			 * mount's (writing the mount's value into the mux
			 * changes nothing; s45-t3) */
			if (s->kind == SMUX__CFG_MUX &&
					    k == SMUX__XK_BACKEND_TIMEOUT
				    ? smux__cfg_mux_ms(o, (int)k) !=
					      smux__cfg_mux_ms(s, (int)k)
				    : value_changed(keys[k].vt, &o->v[k],
						    &s->v[k]))
				return refuse(
					p, -EINVAL,
					"%s %s changed: a running %s "
					"cannot change it (reload "
					"applies members, weights and "
					"faults): remount to apply it",
					label, keys[k].name,
					s->kind == SMUX__CFG_MOUNT ? "mount"
					: s->kind == SMUX__CFG_MUX ? "mux"
								   : "backend");
		}
	}
	return 0;
}

/* The pass of apply() that carries out @c. */
static int apply_pass(const struct change *c)
{
	if (c->op == CH_REMOVE)
		return 2;
	if (c->op == CH_WEIGHT && c->weight == 0)
		return 1;
	return 0;
}

/* Carries out @c: 0, or the failure with @err filled and @why saying
 * what failed. */
static int apply_one(struct change *c, const struct smux_ctx *ctx,
		     struct smux_error *err, char *why, size_t cap)
{
	int rc = 0;

	smux_error_clear(err);
	switch (c->op) {
	case CH_REMOVE:
		rc = smux_mux_remove(c->mux, c->name, ctx, err);
		break;
	case CH_ADD:
		rc = smux_mux_add(c->mux, &c->add, err);
		break;
	case CH_WEIGHT:
		rc = smux_mux_set_weight(c->mux, c->name, c->weight, err);
		break;
	case CH_FAULT:
		smux_faulty_set(c->mux, &c->fault);
		break;
	}
	if (rc)
		snprintf(why, cap, "%s: %s (changes before it stay)", c->name,
			 err->e.message);
	return rc;
}

static int apply(struct plan *p, char *why, size_t cap)
{
	struct smux_error err;
	struct smux_ctx ctx, base;
	int rc = 0;

	smux_ctx_init(&base);
	smux_ctx_derive(&ctx, &base, RELOAD_DRAIN_TIMEOUT_NS, NULL);
	/* in passes: members added and weights raised first, then weights
	 * set to 0, then members removed, so that every step on the way to
	 * what the file asks is one the mux takes (a weighted mux never has
	 * every weight 0, a mux never loses its last member, and a new
	 * replica is in before an old one leaves) */
	for (int pass = 0; pass < 3 && !rc; pass++)
		for (unsigned i = 0; i < p->n && !rc; i++)
			if (apply_pass(&p->ch[i]) == pass)
				rc = apply_one(&p->ch[i], &ctx, &err, why, cap);
	return rc ? (err.e.sys_errno > 0 ? -err.e.sys_errno : -EIO) : 0;
}

int smuxfs_reload(struct smuxfs *fs, char *why, size_t cap)
{
	struct smux_config *nc = NULL, *oc;
	struct plan *p;
	int rc;

	why[0] = '\0';
	pthread_mutex_lock(&fs->reload_lock);
	rc = smux_config_load(fs->config_path, &nc, why, cap);
	if (rc) {
		pthread_mutex_unlock(&fs->reload_lock);
		return -EINVAL;
	}
	/* members are built with what the mount runs with, -o included */
	if (smux_config_copy_opts(nc, fs->cfg)) {
		smux_config_free(nc);
		pthread_mutex_unlock(&fs->reload_lock);
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		smux_config_free(nc);
		pthread_mutex_unlock(&fs->reload_lock);
		return -ENOMEM;
	}
	p->why = why;
	p->cap = cap;
	oc = fs->live_cfg ? fs->live_cfg : fs->cfg;
	if (strcmp(nc->root->name, fs->root->name) != 0)
		rc = refuse(p, -EINVAL,
			    "the root is \"%s\" now, \"%s\" runs: remount to "
			    "change it",
			    nc->root->name, fs->root->name);
	else
		rc = check_unchangeable(fs, oc, nc, p);
	/* the mount point apart (smux_config_check_dirs would open a path
	 * under it, through this daemon): compared by path, first */
	if (!rc)
		rc = smux_config_check_under_mount(nc, NULL, fs->mount_path,
						   why, cap);
	if (!rc)
		rc = smux_config_check_dirs(nc, NULL, NULL, why, cap);
	/* one daemon keeps replicas in a directory at a time, claimed
	 * before a member is built (replica_lock.c) */
	if (!rc)
		rc = smuxfs_replica_claim(nc, why, cap);
	if (!rc && nc->root->kind == SMUX__CFG_MUX)
		rc = plan_mux(fs, nc, fs->root, p);
	else if (!rc && oc->root->kind == SMUX__CFG_MUX)
		rc = refuse(p, -EINVAL,
			    "the root mux became a backend: "
			    "remount to change it");
	if (!rc)
		rc = plan_faults(fs, oc, nc, p);
	if (!rc) {
		rc = apply(p, why, cap);
		/* members came or went (what applied stays on a failure):
		 * directories' names are listed again (dirnames.c) */
		smuxfs_dirnames_forget(fs, NULL);
		/* and writers kept between opens are of the members before
		 * (linger.c): the next open opens its file again; none is
		 * kept any more once a file member is not on a local disk */
		const char *remote = smux_config_remote_file(nc);

		if (remote)
			smuxfs_linger_off(fs, remote);
		else
			smuxfs_linger_drop_all(fs);
	}
	plan_free(p);
	free(p);
	if (rc) {
		smux_config_free(nc);
	} else {
		pthread_mutex_lock(&fs->cfg_lock);
		oc = fs->live_cfg;
		fs->live_cfg = nc;
		pthread_mutex_unlock(&fs->cfg_lock);
		smux_config_free(oc);
	}
	pthread_mutex_unlock(&fs->reload_lock);
	return rc;
}

/* ---- SIGHUP ---- */

static sem_t hup_sem;
static pthread_t hup_thread;
static bool hup_started;
static volatile sig_atomic_t hup_stop;

static void on_hup(int sig)
{
	(void)sig;
	sem_post(&hup_sem); /* async-signal-safe */
}

static void *hup_main(void *arg)
{
	struct smuxfs *fs = arg;
	char why[512];

	for (;;) {
		while (sem_wait(&hup_sem) != 0)
			;
		if (hup_stop)
			return NULL;
		if (smuxfs_reload(fs, why, sizeof(why)))
			smux_log(LOG_ERR, "SIGHUP: reload refused: %s", why);
		else
			smux_log(LOG_NOTICE, "SIGHUP: %s reloaded",
				 fs->config_path);
	}
}

int smuxfs_reload_start(struct smuxfs *fs)
{
	struct sigaction sa = {.sa_handler = on_hup};

	if (sem_init(&hup_sem, 0, 0) != 0)
		return -errno;
	if (pthread_create(&hup_thread, NULL, hup_main, fs) != 0) {
		sem_destroy(&hup_sem);
		return -EAGAIN;
	}
	hup_started = true;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGHUP, &sa, NULL) != 0)
		return -errno;
	return 0;
}

void smuxfs_reload_stop(struct smuxfs *fs)
{
	struct sigaction sa = {.sa_handler = SIG_IGN};

	(void)fs;
	if (!hup_started)
		return;
	sigaction(SIGHUP, &sa, NULL);
	hup_stop = 1;
	sem_post(&hup_sem);
	pthread_join(hup_thread, NULL);
	sem_destroy(&hup_sem);
	hup_started = false;
}
