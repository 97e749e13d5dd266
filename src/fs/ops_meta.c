/* SPDX-License-Identifier: MIT */
/*
 * ops_meta.c - FUSE operations on names and attributes: getattr, mkdir,
 * rmdir, unlink, rename (files and directory walks), chmod, chown,
 * utimens, statfs, mknod (files, FIFOs, sockets), symlink, readlink and
 * link. Listings are in ops_dir.c.
 *
 * Directories follow DESIGN section 6: real directories on file backends,
 * "dir/" marker objects plus directories implied by key prefixes on
 * object stores. Files open through the mount and not yet committed show
 * up through the open-file table (ofile.c). Never touches open-file
 * content (ops_io.c does).
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <time.h>

#include "fs/fs.h"

#define PIB (1024ull * 1024 * 1024 * 1024 * 1024)

/* Maps @path to @key; "/" sets *@is_root. Refuses .smux/ paths with
 * @smux_errno (0: let them through). */
static int key_of(struct smuxfs *fs, const char *path, char *key, size_t cap,
		  bool *is_root)
{
	if (is_root)
		*is_root = path && strcmp(path, "/") == 0;
	return smuxfs_path_key(fs, path, key, cap);
}

/* The checks every modifying operation starts with. */
static int may_modify(struct smuxfs *fs, const char *path)
{
	if (path && smuxdir_owns(path))
		return -EPERM;
	if (fs->ro)
		return -EROFS;
	return 0;
}

/* ---- getattr ---- */

/*
 * Attributes of an open file from its pending content: the size, mode and
 * mtime it has now; owner and times from the object while it still has
 * its name @key (NULL: none). A deleted one (its name unlinked or
 * replaced) has no name: nothing looked up, the names its file has left
 * (0 unless it has other hard links) and what was set through its
 * descriptors since, as a local filesystem shows a file unlinked while
 * open. @fh: the handle asking, NULL for the current request's node.
 */
static int getattr_ofile(struct smuxfs *fs, struct smuxfs_ofile *of,
			 const char *key, struct smuxfs_fh *fh, struct stat *st)
{
	struct smuxfs_ofile_attr a = {0};
	struct smux_info info;
	bool is_dir = false;
	uint32_t links = 0;
	int rc;

	rc = smuxfs_ofile_attr(of, &a);
	if (rc)
		return rc;
	if (a.deleted || !key ||
	    smuxfs_lookup_open(fs, key, of, &a, &is_dir, &info) != 0 ||
	    is_dir) {
		smux_info_clear(&info);
		info.size = a.size;
		if (a.size_stored && a.has_blocks) { /* its writer's stat */
			info.blocks = a.blocks;
			info.has_blocks = true;
		}
	} /* else the size smuxfs_lookup gives an open file */
	if (info.file_id)
		smuxfs_ofile_set_file_id(of, info.file_id);
	else
		info.file_id = a.file_id; /* its inode number stays */
	/* the name's number once it is closed too (inomap.c: tar -x checks
	 * a placeholder's number from its fstat against an lstat at the
	 * end, git a new object's against its link's) */
	if (key && info.file_id)
		smuxfs_ino_shows(
			fs, key, info.file_id,
			a.ino_id ? a.ino_id
				 : smuxfs_ino_alias(info.file_id, info.nlink),
			info.nlink);
	if (a.ino_id) /* shown, not kept: of->file_id stays the backend's */
		info.file_id = a.ino_id;
	if (a.mode_set || !info.mode)
		info.mode = S_IFREG | a.mode;
	info.mtime_ns = a.mtime_ns;
	if (a.has_owner) { /* SMUX_ID_NONE: the object's */
		if (a.uid != SMUX_ID_NONE)
			info.uid = a.uid;
		if (a.gid != SMUX_ID_NONE)
			info.gid = a.gid;
		info.has_owner = true;
	}
	if (a.deleted || !key) {
		links = smuxfs_fnode_gone_info(fs, fh, &info);
		/* the open file's size is the file's now: not the size a
		 * writer that closed left to the node's readers, which
		 * gone_info may have found first (posix_diff seed 32) */
		smux_info_set_size(&info, a.size);
	}
	smuxfs_fill_stat(fs, st, false, &info);
	if (a.deleted || !key)
		st->st_nlink = links;
	return 0;
}

/* fstat of an open file whose name is gone: the kernel asks without the
 * handle, the channel hook (fnode.c) gave it handle 0. */
static int getattr_orphan(struct smuxfs *fs, struct stat *st)
{
	struct smuxfs_ofile *of;
	struct smux_info info;
	uint32_t links;
	int rc;

	rc = smuxfs_fnode_orphan(fs, &of, &info);
	if (rc)
		return rc;
	if (of) {
		rc = getattr_ofile(fs, of, NULL, NULL, st);
		smuxfs_ofile_release(fs, of);
		return rc;
	}
	links = smuxfs_fnode_gone_info(fs, NULL, &info);
	smuxfs_fill_stat(fs, st, S_ISDIR(info.mode), &info);
	st->st_nlink = links;
	return 0;
}

/* The attributes of an open file whose name went (@info: fstat of its
 * descriptor, the names it has left included). */
static int fill_behind(struct smuxfs *fs, const struct smux_info *info,
		       struct stat *st)
{
	smuxfs_fill_stat(fs, st, false, info);
	st->st_nlink = info->nlink;
	return 0;
}

/* fstat (GETATTR by path) of an open file whose name is not found: what
 * its open handles know (smuxfs_fnode_behind), else ENOENT. */
static int getattr_behind(struct smuxfs *fs, struct stat *st)
{
	struct smuxfs_ofile *of;
	struct smux_info info;
	int rc;

	if (smuxfs_fnode_behind(fs, &of, &info) != 0)
		return -ENOENT;
	if (of) {
		rc = getattr_ofile(fs, of, NULL, NULL, st);
		smuxfs_ofile_release(fs, of);
		return rc;
	}
	return fill_behind(fs, &info, st);
}

/*
 * The root's link count as a local directory's: 2, its subdirectories and
 * .smux, where the tree can count them (a local directory: statfs of the
 * root says, no listing); 2 otherwise, as every directory of an object
 * store shows.
 */
static nlink_t root_nlink(struct smuxfs *fs)
{
	struct smux_statfs s;
	struct smux_error err;
	struct smux_ctx ctx;

	smuxfs_ctx(&ctx);
	if (smux_backend_statfs(fs->root, &ctx, &s, &err) || !s.has_root_dirs)
		return 2;
	return (nlink_t)(2 + s.root_dirs + 1);
}

int smuxfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smuxfs_fh *fh = fi ? (struct smuxfs_fh *)fi->fh : NULL;
	char key[SMUX_KEY_MAX + 2];
	struct smux_info info;
	bool is_dir, is_root = false, gone = false;
	int rc;

	smuxfs_raise_readahead(fs);
	if (fh && fh->kind == SMUXFS_FH_VIRTUAL) {
		smuxfs_fill_stat(fs, st, false, NULL);
		st->st_mode = S_IFREG | (fh->ctl ? 0600 : 0444);
		st->st_size = fh->ev_stream ? (off_t)smuxfs_eventlog_size(fs)
					    : (off_t)fh->len;
		return 0;
	}
	if (fh && fh->kind == SMUXFS_FH_FILE && fh->of) {
		/* the open file itself: renamed or unlinked, it is still
		 * there for its handles */
		rc = smuxfs_fh_key(fs, fh, key, sizeof(key));
		return getattr_ofile(fs, fh->of, rc ? NULL : key, fh, st);
	} else if (fh && fh->kind == SMUXFS_FH_FILE && fh->reader &&
		   atomic_load(&fh->unlinked)) {
		/* unlinked while open: the handle still reads what it
		 * opened, as on a local filesystem, and what a writer of
		 * the same file wrote since (as it reads, ops_io.c) */
		struct smuxfs_ofile *of = smuxfs_fnode_ofile(fs, fh);

		if (of) {
			rc = getattr_ofile(fs, of, NULL, fh, st);
			smuxfs_ofile_release(fs, of);
			return rc;
		}
		is_dir = false;
		/* its file as it is now (a local reader: fstat) */
		(void)smux_reader_stat(fh->reader, &info);
		gone = true;
		rc = 0;
	} else if (fh && fh->kind == SMUXFS_FH_FILE) {
		struct smux_info mine;

		rc = smuxfs_fh_key(fs, fh, key, sizeof(key));
		/* written through the mount since its open: it reads what
		 * the name holds now, so it says what that is (below) */
		if (rc == 0)
			smuxfs_fh_repin(fs, fh, key);
		if (rc == 0)
			rc = smuxfs_lookup(fs, key, false, &is_dir, &info);
		/* its name went behind the mount (or in a rename racing
		 * this handle's open): a local reader still has its file */
		if (rc == -ENOENT && fh->reader && fh->reader->live &&
		    smux_reader_stat(fh->reader, &info) == 0)
			return fill_behind(fs, &info, st);
		/* ... or names another file now (renamed over behind the
		 * mount): this handle's attributes are its own file's, as
		 * fstat of a local descriptor (the kernel asks them with the
		 * handle before a read past the size it knew; the new file's
		 * size cut the reader's reads at it, s44-t1) */
		if (rc == 0 && fh->reader && fh->reader->live &&
		    !atomic_load(&fh->reader_off) && info.file_id &&
		    fh->reader->info.file_id &&
		    info.file_id != fh->reader->info.file_id &&
		    smux_reader_stat(fh->reader, &mine) == 0 &&
		    mine.nlink == 0 && mine.has_times)
			return fill_behind(fs, &mine, st);
	} else {
		if (!path && fi && !fh) {
			/* nameless, unless its file kept the name */
			if (smuxfs_fnode_named_key(fs, key, sizeof(key)))
				return getattr_orphan(fs, st);
		} else {
			if (!path)
				return -ESTALE;
			if (smuxdir_owns(path))
				return smuxdir_getattr(fs, path, st);
			rc = key_of(fs, path, key, sizeof(key), &is_root);
			if (rc)
				return rc;
		}
		rc = smuxfs_lookup(fs, key, is_root, &is_dir, &info);
		if (rc == -ENOENT && !is_root)
			return getattr_behind(fs, st);
	}
	if (rc)
		return rc;
	if (gone) {
		uint32_t links = smuxfs_fnode_gone_info(fs, fh, &info);

		smuxfs_fill_stat(fs, st, false, &info);
		st->st_nlink = links;
		return 0;
	}
	if (!is_dir && !is_root)
		smuxfs_shown_ino(fs, key, &info);
	smuxfs_fill_stat(fs, st, is_dir, &info);
	if (is_root)
		st->st_nlink = root_nlink(fs);
	return 0;
}

/* ---- directories ---- */

int smuxfs_mkdir(const char *path, mode_t mode)
{
	struct smuxfs *fs = smuxfs_get();
	char key[SMUX_KEY_MAX + 2], dkey[SMUX_KEY_MAX + 2];
	struct smux_put_opts opts = {.mode = smuxfs_caller_mode(fs, mode)};
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;
	bool is_dir, is_root;
	unsigned long gen;
	int64_t t0;
	int rc;

	rc = may_modify(fs, path);
	if (!rc)
		rc = key_of(fs, path, key, sizeof(key), &is_root);
	if (rc)
		return rc;
	if (is_root)
		return -EEXIST;
	rc = smuxfs_delq_wait(fs, key, NULL); /* a queued unlink first */
	if (rc)
		return rc;
	/* the kernel's LOOKUP just found it absent (absent.c) */
	rc = smuxfs_absent_take(fs, key)
		     ? -ENOENT
		     : smuxfs_lookup(fs, key, false, &is_dir, NULL);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	rc = smuxfs_dir_prefix(key, dkey, sizeof(dkey));
	if (rc)
		return rc;
	/* mode as asked (0000 too), owned by the caller */
	smuxfs_caller_owner(fs, key, true, &opts);
	smux_source_buf(&src, "", 0);
	smuxfs_ctx(&ctx);
	gen = smuxfs_dirnames_gen(fs, key);
	t0 = smuxfs_dirnames_now();
	rc = smux_backend_put(fs->root, &ctx, dkey, &src, &opts, NULL, &err);
	smuxfs_etag_forget(fs, key); /* a new name: fs->mutations moves */
	smuxfs_dircache_changed(fs, key, false);
	if (rc)
		return smuxfs_errno(&err, "mkdir", dkey);
	/* made here: it has no names yet (dirnames.c) */
	smuxfs_dirnames_install(fs, key, NULL, 0, gen, t0);
	return 0;
}

struct child_probe {
	const char *prefix;
	bool found;
};

static int stop_at_child(void *arg, const struct smux_list_entry *e)
{
	struct child_probe *c = arg;

	if (strcmp(e->key, c->prefix) == 0)
		return 0; /* the directory's own marker is no child */
	c->found = true;
	return 1;
}

static void count_pending(void *arg, const char *name,
			  const struct smuxfs_ofile_attr *a)
{
	(void)name;
	(void)a;
	(*(unsigned *)arg)++;
}

/* 0 when the directory @prefix ("a/") holds nothing, -ENOTEMPTY when it
 * does, or the listing's error. */
static int dir_empty(struct smuxfs *fs, const char *prefix)
{
	struct child_probe c = {.prefix = prefix};
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 0;
	int rc;

	smuxfs_ofile_each_in(fs, prefix, count_pending, &pending);
	if (pending)
		return -ENOTEMPTY;
	smuxfs_ctx(&ctx);
	rc = smux_backend_list(fs->root, &ctx, prefix, "/", stop_at_child, &c,
			       &err);
	if (rc)
		return smuxfs_errno(&err, "list", prefix);
	return c.found ? -ENOTEMPTY : 0;
}

int smuxfs_rmdir(const char *path)
{
	struct smuxfs *fs = smuxfs_get();
	char key[SMUX_KEY_MAX + 2], dkey[SMUX_KEY_MAX + 2];
	struct smux_error err;
	struct smux_info was;
	struct smux_ctx ctx;
	bool is_root, is_dir, had = false;
	int rc;

	rc = may_modify(fs, path);
	if (!rc)
		rc = key_of(fs, path, key, sizeof(key), &is_root);
	if (rc)
		return rc;
	if (is_root)
		return -EBUSY;
	rc = smuxfs_dir_prefix(key, dkey, sizeof(dkey));
	/* the store is asked whether it is empty: its queued unlinks first
	 * (rm -r: one batch per directory) */
	if (!rc)
		rc = smuxfs_delq_wait(fs, NULL, dkey);
	if (!rc)
		rc = dir_empty(fs, dkey);
	if (rc)
		return rc;
	/* a handle open on it: what it was, for its fstat (ops_dir.c) */
	if (smuxfs_dirfh_open(path))
		had = smuxfs_lookup(fs, key, false, &is_dir, &was) == 0;
	smuxfs_ctx(&ctx);
	rc = smux_backend_del(fs->root, &ctx, dkey, &err);
	smuxfs_dircache_changed(fs, key, true);
	smuxfs_dirnames_forget(fs, key);
	if (rc)
		return smuxfs_errno(&err, "rmdir", dkey);
	smuxfs_dirnames_del(fs, key);
	smuxfs_dirfh_removed(fs, path, had ? &was : NULL);
	return 0;
}

int smuxfs_unlink(const char *path)
{
	struct smuxfs *fs = smuxfs_get();
	char key[SMUX_KEY_MAX + 2];
	bool is_root;
	int rc;

	rc = may_modify(fs, path);
	if (!rc)
		rc = key_of(fs, path, key, sizeof(key), &is_root);
	if (rc)
		return rc;
	if (is_root)
		return -EISDIR;
	/* open handles keep their content; nothing of it is committed */
	rc = smuxfs_ofile_unlink(fs, key);
	/* the last key of an implied directory takes it along */
	smuxfs_dircache_changed(fs, key, true);
	if (rc == 0) {
		smuxfs_dirnames_del(fs, key);
		smuxfs_ino_moved(key, NULL);
	}
	return rc;
}

