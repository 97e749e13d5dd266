// SPDX-License-Identifier: MIT
/*
 * registry.c - the fixtures the conformance suite runs against. Adding a
 * backend kind or a mux mode is one line in conf_fixtures[] (plus its
 * setup/teardown when it needs more than a constructor call).
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance/conf_s3.h"
#include "conformance/conformance.h"
#include "smux/bunny.h"
#include "smux/faulty.h"
#include "smux/file.h"
#include "smux/http.h"
#include "smux/linkobj.h"
#include "smux/memory.h"
#include "smux/mux.h"
#include "support/bunny_server.h"
#include "support/test_server.h"

static void conf_print_setup_err(const char *what, const struct smux_error *err)
{
	char buf[2 * SMUX_ERROR_MSG_MAX + 256];

	fprintf(stderr, "%s: %s\n", what,
		smux_error_format(err, buf, sizeof(buf)));
}

static int conf_memory_setup(void **priv, struct smux_backend **out)
{
	struct smux_error err;
	int rc = smux_memory_new("memory", out, &err);

	if (rc < 0)
		conf_print_setup_err("memory fixture", &err);
	*priv = NULL;
	return rc;
}

static void conf_nothing_teardown(void *priv)
{
	(void)priv;
}

static int conf_rm_entry(const char *path, const struct stat *st, int type,
			 struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	if (remove(path) != 0)
		fprintf(stderr, "conformance: cannot remove %s: %s\n", path,
			strerror(errno));
	return 0; /* remove what can be removed */
}

/* The root of a file fixture: a fresh directory under /tmp, removed with
 * everything in it at teardown. */
static int conf_file_setup(void **priv, struct smux_backend **out)
{
	char tmpl[] = "/tmp/smux-conf-XXXXXX";
	struct smux_file_opts opts = {0};
	struct smux_error err;
	char *dir;
	int rc;

	if (!mkdtemp(tmpl))
		return -errno;
	dir = strdup(tmpl);
	if (!dir) {
		rmdir(tmpl);
		return -ENOMEM;
	}
	opts.path = dir; /* fsync stays on: the default configuration */
	rc = smux_file_new("file", &opts, out, &err);
	if (rc < 0) {
		conf_print_setup_err("file fixture", &err);
		rmdir(dir);
		free(dir);
		return rc;
	}
	*priv = dir;
	return 0;
}

