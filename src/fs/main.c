/* SPDX-License-Identifier: MIT */
/*
 * main.c - the smuxfs command: command line, configuration, daemonizing,
 * the FUSE mount and its loop, and orderly teardown.
 *
 *   smuxfs CONFIG MOUNTPOINT [-o opt[,opt...]] [-f] [-d] [-s]
 *   smuxfs --check-config CONFIG
 *
 * Startup order matters: the configuration is read first (errors name the
 * file and line); in the background the process forks *before* any thread
 * exists (libsmux muxes and the event bus start threads), and the parent
 * waits on a status pipe until the child has built the backend tree and
 * mounted, so `smuxfs cfg dir` returns only once the mount is ready, or
 * with the reason it is not.
 *
 * Exit status (also in --help):
 *   0  mounted (and later unmounted cleanly), or --check-config passed
 *   1  usage error, or the configuration / a mount option is invalid
 *   2  the backend tree (or the cache directory) could not be set up
 *   3  the FUSE mount failed (mountpoint missing, not permitted, ...)
 *   4  a runtime failure: the daemon died during startup or its loop failed
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"

#ifndef SMUXFS_VERSION
#define SMUXFS_VERSION "0.1.0"
#endif

enum {
	EXIT_OK = 0,
	EXIT_USAGE = 1,
	EXIT_BACKEND = 2,
	EXIT_MOUNT = 3,
	EXIT_RUNTIME = 4,
};

#define MAX_OPTS 128

struct cli {
	const char *config;
	const char *mountpoint;
	const char *opt_args[MAX_OPTS]; /* each -o argument, unsplit */
	unsigned n_opt_args;
	bool foreground, debug, single, check;
};

/* What the child tells the waiting parent. */
struct status_msg {
	int status;
	char msg[1024];
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: smuxfs CONFIG MOUNTPOINT [-o opt[,opt...]] [-f] [-d] "
		"[-s]\n"
		"       smuxfs --check-config CONFIG\n"
		"       smuxfs --help | --version\n"
		"\n"
		"Mounts the storage tree described by CONFIG (an INI file) on "
		"MOUNTPOINT.\n"
		"\n"
		"  -o OPTS          comma-separated mount options:\n"
		"                   smuxfs: cache_dir=, state_dir=, "
		"attr_timeout=,\n"
		"                   entry_timeout=, negative_timeout=, "
		"dir_cache_timeout=,\n"
		"                   cache_size=, read_ahead=,\n"
		"                   read_cache=auto|on|off, xattr=auto|on|off, "
		"passthrough=auto|on|off, "
		"uid=, gid=, umask=,\n"
		"                   allow_other (turns on "
		"default_permissions),\n"
		"                   default_permissions, "
		"no_default_permissions, ro, rw;\n"
		"                   fstab's _netdev, nofail, noauto, "
		"x-systemd.*, defaults ...\n"
		"                   are ignored; anything else goes to FUSE\n"
		"  -f               stay in the foreground, log to stderr\n"
		"  -d               debug: log every failure, FUSE debug "
		"output (implies -f)\n"
		"  -s               single-threaded\n"
		"  --check-config   read and validate CONFIG, print the tree, "
		"mount nothing\n"
		"  -h, --help       this text\n"
		"  -V, --version    the version\n"
		"\n"
		"Exit status:\n"
		"  0  mounted (and later unmounted cleanly), or the "
		"configuration is valid\n"
		"  1  usage error, invalid configuration or mount option\n"
		"  2  the backend tree or the cache directory could not be "
		"set up\n"
		"  3  the FUSE mount failed\n"
		"  4  runtime failure (the daemon died or its loop failed)\n");
}

