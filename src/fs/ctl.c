/* SPDX-License-Identifier: MIT */
/*
 * ctl.c - .smux/ctl: commands an operator writes, one per line (issue 11
 * item 1), carried out on the mounted mux tree:
 *
 *   drain NAME            take member NAME out of rotation; returns once
 *                         its in-flight calls are done (open writers
 *                         drop it: architecture.md)
 *   undrain NAME          put it back
 *   remove NAME           drain, then remove it from its mux
 *   weight NAME W         set its weight (weighted mode)
 *   repair [NAME]         replay pending hints now: of every mux of the
 *                         tree, or of mux NAME (or of the mux holding
 *                         member NAME)
 *   add NAME [to MUX]     build the config file's section NAME (read
 *                         again) and add it to MUX (default: the root,
 *                         when the tree has one mux)
 *   reload                read the config file again and apply the
 *                         difference (reload.c)
 *   fault NAME K=V...     set the faults of the faulty backend NAME
 *                         (latency, hang, error_rate, hang_rate,
 *                         timeout_rate, semantic_rate, seed, after, for;
 *                         keys not given are off; "fault NAME off" ends
 *                         them all)
 *
 * NAME is a member's name anywhere in the tree (the mux holding it is
 * found by walking the tree). A write() (at most CTL_WRITE_MAX bytes, or
 * it is refused whole: EINVAL) carries out its lines in order and
 * stops at the first that fails, returning that command's errno: EINVAL
 * malformed (unknown command, missing or extra argument, bad value),
 * ENOENT unknown name, EEXIST a name already in the tree (add),
 * others as the mux answered (docs/errors.md); reload: reload.c. A failed
 * command changes nothing. Every command, done or refused, is a line in
 * .smux/events (topic "smuxfs.ctl") and in the log, so an operator sees
 * what was asked and why it failed.
 *
 * Who may write: root and the user who mounted (the daemon's uid), checked
 * at open (EACCES), also under allow_other.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/config_internal.h"
#include "fs/fs.h"
#include "smux/faulty.h"
#include "smux/mux.h"

#define CTL_LINE_MAX 1024
/* The largest write(2) taken: the kernel passes a larger one (over
 * max_write, 1 MiB) in pieces, each a write here, and a line cut at the
 * seam would run as two commands; one over this is refused whole before
 * anything runs (its first piece is always larger than this). */
#define CTL_WRITE_MAX ((size_t)64 * 1024)
#define CTL_ARGS_MAX  16
/* How long drain and remove wait for in-flight work. */
#define CTL_DRAIN_TIMEOUT_NS (300 * 1000000000LL)

struct ctl_cmd {
	char *argv[CTL_ARGS_MAX];
	int argc;
	char why[256]; /* the reason it failed */
};

int smuxfs_ctl_may_open(struct smuxfs *fs, uid_t caller)
{
	(void)fs;
	return caller == 0 || caller == getuid() ? 0 : -EACCES;
}

struct smux_backend *smuxfs_tree_owner(struct smux_backend *b, const char *name)
{
	struct smux_backend *m, *found = NULL;
	struct smux_mux_stats *st;

	if (!smux_is_mux(b))
		return NULL;
	m = smux_mux_member(b, name);
	if (m) {
		smux_backend_unref(m);
		return smux_backend_ref(b);
	}
	st = smux_mux_stats(b);
	for (unsigned i = 0; st && i < st->n_backends && !found; i++) {
		if (!st->backends[i].child)
			continue;
		m = smux_mux_member(b, st->backends[i].name);
		if (m) {
			found = smuxfs_tree_owner(m, name);
			smux_backend_unref(m);
		}
	}
	smux_mux_stats_free(st);
	return found;
}

struct smux_backend *smuxfs_tree_backend(struct smux_backend *root,
					 const char *name)
{
	struct smux_backend *owner;
	struct smux_backend *b;

	if (strcmp(root->name, name) == 0)
		return smux_backend_ref(root);
	owner = smuxfs_tree_owner(root, name);
	if (!owner)
		return NULL;
	b = smux_mux_member(owner, name);
	smux_backend_unref(owner);
	return b;
}

