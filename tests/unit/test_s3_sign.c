/* SPDX-License-Identifier: MIT */
/*
 * test_s3_sign.c - Signature V4 (backends/s3_sign.h) against AWS's
 * published examples (the S3 SigV4 documentation's GET Object, PUT Object,
 * GET Bucket lifecycle, list objects and presigned GET, with the example
 * key AKIAIOSFODNN7EXAMPLE; the IAM ListUsers example of the general SigV4
 * documentation), the encode-once rule on awkward keys, the signing-key
 * cache, session tokens, refusals of malformed input, credentials from a
 * file and the environment, and that the secret appears in no output and
 * no error message. The last test runs tests/tools/s3_sign_crosscheck.py,
 * which signs hundreds of generated requests (awkward keys, queries,
 * headers, tokens, presigning) with botocore and with this binary started
 * as a driver (`test_s3_sign --driver`: JSON lines in, JSON lines out)
 * and compares every signature.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "backends/s3_sign.h"

#define AKID	  "AKIAIOSFODNN7EXAMPLE"
#define SECRET	  "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T20130524 ((time_t)1369353600) /* 2013-05-24T00:00:00Z */
#define HOST	  "examplebucket.s3.amazonaws.com"

static struct smux_s3_signer signer;

static int setup(void **state)
{
	struct smux_s3_creds c = {.access_key = AKID, .secret_key = SECRET};
	return smux__s3_signer_init(&signer, &c, NULL);
}

static int teardown(void **state)
{
	smux__s3_signer_release(&signer);
	return 0;
}

/* Signs @req and checks the signature and, when given, the header. */
static void expect_sig(const struct smux_s3_request *req, const char *sig,
		       const char *signed_headers)
{
	struct smux_s3_signed out;
	struct smux_error err = {0};
	assert_int_equal(smux__s3_sign(&signer, req, &out, &err), 0);
	assert_string_equal(out.signature, sig);
	char want[512];
	snprintf(want, sizeof(want),
		 "AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/"
		 "aws4_request,SignedHeaders=%s,Signature=%s",
		 signed_headers, sig);
	assert_string_equal(out.authorization, want);
	assert_null(strstr(out.canonical_request, SECRET));
	assert_null(strstr(out.string_to_sign, SECRET));
	smux__s3_signed_release(&out);
}

/* AWS: GET Object, "GET /test.txt" with Range: bytes=0-9. */
static void test_aws_get_object(void **state)
{
	struct smux_s3_kv h[] = {{"Range", "bytes=0-9"}};
	struct smux_s3_request req = {
		.method = "GET",
		.host = HOST,
		.path = "/test.txt",
		.headers = h,
		.nheaders = 1,
		.now = T20130524,
		.region = "us-east-1",
	};
	struct smux_s3_signed out;
	assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
	/* the documented canonical request, byte for byte */
	assert_string_equal(
		out.canonical_request,
		"GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
		"range:bytes=0-9\nx-amz-content-sha256:" SMUX_S3_EMPTY_SHA256
		"\nx-amz-date:20130524T000000Z\n\n"
		"host;range;x-amz-content-sha256;x-amz-"
		"date\n" SMUX_S3_EMPTY_SHA256);
	assert_string_equal(out.amz_date, "20130524T000000Z");
	assert_string_equal(out.payload_hash, SMUX_S3_EMPTY_SHA256);
	smux__s3_signed_release(&out);
	expect_sig(&req,
		   "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036"
		   "bdb41",
		   "host;range;x-amz-content-sha256;x-amz-date");
}

/* AWS: PUT Object "test$file.text", body "Welcome to Amazon S3.", with
 * Date and x-amz-storage-class headers. */