/* ---- rename ---- */

/* The keys under a directory being renamed, relative to its prefix. */
struct walk {
	const char *prefix;
	size_t prefix_len;
	char **files; /* object keys, relative */
	size_t n_files, cap_files;
	char **dirs; /* directory prefixes "a/", "a/b/", relative, unique */
	size_t n_dirs, cap_dirs;
	int rc;
};

static int push(char ***v, size_t *n, size_t *cap, const char *s, size_t len)
{
	char *copy;

	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 32;
		char **nv = realloc(*v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = ncap;
	}
	copy = strndup(s, len);
	if (!copy)
		return -ENOMEM;
	(*v)[(*n)++] = copy;
	return 0;
}

/* Records every directory on the way to @rel (and @rel itself when it is
 * a marker). Listings are sorted, so a directory seen before is the last
 * one recorded or one of its parents: checking the last few suffices, but
 * the set is also deduplicated after sorting. */
static int walk_dirs(struct walk *w, const char *rel)
{
	for (const char *p = strchr(rel, '/'); p; p = strchr(p + 1, '/')) {
		size_t len = (size_t)(p - rel) + 1;
		int rc;

		if (w->n_dirs && strlen(w->dirs[w->n_dirs - 1]) == len &&
		    memcmp(w->dirs[w->n_dirs - 1], rel, len) == 0)
			continue;
		rc = push(&w->dirs, &w->n_dirs, &w->cap_dirs, rel, len);
		if (rc)
			return rc;
	}
	return 0;
}