static int parse_cli(int argc, char **argv, struct cli *c)
{
	bool only_pos = false;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!only_pos && strcmp(a, "--") == 0) {
			only_pos = true;
		} else if (!only_pos &&
			   (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
			usage(stdout);
			exit(EXIT_OK);
		} else if (!only_pos && (strcmp(a, "-V") == 0 ||
					 strcmp(a, "--version") == 0)) {
			printf("smuxfs %s (libfuse %s)\n", SMUXFS_VERSION,
			       fuse_pkgversion());
			exit(EXIT_OK);
		} else if (!only_pos && strcmp(a, "--check-config") == 0) {
			c->check = true;
		} else if (!only_pos && strncmp(a, "-o", 2) == 0) {
			const char *v = a[2] ? a + 2 : NULL;

			if (!v && i + 1 < argc)
				v = argv[++i];
			if (!v) {
				fprintf(stderr, "smuxfs: -o needs options\n");
				return -1;
			}
			if (c->n_opt_args == MAX_OPTS) {
				fprintf(stderr, "smuxfs: too many -o\n");
				return -1;
			}
			c->opt_args[c->n_opt_args++] = v;
		} else if (!only_pos && strcmp(a, "-f") == 0) {
			c->foreground = true;
		} else if (!only_pos && strcmp(a, "-d") == 0) {
			c->debug = true;
			c->foreground = true;
		} else if (!only_pos && strcmp(a, "-s") == 0) {
			c->single = true;
		} else if (!only_pos && a[0] == '-' && a[1]) {
			fprintf(stderr, "smuxfs: unknown option %s\n", a);
			return -1;
		} else if (!c->config) {
			c->config = a;
		} else if (!c->mountpoint) {
			c->mountpoint = a;
		} else {
			fprintf(stderr, "smuxfs: unexpected argument %s\n", a);
			return -1;
		}
	}
	if (!c->config || (!c->check && !c->mountpoint)) {
		fprintf(stderr, "smuxfs: %s\n",
			c->check ? "--check-config needs CONFIG"
				 : "CONFIG and MOUNTPOINT are required");
		return -1;
	}
	return 0;
}

/* Adds "-o OPT" for FUSE, escaping ',' and '\' in @opt. */
static int fuse_opt(struct fuse_args *args, const char *opt)
{
	char buf[PATH_MAX * 2 + 64];
	size_t o = 0;

	for (const char *p = opt; *p; p++) {
		if (o + 3 >= sizeof(buf))
			return -1;
		if (*p == ',' || *p == '\\')
			buf[o++] = '\\';
		buf[o++] = *p;
	}
	buf[o] = '\0';
	if (fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, buf))
		return -1;
	return 0;
}

/*
 * Splits every -o argument: options smuxfs ignores are dropped, its own
 * are applied to the configuration, the rest are passed to FUSE. Returns
 * 0 or -1 after printing the reason.
 */
static int apply_opts(struct cli *c, struct smux_config *cfg,
		      struct fuse_args *args)
{
	char one[1024], errbuf[512];

	for (unsigned i = 0; i < c->n_opt_args; i++) {
		const char *p = c->opt_args[i];

		while (*p) {
			size_t n = strcspn(p, ",");
			int rc;

			if (n >= sizeof(one)) {
				fprintf(stderr, "smuxfs: option too long\n");
				return -1;
			}
			memcpy(one, p, n);
			one[n] = '\0';
			p += n;
			if (*p == ',')
				p++;
			if (!one[0] || smux_config_ignored_opt(one))
				continue;
			errbuf[0] = '\0';
			rc = smux_config_mount_opt(cfg, one, errbuf,
						   sizeof(errbuf));
			if (rc < 0) {
				fprintf(stderr, "smuxfs: %s\n",
					errbuf[0] ? errbuf : one);
				return -1;
			}
			if (rc == 0 && fuse_opt(args, one)) {
				fprintf(stderr, "smuxfs: out of memory\n");
				return -1;
			}
		}
	}
	/* last, so they win: mount(8) turns fstab's "defaults" into
	 * "suid,dev", and a root mount from fstab had neither (s44-t4);
	 * the daemon grants no set-id bit and serves no device
	 * (docs/configuration.md) */
	if (fuse_opt(args, "nosuid") || fuse_opt(args, "nodev")) {
		fprintf(stderr, "smuxfs: out of memory\n");
		return -1;
	}
	return 0;
}

/* mkdir -p with @mode for each directory created. */
static int mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -errno;
			*p = c;
			if (!c)
				break;
		}
	}
	return 0;
}

/* "", or the prefix with one trailing '/' and no leading one. */
static char *norm_prefix(const char *p)
{
	size_t len;
	char *out;

	p = p ? p : "";
	while (*p == '/')
		p++;
	len = strlen(p);
	while (len && p[len - 1] == '/')
		len--;
	out = malloc(len + 2);
	if (!out)
		return NULL;
	memcpy(out, p, len);
	if (len)
		out[len++] = '/';
	out[len] = '\0';
	return out;
}

