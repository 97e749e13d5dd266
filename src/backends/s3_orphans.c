/* SPDX-License-Identifier: MIT */
/*
 * s3_orphans.c - the journal of the s3 backend's multipart uploads in
 * flight, so that uploads a crash left behind (kill -9, power loss in the
 * middle of a large put or copy) are aborted at the next start instead of
 * keeping their parts on the server for ever.
 *
 * One file per upload in the journal directory (smux_s3_opts
 * .upload_journal), named by the SHA-256 of the upload id, written and
 * fsynced when the server gave the id (before the first part) and removed
 * when the upload completed or was aborted. Its content:
 * "smux-s3-upload 1\n" UPLOAD-ID "\n" KEY (the key to the end, raw).
 *
 * At open, the files present (and only those: uploads started from now on
 * are this process's own) are read into a list, unless another live
 * instance has the journal (each holds a shared flock(2) on the directory
 * while open; the list is read only by one that gets it exclusive, so a
 * second mount of the same state_dir never aborts the first's uploads in
 * flight); when it is not empty, a
 * sweeper thread aborts each upload (AbortMultipartUpload; "no such
 * upload" counts as done) and removes its file, retrying with backoff
 * while the server is unreachable, at most S3O_TRIES passes. Opening makes
 * no request (a server down at mount is a member that is down). The
 * sweeper is stopped and joined when the backend is destroyed; an abort in
 * flight then ends by its own deadline (s3_mpu.c).
 *
 * Every file is hostile input: bounded size, checked format; a file that
 * does not parse is left alone (and not counted).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/s3_internal.h"

#define S3O_MAGIC    "smux-s3-upload 1\n"
#define S3O_ID_MAX   1024 /* an upload id longer than this is not journaled */
#define S3O_TRIES    6	  /* sweeps of what is left: 1 + 2 + 4 + 8 + 16 s */
#define S3O_FILE_MAX (sizeof(S3O_MAGIC) + S3O_ID_MAX + 1 + SMUX_KEY_MAX + 1)

struct s3o_entry {
	char *id;
	char *key;
	char name[SMUX_S3_HEX256]; /* the journal file */
	struct s3o_entry *next;
};

struct s3b_orphans {
	char *dir; /* immutable */
	int dirfd; /* immutable; O_DIRECTORY */
	/* left by an earlier run; the sweeper's alone once started */
	struct s3o_entry *left;
	unsigned nleft;
	pthread_t tid;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* stop */
	bool stop;	     /* protected by lock */
};

static bool id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > S3O_ID_MAX)
		return false;
	for (; *id; id++)
		if (*id <= ' ' || *id > '~')
			return false;
	return true;
}

static void entry_free(struct s3o_entry *e)
{
	if (!e)
		return;
	free(e->id);
	free(e->key);
	free(e);
}

/* Reads journal file @name; NULL when it does not parse. */
static struct s3o_entry *entry_read(int dirfd, const char *name)
{
	char *buf = malloc(S3O_FILE_MAX + 1);
	struct s3o_entry *e = NULL;
	char *id, *nl;
	ssize_t n;
	size_t len = 0;
	int fd;

	if (!buf)
		return NULL;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		goto out;
	while (len < S3O_FILE_MAX + 1) {
		n = read(fd, buf + len, S3O_FILE_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (len > S3O_FILE_MAX || len < sizeof(S3O_MAGIC) ||
	    memcmp(buf, S3O_MAGIC, sizeof(S3O_MAGIC) - 1) != 0)
		goto out;
	buf[len] = '\0';
	id = buf + sizeof(S3O_MAGIC) - 1;
	nl = memchr(id, '\n', len - (size_t)(id - buf));
	if (!nl)
		goto out;
	*nl = '\0';
	if (!id_ok(id) || !nl[1] ||
	    strlen(nl + 1) != len - (size_t)(nl + 1 - buf))
		goto out; /* no key, or a NUL inside it */
	e = calloc(1, sizeof(*e));
	if (!e)
		goto out;
	e->id = strdup(id);
	e->key = strdup(nl + 1);
	/* @name is 64 hex digits (name_is_hex) */
	memcpy(e->name, name, sizeof(e->name) - 1);
	e->name[sizeof(e->name) - 1] = '\0';
	if (!e->id || !e->key) {
		entry_free(e);
		e = NULL;
	}
out:
	free(buf);
	return e;
}

static bool name_is_hex(const char *name)
{
	size_t n = strlen(name);

	if (n != SMUX_S3_HEX256 - 1)
		return false;
	for (; *name; name++)
		if (!((*name >= '0' && *name <= '9') ||
		      (*name >= 'a' && *name <= 'f')))
			return false;
	return true;
}

/* The uploads an earlier run left in the journal. */
static void load_left(struct s3b_orphans *o)
{
	int fd = dup(o->dirfd);
	struct dirent *d;
	DIR *dir;

	if (fd < 0)
		return;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	while ((d = readdir(dir))) {
		struct s3o_entry *e;

		if (!name_is_hex(d->d_name))
			continue;
		e = entry_read(o->dirfd, d->d_name);
		if (!e)
			continue;
		e->next = o->left;
		o->left = e;
		o->nleft++;
	}
	closedir(dir);
}

/* Waits @ns or until stopped; true when stopped. */
static bool wait_stop(struct s3b_orphans *o, int64_t ns)
{
	struct timespec ts;
	bool stop;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000);
	ts.tv_nsec += (long)(ns % 1000000000);
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&o->lock);
	while (!o->stop &&
	       pthread_cond_timedwait(&o->cond, &o->lock, &ts) != ETIMEDOUT)
		;
	stop = o->stop;
	pthread_mutex_unlock(&o->lock);
	return stop;
}