static int walk_entry(void *arg, const struct smux_list_entry *e)
{
	struct walk *w = arg;
	const char *rel = e->key + w->prefix_len;
	size_t len;

	if (strncmp(e->key, w->prefix, w->prefix_len) != 0 || !rel[0])
		return 0;
	len = strlen(rel);
	w->rc = walk_dirs(w, rel);
	if (!w->rc && rel[len - 1] != '/')
		w->rc = push(&w->files, &w->n_files, &w->cap_files, rel, len);
	return w->rc ? 1 : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void walk_free(struct walk *w)
{
	for (size_t i = 0; i < w->n_files; i++)
		free(w->files[i]);
	for (size_t i = 0; i < w->n_dirs; i++)
		free(w->dirs[i]);
	free(w->files);
	free(w->dirs);
}

/* Makes the marker @to_dir with the mode and mtime of @from_dir. On a
 * @redo, a @from_dir already gone was copied before it was removed. */
static int copy_marker(struct smuxfs *fs, const char *from_dir,
		       const char *to_dir, bool redo)
{
	struct smux_put_opts opts = {0};
	struct smux_info info;
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;

	smuxfs_ctx(&ctx);
	if (smux_backend_head(fs->root, &ctx, from_dir, &info, &err) == 0)
		smux_put_opts_keep(&opts, &info); /* owner, mode, mtime */
	else if (redo)
		return 0;
	smux_source_buf(&src, "", 0);
	if (smux_backend_put(fs->root, &ctx, to_dir, &src, &opts, NULL, &err))
		return smuxfs_errno(&err, "mkdir (rename)", to_dir);
	return 0;
}

/* True when the key @to@rel ("b/" and "x/y" or a marker's "x/") is one
 * the tree takes (smuxfs_path_key's limit: a marker's '/' aside). */
static bool fits_under(const struct smuxfs *fs, const char *to, const char *rel)
{
	size_t kmax = fs->key_max ? fs->key_max : SMUX_KEY_MAX;
	size_t rlen = strlen(rel), n = strlen(to) + rlen;

	if (rlen && rel[rlen - 1] == '/')
		n--;
	return n <= kmax - 1 && n < SMUX_KEY_MAX;
}

/* undo_moves' removal of the directory marker @b it made; a failure is
 * logged (the directory stays, empty). */
static void undo_mkdir(struct smuxfs *fs, const struct smux_ctx *ctx,
		       const char *from, const char *to, const char *b)
{
	struct smux_error err;
	char msg[256];

	if (smux_backend_del(fs->root, ctx, b, &err) &&
	    err.e.code != SMUX_E_KEY_NOT_FOUND)
		smux_log(LOG_ERR,
			 "rename of %s to %s failed half-way; directory %s "
			 "stays (%s)",
			 from, to, b,
			 smux_error_format(&err, msg, sizeof(msg)));
}

/*
 * A key-by-key move of @from to @to that failed half-way (move_keys),
 * undone: the last @removed old directory markers of @w made again
 * (parents first), the first @moved files back under @from, newest
 * first, then the first @made directory markers made under @to, children
 * first, and @to itself unless it was there before (@to_was: an empty
 * directory the rename replaces, or one that could not be asked). A step
 * of the undo that fails is logged and the rest goes on: what is left is
 * under both names, never lost.
 */
static void undo_moves(struct smuxfs *fs, const char *from, const char *to,
		       const struct walk *w, size_t moved, size_t made,
		       size_t removed, bool to_was)
{
	char a[SMUX_KEY_MAX + 2], b[SMUX_KEY_MAX + 2];
	struct smux_ctx ctx;
	int rc;

	smuxfs_ctx(&ctx);
	for (size_t i = w->n_dirs - removed; i < w->n_dirs; i++) {
		snprintf(a, sizeof(a), "%s%s", from, w->dirs[i]);
		snprintf(b, sizeof(b), "%s%s", to, w->dirs[i]);
		rc = copy_marker(fs, b, a, false);
		if (rc)
			smux_log(LOG_ERR,
				 "rename of %s to %s failed half-way; "
				 "directory %s not made again (%s)",
				 from, to, a, strerror(-rc));
	}
	while (moved-- > 0) {
		snprintf(a, sizeof(a), "%s%s", from, w->files[moved]);
		snprintf(b, sizeof(b), "%s%s", to, w->files[moved]);
		rc = smuxfs_ofile_rename(fs, b, a);
		if (rc)
			smux_log(LOG_ERR,
				 "rename of %s to %s failed half-way; %s "
				 "stays under the new name (%s)",
				 from, to, b, strerror(-rc));
	}
	while (made-- > 0) {
		snprintf(b, sizeof(b), "%s%s", to, w->dirs[made]);
		undo_mkdir(fs, &ctx, from, to, b);
	}
	if (!to_was)
		undo_mkdir(fs, &ctx, from, to, to);
}

/*
 * Moves the directory @from ("a/") to @to ("b/") key by key: new markers
 * first (parents before children), then every object, then the old
 * markers, children before parents, and the old directory itself. Each
 * step can be done again: run once more on what is left (@redo, a rename
 * a crash interrupted: rename_journal.c), it finishes the move - an
 * object already moved is no longer listed under @from, and an old
 * marker already gone is not missed. A first run that fails half-way
 * (a replica whose latest versions cannot be moved while it is out)
 * puts back what it moved (undo_moves): nothing moved, as rename(2).
 */
static int move_keys(struct smuxfs *fs, const char *from, const char *to,
		     bool redo)
{
	struct walk w = {.prefix = from, .prefix_len = strlen(from)};
	char a[SMUX_KEY_MAX + 2], b[SMUX_KEY_MAX + 2];
	size_t i, k, moved = 0, made = 0, removed = 0;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	bool to_was = false;
	int rc;

	smuxfs_ctx(&ctx);
	rc = smux_backend_list(fs->root, &ctx, from, NULL, walk_entry, &w,
			       &err);
	if (rc && redo && err.e.code == SMUX_E_KEY_NOT_FOUND)
		rc = 0; /* every object moved already */
	if (rc) {
		rc = smuxfs_errno(&err, "list (rename)", from);
		goto out;
	}
	rc = w.rc;
	if (rc)
		goto out;
	if (w.n_dirs) /* an empty directory: no array (qsort's NULL is UB) */
		qsort(w.dirs, w.n_dirs, sizeof(*w.dirs), cmp_str);
	for (i = 0, k = 0; i < w.n_dirs; i++) {
		if (k && strcmp(w.dirs[k - 1], w.dirs[i]) == 0) {
			free(w.dirs[i]);
			continue;
		}
		w.dirs[k++] = w.dirs[i];
	}
	w.n_dirs = k;
	/* a name the tree cannot take under @to: refused before anything
	 * moved (not half-way, the rest left under @from) */
	for (i = 0; i < w.n_dirs + w.n_files && !redo; i++)
		if (!fits_under(fs, to,
				i < w.n_dirs ? w.dirs[i]
					     : w.files[i - w.n_dirs])) {
			rc = -ENAMETOOLONG;
			goto out;
		}
	/* what was there before, for an undo (an empty directory
	 * replaced keeps its name) */
	if (!redo && smux_backend_head(fs->root, &ctx, to, &info, &err) != 0)
		to_was = err.e.code != SMUX_E_KEY_NOT_FOUND; /* unknown: kept */
	else
		to_was = !redo;
	rc = copy_marker(fs, from, to, redo);
	for (i = 0; i < w.n_dirs && !rc; i++) {
		if (snprintf(a, sizeof(a), "%s%s", from, w.dirs[i]) >=
			    (int)sizeof(a) ||
		    snprintf(b, sizeof(b), "%s%s", to, w.dirs[i]) >=
			    (int)sizeof(b)) {
			rc = -ENAMETOOLONG;
			break;
		}
		rc = copy_marker(fs, a, b, redo);
		if (!rc)
			made = i + 1;
	}
	for (i = 0; i < w.n_files && !rc; i++) {
		if (snprintf(a, sizeof(a), "%s%s", from, w.files[i]) >=
			    (int)sizeof(a) ||
		    snprintf(b, sizeof(b), "%s%s", to, w.files[i]) >=
			    (int)sizeof(b)) {
			rc = -ENAMETOOLONG;
			break;
		}
		rc = smuxfs_ofile_rename(fs, a, b);
		/* a redo: a name listed that is moved already (a replica that
		 * missed the first move still lists it until its hints
		 * replay) */
		if (redo && rc == -ENOENT)
			rc = 0;
		if (!rc)
			moved = i + 1;
	}
	if (rc && !redo) {
		/* all or nothing, as rename(2): what moved goes back */
		undo_moves(fs, from, to, &w, moved, made, 0, to_was);
		goto out;
	}
	for (i = w.n_dirs; i-- > 0 && !rc;) {
		snprintf(a, sizeof(a), "%s%s", from, w.dirs[i]);
		if (smux_backend_del(fs->root, &ctx, a, &err) &&
		    !(redo && err.e.code == SMUX_E_KEY_NOT_FOUND))
			rc = smuxfs_errno(&err, "rmdir (rename)", a);
		else
			removed++;
	}
	if (!rc && smux_backend_del(fs->root, &ctx, from, &err) &&
	    !(redo && err.e.code == SMUX_E_KEY_NOT_FOUND))
		rc = smuxfs_errno(&err, "rmdir (rename)", from);
	/* an old directory that would not go (it holds what the listing
	 * left out): everything goes back, the removed ones made again */
	if (rc && !redo)
		undo_moves(fs, from, to, &w, w.n_files, w.n_dirs, removed,
			   to_was);
out:
	walk_free(&w);
	return rc;
}

/*
 * A directory rename a crash interrupted (rename_journal.c): first in one
 * call per replica where the root can - a replica that renamed already
 * has nothing of @from and is left as it is (mux_every_member), the
 * others rename their tree, hard links and all. Key by key only where
 * that cannot be (or fails: it is undone, all or nothing): there a
 * replica that renamed already misses each name, and its hints' replays
 * copy each file - two names of one file become two files.
 */
int smuxfs_rename_dir_redo(struct smuxfs *fs, const char *from, const char *to)
{
	struct smux_error err;
	struct smux_ctx ctx;
	int rc = -1;

	smuxfs_ctx(&ctx);
	if (smux_backend_caps(fs->root) & SMUX_CAP_DIR_RENAME)
		rc = smux_backend_rename(fs->root, &ctx, from, to, &err);
	if (rc != 0)
		rc = move_keys(fs, from, to, true);
	smuxfs_dircache_changed(fs, NULL, true);
	return rc;
}

/*
 * Renames the directory @from ("a/") to @to ("b/"): in one backend call
 * where the root can (SMUX_CAP_DIR_RENAME: every member a file backend,
 * every replica up); else key by key (move_keys), with a journal record
 * in state_dir for its whole length, so a crash in the middle is completed
 * at the next mount instead of leaving the tree half under each name.
 */
static int rename_dir(struct smuxfs *fs, const char *from, const char *to)
{
	unsigned caps = smux_backend_caps(fs->root);
	struct smuxfs_rjournal rec;
	bool journaled = false;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	/* files created under it and not committed yet must move too */
	rc = smuxfs_ofile_commit_under(fs, from);
	if (rc)
		return rc;
	smuxfs_ctx(&ctx);
	if (caps & SMUX_CAP_DIR_RENAME) {
		/* one rename(2) per replica: atomic there, O(1). Several
		 * replicas: journaled all the same (a crash between two
		 * replicas' renames left the tree under one name on one and
		 * under the other on the other, for good; the next mount
		 * moves what is left key by key). One backend's one call
		 * (a WebDAV MOVE) is all or nothing: no record, whose redo
		 * key by key would leave behind the dot names nginx's
		 * listings hide */
		if (!(caps & SMUX_CAP_ONE_COPY) && smux_is_mux(fs->root)) {
			rc = smuxfs_rjournal_begin(fs, from, to, &rec);
			if (rc)
				return rc;
			journaled = true;
		}
		rc = smux_backend_rename(fs->root, &ctx, from, to, &err);
		if (rc == 0) {
			smuxfs_ofile_rekey_under(fs, from, to);
			if (journaled)
				smuxfs_rjournal_end(fs, &rec);
			return 0;
		}
		if (err.e.code != SMUX_E_NOT_SUPPORTED) {
			if (journaled)
				smuxfs_rjournal_end(fs, &rec);
			return smuxfs_errno(&err, "rename", from);
		}
		/* NOT_SUPPORTED (a replica not up, a hint pending): key by
		 * key, with hints */
	}
	/* key by key moves what the listing shows: a member out that may
	 * hold more (failover's first member, a sticky shard) would keep
	 * them under @from, which comes back with them (s42-t3) */
	if (smux_mux_list_whole(fs->root, from, &err) != 0) {
		if (journaled)
			smuxfs_rjournal_end(fs, &rec);
		return smuxfs_errno(&err, "rename", from);
	}
	rc = journaled ? 0 : smuxfs_rjournal_begin(fs, from, to, &rec);
	if (rc)
		return rc;
	rc = move_keys(fs, from, to, false);
	/* a move that failed half-way was undone and is reported: the next
	 * mount must not finish what the program was told failed */
	smuxfs_rjournal_end(fs, &rec);
	return rc;
}

static int rename_names(struct smuxfs *fs, const char *from, const char *to,
			unsigned int flags);

/*
 * Directories' known names after a rename of @from to @to (done: @ok):
 * the trees under both names are forgotten (a directory's names moved,
 * or some of them when it failed half-way), @to's name is made, and
 * @from's is gone only when it succeeded (dirnames.c).
 */
static void rename_dirnames(struct smuxfs *fs, const char *from, const char *to,
			    bool ok)
{
	char fkey[SMUX_KEY_MAX + 2], tkey[SMUX_KEY_MAX + 2];

	if (key_of(fs, from, fkey, sizeof(fkey), NULL) != 0 ||
	    key_of(fs, to, tkey, sizeof(tkey), NULL) != 0) {
		smuxfs_dirnames_forget(fs, NULL);
		return;
	}
	smuxfs_dirnames_forget(fs, fkey);
	smuxfs_dirnames_forget(fs, tkey);
	smuxfs_dirnames_add(fs, tkey);
	if (ok && strcmp(fkey, tkey) != 0)
		smuxfs_dirnames_del(fs, fkey);
}

/* smuxfs_ino_moved of the paths @from and @to (@to NULL: gone). */
static void ino_moved(struct smuxfs *fs, const char *from, const char *to)
{
	char fkey[SMUX_KEY_MAX + 2], tkey[SMUX_KEY_MAX + 2];

	if (key_of(fs, from, fkey, sizeof(fkey), NULL) != 0)
		return;
	if (to && key_of(fs, to, tkey, sizeof(tkey), NULL) != 0)
		to = NULL;
	smuxfs_ino_moved(fkey, to ? tkey : NULL);
}

int smuxfs_rename(const char *from, const char *to, unsigned int flags)
{
	struct smuxfs *fs = smuxfs_get();
	char key[SMUX_KEY_MAX + 2];
	struct smux_info was_to;
	bool had_to = false, is_dir;
	int rc;

	/* a directory handle open on the target: what it was, for its
	 * fstat once replaced (rare: no lookup otherwise) */
	if (!(flags & RENAME_EXCHANGE) && smuxfs_dirfh_open(to) &&
	    key_of(fs, to, key, sizeof(key), NULL) == 0)
		had_to = smuxfs_lookup(fs, key, false, &is_dir, &was_to) == 0;
	rc = rename_names(fs, from, to, flags);
	/* writers kept between opens (linger.c) are of the names before:
	 * a directory above them may have moved */
	smuxfs_linger_drop_all(fs);

	/* a directory's files moved with it: all files' attributes are
	 * asked again (attrcache.c) */
	smuxfs_attrcache_changed(fs);
	/* directories moved, or an implied one emptied (dircache.c) */
	if (key_of(fs, from, key, sizeof(key), NULL) == 0)
		smuxfs_dircache_changed(fs, key, true);
	else
		smuxfs_dircache_changed(fs, NULL, true);
	if (key_of(fs, to, key, sizeof(key), NULL) == 0)
		smuxfs_dircache_changed(fs, key, true);
	else
		smuxfs_dircache_changed(fs, NULL, true);
	if (flags & RENAME_EXCHANGE) {
		/* both names stay, each now the other's directory or not */
		rename_dirnames(fs, from, to, false);
		rename_dirnames(fs, to, from, false);
		if (rc == 0) {
			smuxfs_dirfh_exchanged(from, to);
			/* each name another file's now: both start again */
			ino_moved(fs, from, NULL);
			ino_moved(fs, to, NULL);
		}
		return rc;
	}
	rename_dirnames(fs, from, to, rc == 0);
	if (rc == 0) /* the file keeps its number under its new name */
		ino_moved(fs, from, to);
	if (rc == 0) { /* open directory handles follow (ops_dir.c) */
		/* an empty directory replaced */
		smuxfs_dirfh_removed(fs, to, had_to ? &was_to : NULL);
		smuxfs_dirfh_renamed(from, to);
	}
	return rc;
}

/* Commits what is open under @key before it moves: the file's ofile, or
 * every one under the directory. */
static int commit_side(struct smuxfs *fs, const char *key, bool is_dir)
{
	char prefix[SMUX_KEY_MAX + 2];
	struct smuxfs_ofile *of;
	int rc;

	if (is_dir) {
		rc = smuxfs_dir_prefix(key, prefix, sizeof(prefix));
		return rc ? rc : smuxfs_ofile_commit_under(fs, prefix);
	}
	of = smuxfs_ofile_find(fs, key);
	if (!of)
		return 0;
	rc = smuxfs_ofile_commit(fs, of, false);
	smuxfs_ofile_release(fs, of);
	return rc;
}

/*
 * rename(2) with RENAME_EXCHANGE of the keys @a and @b (files, special
 * objects or directories, in any pairing): one backend call where every
 * member of the tree can swap two names atomically (SMUX_CAP_EXCHANGE:
 * file backends, every member up, no hint pending); else EINVAL, as from
 * a filesystem without exchange, and nothing moved. Open files and
 * directory handles of each name follow its content to the other.
 */
static int exchange_names(struct smuxfs *fs, const char *a, const char *b)
{
	struct smux_info ainfo, binfo;
	struct smux_error err;
	struct smux_ctx ctx;
	bool a_dir, b_dir;
	int rc;

	if (!(smux_backend_caps(fs->root) & SMUX_CAP_EXCHANGE))
		return -EINVAL;
	/* queued unlinks of either name go first */
	rc = smuxfs_delq_wait(fs, a, NULL);
	if (!rc)
		rc = smuxfs_delq_wait(fs, b, NULL);
	if (!rc)
		rc = smuxfs_lookup(fs, a, false, &a_dir, &ainfo);
	if (!rc)
		rc = smuxfs_lookup(fs, b, false, &b_dir, &binfo);
	if (!rc)
		rc = commit_side(fs, a, a_dir);
	if (!rc)
		rc = commit_side(fs, b, b_dir);
	if (rc)
		return rc;
	smuxfs_ctx(&ctx);
	if (smux_backend_exchange(fs->root, &ctx, a, b, &err))
		return err.e.code == SMUX_E_NOT_SUPPORTED
			       ? -EINVAL
			       : smuxfs_errno(&err, "exchange", a);
	smuxfs_ofile_exchanged(fs, a, a_dir, b, b_dir);
	return 0;
}

static int rename_names(struct smuxfs *fs, const char *from, const char *to,
			unsigned int flags)
{
	char fkey[SMUX_KEY_MAX + 2], tkey[SMUX_KEY_MAX + 2];
	char fdir[SMUX_KEY_MAX + 2], tdir[SMUX_KEY_MAX + 2];
	bool from_dir, to_dir, from_root, to_root;
	struct smux_info finfo, tinfo;
	int rc;

	rc = may_modify(fs, from);
	if (!rc)
		rc = may_modify(fs, to);
	if (rc)
		return rc;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    flags == (RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	rc = key_of(fs, from, fkey, sizeof(fkey), &from_root);
	if (!rc)
		rc = key_of(fs, to, tkey, sizeof(tkey), &to_root);
	if (rc)
		return rc;
	if (from_root || to_root)
		return -EBUSY;
	if (flags & RENAME_EXCHANGE)
		return exchange_names(fs, fkey, tkey);
	/* a queued unlink of the destination goes first: sent after, it
	 * would delete what is renamed there */
	rc = smuxfs_delq_wait(fs, tkey, NULL);
	if (rc)
		return rc;
	rc = smuxfs_lookup(fs, fkey, false, &from_dir, &finfo);
	if (rc)
		return rc;
	/* the kernel's LOOKUP of @to just found it absent (absent.c) */
	to_dir = false;
	rc = smuxfs_absent_take(fs, tkey)
		     ? -ENOENT
		     : smuxfs_lookup(fs, tkey, false, &to_dir, &tinfo);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == 0) {
		if (flags & RENAME_NOREPLACE)
			return -EEXIST;
		if (from_dir && !to_dir)
			return -ENOTDIR;
		if (!from_dir && to_dir)
			return -EISDIR;
		/* two names of one file: rename(2) does nothing and
		 * succeeds; both names stay (the handles of @to's kernel
		 * node go on without a name: fnode.c) */
		if (!from_dir && finfo.file_id &&
		    finfo.file_id == tinfo.file_id && tinfo.nlink > 1 &&
		    (smux_backend_caps(fs->root) & SMUX_CAP_HARDLINK)) {
			smuxfs_fnode_unnamed(fs, tkey, &tinfo);
			/* @from's ofile stays @from's when one is open
			 * under @to too: its handles, on the node the
			 * kernel now calls @to, go to the file by @from
			 * the same way (an unlink of @to through that node
			 * finds no handle of @to's key to leave nameless,
			 * and libfuse has no path for it: ESTALE) */
			if (smuxfs_ofile_renamed_same(fs, fkey, tkey))
				smuxfs_fnode_unnamed(fs, fkey, &finfo);
			return 0;
		}
	}
	if (!from_dir) {
		return smuxfs_ofile_rename(fs, fkey, tkey);
	}
	rc = smuxfs_dir_prefix(fkey, fdir, sizeof(fdir));
	if (!rc)
		rc = smuxfs_dir_prefix(tkey, tdir, sizeof(tdir));
	if (rc)
		return rc;
	if (strncmp(tdir, fdir, strlen(fdir)) == 0)
		return -EINVAL; /* into itself */
	/* the walk lists what the store holds: queued unlinks first */
	rc = smuxfs_delq_wait(fs, NULL, fdir);
	if (!rc)
		rc = smuxfs_delq_wait(fs, NULL, tdir);
	if (rc)
		return rc;
	if (to_dir) {
		rc = dir_empty(fs, tdir);
		if (rc)
			return rc;
	}
	rc = rename_dir(fs, fdir, tdir);
	/* the keys under it name other files now, also after a move that
	 * failed half-way (inomap.c) */
	smuxfs_ino_dir_moved();
	return rc;
}

/* ---- attributes ---- */

/* The key a handle or a path names, for the f* variants (path NULL). */
static int key_for(struct smuxfs *fs, const char *path,
		   struct fuse_file_info *fi, char *key, size_t cap,
		   bool *is_root)
{
	struct smuxfs_fh *fh = fi ? (struct smuxfs_fh *)fi->fh : NULL;

	*is_root = false;
	if (fh && fh->kind == SMUXFS_FH_VIRTUAL)
		return -EPERM;
	if (fh && fh->kind == SMUXFS_FH_FILE) {
		if (fs->ro)
			return -EROFS;
		return smuxfs_fh_key(fs, fh, key, cap);
	}
	if (!path)
		return -ESTALE;
	if (fh && fh->kind == SMUXFS_FH_DIR)
		path = fh->path;
	if (smuxdir_owns(path))
		return -EPERM;
	if (fs->ro)
		return -EROFS;
	return key_of(fs, path, key, cap, is_root);
}

/*
 * The key of a chmod, chown or utimens (key_for), or 1 for one of an open
 * file whose name is gone (the channel hook gave it handle 0, fnode.c) -
 * unless its file kept the name (a rename of another name of it over
 * that one, smuxfs_fnode_unnamed): then that name is the key.
 */
static int setattr_key(struct smuxfs *fs, const char *path,
		       struct fuse_file_info *fi, char *key, size_t cap,
		       bool *is_root)
{
	if (path || !fi || fi->fh)
		return key_for(fs, path, fi, key, cap, is_root);
	*is_root = false;
	if (smuxfs_fnode_named_key(fs, key, cap))
		return 1;
	return fs->ro ? -EROFS : 0;
}

/*
 * fchmod, fchown or futimens of an open file whose name is gone (the
 * channel hook gave the request handle 0): kept for its descriptors,
 * which fstat shows (a local filesystem keeps them in the inode, which
 * goes away at the last close); nothing is stored any more. Set-id bits
 * for root, and for the file's owner (set-group-ID: of its group), as
 * chmod(2) allows; an owner only root changes (the kernel's own check,
 * default_permissions, ran before for a mount that has it).
 */
static int setattr_orphan(struct smuxfs *fs, struct smux_setattr *attr)
{
	const struct fuse_context *c = fuse_get_context();
	struct smuxfs_ofile *of = NULL;
	struct smux_info info;
	struct stat st;
	int rc;

	if (c->uid != 0) {
		bool owner =
			getattr_orphan(fs, &st) == 0 && st.st_uid == c->uid;

		if (!owner)
			attr->mode &= ~(uint32_t)(S_ISUID | S_ISGID);
		else if (st.st_gid != c->gid)
			attr->mode &= ~(uint32_t)S_ISGID;
		if ((attr->flags & SMUX_SET_OWNER) &&
		    attr->uid != SMUX_ID_NONE && attr->uid != (uint32_t)c->uid)
			return -EPERM;
	}
	rc = smuxfs_fnode_setattr(fs, attr);
	/* the file itself too, where a writer holds it in place: the
	 * names it has left show the change, as on a local disk */
	if (rc == 0 && smuxfs_fnode_orphan(fs, &of, &info) == 0 && of) {
		smuxfs_ofile_setattr_nameless(fs, of, attr);
		smuxfs_ofile_release(fs, of);
	}
	return rc;
}

/* A file of several names changed: its other open names show it (their
 * open files report from what they hold), and so do its descriptors whose
 * name is gone (what they keep of their own). Trees with hard links
 * only. */
static void links_changed(struct smuxfs *fs, const char *key,
			  const struct smux_setattr *attr)
{
	struct smux_setattr a = *attr;
	struct smux_info info;
	bool open, nameless, is_dir;

	if (!(smux_backend_caps(fs->root) & SMUX_CAP_HARDLINK))
		return;
	/* no other open file: nothing to tell, no lookup (chmod -R) */
	open = smuxfs_ofile_open_besides(fs, key);
	nameless = smuxfs_fnode_nameless(fs);
	if ((!open && !nameless) ||
	    smuxfs_lookup(fs, key, false, &is_dir, &info) != 0 || is_dir)
		return;
	if ((attr->flags & SMUX_SET_OWNER) && !(attr->flags & SMUX_SET_MODE)) {
		/* a chown clears set-id bits: the mode the file has now */
		a.flags |= SMUX_SET_MODE;
		a.mode = info.mode & 07777;
	}
	/* descriptors whose name went (this name may be the file's last) */
	if (nameless)
		smuxfs_fnode_links_changed(fs, info.file_id, &a);
	if (open && info.nlink > 1)
		smuxfs_ofile_links_changed(fs, key, info.file_id, &a);
}

/* Applies @attr to what @key is (object or directory marker). @is_file:
 * known to be a file (it is open: no lookup needed). */
static int set_attr(struct smuxfs *fs, const char *key, bool is_root,
		    bool is_file, const struct smux_setattr *attr)
{
	char target[SMUX_KEY_MAX + 2];
	struct smux_error err;
	struct smux_ctx ctx;
	bool is_dir;
	int rc;

	if (is_root && !key[0]) {
		/* the backends' root has no key: kept by the mount (fs.h) */
		if (attr->flags & SMUX_SET_MODE)
			atomic_store(&fs->root_mode,
				     S_IFDIR | (attr->mode & 07777));
		if (attr->flags & SMUX_SET_MTIME)
			atomic_store(&fs->root_mtime_ns, attr->mtime_ns);
		if ((attr->flags & SMUX_SET_OWNER) && attr->uid != SMUX_ID_NONE)
			atomic_store(&fs->root_uid, attr->uid);
		if ((attr->flags & SMUX_SET_OWNER) && attr->gid != SMUX_ID_NONE)
			atomic_store(&fs->root_gid, attr->gid);
		return 0;
	}
	is_dir = false;
	rc = is_file ? 0 : smuxfs_lookup(fs, key, is_root, &is_dir, NULL);
	if (rc)
		return rc;
	if (is_dir)
		rc = smuxfs_dir_prefix(key, target, sizeof(target));
	else
		rc = snprintf(target, sizeof(target), "%s", key) >=
				     (int)sizeof(target)
			     ? -ENAMETOOLONG
			     : 0;
	if (rc)
		return rc;
	smuxfs_ctx(&ctx);
	rc = smux_backend_setattr(fs->root, &ctx, target, attr, &err);
	if (is_dir)
		smuxfs_dircache_changed(fs, key, false);
	if (rc) {
		/* some member may have it (attrcache.c) */
		smuxfs_attrcache_changed(fs);
		return smuxfs_errno(&err, "setattr", target);
	}
	smuxfs_etag_forget(fs, key);
	if (!is_dir) {
		smuxfs_ofile_forget_seen(fs, key);
		links_changed(fs, key, attr);
		smuxfs_readers_written(fs, key);
	}
	return 0;
}

/*
 * setuid/setgid asked by an unprivileged caller stay only on an object
 * that caller owns (what the kernel's own check, default_permissions,
 * assumed from the reported owner): a mount without owners, or with
 * uid= naming the caller, never gets a setuid file of someone else.
 */
static mode_t chmod_bits(struct smuxfs *fs, const char *key, bool is_root,
			 mode_t mode)
{
	const struct fuse_context *c = fuse_get_context();
	struct smux_info info;
	bool is_dir;

	mode &= 07777;
	if (!(mode & (S_ISUID | S_ISGID)) || c->uid == 0)
		return mode;
	if (!is_root && smuxfs_lookup(fs, key, false, &is_dir, &info) == 0 &&
	    info.has_owner && info.uid == (uint32_t)c->uid)
		return mode;
	return mode & ~(mode_t)(S_ISUID | S_ISGID);
}

int smuxfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smux_setattr attr = {.flags = SMUX_SET_MODE};
	char key[SMUX_KEY_MAX + 2];
	struct smuxfs_ofile *of;
	bool is_root, fold = false;
	int rc;

	rc = setattr_key(fs, path, fi, key, sizeof(key), &is_root);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		attr.mode = mode & 07777;
		return setattr_orphan(fs, &attr);
	}
	/* 0000 is a mode like any other */
	attr.mode = chmod_bits(fs, key, is_root, mode);
	of = is_root ? NULL : smuxfs_ofile_find(fs, key);
	if (of) {
		rc = smuxfs_ofile_setattr_now(of, &attr);
		fold = rc == 0 && smuxfs_ofile_set_mode(of, attr.mode);
		smuxfs_ofile_release(fs, of);
		if (rc)
			return rc > 0 ? 0 : rc;
	}
	return fold ? 0 : set_attr(fs, key, is_root, of != NULL, &attr);
}

