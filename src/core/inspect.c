/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt inspect: every record of an image, readable. Metadata records are
 * decoded with their kind's protobuf descriptor and printed field by field
 * (text or JSON); raw page records are summarised. The JSON is versioned
 * (INSPECT_SCHEMA_VERSION, documented field by field in docs/IMAGE.md):
 * a change that removes or changes the meaning of a field bumps it; new
 * fields and new record types do not.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "util/cleanup.h"

#define INSPECT_SCHEMA "ckpt-inspect"
#define INSPECT_SCHEMA_VERSION 1
#define BYTES_SHOWN 64 /* of a bytes field, in hex */

struct out {
	FILE *f;
	bool json;
};

static void print_msg(struct out *o, const ProtobufCMessage *m, int depth);

static void indent(struct out *o, int depth)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", o->f);
}

static void print_string(struct out *o, const char *s)
{
	fputc('"', o->f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(o->f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(o->f, "\\u%04x", c);
		else
			fputc(c, o->f);
	}
	fputc('"', o->f);
}

/* A byte string that reads as text: a path or socket name (an abstract
 * unix name starts with a NUL, shown as @). */
static bool is_text(const ProtobufCBinaryData *b)
{
	size_t start = b->len > 1 && b->data[0] == 0;
	if (b->len <= start)
		return false;
	for (size_t i = start; i < b->len; i++)
		if (b->data[i] < 0x20 || b->data[i] >= 0x7f)
			return i == b->len - 1 && b->data[i] == 0 && i > start;
	return true;
}

static void print_text(struct out *o, const ProtobufCBinaryData *b)
{
	size_t start = b->data[0] == 0, end = b->len - (b->data[b->len - 1] == 0 && b->len > 1);
	char *s = strndup((const char *)b->data + start, end > start ? end - start : 0);
	if (start)
		fputc('@', o->f);
	print_string(o, s ? s : "");
	free(s);
}

static void print_value(struct out *o, const ProtobufCFieldDescriptor *fd, const void *p,
			int depth)
{
	switch (fd->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		fprintf(o->f, "%" PRId32, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		fprintf(o->f, "%" PRIu32, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		fprintf(o->f, "%" PRId64, *(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		fprintf(o->f, "%" PRIu64, *(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		fprintf(o->f, "%g", *(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		fprintf(o->f, "%g", *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		fputs(*(const protobuf_c_boolean *)p ? "true" : "false", o->f);
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(fd->descriptor, *(const int *)p);
		if (ev)
			print_string(o, ev->name);
		else
			fprintf(o->f, "%d", *(const int *)p);
		break;
	}
	case PROTOBUF_C_TYPE_STRING:
		print_string(o, *(const char *const *)p ? *(const char *const *)p : "");
		break;
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		if (!o->json && is_text(b)) {
			print_text(o, b);
			break;
		}
		/* JSON: {"length": N, "hex": the first 64 bytes[, "text": ...]} */
		if (o->json)
			fprintf(o->f, "{\"length\": %zu, \"hex\": ", b->len);
		fputc('"', o->f);
		for (size_t i = 0; i < b->len && i < BYTES_SHOWN; i++)
			fprintf(o->f, "%02x", b->data[i]);
		if (b->len > BYTES_SHOWN && !o->json)
			fprintf(o->f, "...(%zu bytes)", b->len);
		fputc('"', o->f);
		if (o->json && is_text(b)) {
			fputs(", \"text\": ", o->f);
			print_text(o, b);
		}
		if (o->json)
			fputc('}', o->f);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		print_msg(o, *(const ProtobufCMessage *const *)p, depth);
		break;
	}
}

static size_t elem_size(const ProtobufCFieldDescriptor *fd)
{
	switch (fd->type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	default:
		return 4;
	}
}

static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
	const char *base = (const char *)m;
	if (fd->label == PROTOBUF_C_LABEL_REQUIRED)
		return true;
	if (fd->label == PROTOBUF_C_LABEL_REPEATED)
		return *(const size_t *)(base + fd->quantifier_offset) > 0;
	if (fd->type == PROTOBUF_C_TYPE_MESSAGE || fd->type == PROTOBUF_C_TYPE_STRING)
		return *(const void *const *)(base + fd->offset) != NULL;
	return *(const protobuf_c_boolean *)(base + fd->quantifier_offset);
}

static void print_msg(struct out *o, const ProtobufCMessage *m, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char *base = (const char *)m;
	bool first = true;

	fputs(o->json ? "{" : "{\n", o->f);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[i];
		if (!field_present(m, fd))
			continue;
		if (o->json) {
			fprintf(o->f, "%s\"%s\": ", first ? "" : ", ", fd->name);
		} else {
			indent(o, depth + 1);
			fprintf(o->f, "%s: ", fd->name);
		}
		first = false;
		if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + fd->quantifier_offset);
			const char *arr = *(const char *const *)(base + fd->offset);
			fputc('[', o->f);
			for (size_t j = 0; j < n; j++) {
				if (j)
					fputs(", ", o->f);
				if (!o->json && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
					fputc('\n', o->f);
					indent(o, depth + 2);
				}
				print_value(o, fd, arr + j * elem_size(fd), depth + 2);
			}
			fputc(']', o->f);
		} else {
			print_value(o, fd, base + fd->offset, depth + 1);
		}
		if (!o->json)
			fputc('\n', o->f);
	}
	if (!o->json)
		indent(o, depth);
	fputc('}', o->f);
}

const ProtobufCMessageDescriptor *inspect_descriptor_of(uint32_t type)
{
	if (type == REC_CORE_TREE)
		return &tree_entry__descriptor;
	if (type == REC_CORE_TASK)
		return &task_begin__descriptor;
	const struct kind_info *ki = kind_by_rec(type, NULL);
	if (ki && ki->ops->descriptor)
		return ki->ops->descriptor(REC_SUB(type));
	return NULL;
}

static void print_header(struct out *o, const struct img_header *h)
{
	if (o->json)
		fprintf(o->f,
			"{\"schema\": \"%s\", \"schema_version\": %d,\n \"header\": {\"version\": %u, "
			"\"arch\": %u, \"page_size\": %u, \"xfeatures\": %" PRIu64 ", "
			"\"xsave_size\": %u, \"kernel\": ",
			INSPECT_SCHEMA, INSPECT_SCHEMA_VERSION, h->version, h->arch, h->page_size,
			h->xfeatures, h->xsave_size);
	else
		fprintf(o->f,
			"header: version %u, arch %u, page size %u, xfeatures %#" PRIx64
			", xsave %u bytes, kernel ",
			h->version, h->arch, h->page_size, h->xfeatures, h->xsave_size);
	char rel[66];
	snprintf(rel, sizeof(rel), "%.65s", h->kernel_release);
	print_string(o, rel);
	fputs(o->json ? ", \"created_ns\": " : ", created ", o->f);
	fprintf(o->f, "%" PRIu64, h->created_ns);
	fputs(o->json ? "},\n \"records\": [\n" : "\n", o->f);
}

static int print_record(struct out *o, const struct img_record *rec, bool first)
{
	char name[48];
	const ProtobufCMessageDescriptor *d = inspect_descriptor_of(rec->type);

	rec_type_name(rec->type, name, sizeof(name));
	if (o->json)
		fprintf(o->f, "%s  {\"index\": %u, \"offset\": %" PRIu64 ", \"type\": \"%s\", "
			      "\"type_id\": %" PRIu32 ", \"length\": %" PRIu64,
			first ? "" : ",\n", rec->index, rec->offset, name, rec->type, rec->len);
	else
		fprintf(o->f, "record %u at %" PRIu64 ": %s, %" PRIu64 " bytes", rec->index,
			rec->offset, name, rec->len);
	if (d) {
		ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, rec->len, rec->data);
		if (!m) {
			fputs(o->json ? "}\n" : "\n", o->f);
			return -EBADMSG;
		}
		if (o->json)
			fprintf(o->f, ", \"message\": \"%s\"", d->name);
		fputs(o->json ? ", \"data\": " : " ", o->f);
		print_msg(o, m, 0);
		protobuf_c_message_free_unpacked(m, NULL);
	} else if (!o->json && rec->type == IMG_REC_INDEX &&
		   rec->len >= sizeof(struct img_index_foot)) {
		struct img_index_foot foot;
		char of[48];
		memcpy(&foot, rec->data + rec->len - sizeof(foot), sizeof(foot));
		fprintf(o->f, " (raw data: %" PRIu64 " records of %s)", foot.n,
			rec_type_name(foot.type, of, sizeof(of)));
	} else {
		fputs(o->json ? ", \"raw\": true" : " (raw data)", o->f);
	}
	fputs(o->json ? "}" : "\n", o->f);
	return 0;
}

int ckpt_inspect(int fd, int out_fd, int json, char *errbuf, size_t errbuf_len)
{
	return ckpt_inspect_key(fd, out_fd, json, NULL, 0, errbuf, errbuf_len);
}

int ckpt_inspect_key(int fd, int out_fd, int json, const void *key, size_t key_len, char *errbuf,
		     size_t errbuf_len)
{
	struct img_reader r = { 0 };
	struct img_error err = { 0 };
	struct img_record rec;
	struct out o = { .json = json != 0 };
	int ret, dupfd = dup(out_fd);

	if (errbuf && errbuf_len)
		errbuf[0] = '\0';
	if (dupfd < 0 || !(o.f = fdopen(dupfd, "w"))) {
		if (dupfd >= 0)
			close(dupfd);
		return -errno;
	}
	ret = img_reader_open_key(&r, fd, key, key_len, &err);
	if (ret == 0)
		ret = img_reader_validate(&r, &err);
	if (ret == 0) {
		print_header(&o, &r.hdr);
		bool first = true;
		while ((ret = img_reader_next(&r, &rec, &err)) == 0) {
			if (print_record(&o, &rec, first) < 0) {
				char name[48];
				snprintf(err.reason, sizeof(err.reason), "cannot decode %s",
					 rec_type_name(rec.type, name, sizeof(name)));
				err.index = rec.index;
				err.offset = rec.offset;
				err.type = rec.type;
				ret = -EBADMSG;
				break;
			}
			first = false;
		}
		if (ret == -ENODATA) {
			ret = 0;
			if (o.json)
				fputs("\n]}\n", o.f);
		}
	}
	if (ret < 0 && errbuf && errbuf_len) {
		char name[48];
		if (err.index < 0)
			snprintf(errbuf, errbuf_len, "image header: %s", err.reason);
		else
			snprintf(errbuf, errbuf_len, "image record %lld (%s) at offset %llu: %s",
				 (long long)err.index, rec_type_name(err.type, name, sizeof(name)),
				 (unsigned long long)err.offset, err.reason);
	}
	fclose(o.f);
	img_reader_close(&r);
	return ret;
}
