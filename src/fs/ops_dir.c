/* SPDX-License-Identifier: MIT */
/*
 * ops_dir.c - FUSE directory handles: opendir, readdir, releasedir.
 *
 * A listing is taken once per handle (at the first readdir, or again when
 * a program rewinds to offset 0) into a snapshot of names and attributes,
 * and handed to the kernel in pieces with real offsets. That "offset mode"
 * of the high-level libfuse API is what lets READDIRPLUS carry node ids,
 * so `ls -l` gets every entry's attributes from the listing instead of one
 * LOOKUP request per entry (notes/fuse-performance-here.md, item 6).
 *
 * Files open through the mount and not committed yet appear with their
 * pending attributes (ofile.c); the root shows the virtual .smux/. On
 * object stores a whole listing's names become the directory's known
 * names (dirnames.c): a lookup of any other name costs no request.
 *
 * An open directory handle follows its directory: a rename of it (or of
 * a directory above it) moves the handle's path, and a removal (rmdir, a
 * rename over it) leaves a handle that lists nothing, as a descriptor of
 * a local directory does (libfuse gives these calls no path: fh->path is
 * the handle's own, kept in the table below).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"

/* One entry of a listing snapshot. */
struct smuxfs_dirent {
	char *name;
	struct stat st;
	bool plus; /* st is complete: the kernel may cache it */
	/* the listing had no type and mode for it (S3, Swift): its
	 * attributes are asked for (listattr.c); is_dir: a directory */
	bool ask, is_dir;
};

/* The open directory handles: their paths change under this lock. */
static pthread_mutex_t dirfh_lock = PTHREAD_MUTEX_INITIALIZER;
static struct smuxfs_fh *dirfh_head;

/* A copy of the path of directory handle @fh (NULL: its directory is
 * gone, or no memory: *gone says which). */
static char *dirfh_path(struct smuxfs_fh *fh, bool *gone)
{
	char *p;

	pthread_mutex_lock(&dirfh_lock);
	*gone = !fh->path;
	p = fh->path ? strdup(fh->path) : NULL;
	pthread_mutex_unlock(&dirfh_lock);
	return p;
}

/*
 * The path a call on directory handle @fh works on: its own (a copy in
 * *@own, freed by the caller) or, without a handle, @path. 1 when the
 * handle's directory was removed (the call has nothing to do), 0, or a
 * negative errno.
 */
static int dirfh_use(struct smuxfs_fh *fh, const char **path, char **own)
{
	bool gone;

	*own = NULL;
	if (fh) {
		*own = dirfh_path(fh, &gone);
		if (gone)
			return 1;
		if (!*own)
			return -ENOMEM;
		*path = *own;
	}
	return *path ? 0 : -ESTALE;
}

/* @path names @dir or a path below it: the length of @dir, else 0. */
static size_t under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strncmp(path, dir, n) != 0 || (path[n] && path[n] != '/'))
		return 0;
	return n;
}

void smuxfs_dirfh_renamed(const char *from, const char *to)
{
	pthread_mutex_lock(&dirfh_lock);
	for (struct smuxfs_fh *fh = dirfh_head; fh; fh = fh->dnext) {
		size_t n = fh->path ? under(fh->path, from) : 0;
		char *moved;

		if (!n)
			continue;
		if (asprintf(&moved, "%s%s", to, fh->path + n) < 0)
			continue; /* keeps the old path: lists what is there */
		free(fh->path);
		fh->path = moved;
	}
	pthread_mutex_unlock(&dirfh_lock);
}

void smuxfs_dirfh_exchanged(const char *a, const char *b)
{
	pthread_mutex_lock(&dirfh_lock);
	for (struct smuxfs_fh *fh = dirfh_head; fh; fh = fh->dnext) {
		size_t na = fh->path ? under(fh->path, a) : 0;
		size_t nb = (fh->path && !na) ? under(fh->path, b) : 0;
		char *moved;

		if (!na && !nb)
			continue;
		if (asprintf(&moved, "%s%s", na ? b : a,
			     fh->path + (na ? na : nb)) < 0)
			continue; /* keeps the old path: lists what is there */
		free(fh->path);
		fh->path = moved;
	}
	pthread_mutex_unlock(&dirfh_lock);
}