/* The mount's "major:minor" from /proc/self/mountinfo (never stat() on
 * the mountpoint before the loop runs: it would wait for ourselves). */
static int find_devnum(const char *mnt, char *out, size_t cap)
{
	char esc[PATH_MAX * 4];
	char *line = NULL;
	size_t n = 0, o = 0;
	int found = -1;
	FILE *f;

	/* mountinfo escapes space, tab, newline and backslash as \ooo */
	for (const char *p = mnt; *p && o + 5 < sizeof(esc); p++) {
		if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\\')
			o += (size_t)snprintf(esc + o, sizeof(esc) - o,
					      "\\%03o", (unsigned char)*p);
		else
			esc[o++] = *p;
	}
	esc[o] = '\0';
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	while (getline(&line, &n, f) > 0) {
		char *fields[5], *p = line;
		unsigned k;

		/* id parent major:minor root mountpoint ... */
		for (k = 0; k < 5 && *p; k++) {
			fields[k] = p;
			p += strcspn(p, " \n");
			if (*p)
				*p++ = '\0';
		}
		if (k < 5 || strcmp(fields[4], esc) != 0)
			continue;
		/* the last one wins: ours is stacked on top */
		snprintf(out, cap, "%s", fields[2]);
		found = 0;
	}
	free(line);
	fclose(f);
	return found;
}

/* Finds where the mount's read-ahead lives; the first getattr raises it
 * (DESIGN 7), once the kernel has applied the INIT reply. */
static void locate_readahead(struct smuxfs *fs, const char *mnt)
{
	char dev[64];

	if (find_devnum(mnt, dev, sizeof(dev))) {
		smux_log(LOG_DEBUG, "read-ahead: %s not in mountinfo", mnt);
		return;
	}
	snprintf(fs->readahead_path, sizeof(fs->readahead_path),
		 "/sys/class/bdi/%s/read_ahead_kb", dev);
}

struct daemon {
	struct cli cli;
	struct fuse_args args;
	struct smux_config *cfg;
	struct smuxfs fs;
	char *prefix;
	char mnt[PATH_MAX];
	struct fuse *fuse;
	struct fuse_operations ops; /* smuxfs_ops as [mount] xattr says */
	bool mounted;
	bool signals;
};

/* Fills sm->msg (truncated if need be) and returns the exit status @st.
 * Using snprintf's result keeps -Wformat-truncation quiet: a long path
 * cut short in a message is fine. */
#define FAIL(st, ...)                                                    \
	do {                                                             \
		if (snprintf(sm->msg, sizeof(sm->msg), __VA_ARGS__) < 0) \
			sm->msg[0] = '\0';                               \
		return (st);                                             \
	} while (0)

/* Everything between reading the configuration and the loop. Returns an
 * exit status with sm->msg saying why. */
/* Raises the soft limit of open files to the hard one (open files through
 * the mount each keep a descriptor, as mergerfs's do) and returns how
 * many readers may stay open: half of it, the rest for everything else. */
static long raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 256;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1 << 20)
		return 1 << 19;
	return (long)(rl.rlim_cur / 2);
}

