/* SPDX-License-Identifier: MIT */
/*
 * passthrough.c - FUSE passthrough: the kernel reads and writes an open
 * file's backing file itself, without a request to the daemon per
 * read(2) or write(2) (Linux 6.9+, CONFIG_FUSE_PASSTHROUGH).
 *
 * Why: an `echo line >> log` costs OPEN + WRITE + RELEASE round trips; a
 * SQLite insert a dozen WRITEs. Where a write through the mount is
 * exactly a pwrite of one local file - a writer in place on one copy that
 * can never move to another member (smux_writer_ops.passthrough_fd) - the
 * kernel may as well make that pwrite. What the daemon promises is
 * unchanged: the file is the stored object (a write behind the mount on
 * the backend directory is the same thing, which readers already follow),
 * close() keeps what was written, fsync(2) still reaches the daemon and
 * syncs the file, and every attribute change still goes through it.
 *
 * libfuse 3.14 knows nothing of it, so the channel hook (fnode.c) does
 * what libfuse 3.17 would: asks for FUSE_PASSTHROUGH in the INIT reply
 * (with max_stack_depth 1), registers the writer's descriptor with the
 * FUSE device (FUSE_DEV_IOC_BACKING_OPEN, root only) and puts
 * FOPEN_PASSTHROUGH and the backing id in the OPEN or CREATE reply.
 *
 * The kernel's rule per kernel inode (fs/fuse/iomode.c): while one open
 * of a node is in passthrough, every open of it must be, on the same
 * backing id; while one is cached (page cache), none may be. A reply
 * that breaks it fails the program's open(2) with EIO. So this table
 * counts, per node, the handles opened each way, and never lets the
 * kernel see a conflict: a node starts passthrough only while it has no
 * other handle, and while it has passthrough handles every new handle of
 * it (a reader too) gets the same backing. The counts are taken before
 * the reply reaches the kernel and dropped when the daemon releases the
 * handle (after the kernel let go of it), so they are never below the
 * kernel's. The node lets go of the backing id with its last passthrough
 * handle: the writer's ofile keeps it (struct smuxfs_pt_reg), so the
 * next open of that writer needs no registering again.
 *
 * Not passthrough: files with set-id bits (a write through the backing
 * file is made with the daemon's credentials, which would not clear
 * them), trees of several copies, staged writers, anything the writer
 * could not hand over, and every open when [mount] passthrough = off or
 * the kernel or the daemon's privileges do not allow it (then nothing
 * changes).
 *
 * Locks: pt.lock protects the table; it is taken with no other lock of
 * the daemon held, and nothing is taken under it.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/fs.h"

/* The kernel's ABI (include/uapi/linux/fuse.h 7.40), newer than the
 * headers Debian 12 ships. */