static void conf_file_teardown(void *priv)
{
	char *dir = priv;

	nftw(dir, conf_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* ---- mux fixtures ---- */

/*
 * What a mux fixture is made of. Three members per mux, over memory or
 * file backends. `shared` makes the members identical replicas: faulty
 * wrappers (no faults) around ONE memory backend, or three file backends
 * on ONE directory. Round-robin and weighted need that: they write to the
 * selected member and read from possibly another (DESIGN section 3: "read
 * pools of identical replicas"), so over independent members a plain round
 * trip would read another member than the one written and fail for a
 * reason that is the mode's definition, not a bug. Every other mode runs
 * over independent members: failover keeps to the first healthy one,
 * sticky-by-key to the key's shard (and lists the union of shards),
 * shield and mirror write to all of them.
 */
#define CONF_MUX_MEMBERS 3

/*
 * The per-member call timeout of the fixtures. The default (30 s) bounds
 * one member call, and one call here can be the whole 1 GiB put of
 * conf_test_large_object: three in-memory replicas fed in parallel on a
 * two-core machine under ASan take longer than that. The suite checks the
 * storage contract, not timeouts (tests/unit/test_mux_health.c does).
 */
#define CONF_MUX_TIMEOUT_MS 300000

struct conf_mux_spec {
	const char *name;
	enum smux_mode mode;
	bool file;   /* file backends (else memory) */
	bool shared; /* members are identical replicas of one store */
};

/* What teardown removes: the fixture's directories (file fixtures). */
struct conf_mux_priv {
	unsigned n_dirs;
	char *dirs[CONF_MUX_MEMBERS];
};

static void conf_mux_priv_free(struct conf_mux_priv *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->n_dirs; i++) {
		nftw(p->dirs[i], conf_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		free(p->dirs[i]);
	}
	free(p);
}

static void conf_mux_teardown(void *priv)
{
	conf_mux_priv_free(priv);
}

/* A fresh directory for a file member, recorded for teardown. */
static int conf_mux_dir(struct conf_mux_priv *p, const char **out)
{
	char tmpl[] = "/tmp/smux-conf-mux-XXXXXX";

	if (!mkdtemp(tmpl))
		return -errno;
	p->dirs[p->n_dirs] = strdup(tmpl);
	if (!p->dirs[p->n_dirs]) {
		rmdir(tmpl);
		return -ENOMEM;
	}
	*out = p->dirs[p->n_dirs++];
	return 0;
}

/* Member @i of a fixture: one reference in *@out. */
static int conf_mux_member(const struct conf_mux_spec *spec,
			   struct conf_mux_priv *p, struct smux_backend *store,
			   unsigned i, struct smux_backend **out,
			   struct smux_error *err)
{
	struct smux_faulty_opts none = {0};
	struct smux_file_opts fo = {0};
	char name[16];
	int rc;

	snprintf(name, sizeof(name), "m%u", i);
	/* The plain "file" fixture proves the fsync path; mux fixtures over
	 * file members skip fsync so that 13 fixtures stay fast. */
	fo.no_fsync = true;
	if (spec->file) {
		if (spec->shared && p->n_dirs) {
			fo.path = p->dirs[0];
		} else {
			rc = conf_mux_dir(p, &fo.path);
			if (rc)
				return rc;
		}
		return smux_file_new(name, &fo, out, err);
	}
	if (spec->shared)
		return smux_faulty_new(name, store, &none, out, err);
	return smux_memory_new(name, out, err);
}

static int conf_mux_build(const struct conf_mux_spec *spec, void **priv,
			  struct smux_backend **out)
{
	struct smux_mux_member members[CONF_MUX_MEMBERS] = {{0}};
	struct smux_mux_opts opts = {
		.mode = spec->mode,
		.backend_timeout_ms = CONF_MUX_TIMEOUT_MS,
	};
	struct conf_mux_priv *p = calloc(1, sizeof(*p));
	struct smux_backend *store = NULL;
	struct smux_error err = {0};
	unsigned n = 0;
	int rc = -ENOMEM;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	if (spec->shared && !spec->file) {
		rc = smux_memory_new("store", &store, &err);
		if (rc)
			goto out;
	}
	for (n = 0; n < CONF_MUX_MEMBERS; n++) {
		rc = conf_mux_member(spec, p, store, n, &members[n].backend,
				     &err);
		if (rc)
			goto out;
		members[n].has_weight = spec->mode == SMUX_MODE_WEIGHTED;
		members[n].weight = n + 1; /* 1, 2, 3 */
	}
	rc = smux_mux_new(spec->name, &opts, members, n, out, &err);
out:
	if (rc) {
		conf_print_setup_err(spec->name, &err);
		conf_mux_priv_free(p);
		p = NULL;
	}
	for (unsigned i = 0; i < n; i++)
		smux_backend_unref(members[i].backend);
	smux_backend_unref(store);
	*priv = p;
	return rc;
}

#define CONF_MUX_FIXTURE(fn, label, m, is_file, is_shared)    \
	static int fn(void **priv, struct smux_backend **out) \
	{                                                     \
		static const struct conf_mux_spec spec = {    \
			.name = (label),                      \
			.mode = (m),                          \
			.file = (is_file),                    \
			.shared = (is_shared),                \
		};                                            \
		return conf_mux_build(&spec, priv, out);      \
	}

CONF_MUX_FIXTURE(conf_failover_mem, "failover-memory", SMUX_MODE_FAILOVER,
		 false, false)
CONF_MUX_FIXTURE(conf_rr_mem, "round-robin-memory", SMUX_MODE_ROUND_ROBIN,
		 false, true)
CONF_MUX_FIXTURE(conf_weighted_mem, "weighted-memory", SMUX_MODE_WEIGHTED,
		 false, true)
CONF_MUX_FIXTURE(conf_sticky_mem, "sticky-by-key-memory", SMUX_MODE_STICKY,
		 false, false)
CONF_MUX_FIXTURE(conf_shield_mem, "shield-memory", SMUX_MODE_SHIELD, false,
		 false)
CONF_MUX_FIXTURE(conf_mirror_mem, "mirror-memory", SMUX_MODE_MIRROR, false,
		 false)
CONF_MUX_FIXTURE(conf_failover_file, "failover-file", SMUX_MODE_FAILOVER, true,
		 false)
CONF_MUX_FIXTURE(conf_rr_file, "round-robin-file", SMUX_MODE_ROUND_ROBIN, true,
		 true)
CONF_MUX_FIXTURE(conf_weighted_file, "weighted-file", SMUX_MODE_WEIGHTED, true,
		 true)
CONF_MUX_FIXTURE(conf_sticky_file, "sticky-by-key-file", SMUX_MODE_STICKY, true,
		 false)
CONF_MUX_FIXTURE(conf_shield_file, "shield-file", SMUX_MODE_SHIELD, true, false)
CONF_MUX_FIXTURE(conf_mirror_file, "mirror-file", SMUX_MODE_MIRROR, true, false)

/*
 * mux(round-robin, [mux(failover, A), mux(failover, B)]) - the seed's
 * "sharded-then-failed-over" shape. Round-robin needs identical replicas
 * below it, so both failover muxes are made of the same two memory stores
 * (primary, standby), each reached through its own faulty wrapper (no
 * faults): A and B are two paths to one replicated pair, and only the
 * primary holds data while it is healthy.
 */
static int conf_nested_setup(void **priv, struct smux_backend **out)
{
	struct smux_mux_opts fo = {
		.mode = SMUX_MODE_FAILOVER,
		.backend_timeout_ms = CONF_MUX_TIMEOUT_MS,
	};
	struct smux_mux_opts ro = {
		.mode = SMUX_MODE_ROUND_ROBIN,
		.backend_timeout_ms = CONF_MUX_TIMEOUT_MS,
	};
	struct smux_faulty_opts none = {0};
	struct smux_backend *store[2] = {NULL, NULL};
	struct smux_mux_member top[2] = {{0}}, leaf[2][2] = {{{0}}};
	static const char *const names[2][2] = {{"a-primary", "a-standby"},
						{"b-primary", "b-standby"}};
	static const char *const mux_names[2] = {"failover-a", "failover-b"};
	struct smux_error err = {0};
	int rc;

	*priv = NULL;
	*out = NULL;
	rc = smux_memory_new("primary", &store[0], &err);
	if (rc == 0)
		rc = smux_memory_new("standby", &store[1], &err);
	for (int m = 0; m < 2 && rc == 0; m++) {
		for (int i = 0; i < 2 && rc == 0; i++)
			rc = smux_faulty_new(names[m][i], store[i], &none,
					     &leaf[m][i].backend, &err);
		if (rc == 0)
			rc = smux_mux_new(mux_names[m], &fo, leaf[m], 2,
					  &top[m].backend, &err);
	}
	if (rc == 0)
		rc = smux_mux_new("nested-rr-of-failover", &ro, top, 2, out,
				  &err);
	if (rc)
		conf_print_setup_err("nested-rr-of-failover", &err);
	for (int m = 0; m < 2; m++) {
		smux_backend_unref(top[m].backend);
		for (int i = 0; i < 2; i++)
			smux_backend_unref(leaf[m][i].backend);
	}
	smux_backend_unref(store[0]);
	smux_backend_unref(store[1]);
	return rc;
}

/* ---- http fixtures: a WebDAV server started per test on loopback ---- */

struct conf_dav_priv {
	struct ts_server server;
	char dir[64];
};

static int conf_dav_setup(const char *kind, void **priv,
			  struct smux_backend **out)
{
	struct conf_dav_priv *p = calloc(1, sizeof(*p));
	struct smux_http_opts opts = {.webdav = true};
	char root[256], url[64];
	struct smux_error err;
	int rc;

	if (!p)
		return -ENOMEM;
	snprintf(p->dir, sizeof(p->dir), "/tmp/smux-conf-dav-XXXXXX");
	if (!mkdtemp(p->dir)) {
		free(p);
		return -errno;
	}
	*priv = p;
	rc = ts_dav_start(&p->server, kind, p->dir, root, sizeof(root));
	if (rc < 0) {
		fprintf(stderr,
			"*** %s WebDAV fixture: cannot start the server (%s); "
			"scripts/install-deps.sh installs it ***\n",
			kind, strerror(-rc));
		return rc;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", p->server.port);
	opts.url = url;
	rc = smux_http_new(kind, &opts, out, &err);
	if (rc < 0)
		conf_print_setup_err("http fixture", &err);
	return rc;
}

static int conf_nginx_setup(void **priv, struct smux_backend **out)
{
	return conf_dav_setup("nginx", priv, out);
}

static int conf_apache_setup(void **priv, struct smux_backend **out)
{
	return conf_dav_setup("apache", priv, out);
}

/* @setup's backend behind the rclone_links wrapper (smux/linkobj.h). */
static int conf_links(int (*setup)(void **, struct smux_backend **),
		      void **priv, struct smux_backend **out)
{
	struct smux_backend *inner = NULL;
	struct smux_error err;
	int rc = setup(priv, &inner);

	*out = NULL;
	if (rc < 0 || !inner)
		return rc < 0 ? rc : -EINVAL;
	rc = smux_linkobj_new(inner, out, &err);
	smux_backend_unref(inner);
	if (rc < 0)
		conf_print_setup_err("links fixture", &err);
	return rc;
}

static int conf_nginx_links_setup(void **priv, struct smux_backend **out)
{
	return conf_links(conf_nginx_setup, priv, out);
}

static void conf_dav_teardown(void *priv)
{
	struct conf_dav_priv *p = priv;

	if (!p)
		return;
	ts_server_stop(&p->server);
	nftw(p->dir, conf_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(p);
}

/* ---- bunny fixture: the Bunny Storage emulator on loopback ---- */

/*
 * One emulator serves every bunny test of the run (a python3 start costs
 * about half a second): each test gets a zone of its own. It is stopped,
 * and its directory removed, when the run ends (atexit); a crashed run
 * takes it along by PR_SET_PDEATHSIG.
 */
static struct ts_server conf_bunny_server;
static char conf_bunny_dir[64];
static char conf_bunny_url[64];
static unsigned conf_bunny_zones;

static void conf_bunny_stop(void)
{
	ts_server_stop(&conf_bunny_server);
	if (conf_bunny_dir[0])
		nftw(conf_bunny_dir, conf_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int conf_bunny_setup(void **priv, struct smux_backend **out)
{
	struct smux_bunny_opts opts = {.access_key = TS_BUNNY_KEY};
	struct smux_error err;
	char zone[32];
	int rc;

	*priv = NULL;
	if (!conf_bunny_server.pid) {
		snprintf(conf_bunny_dir, sizeof(conf_bunny_dir),
			 "/tmp/smux-conf-bunny-XXXXXX");
		if (!mkdtemp(conf_bunny_dir)) {
			conf_bunny_dir[0] = '\0';
			return -errno;
		}
		rc = ts_bunny_start(&conf_bunny_server, conf_bunny_dir,
				    conf_bunny_url, sizeof(conf_bunny_url));
		if (rc < 0) {
			fprintf(stderr,
				"*** bunny fixture: cannot start the emulator "
				"(%s); scripts/install-deps.sh installs "
				"python3 ***\n",
				strerror(-rc));
			return rc;
		}
		atexit(conf_bunny_stop);
	}
	snprintf(zone, sizeof(zone), "t%u", ++conf_bunny_zones);
	rc = ts_bunny_zone(&conf_bunny_server, zone, TS_BUNNY_KEY);
	if (rc < 0) {
		fprintf(stderr, "bunny fixture: cannot make zone %s\n", zone);
		return rc;
	}
	opts.zone = zone;
	opts.endpoint = conf_bunny_url;
	rc = smux_bunny_new("bunny", &opts, out, &err);
	if (rc < 0)
		conf_print_setup_err("bunny fixture", &err);
	return rc;
}

static int conf_bunny_links_setup(void **priv, struct smux_backend **out)
{
	return conf_links(conf_bunny_setup, priv, out);
}
/* swift_fixture.c: Swift (tempauth) and the identity v2.0 emulator */
int conf_swift_setup(void **priv, struct smux_backend **out);
int conf_swift_identity_setup(void **priv, struct smux_backend **out);
void conf_swift_teardown(void *priv);

/*
 * shield and mirror write every replica with one mtime (the mux picks it
 * when the caller gives none), so independent replicas agree on the
 * version token (size + mtime) and "the head's etag is the put's" holds
 * whichever replica answers.
 *
 * resident_bytes_per_stored_byte: a mode that writes one member keeps one
 * copy in memory (shared stores count once); shield and mirror over three
 * memory members keep three; file-based fixtures keep nothing in RAM.
 */
const struct conf_fixture conf_fixtures[] = {
	{"memory", conf_memory_setup, conf_nothing_teardown, CONF_F_NO_READER,
	 1},
	{"file", conf_file_setup, conf_file_teardown, 0, 0},
	/*
	 * The 1 GiB streaming case runs on the leaf backends, on the fan-out
	 * and race paths (mirror-file), on a sharded mux (sticky-by-key-file)
	 * and through two levels of muxes (nested); the other mux fixtures
	 * stream through the same sequential path as failover-file would and
	 * leave it out (CONF_F_NO_LARGE) to keep the suite within minutes.
	 */
	{"failover-memory", conf_failover_mem, conf_mux_teardown,
	 CONF_F_NO_LARGE, 1},
	{"round-robin-memory", conf_rr_mem, conf_mux_teardown, CONF_F_NO_LARGE,
	 1},
	{"weighted-memory", conf_weighted_mem, conf_mux_teardown,
	 CONF_F_NO_LARGE, 1},
	{"sticky-by-key-memory", conf_sticky_mem, conf_mux_teardown,
	 CONF_F_NO_LARGE, 1},
	{"shield-memory", conf_shield_mem, conf_mux_teardown, CONF_F_NO_LARGE,
	 3},
	{"mirror-memory", conf_mirror_mem, conf_mux_teardown, CONF_F_NO_LARGE,
	 3},
	{"failover-file", conf_failover_file, conf_mux_teardown,
	 CONF_F_NO_LARGE, 0},
	{"round-robin-file", conf_rr_file, conf_mux_teardown, CONF_F_NO_LARGE,
	 0},
	{"weighted-file", conf_weighted_file, conf_mux_teardown,
	 CONF_F_NO_LARGE, 0},
	{"sticky-by-key-file", conf_sticky_file, conf_mux_teardown, 0, 0},
	{"shield-file", conf_shield_file, conf_mux_teardown, CONF_F_NO_LARGE,
	 0},
	{"mirror-file", conf_mirror_file, conf_mux_teardown, 0, 0},
	{"nested-rr-of-failover", conf_nested_setup, conf_nothing_teardown, 0,
	 1},
	/* WebDAV servers on loopback (tests/servers/); the 1 GiB case would
	 * cost minutes of disk per run. What each server cannot keep is
	 * flagged (conformance.h) and printed where a check is left out. */
	{"http-nginx", conf_nginx_setup, conf_dav_teardown,
	 CONF_F_NO_LARGE | CONF_F_NO_ATTRS | CONF_F_NO_SPECIAL |
		 CONF_F_COARSE_ETAG | CONF_F_NO_DOTFILES | CONF_F_NO_READER |
		 CONF_F_NO_WRITER | CONF_F_RACY_PUT,
	 0},
	{"http-apache", conf_apache_setup, conf_dav_teardown,
	 CONF_F_NO_LARGE | CONF_F_NO_SPECIAL | CONF_F_RACY_GET |
		 CONF_F_NO_READER | CONF_F_NO_WRITER | CONF_F_RACY_PUT,
	 0},
	/* the Bunny Storage emulator (tests/servers/bunny_emu.py): no modes,
	 * no settable mtimes, no symlinks */
	{"bunny", conf_bunny_setup, conf_nothing_teardown,
	 CONF_F_NO_LARGE | CONF_F_NO_ATTRS | CONF_F_NO_SPECIAL |
		 CONF_F_NO_MTIME | CONF_F_NO_READER | CONF_F_NO_WRITER,
	 0},
	/* the same with rclone_links = true: symlinks as NAME.rclonelink
	 * objects, FIFOs and sockets still refused */
	{"http-nginx-links", conf_nginx_links_setup, conf_dav_teardown,
	 CONF_F_NO_LARGE | CONF_F_NO_ATTRS | CONF_F_LINKS_ONLY |
		 CONF_F_COARSE_ETAG | CONF_F_NO_DOTFILES | CONF_F_NO_READER |
		 CONF_F_NO_WRITER | CONF_F_RACY_PUT,
	 0},
	{"bunny-links", conf_bunny_links_setup, conf_nothing_teardown,
	 CONF_F_NO_LARGE | CONF_F_NO_ATTRS | CONF_F_LINKS_ONLY |
		 CONF_F_NO_MTIME | CONF_F_NO_READER | CONF_F_NO_WRITER,
	 0},
	/* OpenStack Swift on loopback (tests/servers/swift.sh), one server
	 * for the process, a fresh container per test; then through the
	 * identity v2.0 emulator (RAX-KSKEY, service catalog, proxy). A
	 * Swift PUT costs ~100 ms here: the suite takes minutes, so these
	 * run in `make check-swift` (test_swift covers the backend in make
	 * check) */
	{"swift", conf_swift_setup, conf_swift_teardown,
	 CONF_F_NO_LARGE | CONF_F_OPT_IN | CONF_F_LIST_NO_TYPE |
		 CONF_F_NO_READER | CONF_F_NO_WRITER,
	 0},
	{"swift-identity", conf_swift_identity_setup, conf_swift_teardown,
	 CONF_F_NO_LARGE | CONF_F_OPT_IN | CONF_F_LIST_NO_TYPE |
		 CONF_F_NO_READER | CONF_F_NO_WRITER,
	 0},
	/* S3 servers on loopback, started once per run (conf_s3.c); each
	 * test gets its own key prefix in one bucket. The suite takes
	 * minutes on them (Swift: ~7 min on two shared cores), so they run
	 * by name only, in `make check-s3`. */
	{"s3-swift", conf_s3_swift_setup, conf_s3_teardown,
	 CONF_F_NO_LARGE | CONF_F_LIST_NO_TYPE | CONF_F_RACY_GET |
		 CONF_F_OPT_IN | CONF_F_NO_READER | CONF_F_WRITER_TRUNC_ONLY,
	 0},
	{"s3-s3rver", conf_s3_s3rver_setup, conf_s3_teardown,
	 CONF_F_NO_LARGE | CONF_F_LIST_NO_TYPE | CONF_F_OPT_IN |
		 CONF_F_PLAIN_KEYS | CONF_F_RACY_GET | CONF_F_NO_READER |
		 CONF_F_WRITER_TRUNC_ONLY,
	 0},
};

const size_t conf_fixture_count =
	sizeof(conf_fixtures) / sizeof(conf_fixtures[0]);
