/* SPDX-License-Identifier: MIT */
/*
 * backends/file_list.c - list for the file backend.
 *
 * Order: keys come out in byte-wise ascending order across the whole
 * result. Each directory's names are sorted with a directory compared as
 * "name/" (so "a.txt" < "a/" < "a0", as S3 orders keys), and a directory's
 * keys all start with "name/", so emitting the sorted names depth first
 * keeps the global order.
 *
 * Memory: one directory's name list per level being walked (one arena of
 * names plus an offset array), never the listing.
 *
 * Containment: the prefix's directory part is opened beneath the root with
 * smux__file_open(); its last, partial segment ("photos/ab") is only a
 * filter on names and never opened. Subdirectories are opened one name at
 * a time beneath their parent. Symlinks, FIFOs and sockets are listed as
 * such (S_IFLNK | 0777 with the target's length as size), never followed;
 * devices and anything else are skipped, and so is the work folder at the
 * root (temp files live only there, file_tmp.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/file_internal.h"

/* Every this many entries the walk checks the context too. */
#define FILEB_LIST_CHECK_EVERY 1024

struct fileb_lister {
	struct smux__file *fb;
	const struct smux_ctx *ctx;
	smux_list_fn fn;
	void *arg;
	struct smux_error *err;
	const char *prefix; /* for error messages */
	size_t prefix_len;
	bool recursive;
	const char *fold; /* a delimiter other than "/" folded in a
			     recursive walk, or NULL */
	size_t fold_len;
	size_t cp_len; /* length of the last common prefix emitted, 0 none */
	unsigned long emitted;
	char cp[SMUX_KEY_MAX + 1];
	char key[SMUX_KEY_MAX + 1]; /* the key being built */
};

/* One directory's matching names, each NUL-terminated in one arena, a
 * directory's with a '/' appended. */
struct fileb_names {
	char *arena;
	size_t used, cap;
	size_t *off;
	size_t n, n_cap;
};

static void fileb_names_free(struct fileb_names *ns)
{
	free(ns->arena);
	free(ns->off);
}

static int fileb_names_add(struct fileb_names *ns, const char *name, size_t len,
			   bool is_dir)
{
	size_t need = len + (is_dir ? 2 : 1);

	if (ns->n == ns->n_cap) {
		size_t cap = ns->n_cap ? 2 * ns->n_cap : 64;
		size_t *off = realloc(ns->off, cap * sizeof(*off));

		if (!off)
			return -ENOMEM;
		ns->off = off;
		ns->n_cap = cap;
	}
	if (ns->cap - ns->used < need) {
		size_t cap = ns->cap ? 2 * ns->cap : 4096;
		char *arena;

		while (cap - ns->used < need)
			cap *= 2;
		arena = realloc(ns->arena, cap);
		if (!arena)
			return -ENOMEM;
		ns->arena = arena;
		ns->cap = cap;
	}
	memcpy(ns->arena + ns->used, name, len);
	if (is_dir)
		ns->arena[ns->used + len++] = '/';
	ns->arena[ns->used + len] = '\0';
	ns->off[ns->n++] = ns->used;
	ns->used += len + 1;
	return 0;
}

static int fileb_names_cmp(const void *a, const void *b, void *arena)
{
	const char *base = arena;

	return strcmp(base + *(const size_t *)a, base + *(const size_t *)b);
}

/* The work folder: the one name hidden, and only at the root. */
static bool fileb_is_work(const char *name, size_t len)
{
	return len == SMUX__FILE_WORK_DIR_LEN &&
	       !memcmp(name, SMUX__FILE_WORK_DIR, SMUX__FILE_WORK_DIR_LEN);
}

/* Reads the listable names of @dirfd starting with @filter, sorted;
 * @at_root: @dirfd is the backend's root. */