static int start(struct daemon *d, struct status_msg *sm)
{
	struct smuxfs *fs = &d->fs;
	struct smux_fs_opts *o = smux_config_opts(d->cfg);
	char errbuf[512], staging[PATH_MAX], rdir[PATH_MAX];
	const char *staging_env;
	struct timespec now;
	bool xattr;
	int rc;

	fs->cfg = d->cfg;
	fs->opts = o;
	pthread_mutex_init(&fs->reload_lock, NULL);
	pthread_mutex_init(&fs->cfg_lock, NULL);
	pthread_mutex_init(&fs->pt.lock, NULL);
	fs->staging_fd = -1;
	fs->ro = o->ro;
	staging_env = getenv("SMUXFS_FORCE_STAGING");
	fs->force_staging = staging_env && strcmp(staging_env, "1") == 0;
	fs->real_dirs = smux_config_real_dirs(d->cfg);
	fs->has_file = smux_config_has_file(d->cfg);
	/* a local directory moves its mtime and link count with its entries
	 * too (failover and shield keep a directory cache: real_dirs) */
	fs->dir_mtimes =
		smux_config_has_http(d->cfg) || smux_config_has_file(d->cfg);
	fs->stage_sha256 = smux_config_has_bunny(d->cfg);
	fs->max_readers = raise_nofile();
	fs->uid = o->has_uid ? o->uid : getuid();
	fs->gid = o->has_gid ? o->gid : getgid();
	fs->umask = o->has_umask ? o->umask : 0;
	atomic_store(&fs->root_uid, SMUX_ID_NONE);
	atomic_store(&fs->root_gid, SMUX_ID_NONE);
	clock_gettime(CLOCK_REALTIME, &now);
	fs->mount_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	smuxfs_init_tables(fs);
	d->prefix = norm_prefix(o->prefix);
	if (!d->prefix)
		FAIL(EXIT_RUNTIME, "out of memory");
	fs->prefix = d->prefix;
	fs->prefix_len = strlen(d->prefix);

	/* before anything is made or emptied in them (config_dirs.c) */
	errbuf[0] = '\0';
	if (smux_config_check_dirs(d->cfg, NULL, d->cli.mountpoint, errbuf,
				   sizeof(errbuf)))
		FAIL(EXIT_USAGE, "%s", errbuf);

	const char *cache =
		o->cache_dir ? o->cache_dir : SMUX_FS_DEFAULT_CACHE_DIR;
	if (snprintf(staging, sizeof(staging), "%s/staging", cache) >=
	    (int)sizeof(staging))
		FAIL(EXIT_BACKEND, "cache_dir %s: path too long", cache);
	rc = mkdirs(staging, 0700);
	if (rc)
		FAIL(EXIT_BACKEND, "cache_dir %s: %s", staging, strerror(-rc));
	fs->staging_fd = open(staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fs->staging_fd < 0)
		FAIL(EXIT_BACKEND, "cache_dir %s: %s", staging,
		     strerror(errno));
	/* libsmux spools copies and replays through $TMPDIR: keep that in
	 * the cache directory, not on a tmpfs /tmp. Set before any thread
	 * starts (setenv is not thread-safe). */
	if (setenv("TMPDIR", staging, 1) != 0)
		FAIL(EXIT_RUNTIME, "setenv TMPDIR: %s", strerror(errno));

	fs->events = smux_events_new();
	if (!fs->events)
		FAIL(EXIT_BACKEND, "cannot start the event bus");
	if (smux_events_subscribe(fs->events, smuxfs_log_event, NULL) < 0 ||
	    smuxfs_eventlog_start(fs) < 0 ||
	    smuxfs_webhook_start(fs, o->event_webhook) < 0)
		FAIL(EXIT_BACKEND, "cannot subscribe to the event bus");
	rc = smuxfs_otlp_start(fs, o->otlp_endpoint);
	if (rc)
		FAIL(EXIT_BACKEND, "cannot start the OTLP exporter: %s",
		     strerror(-rc));
	smux_config_set_tracer(d->cfg, smuxfs_otlp_tracer(fs));
	errbuf[0] = '\0';
	/* no background repair until the crash's directory renames are
	 * complete (smuxfs_rjournal_recover below) */
	smux_mux_hold_repairs(true);
	/* one daemon keeps replicas in a directory at a time, claimed
	 * before the tree is built: a mux built recovers its journal's
	 * changes on the members at once (replica_lock.c) */
	rc = smuxfs_replica_claim(d->cfg, errbuf, sizeof(errbuf));
	if (rc)
		FAIL(EXIT_BACKEND, "%s", errbuf[0] ? errbuf : strerror(-rc));
	rc = smux_config_build(d->cfg, fs->events, &fs->root, errbuf,
			       sizeof(errbuf));
	if (rc)
		FAIL(EXIT_BACKEND, "%s", errbuf[0] ? errbuf : strerror(-rc));
	fs->key_max = smux_backend_key_max(fs->root);

	/* a directory rename a crash cut short is finished before anyone
	 * sees the tree (rename_journal.c) */
	if (o->state_dir) {
		rc = mkdirs(o->state_dir, 0700);
		if (rc)
			FAIL(EXIT_BACKEND, "state_dir %s: %s", o->state_dir,
			     strerror(-rc));
	}
	smuxfs_rjournal_recover(fs);
	/* held since before the tree was built (see smux_mux_hold_repairs) */
	smux_mux_hold_repairs(false);
	/* unlinks a crash left queued are deleted (or queued again) before
	 * anyone sees the tree (delq.c) */
	rc = smuxfs_delq_start(fs);
	if (rc)
		FAIL(EXIT_BACKEND, "cannot start the delete queue: %s",
		     strerror(-rc));
	/* off (logged) without inotify: every open opens its file; and off
	 * over a network or FUSE filesystem, whose other clients' renames
	 * inotify does not see */
	const char *remote = smux_config_remote_file(d->cfg);

	if (remote)
		smux_log(LOG_INFO,
			 "writers are not kept between opens: %s is not on a "
			 "local disk",
			 remote);
	else if (!fs->force_staging)
		(void)smuxfs_linger_start(fs);

	/* The read cache lives for one run: what an earlier run left in
	 * cache_dir/read is deleted, whether the cache is on or off. */
	if (snprintf(rdir, sizeof(rdir), "%s/read", cache) >= (int)sizeof(rdir))
		FAIL(EXIT_BACKEND, "cache_dir %s: path too long", cache);
	if (o->read_cache == SMUX_FS_ON || (o->read_cache == SMUX_FS_AUTO &&
					    smux_config_has_network(d->cfg))) {
		struct smuxfs_rcache_stats rst;

		errbuf[0] = '\0';
		rc = smuxfs_rcache_new(rdir, o->cache_size, fs->root,
				       &fs->rcache, errbuf, sizeof(errbuf));
		if (rc == -EBUSY) {
			/* another mount's cache_dir: run without one rather
			 * than empty its files under it */
			smux_log(LOG_WARNING, "%s: the read cache is off",
				 errbuf);
		} else if (rc) {
			FAIL(EXIT_BACKEND, "%s",
			     errbuf[0] ? errbuf : strerror(-rc));
		} else {
			smuxfs_rcache_set_readahead(fs->rcache, o->read_ahead);
			smuxfs_rcache_stats(fs->rcache, &rst);
			smux_log(LOG_INFO,
				 "read cache in %s, %llu bytes, read-ahead "
				 "%llu bytes",
				 rdir, (unsigned long long)o->cache_size,
				 (unsigned long long)rst.ra_budget);
		}
	} else {
		rc = smuxfs_rcache_discard(rdir);
		if (rc)
			smux_log(LOG_WARNING, "emptying %s: %s", rdir,
				 strerror(-rc));
	}

	if (!realpath(d->cli.mountpoint, d->mnt))
		FAIL(EXIT_MOUNT, "mountpoint %s: %s", d->cli.mountpoint,
		     strerror(errno));
	snprintf(fs->mount_path, sizeof(fs->mount_path), "%s", d->mnt);
	xattr = o->xattr == SMUX_FS_ON ||
		(o->xattr == SMUX_FS_AUTO &&
		 (smux_backend_caps(fs->root) & SMUX_CAP_XATTR));
	smuxfs_ops_for(&d->ops, xattr);
	smux_log(LOG_INFO, "extended attributes %s",
		 xattr ? "on (user.*)" : "off");
	d->fuse = fuse_new(&d->args, &d->ops, sizeof(d->ops), fs);
	if (!d->fuse)
		FAIL(EXIT_MOUNT, "cannot set up FUSE (bad mount option?)");
	if (fuse_mount(d->fuse, d->mnt))
		FAIL(EXIT_MOUNT, "cannot mount on %s", d->mnt);
	d->mounted = true;
	/* the kernel reads and writes files in place itself (passthrough.c;
	 * asked for in the INIT reply, which the hook sees): on a tree of
	 * one copy written in place, the only one whose writers offer it */
	fs->pt.want = o->passthrough != SMUX_FS_OFF && !fs->force_staging &&
		      (smux_backend_caps(fs->root) & SMUX_CAP_INPLACE) &&
		      (smux_backend_caps(fs->root) & SMUX_CAP_ONE_COPY);
	/* fstat of open files whose name is gone (fnode.c) */
	if (smuxfs_fnode_hook(fs, fuse_get_session(d->fuse)))
		FAIL(EXIT_MOUNT, "cannot hook the FUSE channel");
	if (fuse_set_signal_handlers(fuse_get_session(d->fuse)))
		FAIL(EXIT_RUNTIME, "cannot install signal handlers");
	d->signals = true;
	/* SIGHUP reloads the config instead of ending the mount */
	if (smuxfs_reload_start(fs))
		FAIL(EXIT_RUNTIME, "cannot start the reload thread");
	locate_readahead(fs, d->mnt);
	return EXIT_OK;
}