/* One time of utimensat: UTIME_NOW, UTIME_OMIT (false) or as given. */
static bool utime_ns(const struct timespec *tv, int64_t *ns)
{
	struct timespec now;

	if (!tv || tv->tv_nsec == UTIME_NOW) {
		clock_gettime(CLOCK_REALTIME, &now);
		*ns = smux_time_ns(now.tv_sec, now.tv_nsec);
		return true;
	}
	if (tv->tv_nsec == UTIME_OMIT)
		return false;
	*ns = smux_time_ns(tv->tv_sec, tv->tv_nsec);
	return true;
}

int smuxfs_utimens(const char *path, const struct timespec tv[2],
		   struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smux_setattr attr = {0};
	char key[SMUX_KEY_MAX + 2];
	struct smuxfs_ofile *of;
	bool is_root, fold = false;
	int rc;

	rc = setattr_key(fs, path, fi, key, sizeof(key), &is_root);
	if (rc < 0)
		return rc;
	if (utime_ns(tv ? &tv[0] : NULL, &attr.atime_ns))
		attr.flags |= SMUX_SET_ATIME;
	if (utime_ns(tv ? &tv[1] : NULL, &attr.mtime_ns))
		attr.flags |= SMUX_SET_MTIME;
	if (rc > 0)
		return setattr_orphan(fs, &attr);
	if (!attr.flags)
		return 0;
	of = is_root || !(attr.flags & SMUX_SET_MTIME)
		     ? NULL
		     : smuxfs_ofile_find(fs, key);
	if (of) {
		rc = smuxfs_ofile_setattr_now(of, &attr);
		fold = rc == 0 && smuxfs_ofile_set_mtime(of, attr.mtime_ns);
		if (fold) {
			/* the mtime goes with the next commit; the atime
			 * now, to the file being written, else to the
			 * object when it is already there */
			attr.flags &= ~(unsigned)SMUX_SET_MTIME;
			if (attr.flags)
				rc = smuxfs_ofile_setattr_open(of, &attr);
			else
				rc = 1;
		}
		smuxfs_ofile_release(fs, of);
		if (rc)
			return rc > 0 ? 0 : rc;
	}
	if (fold) {
		rc = set_attr(fs, key, is_root, true, &attr);
		return rc == -ENOENT ? 0 : rc;
	}
	return set_attr(fs, key, is_root, of != NULL, &attr);
}