static int fileb_read_names(struct fileb_lister *l, int dirfd, bool at_root,
			    const char *filter, size_t flen,
			    struct fileb_names *ns)
{
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return smux__file_fail(l->fb, l->err, errno, "list", l->prefix);
	d = fdopendir(fd);
	if (!d) {
		rc = smux__file_fail(l->fb, l->err, errno, "list", l->prefix);
		close(fd);
		return rc;
	}
	for (;;) {
		unsigned char type;
		struct stat st;
		size_t len;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				rc = smux__file_fail(l->fb, l->err, errno,
						     "list", l->prefix);
			break;
		}
		len = strlen(de->d_name);
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (at_root && fileb_is_work(de->d_name, len)))
			continue;
		if (len < flen || memcmp(de->d_name, filter, flen) != 0)
			continue;
		type = de->d_type;
		if (type == DT_UNKNOWN) {
			if (fstatat(dirfd, de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) < 0)
				continue; /* gone meanwhile */
			type = IFTODT(st.st_mode);
		}
		if (type != DT_DIR && type != DT_REG && type != DT_LNK &&
		    type != DT_FIFO && type != DT_SOCK)
			continue;
		if (fileb_names_add(ns, de->d_name, len, type == DT_DIR)) {
			rc = smux__file_fail(l->fb, l->err, ENOMEM, "list",
					     l->prefix);
			break;
		}
	}
	closedir(d);
	if (!rc && ns->n > 1)
		qsort_r(ns->off, ns->n, sizeof(*ns->off), fileb_names_cmp,
			ns->arena);
	return rc;
}

/* Hands l->key[0..@keylen) to the callback, folded by l->fold. Returns 0,
 * 1 when the callback stopped the listing, or a negative errno. */
static int fileb_emit(struct fileb_lister *l, size_t keylen, bool is_prefix,
		      const struct smux_info *info)
{
	struct smux_list_entry e = {.key = l->key, .is_prefix = is_prefix};
	int rc;

	l->key[keylen] = '\0';
	if (l->fold && keylen > l->prefix_len) {
		const char *p =
			memmem(l->key + l->prefix_len, keylen - l->prefix_len,
			       l->fold, l->fold_len);

		if (p) {
			size_t n = (size_t)(p - l->key) + l->fold_len;

			/* Keys sharing a common prefix are contiguous. */
			if (l->cp_len == n && !memcmp(l->cp, l->key, n))
				return 0;
			memcpy(l->cp, l->key, n);
			l->cp[n] = '\0';
			l->cp_len = n;
			e.key = l->cp;
			e.is_prefix = true;
		}
	}
	if (!e.is_prefix && info)
		e.info = *info;
	else
		e.info.mode = S_IFDIR;
	if (++l->emitted % FILEB_LIST_CHECK_EVERY == 0) {
		rc = smux__file_check_ctx(l->fb, l->ctx, l->err);
		if (rc)
			return rc;
	}
	return l->fn(l->arg, &e) ? 1 : 0;
}

/*
 * Lists the directory @dirfd whose keys start with l->key[0..@keylen)
 * (which ends in '/' or is empty), names filtered by @filter. @marker: a
 * recursive walk reached this directory whole, so an empty one shows as
 * its marker.
 */
