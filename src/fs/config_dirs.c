// SPDX-License-Identifier: MIT
/*
 * config_dirs.c - the local directories of one mount must not overlap.
 *
 * Refused, naming both keys, their lines and the directories:
 *   - two file backends on one directory (a trailing "/", a symlink or a
 *     bind mount apart) that one write reaches both of (a mirror or
 *     shield has them under two of its members): every write is made
 *     there twice, an append doubled. Under a mux that writes one member
 *     (round-robin, weighted, failover, sticky-by-key) one directory
 *     twice is a pool of identical copies, and stays allowed;
 *   - a file backend inside another's directory: one shows inside the
 *     other, and what is written there lands in both;
 *   - cache_dir or state_dir inside a file backend, or a backend inside
 *     them: the daemon's own files show in the tree, and the daemon
 *     empties cache_dir/read at start (one run's read cache), so a user's
 *     directory of that name would lose its files;
 *   - a file backend that holds the mount point (the mount would show
 *     inside itself) or lies under it, and cache_dir or state_dir under
 *     the mount point (the daemon would write through its own mount); at
 *     run time (reload, add), a file backend under the mount point by
 *     its path (smux_config_check_under_mount: nothing under the mount
 *     point is looked up).
 *
 * Directories are compared by identity (st_dev, st_ino) of each one and
 * its parents, so no spelling of a path hides an overlap. A directory
 * that does not exist yet (cache_dir, state_dir) is placed by its nearest
 * existing parent. A path that cannot be opened at all is left to what
 * opens it (the backend's own error names it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/config_internal.h"
#include "smux/mux.h"

/* How many directories above a path are looked at (deeper: not compared
 * beyond this; PATH_MAX allows 2048 one-letter levels). */
#define DIRS_CHAIN_MAX 2048

enum dir_kind { D_BACKEND, D_CACHE, D_STATE, D_MOUNT };

struct dir_id {
	dev_t dev;
	ino_t ino;
};

struct dir {
	enum dir_kind kind;
	const struct smux__cfg_section *sec; /* a backend's */
	char label[128]; /* "[backend a] path", "[mount] cache_dir" */
	const char *path;
	int line;    /* of the key (0: -o, a default, the command line) */
	bool fresh;  /* compared with all; others only with fresh ones */
	bool exists; /* chain[0] is the directory itself */
	unsigned n;  /* 0: could not be placed, not compared */
	struct dir_id *chain; /* the directory (or nearest parent) upwards */
};

struct dirs {
	const struct smux_config *cfg;
	const struct smux_config_added *added; /* NULL: the whole tree */
	const struct smux__cfg_section *added_sec;
	struct dir *d;
	unsigned n, cap;
	const struct smux__cfg_section **seen; /* sections collected */
	unsigned n_seen, cap_seen;
};

