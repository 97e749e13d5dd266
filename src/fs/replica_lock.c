// SPDX-License-Identifier: MIT
/*
 * replica_lock.c - one daemon at a time keeps replicas in a directory.
 *
 * A mux that records repair hints (mirror, shield, failover,
 * sticky-by-key, with two members or more) keeps what its members missed
 * in its own state_dir and replays it later. Two daemons mounting such a
 * mux over the same local directories each kept their own hints and
 * undid each other's acknowledged writes: one's replay copied its older
 * version over the other's newer one, a crash reconcile landed in the
 * middle of the other's appends, both O_EXCL creates of a name succeeded
 * with a different file on each replica (s44-t1). So each file backend
 * under such a mux is claimed for the daemon's lifetime: an exclusive
 * flock(2) on its directory (the lock dies with the process, so kill -9
 * never keeps the next mount away; nothing is written there; the holder's
 * pid, for the message a second daemon gets, comes from /proc/locks). On
 * a file system where a directory takes no flock (NFS) nothing is
 * claimed. A plain file backend, or a round-robin or weighted pool,
 * claims nothing: those keep no state of their own, and two of them (or
 * a program) on one directory see each other's writes as on any local
 * disk.
 *
 * Claimed once per directory (device, inode) per process: a reload or an
 * `add` walks the whole new tree again, and what this daemon holds
 * already is skipped. Claims are never given back before exit (a member
 * removed at run time keeps its directory claimed until then).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "fs/config.h"
#include "fs/config_internal.h"

/* How long a claim waits for another daemon to let go (one unmounted
 * just before may still be exiting). */
#define CLAIM_WAIT_MS 5000

struct claim {
	dev_t dev;
	ino_t ino;
	int fd; /* the directory, its flock held until exit */
};

static pthread_mutex_t claims_lock = PTHREAD_MUTEX_INITIALIZER;
static struct claim *claims;
static unsigned n_claims, cap_claims;

static bool held(const struct stat *st)
{
	for (unsigned i = 0; i < n_claims; i++)
		if (claims[i].dev == st->st_dev && claims[i].ino == st->st_ino)
			return true;
	return false;
}

/* The pid holding a flock(2) on the file @st names (0: unknown), from
 * /proc/locks ("1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"). */
static long holder(const struct stat *st)
{
	char line[256], type[16], mode[16], rw[16];
	unsigned maj, min;
	unsigned long long ino;
	long pid, found = 0;
	FILE *f = fopen("/proc/locks", "re");

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*[^:]: %15s %15s %15s %ld %x:%x:%llu", type,
			   mode, rw, &pid, &maj, &min, &ino) == 7 &&
		    strcmp(type, "FLOCK") == 0 && ino == st->st_ino &&
		    maj == major(st->st_dev) && min == minor(st->st_dev))
			found = pid;
	fclose(f);
	return found;
}

/* Claims the file backend @s's directory; caller holds claims_lock. */
static int claim_dir(const struct smux__cfg_section *s, char *errbuf,
		     size_t cap)
{
	const char *path = s->v[SMUX__BK_PATH].s;
	struct stat st;
	int fd, waited = 0;
	char pid[32] = "";

	if (!path)
		return 0;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || held(&st)) {
		/* a path that cannot be opened is the backend's error */
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		struct timespec ts = {0, 50 * 1000000L};
		long other;

		if (errno != EWOULDBLOCK) {
			/* a file system without flock of a directory (NFS
			 * turns it into a write lock, which a directory
			 * opened for reading cannot take): unclaimed */
			close(fd);
			return 0;
		}
		if (waited >= CLAIM_WAIT_MS) {
			other = holder(&st);
			if (other > 0)
				snprintf(pid, sizeof(pid), " (pid %ld)", other);
			snprintf(errbuf, cap,
				 "[backend %s] path %s (line %d): another "
				 "smuxfs "
				 "daemon%s keeps replicas there; two daemons "
				 "would each keep their own repair hints and "
				 "undo "
				 "each other's writes: unmount the other mount "
				 "first, or mount this directory alone (a mux "
				 "of "
				 "one member)",
				 s->name, path, s->v[SMUX__BK_PATH].line, pid);
			close(fd);
			return -EBUSY;
		}
		nanosleep(&ts, NULL);
		waited += 50;
	}
	if (n_claims == cap_claims) {
		unsigned ncap = cap_claims ? 2 * cap_claims : 8;
		struct claim *n = realloc(claims, ncap * sizeof(*n));

		if (!n) {
			close(fd);
			snprintf(errbuf, cap, "out of memory");
			return -ENOMEM;
		}
		claims = n;
		cap_claims = ncap;
	}
	claims[n_claims++] = (struct claim){st.st_dev, st.st_ino, fd};
	return 0;
}

/* Walks @s: file backends below a mux that keeps hints (@kept) are
 * claimed. */
static int walk(const struct smux__cfg_section *s, bool kept, unsigned depth,
		char *errbuf, size_t cap)
{
	int rc = 0;

	if (!s || depth > 64)
		return 0;
	if (s->kind == SMUX__CFG_MUX) {
		bool keeps = smux_mode_keeps_hints(
			(enum smux_mode)s->v[SMUX__XK_MODE].i, s->n_members);

		for (unsigned i = 0; i < s->n_members && !rc; i++)
			if (s->member_secs)
				rc = walk(s->member_secs[i], kept || keeps,
					  depth + 1, errbuf, cap);
		return rc;
	}
	if (s->kind != SMUX__CFG_BACKEND)
		return 0;
	switch ((enum smux__cfg_type)s->v[SMUX__BK_TYPE].i) {
	case SMUX__CFG_T_FAULTY:
		return walk(s->wraps_sec, kept, depth + 1, errbuf, cap);
	case SMUX__CFG_T_FILE:
		return kept ? claim_dir(s, errbuf, cap) : 0;
	default:
		return 0;
	}
}

bool smux_mode_keeps_hints(enum smux_mode mode, unsigned members)
{
	return members >= 2 && mode != SMUX_MODE_ROUND_ROBIN &&
	       mode != SMUX_MODE_WEIGHTED;
}

int smuxfs_replica_claim(const struct smux_config *cfg, char *errbuf,
			 size_t cap)
{
	int rc;

	pthread_mutex_lock(&claims_lock);
	rc = walk(cfg->root, false, 0, errbuf, cap);
	pthread_mutex_unlock(&claims_lock);
	return rc;
}

int smuxfs_replica_claim_member(const struct smux_config *cfg, const char *name,
				char *errbuf, size_t cap)
{
	int rc;

	pthread_mutex_lock(&claims_lock);
	rc = walk(smux__cfg_find(cfg, name), true, 0, errbuf, cap);
	pthread_mutex_unlock(&claims_lock);
	return rc;
}