static void *sweeper_main(void *arg)
{
	struct s3b *s = arg;
	struct s3b_orphans *o = s->orphans;
	int64_t backoff = 1000000000;

	for (unsigned pass = 0; pass < S3O_TRIES && o->left; pass++) {
		struct s3o_entry **pp = &o->left;

		if (pass && wait_stop(o, backoff))
			break;
		backoff *= 2;
		while (*pp) {
			struct s3o_entry *e = *pp;
			struct smux_ctx ctx;
			int rc;

			pthread_mutex_lock(&o->lock);
			rc = o->stop;
			pthread_mutex_unlock(&o->lock);
			if (rc)
				return NULL;
			smux_ctx_init(&ctx);
			rc = smux__s3_mpu_abort(s, &ctx, e->key, e->id);
			if (rc == 0 || rc == -ENOENT) {
				unlinkat(o->dirfd, e->name, 0);
				*pp = e->next;
				entry_free(e);
			} else {
				pp = &e->next;
			}
		}
	}
	return NULL;
}

int smux__s3_orphans_open(struct s3b *s, const char *dir,
			  struct smux_error *err)
{
	struct s3b_orphans *o;
	int rc;

	rc = smux__mkdirs(dir);
	if (rc < 0)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->base.name,
				      "upload journal %s: %s", dir,
				      strerror(-rc));
	o = calloc(1, sizeof(*o));
	if (!o)
		return smux_error_set(err, SMUX_E_NO_MEMORY, s->base.name,
				      NULL);
	o->dir = strdup(dir);
	o->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!o->dir || o->dirfd < 0) {
		rc = smux_error_set(err, SMUX_E_INVALID_OPTIONS, s->base.name,
				    "upload journal %s: %s", dir,
				    o->dir ? strerror(errno) : "out of memory");
		if (o->dirfd >= 0)
			close(o->dirfd);
		free(o->dir);
		free(o);
		return rc;
	}
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	s->orphans = o;
	/* Every instance holds a shared flock on the journal for its
	 * lifetime; only one that gets it exclusive (no other live one:
	 * another mount of the same state_dir, a reload's new instance
	 * beside the running one) takes what is there for orphans. Not
	 * atomic, and need not be: nothing of ours is journaled yet. */
	if (flock(o->dirfd, LOCK_EX | LOCK_NB) == 0) {
		load_left(o);
		if (o->left &&
		    pthread_create(&o->tid, NULL, sweeper_main, s) == 0)
			o->started = true;
	}
	/* held until close (the fd's); failing leaves the journal unguarded
	 * against another instance's sweep, nothing worse */
	(void)flock(o->dirfd, LOCK_SH);
	return 0;
}

void smux__s3_orphans_close(struct s3b *s)
{
	struct s3b_orphans *o = s->orphans;

	if (!o)
		return;
	if (o->started) {
		pthread_mutex_lock(&o->lock);
		o->stop = true;
		pthread_cond_broadcast(&o->cond);
		pthread_mutex_unlock(&o->lock);
		pthread_join(o->tid, NULL);
	}
	while (o->left) {
		struct s3o_entry *e = o->left;

		o->left = e->next;
		entry_free(e);
	}
	pthread_cond_destroy(&o->cond);
	pthread_mutex_destroy(&o->lock);
	close(o->dirfd);
	free(o->dir);
	free(o);
	s->orphans = NULL;
}

/* The journal file of @upload_id. */
static void file_name(const char *upload_id, char name[SMUX_S3_HEX256])
{
	smux__s3_sha256_hex(upload_id, strlen(upload_id), name);
}

void smux__s3_orphans_add(struct s3b *s, const char *key, const char *upload_id)
{
	struct s3b_orphans *o = s->orphans;
	char name[SMUX_S3_HEX256], tmp[SMUX_S3_HEX256 + 8];
	size_t hl = sizeof(S3O_MAGIC) - 1, il, kl;
	char *buf;
	int fd;

	if (!o || !id_ok(upload_id))
		return;
	il = strlen(upload_id);
	kl = strlen(key);
	buf = malloc(hl + il + 1 + kl);
	if (!buf)
		return;
	memcpy(buf, S3O_MAGIC, hl);
	memcpy(buf + hl, upload_id, il);
	buf[hl + il] = '\n';
	memcpy(buf + hl + il + 1, key, kl);
	file_name(upload_id, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	/* whole or absent: written aside, fsynced, renamed, dir fsynced */
	fd = openat(o->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0600);
	if (fd >= 0) {
		size_t len = hl + il + 1 + kl, off = 0;
		bool ok = true;

		while (ok && off < len) {
			ssize_t n = write(fd, buf + off, len - off);

			if (n < 0 && errno == EINTR)
				continue;
			ok = n > 0;
			off += ok ? (size_t)n : 0;
		}
		ok = ok && fsync(fd) == 0;
		close(fd);
		if (ok && renameat(o->dirfd, tmp, o->dirfd, name) == 0)
			fsync(o->dirfd);
		else
			unlinkat(o->dirfd, tmp, 0);
	}
	free(buf);
}

void smux__s3_orphans_done(struct s3b *s, const char *upload_id)
{
	char name[SMUX_S3_HEX256];

	if (!s->orphans || !upload_id)
		return;
	file_name(upload_id, name);
	unlinkat(s->orphans->dirfd, name, 0);
}