void smuxfs_dirfh_removed(struct smuxfs *fs, const char *path,
			  const struct smux_info *was)
{
	pthread_mutex_lock(&dirfh_lock);
	for (struct smuxfs_fh *fh = dirfh_head; fh; fh = fh->dnext) {
		if (fh->path && strcmp(fh->path, path) == 0) {
			free(fh->path);
			fh->path = NULL;
			smuxfs_fnode_dir_gone(fs, fh, was);
		}
	}
	pthread_mutex_unlock(&dirfh_lock);
}

bool smuxfs_dirfh_open(const char *path)
{
	bool open = false;

	pthread_mutex_lock(&dirfh_lock);
	for (struct smuxfs_fh *fh = dirfh_head; fh && !open; fh = fh->dnext)
		open = fh->path && strcmp(fh->path, path) == 0;
	pthread_mutex_unlock(&dirfh_lock);
	return open;
}

/* A directory handle's listing, taken at offset 0. */
struct smuxfs_dirsnap {
	struct smuxfs_dirent *e;
	size_t n, cap;
	unsigned long mutations; /* fs->mutations when it was taken */
};

static void snap_free(struct smuxfs_dirsnap *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->e[i].name);
	free(s->e);
	free(s);
}

/* Appends an entry; -ENOMEM. */
static int snap_add(struct smuxfs_dirsnap *s, const char *name,
		    const struct stat *st, bool plus)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct smuxfs_dirent *e = realloc(s->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		s->e = e;
		s->cap = cap;
	}
	s->e[s->n].name = strdup(name);
	if (!s->e[s->n].name)
		return -ENOMEM;
	s->e[s->n].st = *st;
	s->e[s->n].plus = plus;
	s->e[s->n].ask = false;
	s->e[s->n].is_dir = false;
	s->n++;
	return 0;
}

/* Names already passed to the filler, so each appears once. */
struct nameset {
	char **slot;
	size_t cap, n;
};

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* 1 when added, 0 when already there, -ENOMEM. */
static int nameset_add(struct nameset *ns, const char *name)
{
	size_t i;

	if (2 * (ns->n + 1) > ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 64;
		char **slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return -ENOMEM;
		for (size_t j = 0; j < ns->cap; j++) {
			if (!ns->slot[j])
				continue;
			i = name_hash(ns->slot[j]) & (cap - 1);
			while (slot[i])
				i = (i + 1) & (cap - 1);
			slot[i] = ns->slot[j];
		}
		free(ns->slot);
		ns->slot = slot;
		ns->cap = cap;
	}
	i = name_hash(name) & (ns->cap - 1);
	for (; ns->slot[i]; i = (i + 1) & (ns->cap - 1))
		if (strcmp(ns->slot[i], name) == 0)
			return 0;
	ns->slot[i] = strdup(name);
	if (!ns->slot[i])
		return -ENOMEM;
	ns->n++;
	return 1;
}

static bool nameset_has(const struct nameset *ns, const char *name)
{
	if (!ns->cap)
		return false;
	for (size_t i = name_hash(name) & (ns->cap - 1); ns->slot[i];
	     i = (i + 1) & (ns->cap - 1))
		if (strcmp(ns->slot[i], name) == 0)
			return true;
	return false;
}

static void nameset_free(struct nameset *ns)
{
	for (size_t i = 0; i < ns->cap; i++)
		free(ns->slot[i]);
	free(ns->slot);
}

/* A file open through the mount in the directory being listed. */
struct pending {
	char *name;
	struct smuxfs_ofile_attr a;
};

struct lister {
	struct smuxfs *fs;
	struct smuxfs_dirsnap *snap;
	const char *prefix; /* the directory's key prefix */
	size_t prefix_len;
	bool is_root;
	struct nameset seen;
	struct pending *pend;
	size_t n_pend, cap_pend;
	unsigned long epoch; /* smuxfs_attrcache_epoch before the listing */
	int64_t t0;	     /* and the time */
	int rc;
};

