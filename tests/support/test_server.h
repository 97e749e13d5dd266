/* SPDX-License-Identifier: MIT */
/*
 * support/test_server.h - starting and stopping the servers tests talk to
 * (tests/servers/: a scripted python3 HTTP server, nginx, Apache) on
 * loopback, each in the foreground as a child of the test.
 *
 * A server is started with PR_SET_PDEATHSIG (SIGTERM), so a test that
 * crashes takes its servers with it; ts_server_stop() ends one at the end
 * of a test (also after a failed assertion: call it from the teardown).
 * Nothing here sleeps to synchronise: readiness is polled (a port file
 * appears, a port accepts) with a bound.
 */
#ifndef SMUX_TESTS_SUPPORT_TEST_SERVER_H
#define SMUX_TESTS_SUPPORT_TEST_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ts_server {
	pid_t pid; /* 0 when not running */
	int port;
};

/*
 * Finds @rel (e.g. "tests/servers/http_script.py") from the current
 * directory or from the test binary's directory upwards. 0 and the path in
 * @out, or -ENOENT.
 */
int ts_find_file(const char *rel, char *out, size_t cap);

/* Finds an executable in PATH or /usr/sbin, /sbin; 0 and the path, or
 * -ENOENT (the caller then skips, loudly). */
int ts_find_exe(const char *name, char *out, size_t cap);

/* A TCP port on 127.0.0.1 free right now (bound then closed). */
int ts_free_port(void);

/*
 * Starts @argv (argv[0] a path) with stdout/stderr to @log (NULL: kept).
 * With @portfile, waits until that file holds a port number (the server
 * chose it); else waits until @port accepts a connection. Waits at most
 * @timeout_ms. 0, or a negative errno (the child is stopped then).
 */
int ts_server_start(struct ts_server *s, char *const argv[], const char *log,
		    const char *portfile, int port, int64_t timeout_ms);

/* SIGTERM, then SIGKILL after 5 s; reaps the child. No-op when not
 * running. */
void ts_server_stop(struct ts_server *s);

/* Starts tests/servers/http_script.py in @dir (a fresh temp directory the
 * caller removes). 0 or a negative errno (-ENOENT: python3 missing). */
int ts_script_server_start(struct ts_server *s, const char *dir);
/* The same speaking HTTPS with @cert and @key (PEM files). */
int ts_script_server_start_tls(struct ts_server *s, const char *dir,
			       const char *cert, const char *key);

/*
 * Starts a WebDAV server of @kind ("nginx" or "apache") from the template
 * tests/servers/<kind>-dav.conf, with everything (config, pid, logs,
 * locks, temp files) in @dir and the served tree in @dir/root (written to
 * @root). 0, -ENOENT when the server or template is missing (the caller
 * skips, loudly), or another negative errno.
 */
int ts_dav_start(struct ts_server *s, const char *kind, const char *dir,
		 char *root, size_t root_cap);

#endif /* SMUX_TESTS_SUPPORT_TEST_SERVER_H */
