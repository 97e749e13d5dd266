/* SPDX-License-Identifier: MIT */
/*
 * rename_journal.c - crash safety of a directory rename moved key by key
 * (issue 8 item 8; ops_meta.c rename_dir).
 *
 * Where the root cannot rename a directory in one call per replica (a
 * member that is not a file backend, a replica down, a hint pending) the
 * daemon moves it key by key, which takes as long as the tree is big. A
 * crash in the middle would leave the tree half under each name for good.
 * So before the first key moves, a record {"from": "a/", "to": "b/"} is
 * made durable in state_dir as dir-rename.<mount>.<seq>.json (written to a
 * temporary name, fsync'ed, renamed, directory fsync'ed), and removed (with
 * a directory fsync) once the move is over. At the next mount, before the
 * filesystem is served, smuxfs_rjournal_recover() finishes every rename a
 * record names (move_keys run again on what is left: each of its steps can
 * be done twice) and logs it; the move is rolled forward, never back,
 * since the new name's markers are made first.
 *
 * A record that is not one (bad JSON, keys that are not directory keys)
 * is left where it is and named in the log: nothing is moved on its word.
 * A record whose move fails again stays for the next mount.
 *
 * The mount moving a directory holds an exclusive flock(2) on its record
 * (taken before the record has its name) until the move is over, and so
 * does a recovery while it completes one: a second mount of the same
 * state_dir, started meanwhile, leaves a record it cannot lock to the
 * live mount that holds it (it took it for a crash's and moved the keys
 * beside it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "fs/fs.h"
#include "smux/key.h"

#define RJ_PREFIX "dir-rename."
#define RJ_SUFFIX ".json"

/* Orders the records of one run (with the mount's start in the name,
 * those of runs). */
static atomic_uint rj_seq;

/* fsync of the directory @dir, so a create, rename or unlink in it lasts. */
static int rj_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Writes @text to @path durably: a temporary sibling, fsync, rename. The
 * file, flock'ed exclusively before it has its name, stays open in
 * *@lockfd. */
static int rj_write(const char *path, const char *text, int *lockfd)
{
	char tmp[PATH_MAX + 8];
	size_t len = strlen(text), off = 0;
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	*lockfd = -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		rc = -errno;
	while (off < len && !rc) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		close(fd);
		return rc;
	}
	*lockfd = fd;
	return 0;
}

int smuxfs_rjournal_begin(struct smuxfs *fs, const char *from, const char *to,
			  struct smuxfs_rjournal *rec)
{
	const char *dir = fs->opts->state_dir;
	json_t *j;
	char *text;
	int rc;

	rec->path[0] = '\0';
	rec->fd = -1;
	if (!dir)
		return 0; /* no state_dir: nothing can be kept across a crash */
	if (snprintf(rec->path, sizeof(rec->path),
		     "%s/" RJ_PREFIX "%020lld.%010u" RJ_SUFFIX, dir,
		     (long long)fs->mount_ns,
		     atomic_fetch_add(&rj_seq, 1)) >= (int)sizeof(rec->path)) {
		rec->path[0] = '\0';
		return -ENAMETOOLONG;
	}
	j = json_pack("{s:s, s:s}", "from", from, "to", to);
	text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text) {
		rec->path[0] = '\0';
		return -ENOMEM;
	}
	rc = rj_write(rec->path, text, &rec->fd);
	free(text);
	if (!rc)
		rc = rj_sync_dir(dir);
	if (rc) {
		smux_log(LOG_ERR,
			 "rename of directory \"%s\" to \"%s\": cannot journal "
			 "it in %s: %s (not renamed)",
			 from, to, rec->path, strerror(-rc));
		unlink(rec->path);
		if (rec->fd >= 0)
			close(rec->fd);
		rec->fd = -1;
		rec->path[0] = '\0';
		return rc == -ENOSPC ? -ENOSPC : -EIO;
	}
	return 0;
}

void smuxfs_rjournal_end(struct smuxfs *fs, const struct smuxfs_rjournal *rec)
{
	int rc = 0;

	if (!rec->path[0])
		return;
	if (unlink(rec->path) < 0)
		rc = -errno;
	else
		rc = rj_sync_dir(fs->opts->state_dir);
	if (rec->fd >= 0)
		close(rec->fd); /* its lock goes with it, the name first */
	/* a record that outlives its move only costs a move of nothing at
	 * the next mount, unless the name is used again meanwhile: say so */
	if (rc)
		smux_log(LOG_WARNING,
			 "%s: cannot remove the finished rename's "
			 "record: %s",
			 rec->path, strerror(-rc));
}