static void collect_pending(void *arg, const char *name,
			    const struct smuxfs_ofile_attr *a)
{
	struct lister *l = arg;

	if (l->n_pend == l->cap_pend) {
		size_t cap = l->cap_pend ? 2 * l->cap_pend : 8;
		struct pending *p = realloc(l->pend, cap * sizeof(*p));

		if (!p)
			return;
		l->pend = p;
		l->cap_pend = cap;
	}
	l->pend[l->n_pend].name = strdup(name);
	if (!l->pend[l->n_pend].name)
		return;
	l->pend[l->n_pend++].a = *a;
}

static const struct pending *find_pending(const struct lister *l,
					  const char *name)
{
	for (size_t i = 0; i < l->n_pend; i++)
		if (strcmp(l->pend[i].name, name) == 0)
			return &l->pend[i];
	return NULL;
}

/* What is pending over @info (the listed object's: owner, times, or
 * cleared for a file not committed yet). */
static void pending_info(const struct pending *p, struct smux_info *info)
{
	smux_info_set_size(info, p->a.size);
	if (p->a.mode_set || !info->mode)
		info->mode = S_IFREG | p->a.mode;
	info->mtime_ns = p->a.mtime_ns;
	if (p->a.ino_id) /* ls -i as stat shows it (smuxfs_shown_ino) */
		info->file_id = p->a.ino_id;
}

