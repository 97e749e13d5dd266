/* SPDX-License-Identifier: MIT */
/*
 * mux_meta.c - whether two replicas of a key are the same, and making one
 * the other's where a copy of its bytes would not (mux_internal.h): the
 * reconcile of a write intent (mux_repair.c) and the repair's copies.
 *
 * Two replicas are the same when their bytes are (the version token is
 * not enough: a file backend's is size and mtime, and two writes land in
 * one coarse timestamp tick) and so are their mode, owner and user.
 * extended attributes - what a chmod, chown, setfattr killed between the
 * replicas leaves different under the same bytes and mtime.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mux_internal.h"

/* The names @m keeps for @key, into @buf (SMUX_XATTR_SIZE_MAX bytes). */
static long list_xattrs(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct mux_member *m, const char *key, char *buf,
			long *len, struct smux_error *err)
{
	struct smux__call call = {.op = SMUX__OP_LISTXATTR,
				  .key = key,
				  .rbuf = buf,
				  .len = SMUX_XATTR_SIZE_MAX,
				  .nread = len};

	return smux__member_call(mux, ctx, m, &call, false, err);
}

/* The value of @name of @key on @m, into @buf; -ENOENT when it has none. */
static long get_xattr(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *m, const char *key, const char *name,
		      char *buf, long *len, struct smux_error *err)
{
	struct smux__call call = {.op = SMUX__OP_GETXATTR,
				  .key = key,
				  .key2 = name,
				  .rbuf = buf,
				  .len = SMUX_XATTR_SIZE_MAX,
				  .nread = len};
	long rc = smux__member_call(mux, ctx, m, &call, false, err);

	if (rc < 0 && err->e.code == SMUX_E_NO_ATTR)
		return -ENOENT;
	if (rc >= 0)
		*len = rc;
	return rc < 0 ? rc : 0;
}

/* Whether @name is one of the @len bytes of NUL-terminated names. */
static bool xattr_listed(const char *names, size_t len, const char *name)
{
	for (size_t at = 0; at < len; at += strlen(names + at) + 1)
		if (strcmp(names + at, name) == 0)
			return true;
	return false;
}

long smux__meta_copy_xattrs(struct smux_mux *mux, const struct smux_ctx *ctx,
			    struct mux_member *src, struct mux_member *dst,
			    const char *key, struct smux_error *err)
{
	char *names = NULL, *old = NULL, *value = NULL;
	long n_names = 0, n_old = 0, rc, n = 0;

	if (!(smux_backend_caps(src->backend) &
	      smux_backend_caps(dst->backend) & SMUX_CAP_XATTR))
		return 0;
	names = malloc(SMUX_XATTR_SIZE_MAX);
	old = malloc(SMUX_XATTR_SIZE_MAX);
	value = malloc(SMUX_XATTR_SIZE_MAX);
	if (!names || !old || !value) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				    "repair of %s: xattr buffers", key);
		goto out_free;
	}
	rc = list_xattrs(mux, ctx, src, key, names, &n_names, err);
	if (rc >= 0)
		rc = list_xattrs(mux, ctx, dst, key, old, &n_old, err);
	if (rc < 0)
		goto out_free;
	/* names @dst has and @src has not */
	for (long at = 0; at < n_old; at += (long)strlen(old + at) + 1) {
		struct smux__call rm = {.op = SMUX__OP_REMOVEXATTR,
					.key = key,
					.key2 = old + at};

		if (xattr_listed(names, (size_t)n_names, old + at))
			continue;
		rc = smux__member_call(mux, ctx, dst, &rm, false, err);
		if (rc < 0 && err->e.code != SMUX_E_NO_ATTR)
			goto out_free;
	}
	for (long at = 0; at < n_names; at += (long)strlen(names + at) + 1) {
		struct smux__call set = {.op = SMUX__OP_SETXATTR,
					 .key = key,
					 .key2 = names + at,
					 .wbuf = value};

		rc = get_xattr(mux, ctx, src, key, names + at, value, &n, err);
		if (rc == -ENOENT)
			continue; /* removed meanwhile */
		if (rc < 0)
			goto out_free;
		set.len = (size_t)n;
		rc = smux__member_call(mux, ctx, dst, &set, false, err);
		if (rc < 0)
			goto out_free;
	}
	rc = 0;
out_free:
	free(value);
	free(old);
	free(names);
	return rc;
}

/* The chunk same_bytes compares at a time. */
#define SAME_CHUNK ((size_t)1 << 20)

long smux__meta_same_bytes(struct smux_mux *mux, const struct smux_ctx *ctx,
			   struct mux_member *a, struct mux_member *b,
			   const char *key, uint64_t size, bool *same,
			   struct smux_error *err)
{
	unsigned char *buf = malloc(2 * SAME_CHUNK);
	uint64_t off = 0;
	long rc = 0;

	*same = false;
	if (!buf)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	while (rc == 0 && off < size) {
		size_t n = size - off < SAME_CHUNK ? (size_t)(size - off)
						   : SAME_CHUNK;
		struct smux_get_opts o = {.offset = off, .length = n};
		struct smux_sink sa, sb;
		struct smux__call ga = {.op = SMUX__OP_GET,
					.key = key,
					.get_opts = &o,
					.sink = &sa};
		struct smux__call gb = {.op = SMUX__OP_GET,
					.key = key,
					.get_opts = &o,
					.sink = &sb};

		smux_sink_buf(&sa, buf, n);
		smux_sink_buf(&sb, buf + SAME_CHUNK, n);
		rc = smux__member_call(mux, ctx, a, &ga, false, err);
		if (rc == 0)
			rc = smux__member_call(mux, ctx, b, &gb, false, err);
		if (rc < 0)
			break;
		if (sa.written != n || sb.written != n ||
		    memcmp(buf, buf + SAME_CHUNK, n) != 0)
			goto out; /* not the same (a size changed: copy) */
		off += n;
	}
	*same = rc == 0;
out:
	free(buf);
	return rc < 0 ? rc : 0;
}