static void teardown(struct daemon *d)
{
	smuxfs_reload_stop(&d->fs);
	/* no reader of .smux/events is left once the mount is gone */
	smuxfs_eventlog_stop(&d->fs);
	if (d->signals)
		fuse_remove_signal_handlers(fuse_get_session(d->fuse));
	if (d->mounted)
		fuse_unmount(d->fuse);
	if (d->fuse)
		fuse_destroy(d->fuse);
	/* the FUSE device is closed (with every backing file registered on
	 * it): nothing is unregistered on its number any more */
	d->fs.pt.devfd = -1;
	/* no request runs any more: what is queued is deleted now */
	smuxfs_delq_stop(&d->fs);
	smuxfs_linger_stop(&d->fs); /* before the root goes */
	if (d->fs.opts)
		smuxfs_release_tables(&d->fs);
	smuxfs_pt_free(&d->fs);
	smuxfs_rcache_free(d->fs.rcache);
	smux_backend_unref(d->fs.root);
	smuxfs_otlp_stop(&d->fs); /* after the last mux: spans end there */
	smuxfs_webhook_stop(&d->fs);
	smux_events_free(d->fs.events);
	if (d->fs.staging_fd >= 0)
		close(d->fs.staging_fd);
	free(d->prefix);
	fuse_opt_free_args(&d->args);
	smux_config_free(d->fs.live_cfg);
	smux_config_free(d->cfg);
}