int smuxfs_chown(const char *path, uid_t uid, gid_t gid,
		 struct fuse_file_info *fi)
{
	struct smuxfs *fs = smuxfs_get();
	struct smux_setattr attr = {
		.flags = SMUX_SET_OWNER,
		.uid = uid == (uid_t)-1 ? SMUX_ID_NONE : (uint32_t)uid,
		.gid = gid == (gid_t)-1 ? SMUX_ID_NONE : (uint32_t)gid,
	};
	char key[SMUX_KEY_MAX + 2] = "";
	struct smuxfs_ofile *of;
	bool nameless, is_root = false;
	int rc;

	/* fchown of an open file whose name is gone (handle 0, fnode.c) */
	rc = setattr_key(fs, path, fi, key, sizeof(key), &is_root);
	if (rc < 0)
		return rc;
	nameless = rc > 0;
	if (!(smux_backend_caps(fs->root) & SMUX_CAP_OWNER)) {
		/* nothing keeps owners: the mount's (uid=, gid=) only */
		if ((uid == (uid_t)-1 || uid == fs->uid) &&
		    (gid == (gid_t)-1 || gid == fs->gid))
			return 0;
		smux_log(LOG_DEBUG,
			 "chown %s: the tree keeps no owners (EPERM)",
			 nameless ? "(an open file without a name)" : key);
		return -EPERM;
	}
	if (attr.uid == SMUX_ID_NONE && attr.gid == SMUX_ID_NONE)
		return 0;
	if (nameless)
		return setattr_orphan(fs, &attr);
	/* An open file created here and never committed (tar: create,
	 * write, fchown, fchmod, futimens, close) keeps the owner for its
	 * commit, as it keeps a chmod: one put at close; any other dirty
	 * one commits what is pending first, then the object changes (in
	 * place: at once, as on a local disk; fold_meta in ofile.c). */
	of = is_root ? NULL : smuxfs_ofile_find(fs, key);
	if (of) {
		rc = smuxfs_ofile_setattr_now(of, &attr);
		if (rc == 0)
			rc = smuxfs_ofile_set_owner(of, attr.uid, attr.gid)
				     ? 1
				     : smuxfs_ofile_commit(fs, of, false);
		smuxfs_ofile_release(fs, of);
		if (rc)
			return rc > 0 ? 0 : rc;
	}
	return set_attr(fs, key, is_root, of != NULL, &attr);
}