/* Turns a mux error into the command's errno and reason. */
static int from_err(struct ctl_cmd *c, const struct smux_error *err)
{
	snprintf(c->why, sizeof(c->why), "%s", err->e.message);
	if (err->e.code == SMUX_E_BACKEND_NOT_FOUND)
		return -ENOENT;
	return err->e.sys_errno > 0 ? -err->e.sys_errno : -EIO;
}

static int fail(struct ctl_cmd *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Sets the reason @c failed; returns @rc. */
static int fail(struct ctl_cmd *c, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	return rc;
}

/* The mux holding member argv[1] (a new reference), or NULL with why. */
static struct smux_backend *member_owner(struct smuxfs *fs, struct ctl_cmd *c)
{
	struct smux_backend *owner = smuxfs_tree_owner(fs->root, c->argv[1]);

	if (!owner)
		fail(c, -ENOENT, "no member named \"%s\" in the tree",
		     c->argv[1]);
	return owner;
}

/* drain, undrain, remove, weight: one member of one mux. */
static int cmd_member(struct smuxfs *fs, struct ctl_cmd *c)
{
	const char *verb = c->argv[0];
	struct smux_backend *owner;
	struct smux_error err;
	struct smux_ctx ctx, base;
	char why[160];
	double w = 0;
	int rc;

	if (strcmp(verb, "weight") == 0) {
		if (c->argc != 3)
			return fail(c, -EINVAL, "usage: weight NAME W");
		if (smux__cfg_parse_weight(c->argv[2], &w, why, sizeof(why)))
			return fail(c, -EINVAL, "%s", why);
	} else if (c->argc != 2) {
		return fail(c, -EINVAL, "usage: %s NAME", verb);
	}
	owner = member_owner(fs, c);
	if (!owner)
		return -ENOENT;
	smux_ctx_init(&base);
	smux_ctx_derive(&ctx, &base, CTL_DRAIN_TIMEOUT_NS, NULL);
	if (strcmp(verb, "drain") == 0)
		rc = smux_mux_drain(owner, c->argv[1], &ctx, &err);
	else if (strcmp(verb, "undrain") == 0)
		rc = smux_mux_undrain(owner, c->argv[1], &err);
	else if (strcmp(verb, "remove") == 0)
		rc = smux_mux_remove(owner, c->argv[1], &ctx, &err);
	else
		rc = smux_mux_set_weight(owner, c->argv[1], w, &err);
	smux_backend_unref(owner);
	/* which members answer a listing may have changed: directories'
	 * names are listed again (dirnames.c) */
	smuxfs_dirnames_forget(fs, NULL);
	return rc ? from_err(c, &err) : 0;
}

/* Repairs @b and every mux under it; the first error wins. */
static int repair_tree(struct smux_backend *b, struct smux_error *err)
{
	struct smux_mux_stats *st;
	struct smux_ctx ctx;
	int rc, first = 0;

	if (!smux_is_mux(b))
		return 0;
	smux_ctx_init(&ctx);
	rc = smux_mux_repair(b, &ctx, NULL, NULL, err);
	if (rc)
		first = rc;
	st = smux_mux_stats(b);
	for (unsigned i = 0; st && i < st->n_backends; i++) {
		struct smux_backend *m;
		struct smux_error e2;

		if (!st->backends[i].child)
			continue;
		m = smux_mux_member(b, st->backends[i].name);
		if (!m)
			continue;
		rc = repair_tree(m, first ? &e2 : err);
		if (rc && !first)
			first = rc;
		smux_backend_unref(m);
	}
	smux_mux_stats_free(st);
	return first;
}

static int cmd_repair(struct smuxfs *fs, struct ctl_cmd *c)
{
	struct smux_backend *b;
	struct smux_error err;
	int rc;

	if (c->argc > 2)
		return fail(c, -EINVAL, "usage: repair [NAME]");
	if (c->argc == 1) {
		b = smux_backend_ref(fs->root);
	} else {
		b = smuxfs_tree_backend(fs->root, c->argv[1]);
		if (!b)
			return fail(c, -ENOENT, "no backend named \"%s\"",
				    c->argv[1]);
		if (!smux_is_mux(b)) { /* a member: its mux */
			smux_backend_unref(b);
			b = smuxfs_tree_owner(fs->root, c->argv[1]);
		}
	}
	rc = b ? repair_tree(b, &err) : 0;
	smux_backend_unref(b);
	return rc ? from_err(c, &err) : 0;
}

/* Sets one fault option K=V in @o. */
static int fault_opt(struct ctl_cmd *c, const char *kv,
		     struct smux_faulty_opts *o)
{
	const char *eq = strchr(kv, '=');
	char key[32], why[160];
	const char *v;
	uint64_t u;
	int rc = 0;

	if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key))
		return fail(c, -EINVAL, "\"%s\": expected KEY=VALUE", kv);
	memcpy(key, kv, (size_t)(eq - kv));
	key[eq - kv] = '\0';
	v = eq + 1;
	if (strcmp(key, "latency") == 0)
		rc = smux__cfg_parse_duration(v, &o->latency_ms, why,
					      sizeof(why));
	else if (strcmp(key, "hang") == 0)
		rc = smux__cfg_parse_duration(v, &o->hang_ms, why, sizeof(why));
	else if (strcmp(key, "after") == 0)
		rc = smux__cfg_parse_duration(v, &o->after_ms, why,
					      sizeof(why));
	else if (strcmp(key, "for") == 0)
		rc = smux__cfg_parse_duration(v, &o->for_ms, why, sizeof(why));
	else if (strcmp(key, "error_rate") == 0)
		rc = smux__cfg_parse_rate(v, &o->error_rate, why, sizeof(why));
	else if (strcmp(key, "hang_rate") == 0)
		rc = smux__cfg_parse_rate(v, &o->hang_rate, why, sizeof(why));
	else if (strcmp(key, "timeout_rate") == 0)
		rc = smux__cfg_parse_rate(v, &o->timeout_rate, why,
					  sizeof(why));
	else if (strcmp(key, "semantic_rate") == 0)
		rc = smux__cfg_parse_rate(v, &o->semantic_rate, why,
					  sizeof(why));
	else if (strcmp(key, "seed") == 0) {
		rc = smux__cfg_parse_u64(v, &u, why, sizeof(why));
		o->seed = u;
	} else
		return fail(c, -EINVAL, "unknown fault \"%s\"", key);
	if (rc)
		return fail(c, -EINVAL, "%s", why);
	return 0;
}