static int run_loop(struct daemon *d)
{
	struct fuse_loop_config lc = {.clone_fd = 0, .max_idle_threads = 16};
	int rc;

	rc = d->cli.single ? fuse_loop(d->fuse) : fuse_loop_mt(d->fuse, &lc);
	if (rc < 0) {
		smux_log(LOG_ERR, "FUSE loop failed: %s", strerror(-rc));
		return EXIT_RUNTIME;
	}
	if (rc > 0)
		smux_log(LOG_INFO, "signal %d: unmounting", rc);
	return EXIT_OK;
}

/* The parent of a backgrounded daemon: waits for the child's verdict. */
static int wait_child(int fd)
{
	struct status_msg sm = {0};
	size_t got = 0;

	while (got < sizeof(sm)) {
		ssize_t n = read(fd, (char *)&sm + got, sizeof(sm) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got < sizeof(sm)) {
		fprintf(stderr, "smuxfs: the daemon exited during startup\n");
		return EXIT_RUNTIME;
	}
	sm.msg[sizeof(sm.msg) - 1] = '\0';
	if (sm.status != EXIT_OK)
		fprintf(stderr, "smuxfs: %s\n", sm.msg);
	return sm.status;
}

static void write_status(int fd, const struct status_msg *sm)
{
	size_t done = 0;

	while (done < sizeof(*sm)) {
		ssize_t n =
			write(fd, (const char *)sm + done, sizeof(*sm) - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
}

static void to_dev_null(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

static int check_config(const char *path)
{
	struct smux_config *cfg;
	char errbuf[512];
	char *text;

	errbuf[0] = '\0';
	if (smux_config_load(path, &cfg, errbuf, sizeof(errbuf))) {
		fprintf(stderr, "smuxfs: %s\n", errbuf);
		return EXIT_USAGE;
	}
	if (smux_config_check_read_ahead(cfg, errbuf, sizeof(errbuf)) ||
	    smux_config_check_dirs(cfg, NULL, NULL, errbuf, sizeof(errbuf)) ||
	    smux_config_check_paths(cfg, errbuf, sizeof(errbuf))) {
		fprintf(stderr, "smuxfs: %s\n", errbuf);
		smux_config_free(cfg);
		return EXIT_USAGE;
	}
	text = smux_config_describe(cfg);
	if (!text) {
		smux_config_free(cfg);
		fprintf(stderr, "smuxfs: out of memory\n");
		return EXIT_RUNTIME;
	}
	fputs(text, stdout);
	if (text[0] && text[strlen(text) - 1] != '\n')
		fputc('\n', stdout);
	free(text);
	smux_config_free(cfg);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct daemon d = {.args = FUSE_ARGS_INIT(0, NULL),
			   .fs = {.staging_fd = -1}};
	struct status_msg sm = {0};
	char errbuf[512], fsname[PATH_MAX + 16], cfgpath[PATH_MAX];
	int pipefd[2] = {-1, -1};
	int status;

	/* libfuse's high-level read allocates a buffer per READ: keep those
	 * off mmap/munmap (notes/fuse-performance-here.md) */
	mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);

	if (parse_cli(argc, argv, &d.cli)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (d.cli.check)
		return check_config(d.cli.config);

	errbuf[0] = '\0';
	if (smux_config_load(d.cli.config, &d.cfg, errbuf, sizeof(errbuf))) {
		fprintf(stderr, "smuxfs: %s\n", errbuf);
		return EXIT_USAGE;
	}
	if (!realpath(d.cli.config, cfgpath))
		snprintf(cfgpath, sizeof(cfgpath), "%s", d.cli.config);
	snprintf(d.fs.config_path, sizeof(d.fs.config_path), "%s", cfgpath);
	snprintf(fsname, sizeof(fsname), "fsname=smuxfs:%s", cfgpath);
	if (fuse_opt_add_arg(&d.args, argv[0]) ||
	    (d.cli.debug && fuse_opt_add_arg(&d.args, "-d")) ||
	    fuse_opt(&d.args, fsname) || fuse_opt(&d.args, "subtype=smuxfs") ||
	    apply_opts(&d.cli, d.cfg, &d.args)) {
		teardown(&d);
		return EXIT_USAGE;
	}
	/* what the configuration and -o decided, FUSE must enforce too */
	{
		struct smux_fs_opts *o = smux_config_opts(d.cfg);
		char why[512];

		if (smux_config_check_read_ahead(d.cfg, why, sizeof(why))) {
			fprintf(stderr, "smuxfs: %s\n", why);
			teardown(&d);
			return EXIT_USAGE;
		}

		if ((o->allow_other && fuse_opt(&d.args, "allow_other")) ||
		    (smux_fs_default_permissions(o) &&
		     fuse_opt(&d.args, "default_permissions")) ||
		    (o->ro && fuse_opt(&d.args, "ro"))) {
			teardown(&d);
			return EXIT_USAGE;
		}
	}

	if (!d.cli.foreground) {
		pid_t pid;

		if (pipe2(pipefd, O_CLOEXEC) < 0) {
			perror("smuxfs: pipe");
			teardown(&d);
			return EXIT_RUNTIME;
		}
		pid = fork();
		if (pid < 0) {
			perror("smuxfs: fork");
			teardown(&d);
			return EXIT_RUNTIME;
		}
		if (pid > 0) {
			close(pipefd[1]);
			status = wait_child(pipefd[0]);
			/* the child owns the state now; just leave */
			_exit(status);
		}
		close(pipefd[0]);
		setsid();
	}
	smux_log_init(d.cli.foreground, d.cli.debug);

	status = start(&d, &sm);
	sm.status = status;
	if (status != EXIT_OK) {
		if (d.cli.foreground)
			fprintf(stderr, "smuxfs: %s\n", sm.msg);
		else
			write_status(pipefd[1], &sm);
		teardown(&d);
		return status;
	}
	smux_log(LOG_INFO, "%s mounted on %s", cfgpath, d.mnt);
	{
		const struct smux_fs_opts *o = smux_config_opts(d.cfg);

		if (o->allow_other && !smux_fs_default_permissions(o))
			smux_log(LOG_WARNING,
				 "allow_other without default_permissions "
				 "(opted out): the kernel checks no "
				 "permissions, every local user may read, "
				 "change and delete every file with the "
				 "daemon's rights");
	}
	if (!d.cli.foreground) {
		to_dev_null();
		if (chdir("/") < 0)
			smux_log(LOG_WARNING, "chdir /: %s", strerror(errno));
		write_status(pipefd[1], &sm);
		close(pipefd[1]);
	}
	status = run_loop(&d);
	teardown(&d);
	return status;
}
