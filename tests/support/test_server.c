// SPDX-License-Identifier: MIT
/*
 * test_server.c - child server processes for tests (test_server.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/test_server.h"

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A short wait between polls of a condition (not a synchronisation). */
static void poll_pause(void)
{
	struct timespec ts = {0, 20000000L};

	nanosleep(&ts, NULL);
}

int ts_find_file(const char *rel, char *out, size_t cap)
{
	char exe[PATH_MAX], *slash;
	ssize_t n;

	if (access(rel, R_OK) == 0) {
		if (!realpath(rel, out) &&
		    (size_t)snprintf(out, cap, "%s", rel) >= cap)
			return -ENAMETOOLONG;
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = '\0';
	while ((slash = strrchr(exe, '/')) && slash != exe) {
		*slash = '\0';
		if ((size_t)snprintf(out, cap, "%s/%s", exe, rel) >= cap)
			return -ENAMETOOLONG;
		if (access(out, R_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

int ts_find_exe(const char *name, char *out, size_t cap)
{
	const char *path = getenv("PATH");
	char dirs[4096];
	size_t start = 0, i;

	/* Debian's own binaries first (what install-deps.sh installs) */
	snprintf(dirs, sizeof(dirs), "/usr/bin:/usr/sbin:/sbin:%s",
		 path ? path : "");
	for (i = 0;; i++) {
		if (dirs[i] != ':' && dirs[i] != '\0')
			continue;
		if (i > start &&
		    (size_t)snprintf(out, cap, "%.*s/%s", (int)(i - start),
				     dirs + start, name) < cap &&
		    access(out, X_OK) == 0)
			return 0;
		if (dirs[i] == '\0')
			break;
		start = i + 1;
	}
	return -ENOENT;
}

int ts_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd, port = -1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static int port_accepts(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd, ok;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static int read_port(const char *portfile)
{
	char buf[16] = {0};
	long v;
	char *end;
	int fd = open(portfile, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	v = strtol(buf, &end, 10);
	if (end == buf || v <= 0 || v > 65535)
		return -1;
	return (int)v;
}

int ts_server_start(struct ts_server *s, char *const argv[], const char *log,
		    const char *portfile, int port, int64_t timeout_ms)
{
	pid_t parent = getpid(), pid;
	int64_t end = mono_ms() + timeout_ms;
	int status, fd;

	s->pid = 0;
	s->port = port;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* the server dies with the test, whatever ends the test */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		if (log) {
			fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
			if (fd >= 0) {
				dup2(fd, 1);
				dup2(fd, 2);
				close(fd);
			}
		}
		execv(argv[0], argv);
		_exit(127);
	}
	s->pid = pid;
	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			s->pid = 0;
			fprintf(stderr, "test server %s exited at start (%d)\n",
				argv[0], status);
			return -ECHILD;
		}
		if (portfile) {
			s->port = read_port(portfile);
			if (s->port > 0 && port_accepts(s->port))
				return 0;
		} else if (port_accepts(port)) {
			return 0;
		}
		if (mono_ms() > end)
			break;
		poll_pause();
	}
	fprintf(stderr, "test server %s not ready after %lld ms\n", argv[0],
		(long long)timeout_ms);
	ts_server_stop(s);
	return -ETIMEDOUT;
}

void ts_server_stop(struct ts_server *s)
{
	int64_t end;
	int status;

	if (!s || s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	end = mono_ms() + 5000;
	while (waitpid(s->pid, &status, WNOHANG) == 0) {
		if (mono_ms() > end) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, &status, 0);
			break;
		}
		poll_pause();
	}
	s->pid = 0;
}

int ts_script_server_start(struct ts_server *s, const char *dir)
{
	return ts_script_server_start_tls(s, dir, NULL, NULL);
}

int ts_script_server_start_tls(struct ts_server *s, const char *dir,
			       const char *cert, const char *key)
{
	char script[PATH_MAX], py[PATH_MAX], portfile[PATH_MAX];
	char *argv[6];

	s->pid = 0;
	if (ts_find_file("tests/servers/http_script.py", script,
			 sizeof(script)) < 0 ||
	    ts_find_exe("python3", py, sizeof(py)) < 0)
		return -ENOENT;
	snprintf(portfile, sizeof(portfile), "%s/port%s", dir,
		 cert ? "-tls" : "");
	argv[0] = py;
	argv[1] = script;
	argv[2] = portfile;
	argv[3] = (char *)cert;
	argv[4] = cert ? (char *)key : NULL;
	argv[5] = NULL;
	return ts_server_start(s, argv, NULL, portfile, 0, 20000);
}

/* Copies template @tmpl to @out replacing each @NAME@ of @keys by @vals
 * (n pairs). 0 or a negative errno. */
static int fill_template(const char *tmpl, const char *out,
			 const char *const *keys, const char *const *vals,
			 size_t n)
{
	FILE *in = fopen(tmpl, "re"), *o;
	char line[1024];
	int rc = 0;

	if (!in)
		return -errno;
	o = fopen(out, "we");
	if (!o) {
		rc = -errno;
		fclose(in);
		return rc;
	}
	while (fgets(line, sizeof(line), in)) {
		char *p = line;

		while (*p) {
			size_t i;

			for (i = 0; i < n; i++) {
				size_t kl = strlen(keys[i]);

				if (strncmp(p, keys[i], kl) == 0) {
					fputs(vals[i], o);
					p += kl;
					break;
				}
			}
			if (i == n)
				fputc(*p++, o);
		}
	}
	if (fclose(o) != 0)
		rc = -errno;
	fclose(in);
	return rc;
}

int ts_dav_start(struct ts_server *s, const char *kind, const char *dir,
		 char *root, size_t root_cap)
{
	const char *keys[] = {"@DIR@", "@ROOT@", "@PORT@", "@USER@"};
	const char *vals[4];
	char tmpl[PATH_MAX], conf[PATH_MAX], exe[PATH_MAX], log[PATH_MAX];
	char port[16], user[64], rel[64];
	char *argv[8];
	bool nginx = strcmp(kind, "nginx") == 0;
	int p, rc;

	s->pid = 0;
	snprintf(rel, sizeof(rel), "tests/servers/%s-dav.conf", kind);
	if (ts_find_file(rel, tmpl, sizeof(tmpl)) < 0 ||
	    ts_find_exe(nginx ? "nginx" : "apache2", exe, sizeof(exe)) < 0)
		return -ENOENT;
	if ((size_t)snprintf(root, root_cap, "%s/root", dir) >= root_cap)
		return -ENAMETOOLONG;
	if (mkdir(root, 0755) < 0 && errno != EEXIST)
		return -errno;
	p = ts_free_port();
	if (p < 0)
		return p;
	snprintf(port, sizeof(port), "%d", p);
	if (nginx)
		snprintf(user, sizeof(user), "%s",
			 geteuid() == 0 ? "user root;" : "");
	else /* Apache refuses to serve as root: its workers drop to
	      * www-data, who must write the tree and the lock database */
		snprintf(user, sizeof(user), "%s",
			 geteuid() == 0 ? "User www-data\nGroup www-data" : "");
	if (!nginx && geteuid() == 0 &&
	    (chmod(dir, 0777) < 0 || chmod(root, 0777) < 0))
		return -errno;
	vals[0] = dir;
	vals[1] = root;
	vals[2] = port;
	vals[3] = user;
	snprintf(conf, sizeof(conf), "%s/%s.conf", dir, kind);
	snprintf(log, sizeof(log), "%s/server.log", dir);
	rc = fill_template(tmpl, conf, keys, vals, 4);
	if (rc < 0)
		return rc;
	argv[0] = exe;
	if (nginx) {
		argv[1] = "-e";
		argv[2] = log;
		argv[3] = "-p";
		argv[4] = (char *)dir;
		argv[5] = "-c";
		argv[6] = conf;
		argv[7] = NULL;
	} else {
		argv[1] = "-f";
		argv[2] = conf;
		argv[3] = "-DFOREGROUND";
		argv[4] = NULL;
	}
	return ts_server_start(s, argv, log, NULL, p, 20000);
}