static int cmd_fault(struct smuxfs *fs, struct ctl_cmd *c)
{
	struct smux_faulty_opts o = {0};
	struct smux_backend *b;
	int rc = 0;

	if (c->argc < 3)
		return fail(c, -EINVAL, "usage: fault NAME KEY=VALUE... | off");
	if (!(c->argc == 3 && strcmp(c->argv[2], "off") == 0))
		for (int i = 2; i < c->argc && !rc; i++)
			rc = fault_opt(c, c->argv[i], &o);
	if (rc)
		return rc;
	if (o.error_rate + o.hang_rate + o.timeout_rate + o.semantic_rate > 1.0)
		return fail(c, -EINVAL, "the rates add up to more than 1");
	b = smuxfs_tree_backend(fs->root, c->argv[1]);
	if (!b)
		return fail(c, -ENOENT, "no backend named \"%s\"", c->argv[1]);
	if (strcmp(b->ops->kind, "faulty") != 0) {
		smux_backend_unref(b);
		return fail(c, -EINVAL, "\"%s\" is not a faulty backend",
			    c->argv[1]);
	}
	smux_faulty_set(b, &o);
	smux_backend_unref(b);
	return 0;
}

/* The muxes in the tree under @b (itself included). */
static unsigned count_muxes(struct smux_backend *b)
{
	struct smux_mux_stats *st;
	unsigned n = 1;

	if (!smux_is_mux(b))
		return 0;
	st = smux_mux_stats(b);
	for (unsigned i = 0; st && i < st->n_backends; i++) {
		struct smux_backend *m;

		if (!st->backends[i].child)
			continue;
		m = smux_mux_member(b, st->backends[i].name);
		n += m ? count_muxes(m) : 0;
		smux_backend_unref(m);
	}
	smux_mux_stats_free(st);
	return n;
}

/* Whether a member named @name is in the running tree (@arg: the fs). */
static bool in_tree(const char *name, void *arg)
{
	struct smuxfs *fs = arg;
	struct smux_backend *b = smuxfs_tree_backend(fs->root, name);

	smux_backend_unref(b);
	return b != NULL;
}