/* True for a directory key ("a/b/") that may be moved. */
static bool rj_dir_key(const char *key)
{
	struct smux_error err;
	size_t len = strlen(key);

	return len > 1 && key[len - 1] == '/' &&
	       smux_key_check(key, SMUX_KEY_ALLOW_DIR, "rename journal",
			      &err) == 0;
}

/*
 * Reads the record @path into @from and @to (each SMUX_KEY_MAX + 2
 * bytes). 0, or -EINVAL with @why set when it is not a record.
 */
static int rj_read(const char *path, char *from, char *to, char *why,
		   size_t cap)
{
	const char *f = NULL, *t = NULL;
	json_error_t jerr;
	json_t *j;
	int rc = -EINVAL;

	j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		snprintf(why, cap, "line %d: %s", jerr.line, jerr.text);
		return -EINVAL;
	}
	if (json_unpack(j, "{s:s, s:s}", "from", &f, "to", &t) != 0)
		snprintf(why, cap, "\"from\" and \"to\" must be strings");
	else if (!rj_dir_key(f) || !rj_dir_key(t))
		snprintf(why, cap,
			 "\"from\" and \"to\" must be directory keys");
	else if (strncmp(t, f, strlen(f)) == 0 || strncmp(f, t, strlen(t)) == 0)
		snprintf(why, cap, "\"%s\" and \"%s\": one holds the other", f,
			 t);
	else if (strlen(f) > SMUX_KEY_MAX || strlen(t) > SMUX_KEY_MAX)
		snprintf(why, cap, "key too long");
	else {
		memcpy(from, f, strlen(f) + 1);
		memcpy(to, t, strlen(t) + 1);
		rc = 0;
	}
	json_decref(j);
	return rc;
}

static int rj_is_record(const struct dirent *d)
{
	size_t len = strlen(d->d_name), sl = strlen(RJ_SUFFIX);

	return strncmp(d->d_name, RJ_PREFIX, strlen(RJ_PREFIX)) == 0 &&
	       len > sl && strcmp(d->d_name + len - sl, RJ_SUFFIX) == 0;
}

int smuxfs_rjournal_recover(struct smuxfs *fs)
{
	const char *dir = fs->opts->state_dir;
	char from[SMUX_KEY_MAX + 2], to[SMUX_KEY_MAX + 2], why[256];
	struct smuxfs_rjournal rec;
	struct dirent **names;
	struct stat st;
	int n, rc, left = 0;

	if (!dir)
		return 0;
	n = scandir(dir, &names, rj_is_record, alphasort); /* oldest first */
	if (n < 0)
		return errno == ENOENT ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		if (snprintf(rec.path, sizeof(rec.path), "%s/%s", dir,
			     names[i]->d_name) >= (int)sizeof(rec.path)) {
			left++;
			continue;
		}
		/* a record a live mount holds is its move, in progress */
		rec.fd = open(rec.path, O_RDONLY | O_CLOEXEC);
		if (rec.fd < 0)
			continue; /* its move ended meanwhile */
		if (flock(rec.fd, LOCK_EX | LOCK_NB) < 0) {
			smux_log(LOG_INFO,
				 "%s: a rename another mount of this state_dir "
				 "is making: left to it",
				 rec.path);
			close(rec.fd);
			continue;
		}
		/* the mount that held it removed it, then let go: done */
		if (fstat(rec.fd, &st) == 0 && st.st_nlink == 0) {
			close(rec.fd);
			continue;
		}
		if (rj_read(rec.path, from, to, why, sizeof(why))) {
			smux_log(LOG_ERR,
				 "%s: not a directory rename record (%s): "
				 "left alone, nothing moved",
				 rec.path, why);
			close(rec.fd);
			left++;
			continue;
		}
		rc = smuxfs_rename_dir_redo(fs, from, to);
		if (rc) {
			smux_log(LOG_ERR,
				 "rename of directory \"%s\" to \"%s\" "
				 "interrupted by a crash: completing it "
				 "failed: %s (the record %s stays for the "
				 "next mount)",
				 from, to, strerror(-rc), rec.path);
			close(rec.fd);
			left++;
			continue;
		}
		smux_log(LOG_WARNING,
			 "rename of directory \"%s\" to \"%s\" interrupted by "
			 "a crash: completed",
			 from, to);
		smuxfs_rjournal_end(fs, &rec);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return left ? -EAGAIN : 0;
}
