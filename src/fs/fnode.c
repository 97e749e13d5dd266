/* SPDX-License-Identifier: MIT */
/*
 * fnode.c - open files whose name is gone, as the kernel sees them: the
 * kernel node (FUSE nodeid) of every open FILE handle, and a hook on the
 * FUSE channel that lets fstat(2) of such a file reach its handle.
 *
 * Why: fstat(2) makes the kernel send GETATTR of the file's node without
 * the handle (FUSE_GETATTR_FH is set only for a few internal callers), and
 * libfuse's high-level API finds a node by its path: a node unlinked or
 * replaced by a rename (hard_remove) has none, so libfuse answers ESTALE
 * before any operation of ours runs. Keeping the name (hard_remove = 0,
 * libfuse's .fuse_hidden renames) would break the atomicity of rename(2)
 * over an open file (ops_meta.c), so instead the daemon reads the channel
 * through its own hook (fuse_session_custom_io): a GETATTR without handle
 * of a node whose open handles lost their name gets FUSE_GETATTR_FH and the
 * handle 0, which libfuse passes on without a path (nullpath_ok), and
 * smuxfs_getattr answers it from the open file (smuxfs_fnode_orphan):
 * the current size, nlink 0 (or the names its file has left), as a local
 * filesystem does. SETATTR without handle (fchmod, fchown, futimens) of
 * such a node gets handle 0 the same way; what it sets is kept with the
 * node's handles (struct smuxfs_gone), which fstat shows.
 *
 * The same hook answers every LSEEK ENOSYS itself (answer_lseek): libfuse
 * would fail one on a nameless node with ESTALE before asking us. It asks
 * the kernel for FUSE_HANDLE_KILLPRIV_V2 and reads which requests must
 * clear set-id bits (ask_init_flags, note_kill_suidgid), and counts the
 * requests by opcode with the time each took to answer (.smux/metrics).
 *
 * The nodeid of a handle comes from the reply to its OPEN (the request's
 * node) or CREATE (the new entry's node), seen by the same hook on its way
 * to the kernel, before the kernel can release the handle.
 *
 * Locks: fs->fnodes.lock protects the buckets and every handle's nodeid,
 * nnext, nlisted and gone. It may be taken while holding an ofile's lock and it
 * is held while taking the open-file table's lock (smuxfs_fh_key), never
 * the reverse; no ofile lock is ever taken while holding it.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h" /* before fuse_lowlevel.h: FUSE_USE_VERSION */

#include <fuse_lowlevel.h>

/* The request the current FUSE thread is serving (set when it read it). */
static __thread struct {
	uint32_t opcode;
	uint64_t unique;
	uint64_t nodeid;
	bool orphan; /* a GETATTR or SETATTR given handle 0 by hook_read */
	bool kill_suidgid; /* the kernel asks to clear set-id bits */
	int64_t read_ns;   /* when it was read (CLOCK_MONOTONIC) */
} cur;

/* The flags the kernel offered in its INIT (set by the thread that read
 * the INIT, read by the one writing its reply: libfuse answers INIT in the
 * thread that read it). */
static __thread uint32_t init_offers;

/* The mount the hook serves (one per process). */
static struct smuxfs *hook_fs;

static unsigned fnode_bucket(uint64_t nodeid)
{
	return (unsigned)(nodeid % SMUXFS_FNODE_BUCKETS);
}

uint64_t smuxfs_fnode_cur_nodeid(void)
{
	return cur.nodeid;
}

void smuxfs_fnode_add(struct smuxfs *fs, struct smuxfs_fh *fh, uint64_t nodeid)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	unsigned b = fnode_bucket(nodeid);

	pthread_mutex_lock(&t->lock);
	if (!fh->nlisted) {
		fh->nodeid = nodeid;
		fh->nnext = t->buckets[b];
		t->buckets[b] = fh;
		fh->nlisted = true;
		t->listed++;
	}
	pthread_mutex_unlock(&t->lock);
}

void smuxfs_fnode_del(struct smuxfs *fs, struct smuxfs_fh *fh)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	struct smuxfs_ofile_attr a = {0};
	struct smuxfs_fh **p;
	bool left_size;

	/* a writer of a nameless file going: the readers left on its node
	 * show the size it left, as on a local file (a writer left shows
	 * its own ofile's) */
	left_size = fh->nlisted && fh->of && atomic_load(&fh->unlinked) &&
		    smuxfs_ofile_attr(fh->of, &a) == 0;
	pthread_mutex_lock(&t->lock);
	if (left_size) {
		for (struct smuxfs_fh *o = t->buckets[fnode_bucket(fh->nodeid)];
		     o; o = o->nnext) {
			if (o != fh && o->nodeid == fh->nodeid &&
			    o->gone.init && !o->of) {
				o->gone.has_size = true;
				o->gone.size = a.size;
			}
		}
	}
	if (fh->nlisted) {
		for (p = &t->buckets[fnode_bucket(fh->nodeid)]; *p;
		     p = &(*p)->nnext) {
			if (*p == fh) {
				*p = fh->nnext;
				break;
			}
		}
		fh->nnext = NULL;
		fh->nlisted = false;
		t->listed--;
		if (fh->gone.init)
			t->gone--;
	}
	pthread_mutex_unlock(&t->lock);
}

void smuxfs_fnode_free_unreleased(struct smuxfs *fs)
{
	struct smuxfs_fnodes *t = &fs->fnodes;

	for (unsigned b = 0; b < SMUXFS_FNODE_BUCKETS; b++) {
		struct smuxfs_fh *fh, *next;

		for (fh = t->buckets[b]; fh; fh = next) {
			next = fh->nnext;
			/* its ofile (fh->of) is the table's to free */
			smux_reader_close(fh->reader);
			free(fh->key);
			free(fh->path);
			free(fh->data);
			pthread_mutex_destroy(&fh->pin_lock);
			pthread_mutex_destroy(&fh->repin_lock);
			free(fh);
		}
		t->buckets[b] = NULL;
	}
	t->listed = 0;
	t->gone = 0;
}