#define PT_INIT_FLAG	(UINT64_C(1) << 37) /* FUSE_PASSTHROUGH */
#define PT_OPEN_FLAG	(1u << 7)	    /* FOPEN_PASSTHROUGH */
#define PT_NOFLUSH_FLAG (1u << 5)	    /* FOPEN_NOFLUSH */
struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_IOC_BACKING_OPEN  _IOW(229, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* fuse_init_out: max_stack_depth follows flags2 (was unused[0]) */
#define PT_INIT_FLAGS2 offsetof(struct fuse_init_out, flags2)
#define PT_INIT_DEPTH  (PT_INIT_FLAGS2 + sizeof(uint32_t))
/* fuse_open_out: backing_id is what older headers call padding */
#define PT_OPEN_FLAGS offsetof(struct fuse_open_out, open_flags)
#define PT_OPEN_ID    (PT_OPEN_FLAGS + sizeof(uint32_t))

/* One kernel node with open handles counted. */
struct smuxfs_pt_node {
	uint64_t nodeid;
	unsigned cached;	  /* handles the kernel opened otherwise */
	unsigned pt;		  /* handles in passthrough on reg's id */
	struct smuxfs_pt_reg reg; /* the backing file, held while pt */
	struct smuxfs_pt_node *next;
};

/* The kernel offered passthrough in the INIT the current thread read
 * (libfuse answers INIT in the thread that read it). */
static __thread bool init_offers;

static unsigned pt_bucket(uint64_t nodeid)
{
	return (unsigned)(nodeid % SMUXFS_PT_BUCKETS);
}

void smuxfs_pt_init_request(const void *arg, size_t have)
{
	const struct fuse_init_in *in = arg;
	uint64_t flags;

	init_offers = false;
	if (have < offsetof(struct fuse_init_in, flags2) + sizeof(uint32_t))
		return;
	flags = in->flags;
	if (flags & FUSE_INIT_EXT)
		flags |= (uint64_t)in->flags2 << 32;
	init_offers = (flags & FUSE_INIT_EXT) && (flags & PT_INIT_FLAG);
}

void smuxfs_pt_init_reply(struct smuxfs *fs, const struct iovec *iov, int count)
{
	const size_t h = sizeof(struct fuse_out_header);
	struct fuse_out_header out;
	uint32_t flags, flags2, depth = 1;

	if (!fs->pt.want || !init_offers ||
	    !smuxfs_iov_at(iov, count, 0, &out, sizeof(out), false) ||
	    out.error != 0 || out.len < h + PT_INIT_DEPTH + sizeof(depth) ||
	    !smuxfs_iov_at(iov, count,
			   h + offsetof(struct fuse_init_out, flags), &flags,
			   sizeof(flags), false) ||
	    !smuxfs_iov_at(iov, count, h + PT_INIT_FLAGS2, &flags2,
			   sizeof(flags2), false))
		return;
	/* the kernel refuses passthrough with a writeback cache */
	if (flags & FUSE_WRITEBACK_CACHE)
		return;
	if (!(flags & FUSE_INIT_EXT))
		flags2 = 0; /* libfuse did not answer in the extended form */
	flags |= FUSE_INIT_EXT;
	flags2 |= (uint32_t)(PT_INIT_FLAG >> 32);
	if (!smuxfs_iov_at(iov, count,
			   h + offsetof(struct fuse_init_out, flags), &flags,
			   sizeof(flags), true) ||
	    !smuxfs_iov_at(iov, count, h + PT_INIT_FLAGS2, &flags2,
			   sizeof(flags2), true) ||
	    !smuxfs_iov_at(iov, count, h + PT_INIT_DEPTH, &depth, sizeof(depth),
			   true))
		return;
	atomic_store(&fs->pt.on, true);
	smux_log(LOG_INFO, "files written in place on one copy are read and "
			   "written by the kernel directly (FUSE passthrough)");
}

/* The entry of @nodeid, added when @add. Caller holds pt.lock. */
static struct smuxfs_pt_node *pt_node(struct smuxfs *fs, uint64_t nodeid,
				      bool add)
{
	struct smuxfs_pt_node **b = &fs->pt.bucket[pt_bucket(nodeid)], *n;

	for (n = *b; n; n = n->next)
		if (n->nodeid == nodeid)
			return n;
	if (!add)
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->nodeid = nodeid;
	n->next = *b;
	*b = n;
	return n;
}

/* Drops @n when it counts nothing. Caller holds pt.lock. */
static void pt_node_put(struct smuxfs *fs, struct smuxfs_pt_node *n)
{
	struct smuxfs_pt_node **p = &fs->pt.bucket[pt_bucket(n->nodeid)];

	if (n->cached || n->pt)
		return;
	while (*p != n)
		p = &(*p)->next;
	*p = n->next;
	free(n);
}

/* Registers @fd as a backing file of the connection: the id, or -1
 * (logged once: not root, a kernel without it, a stacked filesystem). */
static int32_t pt_backing_open(struct smuxfs *fs, int fd)
{
	struct pt_backing_map map = {.fd = fd};
	int id = ioctl(fs->pt.devfd, PT_IOC_BACKING_OPEN, &map);

	if (id >= 0) {
		atomic_fetch_add(&fs->pt.backings, 1);
		atomic_fetch_add(&fs->pt.registered, 1);
	}
	if (id < 0 && !atomic_exchange(&fs->pt.warned, true))
		smux_log(LOG_WARNING,
			 "FUSE passthrough refused (%s): files are read and "
			 "written through the daemon",
			 strerror(errno));
	return id < 0 ? -1 : (int32_t)id;
}

/* Whether @fd may start passthrough for its node: a regular file without
 * set-id bits; fills @st. */
static bool pt_fd_ok(int fd, struct stat *st)
{
	return fstat(fd, st) == 0 && S_ISREG(st->st_mode) &&
	       !(st->st_mode & (S_ISUID | S_ISGID));
}

/* Makes the OPEN reply at byte @off of @iov a passthrough one on @id. */
static bool pt_patch(const struct iovec *iov, int count, size_t off, int32_t id)
{
	uint32_t flags;

	if (!smuxfs_iov_at(iov, count, off + PT_OPEN_FLAGS, &flags,
			   sizeof(flags), false))
		return false;
	/* only what the kernel allows with it: no page cache, no direct
	 * I/O through the daemon */
	flags = (flags & PT_NOFLUSH_FLAG) | PT_OPEN_FLAG;
	return smuxfs_iov_at(iov, count, off + PT_OPEN_FLAGS, &flags,
			     sizeof(flags), true) &&
	       smuxfs_iov_at(iov, count, off + PT_OPEN_ID, &id, sizeof(id),
			     true);
}

void smuxfs_pt_reg_close(struct smuxfs *fs, struct smuxfs_pt_reg *reg)
{
	if (reg->held) {
		if (fs->pt.devfd >= 0)
			(void)ioctl(fs->pt.devfd, PT_IOC_BACKING_CLOSE,
				    &reg->id);
		atomic_fetch_sub(&fs->pt.registered, 1);
	}
	*reg = (struct smuxfs_pt_reg){0};
}

void smuxfs_pt_open_reply(struct smuxfs *fs, struct smuxfs_fh *fh,
			  uint64_t nodeid, const struct iovec *iov, int count,
			  size_t off)
{
	struct smuxfs_pt_reg reg = fh->pt_reg;
	struct smuxfs_pt_node *n = NULL;
	struct stat st;
	bool use = false;
	int fd;

	pthread_mutex_lock(&fs->pt.lock);
	fd = fh->pt_has_fd ? fh->pt_fd : -1;
	fh->pt_has_fd = false;
	fh->pt_reg = (struct smuxfs_pt_reg){0};
	if (atomic_load(&fs->pt.on) && !fh->pt_counted)
		n = pt_node(fs, nodeid, true);
	if (!n) {
		pthread_mutex_unlock(&fs->pt.lock);
		if (fd >= 0)
			close(fd);
		smuxfs_pt_reg_close(fs, &reg);
		return;
	}
	if (n->pt) {
		/* every open of the node must be passthrough, on its backing;
		 * a writer of another file under the node (replaced behind
		 * the mount meanwhile), or one whose writes must go through
		 * the daemon (staged), would write where it must not: the
		 * kernel fails that open (EIO) rather. A writer in place
		 * that could not hand over its descriptor just now (a call
		 * held it) writes the node's file anyway. */
		if (reg.held)
			use = reg.dev == n->reg.dev && reg.ino == n->reg.ino;
		else if (fd >= 0)
			use = fstat(fd, &st) == 0 && st.st_dev == n->reg.dev &&
			      st.st_ino == n->reg.ino;
		else
			use = !fh->writable || fh->pt_late;
	} else if (!n->cached && reg.held) {
		/* the writer's file, registered at an earlier open */
		n->reg = reg;
		reg = (struct smuxfs_pt_reg){0};
		use = true;
	} else if (!n->cached && fd >= 0 && pt_fd_ok(fd, &st)) {
		int32_t id = pt_backing_open(fs, fd);

		if (id >= 0) {
			n->reg = (struct smuxfs_pt_reg){.held = true,
							.id = id,
							.dev = st.st_dev,
							.ino = st.st_ino};
			use = true;
		}
	}
	if (use)
		use = pt_patch(iov, count, off, n->reg.id);
	if (use) {
		n->pt++;
		atomic_fetch_add(&fs->pt.opens, 1);
	} else {
		n->cached++;
	}
	if (!n->pt) /* registered, patch failed */
		smuxfs_pt_reg_close(fs, &n->reg);
	fh->pt_counted = true;
	atomic_store(&fh->pt_on, use);
	fh->pt_node = nodeid;
	/* not needed (the node had one, or cannot pass through now) */
	smuxfs_pt_reg_close(fs, &reg);
	pthread_mutex_unlock(&fs->pt.lock);
	if (fd >= 0)
		close(fd);
}

void smuxfs_pt_release(struct smuxfs *fs, struct smuxfs_fh *fh)
{
	struct smuxfs_pt_node *n;
	bool on = atomic_load(&fh->pt_on);

	pthread_mutex_lock(&fs->pt.lock);
	if (fh->pt_has_fd) { /* the open's reply never went */
		close(fh->pt_fd);
		fh->pt_has_fd = false;
	}
	smuxfs_pt_reg_close(fs, &fh->pt_reg); /* the same */
	if (!fh->pt_counted) {
		pthread_mutex_unlock(&fs->pt.lock);
		return;
	}
	fh->pt_counted = false;
	n = pt_node(fs, fh->pt_node, false);
	if (n && on && n->pt && --n->pt == 0) {
		/* the kernel let go of the node's last passthrough file
		 * before sending its RELEASE: its registration goes back
		 * with the handle, for the writer's ofile to keep
		 * (smuxfs_fh_free) */
		fh->pt_reg = n->reg;
		n->reg = (struct smuxfs_pt_reg){0};
	} else if (n && !on && n->cached) {
		n->cached--;
	}
	if (n)
		pt_node_put(fs, n);
	pthread_mutex_unlock(&fs->pt.lock);
}

void smuxfs_pt_free(struct smuxfs *fs)
{
	pthread_mutex_lock(&fs->pt.lock);
	for (unsigned i = 0; i < SMUXFS_PT_BUCKETS; i++) {
		while (fs->pt.bucket[i]) {
			struct smuxfs_pt_node *n = fs->pt.bucket[i];

			fs->pt.bucket[i] = n->next;
			free(n);
		}
	}
	pthread_mutex_unlock(&fs->pt.lock);
}