int smuxfs_statfs(const char *path, struct statvfs *st)
{
	struct smuxfs *fs = smuxfs_get();
	struct smux_statfs s;
	struct smux_error err;
	struct smux_ctx ctx;
	const uint64_t bs = 4096;

	(void)path;
	smuxfs_ctx(&ctx);
	if (smux_backend_statfs(fs->root, &ctx, &s, &err))
		return smuxfs_errno(&err, "statfs", "");
	if (!s.total_bytes) { /* unknown: plenty, as s3fs reports */
		s.total_bytes = s.free_bytes = PIB;
		s.has_avail = false;
	}
	if (!s.total_files)
		s.total_files = s.free_files = 1000000000;
	memset(st, 0, sizeof(*st));
	st->f_bsize = bs;
	st->f_frsize = bs;
	st->f_blocks = s.total_bytes / bs;
	st->f_bfree = s.free_bytes / bs;
	st->f_bavail =
		(s.has_avail && s.avail_bytes < s.free_bytes ? s.avail_bytes
							     : s.free_bytes) /
		bs;
	st->f_files = s.total_files;
	st->f_ffree = s.free_files;
	st->f_favail = s.free_files;
	st->f_namemax = SMUX_KEY_SEGMENT_MAX;
	if (fs->ro)
		st->f_flag |= ST_RDONLY;
	return 0;
}

/* ---- special files and links ---- */

/*
 * A symlink, FIFO or socket on a tree with a backend that keeps none
 * (WebDAV or Bunny without rclone_links; a mirror with one of them: the
 * others alone would hold it): EPERM, as a filesystem without them
 * answers (symlink(2), mknod(2)), with the reason logged once.
 */
