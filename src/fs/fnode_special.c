/* SPDX-License-Identifier: MIT */
/*
 * fnode_special.c - FIFOs, sockets and device nodes whose name is gone
 * while the kernel still holds them open.
 *
 * Why: opening one of these never reaches the daemon (the kernel serves
 * a FIFO itself), so no handle of ours stands for it; once its name is
 * unlinked or replaced by a rename through the mount, the GETATTR that
 * fstat(2) sends has no path, and libfuse answers ESTALE. On a local
 * filesystem fstat shows the node with nlink 0 and fchmod works:
 * the classic "mkfifo, open both ends, unlink" pattern, and `fstat` of an
 * O_PATH descriptor of a socket.
 *
 * So the channel hook (fnode.c) shows every reply to us: the attributes
 * of each such node the kernel was given (LOOKUP, MKNOD, LINK entries and
 * READDIRPLUS entries; refreshed by GETATTR and SETATTR replies) are kept
 * by node id until the kernel forgets the node (FORGET, BATCH_FORGET).
 * A GETATTR or SETATTR of a kept node answered ESTALE is answered here
 * instead: the node as the kernel last saw it, its link count one lower
 * (once: the name that went) and its ctime moved, and a
 * SETATTR's mode, owner and times applied to what is kept (nothing is
 * stored anywhere: the node has no name left to store it under). Only the
 * node's owner or root may change it, and only root its owner.
 *
 * A name removed behind the mount is not one of these: a GETATTR of its
 * node is answered ENOENT by our getattr, which could as well be a
 * stat(2) of the path, and stays so.
 *
 * Regular files and directories are not kept here: their open handles
 * reach the daemon and fnode.c serves them from the handle.
 *
 * Locks: special.lock protects the table; nothing else is taken under it.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"

#define SPECIAL_BUCKETS 1024
/* Nodes kept at most (about 100 bytes each); past it a node is not kept
 * and its fstat after the name went stays ESTALE. */
#define SPECIAL_MAX 65536

struct special {
	uint64_t nodeid;
	struct fuse_attr attr; /* as the kernel was last told */
	bool gone;	       /* answered here once: nlink lowered */
	struct special *next;
};

static struct {
	pthread_mutex_t lock;
	struct special *buckets[SPECIAL_BUCKETS];
	atomic_uint count; /* read without the lock: 0 skips every lookup */
} special = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The current request's SETATTR argument and caller (set by
 * smuxfs_special_request in the thread that serves it). */
static __thread struct {
	bool setattr_valid;
	struct fuse_setattr_in sa;
	uint32_t uid;
} req;

static bool special_mode(uint32_t mode)
{
	return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) ||
	       S_ISBLK(mode);
}

/* The kept node @nodeid, or NULL. Caller holds special.lock. */
static struct special **find(uint64_t nodeid)
{
	struct special **p = &special.buckets[nodeid % SPECIAL_BUCKETS];

	while (*p && (*p)->nodeid != nodeid)
		p = &(*p)->next;
	return p;
}

/* Keeps (or refreshes) @nodeid's attributes @a; @add: a new entry may be
 * made (an entry reply), else only a kept one is refreshed. */
static void keep(uint64_t nodeid, const struct fuse_attr *a, bool add)
{
	struct special **p, *s;

	if (!nodeid || !special_mode(a->mode))
		return;
	if (!add && atomic_load(&special.count) == 0)
		return;
	pthread_mutex_lock(&special.lock);
	p = find(nodeid);
	if (*p) {
		(*p)->attr = *a;
		(*p)->gone = false; /* named again (a LOOKUP found it) */
	} else if (add && atomic_load(&special.count) < SPECIAL_MAX &&
		   (s = calloc(1, sizeof(*s))) != NULL) {
		s->nodeid = nodeid;
		s->attr = *a;
		*p = s;
		atomic_fetch_add(&special.count, 1);
	}
	pthread_mutex_unlock(&special.lock);
}

static void forget(uint64_t nodeid)
{
	struct special **p, *s = NULL;

	if (atomic_load(&special.count) == 0)
		return;
	pthread_mutex_lock(&special.lock);
	p = find(nodeid);
	if (*p) {
		s = *p;
		*p = s->next;
		atomic_fetch_sub(&special.count, 1);
	}
	pthread_mutex_unlock(&special.lock);
	free(s);
}

void smuxfs_special_request(const struct fuse_in_header *in, size_t n)
{
	req.uid = in->uid;
	req.setattr_valid =
		in->opcode == FUSE_SETATTR && n >= sizeof(*in) + sizeof(req.sa);
	if (req.setattr_valid)
		memcpy(&req.sa, in + 1, sizeof(req.sa));
	else if (in->opcode == FUSE_FORGET)
		forget(in->nodeid);
	else if (in->opcode == FUSE_BATCH_FORGET &&
		 n >= sizeof(*in) + sizeof(struct fuse_batch_forget_in)) {
		const struct fuse_batch_forget_in *b = (const void *)(in + 1);
		const struct fuse_forget_one *one = (const void *)(b + 1);
		size_t room = (n - sizeof(*in) - sizeof(*b)) / sizeof(*one);

		for (size_t i = 0; i < b->count && i < room; i++) {
			struct fuse_forget_one f;

			memcpy(&f, &one[i], sizeof(f)); /* may be unaligned */
			forget(f.nodeid);
		}
	}
}

