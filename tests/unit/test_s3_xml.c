/* SPDX-License-Identifier: MIT */
/*
 * test_s3_xml.c - S3 response bodies (backends/s3_xml.h): ListObjectsV2
 * with CommonPrefixes, continuation and encoding-type=url, error bodies
 * and their mapping to smux errors, Initiate/Complete multipart, copy
 * results, DeleteObjects with per-key errors; the same documents fed in
 * every chunking; and hostile input: every truncation of every sample,
 * a few hundred random and mutated documents, oversized fields, too many
 * entries, an oversized document, DTDs and entity bombs - errors, never
 * crashes (run under ASan by `make VARIANT=asan`).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/s3_xml.h"

#define NS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""

static const char list_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<ListBucketResult " NS ">"
	"<Name>bucket</Name><Prefix>dir%2F</Prefix><KeyCount>3</KeyCount>"
	"<MaxKeys>3</MaxKeys><Delimiter>%2F</Delimiter>"
	"<IsTruncated>true</IsTruncated>"
	"<Contents><Key>dir/a+b%2Bc%25d%2Ae~f.txt</Key>"
	"<LastModified>2009-10-12T17:50:30.000Z</LastModified>"
	"<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>"
	"<Size>434234</Size><StorageClass>STANDARD</StorageClass>"
	"<Owner><ID>x</ID><DisplayName>y</DisplayName></Owner></Contents>"
	"<Contents><Key>dir/%C3%A9t%C3%A9%01</Key>"
	"<LastModified>2026-12-01T10:00:00.123456Z</LastModified>"
	"<ETag>\"abc-2\"</ETag><Size>0</Size></Contents>"
	"<CommonPrefixes><Prefix>dir/sub+dir%2F</Prefix></CommonPrefixes>"
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="
	"</NextContinuationToken><EncodingType>url</EncodingType>"
	"</ListBucketResult>";

static const char error_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<Error><Code>NoSuchKey</Code><Message>The resource you requested "
	"does not&#9;exist</Message><Resource>/mybucket/myfoto.jpg"
	"</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>";

static const char initiate_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<InitiateMultipartUploadResult " NS "><Bucket>example-bucket</Bucket>"
	"<Key>example-object</Key><UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBt"
	"eS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>"
	"</InitiateMultipartUploadResult>";

static const char complete_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<CompleteMultipartUploadResult " NS ">"
	"<Location>http://Example-Bucket.s3.amazonaws.com/Example-Object"
	"</Location><Bucket>Example-Bucket</Bucket><Key>Example-Object</Key>"
	"<ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag>"
	"</CompleteMultipartUploadResult>";

static const char copy_doc[] =
	"<CopyObjectResult><LastModified>2009-10-28T22:32:00Z</LastModified>"
	"<ETag>\"9b2cf535f27731c974343645a3985328\"</ETag></CopyObjectResult>";

static const char copy_part_doc[] =
	"<CopyPartResult " NS "><LastModified>2011-04-11T20:34:56.000Z"
	"</LastModified><ETag>\"9b2cf535f27731c974343645a3985328\"</ETag>"
	"</CopyPartResult>";

static const char delete_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<DeleteResult " NS "><Deleted><Key>sample1.txt</Key></Deleted>"
	"<Error><Key>sample2.txt</Key><Code>AccessDenied</Code>"
	"<Message>Access Denied</Message></Error>"
	"<Deleted><Key>a b</Key></Deleted></DeleteResult>";

/* A 200 CompleteMultipartUpload that failed anyway. */
static const char complete_error_doc[] =
	"<Error><Code>InternalError</Code><Message>We encountered an internal "
	"error. Please try again.</Message></Error>";

static struct smux_s3_xml *parse_ok(enum smux_s3_doc kind, const char *doc)
{
	struct smux_s3_xml *x;
	struct smux_error err = {0};
	int rc = smux__s3_xml_parse(kind, doc, strlen(doc), &x, &err);
	if (rc)
		fail_msg("parse failed: %s", err.e.message);
	return x;
}