bool smuxfs_fnode_busy(struct smuxfs *fs, const char *key)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	char k[SMUX_KEY_MAX + 2];
	bool busy = false;

	pthread_mutex_lock(&t->lock);
	for (unsigned b = 0; t->listed && !busy && b < SMUXFS_FNODE_BUCKETS;
	     b++) {
		for (struct smuxfs_fh *fh = t->buckets[b]; fh && !busy;
		     fh = fh->nnext) {
			/* as smuxfs_fnode_unlinked uses what the name was */
			if (fh->kind != SMUXFS_FH_FILE)
				continue; /* a directory's (ops_dir.c) */
			if (fh->gone.init)
				busy = fh->gone.links > 0;
			else
				busy = smuxfs_fh_key(fs, fh, k, sizeof(k)) ==
					       0 &&
				       strcmp(k, key) == 0;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return busy;
}

/* The file of @fh (listed in @t, not gone yet) lost the name it was
 * opened by; @was: what that name was (NULL unknown). Caller holds
 * t->lock. */
static void gone_init(struct smuxfs_fnodes *t, struct smuxfs_fh *fh,
		      const struct smux_info *was)
{
	struct smuxfs_gone *g = &fh->gone;

	t->gone++;
	memset(g, 0, sizeof(*g));
	g->init = true;
	g->uid = SMUX_ID_NONE;
	g->gid = SMUX_ID_NONE;
	if (was) {
		g->file_id = was->file_id;
		/* a file of several names keeps the others */
		g->links = was->nlink > 1 ? was->nlink - 1 : 0;
		/* and its owner (fstat of an unlinked file shows it) */
		g->was_owned = was->has_owner;
		g->was_uid = was->uid;
		g->was_gid = was->gid;
	}
	atomic_store(&fh->unlinked, true);
}

void smuxfs_fnode_dir_gone(struct smuxfs *fs, struct smuxfs_fh *fh,
			   const struct smux_info *was)
{
	pthread_mutex_lock(&fs->fnodes.lock);
	if (fh->nlisted && !fh->gone.init) {
		gone_init(&fs->fnodes, fh, NULL);
		if (was) {
			fh->gone.set |= SMUX_SET_MODE | SMUX_SET_MTIME;
			fh->gone.mode = was->mode & 07777;
			fh->gone.mtime_ns = was->mtime_ns;
			fh->gone.ctime_ns = was->ctime_ns;
			fh->gone.was_owned = was->has_owner;
			fh->gone.was_uid = was->uid;
			fh->gone.was_gid = was->gid;
		}
	}
	pthread_mutex_unlock(&fs->fnodes.lock);
}

void smuxfs_fnode_unlinked(struct smuxfs *fs, const char *key,
			   const struct smux_info *was)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	uint64_t id = was ? was->file_id : 0;
	char k[SMUX_KEY_MAX + 2];

	pthread_mutex_lock(&t->lock);
	for (unsigned b = 0; b < SMUXFS_FNODE_BUCKETS; b++) {
		for (struct smuxfs_fh *fh = t->buckets[b]; fh; fh = fh->nnext) {
			if (fh->kind != SMUXFS_FH_FILE)
				continue; /* a directory's (ops_dir.c) */
			if (fh->gone.init) {
				/* already nameless: another name of its file
				 * went (hard links) */
				if (id && fh->gone.file_id == id &&
				    fh->gone.links > 0)
					fh->gone.links--;
				/* the name it still went by */
				if (fh->gone.named &&
				    smuxfs_fh_key(fs, fh, k, sizeof(k)) == 0 &&
				    strcmp(k, key) == 0)
					fh->gone.named = false;
				continue;
			}
			if (smuxfs_fh_key(fs, fh, k, sizeof(k)) != 0 ||
			    strcmp(k, key) != 0)
				continue;
			gone_init(t, fh, was);
		}
	}
	pthread_mutex_unlock(&t->lock);
}