/* True when the mux @m writes every member (mirror, shield). */
static bool replicates(struct smux_backend *m)
{
	struct smux_mux_stats *st = smux_mux_stats(m);
	bool r = !st || st->mode == SMUX_MODE_MIRROR ||
		 st->mode == SMUX_MODE_SHIELD; /* unknown: as if it did */

	smux_mux_stats_free(st);
	return r;
}

/* Whether mux @b records repair hints for its members once it has
 * @extra more (smux_mode_keeps_hints, replica_lock.c). */
static bool keeps_hints(struct smux_backend *b, unsigned extra)
{
	struct smux_mux_stats *st = smux_mux_stats(b);
	bool keeps =
		st && smux_mode_keeps_hints(st->mode, st->n_backends + extra);

	smux_mux_stats_free(st);
	return keeps;
}

/* The steps of on_path: whether mux @b (@target when @is_target) counts. */
static bool step_replicates(struct smux_backend *b, bool is_target)
{
	(void)is_target;
	return replicates(b);
}

/* ... counting the member being added to @target */
static bool step_keeps_hints(struct smux_backend *b, bool is_target)
{
	return keeps_hints(b, is_target ? 1 : 0);
}

/* Whether @target is @b or lies below it with a mux that @counts on the
 * way, @target included (@above: one above @b counted). NULL-safe walk
 * of the running tree. */
static bool on_path(struct smux_backend *b, struct smux_backend *target,
		    bool above, unsigned depth,
		    bool (*counts)(struct smux_backend *b, bool is_target))
{
	struct smux_mux_stats *st;
	bool on, found = false;

	if (!b || !smux_is_mux(b))
		return false;
	on = above || counts(b, b == target);
	if (b == target)
		return on;
	if (depth > 16)
		return false;
	st = smux_mux_stats(b);
	for (unsigned i = 0; st && i < st->n_backends && !found; i++) {
		struct smux_backend *m;

		if (!st->backends[i].child)
			continue;
		m = smux_mux_member(b, st->backends[i].name);
		found = on_path(m, target, on, depth + 1, counts);
		smux_backend_unref(m);
	}
	smux_mux_stats_free(st);
	return found;
}

/* The members of @target and the one named @name being added, claimed
 * (replica_lock.c): a mux that keeps hints from this add on has them all
 * (a mirror of one member claimed nothing at its mount). */
static int claim_added(struct smux_config *cfg, struct smux_backend *target,
		       const char *name, char *errbuf, size_t cap)
{
	struct smux_mux_stats *st = smux_mux_stats(target);
	int rc = smuxfs_replica_claim_member(cfg, name, errbuf, cap);

	for (unsigned i = 0; st && i < st->n_backends && !rc; i++)
		rc = smuxfs_replica_claim_member(cfg, st->backends[i].name,
						 errbuf, cap);
	smux_mux_stats_free(st);
	return rc;
}

/* A section reached through a member of the mirror or shield @m already
 * is refused (smux_config_check_added_reach). */
static int check_reach(struct smux_config *cfg, const char *name,
		       struct smux_backend *m, char *errbuf, size_t errlen)
{
	struct smux_mux_stats *st = smux_mux_stats(m);
	const char **names;
	int rc;

	if (!st)
		return 0;
	names = calloc(st->n_backends + 1, sizeof(*names));
	if (!names) {
		smux_mux_stats_free(st);
		snprintf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < st->n_backends; i++)
		names[i] = st->backends[i].name;
	rc = smux_config_check_added_reach(cfg, name, st->name, names,
					   st->n_backends, errbuf, errlen);
	free(names);
	smux_mux_stats_free(st);
	return rc;
}

/* add NAME [to MUX]: builds the config file's section NAME (read again,
 * so a section written after the mount works) and makes it a member of
 * MUX, or of the root when the tree has one mux. */