/* The identities of @d's directory and every parent up to "/". */
static int place(struct dir *d)
{
	char buf[PATH_MAX];
	struct stat st;
	int fd, up;

	if (snprintf(buf, sizeof(buf), "%s", d->path) >= (int)sizeof(buf))
		return 0;
	d->exists = true;
	while ((fd = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		char *slash = strrchr(buf, '/');

		if (errno != ENOENT || !slash)
			return 0;
		while (slash > buf && slash[-1] == '/')
			slash--;
		if (slash == buf)
			slash++; /* "/x" -> "/" (shorter at each turn) */
		*slash = '\0';
		d->exists = false;
	}
	d->chain = calloc(DIRS_CHAIN_MAX, sizeof(*d->chain));
	if (!d->chain) {
		close(fd);
		return -ENOMEM;
	}
	while (d->n < DIRS_CHAIN_MAX && fstat(fd, &st) == 0) {
		/* ".." of "/" is "/" itself */
		if (d->n && d->chain[d->n - 1].dev == st.st_dev &&
		    d->chain[d->n - 1].ino == st.st_ino)
			break;
		d->chain[d->n].dev = st.st_dev;
		d->chain[d->n++].ino = st.st_ino;
		up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (up < 0)
			break;
		close(fd);
		fd = up;
	}
	close(fd);
	return 0;
}

static int add_dir(struct dirs *ds, enum dir_kind kind,
		   const struct smux__cfg_section *sec, const char *label,
		   const char *path, int line, bool fresh)
{
	struct dir *d;

	if (!path)
		return 0;
	if (ds->n == ds->cap) {
		unsigned cap = ds->cap ? 2 * ds->cap : 8;
		struct dir *nd = realloc(ds->d, cap * sizeof(*nd));

		if (!nd)
			return -ENOMEM;
		ds->d = nd;
		ds->cap = cap;
	}
	d = &ds->d[ds->n++];
	memset(d, 0, sizeof(*d));
	d->kind = kind;
	d->sec = sec;
	snprintf(d->label, sizeof(d->label), "%s", label);
	d->path = path;
	d->line = line;
	d->fresh = fresh;
	return place(d);
}

static bool seen(struct dirs *ds, const struct smux__cfg_section *s)
{
	for (unsigned i = 0; i < ds->n_seen; i++)
		if (ds->seen[i] == s)
			return true;
	if (ds->n_seen == ds->cap_seen) {
		unsigned cap = ds->cap_seen ? 2 * ds->cap_seen : 16;
		const struct smux__cfg_section **n =
			realloc(ds->seen,
				cap * sizeof(const struct smux__cfg_section *));

		if (!n)
			return true; /* not collected: fewer checks, no harm */
		ds->seen = n;
		ds->cap_seen = cap;
	}
	ds->seen[ds->n_seen++] = s;
	return false;
}

/* The file backends of @s and below (muxes, faulty wrappers), once each. */
static int add_tree(struct dirs *ds, const struct smux__cfg_section *s,
		    bool fresh)
{
	char label[128];
	int rc = 0;

	if (!s || seen(ds, s))
		return 0;
	if (s->kind == SMUX__CFG_MUX) {
		for (unsigned i = 0; i < s->n_members && !rc; i++)
			if (s->member_secs)
				rc = add_tree(ds, s->member_secs[i], fresh);
		return rc;
	}
	if (s->kind != SMUX__CFG_BACKEND)
		return 0;
	switch ((enum smux__cfg_type)s->v[SMUX__BK_TYPE].i) {
	case SMUX__CFG_T_FAULTY:
		return add_tree(ds, s->wraps_sec, fresh);
	case SMUX__CFG_T_FILE:
		snprintf(label, sizeof(label), "[backend %s] path", s->name);
		return add_dir(ds, D_BACKEND, s, label, s->v[SMUX__BK_PATH].s,
			       s->v[SMUX__BK_PATH].line, fresh);
	default:
		return 0;
	}
}

/* True when @in is @out or lies below it. */
static bool within(const struct dir *in, const struct dir *out)
{
	if (!in->n || !out->n || !out->exists)
		return false;
	for (unsigned i = 0; i < in->n; i++)
		if (in->chain[i].dev == out->chain[0].dev &&
		    in->chain[i].ino == out->chain[0].ino)
			return true;
	return false;
}

static bool same(const struct dir *a, const struct dir *b)
{
	return a->exists && within(a, b) &&
	       a->chain[0].dev == b->chain[0].dev &&
	       a->chain[0].ino == b->chain[0].ino;
}

/* True when @t is @s or below it (members, a faulty's wrapped one). */
static bool under(const struct smux__cfg_section *s,
		  const struct smux__cfg_section *t, unsigned depth)
{
	if (s == t)
		return true;
	if (!s || depth > SMUX__CFG_CHAIN_MAX)
		return false;
	if (s->kind == SMUX__CFG_MUX) {
		for (unsigned i = 0; i < s->n_members && s->member_secs; i++)
			if (under(s->member_secs[i], t, depth + 1))
				return true;
		return false;
	}
	return s->kind == SMUX__CFG_BACKEND &&
	       s->v[SMUX__BK_TYPE].i == SMUX__CFG_T_FAULTY &&
	       under(s->wraps_sec, t, depth + 1);
}

/* The muxes of the tree being checked: reachable from the root, or (for
 * `add`) running or part of what is added. */
static bool in_check(const struct dirs *ds, const struct smux__cfg_section *m)
{
	if (!ds->added)
		return m->used;
	return (ds->added->running &&
		ds->added->running(m->name, ds->added->arg)) ||
	       under(ds->added_sec, m, 0);
}

/* True when one write can reach both backends @a and @b: a mirror or
 * shield has them under two different members (or `add` puts one beside
 * the running tree under such a mux). */
static bool written_together(const struct dirs *ds, const struct dir *a,
			     const struct dir *b)
{
	const struct smux_config *cfg = ds->cfg;

	if (ds->added && ds->added->replicated && a->fresh != b->fresh)
		return true;
	for (unsigned k = 0; k < cfg->n_secs; k++) {
		const struct smux__cfg_section *m = cfg->secs[k];

		if (m->kind != SMUX__CFG_MUX || !m->member_secs ||
		    (m->v[SMUX__XK_MODE].i != SMUX_MODE_MIRROR &&
		     m->v[SMUX__XK_MODE].i != SMUX_MODE_SHIELD) ||
		    !in_check(ds, m))
			continue;
		for (unsigned i = 0; i < m->n_members; i++)
			for (unsigned j = 0; j < m->n_members; j++)
				if (i != j &&
				    under(m->member_secs[i], a->sec, 0) &&
				    under(m->member_secs[j], b->sec, 0))
					return true;
	}
	return false;
}

/* What an overlap of @in inside @out would do. */
static const char *harm(const struct dir *in, const struct dir *out)
{
	if (in->kind == D_BACKEND && out->kind == D_BACKEND)
		return same(in, out) ? "every write would be made there twice"
				     : "one would show inside the other and "
				       "what is written there land in both";
	if (out->kind == D_MOUNT)
		return in->kind == D_BACKEND
			       ? "the mount would hide it"
			       : "the daemon would write through its own "
				 "mount";
	if (in->kind == D_MOUNT)
		return "the mount would show inside itself";
	if (out->kind == D_BACKEND)
		return "the daemon's own files would show in the tree (and a "
		       "directory of the tree be taken for its own)";
	return "the daemon deletes what it finds in its own directories";
}

/* "PATH:LINE: [backend b] path: /x is inside [backend a] path /y (line
 * 12): reason"; the line is @in's (the mount point has none: @out's). */
static int refuse(const struct smux_config *cfg, const struct dir *in,
		  const struct dir *out, char *errbuf, size_t errlen)
{
	char where[32] = "";
	const struct dir *subject = in->kind == D_MOUNT ? out : in;
	const struct dir *other = subject == in ? out : in;
	const char *rel;

	if (other->line > 0)
		snprintf(where, sizeof(where), " (line %d)", other->line);
	if (subject == out)
		rel = "holds";
	else if (same(in, out))
		rel = "is the directory of";
	else if (out->kind == D_MOUNT)
		rel = "is under";
	else
		rel = "is inside";
	return smux__cfg_errorf(errbuf, errlen, cfg->path, subject->line,
				"%s: %s %s %s %s%s: %s", subject->label,
				subject->path, rel, other->label, other->path,
				where, harm(in, out));
}

/*
 * Whether @in lying inside @out (or being it) is refused: a backend in a
 * backend, under the mount point, in the daemon's directories; the mount
 * point in a backend; the daemon's directories in a backend or under the
 * mount point (cache_dir beside state_dir is fine, and so is a mount
 * point in either). Pairs of two entries that ran together before (not
 * @fresh: `add` compares only what it adds) are not compared again.
 */
static bool refused_pair(const struct dirs *ds, const struct dir *in,
			 const struct dir *out)
{
	if (!in->fresh && !out->fresh)
		return false;
	if (in->kind == D_BACKEND && out->kind == D_BACKEND && same(in, out))
		return written_together(ds, in, out);
	if (in->kind == D_BACKEND)
		return true;
	return out->kind == D_BACKEND ||
	       (in->kind != D_MOUNT && out->kind == D_MOUNT);
}

/* Of two entries on one directory (each refused inside the other), the
 * one the message names: a daemon's directory or the mount point before
 * a backend, else the later one. */
static bool named_first(const struct dirs *ds, unsigned i, unsigned j)
{
	const struct dir *a = &ds->d[i], *b = &ds->d[j];

	if ((a->kind == D_BACKEND) != (b->kind == D_BACKEND))
		return a->kind != D_BACKEND;
	return i > j;
}

/* The first overlap, in this order: of backends, with the mount point,
 * with the daemon's directories. */
static int find_overlap(const struct smux_config *cfg, const struct dirs *ds,
			char *errbuf, size_t errlen)
{
	for (int pass = 0; pass < 3; pass++)
		for (unsigned i = 0; i < ds->n; i++)
			for (unsigned j = 0; j < ds->n; j++) {
				const struct dir *a = &ds->d[i], *b = &ds->d[j];
				int which = a->kind == D_BACKEND &&
							    b->kind == D_BACKEND
						    ? 0
					    : a->kind == D_MOUNT ||
							    b->kind == D_MOUNT
						    ? 1
						    : 2;

				if (i == j || which != pass || !within(a, b) ||
				    !refused_pair(ds, a, b) ||
				    (same(a, b) && refused_pair(ds, b, a) &&
				     named_first(ds, j, i)))
					continue;
				return refuse(cfg, a, b, errbuf, errlen);
			}
	return 0;
}

/* The line of [mount] @key when it gave @value (not -o, not a default). */
static int mount_line(const struct smux_config *cfg, int key, const char *value)
{
	const struct smux__cfg_value *v =
		cfg->mount ? &cfg->mount->v[key] : NULL;

	return v && v->line && v->s && value && strcmp(v->s, value) == 0
		       ? v->line
		       : 0;
}

/* True when @a is @mnt or below it (both resolved, no "//"). */
static bool is_or_under(const char *a, const char *mnt)
{
	size_t n = strlen(mnt);

	if (n == 1) /* "/" */
		return true;
	return strncmp(a, mnt, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

/* Symlinks followed at most while resolving one path (as the kernel). */
#define UNDER_HOPS_MAX 40

/*
 * True when the absolute @path names @mnt or a place under it: resolved
 * component by component, a symlink read where it lies (lstat, readlink)
 * and only outside @mnt, so nothing under the mount is looked up. A path
 * with a missing part is compared as written; one whose symlinks cannot
 * be resolved (a loop, an unreadable link) counts as under @mnt.
 */
static bool path_under(const char *path, const char *mnt)
{
	char cur[PATH_MAX] = "", rest[PATH_MAX], cand[PATH_MAX];
	char target[PATH_MAX], next[PATH_MAX];
	unsigned hops = 0;
	const char *p;

	if (path[0] != '/' ||
	    snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
		return false;
	p = rest;
	while (*p) {
		size_t n;
		struct stat st;
		ssize_t t;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 0)
			break;
		if (n == 1 && p[0] == '.') {
			p += n;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			char *s = strrchr(cur, '/');

			if (s)
				*s = '\0';
			p += n;
			continue;
		}
		if (snprintf(cand, sizeof(cand), "%s/%.*s", cur, (int)n, p) >=
		    (int)sizeof(cand))
			return false;
		p += n;
		if (is_or_under(cand, mnt))
			return true;
		if (lstat(cand, &st) == 0 && S_ISLNK(st.st_mode)) {
			/* one that cannot be resolved here is not followed by
			 * the kernel either: refused (it could lead below) */
			if (hops++ >= UNDER_HOPS_MAX)
				return true;
			t = readlink(cand, target, sizeof(target) - 1);
			if (t <= 0)
				return true;
			target[t] = '\0';
			if (snprintf(next, sizeof(next), "%s/%s", target, p) >=
			    (int)sizeof(next))
				return false;
			memcpy(rest, next, sizeof(rest));
			p = rest;
			if (target[0] == '/')
				cur[0] = '\0';
			continue;
		}
		memcpy(cur, cand, sizeof(cur));
	}
	return is_or_under(cur[0] ? cur : "/", mnt);
}

/* smux_config_check_under_mount over @s and below it. */
static int under_mount_tree(const struct smux_config *cfg,
			    const struct smux__cfg_section *s, const char *mnt,
			    unsigned depth, char *errbuf, size_t errlen)
{
	int rc = 0;

	if (!s || depth > SMUX__CFG_CHAIN_MAX)
		return 0;
	if (s->kind == SMUX__CFG_MUX) {
		for (unsigned i = 0; i < s->n_members && s->member_secs && !rc;
		     i++)
			rc = under_mount_tree(cfg, s->member_secs[i], mnt,
					      depth + 1, errbuf, errlen);
		return rc;
	}
	if (s->kind != SMUX__CFG_BACKEND)
		return 0;
	if (s->v[SMUX__BK_TYPE].i == SMUX__CFG_T_FAULTY)
		return under_mount_tree(cfg, s->wraps_sec, mnt, depth + 1,
					errbuf, errlen);
	if (s->v[SMUX__BK_TYPE].i != SMUX__CFG_T_FILE ||
	    !s->v[SMUX__BK_PATH].s || !path_under(s->v[SMUX__BK_PATH].s, mnt))
		return 0;
	return smux__cfg_errorf(
		errbuf, errlen, cfg->path, s->v[SMUX__BK_PATH].line,
		"[backend %s] path: %s is under the mount point "
		"%s: the daemon would write through its own "
		"mount",
		s->name, s->v[SMUX__BK_PATH].s, mnt);
}

int smux_config_check_paths(const struct smux_config *cfg, char *errbuf,
			    size_t errlen)
{
	for (unsigned i = 0; i < cfg->n_secs; i++) {
		const struct smux__cfg_section *s = cfg->secs[i];
		const char *path = s->v[SMUX__BK_PATH].s;
		int fd;

		if (s->kind != SMUX__CFG_BACKEND || !s->used ||
		    s->v[SMUX__BK_TYPE].i != SMUX__CFG_T_FILE || !path)
			continue;
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			continue;
		}
		return smux__cfg_errorf(errbuf, errlen, cfg->path,
					s->v[SMUX__BK_PATH].line,
					"[backend %s] path: %s: %s", s->name,
					path, strerror(errno));
	}
	return 0;
}

int smux_config_check_under_mount(const struct smux_config *cfg,
				  const char *added, const char *mnt,
				  char *errbuf, size_t errlen)
{
	int rc = 0;

	if (!mnt || !mnt[0])
		return 0;
	if (added)
		return under_mount_tree(cfg, smux__cfg_find(cfg, added), mnt, 0,
					errbuf, errlen);
	for (unsigned i = 0; i < cfg->n_secs && !rc; i++)
		if (cfg->secs[i]->used)
			rc = under_mount_tree(cfg, cfg->secs[i], mnt, 0, errbuf,
					      errlen);
	return rc;
}

int smux_config_check_dirs(const struct smux_config *cfg,
			   const struct smux_config_added *added,
			   const char *mountpoint, char *errbuf, size_t errlen)
{
	int cache_line =
		mount_line(cfg, SMUX__MK_CACHE_DIR, cfg->opts.cache_dir);
	int state_line =
		mount_line(cfg, SMUX__MK_STATE_DIR, cfg->opts.state_dir);
	struct dirs ds = {.cfg = cfg, .added = added};
	int rc;

	/* the daemon's directories first: of equal ones, they are named */
	rc = add_dir(&ds, D_CACHE, NULL,
		     cache_line ? "[mount] cache_dir" : "cache_dir",
		     cfg->opts.cache_dir, cache_line, !added);
	if (!rc)
		rc = add_dir(&ds, D_STATE, NULL,
			     state_line ? "[mount] state_dir" : "state_dir",
			     cfg->opts.state_dir, state_line, !added);
	if (!rc)
		rc = add_dir(&ds, D_MOUNT, NULL, "the mount point", mountpoint,
			     0, !added);
	if (added)
		ds.added_sec = smux__cfg_find(cfg, added->name);
	if (!rc && added)
		rc = add_tree(&ds, ds.added_sec, true);
	for (unsigned i = 0; i < cfg->n_secs && !rc; i++) {
		const struct smux__cfg_section *s = cfg->secs[i];

		if (s->kind == SMUX__CFG_MOUNT || !s->name)
			continue;
		if (added ? added->running &&
				    added->running(s->name, added->arg)
			  : s->used)
			rc = add_tree(&ds, s, !added);
	}
	if (!rc)
		rc = find_overlap(cfg, &ds, errbuf, errlen);
	else
		smux__cfg_errorf(errbuf, errlen, cfg->path, 0, "out of memory");
	for (unsigned i = 0; i < ds.n; i++)
		free(ds.d[i].chain);
	free(ds.d);
	free(ds.seen);
	return rc;
}