/* Whether @a and @b keep the same extended attributes of @key (*@same;
 * true when either keeps none at all). */
static long same_xattrs(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct mux_member *a, struct mux_member *b,
			const char *key, bool *same, struct smux_error *err)
{
	char *na = malloc(SMUX_XATTR_SIZE_MAX),
	     *nb = malloc(SMUX_XATTR_SIZE_MAX);
	char *va = malloc(SMUX_XATTR_SIZE_MAX),
	     *vb = malloc(SMUX_XATTR_SIZE_MAX);
	long la = 0, lb = 0, rc;

	*same = true;
	if (!(smux_backend_caps(a->backend) & smux_backend_caps(b->backend) &
	      SMUX_CAP_XATTR)) {
		rc = 0;
		goto out;
	}
	if (!na || !nb || !va || !vb) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				    "compare xattrs of %s", key);
		goto out;
	}
	rc = list_xattrs(mux, ctx, a, key, na, &la, err);
	if (rc >= 0)
		rc = list_xattrs(mux, ctx, b, key, nb, &lb, err);
	if (rc < 0)
		goto out;
	rc = 0;
	/* as many names, each of @a's on @b with the same value */
	*same = la == lb;
	for (long at = 0; *same && at < la; at += (long)strlen(na + at) + 1) {
		long xa = 0, xb = 0;

		rc = get_xattr(mux, ctx, a, key, na + at, va, &xa, err);
		if (rc == 0)
			rc = get_xattr(mux, ctx, b, key, na + at, vb, &xb, err);
		if (rc == -ENOENT) { /* one of them lacks it (or lost it) */
			*same = false;
			rc = 0;
			break;
		}
		if (rc)
			break;
		*same = xa == xb && memcmp(va, vb, (size_t)xa) == 0;
	}
out:
	free(vb);
	free(va);
	free(nb);
	free(na);
	return rc;
}

/* Whether @err says the replica refuses the change for good: it cannot
 * keep it, or it is not allowed to (EPERM: a chown by a non-root daemon,
 * a squashing NFS) - not a read-only remount or an expired token, which
 * pass (the intent is tried again). */
static bool unfixable(const struct smux_error *err)
{
	return err->e.code == SMUX_E_NOT_SUPPORTED ||
	       (err->e.code == SMUX_E_PERMISSION_DENIED &&
		err->e.sys_errno == EPERM);
}

long smux__meta_fix(struct smux_mux *mux, const struct smux_ctx *ctx,
		    struct mux_member *src, struct mux_member *dst,
		    const char *key, const struct smux_info *si,
		    const struct smux_info *di, bool *fixed,
		    struct smux_error *err)
{
	struct smux_setattr a = {.uid = SMUX_ID_NONE, .gid = SMUX_ID_NONE};
	struct smux__call set = {
		.op = SMUX__OP_SETATTR, .key = key, .setattr = &a};
	/* mode and owner only between members that keep them (SMUX_CAP_OWNER:
	 * another makes them up - a WebDAV directory's 0755 - and setting
	 * it on a real file would loosen it) */
	bool kept = smux_backend_caps(src->backend) &
		    smux_backend_caps(dst->backend) & SMUX_CAP_OWNER;
	bool same;
	long rc;

	*fixed = false;
	/* a symlink's own mode means nothing (never followed here) */
	if (kept && si->mode && di->mode && !S_ISLNK(si->mode) &&
	    (si->mode & 07777) != (di->mode & 07777)) {
		a.flags |= SMUX_SET_MODE;
		a.mode = si->mode & 07777;
	}
	/* each id only where both know it (an S3 object may keep one) */
	if (kept && si->has_owner && di->has_owner) {
		if (si->uid != SMUX_ID_NONE && di->uid != SMUX_ID_NONE &&
		    si->uid != di->uid)
			a.uid = si->uid;
		if (si->gid != SMUX_ID_NONE && di->gid != SMUX_ID_NONE &&
		    si->gid != di->gid)
			a.gid = si->gid;
		if (a.uid != SMUX_ID_NONE || a.gid != SMUX_ID_NONE)
			a.flags |= SMUX_SET_OWNER;
	}
	if (a.flags) {
		rc = smux__member_call(mux, ctx, dst, &set, false, err);
		/* what the replica will not take (a chown a non-root daemon,
		 * a squashing NFS or a backend refuses) stays as it is: a
		 * reconcile that could never end would read both copies
		 * again at every pass */
		if (rc < 0 && !unfixable(err))
			return rc;
		*fixed = rc == 0;
	}
	/* none on a symlink, FIFO or socket (as a copy of one carries) */
	if (S_ISLNK(si->mode) || S_ISFIFO(si->mode) || S_ISSOCK(si->mode))
		return 0;
	rc = same_xattrs(mux, ctx, src, dst, key, &same, err);
	if (rc == 0 && !same) {
		rc = smux__meta_copy_xattrs(mux, ctx, src, dst, key, err);
		*fixed |= rc == 0;
		if (rc < 0 && unfixable(err))
			rc = 0;
	}
	return rc < 0 ? rc : 0;
}