static void check_list(const struct smux_s3_result *r)
{
	assert_false(r->is_error);
	assert_true(r->url_encoded);
	assert_true(r->truncated);
	assert_int_equal(r->key_count, 3);
	assert_string_equal(r->next_token,
			    "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	assert_int_equal(r->nobjs, 2);
	assert_string_equal(r->objs[0].key, "dir/a b+c%d*e~f.txt");
	assert_int_equal(r->objs[0].size, 434234);
	assert_string_equal(r->objs[0].etag,
			    "fba9dede5f27731c9771645a39863328");
	assert_int_equal(r->objs[0].mtime_ns, 1255369830LL * 1000000000LL);
	assert_string_equal(r->objs[1].key, "dir/\xc3\xa9t\xc3\xa9\x01");
	assert_int_equal(r->objs[1].size, 0);
	assert_string_equal(r->objs[1].etag, "abc-2");
	assert_int_equal(r->objs[1].mtime_ns,
			 1796119200LL * 1000000000LL + 123456000LL);
	assert_int_equal(r->nprefixes, 1);
	assert_string_equal(r->prefixes[0], "dir/sub dir/");
}

static void test_list(void **state)
{
	struct smux_s3_xml *x = parse_ok(SMUX_S3_DOC_LIST, list_doc);
	check_list(smux__s3_xml_result(x));
	smux__s3_xml_free(x);
}

/* Without <EncodingType>url the keys are taken as they are. */
static void test_list_raw_last_page(void **state)
{
	const char *doc = "<ListBucketResult><IsTruncated>false</IsTruncated>"
			  "<Contents><Key>a+b%41</Key><Size>1</Size></Contents>"
			  "<KeyCount>1</KeyCount></ListBucketResult>";
	struct smux_s3_xml *x = parse_ok(SMUX_S3_DOC_LIST, doc);
	const struct smux_s3_result *r = smux__s3_xml_result(x);
	assert_false(r->url_encoded);
	assert_false(r->truncated);
	assert_null(r->next_token);
	assert_string_equal(r->objs[0].key, "a+b%41");
	assert_null(r->objs[0].etag);
	smux__s3_xml_free(x);
}

/* Blanks around a key, a prefix or a multipart key are the key's own
 * (s3rver leaves keys unencoded): " lead", "trail " and "tab<TAB>" were
 * listed as "lead", "trail" and "tab", which answered ENOENT, and the
 * names' absence hid the real files. */
static void test_list_blank_keys(void **state)
{
	const char *doc =
		"<ListBucketResult><IsTruncated>false</IsTruncated>"
		"<Contents><Key> lead</Key><Size>1</Size></Contents>"
		"<Contents><Key>trail </Key><Size>1</Size></Contents>"
		"<Contents><Key>tab\t</Key><Size>1</Size></Contents>"
		"<CommonPrefixes><Prefix> sp /</Prefix></CommonPrefixes>"
		"</ListBucketResult>";
	const char *init = "<InitiateMultipartUploadResult><Key> k </Key>"
			   "<UploadId>u1</UploadId>"
			   "</InitiateMultipartUploadResult>";
	struct smux_s3_xml *x = parse_ok(SMUX_S3_DOC_LIST, doc);
	const struct smux_s3_result *r = smux__s3_xml_result(x);

	(void)state;
	assert_int_equal(r->nobjs, 3);
	assert_string_equal(r->objs[0].key, " lead");
	assert_string_equal(r->objs[1].key, "trail ");
	assert_string_equal(r->objs[2].key, "tab\t");
	assert_string_equal(r->prefixes[0], " sp /");
	smux__s3_xml_free(x);
	x = parse_ok(SMUX_S3_DOC_INITIATE, init);
	assert_string_equal(smux__s3_xml_result(x)->key, " k ");
	assert_string_equal(smux__s3_xml_result(x)->upload_id, "u1");
	smux__s3_xml_free(x);
}

/* The same document in every chunk size gives the same result. */
static void test_chunked(void **state)
{
	size_t len = strlen(list_doc);
	for (size_t chunk = 1; chunk <= 64; chunk = chunk * 2 + 1) {
		struct smux_s3_xml *x = smux__s3_xml_new(SMUX_S3_DOC_LIST);
		assert_non_null(x);
		for (size_t off = 0; off < len; off += chunk) {
			size_t n = len - off < chunk ? len - off : chunk;
			assert_int_equal(
				smux__s3_xml_feed(x, list_doc + off, n, NULL),
				0);
		}
		assert_int_equal(smux__s3_xml_finish(x, NULL), 0);
		check_list(smux__s3_xml_result(x));
		smux__s3_xml_free(x);
	}
}

static void test_error_doc(void **state)
{
	struct smux_s3_xml *x = parse_ok(SMUX_S3_DOC_ERROR, error_doc);
	const struct smux_s3_result *r = smux__s3_xml_result(x);
	assert_true(r->is_error);
	assert_string_equal(r->code, "NoSuchKey");
	/* the tab is a control character: sanitized */
	assert_string_equal(r->message,
			    "The resource you requested does not?exist");
	assert_string_equal(r->request_id, "4442587FB7D0A2F9");
	struct smux_error err = {0};
	assert_int_equal(smux__s3_error_fill(&err, 404, r, "s3a", "get k"),
			 -ENOENT);
	assert_int_equal(err.e.code, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(err.e.http_status, 404);
	assert_non_null(strstr(err.e.message, "get k: NoSuchKey: The"));
	smux__s3_xml_free(x);

	/* an error body where a listing was expected is still an error */
	x = parse_ok(SMUX_S3_DOC_LIST, error_doc);
	assert_true(smux__s3_xml_result(x)->is_error);
	smux__s3_xml_free(x);
}

static void test_error_mapping(void **state)
{
	static const struct {
		const char *code;
		int status;
		enum smux_code want;
		enum smux_class cls;
	} cases[] = {
		{"SignatureDoesNotMatch", 403, SMUX_E_PERMISSION_DENIED,
		 SMUX_CLASS_SEMANTIC},
		{"ExpiredToken", 400, SMUX_E_CREDENTIAL_EXPIRED,
		 SMUX_CLASS_SEMANTIC},
		{"PreconditionFailed", 412, SMUX_E_PRECONDITION_FAILED,
		 SMUX_CLASS_SEMANTIC},
		{"SlowDown", 503, SMUX_E_HTTP, SMUX_CLASS_TRANSIENT},
		{"InternalError", 500, SMUX_E_HTTP, SMUX_CLASS_TRANSIENT},
		{"NotImplemented", 501, SMUX_E_NOT_SUPPORTED,
		 SMUX_CLASS_SEMANTIC},
		{"SomethingNew", 409, SMUX_E_HTTP, SMUX_CLASS_SEMANTIC},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char doc[256];
		snprintf(doc, sizeof(doc),
			 "<Error><Code>%s</Code><Message>m</Message></Error>",
			 cases[i].code);
		struct smux_s3_xml *x = parse_ok(SMUX_S3_DOC_ERROR, doc);
		struct smux_error err = {0};
		smux__s3_error_fill(&err, cases[i].status,
				    smux__s3_xml_result(x), "b", "put k");
		assert_int_equal(err.e.code, cases[i].want);
		assert_int_equal(smux_error_class(&err.e), cases[i].cls);
		assert_non_null(strstr(err.e.message, cases[i].code));
		smux__s3_xml_free(x);
	}
	/* no body: the status alone */
	struct smux_error err = {0};
	smux__s3_error_fill(&err, 503, NULL, "b", "head k");
	assert_int_equal(smux_error_class(&err.e), SMUX_CLASS_TRANSIENT);
	assert_int_equal(err.e.http_status, 503);
}

static void test_multipart_copy_delete(void **state)
{
	struct smux_s3_xml *x = parse_ok(SMUX_S3_DOC_INITIATE, initiate_doc);
	const struct smux_s3_result *r = smux__s3_xml_result(x);
	assert_string_equal(r->upload_id, "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1"
					  "tb3ZpZS5tMnRzIHVwbG9hZA");
	assert_string_equal(r->key, "example-object");
	smux__s3_xml_free(x);

	x = parse_ok(SMUX_S3_DOC_COMPLETE, complete_doc);
	r = smux__s3_xml_result(x);
	assert_false(r->is_error);
	assert_string_equal(r->etag, "3858f62230ac3c915f300c664312c11f-9");
	assert_string_equal(r->key, "Example-Object");
	smux__s3_xml_free(x);

	x = parse_ok(SMUX_S3_DOC_COMPLETE, complete_error_doc);
	r = smux__s3_xml_result(x);
	assert_true(r->is_error);
	assert_string_equal(r->code, "InternalError");
	smux__s3_xml_free(x);

	x = parse_ok(SMUX_S3_DOC_COPY, copy_doc);
	r = smux__s3_xml_result(x);
	assert_string_equal(r->etag, "9b2cf535f27731c974343645a3985328");
	assert_int_equal(r->mtime_ns, 1256769120LL * 1000000000LL);
	smux__s3_xml_free(x);
	x = parse_ok(SMUX_S3_DOC_COPY, copy_part_doc);
	assert_string_equal(smux__s3_xml_result(x)->etag,
			    "9b2cf535f27731c974343645a3985328");
	smux__s3_xml_free(x);

	x = parse_ok(SMUX_S3_DOC_DELETE, delete_doc);
	r = smux__s3_xml_result(x);
	assert_int_equal(r->ndeleted, 2);
	assert_int_equal(r->ndelete_errors, 1);
	assert_string_equal(r->delete_errors[0].key, "sample2.txt");
	assert_string_equal(r->delete_errors[0].code, "AccessDenied");
	assert_string_equal(r->delete_errors[0].message, "Access Denied");
	smux__s3_xml_free(x);
}

/* A DeleteObjects answer: a Deleted entry of a non-Quiet answer, Errors
 * whose keys are taken as sent (entities undone, blanks kept). */
static const char delete_mixed_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<DeleteResult " NS "><Deleted><Key>p/a</Key></Deleted>"
	"<Error><Key>p/gone</Key><Code>NoSuchKey</Code>"
	"<Message>The specified key does not exist.</Message></Error>"
	"<Error><Key>p/a&amp;b&lt;c&gt;&quot;d&apos;e&#x20;&#xe9;</Key>"
	"<Code>AccessDenied</Code><Message>Access&#9;Denied</Message></Error>"
	"<Deleted><Key>p/b</Key><DeleteMarker>true</DeleteMarker></Deleted>"
	"<Error><Key> p/sp </Key><Code>Server Error</Code></Error>"
	"</DeleteResult>";

static void check_delete_mixed(const struct smux_s3_result *r)
{
	assert_false(r->is_error);
	assert_int_equal(r->ndeleted, 2);
	assert_int_equal(r->ndelete_errors, 3);
	assert_string_equal(r->delete_errors[0].key, "p/gone");
	assert_string_equal(r->delete_errors[0].code, "NoSuchKey");
	assert_string_equal(r->delete_errors[1].key, "p/a&b<c>\"d'e \xc3\xa9");
	assert_string_equal(r->delete_errors[1].code, "AccessDenied");
	assert_string_equal(r->delete_errors[1].message, "Access?Denied");
	assert_string_equal(r->delete_errors[2].key, " p/sp ");
	assert_string_equal(r->delete_errors[2].code, "Server Error");
	assert_null(r->delete_errors[2].message);
}

/*
 * DeleteObjects answers: entries in any chunking (an entity split between
 * two feeds); a Quiet answer with nothing to say; an <Error> document in
 * place of the result; and what is BAD_RESPONSE: an Error entry without
 * its Key or Code, a body that is not XML, another document.
 */
static void test_delete_result(void **state)
{
	static const char *const bad[] = {
		"<DeleteResult><Error><Code>AccessDenied</Code>"
		"<Message>m</Message></Error></DeleteResult>",
		"<DeleteResult><Error><Key>a</Key></Error></DeleteResult>",
		"<DeleteResult><Error><Key>a</Key><Code>AccessDenied</Code>"
		"</Error><Error><Code>AccessDenied</Code></Error>"
		"</DeleteResult>",
		"<<<not xml",
		"",
		"<html><body>502 Bad Gateway</body></html>",
		"<DeleteResult><Deleted><Key>a</Key></Deleted>",
		"<ListBucketResult/>",
		"<DeleteResult><Key>a&bogus;</Key></DeleteResult>",
	};
	size_t len = strlen(delete_mixed_doc);
	struct smux_s3_xml *x;
	const struct smux_s3_result *r;

	(void)state;
	for (size_t chunk = 1; chunk <= len; chunk = chunk * 3 + 1) {
		x = smux__s3_xml_new(SMUX_S3_DOC_DELETE);
		assert_non_null(x);
		for (size_t off = 0; off < len; off += chunk) {
			size_t n = len - off < chunk ? len - off : chunk;

			assert_int_equal(
				smux__s3_xml_feed(x, delete_mixed_doc + off, n,
						  NULL),
				0);
		}
		assert_int_equal(smux__s3_xml_finish(x, NULL), 0);
		check_delete_mixed(smux__s3_xml_result(x));
		smux__s3_xml_free(x);
	}

	/* Quiet, all deleted: nothing to say */
	x = parse_ok(SMUX_S3_DOC_DELETE, "<DeleteResult " NS "/>");
	r = smux__s3_xml_result(x);
	assert_false(r->is_error);
	assert_int_equal(r->ndeleted, 0);
	assert_int_equal(r->ndelete_errors, 0);
	smux__s3_xml_free(x);

	/* the request failed as a whole */
	x = parse_ok(SMUX_S3_DOC_DELETE, "<Error><Code>InternalError</Code>"
					 "<Message>m</Message></Error>");
	r = smux__s3_xml_result(x);
	assert_true(r->is_error);
	assert_string_equal(r->code, "InternalError");
	assert_int_equal(r->ndelete_errors, 0);
	smux__s3_xml_free(x);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct smux_error err = {0};

		x = (struct smux_s3_xml *)1;
		assert_int_equal(smux__s3_xml_parse(SMUX_S3_DOC_DELETE, bad[i],
						    strlen(bad[i]), &x, &err),
				 -EIO);
		assert_null(x);
		assert_int_equal(err.e.code, SMUX_E_BAD_RESPONSE);
	}
}

static int parse_rc(enum smux_s3_doc kind, const void *doc, size_t len)
{
	struct smux_s3_xml *x;
	struct smux_error err = {0};
	int rc = smux__s3_xml_parse(kind, doc, len, &x, &err);
	if (rc) {
		assert_null(x);
		assert_true(err.e.code == SMUX_E_BAD_RESPONSE ||
			    err.e.code == SMUX_E_NO_MEMORY);
	}
	smux__s3_xml_free(x);
	return rc;
}

static void test_refused(void **state)
{
	static const struct {
		enum smux_s3_doc kind;
		const char *doc;
	} bad[] = {
		{SMUX_S3_DOC_LIST, ""},
		{SMUX_S3_DOC_LIST, "   "},
		{SMUX_S3_DOC_LIST, "<html><body>502 Bad Gateway</body></html>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult></ListBucketResul>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult/><x/>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult><Contents><Size>1</Size>"
				   "</Contents></ListBucketResult>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult><Contents><Key>a</Key>"
				   "<Size>-1</Size></Contents>"
				   "</ListBucketResult>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult><Contents><Key>a</Key>"
				   "<Size>99999999999999999999999</Size>"
				   "</Contents></ListBucketResult>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult><Contents><Key>a</Key>"
				   "<LastModified>yesterday</LastModified>"
				   "</Contents></ListBucketResult>"},
		{SMUX_S3_DOC_LIST,
		 "<ListBucketResult><IsTruncated>true</IsTruncated>"
		 "</ListBucketResult>"},
		{SMUX_S3_DOC_LIST,
		 "<ListBucketResult><IsTruncated>maybe</IsTruncated>"
		 "</ListBucketResult>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult><EncodingType>url"
				   "</EncodingType><Contents><Key>a%zz</Key>"
				   "</Contents></ListBucketResult>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult><EncodingType>url"
				   "</EncodingType><Contents><Key>a%00b</Key>"
				   "</Contents></ListBucketResult>"},
		{SMUX_S3_DOC_LIST, "<ListBucketResult><EncodingType>url"
				   "</EncodingType><Contents><Key>a%4</Key>"
				   "</Contents></ListBucketResult>"},
		{SMUX_S3_DOC_INITIATE, "<InitiateMultipartUploadResult>"
				       "</InitiateMultipartUploadResult>"},
		{SMUX_S3_DOC_COMPLETE, "<CompleteMultipartUploadResult>"
				       "</CompleteMultipartUploadResult>"},
		{SMUX_S3_DOC_ERROR,
		 "<Error><Message>no code</Message></Error>"},
		{SMUX_S3_DOC_ERROR, "<ListBucketResult/>"},
		{SMUX_S3_DOC_DELETE, "<DeleteResult><Error><Code>X</Code>"
				     "</Error></DeleteResult>"},
		{SMUX_S3_DOC_COPY, "<Copy><ETag>x</ETag></Copy>"},
		/* a DTD, the billion laughs, an external entity */
		{SMUX_S3_DOC_ERROR,
		 "<!DOCTYPE Error [<!ENTITY a \"aaaaaaaaaa\">"
		 "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]>"
		 "<Error><Code>&b;</Code></Error>"},
		{SMUX_S3_DOC_ERROR,
		 "<!DOCTYPE Error SYSTEM \"file:///etc/passwd\">"
		 "<Error><Code>x</Code></Error>"},
		{SMUX_S3_DOC_ERROR, "<Error><Code>&undefined;</Code></Error>"},
		{SMUX_S3_DOC_LIST, "\xff\xfe<\0L\0"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse_rc(bad[i].kind, bad[i].doc, strlen(bad[i].doc)) !=
		    -EIO)
			fail_msg("accepted bad document %zu: %s", i,
				 bad[i].doc);
	}
	/* too deep */
	char deep[1024];
	int off = snprintf(deep, sizeof(deep), "<ListBucketResult>");
	for (int i = 0; i < 20; i++)
		off += snprintf(deep + off, sizeof(deep) - (size_t)off, "<a>");
	assert_int_equal(parse_rc(SMUX_S3_DOC_LIST, deep, strlen(deep)), -EIO);
}

/* A field over the text bound, too many entries, a document over the
 * size bound. */
static void test_bounds(void **state)
{
	size_t big = SMUX_S3_XML_TEXT_MAX + 100;
	char *doc = malloc(big + 200);
	assert_non_null(doc);
	int n = snprintf(doc, big + 200, "<ListBucketResult><Contents><Key>");
	memset(doc + n, 'k', big);
	snprintf(doc + n + big, 200, "</Key></Contents></ListBucketResult>");
	assert_int_equal(parse_rc(SMUX_S3_DOC_LIST, doc, strlen(doc)), -EIO);
	free(doc);

	struct smux_s3_xml *x = smux__s3_xml_new(SMUX_S3_DOC_LIST);
	const char *item = "<Contents><Key>k</Key><Size>1</Size></Contents>";
	int rc = smux__s3_xml_feed(x, "<ListBucketResult>", 18, NULL);
	for (int i = 0; !rc && i <= SMUX_S3_XML_ITEMS_MAX; i++)
		rc = smux__s3_xml_feed(x, item, strlen(item), NULL);
	assert_int_equal(rc, -EIO);
	/* and it stays failed */
	assert_int_equal(smux__s3_xml_finish(x, NULL), -EIO);
	smux__s3_xml_free(x);

	/* 33 MiB of comments: over the document bound */
	size_t chunk = 1 << 20;
	char *c = malloc(chunk);
	assert_non_null(c);
	/* one comment per chunk (no "--" inside) */
	memset(c, 'x', chunk);
	c[0] = '<', c[1] = '!', c[2] = '-', c[3] = '-';
	c[chunk - 3] = '-', c[chunk - 2] = '-', c[chunk - 1] = '>';
	x = smux__s3_xml_new(SMUX_S3_DOC_LIST);
	rc = smux__s3_xml_feed(x, "<ListBucketResult>", 18, NULL);
	int i = 0;
	for (; !rc && i < 40; i++)
		rc = smux__s3_xml_feed(x, c, chunk, NULL);
	assert_int_equal(rc, -EIO);
	assert_true(i >= 31);
	smux__s3_xml_free(x);
	free(c);
}

/* xorshift: reproducible garbage */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Every truncation of every sample, random bytes, and random mutations:
 * each parse ends in 0 or -EIO, never a crash or a leak (ASan). */
static void test_garbage(void **state)
{
	static const struct {
		enum smux_s3_doc kind;
		const char *doc;
	} samples[] = {
		{SMUX_S3_DOC_LIST, list_doc},
		{SMUX_S3_DOC_ERROR, error_doc},
		{SMUX_S3_DOC_INITIATE, initiate_doc},
		{SMUX_S3_DOC_COMPLETE, complete_doc},
		{SMUX_S3_DOC_COPY, copy_doc},
		{SMUX_S3_DOC_DELETE, delete_doc},
		{SMUX_S3_DOC_DELETE, delete_mixed_doc},
	};
	size_t docs = 0;
	for (size_t s = 0; s < sizeof(samples) / sizeof(samples[0]); s++) {
		size_t len = strlen(samples[s].doc);
		for (size_t cut = 0; cut < len; cut++, docs++)
			assert_int_equal(
				parse_rc(samples[s].kind, samples[s].doc, cut),
				-EIO);
		assert_int_equal(parse_rc(samples[s].kind, samples[s].doc, len),
				 0);
	}
	char buf[2048];
	for (int i = 0; i < 300; i++, docs++) {
		size_t len = next_rand() % sizeof(buf);
		for (size_t k = 0; k < len; k++)
			buf[k] = (char)next_rand();
		assert_int_equal(parse_rc(SMUX_S3_DOC_LIST, buf, len), -EIO);
	}
	static const char alphabet[] = "<>/&;\"' =%+\x01\xff\xc3\xa9!?[]-";
	for (int i = 0; i < 600; i++, docs++) {
		size_t s = next_rand() % (sizeof(samples) / sizeof(samples[0]));
		size_t len = strlen(samples[s].doc);
		memcpy(buf, samples[s].doc, len);
		int muts = 1 + (int)(next_rand() % 4);
		for (int m = 0; m < muts; m++)
			buf[next_rand() % len] =
				alphabet[next_rand() % (sizeof(alphabet) - 1)];
		int rc = parse_rc(samples[s].kind, buf, len);
		assert_true(rc == 0 || rc == -EIO);
	}
	print_message("garbage: %zu documents refused or parsed\n", docs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_list_raw_last_page),
		cmocka_unit_test(test_list_blank_keys),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_error_doc),
		cmocka_unit_test(test_error_mapping),
		cmocka_unit_test(test_multipart_copy_delete),
		cmocka_unit_test(test_delete_result),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_garbage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