static int fileb_list_dir(struct fileb_lister *l, int dirfd, size_t keylen,
			  const char *filter, size_t flen, bool marker)
{
	struct fileb_names ns = {0};
	struct smux_info info;
	struct stat st;
	size_t i;
	int rc;

	rc = smux__file_check_ctx(l->fb, l->ctx, l->err);
	if (!rc)
		rc = fileb_read_names(l, dirfd, keylen == 0, filter, flen, &ns);
	if (rc)
		goto out;
	if (marker && ns.n == 0) {
		if (fstat(dirfd, &st) < 0) {
			rc = smux__file_fail(l->fb, l->err, errno, "list",
					     l->prefix);
			goto out;
		}
		smux__file_fill_info(&st, &info);
		rc = fileb_emit(l, keylen, false, &info);
		goto out;
	}
	for (i = 0; i < ns.n && !rc; i++) {
		char *name = ns.arena + ns.off[i];
		size_t n = strlen(name);
		bool is_dir = name[n - 1] == '/';
		int child;

		if (keylen + n > SMUX_KEY_MAX)
			continue; /* not addressable as a key */
		memcpy(l->key + keylen, name, n);
		if (is_dir && !l->recursive) {
			rc = fileb_emit(l, keylen + n, true, NULL);
		} else if (is_dir) {
			name[n - 1] = '\0';
			child = smux__file_open(dirfd, name,
						O_RDONLY | O_DIRECTORY, 0);
			if (child == -ENOENT || child == -ENOTDIR ||
			    child == -ELOOP)
				continue; /* replaced meanwhile */
			if (child < 0) {
				rc = smux__file_fail(l->fb, l->err, -child,
						     "list", l->prefix);
				break;
			}
			rc = fileb_list_dir(l, child, keylen + n, "", 0, true);
			close(child);
		} else {
			if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) <
				    0 ||
			    (!S_ISREG(st.st_mode) &&
			     !smux__file_is_special(st.st_mode)))
				continue; /* gone or replaced meanwhile */
			smux__file_fill_info(&st, &info);
			rc = fileb_emit(l, keylen + n, false, &info);
		}
	}
out:
	fileb_names_free(&ns);
	return rc;
}

int smux__file_list(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *prefix, const char *delimiter, smux_list_fn fn,
		    void *arg, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char dir[SMUX_KEY_MAX + 1];
	struct fileb_lister *l;
	const char *slash;
	size_t len, dlen;
	int fd, rc;

	if (!fb)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      b ? b->name : NULL, "not a file backend");
	if (!prefix)
		prefix = "";
	if (prefix[0]) {
		rc = smux_key_check(prefix, SMUX_KEY_PREFIX, fb->base.name,
				    err);
		if (rc)
			return rc;
	}
	len = strlen(prefix);
	if (len > SMUX_KEY_MAX)
		return smux_error_set(err, SMUX_E_KEY_TOO_LONG, fb->base.name,
				      "list prefix of %zu bytes is too long",
				      len);
	slash = strrchr(prefix, '/');
	dlen = slash ? (size_t)(slash - prefix) + 1 : 0;
	memcpy(dir, prefix, dlen ? dlen - 1 : 0);
	dir[dlen ? dlen - 1 : 0] = '\0';

	if (dlen > SMUX__FILE_WORK_DIR_LEN &&
	    !strncmp(dir, SMUX__FILE_WORK_DIR, SMUX__FILE_WORK_DIR_LEN) &&
	    (dir[SMUX__FILE_WORK_DIR_LEN] == '\0' ||
	     dir[SMUX__FILE_WORK_DIR_LEN] == '/'))
		return 0; /* the work folder holds no keys */
	fd = smux__file_open(fb->root_fd, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd == -ENOENT || fd == -ENOTDIR)
		return 0; /* nothing under a missing directory */
	if (fd < 0)
		return smux__file_fail(fb, err, -fd, "list", prefix);

	l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		return smux__file_fail(fb, err, ENOMEM, "list", prefix);
	}
	l->fb = fb;
	l->ctx = ctx;
	l->fn = fn;
	l->arg = arg;
	l->err = err;
	l->prefix = prefix;
	l->prefix_len = len;
	l->recursive = !delimiter || strcmp(delimiter, "/") != 0;
	if (delimiter && delimiter[0] && l->recursive) {
		l->fold = delimiter;
		l->fold_len = strlen(delimiter);
	}
	memcpy(l->key, prefix, dlen);
	rc = fileb_list_dir(l, fd, dlen, prefix + dlen, len - dlen,
			    l->recursive && len == dlen && dlen > 0);
	free(l);
	close(fd);
	return rc > 0 ? 0 : rc;
}