static int special_refused(struct smuxfs *fs, uint32_t mode, const char *key)
{
	static atomic_bool told_link, told_fifo;
	unsigned need = smux_caps_for_mode(mode);
	bool link = need == SMUX_CAP_SYMLINK;

	if (!need || (smux_backend_caps(fs->root) & need))
		return 0;
	if (!atomic_exchange(link ? &told_link : &told_fifo, true))
		smux_log(LOG_INFO,
			 "%s %s: a backend of the tree keeps no %s; "
			 "answering EPERM",
			 link ? "symlink" : "mknod", key,
			 link ? "symlinks (rclone_links = true keeps them on "
				"http and bunny)"
			      : "FIFOs or sockets");
	return -EPERM;
}

/* Puts an object of type @mode (S_IFREG, S_IFLNK, S_IFIFO, S_IFSOCK) at
 * @path with @content (a symlink's target) unless something is there. */
static int make_object(const char *path, uint32_t mode, const char *content,
		       const char *op)
{
	struct smuxfs *fs = smuxfs_get();
	struct smux_put_opts opts = {
		.mode = (mode & S_IFMT) | smuxfs_caller_mode(fs, mode & 07777),
	};
	char key[SMUX_KEY_MAX + 2];
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;
	bool is_dir, is_root;
	int rc;

	rc = may_modify(fs, path);
	if (!rc)
		rc = key_of(fs, path, key, sizeof(key), &is_root);
	if (rc)
		return rc;
	if (is_root)
		return -EEXIST;
	rc = special_refused(fs, mode, key);
	if (rc)
		return rc;
	rc = smuxfs_delq_wait(fs, key, NULL); /* a queued unlink first */
	if (rc)
		return rc;
	/* the kernel's LOOKUP just found it absent (absent.c) */
	if (!smuxfs_absent_take(fs, key) &&
	    smuxfs_lookup(fs, key, false, &is_dir, NULL) == 0)
		return -EEXIST;
	smuxfs_caller_owner(fs, key, false, &opts); /* 0000 too */
	smux_source_buf(&src, content, strlen(content));
	smuxfs_ctx(&ctx);
	rc = smux_backend_put(fs->root, &ctx, key, &src, &opts, NULL, &err);
	smuxfs_etag_forget(fs, key); /* a new name: fs->mutations moves */
	return rc ? smuxfs_errno(&err, op, key) : 0;
}

/* Regular files, FIFOs and sockets; devices stay EPERM (a backend holds
 * no device). A FIFO's open never reaches the daemon: the kernel serves
 * it. */
int smuxfs_mknod(const char *path, mode_t mode, dev_t rdev)
{
	(void)rdev;
	if (S_ISREG(mode))
		return make_object(path, mode & 07777, "", "mknod");
	if (S_ISFIFO(mode) || S_ISSOCK(mode))
		return make_object(path, mode & (S_IFMT | 07777), "", "mknod");
	return -EPERM;
}

/* A symlink is an object whose content is its target (DESIGN section 6);
 * only the kernel resolves it, the daemon never follows one. */
int smuxfs_symlink(const char *target, const char *path)
{
	size_t len = strlen(target);

	if (len == 0)
		return -ENOENT;
	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	return make_object(path, S_IFLNK | 0777, target, "symlink");
}

/* readlink(2): the target, truncated to @size - 1 bytes and NUL-terminated
 * (libfuse's contract; the kernel returns the string's length). */
int smuxfs_readlink(const char *path, char *buf, size_t size)
{
	struct smuxfs *fs = smuxfs_get();
	struct smux_get_opts opts = {.length = size ? size - 1 : 0};
	char key[SMUX_KEY_MAX + 2];
	struct smux_error err;
	struct smux_info info;
	struct smux_sink sink;
	struct smux_ctx ctx;
	bool is_root;
	int rc;

	if (!size)
		return -EINVAL;
	if (!path)
		return -ESTALE;
	if (smuxdir_owns(path))
		return -EINVAL;
	rc = key_of(fs, path, key, sizeof(key), &is_root);
	if (rc)
		return rc;
	if (is_root)
		return -EINVAL;
	smux_sink_buf(&sink, buf, size - 1);
	smuxfs_ctx(&ctx);
	rc = smux_backend_get(fs->root, &ctx, key, &opts, &sink, &info, &err);
	if (rc)
		return smuxfs_errno(&err, "readlink", key);
	if (!S_ISLNK(info.mode))
		return -EINVAL;
	buf[sink.written < size ? sink.written : size - 1] = '\0';
	return 0;
}

/*
 * Hard links where every member of the tree is a file backend
 * (SMUX_CAP_HARDLINK): each replica links in its own tree; in
 * sticky-by-key on the shard both names hash to, else EXDEV (as across
 * two filesystems). Elsewhere EPERM, as a filesystem without hard links
 * answers, with the reason logged once.
 */
/* The new name @tkey of @fkey's file (whose identity was @id) shows the
 * number @fkey shows (inomap.c), whichever replica answers for either:
 * the two names are one file. */
static void link_shows(struct smuxfs *fs, const char *fkey, const char *tkey,
		       uint64_t id)
{
	uint64_t shown = smuxfs_ino_learn(fs, fkey, id, 2); /* two names */
	struct smux_info info;
	bool is_dir;

	if (shown && smuxfs_pin_ino(fs) &&
	    smuxfs_lookup(fs, tkey, false, &is_dir, &info) == 0 && !is_dir)
		smuxfs_ino_shows(fs, tkey, info.file_id, shown,
				 info.nlink > 1 ? info.nlink : 2);
}

int smuxfs_link(const char *from, const char *to)
{
	static atomic_bool told;
	struct smuxfs *fs = smuxfs_get();
	char fkey[SMUX_KEY_MAX + 2], tkey[SMUX_KEY_MAX + 2];
	bool is_dir, from_root, to_root;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	int rc;

	rc = may_modify(fs, from);
	if (!rc)
		rc = may_modify(fs, to);
	if (!rc)
		rc = key_of(fs, from, fkey, sizeof(fkey), &from_root);
	if (!rc)
		rc = key_of(fs, to, tkey, sizeof(tkey), &to_root);
	if (rc)
		return rc;
	if (!(smux_backend_caps(fs->root) & SMUX_CAP_HARDLINK)) {
		if (!atomic_exchange(&told, true))
			smux_log(LOG_INFO,
				 "link %s: hard links need every backend of "
				 "the tree to be a file backend; answering "
				 "EPERM",
				 tkey);
		return -EPERM;
	}
	if (from_root || to_root)
		return -EPERM;
	rc = smuxfs_lookup(fs, fkey, false, &is_dir, &info);
	if (rc)
		return rc;
	if (is_dir)
		return -EPERM;
	if (smuxfs_lookup(fs, tkey, false, &is_dir, NULL) == 0)
		return -EEXIST;
	/* what is written through the open name and not yet committed is
	 * the object's content: the new name must show it */
	rc = smuxfs_ofile_commit_under(fs, fkey);
	if (rc)
		return rc;
	smuxfs_ctx(&ctx);
	rc = smux_backend_link(fs->root, &ctx, fkey, tkey, &err);
	smuxfs_dirnames_add(fs, tkey); /* dirnames.c */
	if (rc)
		return smuxfs_errno(&err, "link", tkey);
	smuxfs_etag_forget(fs, fkey);
	smuxfs_ofile_forget_seen(fs, fkey); /* its link count */
	/* the number the new name shows: the one the file showed, also
	 * when another replica answers for it now (git's local clone
	 * compares the two; inomap.c) */
	link_shows(fs, fkey, tkey, info.file_id);
	/* the new name's writers change what the open one writes */
	smuxfs_ofile_shared(fs, fkey);
	/* an open descriptor of the file whose name is gone counts it */
	smuxfs_fnode_linked(fs, info.file_id);
	/* the kernel knows the old name as its own inode (use_ino = 0): its
	 * cached link count is stale now */
	fuse_invalidate_path(fuse_get_context()->fuse, from);
	return 0;
}
