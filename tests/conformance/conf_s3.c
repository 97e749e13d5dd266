// SPDX-License-Identifier: MIT
/*
 * conf_s3.c - the s3 fixtures of the conformance suite: the s3 backend
 * against OpenStack Swift's s3api (tests/servers/swift.sh: strict SigV4
 * and payload hashes) and against s3rver (tests/servers/s3rver.sh).
 *
 * Each server is started once per process, at the first test that needs
 * it, and stopped at exit (atexit) or, if this process dies, by a
 * guardian child (PR_SET_PDEATHSIG). Every test gets a fresh, empty
 * backend: the same bucket under a prefix of its own.
 *
 * SMUX_S3_SWIFT_DIR / SMUX_S3_S3RVER_DIR name the directory of a server
 * already running (its env file, as the scripts write it): the fixture
 * then uses it and neither starts nor stops it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/s3_internal.h"
#include "conformance/conf_s3.h"
#include "conformance/conformance.h"
#include "support/test_server.h"

#define CONF_S3_BUCKET "smux-conf"

struct s3_server {
	const char *script; /* tests/servers/<script> */
	const char *env_dir;
	bool tried, ok;
	char dir[256];
	pid_t guardian;
	char endpoint[128], access[64], secret[64];
	unsigned seq; /* per-test prefixes */
};

static struct s3_server swift_srv = {.script = "swift.sh",
				     .env_dir = "SMUX_S3_SWIFT_DIR"};
static struct s3_server s3rver_srv = {.script = "s3rver.sh",
				      .env_dir = "SMUX_S3_S3RVER_DIR"};

static int read_env(struct s3_server *s)
{
	char path[300], line[256], *v;
	FILE *f;

	snprintf(path, sizeof(path), "%s/env", s->dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		v = strchr(line, '=');
		if (!v)
			continue;
		*v++ = '\0';
		if (strcmp(line, "S3_ENDPOINT") == 0)
			snprintf(s->endpoint, sizeof(s->endpoint), "%s", v);
		else if (strcmp(line, "S3_ACCESS_KEY") == 0)
			snprintf(s->access, sizeof(s->access), "%s", v);
		else if (strcmp(line, "S3_SECRET_KEY") == 0)
			snprintf(s->secret, sizeof(s->secret), "%s", v);
	}
	fclose(f);
	return s->endpoint[0] ? 0 : -EINVAL;
}

static void stop_server(struct s3_server *s)
{
	if (s->guardian > 0) {
		kill(s->guardian, SIGTERM);
		waitpid(s->guardian, NULL, 0);
		s->guardian = 0;
	}
}

static void stop_all(void)
{
	stop_server(&swift_srv);
	stop_server(&s3rver_srv);
}

/* A child that stops the server (and removes its dir) when told to or
 * when this process dies. */
static int start_guardian(struct s3_server *s, const char *script)
{
	pid_t parent = getpid();
	char cmd[1400];
	sigset_t set;
	int sig;

	s->guardian = fork();
	if (s->guardian < 0)
		return -errno;
	if (s->guardian > 0)
		return 0;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == parent)
		sigwait(&set, &sig);
	snprintf(cmd, sizeof(cmd),
		 "'%s' stop '%s' >/dev/null 2>&1; rm -rf '%s'", script, s->dir,
		 s->dir);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	_exit(127);
}

static int ensure_server(struct s3_server *s)
{
	static bool hooked;
	const char *given = getenv(s->env_dir);
	char script[512], rel[128], cmd[1200];
	const char *tmp = getenv("TMPDIR");

	if (s->tried)
		return s->ok ? 0 : -EIO;
	s->tried = true;
	if (given && *given) {
		snprintf(s->dir, sizeof(s->dir), "%s", given);
		s->ok = read_env(s) == 0;
		return s->ok ? 0 : -EIO;
	}
	snprintf(rel, sizeof(rel), "tests/servers/%s", s->script);
	if (ts_find_file(rel, script, sizeof(script)) < 0) {
		fprintf(stderr, "*** s3 fixture: %s not found ***\n", rel);
		return -ENOENT;
	}
	snprintf(s->dir, sizeof(s->dir), "%s/smux-conf-s3-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(s->dir))
		return -errno;
	if (!hooked) {
		atexit(stop_all);
		hooked = true;
	}
	if (start_guardian(s, script) < 0)
		return -EIO;
	snprintf(cmd, sizeof(cmd), "'%s' start '%s' >/dev/null", script,
		 s->dir);
	if (system(cmd) != 0 || read_env(s) != 0) {
		fprintf(stderr,
			"*** s3 fixture: %s start failed (log above); "
			"scripts/install-deps.sh installs the server ***\n",
			s->script);
		return -EIO;
	}
	s->ok = true;
	return 0;
}

static int s3_fixture(struct s3_server *srv, const char *name,
		      struct smux_backend **out,
		      const struct smux_s3_opts *tune)
{
	struct smux_s3_opts o = tune ? *tune : (struct smux_s3_opts){0};
	struct smux_error err = {0};
	struct smux_ctx ctx;
	char prefix[64];
	int rc;

	*out = NULL;
	rc = ensure_server(srv);
	if (rc < 0)
		return rc;
	snprintf(prefix, sizeof(prefix), "c%d-%u/", (int)getpid(), ++srv->seq);
	o.endpoint = srv->endpoint;
	o.bucket = CONF_S3_BUCKET;
	o.path_style = true;
	o.prefix = prefix;
	o.access_key = srv->access;
	o.secret_key = srv->secret;
	rc = smux_s3_new(name, &o, out, &err);
	if (rc == 0) {
		smux_ctx_init(&ctx);
		rc = smux__s3_make_bucket(*out, &ctx, &err);
	}
	if (rc < 0) {
		char buf[2 * SMUX_ERROR_MSG_MAX + 256];

		fprintf(stderr, "%s fixture: %s\n", name,
			smux_error_format(&err, buf, sizeof(buf)));
		smux_backend_unref(*out);
		*out = NULL;
	}
	return rc;
}

int conf_s3_swift_setup(void **priv, struct smux_backend **out)
{
	*priv = NULL;
	return s3_fixture(&swift_srv, "s3-swift", out, NULL);
}

int conf_s3_s3rver_setup(void **priv, struct smux_backend **out)
{
	*priv = NULL;
	return s3_fixture(&s3rver_srv, "s3-s3rver", out, NULL);
}

void conf_s3_teardown(void *priv)
{
	(void)priv; /* the server goes at exit; the prefix stays in it */
}