void smuxfs_fnode_unnamed(struct smuxfs *fs, const char *key,
			  const struct smux_info *info)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	struct smux_info all = *info;
	char k[SMUX_KEY_MAX + 2];

	/* gone_init counts the names left besides the one that went; here
	 * none went */
	all.nlink = info->nlink + 1;
	pthread_mutex_lock(&t->lock);
	for (unsigned b = 0; b < SMUXFS_FNODE_BUCKETS; b++) {
		for (struct smuxfs_fh *fh = t->buckets[b]; fh; fh = fh->nnext) {
			if (fh->kind != SMUXFS_FH_FILE || fh->gone.init ||
			    smuxfs_fh_key(fs, fh, k, sizeof(k)) != 0 ||
			    strcmp(k, key) != 0)
				continue;
			gone_init(t, fh, &all);
			fh->gone.named = true;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

int smuxfs_fnode_named_key(struct smuxfs *fs, char *key, size_t cap)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	int rc = -ESTALE;

	if (!cur.orphan)
		return -ESTALE;
	pthread_mutex_lock(&t->lock);
	for (struct smuxfs_fh *fh = t->buckets[fnode_bucket(cur.nodeid)]; fh;
	     fh = fh->nnext) {
		if (fh->nodeid != cur.nodeid || fh->kind != SMUXFS_FH_FILE ||
		    !fh->gone.init || !fh->gone.named)
			continue;
		rc = smuxfs_fh_key(fs, fh, key, cap) == 0 ? 0 : -ESTALE;
		break;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void smuxfs_fnode_linked(struct smuxfs *fs, uint64_t file_id)
{
	struct smuxfs_fnodes *t = &fs->fnodes;

	if (!file_id)
		return;
	pthread_mutex_lock(&t->lock);
	for (unsigned b = 0; b < SMUXFS_FNODE_BUCKETS; b++)
		for (struct smuxfs_fh *fh = t->buckets[b]; fh; fh = fh->nnext)
			if (fh->gone.init && fh->gone.file_id == file_id)
				fh->gone.links++;
	pthread_mutex_unlock(&t->lock);
}

/* The first listed handle of the current request's node whose name is
 * gone (the hook gave the request handle 0), or NULL. Caller holds
 * fs->fnodes.lock. */
static struct smuxfs_fh *cur_gone(struct smuxfs *fs)
{
	if (!cur.orphan)
		return NULL;
	for (struct smuxfs_fh *fh =
		     fs->fnodes.buckets[fnode_bucket(cur.nodeid)];
	     fh; fh = fh->nnext)
		if (fh->nodeid == cur.nodeid && atomic_load(&fh->unlinked))
			return fh;
	return NULL;
}

uint32_t smuxfs_fnode_gone_info(struct smuxfs *fs, struct smuxfs_fh *fh,
				struct smux_info *info)
{
	struct smuxfs_gone g = {0};

	pthread_mutex_lock(&fs->fnodes.lock);
	if (!fh)
		fh = cur_gone(fs);
	if (fh && fh->gone.init)
		g = fh->gone;
	pthread_mutex_unlock(&fs->fnodes.lock);
	if (!g.init)
		return 0;
	if (g.set & SMUX_SET_MODE)
		info->mode =
			(info->mode & S_IFMT ? info->mode & S_IFMT : S_IFREG) |
			(g.mode & 07777);
	/* the owner it had when its name went, unless the caller knows a
	 * newer one (an open file's pending chown) */
	if (g.was_owned && !info->has_owner) {
		info->uid = g.was_uid;
		info->gid = g.was_gid;
		info->has_owner = true;
	}
	if (g.uid != SMUX_ID_NONE) {
		info->uid = g.uid;
		info->has_owner = true;
	}
	if (g.gid != SMUX_ID_NONE) {
		info->gid = g.gid;
		info->has_owner = true;
	}
	if (g.set & SMUX_SET_MTIME)
		info->mtime_ns = g.mtime_ns;
	if (g.set & SMUX_SET_ATIME)
		info->atime_ns = g.atime_ns;
	if (g.ctime_ns)
		info->ctime_ns = g.ctime_ns;
	if (g.has_size)
		smux_info_set_size(info, g.size);
	return g.links;
}

/* Applies @attr (at @now_ns) to @g. */
static void gone_set(struct smuxfs_gone *g, const struct smux_setattr *attr,
		     int64_t now_ns)
{
	if (attr->flags & SMUX_SET_MODE)
		g->mode = attr->mode & 07777;
	if ((attr->flags & SMUX_SET_OWNER) && attr->uid != SMUX_ID_NONE)
		g->uid = attr->uid;
	if ((attr->flags & SMUX_SET_OWNER) && attr->gid != SMUX_ID_NONE)
		g->gid = attr->gid;
	if (attr->flags & SMUX_SET_MTIME)
		g->mtime_ns = attr->mtime_ns;
	if (attr->flags & SMUX_SET_ATIME)
		g->atime_ns = attr->atime_ns;
	g->set |= attr->flags;
	g->ctime_ns = now_ns; /* every change of the inode moves ctime */
}

int smuxfs_fnode_setattr(struct smuxfs *fs, const struct smux_setattr *attr)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	struct timespec now;
	int rc = -ESTALE;

	if (!cur.orphan)
		return -ESTALE;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&t->lock);
	for (struct smuxfs_fh *fh = t->buckets[fnode_bucket(cur.nodeid)]; fh;
	     fh = fh->nnext) {
		if (fh->nodeid != cur.nodeid || !atomic_load(&fh->unlinked))
			continue;
		if (!fh->gone.init)
			gone_init(t, fh, NULL);
		gone_set(&fh->gone, attr,
			 (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
		/* a reader of a file that keeps other names: the file
		 * itself too, which they show (a local descriptor's
		 * fchmod; the reader says whether it can: one copy only).
		 * A writer's ofile does it (smuxfs_ofile_setattr_nameless). */
		if (rc != 0 && fh->reader && !fh->of && fh->gone.links > 0)
			(void)smux_reader_setattr(fh->reader, attr);
		rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* A handle open under a name that is gone while its file keeps another
 * name: of the file whose st_ino is @ino (the file id with its top bit
 * set, which an id may have already: compared as st_ino), or of any file
 * (@ino 0). Asked for every attribute reply of a file: no walk while no
 * handle's name is gone (t->gone). */
static bool nameless_open(struct smuxfs *fs, uint64_t ino)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	bool found = false;

	pthread_mutex_lock(&t->lock);
	for (unsigned b = 0; t->gone && !found && b < SMUXFS_FNODE_BUCKETS; b++)
		for (struct smuxfs_fh *fh = t->buckets[b]; fh && !found;
		     fh = fh->nnext)
			found = fh->gone.init && fh->gone.file_id &&
				fh->gone.links > 0 &&
				(!ino || (fh->gone.file_id |
					  SMUXFS_INO_FILE_ID) == ino);
	pthread_mutex_unlock(&t->lock);
	return found;
}

bool smuxfs_fnode_nameless(struct smuxfs *fs)
{
	return nameless_open(fs, 0);
}

void smuxfs_fnode_links_changed(struct smuxfs *fs, uint64_t file_id,
				const struct smux_setattr *attr)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	struct timespec now;

	if (!file_id)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&t->lock);
	for (unsigned b = 0; t->listed && b < SMUXFS_FNODE_BUCKETS; b++)
		for (struct smuxfs_fh *fh = t->buckets[b]; fh; fh = fh->nnext)
			if (fh->gone.init && fh->gone.file_id == file_id)
				gone_set(&fh->gone, attr,
					 (int64_t)now.tv_sec * 1000000000 +
						 now.tv_nsec);
	pthread_mutex_unlock(&t->lock);
}

/* True when a handle open on @nodeid is a directory's (@dir) or one
 * whose name is gone (not @dir). */
static bool fnode_has(struct smuxfs *fs, uint64_t nodeid, bool dir)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	bool found = false;

	pthread_mutex_lock(&t->lock);
	for (struct smuxfs_fh *fh = t->buckets[fnode_bucket(nodeid)];
	     fh && !found; fh = fh->nnext)
		found = fh->nodeid == nodeid &&
			(dir ? fh->kind == SMUXFS_FH_DIR
			     : atomic_load(&fh->unlinked));
	pthread_mutex_unlock(&t->lock);
	return found;
}

int smuxfs_fnode_orphan(struct smuxfs *fs, struct smuxfs_ofile **of,
			struct smux_info *info)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	int rc = -ESTALE;

	*of = NULL;
	if (!cur.orphan)
		return -ESTALE;
	pthread_mutex_lock(&t->lock);
	for (struct smuxfs_fh *fh = t->buckets[fnode_bucket(cur.nodeid)]; fh;
	     fh = fh->nnext) {
		if (fh->nodeid != cur.nodeid || !atomic_load(&fh->unlinked))
			continue;
		if (fh->of) {
			/* the pending content: the current size */
			*of = smuxfs_ofile_hold(fs, fh->of);
			rc = 0;
			break;
		}
		if (rc == 0)
			continue;
		/* a clean reader: the version it opened */
		smux_info_clear(info);
		if (fh->kind == SMUXFS_FH_DIR) {
			info->mode = S_IFDIR; /* removed while open: gone */
		} else if (fh->reader) {
			/* its file as it is now (a local reader: fstat) */
			(void)smux_reader_stat(fh->reader, info);
		} else {
			pthread_mutex_lock(&fh->pin_lock); /* a leaf lock */
			info->size = fh->size;
			pthread_mutex_unlock(&fh->pin_lock);
			info->mode = S_IFREG;
		}
		rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int smuxfs_fnode_behind(struct smuxfs *fs, struct smuxfs_ofile **of,
			struct smux_info *info)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	int rc = -ENOENT;

	*of = NULL;
	pthread_mutex_lock(&t->lock);
	for (struct smuxfs_fh *fh = t->buckets[fnode_bucket(cur.nodeid)]; fh;
	     fh = fh->nnext) {
		if (fh->nodeid != cur.nodeid || fh->kind != SMUXFS_FH_FILE)
			continue;
		if (fh->of) {
			*of = smuxfs_ofile_hold(fs, fh->of);
			rc = 0;
			break;
		}
		if (rc != 0 && fh->reader && fh->reader->live &&
		    smux_reader_stat(fh->reader, info) == 0)
			rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

struct smuxfs_ofile *smuxfs_fnode_ofile(struct smuxfs *fs, struct smuxfs_fh *fh)
{
	struct smuxfs_fnodes *t = &fs->fnodes;
	struct smuxfs_ofile *of = NULL;

	pthread_mutex_lock(&t->lock);
	if (fh->nlisted) {
		for (struct smuxfs_fh *o = t->buckets[fnode_bucket(fh->nodeid)];
		     o; o = o->nnext) {
			if (o->nodeid == fh->nodeid && o->of) {
				of = smuxfs_ofile_hold(fs, o->of);
				break;
			}
		}
	}
	pthread_mutex_unlock(&t->lock);
	return of;
}

/* ---- the channel hook ---- */

/*
 * LSEEK: smuxfs has no lseek of its own (a file is data from 0 to its
 * size), so each is answered ENOSYS here, which makes the kernel stop
 * asking and seek by itself. libfuse would answer it too, but only after
 * finding the node's path: for an open file whose name is gone that is
 * ESTALE, which the kernel hands to the program (SEEK_DATA and SEEK_HOLE
 * failed whenever a mount's first one came through a nameless file:
 * stress-ng's seek stressor, test_unlinked).
 */
static void answer_lseek(int fd, const struct fuse_in_header *in)
{
	struct fuse_out_header out = {
		.len = sizeof(out), .error = -ENOSYS, .unique = in->unique};

	/* a failed write means the request is gone (interrupted) */
	if (write(fd, &out, sizeof(out)) < 0)
		return;
}

/*
 * A directory removed while it is some process's working directory (or
 * otherwise still known to the kernel) has no path, and libfuse answers
 * its OPENDIR ESTALE before any operation of ours runs: `ls` in a removed
 * working directory failed. On a local filesystem the open succeeds and
 * the directory lists nothing. The hook turns that answer into an open
 * with this handle, which it serves itself (libfuse's directory handles
 * are its own pointers: this one never reaches it): READDIR and
 * READDIRPLUS an empty listing, FSYNCDIR and RELEASEDIR success.
 */
#define GHOST_DIR_FH UINT64_C(0xfffffffffffffff1)

/* The nodes open through the ghost handle, with how many times (a few:
 * a working directory removed under a shell). */
#define GHOST_NODES 32
static struct {
	pthread_mutex_t lock;
	uint64_t node[GHOST_NODES];
	unsigned opens[GHOST_NODES];
} ghosts = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Counts an open (@d 1) or a release (-1) of @nodeid; false when an open
 * finds no room (its OPENDIR stays ESTALE). */
static bool ghost_count(uint64_t nodeid, int d)
{
	int free_slot = -1;
	bool ok = false;

	pthread_mutex_lock(&ghosts.lock);
	for (int i = 0; i < GHOST_NODES && !ok; i++) {
		if (ghosts.opens[i] && ghosts.node[i] == nodeid) {
			ghosts.opens[i] = (unsigned)((int)ghosts.opens[i] + d);
			ok = true;
		} else if (!ghosts.opens[i] && free_slot < 0) {
			free_slot = i;
		}
	}
	if (!ok && d > 0 && free_slot >= 0) {
		ghosts.node[free_slot] = nodeid;
		ghosts.opens[free_slot] = 1;
		ok = true;
	}
	pthread_mutex_unlock(&ghosts.lock);
	return ok;
}

static bool ghost_node(uint64_t nodeid)
{
	bool found = false;

	pthread_mutex_lock(&ghosts.lock);
	for (int i = 0; i < GHOST_NODES && !found; i++)
		found = ghosts.opens[i] && ghosts.node[i] == nodeid;
	pthread_mutex_unlock(&ghosts.lock);
	return found;
}

/* GETATTR of a ghost node (fstat of the open directory, which `ls` and
 * fdopendir ask for): a directory with no links left. Its mode and owner
 * went with it (no path to ask): the mount's defaults, 0755. */
static void answer_ghost_getattr(int fd, const struct fuse_in_header *in)
{
	struct {
		struct fuse_out_header out;
		struct fuse_attr_out attr;
	} r;

	memset(&r, 0, sizeof(r));
	r.out.len = sizeof(r);
	r.out.unique = in->unique;
	r.attr.attr.ino = in->nodeid;
	r.attr.attr.mode = S_IFDIR | 0755;
	r.attr.attr.nlink = 0;
	r.attr.attr.uid = (uint32_t)hook_fs->uid;
	r.attr.attr.gid = (uint32_t)hook_fs->gid;
	r.attr.attr.blksize = 4096;
	/* a failed write means the request is gone (interrupted) */
	if (write(fd, &r, sizeof(r)) < 0)
		return;
}

/* Answers a request on the ghost directory handle (or its node's
 * GETATTR); true when @in was one (then answered, and not passed on). */
static bool answer_ghost_dir(int fd, const struct fuse_in_header *in, size_t n)
{
	struct fuse_out_header out = {.len = sizeof(out), .unique = in->unique};
	uint64_t fh;

	if (in->opcode == FUSE_GETATTR) {
		if (!ghost_node(in->nodeid))
			return false;
		answer_ghost_getattr(fd, in);
		return true;
	}
	switch (in->opcode) {
	case FUSE_READDIR:
	case FUSE_READDIRPLUS:
	case FUSE_RELEASEDIR:
	case FUSE_FSYNCDIR:
		/* fh is the first field of fuse_read_in, fuse_release_in
		 * and fuse_fsync_in */
		if (n < sizeof(*in) + sizeof(fh))
			return false;
		memcpy(&fh, in + 1, sizeof(fh));
		if (fh != GHOST_DIR_FH)
			return false;
		if (in->opcode == FUSE_RELEASEDIR)
			(void)ghost_count(in->nodeid, -1);
		break;
	default:
		return false;
	}
	/* a failed write means the request is gone (interrupted) */
	if (write(fd, &out, sizeof(out)) < 0) {
		/* nothing waits for the answer */
	}
	return true;
}

/*
 * libfuse's ESTALE (no path: its node was removed) to a GETATTR of a node
 * a directory handle is open on, which the removal did not mark (the open
 * ran as rmdir did: rmdir found no handle yet): fstat of a directory
 * removed while open, answered as the ghost's, a directory with no links
 * (fdopendir and ls asked it: "Stale file handle" listing a directory
 * another process removed, outside tester s40-t1). True when answered.
 */
static bool stale_dir_getattr(int fd, const struct iovec *iov, int count)
{
	struct fuse_in_header in = {.unique = cur.unique, .nodeid = cur.nodeid};
	struct fuse_out_header out;

	if (!smuxfs_iov_at(iov, count, 0, &out, sizeof(out), false) ||
	    out.unique != cur.unique || out.error != -ESTALE ||
	    !fnode_has(hook_fs, cur.nodeid, true))
		return false;
	answer_ghost_getattr(fd, &in);
	return true;
}

static ssize_t iov_len_total(const struct iovec *iov, int count)
{
	size_t n = 0;

	for (int i = 0; i < count; i++)
		n += iov[i].iov_len;
	return (ssize_t)n;
}

/* The reply to the current OPENDIR: ESTALE (a removed directory, libfuse
 * found no path for it) becomes an open of the ghost handle. True when it
 * was written here. */
static bool ghost_opendir(int fd, const struct iovec *iov, int count)
{
	struct {
		struct fuse_out_header out;
		struct fuse_open_out open;
	} r;

	if (!smuxfs_iov_at(iov, count, 0, &r.out, sizeof(r.out), false) ||
	    r.out.unique != cur.unique || r.out.error != -ESTALE ||
	    !ghost_count(cur.nodeid, 1))
		return false;
	memset(&r.open, 0, sizeof(r.open));
	r.open.fh = GHOST_DIR_FH;
	r.out.len = sizeof(r);
	r.out.error = 0;
	if (write(fd, &r, sizeof(r)) < 0) {
		/* interrupted: nothing holds the handle */
	}
	return true;
}

/* Names of the opcodes counted (linux/fuse.h's numbers), for metrics. */
static const char *const opcode_names[SMUXFS_FUSE_OPCODES] = {
	[FUSE_LOOKUP] = "lookup",
	[FUSE_FORGET] = "forget",
	[FUSE_GETATTR] = "getattr",
	[FUSE_SETATTR] = "setattr",
	[FUSE_READLINK] = "readlink",
	[FUSE_SYMLINK] = "symlink",
	[FUSE_MKNOD] = "mknod",
	[FUSE_MKDIR] = "mkdir",
	[FUSE_UNLINK] = "unlink",
	[FUSE_RMDIR] = "rmdir",
	[FUSE_RENAME] = "rename",
	[FUSE_LINK] = "link",
	[FUSE_OPEN] = "open",
	[FUSE_READ] = "read",
	[FUSE_WRITE] = "write",
	[FUSE_STATFS] = "statfs",
	[FUSE_RELEASE] = "release",
	[FUSE_FSYNC] = "fsync",
	[FUSE_SETXATTR] = "setxattr",
	[FUSE_GETXATTR] = "getxattr",
	[FUSE_LISTXATTR] = "listxattr",
	[FUSE_REMOVEXATTR] = "removexattr",
	[FUSE_FLUSH] = "flush",
	[FUSE_INIT] = "init",
	[FUSE_OPENDIR] = "opendir",
	[FUSE_READDIR] = "readdir",
	[FUSE_RELEASEDIR] = "releasedir",
	[FUSE_FSYNCDIR] = "fsyncdir",
	[FUSE_GETLK] = "getlk",
	[FUSE_SETLK] = "setlk",
	[FUSE_SETLKW] = "setlkw",
	[FUSE_ACCESS] = "access",
	[FUSE_CREATE] = "create",
	[FUSE_INTERRUPT] = "interrupt",
	[FUSE_BMAP] = "bmap",
	[FUSE_DESTROY] = "destroy",
	[FUSE_IOCTL] = "ioctl",
	[FUSE_POLL] = "poll",
	[FUSE_NOTIFY_REPLY] = "notify_reply",
	[FUSE_BATCH_FORGET] = "batch_forget",
	[FUSE_FALLOCATE] = "fallocate",
	[FUSE_READDIRPLUS] = "readdirplus",
	[FUSE_RENAME2] = "rename2",
	[FUSE_LSEEK] = "lseek",
	[FUSE_COPY_FILE_RANGE] = "copy_file_range",
};

/* The slot opcode @op is counted in: its own when it has a name. */
static unsigned request_slot(uint32_t op)
{
	return op < SMUXFS_FUSE_OPCODES - 1 && opcode_names[op]
		       ? op
		       : SMUXFS_FUSE_OPCODES - 1;
}

static void count_request(uint32_t opcode)
{
	if (hook_fs)
		atomic_fetch_add_explicit(
			&hook_fs->fnodes.requests[request_slot(opcode)], 1,
			memory_order_relaxed);
}

/* The reply to the current request is being written: its time. */
static void time_request(const struct iovec *iov, int count)
{
	struct fuse_out_header out;

	if (!hook_fs || !cur.read_ns ||
	    !smuxfs_iov_at(iov, count, 0, &out, sizeof(out), false) ||
	    out.unique != cur.unique)
		return;
	atomic_fetch_add_explicit(
		&hook_fs->fnodes.request_ns[request_slot(cur.opcode)],
		(uint64_t)(smux_now_ns() - cur.read_ns), memory_order_relaxed);
	cur.read_ns = 0;
}

uint64_t smuxfs_fnode_requests(struct smuxfs *fs, unsigned op,
			       const char **name, uint64_t *ns)
{
	unsigned slot = request_slot(op);

	if (name)
		*name = slot == op ? opcode_names[op] : "";
	if (ns)
		*ns = atomic_load_explicit(&fs->fnodes.request_ns[slot],
					   memory_order_relaxed);
	return atomic_load_explicit(&fs->fnodes.requests[slot],
				    memory_order_relaxed);
}

/*
 * chown(f, -1, -1) reaches us as a SETATTR that changes nothing (valid 0
 * on Linux 6.18; with FUSE_HANDLE_KILLPRIV_V2 the kernel leaves clearing
 * set-id bits to us), which libfuse's high-level API drops: made a chown
 * to -1, -1, so ops.c clears them as Linux does for any chown of a
 * regular file.
 */
static void chown_unchanged(struct fuse_setattr_in *sa)
{
	const uint32_t changes = FATTR_MODE | FATTR_UID | FATTR_GID |
				 FATTR_SIZE | FATTR_ATIME | FATTR_MTIME |
				 FATTR_ATIME_NOW | FATTR_MTIME_NOW;

	if (!(sa->valid & changes)) {
		sa->valid |= FATTR_UID | FATTR_GID;
		sa->uid = (uint32_t)-1;
		sa->gid = (uint32_t)-1;
	}
}

/*
 * Set-id bits: with FUSE_HANDLE_KILLPRIV_V2 the kernel marks the requests
 * of callers without CAP_FSETID that must clear them (a WRITE, an OPEN
 * with O_TRUNC, a SETATTR of the size); libfuse's high-level API does not
 * pass these flags on, so they are read here for smuxfs_fnode_killpriv.
 * An INIT says whether the kernel offers the capability at all.
 */
static void note_kill_suidgid(const struct fuse_in_header *in, size_t n)
{
	const void *arg = in + 1;
	size_t have = n - sizeof(*in);

	switch (in->opcode) {
	case FUSE_INIT:
		smuxfs_pt_init_request(arg, have);
		init_offers =
			have >= offsetof(struct fuse_init_in, flags) +
						sizeof(uint32_t)
				? ((const struct fuse_init_in *)arg)->flags
				: 0;
		break;
	case FUSE_WRITE:
		cur.kill_suidgid =
			have >= sizeof(struct fuse_write_in) &&
			(((const struct fuse_write_in *)arg)->write_flags &
			 FUSE_WRITE_KILL_SUIDGID);
		break;
	case FUSE_OPEN:
		cur.kill_suidgid =
			have >= sizeof(struct fuse_open_in) &&
			(((const struct fuse_open_in *)arg)->open_flags &
			 FUSE_OPEN_KILL_SUIDGID);
		break;
	case FUSE_SETATTR:
		cur.kill_suidgid =
			have >= sizeof(struct fuse_setattr_in) &&
			(((const struct fuse_setattr_in *)arg)->valid &
			 FATTR_KILL_SUIDGID);
		break;
	default:
		break;
	}
}

bool smuxfs_fnode_killpriv(struct smuxfs *fs, bool *asked)
{
	if (!atomic_load(&fs->fnodes.killpriv_v2))
		return false;
	*asked = cur.kill_suidgid;
	return true;
}

/*
 * The reply to INIT asks for what libfuse 3.14 leaves out, when the kernel
 * offers it:
 * - FUSE_HANDLE_KILLPRIV_V2 (libfuse 3.14 knows no such capability).
 *   Without it the kernel asks for security.capability (a GETXATTR round
 *   trip) before every write(2), to see whether it must clear it; with it
 *   the kernel marks the superblock SB_NOSEC and asks once per inode until
 *   its attributes change, and leaves clearing setuid/setgid to the daemon
 *   (ops.c does on write, O_TRUNC, truncate and chown; a file backend's
 *   own kernel drops security.capability when the daemon writes).
 * - FUSE_PARALLEL_DIROPS: libfuse wants it by default, yet 3.14's reply
 *   leaves it out, and the kernel then runs the lookups and listings of
 *   one directory one at a time (eight stats of names in one directory
 *   over a member of 300 ms took 4.8 s). Every path the daemon serves is
 *   safe to look up concurrently: lookups of different directories
 *   already are, and the kernel still runs a directory's changes alone.
 */
static void ask_init_flags(const struct iovec *iov, int count)
{
	const size_t at = sizeof(struct fuse_out_header) +
			  offsetof(struct fuse_init_out, flags);
	const uint32_t asked = FUSE_HANDLE_KILLPRIV_V2 | FUSE_PARALLEL_DIROPS;
	struct fuse_out_header out;
	uint32_t flags;

	if (!(init_offers & asked) ||
	    !smuxfs_iov_at(iov, count, 0, &out, sizeof(out), false) ||
	    out.unique != cur.unique || out.error != 0 ||
	    !smuxfs_iov_at(iov, count, at, &flags, sizeof(flags), false))
		return;
	flags |= init_offers & asked;
	if (!smuxfs_iov_at(iov, count, at, &flags, sizeof(flags), true) ||
	    !hook_fs)
		return;
	if (flags & FUSE_HANDLE_KILLPRIV_V2) {
		atomic_store(&hook_fs->fnodes.killpriv_v2, true);
		smux_log(LOG_INFO, "the kernel leaves clearing setuid/setgid "
				   "to the daemon (FUSE_HANDLE_KILLPRIV_V2)");
	}
	if (flags & FUSE_PARALLEL_DIROPS)
		smux_log(LOG_INFO, "lookups and listings of one directory run "
				   "in parallel (FUSE_PARALLEL_DIROPS)");
}

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fuse_in_header *in = buf;
	struct fuse_getattr_in *ga;
	struct fuse_setattr_in *sa;
	ssize_t n;

	(void)userdata;
	for (;;) {
		n = read(fd, buf, len);
		if (n >= (ssize_t)sizeof(*in))
			count_request(in->opcode);
		if (n < (ssize_t)sizeof(*in))
			break;
		if (in->opcode == FUSE_LSEEK)
			answer_lseek(fd, in);
		else if (!answer_ghost_dir(fd, in, (size_t)n))
			break;
	}
	cur.opcode = 0;
	cur.orphan = false;
	cur.kill_suidgid = false;
	if (n < (ssize_t)sizeof(*in))
		return n; /* errno as read(2) left it */
	cur.opcode = in->opcode;
	cur.unique = in->unique;
	cur.nodeid = in->nodeid;
	cur.read_ns = smux_now_ns();
	note_kill_suidgid(in, (size_t)n);
	smuxfs_special_request(in, (size_t)n);
	if (in->opcode == FUSE_GETATTR &&
	    (size_t)n >= sizeof(*in) + sizeof(*ga)) {
		ga = (struct fuse_getattr_in *)(in + 1);
		if (!(ga->getattr_flags & FUSE_GETATTR_FH) &&
		    fnode_has(hook_fs, in->nodeid, false)) {
			ga->getattr_flags |= FUSE_GETATTR_FH;
			ga->fh = 0;
			cur.orphan = true;
		}
	} else if (in->opcode == FUSE_SETATTR &&
		   (size_t)n >= sizeof(*in) + sizeof(*sa)) {
		/* fchmod, fchown, futimens: sent without the handle too */
		sa = (struct fuse_setattr_in *)(in + 1);
		chown_unchanged(sa);
		if (!(sa->valid & FATTR_FH) &&
		    fnode_has(hook_fs, in->nodeid, false)) {
			sa->valid |= FATTR_FH;
			sa->fh = 0;
			cur.orphan = true;
		}
	}
	return n;
}

/* The reply to the current OPEN or CREATE: registers its handle under its
 * node. */
static void note_open(const struct iovec *iov, int count)
{
	struct {
		struct fuse_out_header out;
		struct fuse_entry_out entry;
		struct fuse_open_out open;
	} r = {0};
	char *p = (char *)&r;
	size_t got = 0, need = sizeof(r.out) + sizeof(r.open);
	const struct fuse_open_out *oo;
	struct smuxfs_fh *fh;
	uint64_t nodeid = cur.nodeid;

	if (cur.opcode == FUSE_CREATE)
		need += sizeof(r.entry);
	for (int i = 0; i < count && got < need; i++) {
		size_t n = iov[i].iov_len < need - got ? iov[i].iov_len
						       : need - got;

		memcpy(p + got, iov[i].iov_base, n);
		got += n;
	}
	if (got < need || r.out.unique != cur.unique || r.out.error != 0)
		return;
	oo = (const struct fuse_open_out *)(p + sizeof(r.out));
	if (cur.opcode == FUSE_CREATE) {
		nodeid = r.entry.nodeid;
		oo = &r.open;
	}
	fh = (struct smuxfs_fh *)(uintptr_t)oo->fh;
	if (!fh || fh->kind != SMUXFS_FH_FILE)
		return;
	smuxfs_fnode_add(hook_fs, fh, nodeid);
	smuxfs_pt_open_reply(hook_fs, fh, nodeid, iov, count,
			     (size_t)((const char *)oo - p));
}

/* ---- inode numbers in replies ---- */

/* what libfuse reports as a directory entry's unknown inode number */
#define FNODE_UNKNOWN_INO 0xffffffffu

bool smuxfs_iov_at(const struct iovec *iov, int count, size_t off, void *p,
		   size_t n, bool write)
{
	char *b = p;

	for (int i = 0; i < count && n; i++) {
		size_t len = iov[i].iov_len, k;

		if (off >= len) {
			off -= len;
			continue;
		}
		k = len - off < n ? len - off : n;
		if (write)
			memcpy((char *)iov[i].iov_base + off, b, k);
		else
			memcpy(b, (char *)iov[i].iov_base + off, k);
		b += k;
		n -= k;
		off = 0;
	}
	return n == 0;
}

/* The 64-bit field at @off: @to when it is 0. */
static void fill_zero(const struct iovec *iov, int count, size_t off,
		      uint64_t to)
{
	uint64_t v;

	if (smuxfs_iov_at(iov, count, off, &v, sizeof(v), false) && v == 0)
		smuxfs_iov_at(iov, count, off, &to, sizeof(to), true);
}

/* offsets of st_ino in an entry and in GETATTR's attributes */
#define ENTRY_INO                                \
	(offsetof(struct fuse_entry_out, attr) + \
	 offsetof(struct fuse_attr, ino))
#define ATTR_OUT_INO \
	(offsetof(struct fuse_attr_out, attr) + offsetof(struct fuse_attr, ino))

/*
 * A file with more than one name is another kernel inode under each name:
 * its attributes are not cached (valid for 0 s), so the link count after
 * an rm of another name, and the size and mtime after a write through
 * another name, show at once; so are those of a file's last name while a
 * handle of a name it lost is open (it writes to the same file). @attr:
 * the byte offset of the reply's struct fuse_attr, @valid and @nsec of
 * its validity.
 */
static void linked_uncached(const struct iovec *iov, int count, size_t attr,
			    size_t valid, size_t nsec, uint64_t nodeid)
{
	uint64_t ino = 0, zero64 = 0, valid_s = 0;
	uint32_t nlink, zero32 = 0, valid_ns = 0;

	/* a file whose name is gone: its link count changes with the
	 * names left (ln, rm of another name), which reach other nodes */
	if (cur.orphan)
		goto uncached;
	if (!smuxfs_iov_at(iov, count, attr + offsetof(struct fuse_attr, ino),
			   &ino, sizeof(ino), false) ||
	    !smuxfs_iov_at(iov, count, attr + offsetof(struct fuse_attr, nlink),
			   &nlink, sizeof(nlink), false) ||
	    !(ino & SMUXFS_INO_FILE_ID) ||
	    (nlink < 2 && !nameless_open(hook_fs, ino))) {
		/* the number the kernel holds now, until when (told.c) */
		smuxfs_iov_at(iov, count, valid, &valid_s, sizeof(valid_s),
			      false);
		smuxfs_iov_at(iov, count, nsec, &valid_ns, sizeof(valid_ns),
			      false);
		smuxfs_told_note(nodeid, cur.read_ns, ino, valid_s, valid_ns);
		return;
	}
uncached:
	smuxfs_iov_at(iov, count, valid, &zero64, sizeof(zero64), true);
	smuxfs_iov_at(iov, count, nsec, &zero32, sizeof(zero32), true);
	smuxfs_told_note(nodeid, cur.read_ns, ino, 0, 0);
}

/* linked_uncached for the entry at byte @off */
static void entry_linked_uncached(const struct iovec *iov, int count,
				  size_t off, uint64_t nodeid)
{
	linked_uncached(iov, count, off + offsetof(struct fuse_entry_out, attr),
			off + offsetof(struct fuse_entry_out, attr_valid),
			off + offsetof(struct fuse_entry_out, attr_valid_nsec),
			nodeid);
}

/* Directory entries from byte @off to @end: d_ino 0 becomes the node's
 * id (READDIRPLUS, where the entry has a node) or "unknown", as libfuse
 * reports without use_ino; READDIRPLUS attributes get the node's id. */
static void patch_dirents(const struct iovec *iov, int count, size_t off,
			  size_t end, bool plus)
{
	size_t head = plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET;
	size_t dirent = plus ? offsetof(struct fuse_direntplus, dirent) : 0;

	while (off + head <= end) {
		struct fuse_dirent d;
		uint64_t nodeid = 0;

		if (!smuxfs_iov_at(iov, count, off + dirent, &d,
				   FUSE_NAME_OFFSET, false))
			return;
		if (plus) {
			smuxfs_iov_at(
				iov, count,
				off + offsetof(struct fuse_entry_out, nodeid),
				&nodeid, sizeof(nodeid), false);
			if (nodeid) {
				fill_zero(iov, count, off + ENTRY_INO, nodeid);
				entry_linked_uncached(iov, count, off, nodeid);
				smuxfs_special_entry(iov, count, off);
			}
		}
		fill_zero(iov, count, off + dirent,
			  nodeid ? nodeid : FNODE_UNKNOWN_INO);
		off += FUSE_DIRENT_ALIGN(head + d.namelen);
	}
}

/*
 * use_ino = 1 lets a file keep one st_ino under all its names
 * (smuxfs_fill_stat); every other st_ino the daemon reports is 0, and here
 * becomes the kernel node's id, as libfuse reports without use_ino: in
 * the entry of LOOKUP, CREATE, MKNOD, MKDIR, SYMLINK and LINK, in the
 * attributes of GETATTR and SETATTR, and in directory entries. The
 * attributes of a file with several names are not cached.
 */
static void patch_inos(const struct iovec *iov, int count)
{
	const size_t h = sizeof(struct fuse_out_header);
	struct fuse_out_header out;
	uint64_t nodeid;

	if (!smuxfs_iov_at(iov, count, 0, &out, sizeof(out), false) ||
	    out.unique != cur.unique || out.error != 0)
		return;
	switch (cur.opcode) {
	case FUSE_LOOKUP:
	case FUSE_CREATE:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_SYMLINK:
	case FUSE_LINK:
		if (smuxfs_iov_at(iov, count,
				  h + offsetof(struct fuse_entry_out, nodeid),
				  &nodeid, sizeof(nodeid), false) &&
		    nodeid) {
			fill_zero(iov, count, h + ENTRY_INO, nodeid);
			entry_linked_uncached(iov, count, h, nodeid);
		}
		break;
	case FUSE_GETATTR:
	case FUSE_SETATTR:
		fill_zero(iov, count, h + ATTR_OUT_INO, cur.nodeid);
		linked_uncached(
			iov, count, h + offsetof(struct fuse_attr_out, attr),
			h + offsetof(struct fuse_attr_out, attr_valid),
			h + offsetof(struct fuse_attr_out, attr_valid_nsec),
			cur.nodeid);
		break;
	case FUSE_READDIR:
	case FUSE_READDIRPLUS:
		patch_dirents(iov, count, h, out.len,
			      cur.opcode == FUSE_READDIRPLUS);
		break;
	default:
		break;
	}
}

static ssize_t hook_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fuse_out_header out;
	bool has_out = smuxfs_iov_at(iov, count, 0, &out, sizeof(out), false);

	(void)userdata;
	/* a notification (unique 0, smuxfs_fnode_inval_attr): no reply to
	 * the request this thread serves */
	if (has_out && out.unique == 0)
		return writev(fd, iov, count);
	/* before the kernel has the reply: no RELEASE of it can come yet */
	if (cur.opcode == FUSE_OPEN || cur.opcode == FUSE_CREATE)
		note_open(iov, count);
	else if (cur.opcode == FUSE_INIT) {
		ask_init_flags(iov, count);
		smuxfs_pt_init_reply(hook_fs, iov, count);
	} else if ((cur.opcode == FUSE_OPENDIR &&
		    ghost_opendir(fd, iov, count)) ||
		   (cur.opcode == FUSE_GETATTR &&
		    stale_dir_getattr(fd, iov, count)) ||
		   smuxfs_special_answer(fd, iov, count, cur.opcode, cur.unique,
					 cur.nodeid)) {
		time_request(iov, count);
		return iov_len_total(iov, count);
	}
	patch_inos(iov, count);
	if (cur.unique && has_out && out.unique == cur.unique && out.error == 0)
		smuxfs_special_reply(iov, count, cur.opcode, cur.nodeid);
	time_request(iov, count);
	return writev(fd, iov, count);
}

uint64_t smuxfs_fnode_told_id(void)
{
	return cur.opcode == FUSE_OPEN ? smuxfs_told_id(cur.nodeid) : 0;
}

void smuxfs_fnode_inval_attr(void)
{
	struct fuse_context *c = fuse_get_context();

	/* attributes only (offset -1): no page of the node is touched, so
	 * the kernel needs no lock the current request may hold */
	if (c && c->fuse && cur.nodeid)
		(void)fuse_lowlevel_notify_inval_inode(
			fuse_get_session(c->fuse), cur.nodeid, -1, 0);
}

int smuxfs_fnode_hook(struct smuxfs *fs, struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = hook_read,
		.writev = hook_writev,
	};

	hook_fs = fs;
	fs->pt.devfd = fuse_session_fd(se); /* passthrough.c's ioctls */
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