static int cmd_add(struct smuxfs *fs, struct ctl_cmd *c)
{
	const char *name = c->argv[1];
	struct smux_backend *target, *have;
	struct smux_config *cfg = NULL;
	struct smux_mux_member m;
	struct smux_error err;
	char errbuf[512], remote_path[PATH_MAX] = "";
	const char *remote;
	int rc;

	if (!(c->argc == 2 || (c->argc == 4 && strcmp(c->argv[2], "to") == 0)))
		return fail(c, -EINVAL, "usage: add NAME [to MUX]");
	have = smuxfs_tree_backend(fs->root, name);
	if (have) {
		smux_backend_unref(have);
		return fail(c, -EEXIST, "\"%s\" is in the tree already", name);
	}
	if (c->argc == 4) {
		target = smuxfs_tree_backend(fs->root, c->argv[3]);
		if (!target)
			return fail(c, -ENOENT, "no mux named \"%s\"",
				    c->argv[3]);
		if (!smux_is_mux(target)) {
			smux_backend_unref(target);
			return fail(c, -EINVAL, "\"%s\" is not a mux",
				    c->argv[3]);
		}
	} else if (count_muxes(fs->root) != 1) {
		return fail(c, -EINVAL,
			    "the tree has several muxes: add %s "
			    "to MUX",
			    name);
	} else {
		target = smux_backend_ref(fs->root);
	}
	errbuf[0] = '\0';
	rc = smux_config_load(fs->config_path, &cfg, errbuf, sizeof(errbuf));
	/* built with the options the mount runs with (-o ro, state_dir=) */
	if (!rc && smux_config_copy_opts(cfg, fs->cfg)) {
		snprintf(errbuf, sizeof(errbuf), "out of memory");
		rc = -ENOMEM;
	}
	/* its directories must not overlap the running ones' */
	if (!rc) {
		/* a mirror or shield above the target writes it too: a
		 * directory of the tree added under a failover inside a
		 * mirror took every write twice (s41-t4) */
		struct smux_config_added a = {
			.name = name,
			.replicated = on_path(fs->root, target, false, 0,
					      step_replicates),
			.running = in_tree,
			.arg = fs};

		rc = smux_config_check_under_mount(cfg, name, fs->mount_path,
						   errbuf, sizeof(errbuf));
		if (!rc)
			rc = smux_config_check_dirs(cfg, &a, NULL, errbuf,
						    sizeof(errbuf));
		if (!rc && a.replicated)
			rc = check_reach(cfg, name, target, errbuf,
					 sizeof(errbuf));
	}
	/* under a mux that keeps hints: one daemon keeps replicas in a
	 * directory at a time, claimed before it is built
	 * (replica_lock.c) */
	if (!rc && on_path(fs->root, target, false, 0, step_keeps_hints))
		rc = claim_added(cfg, target, name, errbuf, sizeof(errbuf));
	if (!rc)
		rc = smux_config_build_member(cfg, name, fs->events,
					      smuxfs_otlp_tracer(fs), &m,
					      errbuf, sizeof(errbuf));
	remote = rc ? NULL : smux_config_remote_file_in(cfg, name);
	if (remote)
		snprintf(remote_path, sizeof(remote_path), "%s", remote);
	smux_config_free(cfg);
	if (rc) {
		smux_backend_unref(target);
		return fail(c,
			    rc == -ENOENT || rc == -ENOMEM || rc == -EBUSY
				    ? rc
				    : -EINVAL,
			    "%s", errbuf);
	}
	rc = smux_mux_add(target, &m, &err);
	smux_backend_unref(m.backend);
	smux_backend_unref(target);
	smuxfs_dirnames_forget(fs, NULL); /* a member's names: dirnames.c */
	/* writers kept between opens (linger.c) write the members before:
	 * a mux of one that has two now must not hand one out, as after a
	 * reload; none is kept any more once a member is on NFS, SMB or
	 * FUSE (another client's renames never reach inotify) */
	if (!rc && remote_path[0])
		smuxfs_linger_off(fs, remote_path);
	else if (!rc)
		smuxfs_linger_drop_all(fs);
	if (rc && err.e.code == SMUX_E_BACKEND_NAME_CONFLICT)
		return fail(c, -EEXIST, "%s", err.e.message);
	return rc ? from_err(c, &err) : 0;
}

