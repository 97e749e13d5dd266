// SPDX-License-Identifier: MIT
/*
 * bunny_server.c - starting the Bunny Storage emulator and talking to its
 * control endpoint (libcurl; jansson for the counters).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "support/bunny_server.h"

int ts_bunny_start(struct ts_server *s, const char *dir, char *url, size_t cap)
{
	char script[PATH_MAX], py[PATH_MAX], portfile[PATH_MAX];
	char root[PATH_MAX];
	char *argv[7];
	int rc;

	if (ts_find_file("tests/servers/bunny_emu.py", script, sizeof(script)) <
		    0 ||
	    ts_find_exe("python3", py, sizeof(py)) < 0)
		return -ENOENT;
	snprintf(portfile, sizeof(portfile), "%s/port", dir);
	snprintf(root, sizeof(root), "%s/store", dir);
	argv[0] = py;
	argv[1] = script;
	argv[2] = portfile;
	argv[3] = root;
	argv[4] = TS_BUNNY_ZONE;
	argv[5] = TS_BUNNY_KEY;
	argv[6] = NULL;
	rc = ts_server_start(s, argv, NULL, portfile, 0, 20000);
	if (rc == 0)
		snprintf(url, cap, "http://127.0.0.1:%d", s->port);
	return rc;
}

struct buf {
	char data[8192];
	size_t len;
};

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	size_t k = size * n;

	if (k > sizeof(b->data) - 1 - b->len)
		return 0;
	memcpy(b->data + b->len, p, k);
	b->len += k;
	b->data[b->len] = '\0';
	return k;
}

/* One control request; the body into @b. 0 on a 200. */
static int control(const struct ts_server *s, const char *path, bool post,
		   struct buf *b)
{
	CURL *c = curl_easy_init();
	char url[512];
	long status = 0;
	CURLcode cc;

	if (!c)
		return -ENOMEM;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", s->port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	if (post)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	return cc == CURLE_OK && status == 200 ? 0 : -EIO;
}

int ts_bunny_zone(const struct ts_server *s, const char *zone, const char *key)
{
	struct buf b = {.len = 0};
	char path[256];

	snprintf(path, sizeof(path), "/_emu/zone?name=%s&key=%s", zone, key);
	return control(s, path, true, &b);
}

int ts_bunny_set(const struct ts_server *s, const char *query)
{
	struct buf b = {.len = 0};
	char path[256];

	snprintf(path, sizeof(path), "/_emu/set?%s", query);
	return control(s, path, true, &b);
}

long ts_bunny_stat(const struct ts_server *s, const char *name)
{
	struct buf b = {.len = 0};
	const char *dot = strchr(name, '.');
	json_t *j, *v;
	long out = -1;

	if (control(s, "/_emu/stats", false, &b) < 0)
		return -1;
	j = json_loadb(b.data, b.len, 0, NULL);
	if (!j)
		return -1;
	if (dot) {
		char top[64];

		snprintf(top, sizeof(top), "%.*s", (int)(dot - name), name);
		v = json_object_get(json_object_get(j, top), dot + 1);
		out = v ? (json_is_integer(v) ? (long)json_integer_value(v)
					      : -1)
			: 0; /* a method never used */
	} else {
		v = json_object_get(j, name);
		if (json_is_integer(v))
			out = (long)json_integer_value(v);
	}
	json_decref(j);
	return out;
}