void smuxfs_special_entry(const struct iovec *iov, int count, size_t off)
{
	struct fuse_entry_out e;

	if (smuxfs_iov_at(iov, count, off, &e, sizeof(e), false))
		keep(e.nodeid, &e.attr, true);
}

void smuxfs_special_reply(const struct iovec *iov, int count, uint32_t opcode,
			  uint64_t nodeid)
{
	const size_t h = sizeof(struct fuse_out_header);
	struct fuse_attr_out a;

	switch (opcode) {
	case FUSE_LOOKUP:
	case FUSE_MKNOD:
	case FUSE_LINK:
		smuxfs_special_entry(iov, count, h);
		break;
	case FUSE_GETATTR:
	case FUSE_SETATTR:
		if (smuxfs_iov_at(iov, count, h, &a, sizeof(a), false))
			keep(nodeid, &a.attr, false);
		break;
	default:
		break;
	}
}

/* Applies the current SETATTR to @a at @now; 0 or -EPERM. */
static int apply_setattr(struct fuse_attr *a, const struct timespec *now)
{
	const struct fuse_setattr_in *sa = &req.sa;

	if (req.uid != 0 &&
	    (req.uid != a->uid || (sa->valid & (FATTR_UID | FATTR_GID))))
		return -EPERM;
	if (sa->valid & FATTR_MODE)
		a->mode = (a->mode & S_IFMT) | (sa->mode & 07777);
	if (sa->valid & FATTR_UID)
		a->uid = sa->uid;
	if (sa->valid & FATTR_GID)
		a->gid = sa->gid;
	/* a chown (root's: nobody else's gets here) clears setuid, and
	 * setgid with the group's execute bit, of anything but a directory */
	if ((sa->valid & (FATTR_UID | FATTR_GID)) && !S_ISDIR(a->mode))
		a->mode &= ~(S_ISUID | ((a->mode & S_IXGRP) ? S_ISGID : 0));
	if (sa->valid & FATTR_ATIME_NOW) {
		a->atime = (uint64_t)now->tv_sec;
		a->atimensec = (uint32_t)now->tv_nsec;
	} else if (sa->valid & FATTR_ATIME) {
		a->atime = sa->atime;
		a->atimensec = sa->atimensec;
	}
	if (sa->valid & FATTR_MTIME_NOW) {
		a->mtime = (uint64_t)now->tv_sec;
		a->mtimensec = (uint32_t)now->tv_nsec;
	} else if (sa->valid & FATTR_MTIME) {
		a->mtime = sa->mtime;
		a->mtimensec = sa->mtimensec;
	}
	return 0;
}

bool smuxfs_special_answer(int fd, const struct iovec *iov, int count,
			   uint32_t opcode, uint64_t unique, uint64_t nodeid)
{
	struct {
		struct fuse_out_header out;
		struct fuse_attr_out attr;
	} r;
	struct fuse_out_header out;
	struct timespec now;
	struct special *s;
	int rc = 0;

	if ((opcode != FUSE_GETATTR && opcode != FUSE_SETATTR) ||
	    (opcode == FUSE_SETATTR && !req.setattr_valid) ||
	    atomic_load(&special.count) == 0 ||
	    !smuxfs_iov_at(iov, count, 0, &out, sizeof(out), false) ||
	    out.unique != unique || out.error != -ESTALE)
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	memset(&r, 0, sizeof(r));
	pthread_mutex_lock(&special.lock);
	s = *find(nodeid);
	if (s) {
		/* the first answer for it: its name went, as unlink(2) */
		if (!s->gone) {
			s->gone = true;
			if (s->attr.nlink > 0)
				s->attr.nlink--;
			s->attr.ctime = (uint64_t)now.tv_sec;
			s->attr.ctimensec = (uint32_t)now.tv_nsec;
		}
		if (opcode == FUSE_SETATTR) {
			rc = apply_setattr(&s->attr, &now);
			if (rc == 0) {
				s->attr.ctime = (uint64_t)now.tv_sec;
				s->attr.ctimensec = (uint32_t)now.tv_nsec;
			}
		}
		r.attr.attr = s->attr;
	}
	pthread_mutex_unlock(&special.lock);
	if (!s)
		return false;
	r.out.unique = unique;
	if (rc) {
		r.out.len = sizeof(r.out);
		r.out.error = rc;
	} else {
		r.out.len = sizeof(r); /* attr_valid 0: asked for each time */
	}
	/* a failed write means the request is gone (interrupted) */
	if (write(fd, &r, r.out.len) < 0) {
		/* nothing waits for the answer */
	}
	return true;
}

void smuxfs_special_free(void)
{
	pthread_mutex_lock(&special.lock);
	for (unsigned b = 0; b < SPECIAL_BUCKETS; b++) {
		while (special.buckets[b]) {
			struct special *s = special.buckets[b];

			special.buckets[b] = s->next;
			free(s);
		}
	}
	atomic_store(&special.count, 0);
	pthread_mutex_unlock(&special.lock);
}