/* Splits @line into @c's argv (in place). -EINVAL when too many. */
static int split(char *line, struct ctl_cmd *c)
{
	char *p = line;

	c->argc = 0;
	for (;;) {
		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			return 0;
		if (c->argc == CTL_ARGS_MAX)
			return fail(c, -EINVAL, "more than %d words",
				    CTL_ARGS_MAX);
		c->argv[c->argc++] = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		if (*p)
			*p++ = '\0';
	}
}

/* Carries out one command line; 0 or a negative errno with c->why. */
static int run_line(struct smuxfs *fs, char *line, struct ctl_cmd *c)
{
	int rc = split(line, c);
	const char *verb;

	if (rc || c->argc == 0)
		return rc;
	verb = c->argv[0];
	if (strcmp(verb, "drain") == 0 || strcmp(verb, "undrain") == 0 ||
	    strcmp(verb, "remove") == 0 || strcmp(verb, "weight") == 0)
		return cmd_member(fs, c);
	if (strcmp(verb, "repair") == 0)
		return cmd_repair(fs, c);
	if (strcmp(verb, "fault") == 0)
		return cmd_fault(fs, c);
	if (strcmp(verb, "add") == 0) {
		pthread_mutex_lock(&fs->reload_lock);
		rc = cmd_add(fs, c);
		pthread_mutex_unlock(&fs->reload_lock);
		return rc;
	}
	if (strcmp(verb, "reload") == 0) {
		if (c->argc != 1)
			return fail(c, -EINVAL, "usage: reload");
		return smuxfs_reload(fs, c->why, sizeof(c->why));
	}
	return fail(c, -EINVAL, "unknown command \"%s\"", verb);
}

/*
 * @s as it is shown in the log and in .smux/events: control characters
 * become '?' (no escape sequence reaches a terminal reading the log) and,
 * when @s is not UTF-8 (which JSON strings must be, or jansson drops the
 * event), so does every byte above 0x7f.
 */
static void printable(char *s)
{
	json_t *probe;

	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	probe = json_string(s);
	if (probe) {
		json_decref(probe);
		return;
	}
	for (char *p = s; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
}

/* The command's outcome in the log and in .smux/events (@line and @why
 * made printable here). */
static void report(struct smuxfs *fs, char *line, int rc, char *why)
{
	json_t *j;

	printable(line);
	printable(why);
	j = json_pack("{s:s, s:s, s:s}", "topic", "smuxfs.ctl", "command", line,
		      "result", rc ? "failed" : "ok");

	if (j && rc) {
		json_object_set_new(j, "errno", json_string(strerror(-rc)));
		json_object_set_new(j, "reason", json_string(why));
	}
	smuxfs_eventlog_note(fs, j);
	smux_log(rc ? LOG_WARNING : LOG_INFO, ".smux/ctl: %s: %s%s%s", line,
		 rc ? strerror(-rc) : "done", rc ? ": " : "", rc ? why : "");
	json_decref(j);
}

long smuxfs_ctl_write(struct smuxfs *fs, const char *buf, size_t size)
{
	char line[CTL_LINE_MAX], shown[CTL_LINE_MAX];
	size_t pos = 0;

	if (size > CTL_WRITE_MAX) {
		char what[] = "(a write too large)";
		char why[] = "a write to .smux/ctl is at most 64 KiB";

		report(fs, what, -EINVAL, why);
		return -EINVAL;
	}

	while (pos < size) {
		const char *nl = memchr(buf + pos, '\n', size - pos);
		size_t len = (nl ? (size_t)(nl - buf) : size) - pos;
		struct ctl_cmd c = {.why = ""};
		int rc;

		if (len >= sizeof(line)) {
			char what[] = "(a line too long)";
			char why[] = "a command line is at most 1023 bytes";

			report(fs, what, -EINVAL, why);
			return -EINVAL;
		}
		memcpy(line, buf + pos, len);
		line[len] = '\0';
		pos += len + (nl ? 1 : 0);
		if (memchr(line, '\0', len)) {
			char what[] = "(binary)",
			     why[] = "a NUL byte in a line";

			report(fs, what, -EINVAL, why);
			return -EINVAL;
		}
		memcpy(shown, line, len + 1);
		rc = run_line(fs, line, &c);
		if (c.argc == 0 && rc == 0)
			continue; /* blank or comment */
		report(fs, shown, rc, c.why);
		if (rc)
			return rc;
	}
	return (long)size;
}
