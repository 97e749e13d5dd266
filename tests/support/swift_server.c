// SPDX-License-Identifier: MIT
/*
 * swift_server.c - Swift and the identity emulator for tests
 * (swift_server.h).
 */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "support/swift_server.h"
#include "support/test_server.h"

static struct {
	bool tried, ok;
	char dir[256];
	char script[512];
	char auth_url[512];
	char identity[128];
	char control[128];
	struct ts_server emu;
} sw;

/* Stops swift.sh's servers and removes the directory once the test
 * process (this child's parent) is gone. */
static void start_guardian(void)
{
	pid_t parent = getpid(), g = fork();
	char cmd[1400];
	sigset_t set;
	int sig;

	if (g != 0)
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == parent)
		sigwait(&set, &sig);
	snprintf(cmd, sizeof(cmd),
		 "'%s' stop '%s' >/dev/null 2>&1; rm -rf '%s'", sw.script,
		 sw.dir, sw.dir);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	_exit(127);
}

static int read_auth_url(void)
{
	char path[600], line[640];
	FILE *f;

	snprintf(path, sizeof(path), "%s/env", sw.dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "SWIFT_AUTH_URL=", 15) == 0)
			snprintf(sw.auth_url, sizeof(sw.auth_url), "%.500s",
				 line + 15);
	}
	fclose(f);
	return sw.auth_url[0] ? 0 : -EPROTO;
}

/* The emulator in front of sw.auth_url ("-": none). */
static int start_identity(void)
{
	char script[512], portfile[600], log[600], py[256];
	char *argv[10];
	FILE *f;
	int port = 0;

	if (ts_find_file("tests/servers/swift_identity.py", script,
			 sizeof(script)) < 0 ||
	    ts_find_exe("python3", py, sizeof(py)) < 0)
		return -ENOENT;
	snprintf(portfile, sizeof(portfile), "%s/identity-%d.port", sw.dir,
		 (int)getpid());
	snprintf(log, sizeof(log), "%s/identity-%d.log", sw.dir, (int)getpid());
	argv[0] = py;
	argv[1] = script;
	argv[2] = portfile;
	argv[3] = sw.auth_url;
	argv[4] = "rack:rackuser"; /* MossoCloudFS_rack (swift.sh) */
	argv[5] = "rackkey";
	argv[6] = TS_SWIFT_V2_USER;
	argv[7] = TS_SWIFT_V2_APIKEY;
	argv[8] = TS_SWIFT_V2_PASSWORD;
	argv[9] = NULL;
	if (ts_server_start(&sw.emu, argv, log, portfile, 0, 30000) < 0)
		return -EIO;
	f = fopen(portfile, "re");
	if (!f || fscanf(f, "%d", &port) != 1) {
		if (f)
			fclose(f);
		return -EPROTO;
	}
	fclose(f);
	snprintf(sw.identity, sizeof(sw.identity), "http://127.0.0.1:%d/v2.0",
		 port);
	snprintf(sw.control, sizeof(sw.control), "http://127.0.0.1:%d/control",
		 port);
	return 0;
}

static int start_both(void)
{
	const char *tmp = getenv("TMPDIR");
	const char *running = getenv("SMUX_TEST_SWIFT_DIR");
	char cmd[1400];

	if (running && *running) {
		/* a Swift someone else started (swift.sh start DIR) and
		 * stops: only the emulator is this process's */
		snprintf(sw.dir, sizeof(sw.dir), "%.255s", running);
		if (read_auth_url() < 0) {
			fprintf(stderr,
				"*** SMUX_TEST_SWIFT_DIR=%s: no env "
				"file of swift.sh ***\n",
				running);
			return -EIO;
		}
		return start_identity();
	}

	if (ts_find_file("tests/servers/swift.sh", sw.script,
			 sizeof(sw.script)) < 0)
		return -ENOENT;
	snprintf(sw.dir, sizeof(sw.dir), "%s/smux-swift-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(sw.dir))
		return -errno;
	start_guardian();
	snprintf(cmd, sizeof(cmd), "'%s' start '%s' >/dev/null", sw.script,
		 sw.dir);
	if (system(cmd) != 0 || read_auth_url() < 0) {
		fprintf(stderr, "*** swift.sh start failed (its log is above; "
				"scripts/install-deps.sh installs Swift) "
				"***\n");
		return -EIO;
	}
	if (start_identity() < 0) {
		fprintf(stderr,
			"*** the identity emulator did not start (%s/"
			"identity-PID.log) ***\n",
			sw.dir);
		return -EIO;
	}
	return 0;
}

static void stop_alone(void)
{
	char cmd[600];

	ts_server_stop(&sw.emu);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sw.dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", sw.dir);
}

int ts_swift_identity_alone(struct ts_swift *out)
{
	const char *tmp = getenv("TMPDIR");

	if (!sw.tried) {
		sw.tried = true;
		snprintf(sw.dir, sizeof(sw.dir), "%s/smux-swid-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(sw.dir))
			return -errno;
		snprintf(sw.auth_url, sizeof(sw.auth_url), "-");
		atexit(stop_alone);
		sw.ok = start_identity() == 0;
		if (!sw.ok)
			fprintf(stderr, "*** the identity emulator did not "
					"start (python3?) ***\n");
	}
	if (!sw.ok)
		return -EIO;
	memset(out, 0, sizeof(*out));
	out->identity = sw.identity;
	out->control = sw.control;
	return 0;
}

int ts_swift_start(struct ts_swift *out)
{
	if (!sw.tried) {
		sw.tried = true;
		sw.ok = start_both() == 0;
	}
	if (!sw.ok)
		return -EIO;
	out->auth_v1 = sw.auth_url;
	out->user_v1 = "test:tester";
	out->key_v1 = "testing";
	out->identity = sw.identity;
	out->control = sw.control;
	return 0;
}

struct answer {
	char *buf;
	size_t cap, len;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct answer *a = arg;
	size_t k = size * n;

	if (a->buf && a->len + k < a->cap) {
		memcpy(a->buf + a->len, p, k);
		a->len += k;
		a->buf[a->len] = '\0';
	}
	return size * n;
}

int ts_swift_control(const char *json, char *answer, size_t cap)
{
	struct answer a = {answer, cap, 0};
	char url[160];
	long status = 0;
	CURL *c;
	CURLcode rc;

	if (!sw.ok)
		return -EIO;
	c = curl_easy_init();
	if (!c)
		return -ENOMEM;
	if (answer && cap)
		answer[0] = '\0';
	snprintf(url, sizeof(url), "%s%s", sw.control, answer ? "/stats" : "");
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (!answer)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	return rc == CURLE_OK && status == 200 ? 0 : -EIO;
}