static int list_entry(void *arg, const struct smux_list_entry *e)
{
	struct lister *l = arg;
	char name[SMUX_KEY_MAX + 1];
	enum fuse_fill_dir_flags flags = FUSE_FILL_DIR_PLUS;
	const struct pending *p;
	struct smux_info info;
	size_t len;
	bool is_dir;
	struct stat st;
	int rc;

	if (strncmp(e->key, l->prefix, l->prefix_len) != 0)
		return 0;
	len = strlen(e->key + l->prefix_len);
	if (len == 0 || len >= sizeof(name))
		return 0; /* the directory's own marker */
	memcpy(name, e->key + l->prefix_len, len + 1);
	is_dir = e->is_prefix || name[len - 1] == '/' || S_ISDIR(e->info.mode);
	if (name[len - 1] == '/')
		name[--len] = '\0';
	/* "." and ".." (a key "a/../b" another client stored) name no
	 * entry of their own: the directory lists its own once */
	if (!len || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return 0;
	if (l->is_root && strcmp(name, SMUXFS_DIR_NAME) == 0)
		return 0; /* hidden by the virtual directory */
	if (!is_dir && smuxfs_delq_has(l->fs, e->key))
		return 0; /* unlinked, its delete queued (delq.c) */
	rc = nameset_add(&l->seen, name);
	if (rc <= 0) {
		l->rc = rc;
		return rc < 0;
	}
	info = e->info;
	p = is_dir ? NULL : find_pending(l, name);
	if (p) {
		/* being written: its size moves; the kernel asks for it */
		pending_info(p, &info);
		flags = 0;
	} else if (e->is_prefix || !(info.mode & S_IFMT)) {
		/* no type and mode in the listing (S3, Swift: they are in
		 * each object's metadata): let the kernel look it up */
		flags = 0;
	}
	/* the kernel takes the number as a stat's (inomap.c); the
	 * identity kept below stays the backend's */
	if (!is_dir && !p && flags == FUSE_FILL_DIR_PLUS && info.file_id) {
		struct smux_info shown = info;

		shown.file_id = smuxfs_ino_learn(l->fs, e->key, info.file_id,
						 info.nlink);
		smuxfs_fill_stat(l->fs, &st, is_dir, &shown);
	} else {
		smuxfs_fill_stat(l->fs, &st, is_dir, &info);
	}
	/* a file it gave complete goes to attrcache.c as a HEAD's answer
	 * would, so the open of `cat` or rm's unlink asks nothing either */
	if (!is_dir && !p && flags == FUSE_FILL_DIR_PLUS)
		smuxfs_attrcache_put_listed(l->fs, e->key, &info, l->epoch,
					    l->t0);
	l->rc = snap_add(l->snap, name, &st, flags == FUSE_FILL_DIR_PLUS);
	if (!l->rc && !p && flags != FUSE_FILL_DIR_PLUS) {
		l->snap->e[l->snap->n - 1].ask = true;
		l->snap->e[l->snap->n - 1].is_dir = is_dir;
	}
	return l->rc != 0;
}

static struct smuxfs_fh *dir_fh(struct fuse_file_info *fi)
{
	struct smuxfs_fh *fh = fi ? (struct smuxfs_fh *)fi->fh : NULL;

	return fh && fh->kind == SMUXFS_FH_DIR ? fh : NULL;
}

int smuxfs_opendir(const char *path, struct fuse_file_info *fi)
{
	struct smuxfs_fh *fh;

	if (!path)
		return -ESTALE;
	fh = calloc(1, sizeof(*fh));
	if (!fh)
		return -ENOMEM;
	fh->kind = SMUXFS_FH_DIR;
	fh->path = strdup(path);
	if (!fh->path) {
		free(fh);
		return -ENOMEM;
	}
	/* by its node too (fnode.c): fstat of it once it is removed */
	smuxfs_fnode_add(smuxfs_get(), fh, smuxfs_fnode_cur_nodeid());
	pthread_mutex_lock(&dirfh_lock);
	fh->dnext = dirfh_head;
	if (dirfh_head)
		dirfh_head->dprev = fh;
	dirfh_head = fh;
	pthread_mutex_unlock(&dirfh_lock);
	fi->fh = (uintptr_t)fh;
	return 0;
}

int smuxfs_releasedir(const char *path, struct fuse_file_info *fi)
{
	struct smuxfs_fh *fh = dir_fh(fi);

	(void)path;
	if (fh) {
		snap_free(fh->snap);
		fh->snap = NULL;
		pthread_mutex_lock(&dirfh_lock);
		if (fh->dprev)
			fh->dprev->dnext = fh->dnext;
		else
			dirfh_head = fh->dnext;
		if (fh->dnext)
			fh->dnext->dprev = fh->dprev;
		pthread_mutex_unlock(&dirfh_lock);
	}
	smuxfs_fh_free(smuxfs_get(), (struct smuxfs_fh *)fi->fh);
	fi->fh = 0;
	return 0;
}

/*
 * fsync(2) of a directory: its entries become durable on every member
 * that holds it in the mode's write pattern (smux_backend_sync). mkdir,
 * rename and create pay no directory fsync of their own; this is where a
 * program that wants them durable (a database, git, rsync --fsync) asks.
 */
int smuxfs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = dir_fh(fi);
	char key[SMUX_KEY_MAX + 2], dkey[SMUX_KEY_MAX + 2];
	struct smux_error err;
	struct smux_ctx ctx;
	char *own = NULL;
	int rc;

	(void)datasync;
	rc = dirfh_use(fh, &path, &own);
	if (rc) /* 1: its directory was removed, nothing to store */
		return rc > 0 ? 0 : rc;
	rc = fs->ro || smuxdir_owns(path)
		     ? 1
		     : smuxfs_path_key(fs, path, key, sizeof(key));
	free(own);
	if (rc > 0)
		return 0;
	if (!rc)
		rc = smuxfs_dir_prefix(key, dkey, sizeof(dkey));
	/* an unlink is stored once fsync of its directory returns */
	if (!rc)
		rc = smuxfs_delq_wait(fs, NULL, dkey);
	if (rc)
		return rc;
	smuxfs_ctx(&ctx);
	rc = smux_backend_sync(fs->root, &ctx, dkey, &err);
	return rc ? smuxfs_errno(&err, "fsyncdir", dkey) : 0;
}

/*
 * The entries whose attributes the listing lacked, at most
 * SMUXFS_LISTATTR_MAX, noted for listattr.c: the first lookup of one of
 * them asks them all in parallel. Without memory nothing is noted (each
 * lookup asks its own, as before).
 */