static void test_aws_put_object(void **state)
{
	char hash[SMUX_S3_HEX256];
	smux__s3_sha256_hex("Welcome to Amazon S3.", 21, hash);
	assert_string_equal(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b"
				  "4e99e42034a8b803f8b072");
	struct smux_s3_kv h[] = {
		{"x-amz-storage-class", "REDUCED_REDUNDANCY"},
		{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
	};
	struct smux_s3_request req = {
		.method = "PUT",
		.host = HOST,
		.path = "/test$file.text",
		.headers = h,
		.nheaders = 2,
		.payload_hash = hash,
		.now = T20130524,
		.region = "us-east-1",
	};
	struct smux_s3_signed out;
	assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
	assert_string_equal(out.url_path, "/test%24file.text");
	smux__s3_signed_release(&out);
	expect_sig(&req,
		   "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece"
		   "108bd",
		   "date;host;x-amz-content-sha256;x-amz-date;"
		   "x-amz-storage-class");
}

/* AWS: GET Bucket lifecycle, "GET /?lifecycle" (a bare query name). */
static void test_aws_get_lifecycle(void **state)
{
	struct smux_s3_kv q[] = {{"lifecycle", NULL}};
	struct smux_s3_request req = {
		.method = "GET",
		.host = HOST,
		.path = "/",
		.query = q,
		.nquery = 1,
		.now = T20130524,
		.region = "us-east-1",
	};
	struct smux_s3_signed out;
	assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
	assert_string_equal(out.url_query, "lifecycle");
	assert_non_null(strstr(out.canonical_request, "\n/\nlifecycle=\n"));
	smux__s3_signed_release(&out);
	expect_sig(&req,
		   "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a01367"
		   "83543",
		   "host;x-amz-content-sha256;x-amz-date");
}

/* AWS: list objects, "GET /?max-keys=2&prefix=J" (given out of order). */
static void test_aws_list_objects(void **state)
{
	struct smux_s3_kv q[] = {{"prefix", "J"}, {"max-keys", "2"}};
	struct smux_s3_request req = {
		.method = "GET",
		.host = HOST,
		.query = q,
		.nquery = 2,
		.now = T20130524,
		.region = "us-east-1",
	};
	struct smux_s3_signed out;
	assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
	assert_string_equal(out.url_query, "max-keys=2&prefix=J");
	assert_string_equal(out.url_path, "/");
	smux__s3_signed_release(&out);
	expect_sig(&req,
		   "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69"
		   "dc6f7",
		   "host;x-amz-content-sha256;x-amz-date");
}

/* AWS: presigned GET of /test.txt valid 86400 s. */
static void test_aws_presign(void **state)
{
	struct smux_s3_request req = {
		.method = "GET",
		.host = HOST,
		.path = "/test.txt",
		.now = T20130524,
		.region = "us-east-1",
	};
	struct smux_s3_signed out;
	assert_int_equal(smux__s3_presign(&signer, &req, 86400, &out, NULL), 0);
	assert_string_equal(
		out.url_query,
		"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
		"AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2F"
		"aws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
		"&X-Amz-SignedHeaders=host&X-Amz-Signature="
		"aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d"
		"404");
	assert_null(out.authorization);
	smux__s3_signed_release(&out);
	assert_int_equal(smux__s3_presign(&signer, &req, 0, &out, NULL),
			 -EINVAL);
	smux__s3_signed_release(&out);
}

/* AWS general SigV4 documentation: IAM ListUsers (another secret, another
 * service, no x-amz-content-sha256, a signed Content-Type). */
static void test_aws_iam_list_users(void **state)
{
	struct smux_s3_signer iam;
	struct smux_s3_creds c = {
		.access_key = AKID,
		.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};
	assert_int_equal(smux__s3_signer_init(&iam, &c, NULL), 0);
	struct smux_s3_kv q[] = {{"Version", "2010-05-08"},
				 {"Action", "ListUsers"}};
	struct smux_s3_kv h[] = {
		{"Content-Type",
		 "application/x-www-form-urlencoded; charset=utf-8"}};
	struct smux_s3_request req = {
		.method = "GET",
		.host = "iam.amazonaws.com",
		.path = "/",
		.query = q,
		.nquery = 2,
		.headers = h,
		.nheaders = 1,
		.now = 1440938160, /* 2015-08-30T12:36:00Z */
		.region = "us-east-1",
		.service = "iam",
		.no_content_sha256 = true,
	};
	struct smux_s3_signed out;
	assert_int_equal(smux__s3_sign(&iam, &req, &out, NULL), 0);
	char crhash[SMUX_S3_HEX256];
	smux__s3_sha256_hex(out.canonical_request,
			    strlen(out.canonical_request), crhash);
	assert_string_equal(crhash, "f536975d06c0309214f805bb90ccff089219ecd6"
				    "8b2577efef23edd43b7e1a59");
	assert_string_equal(out.signature, "5d672d79c15b13162d9279b0855cfba67"
					   "89a8edb4c82c400e06b5924a6f2b5d7");
	/* the documentation separates the fields with ", ", we with ","
	 * (as its S3 examples do); both are valid */
	assert_string_equal(out.authorization,
			    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"
			    "20150830/us-east-1/iam/aws4_request,"
			    "SignedHeaders=content-type;host;x-amz-date,"
			    "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb"
			    "4c82c400e06b5924a6f2b5d7");
	smux__s3_signed_release(&out);
	smux__s3_signer_release(&iam);
}

/* S3's encode-once rule on awkward keys; query values encode '/' too. */
static void test_encoding(void **state)
{
	char *e = smux__s3_uri_encode("a b+c%d*e~f/\xc3\xbc\x01=&?#", true);
	assert_string_equal(e, "a%20b%2Bc%25d%2Ae~f/%C3%BC%01%3D%26%3F%23");
	free(e);
	e = smux__s3_uri_encode("a/b c", false);
	assert_string_equal(e, "a%2Fb%20c");
	free(e);

	struct smux_s3_kv q[] = {{"prefix", "dir/a b"},
				 {"list-type", "2"},
				 {"continuation-token", "x+y="},
				 {"delimiter", "/"}};
	struct smux_s3_request req = {
		.method = "GET",
		.host = "127.0.0.1:9000",
		.path = "/bucket/a%2F b/../c",
		.query = q,
		.nquery = 4,
		.now = T20130524,
		.region = "us-east-1",
	};
	struct smux_s3_signed out;
	assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
	/* no normalisation of "..", no double decoding of "%2F" */
	assert_string_equal(out.url_path, "/bucket/a%252F%20b/../c");
	assert_string_equal(out.url_query,
			    "continuation-token=x%2By%3D&delimiter=%2F&"
			    "list-type=2&prefix=dir%2Fa%20b");
	assert_non_null(strstr(out.canonical_request, "host:127.0.0.1:9000\n"));
	smux__s3_signed_release(&out);
}

/* Header values trimmed and collapsed; repeated names joined in order. */
static void test_headers_canonical(void **state)
{
	struct smux_s3_kv h[] = {{"X-Amz-Meta-B", "  two   words  "},
				 {"x-amz-meta-a", "z"},
				 {"X-AMZ-META-A", "y"}};
	struct smux_s3_request req = {
		.method = "PUT",
		.host = HOST,
		.path = "/k",
		.headers = h,
		.nheaders = 3,
		.payload_hash = SMUX_S3_UNSIGNED_PAYLOAD,
		.now = T20130524,
		.region = "eu-west-1",
	};
	struct smux_s3_signed out;
	assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
	assert_non_null(strstr(out.canonical_request,
			       "x-amz-meta-a:z,y\nx-amz-meta-b:two words\n"));
	assert_string_equal(out.payload_hash, "UNSIGNED-PAYLOAD");
	assert_non_null(strstr(out.authorization, "/eu-west-1/s3/"));
	smux__s3_signed_release(&out);
}

/* The signing key is derived once per day, region and service. */
static void test_key_cache(void **state)
{
	struct smux_s3_request req = {
		.method = "HEAD",
		.host = HOST,
		.path = "/k",
		.now = T20130524 + 10,
		.region = "us-east-1",
	};
	struct smux_s3_signed out;
	unsigned long before = signer.key_derivations;
	for (int i = 0; i < 3; i++) {
		req.now += 3600;
		assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
		smux__s3_signed_release(&out);
	}
	assert_true(signer.key_derivations - before <= 1);
	before = signer.key_derivations;
	req.now += 86400; /* next day */
	assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
	smux__s3_signed_release(&out);
	assert_int_equal(signer.key_derivations, before + 1);
	req.region = "us-west-2";
	assert_int_equal(smux__s3_sign(&signer, &req, &out, NULL), 0);
	smux__s3_signed_release(&out);
	assert_int_equal(signer.key_derivations, before + 2);
}

/* A session token is sent and signed as x-amz-security-token; rotating
 * the credentials changes the signature. */
static void test_session_token(void **state)
{
	struct smux_s3_signer s;
	struct smux_s3_creds c = {.access_key = AKID,
				  .secret_key = SECRET,
				  .session_token = "TOKEN/abc+="};
	assert_int_equal(smux__s3_signer_init(&s, &c, NULL), 0);
	struct smux_s3_request req = {
		.method = "GET",
		.host = HOST,
		.path = "/k",
		.now = T20130524,
		.region = "us-east-1",
	};
	struct smux_s3_signed out, out2;
	assert_int_equal(smux__s3_sign(&s, &req, &out, NULL), 0);
	assert_string_equal(out.security_token, "TOKEN/abc+=");
	assert_non_null(strstr(out.canonical_request,
			       "x-amz-security-token:TOKEN/abc+=\n"));
	assert_non_null(
		strstr(out.authorization, "x-amz-date;x-amz-security-token,"));
	c.session_token = "OTHER";
	assert_int_equal(smux__s3_signer_set_creds(&s, &c, NULL), 0);
	assert_int_equal(smux__s3_sign(&s, &req, &out2, NULL), 0);
	assert_string_not_equal(out.signature, out2.signature);
	smux__s3_signed_release(&out);
	smux__s3_signed_release(&out2);
	assert_int_equal(smux__s3_presign(&s, &req, 60, &out, NULL), 0);
	assert_non_null(strstr(out.url_query, "X-Amz-Security-Token=OTHER"));
	smux__s3_signed_release(&out);
	smux__s3_signer_release(&s);
}

/* Malformed requests are refused with EINVAL; nothing leaks the secret. */
static void test_refusals(void **state)
{
	struct smux_s3_kv crlf[] = {{"x-amz-meta-a", "a\r\nHost: evil"}};
	struct smux_s3_kv host[] = {{"Host", "other"}};
	struct smux_s3_kv badname[] = {{"a b", "c"}};
	struct smux_s3_request base = {
		.method = "GET",
		.host = HOST,
		.path = "/k",
		.now = T20130524,
		.region = "us-east-1",
	};
	struct smux_s3_request r[8];
	for (int i = 0; i < 8; i++)
		r[i] = base;
	r[0].headers = crlf, r[0].nheaders = 1;
	r[1].headers = host, r[1].nheaders = 1;
	r[2].headers = badname, r[2].nheaders = 1;
	r[3].payload_hash = "ABCDEF";
	r[4].region = "us east";
	r[5].path = "k";
	r[6].method = "GE T";
	r[7].host = "a\nb";
	for (int i = 0; i < 8; i++) {
		struct smux_s3_signed out;
		struct smux_error err = {0};
		assert_int_equal(smux__s3_sign(&signer, &r[i], &out, &err),
				 -EINVAL);
		assert_null(strstr(err.e.message, SECRET));
		smux__s3_signed_release(&out);
	}
	struct smux_s3_creds none = {.access_key = AKID};
	struct smux_s3_signer s;
	assert_int_equal(smux__s3_signer_init(&s, &none, NULL), -EINVAL);
	struct smux_s3_creds blank = {.access_key = AKID,
				      .secret_key = "has space"};
	struct smux_error err = {0};
	assert_int_equal(smux__s3_signer_init(&s, &blank, &err), -EINVAL);
	assert_null(strstr(err.e.message, "has space"));
}

static char *write_tmp(const char *text)
{
	const char *tmp = getenv("TMPDIR");
	char *path = malloc(512);
	assert_non_null(path);
	snprintf(path, 512, "%s/smux-s3creds-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

#define FSECRET "fileSecret/With+Symbols"

static void test_creds_file(void **state)
{
	char token[3001];
	memset(token, 'T', 3000);
	token[3000] = '\0';
	char text[4096];
	snprintf(text, sizeof(text),
		 "# comment\n[default]\naws_access_key_id = AKIDDEFAULT\n"
		 "aws_secret_access_key=" FSECRET "\nregion = us-east-1\n\n"
		 "[prod]\naws_access_key_id = AKIDPROD  \n"
		 "aws_secret_access_key = prodsecret\n"
		 "aws_session_token = %s\n"
		 "[nokey]\naws_secret_access_key = " FSECRET "\n",
		 token);
	char *path = write_tmp(text);
	struct smux_s3_creds c;
	struct smux_error err = {0};
	assert_int_equal(smux__s3_creds_from_file(path, NULL, &c, &err), 0);
	assert_string_equal(c.access_key, "AKIDDEFAULT");
	assert_string_equal(c.secret_key, FSECRET);
	assert_null(c.session_token);
	smux__s3_creds_release(&c);

	/* a session token longer than libinih's line buffer */
	assert_int_equal(smux__s3_creds_from_file(path, "prod", &c, &err), 0);
	assert_string_equal(c.access_key, "AKIDPROD");
	assert_string_equal(c.secret_key, "prodsecret");
	assert_non_null(c.session_token);
	assert_string_equal(c.session_token, token);
	smux__s3_creds_release(&c);

	/* errors name the file and profile, never the secret */
	assert_int_equal(smux__s3_creds_from_file(path, "nokey", &c, &err),
			 -EINVAL);
	assert_non_null(strstr(err.e.message, "aws_access_key_id missing"));
	assert_non_null(strstr(err.e.message, path));
	assert_null(strstr(err.e.message, FSECRET));
	assert_int_equal(smux__s3_creds_from_file(path, "absent", &c, &err),
			 -EINVAL);
	assert_non_null(strstr(err.e.message, "no profile [absent]"));
	unlink(path);
	free(path);

	/* a syntax error on the secret's line does not echo the line */
	path = write_tmp("[default]\naws_access_key_id = A\n" FSECRET "\n");
	assert_int_equal(smux__s3_creds_from_file(path, NULL, &c, &err),
			 -EINVAL);
	assert_non_null(strstr(err.e.message, ":3: syntax error"));
	assert_null(strstr(err.e.message, FSECRET));
	unlink(path);
	free(path);

	/* a key name longer than inih's line: refused, not cut */
	static const char head[] = "[default]\naws_access_key_id";
	char longname[600];
	memset(longname, ' ', sizeof(longname));
	memcpy(longname, head, sizeof(head) - 1); /* padded by the spaces */
	snprintf(longname + 400, 200, "= A\naws_secret_access_key = S\n");
	path = write_tmp(longname);
	assert_int_equal(smux__s3_creds_from_file(path, NULL, &c, &err),
			 -EINVAL);
	assert_non_null(strstr(err.e.message, ":2: line too long"));
	unlink(path);
	free(path);

	assert_int_equal(
		smux__s3_creds_from_file("/nonexistent/creds", NULL, &c, &err),
		-ENOENT);
}

static void test_creds_env(void **state)
{
	struct smux_s3_creds c;
	struct smux_error err = {0};
	setenv("SMUXT_ACCESS_KEY_ID", "AKIDENV", 1);
	unsetenv("SMUXT_SECRET_ACCESS_KEY");
	unsetenv("SMUXT_SESSION_TOKEN");
	assert_int_equal(smux__s3_creds_from_env("SMUXT", &c, &err), -EINVAL);
	assert_non_null(strstr(err.e.message, "SMUXT_SECRET_ACCESS_KEY"));
	setenv("SMUXT_SECRET_ACCESS_KEY", "envSecret", 1);
	setenv("SMUXT_SESSION_TOKEN", "envToken", 1);
	assert_int_equal(smux__s3_creds_from_env("SMUXT", &c, &err), 0);
	assert_string_equal(c.access_key, "AKIDENV");
	assert_string_equal(c.secret_key, "envSecret");
	assert_string_equal(c.session_token, "envToken");
	smux__s3_creds_release(&c);
	assert_null(c.secret_key);
}

/* botocore's signer over generated requests: the script runs this very
 * binary as its driver. Debian's python3-botocore is installed by
 * scripts/install-deps.sh; when it is missing the script fails (loudly). */
static void test_botocore_crosscheck(void **state)
{
	const char *tool = "tests/tools/s3_sign_crosscheck.py";
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	if (access(tool, R_OK) != 0)
		fail_msg("%s not found: run the test from the source tree",
			 tool);
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s '%s' 500", tool, exe);
	assert_int_equal(system(cmd), 0);
}

static const char *jstr(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* [[name, value-or-null], ...] -> kv array (borrowed strings). */
static struct smux_s3_kv *jpairs(json_t *o, const char *k, size_t *n)
{
	json_t *a = json_object_get(o, k);
	*n = json_array_size(a);
	struct smux_s3_kv *kv = calloc(*n + 1, sizeof(*kv));
	for (size_t i = 0; kv && i < *n; i++) {
		json_t *p = json_array_get(a, i);
		kv[i].name = json_string_value(json_array_get(p, 0));
		kv[i].value = json_string_value(json_array_get(p, 1));
	}
	return kv;
}

/* The driver for the cross-check: one JSON request a line on stdin, one
 * JSON answer a line on stdout. */
static int driver(void)
{
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, stdin) > 0) {
		json_error_t jerr;
		json_t *in = json_loads(line, 0, &jerr);
		if (!in) {
			fprintf(stderr, "driver: bad input: %s\n", jerr.text);
			free(line);
			return 2;
		}
		struct smux_s3_creds c = {
			.access_key = (char *)jstr(in, "access_key"),
			.secret_key = (char *)jstr(in, "secret_key"),
			.session_token = (char *)jstr(in, "token"),
		};
		struct smux_s3_request req = {
			.method = jstr(in, "method"),
			.host = jstr(in, "host"),
			.path = jstr(in, "path"),
			.payload_hash = jstr(in, "payload_hash"),
			.now = (time_t)json_integer_value(
				json_object_get(in, "now")),
			.region = jstr(in, "region"),
			.service = jstr(in, "service"),
		};
		struct smux_s3_kv *q = jpairs(in, "query", &req.nquery);
		struct smux_s3_kv *h = jpairs(in, "headers", &req.nheaders);
		req.query = q;
		req.headers = h;
		json_int_t presign =
			json_integer_value(json_object_get(in, "presign"));
		struct smux_s3_signer s;
		struct smux_s3_signed out = {0};
		struct smux_error err = {0};
		int rc = smux__s3_signer_init(&s, &c, &err);
		if (!rc) {
			rc = presign ? smux__s3_presign(&s, &req,
							(unsigned)presign, &out,
							&err)
				     : smux__s3_sign(&s, &req, &out, &err);
			smux__s3_signer_release(&s);
		}
		json_t *o = json_pack("{s:i, s:s, s:s?, s:s?, s:s?, s:s?}",
				      "rc", rc, "signature", out.signature,
				      "authorization", out.authorization,
				      "url_path", out.url_path, "url_query",
				      out.url_query, "canonical_request",
				      out.canonical_request);
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		printf("%s\n", text ? text : "{\"rc\":-12}");
		free(text);
		json_decref(o);
		smux__s3_signed_release(&out);
		free(q);
		free(h);
		json_decref(in);
	}
	free(line);
	return fflush(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--driver"))
		return driver();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aws_get_object),
		cmocka_unit_test(test_aws_put_object),
		cmocka_unit_test(test_aws_get_lifecycle),
		cmocka_unit_test(test_aws_list_objects),
		cmocka_unit_test(test_aws_presign),
		cmocka_unit_test(test_aws_iam_list_users),
		cmocka_unit_test(test_encoding),
		cmocka_unit_test(test_headers_canonical),
		cmocka_unit_test(test_key_cache),
		cmocka_unit_test(test_session_token),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_creds_file),
		cmocka_unit_test(test_creds_env),
		cmocka_unit_test(test_botocore_crosscheck),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