static void snap_note(struct smuxfs *fs, struct smuxfs_dirsnap *snap,
		      const char *prefix)
{
	size_t plen = strlen(prefix), n = 0, cap = 0, nf = 0;
	struct smuxfs_listattr_item *it;
	const char **files;

	for (size_t i = 0; i < snap->n; i++)
		cap += snap->e[i].ask;
	/* the files it gave complete: a later lookup of one that misses
	 * lists the directory again rather than asking it (relist.c) */
	files = smuxfs_attrcache_on(fs) && snap->n &&
				snap->n <= SMUXFS_RELIST_MAX
			? calloc(snap->n, sizeof(*files))
			: NULL;
	for (size_t i = 0; files && i < snap->n; i++)
		if (snap->e[i].plus && !S_ISDIR(snap->e[i].st.st_mode))
			files[nf++] = snap->e[i].name;
	if (files || smuxfs_attrcache_on(fs))
		smuxfs_relist_note(prefix, files, nf);
	free(files);
	if (cap > SMUXFS_LISTATTR_MAX)
		cap = SMUXFS_LISTATTR_MAX;
	if (!cap)
		return;
	it = calloc(cap, sizeof(*it));
	if (!it)
		return;
	for (size_t i = 0; i < snap->n && n < cap; i++) {
		const struct smuxfs_dirent *e = &snap->e[i];
		size_t len = strlen(e->name);

		if (!e->ask || plen + len > SMUX_KEY_MAX)
			continue;
		it[n].key = malloc(plen + len + 1);
		if (!it[n].key)
			break;
		memcpy(it[n].key, prefix, plen);
		memcpy(it[n].key + plen, e->name, len + 1);
		it[n].is_dir = e->is_dir;
		n++;
	}
	smuxfs_listattr_note(fs, prefix, it, n);
}

/* The names of a whole listing @snap of the directory @key, taken from
 * generation @gen at @t0, become its known names (dirnames.c). */
static void snap_known(struct smuxfs *fs, const struct smuxfs_dirsnap *snap,
		       const char *key, unsigned long gen, int64_t t0)
{
	const char **names = calloc(snap->n ? snap->n : 1, sizeof(*names));
	size_t n = 0;

	if (!names)
		return; /* unknown: lookups ask, as before */
	for (size_t i = 0; i < snap->n; i++)
		if (strcmp(snap->e[i].name, ".") != 0 &&
		    strcmp(snap->e[i].name, "..") != 0)
			names[n++] = snap->e[i].name;
	smuxfs_dirnames_install(fs, key, names, n, gen, t0);
	free(names);
}

/* Lists the directory @path into a new snapshot in *@out; @attrs: note
 * the entries whose attributes the listing lacks (listattr.c). */
static int snap_take(struct smuxfs *fs, const char *path, bool attrs,
		     struct smuxfs_dirsnap **out)
{
	char key[SMUX_KEY_MAX + 2], prefix[SMUX_KEY_MAX + 2];
	struct lister l = {.fs = fs};
	struct smux_error err;
	struct smux_ctx ctx;
	struct stat dot;
	unsigned long gen;
	int64_t t0;
	int rc;

	*out = NULL;
	l.is_root = strcmp(path, "/") == 0;
	rc = smuxfs_path_key(fs, path, key, sizeof(key));
	if (!rc)
		rc = smuxfs_dir_prefix(key, prefix, sizeof(prefix));
	if (rc)
		return rc;
	l.snap = calloc(1, sizeof(*l.snap));
	if (!l.snap)
		return -ENOMEM;
	l.snap->mutations = atomic_load(&fs->mutations);
	l.prefix = prefix;
	l.prefix_len = strlen(prefix);
	memset(&dot, 0, sizeof(dot));
	dot.st_mode = S_IFDIR;
	rc = snap_add(l.snap, ".", &dot, false);
	if (!rc)
		rc = snap_add(l.snap, "..", &dot, false);
	if (rc)
		goto out;
	/* before the open files and the listing: a name made meanwhile
	 * keeps this listing from becoming the directory's known names */
	gen = smuxfs_dirnames_gen(fs, key);
	t0 = smuxfs_dirnames_now();
	smuxfs_ofile_each_in(fs, prefix, collect_pending, &l);
	l.epoch = smuxfs_attrcache_epoch(fs);
	l.t0 = smuxfs_dircache_now();
	smuxfs_ctx(&ctx);
	rc = smux_backend_list(fs->root, &ctx, prefix, "/", list_entry, &l,
			       &err);
	if (rc) {
		rc = smuxfs_errno(&err, "list", prefix);
		goto out;
	}
	rc = l.rc;
	if (!rc && attrs)
		snap_note(fs, l.snap, prefix);
	/* created through the mount and not committed yet */
	for (size_t i = 0; i < l.n_pend && !rc; i++) {
		struct smux_info info;
		struct stat st;

		if (nameset_has(&l.seen, l.pend[i].name))
			continue;
		smux_info_clear(&info);
		pending_info(&l.pend[i], &info);
		smuxfs_fill_stat(fs, &st, false, &info);
		rc = snap_add(l.snap, l.pend[i].name, &st, false);
	}
	if (!rc && l.is_root) {
		struct stat st;

		smuxdir_getattr(fs, "/" SMUXFS_DIR_NAME, &st);
		rc = snap_add(l.snap, SMUXFS_DIR_NAME, &st, false);
	}
	if (!rc)
		snap_known(fs, l.snap, key, gen, t0);
out:
	for (size_t i = 0; i < l.n_pend; i++)
		free(l.pend[i].name);
	free(l.pend);
	nameset_free(&l.seen);
	if (rc)
		snap_free(l.snap);
	else
		*out = l.snap;
	return rc;
}

/* readdir of @path (the handle's own). */
static int readdir_path(struct smuxfs *fs, struct smuxfs_fh *fh,
			const char *path, void *buf, fuse_fill_dir_t filler,
			off_t off)
{
	struct smuxfs_dirsnap *snap;
	bool plus_ok;
	int rc;

	if (smuxdir_owns(path))
		return smuxdir_readdir(fs, path, buf, filler);
	if (off < 0)
		return -EINVAL;
	/* libfuse serialises readdir calls on one handle, so the snapshot
	 * needs no lock; without a handle (none is made by us only when
	 * opendir failed) each call lists afresh. */
	snap = fh ? fh->snap : NULL;
	if (!snap || off == 0) {
		struct smuxfs_dirsnap *fresh;

		/* attributes are kept for attr_timeout: with none, asking
		 * them ahead is a request per entry for nothing */
		rc = snap_take(fs, path, fs->opts && fs->opts->attr_timeout > 0,
			       &fresh);
		if (rc)
			return rc;
		snap_free(snap);
		snap = fresh;
		if (fh)
			fh->snap = snap;
	}
	/*
	 * Attributes go out only while nothing changed through the mount
	 * since the snapshot: the kernel applies a later piece's attributes
	 * over what it learnt since (a size cut back under an appending
	 * writer), so after a change the entries go without them and the
	 * kernel looks the names up. Entry i has offset i + 1.
	 */
	plus_ok = atomic_load(&fs->mutations) == snap->mutations;
	for (size_t i = (size_t)off; i < snap->n; i++) {
		const struct smuxfs_dirent *e = &snap->e[i];

		if (filler(buf, e->name, &e->st, (off_t)i + 1,
			   e->plus && plus_ok ? FUSE_FILL_DIR_PLUS : 0))
			break; /* the reply is full: the kernel asks again */
	}
	if (!fh)
		snap_free(snap);
	return 0;
}

int smuxfs_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
		   off_t off, struct fuse_file_info *fi,
		   enum fuse_readdir_flags rflags)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = dir_fh(fi);
	char *own = NULL;
	int rc;

	(void)rflags;
	rc = dirfh_use(fh, &path, &own);
	if (rc) /* 1: its directory was removed, it lists nothing */
		return rc > 0 ? 0 : rc;
	rc = readdir_path(fs, fh, path, buf, filler, off);
	free(own);
	return rc;
}
