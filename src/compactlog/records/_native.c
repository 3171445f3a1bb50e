/*
 * Compiled record kernels: the per-record loops of the record format, out of the interpreter.
 *
 * Same contract, results and error texts as the Python twin in _py.py (the readable statement of the
 * record layout); the test suite pins the two together. Everything here works on buffers (bytes,
 * bytearray, memoryview slices, mmap) without copying them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The crc32 instruction's 64-bit form exists on x86-64 only; elsewhere the table code serves. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_X86_CRC 1
#endif

/* Little-endian 64-bit load from any address: the record format and CRC tables are byte-order fixed. */
static inline uint64_t load_le64(const uint8_t *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
#else
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#endif
}

static inline uint32_t load_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Below this many bytes a kernel keeps the GIL: releasing it costs more than the work, and a thread
 * that gives the GIL away for a microsecond may wait a whole switch interval to get it back. */
#define GIL_RELEASE_MIN_SCAN 4096
#define GIL_RELEASE_MIN_CRC 65536

/* NCOLS, the C_* column numbers, POSITION_COLUMNS_INIT and SLOT: written by setup.py from layout.py */
#include "_layout.h"
#include "_decompress.h"

/* The RecordBatch v2 header fields the batch kernels read (records/batch.py's HEADER_FIELDS is the table;
 * the module reports these as BATCH_HEADER so a test holds them to it). */
#define B_BASE_OFFSET 0
#define B_LENGTH 8
#define B_MAGIC 16
#define B_CRC 17
#define B_ATTRIBUTES 21
#define B_HEADER_SIZE 61

static uint32_t crc32c_of(const uint8_t *p, size_t n); /* CRC-32C, below */

/* Classes defined once in results.py, which the module imports when it loads: the named results and
 * KernelError, the ValueError for records that do not parse (with the section scan_many was in). */
static PyObject *KernelError, *RecordsSummary, *BinaryColumn, *MapPut, *DecodedColumns;

/* Raise KernelError(reason) or, with section >= 0, KernelError(reason, section); steals reason. */
static PyObject *raise_kernel_error(PyObject *reason, Py_ssize_t section) {
    if (!reason) return NULL;
    PyObject *exc = section < 0 ? PyObject_CallOneArg(KernelError, reason)
                                : PyObject_CallFunction(KernelError, "On", reason, section);
    Py_DECREF(reason);
    if (exc) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* A named result: a new instance of the NamedTuple class `type` holding the n items (stolen; a NULL
 * item, from a failed allocation, fails the whole). Built in place, as tuple.__new__ would build it. */
static PyObject *named(PyObject *type, Py_ssize_t n, PyObject *const *items) {
    PyObject *res = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!items[i]) goto done;
    res = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    if (res) {
        for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(res, i, items[i]);
        return res;
    }
done:
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(items[i]);
    return res;
}

/* ------------------------------------------------------------------------------------------------
 * Errors are recorded without the GIL and turned into KernelError afterwards, with the twin's words.
 */
enum {
    E_NONE, E_VARINT_EOF, E_VARINT_LONG, E_EXPECTED_RECORDS, E_RECORD_LEN, E_RECORD_PAST_BATCH,
    E_FIELD_LEN, E_FIELD_PAST_RECORD, E_HEADER_COUNT, E_LEN_MISMATCH, E_REMAINING
};

typedef struct {
    int code;
    long long a, b;
    const char *what;
} scan_err;

static PyObject *scan_error_text(const scan_err *e) {
    switch (e->code) {
    case E_VARINT_EOF: return PyUnicode_FromString("premature EOF while reading a varint");
    case E_VARINT_LONG: return PyUnicode_FromFormat("varint is longer than %lld bytes", e->a);
    case E_EXPECTED_RECORDS: return PyUnicode_FromFormat("premature EOF: expected %lld records, found %lld", e->a, e->b);
    case E_RECORD_LEN: return PyUnicode_FromFormat("invalid record length %lld", e->a);
    case E_RECORD_PAST_BATCH: return PyUnicode_FromFormat("premature EOF: record of %lld bytes runs past the batch", e->a);
    case E_FIELD_LEN: return PyUnicode_FromFormat("invalid %s length %lld", e->what, e->a);
    case E_FIELD_PAST_RECORD:
        return PyUnicode_FromFormat("premature EOF: %s of %lld bytes runs past the record", e->what, e->a);
    case E_HEADER_COUNT: return PyUnicode_FromFormat("invalid header count %lld", e->a);
    case E_LEN_MISMATCH:
        return PyUnicode_FromFormat("record length %lld does not match its %lld bytes of content", e->a, e->b);
    case E_REMAINING: return PyUnicode_FromFormat("%lld bytes still remaining after %lld records", e->a, e->b);
    default: return PyUnicode_FromString("malformed records");
    }
}

static PyObject *raise_scan_error(const scan_err *e) {
    return raise_kernel_error(scan_error_text(e), -1);
}

/* Zigzag varint reader; returns the new position or -1 with err set. */
static inline Py_ssize_t read_varint(const uint8_t *d, Py_ssize_t pos, Py_ssize_t end, int max_bytes,
                                     int64_t *out, scan_err *err) {
    uint64_t z = 0;
    int shift = 0;
    for (int i = 1;; i++) {
        if (pos >= end) {
            err->code = E_VARINT_EOF;
            return -1;
        }
        uint8_t b = d[pos++];
        if (shift < 64) z |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) break;
        if (i >= max_bytes) {
            err->code = E_VARINT_LONG;
            err->a = max_bytes;
            return -1;
        }
        shift += 7;
    }
    *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return pos;
}

/* A length-prefixed bytes field; sets *fpos and *flen (-1 = null). */
static inline Py_ssize_t read_field(const uint8_t *d, Py_ssize_t pos, Py_ssize_t end, const char *what, int nullable,
                                    int64_t *fpos, int64_t *flen, scan_err *err) {
    int64_t len;
    pos = read_varint(d, pos, end, 5, &len, err);
    if (pos < 0) return -1;
    if (len < 0) {
        if (len == -1 && nullable) {
            *fpos = pos;
            *flen = -1;
            return pos;
        }
        err->code = E_FIELD_LEN;
        err->what = what;
        err->a = len;
        return -1;
    }
    if (pos + len > end) {
        err->code = E_FIELD_PAST_RECORD;
        err->what = what;
        err->a = len;
        return -1;
    }
    *fpos = pos;
    *flen = len;
    return pos + len;
}

/* Does s[0..n) hold ASCII only? Loads overlap rather than loop over a short key's last bytes. */
static inline int ascii_only(const uint8_t *s, Py_ssize_t n) {
    if (n >= 8) {
        uint64_t acc = load_le64(s + n - 8);
        for (Py_ssize_t i = 0; i + 8 <= n; i += 8) acc |= load_le64(s + i);
        return !(acc & 0x8080808080808080ULL);
    }
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        return !((a | b) & 0x80808080u);
    }
    uint8_t acc = 0;
    for (Py_ssize_t i = 0; i < n; i++) acc |= s[i];
    return !(acc & 0x80);
}

/* Is s[0..n) strict UTF-8 (what Python's "utf-8" codec accepts: no surrogates, no overlong forms, nothing
 * above U+10FFFF)? Header keys are mostly ASCII, which is checked a word at a time. */
static inline int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    if (ascii_only(s, n)) return 1;
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (n - i < 3) return 0;
            uint8_t c1 = s[i + 1];
            uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF; /* overlongs; surrogates */
            if (c1 < lo || c1 > hi || (s[i + 2] & 0xC0) != 0x80) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (n - i < 4) return 0;
            uint8_t c1 = s[i + 1];
            uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF; /* overlongs; above U+10FFFF */
            if (c1 < lo || c1 > hi || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Validate one record at pos; fills row[NCOLS]; returns the record's end or -1. With bad_key, also sets
 * *bad_key when a header key is not strict UTF-8: append validation's check, in the same pass. */
static inline Py_ssize_t scan_record(const uint8_t *d, Py_ssize_t total, Py_ssize_t pos, int64_t *row, scan_err *err,
                                     int *bad_key) {
    Py_ssize_t start = pos;
    int64_t length, v, hcount, key_pos, key_len, ignore_pos, ignore_len;
    pos = read_varint(d, pos, total, 5, &length, err);
    if (pos < 0) return -1;
    if (length <= 0) {
        err->code = E_RECORD_LEN;
        err->a = length;
        return -1;
    }
    Py_ssize_t end = pos + length;
    if (end > total) {
        err->code = E_RECORD_PAST_BATCH;
        err->a = length;
        return -1;
    }
    pos += 1; /* attributes */
    if ((pos = read_varint(d, pos, end, 10, &v, err)) < 0) return -1;
    row[C_TS_DELTA] = v;
    if ((pos = read_varint(d, pos, end, 5, &v, err)) < 0) return -1;
    row[C_OFFSET_DELTA] = v;
    if ((pos = read_field(d, pos, end, "key", 1, &row[C_KEY_POS], &row[C_KEY_LEN], err)) < 0) return -1;
    if ((pos = read_field(d, pos, end, "value", 1, &row[C_VAL_POS], &row[C_VAL_LEN], err)) < 0) return -1;
    if ((pos = read_varint(d, pos, end, 5, &hcount, err)) < 0) return -1;
    if (hcount < 0) {
        err->code = E_HEADER_COUNT;
        err->a = hcount;
        return -1;
    }
    row[C_HDR_POS] = pos;
    row[C_HDR_COUNT] = hcount;
    for (int64_t h = 0; h < hcount; h++) {
        if ((pos = read_field(d, pos, end, "header key", 0, &key_pos, &key_len, err)) < 0) return -1;
        if (bad_key && !utf8_valid(d + key_pos, (Py_ssize_t)key_len)) *bad_key = 1;
        if ((pos = read_field(d, pos, end, "header value", 1, &ignore_pos, &ignore_len, err)) < 0) return -1;
    }
    if (pos != end) {
        err->code = E_LEN_MISMATCH;
        err->a = length;
        err->b = (long long)(pos - (end - length));
        return -1;
    }
    row[C_POS] = start;
    row[C_END] = end;
    return end;
}

static Py_ssize_t scan_one(const uint8_t *d, Py_ssize_t total, Py_ssize_t pos, int64_t *row, scan_err *err) {
    return scan_record(d, total, pos, row, err, NULL);
}

static Py_ssize_t scan_all(const uint8_t *d, Py_ssize_t total, Py_ssize_t count, int64_t *out, scan_err *err) {
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (pos >= total) {
            err->code = E_EXPECTED_RECORDS;
            err->a = count;
            err->b = i;
            return -1;
        }
        pos = scan_one(d, total, pos, out + i * NCOLS, err);
        if (pos < 0) return -1;
    }
    if (pos != total) {
        err->code = E_REMAINING;
        err->a = total - pos;
        err->b = count;
        return -1;
    }
    return pos;
}

/* True when a buffer holds native int64 items (numpy int64 says "l", array('q') says "q"). */
static int is_int64(const Py_buffer *v) {
    if (v->itemsize != 8) return 0;
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=') f++;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    else if (*f == '>' || *f == '!') f++;
#else
    else if (*f == '<') f++;
#endif
    return (f[0] == 'q' || (f[0] == 'l' && sizeof(long) == 8)) && f[1] == 0;
}

/* An int64 array we read (or write) as a flat C array; anything else is refused, not misread. */
static int get_int64_buffer(PyObject *obj, Py_buffer *v, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    if (!is_int64(v)) {
        PyBuffer_Release(v);
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous int64 array", what);
        return -1;
    }
    return 0;
}

/* The column table scan_records writes: (>= count, NCOLS) int64, the twin's words when it is not. */
static int get_out_table(PyObject *obj, Py_buffer *v, Py_ssize_t count) {
    if (PyObject_GetBuffer(obj, v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) return -1;
    if (!is_int64(v) || v->ndim != 2 || v->shape[1] != NCOLS || v->shape[0] < count) {
        PyBuffer_Release(v);
        PyErr_Format(PyExc_ValueError, "out must be a writable int64 array of at least %zd rows of %d columns", count,
                     NCOLS);
        return -1;
    }
    return 0;
}

static PyObject *bad_count(Py_ssize_t count) {
    return raise_kernel_error(PyUnicode_FromFormat("invalid record count %zd", count), -1);
}

/* scan_records(data, count, out) -> bytes read */
static PyObject *scan_records(PyObject *self, PyObject *args) {
    PyObject *data_obj, *out_obj;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "OnO", &data_obj, &count, &out_obj)) return NULL;
    if (count < 0) return bad_count(count);
    Py_buffer data, out;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) return NULL;
    if (get_out_table(out_obj, &out, count) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    scan_err err = {0};
    Py_ssize_t res;
    if (data.len >= GIL_RELEASE_MIN_SCAN) {
        Py_BEGIN_ALLOW_THREADS
        res = scan_all((const uint8_t *)data.buf, data.len, count, (int64_t *)out.buf, &err);
        Py_END_ALLOW_THREADS
    } else {
        res = scan_all((const uint8_t *)data.buf, data.len, count, (int64_t *)out.buf, &err);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (res < 0) return raise_scan_error(&err);
    return PyLong_FromSsize_t(res);
}

/* scan_many(data, starts, ends, counts, out) -> total rows
 * Scans several record sections of one buffer (section i = data[starts[i]:ends[i]] holding counts[i]
 * records) into consecutive rows of out, positions absolute in data. One call per chunk of batches. */
static PyObject *scan_many(PyObject *self, PyObject *args) {
    PyObject *data_obj, *starts_obj, *ends_obj, *counts_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOOO", &data_obj, &starts_obj, &ends_obj, &counts_obj, &out_obj)) return NULL;
    Py_buffer b[5];
    PyObject *objs[5] = {data_obj, starts_obj, ends_obj, counts_obj, out_obj};
    static const char *names[5] = {"data", "starts", "ends", "counts", "out"};
    int got = 0;
    for (; got < 5; got++) {
        int rc = got == 0 ? PyObject_GetBuffer(objs[0], &b[0], PyBUF_SIMPLE)
                          : get_int64_buffer(objs[got], &b[got], got == 4, names[got]);
        if (rc < 0) break;
    }
    if (got == 5 && (b[1].len != b[2].len || b[1].len != b[3].len)) {
        PyErr_SetString(PyExc_ValueError, "starts, ends and counts must have the same length");
    } else if (got == 5 && (b[4].ndim != 2 || b[4].shape[1] != NCOLS)) {
        PyErr_Format(PyExc_ValueError, "out must be a writable int64 array of %d columns", NCOLS);
    } else if (got == 5) {
        goto scan;
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
scan:;
    const uint8_t *d = (const uint8_t *)b[0].buf;
    const int64_t *starts = (const int64_t *)b[1].buf, *ends = (const int64_t *)b[2].buf, *counts = (const int64_t *)b[3].buf;
    Py_ssize_t nsec = b[1].len / 8, cap = b[4].shape[0], row = 0;
    int64_t *out = (int64_t *)b[4].buf;
    scan_err err = {0};
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nsec; i++) {
        if (counts[i] < 0 || counts[i] > cap - row || starts[i] < 0 || starts[i] > ends[i] || ends[i] > b[0].len) {
            bad = i;
            err.code = E_NONE;
            break;
        }
        /* scan the section as its own buffer, then shift positions to be absolute */
        Py_ssize_t pos = scan_all(d + starts[i], (Py_ssize_t)(ends[i] - starts[i]), (Py_ssize_t)counts[i], out + row * NCOLS, &err);
        if (pos < 0) {
            bad = i;
            break;
        }
        static const int shifted[NPOSITION_COLUMNS] = POSITION_COLUMNS_INIT;
        for (int64_t r = 0; r < counts[i]; r++) {
            int64_t *rr = out + (row + r) * NCOLS;
            for (int k = 0; k < NPOSITION_COLUMNS; k++) rr[shifted[k]] += starts[i];
        }
        row += (Py_ssize_t)counts[i];
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 5; i++) PyBuffer_Release(&b[i]);
    if (bad >= 0) {
        if (err.code == E_NONE) return PyErr_Format(PyExc_ValueError, "section %zd does not fit the buffers", bad);
        return raise_kernel_error(scan_error_text(&err), bad); /* the section names the caller's batch */
    }
    return PyLong_FromSsize_t(row);
}

/* ------------------------------------------------------------------------------------------------
 * Taking several buffers at once: every kernel below reads caller arrays as flat C arrays, so each is
 * checked for what it must be (int64, the column table's NCOLS columns, writable) before any is used,
 * and whatever was taken is given back on every path.
 */
enum { B_BYTES, B_BYTES_W, B_I64, B_I64_W, B_COLS };

static void release_buffers(int n, Py_buffer *b) {
    for (int i = 0; i < n; i++) PyBuffer_Release(&b[i]);
}

static int take_buffers(int n, PyObject *const *objs, const int *kinds, const char *const *names, Py_buffer *b) {
    for (int i = 0; i < n; i++) {
        int rc;
        if (kinds[i] == B_BYTES || kinds[i] == B_BYTES_W) {
            rc = PyObject_GetBuffer(objs[i], &b[i], PyBUF_SIMPLE | (kinds[i] == B_BYTES_W ? PyBUF_WRITABLE : 0));
        } else {
            rc = get_int64_buffer(objs[i], &b[i], kinds[i] == B_I64_W, names[i]);
            if (rc == 0 && kinds[i] == B_COLS && (b[i].ndim != 2 || b[i].shape[1] != NCOLS)) {
                PyBuffer_Release(&b[i]);
                PyErr_Format(PyExc_ValueError, "%s must be an int64 array of %d columns", names[i], NCOLS);
                rc = -1;
            }
        }
        if (rc < 0) {
            release_buffers(i, b);
            return -1;
        }
    }
    return 0;
}

/* Does [pos, pos + len) lie inside a buffer of `total` bytes? Column tables come from a scan, but a
 * kernel that trusted them blindly would read out of bounds on a caller's mistake. */
static inline int span_ok(int64_t pos, int64_t len, Py_ssize_t total) {
    return pos >= 0 && len >= 0 && pos <= (int64_t)total && len <= (int64_t)total - pos;
}

static PyObject *row_outside(Py_ssize_t row) {
    return PyErr_Format(PyExc_ValueError, "row %zd lies outside the data", row);
}

/* For kernels taking (data, cols, rows) buffers: checks every chosen row against the columns and the
 * data and returns the bytes those records take, or -1 with an error set. */
static Py_ssize_t chosen_records_bytes(const Py_buffer b[3]) {
    const int64_t *c = (const int64_t *)b[1].buf, *r = (const int64_t *)b[2].buf;
    Py_ssize_t n = b[2].len / 8, total = 0, nrows = b[1].shape[0];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (r[i] < 0 || r[i] >= nrows) {
            PyErr_Format(PyExc_IndexError, "row %lld out of range", (long long)r[i]);
            return -1;
        }
        const int64_t *rr = c + r[i] * NCOLS;
        if (!span_ok(rr[C_POS], rr[C_END] - rr[C_POS], b[0].len)) {
            row_outside((Py_ssize_t)r[i]);
            return -1;
        }
        total += (Py_ssize_t)(rr[C_END] - rr[C_POS]);
    }
    return total;
}

/* gather_records(data, cols, rows) -> bytes: the raw bytes of the given records, concatenated. Valid as a
 * records section when the batch keeps its base offset and base timestamp (deltas unchanged). */
static PyObject *gather_records(PyObject *self, PyObject *args) {
    PyObject *objs[3];
    if (!PyArg_ParseTuple(args, "OOO", &objs[0], &objs[1], &objs[2])) return NULL;
    static const int kinds[3] = {B_BYTES, B_COLS, B_I64};
    static const char *const names[3] = {"data", "cols", "rows"};
    Py_buffer b[3];
    if (take_buffers(3, objs, kinds, names, b) < 0) return NULL;
    const int64_t *c = (const int64_t *)b[1].buf, *r = (const int64_t *)b[2].buf;
    Py_ssize_t n = b[2].len / 8, total = chosen_records_bytes(b);
    PyObject *out = NULL;
    if (total < 0) goto done;
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out) {
        char *o = PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++) {
            const int64_t *rr = c + r[i] * NCOLS;
            memcpy(o, (const char *)b[0].buf + rr[C_POS], (size_t)(rr[C_END] - rr[C_POS]));
            o += rr[C_END] - rr[C_POS];
        }
    }
done:
    release_buffers(3, b);
    return out;
}

/* gather_column(data, cols, pos_col, len_col) -> (offsets, values, validity, null_count)
 * One binary column (keys or values) in Arrow's layout: int32 offsets (n + 1), contiguous values, and a
 * validity bitmap (None when nothing is null). Lets readers build Arrow arrays without a Python loop. */
static PyObject *gather_column(PyObject *self, PyObject *args) {
    PyObject *objs[2];
    int pos_col, len_col;
    if (!PyArg_ParseTuple(args, "OOii", &objs[0], &objs[1], &pos_col, &len_col)) return NULL;
    if (pos_col < 0 || pos_col >= NCOLS || len_col < 0 || len_col >= NCOLS)
        return PyErr_Format(PyExc_ValueError, "bad column numbers");
    static const int kinds[2] = {B_BYTES, B_COLS};
    static const char *const names[2] = {"data", "cols"};
    Py_buffer b[2];
    if (take_buffers(2, objs, kinds, names, b) < 0) return NULL;
    const int64_t *c = (const int64_t *)b[1].buf;
    Py_ssize_t n = b[1].shape[0], total = 0, nulls = 0;
    PyObject *offsets = NULL, *values = NULL, *validity = NULL, *res = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t l = c[i * NCOLS + len_col];
        if (l < 0) {
            nulls++;
        } else if (!span_ok(c[i * NCOLS + pos_col], l, b[0].len)) {
            row_outside(i);
            goto done;
        } else {
            total += (Py_ssize_t)l;
        }
    }
    if (total > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "column of %zd bytes does not fit int32 offsets", total);
        goto done;
    }
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
    values = PyBytes_FromStringAndSize(NULL, total);
    validity = nulls ? PyBytes_FromStringAndSize(NULL, (n + 7) / 8) : (Py_INCREF(Py_None), Py_None);
    if (!offsets || !values || !validity) goto done;
    int32_t *o = (int32_t *)PyBytes_AS_STRING(offsets);
    char *v = PyBytes_AS_STRING(values);
    uint8_t *bits = nulls ? (uint8_t *)PyBytes_AS_STRING(validity) : NULL;
    if (bits) memset(bits, 0, (size_t)(n + 7) / 8);
    int32_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        o[i] = at;
        int64_t l = c[i * NCOLS + len_col];
        if (l >= 0) {
            memcpy(v + at, (const char *)b[0].buf + c[i * NCOLS + pos_col], (size_t)l);
            at += (int32_t)l;
            if (bits) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
        }
    }
    o[n] = at;
    PyObject *items[4] = {offsets, values, validity, PyLong_FromSsize_t(nulls)};
    offsets = values = validity = NULL; /* now the result's, or freed with it */
    res = named(BinaryColumn, 4, items);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(values);
    Py_XDECREF(validity);
    release_buffers(2, b);
    return res;
}

/* summarize_records(data, count)
 *   -> (null_keys, min_ts_delta, max_ts_delta, sequential_offsets, records_with_a_non_utf8_header_key) */
static PyObject *summarize_records(PyObject *self, PyObject *args) {
    PyObject *data_obj;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "On", &data_obj, &count)) return NULL;
    if (count < 0) return bad_count(count);
    Py_buffer data;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *d = (const uint8_t *)data.buf;
    Py_ssize_t total = data.len, pos = 0;
    scan_err err = {0};
    int64_t row[NCOLS], nulls = 0, lo = 0, hi = 0, bad_keys = 0;
    int sequential = 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (pos >= total) {
            err.code = E_EXPECTED_RECORDS;
            err.a = count;
            err.b = i;
            break;
        }
        int bad_key = 0;
        pos = scan_record(d, total, pos, row, &err, &bad_key);
        if (pos < 0) break;
        bad_keys += bad_key;
        nulls += row[C_KEY_LEN] < 0;
        if (i == 0 || row[C_TS_DELTA] < lo) lo = row[C_TS_DELTA];
        if (i == 0 || row[C_TS_DELTA] > hi) hi = row[C_TS_DELTA];
        sequential &= row[C_OFFSET_DELTA] == i;
    }
    if (!err.code && pos != total) {
        err.code = E_REMAINING;
        err.a = total - pos;
        err.b = count;
    }
    PyBuffer_Release(&data);
    if (err.code) return raise_scan_error(&err);
    PyObject *items[5] = {PyLong_FromLongLong(nulls), PyLong_FromLongLong(lo), PyLong_FromLongLong(hi),
                          PyBool_FromLong(sequential), PyLong_FromLongLong(bad_keys)};
    return named(RecordsSummary, 5, items);
}

/* ------------------------------------------------------------------------------------------------
 * decode_records: one pass that validates and builds record tuples of the caller's namedtuple type.
 */
static PyObject *bytes_or_none(const uint8_t *d, int64_t pos, int64_t len) {
    if (len < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)d + pos, (Py_ssize_t)len);
}

static PyObject *decode_headers_at(const uint8_t *d, Py_ssize_t end, Py_ssize_t pos, int64_t count) {
    if (count == 0) return PyTuple_New(0);
    PyObject *tup = PyTuple_New((Py_ssize_t)count);
    if (!tup) return NULL;
    scan_err err = {0};
    for (int64_t h = 0; h < count; h++) {
        int64_t kp, kl, vp, vl;
        pos = read_field(d, pos, end, "header key", 0, &kp, &kl, &err);
        if (pos >= 0) pos = read_field(d, pos, end, "header value", 1, &vp, &vl, &err);
        if (pos < 0) {
            Py_DECREF(tup);
            return raise_scan_error(&err);
        }
        /* a key that is not UTF-8 reads with U+FFFD, as Java's new String(bytes, UTF_8) reads it */
        PyObject *k = PyUnicode_DecodeUTF8((const char *)d + kp, (Py_ssize_t)kl, "replace");
        PyObject *v = k ? bytes_or_none(d, vp, vl) : NULL;
        PyObject *pair = (k && v) ? PyTuple_Pack(2, k, v) : NULL;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (!pair) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, (Py_ssize_t)h, pair);
    }
    return tup;
}

/* base + delta as a Python int; exact (through Python ints) when int64 would overflow, as in the twin. */
static PyObject *long_sum(long long base, int64_t delta) {
    long long r;
    if (!__builtin_add_overflow(base, (long long)delta, &r)) return PyLong_FromLongLong(r);
    PyObject *a = PyLong_FromLongLong(base), *b = PyLong_FromLongLong(delta);
    PyObject *sum = (a && b) ? PyNumber_Add(a, b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return sum;
}

/* After record i proved bad in a way the twin only finds once every record has scanned (a timestamp out of
 * range), the twin would have reported a malformed later record first: raise that one if there is one,
 * else the given ValueError. */
static void raise_after_scanning_rest(const uint8_t *d, Py_ssize_t total, Py_ssize_t pos, Py_ssize_t i,
                                      Py_ssize_t count, PyObject *msg) {
    scan_err err = {0};
    int64_t row[NCOLS];
    for (Py_ssize_t j = i + 1; j < count; j++) {
        if (pos >= total) {
            err.code = E_EXPECTED_RECORDS;
            err.a = count;
            err.b = j;
            break;
        }
        if ((pos = scan_one(d, total, pos, row, &err)) < 0) break;
    }
    if (!err.code && pos != total) {
        err.code = E_REMAINING;
        err.a = total - pos;
        err.b = count;
    }
    if (err.code) raise_scan_error(&err);
    else if (msg) raise_kernel_error(Py_NewRef(msg), -1);
}

static PyObject *decode_records(PyObject *self, PyObject *args) {
    PyObject *type_obj, *topic, *data_obj, *override_obj;
    long long partition, ts_type, base_offset, base_ts;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "OOLLOnLLO", &type_obj, &topic, &partition, &ts_type, &data_obj, &count, &base_offset,
                          &base_ts, &override_obj))
        return NULL;
    if (!PyType_Check(type_obj) || !PyType_IsSubtype((PyTypeObject *)type_obj, &PyTuple_Type))
        return PyErr_Format(PyExc_TypeError, "record_type must be a tuple subclass");
    if (count < 0) return bad_count(count);
    PyTypeObject *rtype = (PyTypeObject *)type_obj;
    Py_buffer data;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *d = (const uint8_t *)data.buf;
    Py_ssize_t total = data.len, pos = 0;
    /* A record takes at least 7 bytes, so a count beyond total / 7 must fail before the list fills:
     * a corrupt count then costs a small list, not a huge allocation. */
    PyObject *list = PyList_New(count <= total / 7 ? count : total / 7 + 1);
    PyObject *part = PyLong_FromLongLong(partition), *tstype = PyLong_FromLongLong(ts_type);
    /* LogAppendTime: every record shares the batch's one timestamp object, as the twin's do */
    PyObject *override = override_obj == Py_None ? NULL : override_obj;
    if (!list || !part || !tstype) goto fail;
    scan_err err = {0};
    int64_t row[NCOLS];
    for (Py_ssize_t i = 0; i < count; i++) {
        if (pos >= total) {
            err.code = E_EXPECTED_RECORDS;
            err.a = count;
            err.b = i;
            raise_scan_error(&err);
            goto fail;
        }
        Py_ssize_t next = scan_one(d, total, pos, row, &err);
        if (next < 0) {
            raise_scan_error(&err);
            goto fail;
        }
        pos = next;
        if (i >= PyList_GET_SIZE(list)) { /* unreachable by the 7-byte bound above; kept as a guard */
            PyErr_SetString(PyExc_SystemError, "decode_records: record count bound broken");
            goto fail;
        }
        PyObject *rec = rtype->tp_alloc(rtype, 8);
        if (!rec) goto fail;
        PyList_SET_ITEM(list, i, rec);
        /* every slot is set before checking, so a record left half built is freed cleanly */
        Py_INCREF(topic);
        PyTuple_SET_ITEM(rec, 0, topic);
        Py_INCREF(part);
        PyTuple_SET_ITEM(rec, 1, part);
        PyObject *off = long_sum(base_offset, row[C_OFFSET_DELTA]);
        PyObject *ts;
        long long ts_value;
        if (override) {
            Py_INCREF(override);
            ts = override;
        } else if (!__builtin_add_overflow(base_ts, (long long)row[C_TS_DELTA], &ts_value)) {
            ts = PyLong_FromLongLong(ts_value);
        } else {
            /* a timestamp must fit int64 (it is stored as one): the batch is corrupt */
            PyObject *msg = PyUnicode_FromFormat(
                "base timestamp %lld + timestamp delta %lld of record %zd is outside the int64 range", base_ts,
                (long long)row[C_TS_DELTA], i);
            raise_after_scanning_rest(d, total, pos, i, count, msg);
            Py_XDECREF(msg);
            Py_XDECREF(off);
            goto fail; /* rec is in the list with NULL slots, which tuple dealloc skips */
        }
        PyObject *key = bytes_or_none(d, row[C_KEY_POS], row[C_KEY_LEN]);
        PyObject *val = bytes_or_none(d, row[C_VAL_POS], row[C_VAL_LEN]);
        PyObject *hdrs = decode_headers_at(d, row[C_END], row[C_HDR_POS], row[C_HDR_COUNT]);
        Py_INCREF(tstype);
        PyTuple_SET_ITEM(rec, 2, off);
        PyTuple_SET_ITEM(rec, 3, ts);
        PyTuple_SET_ITEM(rec, 4, tstype);
        PyTuple_SET_ITEM(rec, 5, key);
        PyTuple_SET_ITEM(rec, 6, val);
        PyTuple_SET_ITEM(rec, 7, hdrs);
        if (!off || !ts || !key || !val || !hdrs) goto fail;
    }
    if (pos != total) {
        err.code = E_REMAINING;
        err.a = total - pos;
        err.b = count;
        raise_scan_error(&err);
        goto fail;
    }
    PyBuffer_Release(&data);
    Py_DECREF(part);
    Py_DECREF(tstype);
    return list;
fail:
    PyBuffer_Release(&data);
    Py_XDECREF(part);
    Py_XDECREF(tstype);
    Py_XDECREF(list); /* PyList_New's unset slots are NULL, which list dealloc skips */
    return NULL;
}

/* ------------------------------------------------------------------------------------------------
 * encode_records: build an uncompressed records section.
 */
typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} wbuf;

static int wb_reserve(wbuf *w, Py_ssize_t extra) {
    if (w->len + extra <= w->cap) return 0;
    Py_ssize_t cap = w->cap ? w->cap : 1024;
    while (cap < w->len + extra) cap *= 2;
    char *nb = PyMem_Realloc(w->buf, cap);
    if (!nb) {
        PyErr_NoMemory();
        return -1;
    }
    w->buf = nb;
    w->cap = cap;
    return 0;
}

static inline int varint_size(uint64_t z) {
    int n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline uint64_t zigzag(int64_t n) { return ((uint64_t)n << 1) ^ (uint64_t)(n >> 63); }

static inline void put_varint(wbuf *w, int64_t n) {
    uint64_t z = zigzag(n);
    while (z >= 0x80) {
        w->buf[w->len++] = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    w->buf[w->len++] = (char)z;
}

typedef struct {
    Py_buffer view;
    int is_null;
} field;

static int get_field(PyObject *obj, field *f) {
    if (obj == Py_None) {
        f->is_null = 1;
        f->view.buf = NULL;
        f->view.len = 0;
        f->view.obj = NULL;
        return 0;
    }
    f->is_null = 0;
    return PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE);
}

/* A header key: bytes-like, or a str taken as its UTF-8 (borrowed from the str, which the caller's
 * headers sequence keeps alive), so callers need not re-encode every key in Python first. */
static int get_header_key(PyObject *obj, field *f) {
    if (PyUnicode_Check(obj)) {
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(obj, &len);
        if (!utf8) return -1;
        f->is_null = 0;
        f->view.buf = (void *)utf8;
        f->view.len = len;
        f->view.obj = NULL;
        return 0;
    }
    return get_field(obj, f);
}

static void release_field(field *f) {
    if (!f->is_null && f->view.obj) PyBuffer_Release(&f->view);
}

static inline Py_ssize_t field_size(const field *f) {
    return f->is_null ? 1 : varint_size(zigzag(f->view.len)) + f->view.len;
}

static inline void put_field(wbuf *w, const field *f) {
    if (f->is_null) {
        put_varint(w, -1);
        return;
    }
    put_varint(w, f->view.len);
    memcpy(w->buf + w->len, f->view.buf, f->view.len);
    w->len += f->view.len;
}

/* One record's timestamp delta, checked to fit a varlong; exact through Python ints when int64 math
 * would overflow, so an out-of-range delta is reported rather than wrapped. */
static int ts_delta_of(PyObject *ts_obj, PyObject *base_obj, long long base, int base_ovf, int64_t *out) {
    int ovf = 0;
    long long ts = PyLong_AsLongLongAndOverflow(ts_obj, &ovf);
    if (ts == -1 && PyErr_Occurred()) return -1;
    long long delta;
    if (!ovf && !base_ovf && !__builtin_sub_overflow(ts, base, &delta)) {
        *out = delta;
        return 0;
    }
    PyObject *d = PyNumber_Subtract(ts_obj, base_obj);
    if (!d) return -1;
    delta = PyLong_AsLongLongAndOverflow(d, &ovf);
    if (delta == -1 && PyErr_Occurred()) {
        Py_DECREF(d);
        return -1;
    }
    if (ovf) PyErr_Format(PyExc_ValueError, "timestamp delta %S does not fit in 64 bits", d);
    Py_DECREF(d);
    *out = delta;
    return ovf ? -1 : 0;
}

/* Offset deltas are int32 varints in the format; anything wider would not scan back. */
static int offset_delta_of(PyObject *obj, int64_t *out) {
    int ovf = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &ovf);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (ovf || v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "offset delta %S does not fit in 32 bits", obj);
        return -1;
    }
    *out = v;
    return 0;
}

/* A header as the twin's `for hk, hv in hdrs` unpacks it, with Python's own words when it can't. */
static PyObject *header_pair(PyObject *pair) {
    PyObject *seq = PySequence_Fast(pair, "");
    if (!seq) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "cannot unpack non-iterable %.200s object", Py_TYPE(pair)->tp_name);
        }
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n != 2) {
        if (n < 2) PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected 2, got %zd)", n);
        else PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 2)");
        Py_DECREF(seq);
        return NULL;
    }
    return seq;
}

static PyObject *encode_records(PyObject *self, PyObject *args) {
    PyObject *keys_obj, *values_obj, *ts_obj, *base_obj, *deltas_obj, *headers_obj, *hoffs_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OOOOOO|O", &keys_obj, &values_obj, &ts_obj, &base_obj, &deltas_obj, &headers_obj,
                          &hoffs_obj))
        return NULL;
    int base_ovf = 0;
    long long base_ts = PyLong_AsLongLongAndOverflow(base_obj, &base_ovf);
    if (base_ts == -1 && PyErr_Occurred()) return NULL;
    PyObject *keys = PySequence_Fast(keys_obj, "keys must be a sequence");
    PyObject *values = keys ? PySequence_Fast(values_obj, "values must be a sequence") : NULL;
    PyObject *tss = values ? PySequence_Fast(ts_obj, "timestamps must be a sequence") : NULL;
    PyObject *deltas = NULL, *headers = NULL, *hoffs = NULL, *result = NULL;
    field *hf = NULL; /* header fields, reused across records */
    Py_ssize_t hf_cap = 0;
    wbuf w = {0};
    if (!tss) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
    if (PySequence_Fast_GET_SIZE(values) != n || PySequence_Fast_GET_SIZE(tss) != n) {
        PyErr_SetString(PyExc_ValueError, "keys, values and timestamps must have the same length");
        goto done;
    }
    if (deltas_obj != Py_None) {
        if (!(deltas = PySequence_Fast(deltas_obj, "offset_deltas must be a sequence"))) goto done;
        if (PySequence_Fast_GET_SIZE(deltas) != n) {
            PyErr_SetString(PyExc_ValueError, "offset_deltas must have one entry per record");
            goto done;
        }
    }
    if (headers_obj != Py_None) {
        if (!(headers = PySequence_Fast(headers_obj, "headers must be a sequence"))) goto done;
        if (hoffs_obj != Py_None) { /* flat pairs, record i's are headers[offsets[i]:offsets[i + 1]] */
            if (!(hoffs = PySequence_Fast(hoffs_obj, "header_offsets must be a sequence"))) goto done;
            if (PySequence_Fast_GET_SIZE(hoffs) != n + 1) {
                PyErr_SetString(PyExc_ValueError, "header_offsets must have one entry per record and one more");
                goto done;
            }
        } else if (PySequence_Fast_GET_SIZE(headers) != n) {
            PyErr_SetString(PyExc_ValueError, "headers must have one entry per record");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* in the twin's order: timestamp, offset delta, key, value, headers */
        int64_t ts_delta, od = i;
        if (ts_delta_of(PySequence_Fast_GET_ITEM(tss, i), base_obj, base_ts, base_ovf, &ts_delta) < 0) goto done;
        if (deltas && offset_delta_of(PySequence_Fast_GET_ITEM(deltas, i), &od) < 0) goto done;
        field k, v;
        if (get_field(PySequence_Fast_GET_ITEM(keys, i), &k) < 0) goto done;
        if (get_field(PySequence_Fast_GET_ITEM(values, i), &v) < 0) {
            release_field(&k);
            goto done;
        }
        PyObject *hseq = NULL, **hitems = NULL;
        Py_ssize_t hn = 0, hbytes = 0, got = 0;
        int ok = 1;
        if (hoffs) {
            Py_ssize_t lo = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(hoffs, i));
            Py_ssize_t hi = lo == -1 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(hoffs, i + 1));
            ok = !(hi == -1 && PyErr_Occurred());
            if (ok && !(0 <= lo && lo <= hi && hi <= PySequence_Fast_GET_SIZE(headers))) {
                PyErr_SetString(PyExc_ValueError, "header_offsets must rise from 0 to at most len(headers)");
                ok = 0;
            }
            hn = ok ? hi - lo : 0;
            hitems = ok ? PySequence_Fast_ITEMS(headers) + lo : NULL;
        } else if (headers) {
            hseq = PySequence_Fast(PySequence_Fast_GET_ITEM(headers, i), "each record's headers must be a sequence");
            ok = hseq != NULL;
            hn = ok ? PySequence_Fast_GET_SIZE(hseq) : 0;
            hitems = ok ? PySequence_Fast_ITEMS(hseq) : NULL;
        }
        if (ok && hn) {
            if (ok && 2 * hn > hf_cap) {
                field *nf = PyMem_Realloc(hf, (size_t)(2 * hn) * sizeof(field));
                if (nf) {
                    hf = nf;
                    hf_cap = 2 * hn;
                } else {
                    PyErr_NoMemory();
                    ok = 0;
                }
            }
            for (Py_ssize_t h = 0; ok && h < hn; h++) {
                PyObject *pair = header_pair(hitems[h]);
                ok = pair != NULL && get_header_key(PySequence_Fast_GET_ITEM(pair, 0), &hf[got]) == 0;
                if (ok && hf[got].is_null) { /* a header key is never null: the twin's len(None) */
                    PyErr_SetString(PyExc_TypeError, "object of type 'NoneType' has no len()");
                    ok = 0;
                }
                if (ok) got++;
                ok = ok && get_field(PySequence_Fast_GET_ITEM(pair, 1), &hf[got]) == 0;
                if (ok) got++;
                Py_XDECREF(pair);
                if (ok) hbytes += field_size(&hf[got - 2]) + field_size(&hf[got - 1]);
            }
        }
        if (ok) {
            Py_ssize_t body = 1 + varint_size(zigzag(ts_delta)) + varint_size(zigzag(od)) + field_size(&k) +
                              field_size(&v) + varint_size(zigzag(hn)) + hbytes;
            ok = wb_reserve(&w, body + 10) == 0;
            if (ok) {
                put_varint(&w, body);
                w.buf[w.len++] = 0;
                put_varint(&w, ts_delta);
                put_varint(&w, od);
                put_field(&w, &k);
                put_field(&w, &v);
                put_varint(&w, hn);
                for (Py_ssize_t h = 0; h < 2 * hn; h++) put_field(&w, &hf[h]);
            }
        }
        for (Py_ssize_t h = 0; h < got; h++) release_field(&hf[h]);
        Py_XDECREF(hseq);
        release_field(&k);
        release_field(&v);
        if (!ok) goto done;
    }
    result = PyBytes_FromStringAndSize(w.buf ? w.buf : "", w.len);
done:
    PyMem_Free(w.buf);
    PyMem_Free(hf);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(tss);
    Py_XDECREF(deltas);
    Py_XDECREF(headers);
    Py_XDECREF(hoffs);
    return result;
}

/* encode_columns(key_data, key_spans, value_data, value_spans, timestamps, base_timestamp[, header_key_data,
 *                header_key_spans, header_value_data, header_value_spans, header_ranges]) -> bytes
 * The records section of len(timestamps) records (offset deltas 0..n-1) from columns laid out as Arrow
 * lays them: record i's key is key_data[pos:pos + len] for (pos, len) = key_spans[i], a null key when len
 * is -1, and its value likewise. With headers, record i's are the pairs header_ranges[i] = (first, count)
 * of the header columns (pair j's key by header_key_spans[j], never null; its value by header_value_spans[j],
 * -1 for null). A columnar writer encodes a DataFrame's rows without a Python object per record. Every
 * span and timestamp delta is checked before anything is written, and again as it is written. */
typedef struct {
    const int64_t *ks, *vs, *ranges; /* pairs' key and value spans; each record's (first pair, count) */
    const uint8_t *kd, *vd;
    Py_ssize_t klen, vlen, pairs;
} header_cols;

enum { BAD_KEY = 1, BAD_VALUE, BAD_TIMESTAMP, BAD_RANGE, BAD_HEADER_KEY, BAD_HEADER_VALUE, BAD_SIZE };

static inline Py_ssize_t span_bytes(int64_t len) { return len == -1 ? 1 : varint_size(zigzag(len)) + (Py_ssize_t)len; }

/* The bytes of record i's headers (their count's varint included), or -1 with why set. */
/* Kafka's record length is an int32 varint: no record may take more bytes than that, which also keeps
 * every sum below from overflowing (each span is at most its buffer, a record at most this). */
#define MAX_RECORD_BYTES ((Py_ssize_t)INT32_MAX)

/* The bytes of record i's headers (their count's varint included), or -1 with why set. */
static Py_ssize_t header_bytes_of(const header_cols *h, Py_ssize_t i, int *why) {
    if (!h) return 1; /* a count of 0 */
    int64_t first = h->ranges[2 * i], count = h->ranges[2 * i + 1];
    if (!span_ok(first, count, h->pairs)) return (*why = BAD_RANGE), -1;
    Py_ssize_t total = varint_size(zigzag(count));
    for (int64_t j = first; j < first + count; j++) {
        int64_t kp = h->ks[2 * j], kl = h->ks[2 * j + 1], vp = h->vs[2 * j], vl = h->vs[2 * j + 1];
        if (kl == -1 || !span_ok(kp, kl, h->klen)) return (*why = BAD_HEADER_KEY), -1;
        if (vl != -1 && !span_ok(vp, vl, h->vlen)) return (*why = BAD_HEADER_VALUE), -1;
        total += span_bytes(kl) + span_bytes(vl); /* each below 2^62: no overflow before the check */
        if (total > MAX_RECORD_BYTES) return (*why = BAD_SIZE), -1;
    }
    return total;
}

/* The size of record `od` (its offset delta) without its length varint: key (kp, kl) and value (vp, vl)
 * checked against their data, the timestamp delta against 64 bits, the headers against theirs, the
 * whole against Kafka's largest record. */
static int column_record_size(int64_t kp, int64_t kl, int64_t vp, int64_t vl, int64_t ts, int64_t base, Py_ssize_t od,
                              Py_ssize_t klen, Py_ssize_t vlen, const header_cols *h, Py_ssize_t *size, int *why) {
    int64_t delta;
    if (kl != -1 && !span_ok(kp, kl, klen)) return (*why = BAD_KEY), -1;
    if (vl != -1 && !span_ok(vp, vl, vlen)) return (*why = BAD_VALUE), -1;
    if (__builtin_sub_overflow(ts, base, &delta)) return (*why = BAD_TIMESTAMP), -1;
    if (span_bytes(kl) > MAX_RECORD_BYTES || span_bytes(vl) > MAX_RECORD_BYTES) return (*why = BAD_SIZE), -1;
    Py_ssize_t hbytes = header_bytes_of(h, od, why);
    if (hbytes < 0) return -1;
    *size = 1 + varint_size(zigzag(delta)) + varint_size(zigzag(od)) + span_bytes(kl) + span_bytes(vl) + hbytes;
    if (*size > MAX_RECORD_BYTES) return (*why = BAD_SIZE), -1;
    return 0;
}

/* Writes a span checked again against its data and the room left; -1 when either fails. */
static inline int put_span_checked(wbuf *w, const uint8_t *data, Py_ssize_t datalen, int64_t pos, int64_t len) {
    if (len != -1 && !span_ok(pos, len, datalen)) return -1;
    if (span_bytes(len) > w->cap - w->len) return -1;
    put_varint(w, len);
    if (len > 0) {
        memcpy(w->buf + w->len, data + pos, (size_t)len);
        w->len += len;
    }
    return 0;
}

/* Writes record i, its fields read once each; -1 when a field fails its check again, the record would
 * not fit, or what was written is not the size its length says (the arrays changed meanwhile). */
static int put_column_record(wbuf *w, const uint8_t *kd, Py_ssize_t klen, const uint8_t *vd, Py_ssize_t vlen,
                             const int64_t *ks, const int64_t *vs, const int64_t *ts, int64_t base,
                             const header_cols *h, Py_ssize_t i, int *why) {
    int64_t kp = ks[2 * i], kl = ks[2 * i + 1], vp = vs[2 * i], vl = vs[2 * i + 1], t = ts[i];
    Py_ssize_t size;
    if (column_record_size(kp, kl, vp, vl, t, base, i, klen, vlen, h, &size, why) < 0) return -1;
    if (varint_size(zigzag(size)) + size > w->cap - w->len) return -1;
    put_varint(w, size);
    const Py_ssize_t start = w->len;
    w->buf[w->len++] = 0; /* attributes */
    put_varint(w, t - base);
    put_varint(w, i);
    if (put_span_checked(w, kd, klen, kp, kl) < 0 || put_span_checked(w, vd, vlen, vp, vl) < 0) return -1;
    if (!h) {
        put_varint(w, 0);
    } else {
        int64_t first = h->ranges[2 * i], count = h->ranges[2 * i + 1];
        if (!span_ok(first, count, h->pairs) || varint_size(zigzag(count)) > w->cap - w->len) return -1;
        put_varint(w, count);
        for (int64_t j = first; j < first + count; j++) {
            int64_t hkp = h->ks[2 * j], hkl = h->ks[2 * j + 1], hvp = h->vs[2 * j], hvl = h->vs[2 * j + 1];
            if (hkl == -1 || put_span_checked(w, h->kd, h->klen, hkp, hkl) < 0 ||
                put_span_checked(w, h->vd, h->vlen, hvp, hvl) < 0)
                return -1;
        }
    }
    return w->len - start == size ? 0 : -1;
}

static PyObject *encode_columns(PyObject *self, PyObject *args) {
    PyObject *objs[10] = {NULL}, *ranges_obj = Py_None;
    long long base;
    if (!PyArg_ParseTuple(args, "OOOOOL|OOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &base, &objs[5],
                          &objs[6], &objs[7], &objs[8], &ranges_obj))
        return NULL;
    const int with_headers = ranges_obj != Py_None;
    for (int k = 5; k < 9; k++)
        if ((objs[k] != NULL && objs[k] != Py_None) != with_headers)
            return PyErr_Format(PyExc_ValueError, "the header columns and header_ranges are given together or not at all");
    objs[9] = ranges_obj;
    static const int kinds[10] = {B_BYTES, B_I64, B_BYTES, B_I64, B_I64, B_BYTES, B_I64, B_BYTES, B_I64, B_I64};
    static const char *const names[10] = {"key_data", "key_spans", "value_data", "value_spans", "timestamps",
                                          "header_key_data", "header_key_spans", "header_value_data",
                                          "header_value_spans", "header_ranges"};
    const int nb = with_headers ? 10 : 5;
    Py_buffer b[10];
    if (take_buffers(nb, objs, kinds, names, b) < 0) return NULL;
    const Py_ssize_t n = b[4].len / 8;
    PyObject *result = NULL;
    header_cols hc, *h = NULL;
    if (b[1].len != 16 * n || b[3].len != 16 * n || (with_headers && b[9].len != 16 * n)) {
        PyErr_SetString(PyExc_ValueError,
                        "key_spans, value_spans and header_ranges must hold a pair per timestamp");
        goto done;
    }
    if (with_headers) {
        if (b[6].len % 16 || b[8].len != b[6].len) {
            PyErr_SetString(PyExc_ValueError, "header_key_spans and header_value_spans must hold a pair per header");
            goto done;
        }
        hc = (header_cols){(const int64_t *)b[6].buf, (const int64_t *)b[8].buf, (const int64_t *)b[9].buf,
                           (const uint8_t *)b[5].buf, (const uint8_t *)b[7].buf, b[5].len, b[7].len, b[6].len / 16};
        h = &hc;
    }
    if (n > (Py_ssize_t)INT32_MAX + 1) {
        PyErr_SetString(PyExc_ValueError, "a batch holds at most 2^31 records");
        goto done;
    }
    const int64_t *ks = (const int64_t *)b[1].buf, *vs = (const int64_t *)b[3].buf, *ts = (const int64_t *)b[4].buf;
    const uint8_t *kd = (const uint8_t *)b[0].buf, *vd = (const uint8_t *)b[2].buf;
    Py_ssize_t total = 0, bad = -1, size = 0;
    int why = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (column_record_size(ks[2 * i], ks[2 * i + 1], vs[2 * i], vs[2 * i + 1], ts[i], base, i, b[0].len, b[2].len, h,
                               &size, &why) < 0) {
            bad = i;
            break;
        }
        total += varint_size(zigzag(size)) + size;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        if (why == BAD_TIMESTAMP)
            PyErr_Format(PyExc_ValueError, "timestamp %lld of record %zd minus the base timestamp %lld does not fit in 64 bits",
                         (long long)ts[bad], bad, base);
        else if (why == BAD_HEADER_KEY)
            PyErr_Format(PyExc_ValueError, "a header key of record %zd is null or lies outside header_key_data", bad);
        else if (why == BAD_HEADER_VALUE)
            PyErr_Format(PyExc_ValueError, "a header value of record %zd lies outside header_value_data", bad);
        else if (why == BAD_SIZE)
            PyErr_Format(PyExc_ValueError, "record %zd would take more than 2^31 - 1 bytes", bad);
        else if (why == BAD_RANGE)
            PyErr_Format(PyExc_ValueError, "the header range of record %zd lies outside the header columns", bad);
        else
            PyErr_Format(PyExc_ValueError, "the %s of record %zd lies outside %s", why == BAD_KEY ? "key" : "value", bad,
                         why == BAD_KEY ? "key_data" : "value_data");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (!result) goto done;
    wbuf w = {PyBytes_AS_STRING(result), 0, total};
    Py_BEGIN_ALLOW_THREADS
    /* the caller's arrays are read again: each record is checked again and must fit what is left, so
     * arrays changed meanwhile (by another thread, or overlapping) cannot make a write go astray */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (put_column_record(&w, kd, b[0].len, vd, b[2].len, ks, vs, ts, base, h, i, &why) < 0) {
            bad = i;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0 || w.len != total) {
        Py_CLEAR(result);
        PyErr_SetString(PyExc_ValueError, "the spans or timestamps changed while the records were encoded");
    }
done:
    release_buffers(nb, b);
    return result;
}

/* Appends record rr of d to w with its timestamp delta moved by shift and everything after the delta
 * (offset delta, key, value, headers) copied byte for byte; -1 with an exception set on failure. */
static int put_rebased(wbuf *w, const uint8_t *d, const int64_t *rr, long long shift) {
    scan_err err = {0};
    int64_t len, ts;
    Py_ssize_t attrs = read_varint(d, (Py_ssize_t)rr[C_POS], (Py_ssize_t)rr[C_END], 5, &len, &err);
    Py_ssize_t pos = attrs < 0 ? -1 : read_varint(d, attrs + 1, (Py_ssize_t)rr[C_END], 10, &ts, &err);
    if (pos < 0) {
        raise_scan_error(&err);
        return -1;
    }
    int64_t moved;
    if (__builtin_add_overflow(ts, (int64_t)shift, &moved)) {
        PyErr_Format(PyExc_ValueError, "timestamp delta %lld moved by %lld does not fit in 64 bits", (long long)ts, shift);
        return -1;
    }
    Py_ssize_t tail = (Py_ssize_t)rr[C_END] - pos;
    Py_ssize_t body = 1 + varint_size(zigzag(moved)) + tail;
    if (wb_reserve(w, body + 5) < 0) return -1;
    put_varint(w, body);
    w->buf[w->len++] = (char)d[attrs];
    put_varint(w, moved);
    memcpy(w->buf + w->len, d + pos, (size_t)tail);
    w->len += tail;
    return 0;
}

/* rebase_records(data, cols, rows, ts_shift) -> bytes
 * The chosen records re-encoded with every timestamp delta moved by ts_shift and everything after it
 * (offset delta, key, value, headers) copied byte for byte: what a batch needs when its base timestamp
 * changes (the cleaner storing a delete horizon there) without decoding records into Python objects. */
static PyObject *rebase_records(PyObject *self, PyObject *args) {
    PyObject *objs[3];
    long long shift;
    if (!PyArg_ParseTuple(args, "OOOL", &objs[0], &objs[1], &objs[2], &shift)) return NULL;
    static const int kinds[3] = {B_BYTES, B_COLS, B_I64};
    static const char *const names[3] = {"data", "cols", "rows"};
    Py_buffer b[3];
    if (take_buffers(3, objs, kinds, names, b) < 0) return NULL;
    const uint8_t *d = (const uint8_t *)b[0].buf;
    const int64_t *c = (const int64_t *)b[1].buf, *r = (const int64_t *)b[2].buf;
    Py_ssize_t n = b[2].len / 8, total = chosen_records_bytes(b);
    PyObject *out = NULL;
    wbuf w = {0};
    if (total < 0 || wb_reserve(&w, total + 10 * n) < 0) goto done; /* most records keep their size; the loop reserves more when one grows */
    for (Py_ssize_t i = 0; i < n; i++)
        if (put_rebased(&w, d, c + r[i] * NCOLS, shift) < 0) goto done;
    out = PyBytes_FromStringAndSize(w.buf ? w.buf : "", w.len);
done:
    PyMem_Free(w.buf);
    release_buffers(3, b);
    return out;
}

/* assemble_batches(data, cols, rows, bounds, shifts, headers, out_ends) -> bytes
 * Many batches rebuilt around their kept records in one call (RecordBatch.assemble_batch for each):
 * batch j is the 61-byte header headers[61j : 61j + 61] (every field but batchLength and the CRC
 * already set), then the records rows[bounds[j][0] : bounds[j][1]] of data, copied byte for byte, or
 * with their timestamp deltas moved by shifts[j] when it is not 0 (as rebase_records does). Its
 * batchLength and CRC-32C are filled in; out_ends[j] is where it ends in the result. */
static PyObject *assemble_batches(PyObject *self, PyObject *args) {
    PyObject *objs[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6]))
        return NULL;
    static const int kinds[7] = {B_BYTES, B_COLS, B_I64, B_I64, B_I64, B_BYTES, B_I64_W};
    static const char *const names[7] = {"data", "cols", "rows", "bounds", "shifts", "headers", "out_ends"};
    Py_buffer b[7];
    if (take_buffers(7, objs, kinds, names, b) < 0) return NULL;
    const uint8_t *d = (const uint8_t *)b[0].buf, *hdr = (const uint8_t *)b[5].buf;
    const int64_t *c = (const int64_t *)b[1].buf, *r = (const int64_t *)b[2].buf;
    const int64_t *bounds = (const int64_t *)b[3].buf, *shifts = (const int64_t *)b[4].buf;
    int64_t *ends = (int64_t *)b[6].buf;
    Py_ssize_t m = b[4].len / 8, nrows = b[2].len / 8, total = 0;
    PyObject *out = NULL;
    wbuf w = {0};
    if (b[3].len / 16 != m || b[5].len != m * B_HEADER_SIZE || b[6].len / 8 < m) {
        PyErr_Format(PyExc_ValueError, "bounds, shifts, headers and out_ends must describe the same %zd batches", m);
        goto done;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        if (bounds[2 * j] < 0 || bounds[2 * j] > bounds[2 * j + 1] || bounds[2 * j + 1] > nrows) {
            PyErr_Format(PyExc_IndexError, "the rows of batch %zd are out of range", j);
            goto done;
        }
    }
    if ((total = chosen_records_bytes(b)) < 0 || wb_reserve(&w, total + 10 * nrows + m * B_HEADER_SIZE) < 0) goto done;
    for (Py_ssize_t j = 0; j < m; j++) {
        Py_ssize_t start = w.len;
        if (wb_reserve(&w, B_HEADER_SIZE) < 0) goto done;
        memcpy(w.buf + w.len, hdr + j * B_HEADER_SIZE, B_HEADER_SIZE);
        w.len += B_HEADER_SIZE;
        for (int64_t k = bounds[2 * j]; k < bounds[2 * j + 1]; k++) {
            const int64_t *rr = c + r[k] * NCOLS;
            if (shifts[j]) {
                if (put_rebased(&w, d, rr, shifts[j]) < 0) goto done;
            } else {
                Py_ssize_t len = (Py_ssize_t)(rr[C_END] - rr[C_POS]);
                if (wb_reserve(&w, len) < 0) goto done;
                memcpy(w.buf + w.len, d + rr[C_POS], (size_t)len);
                w.len += len;
            }
        }
        Py_ssize_t size = w.len - start;
        if (size - 12 > INT32_MAX) {
            PyErr_Format(PyExc_OverflowError, "batch %zd of %zd bytes is too large", j, size);
            goto done;
        }
        uint8_t *h = (uint8_t *)w.buf + start;
        uint32_t length = (uint32_t)(size - 12), crc;
        for (int k = 0; k < 4; k++) h[B_LENGTH + k] = (uint8_t)(length >> (24 - 8 * k));
        crc = crc32c_of(h + B_ATTRIBUTES, (size_t)(size - B_ATTRIBUTES));
        for (int k = 0; k < 4; k++) h[B_CRC + k] = (uint8_t)(crc >> (24 - 8 * k));
        ends[j] = w.len;
    }
    out = PyBytes_FromStringAndSize(w.buf ? w.buf : "", w.len);
done:
    PyMem_Free(w.buf);
    release_buffers(7, b);
    return out;
}

/* ------------------------------------------------------------------------------------------------
 * CRC-32C: the SSE4.2 instruction where the CPU has it, else slicing-by-8 tables.
 *
 * All CRC state below is the raw register (no pre/post inversion), which is linear in the data:
 * crc(c, A || B) = shift(crc(c, A), |B|) ^ crc(0, B), where shift(x, n) feeds n zero bytes to x. The
 * instruction has a latency of three cycles but a throughput of one, so long inputs are cut into three
 * lanes computed side by side and joined with shift tables: about three times one lane's speed.
 */
static uint32_t crc_table[8][256];

static uint32_t crc_sw_raw(uint32_t crc, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint64_t v = load_le64(p) ^ crc;
        crc = crc_table[7][v & 0xFF] ^ crc_table[6][(v >> 8) & 0xFF] ^ crc_table[5][(v >> 16) & 0xFF] ^
              crc_table[4][(v >> 24) & 0xFF] ^ crc_table[3][(v >> 32) & 0xFF] ^ crc_table[2][(v >> 40) & 0xFF] ^
              crc_table[1][(v >> 48) & 0xFF] ^ crc_table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#ifdef HAVE_X86_CRC
/* Lane lengths of the two interleaving tiers (multiples of 8), and the tables that shift a register
 * over one lane of zeros: shift(x) = T[0][x & 0xff] ^ T[1][(x >> 8) & 0xff] ^ ... */
#define LANE_LONG 8192
#define LANE_SHORT 256
static uint32_t shift_long[4][256], shift_short[4][256];

static void make_shift_table(uint32_t t[4][256], size_t lane) {
    static const uint8_t zeros[LANE_LONG] = {0};
    uint32_t basis[32];
    for (int j = 0; j < 32; j++) basis[j] = crc_sw_raw(1u << j, zeros, lane); /* linear: one image per bit */
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t x = 0;
            for (int bit = 0; bit < 8; bit++)
                if (b & (1 << bit)) x ^= basis[8 * k + bit];
            t[k][b] = x;
        }
}

static inline uint32_t crc_shift(uint32_t t[4][256], uint32_t x) {
    return t[0][x & 0xFF] ^ t[1][(x >> 8) & 0xFF] ^ t[2][(x >> 16) & 0xFF] ^ t[3][x >> 24];
}

/* Three interleaved CRC streams over consecutive lanes of ``lane`` bytes, joined with the shift table
 * for that lane length; consumes whole groups of three lanes from *p. */
__attribute__((target("sse4.2"))) static inline uint64_t crc_hw_lanes(uint64_t c, const uint8_t **pp, size_t *np,
                                                                       size_t lane, uint32_t shift[4][256]) {
    const uint8_t *p = *pp;
    size_t n = *np;
    while (n >= 3 * lane) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < lane; i += 8) {
            c = _mm_crc32_u64(c, load_le64(p + i));
            c1 = _mm_crc32_u64(c1, load_le64(p + lane + i));
            c2 = _mm_crc32_u64(c2, load_le64(p + 2 * lane + i));
        }
        c = crc_shift(shift, crc_shift(shift, (uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * lane;
        n -= 3 * lane;
    }
    *pp = p;
    *np = n;
    return c;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw_raw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    c = crc_hw_lanes(c, &p, &n, LANE_LONG, shift_long);
    c = crc_hw_lanes(c, &p, &n, LANE_SHORT, shift_short);
    while (n >= 8) {
        c = _mm_crc32_u64(c, load_le64(p));
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

static int use_hw_crc = 0;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
#ifdef HAVE_X86_CRC
    __builtin_cpu_init();
    use_hw_crc = __builtin_cpu_supports("sse4.2");
    if (use_hw_crc) {
        make_shift_table(shift_long, LANE_LONG);
        make_shift_table(shift_short, LANE_SHORT);
    }
#endif
}

static uint32_t crc32c_of(const uint8_t *p, size_t n) {
#ifdef HAVE_X86_CRC
    if (use_hw_crc) return ~crc_hw_raw(0xFFFFFFFFu, p, n);
#endif
    return ~crc_sw_raw(0xFFFFFFFFu, p, n);
}

static PyObject *crc32c(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) {
        /* a strided view has no single run of bytes: checksum its bytes() as the twin does */
        if (!PyErr_ExceptionMatches(PyExc_BufferError) || !PyObject_CheckBuffer(arg)) return NULL;
        PyErr_Clear();
        PyObject *copy = PyBytes_FromObject(arg);
        if (!copy) return NULL;
        PyObject *res = crc32c(self, copy);
        Py_DECREF(copy);
        return res;
    }
    uint32_t c;
    if (b.len > GIL_RELEASE_MIN_CRC) {
        Py_BEGIN_ALLOW_THREADS
        c = crc32c_of((const uint8_t *)b.buf, (size_t)b.len);
        Py_END_ALLOW_THREADS
    } else {
        c = crc32c_of((const uint8_t *)b.buf, (size_t)b.len);
    }
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}


/* scan_batches(base, views, counts, base_offsets, verify, out, rows) -> int
 * Scans whole batches where they lie: views[i] is a batch's bytes, a view into base (as a segment reader
 * cuts the batches of one read); counts[i] of its records are scanned (0 for a control batch) into
 * consecutive rows of out, positions absolute in base and offsets absolute (base_offsets[i] added);
 * rows[i] is batch i's first row, rows[n] the total. Before anything is scanned, each batch is checked:
 * its size (12 + batchLength) is at least the header and within its view; with verify, what
 * RecordBatch.ensure_valid checks (magic 2, the CRC-32C of bytes [21, size)); and a count its records
 * section can hold (7 bytes a record at least). Returns -1 when all were scanned, else the first batch
 * that failed a check (whose methods say why), or -2 when out has too few rows. The checks and the scan
 * run without the GIL; records that do not parse raise KernelError naming the batch as the section. */
static PyObject *scan_batches(PyObject *self, PyObject *args) {
    PyObject *base_obj, *views_obj, *counts_obj, *offs_obj, *out_obj, *rows_obj;
    int verify;
    if (!PyArg_ParseTuple(args, "OOOOpOO", &base_obj, &views_obj, &counts_obj, &offs_obj, &verify, &out_obj, &rows_obj))
        return NULL;
    PyObject *views = PySequence_Fast(views_obj, "views must be a sequence");
    if (!views) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(views), got = 0, bad = -1, sec = -1;
    Py_buffer b[5]; /* base, counts, base_offsets, out, rows */
    PyObject *objs[5] = {base_obj, counts_obj, offs_obj, out_obj, rows_obj};
    static const int kinds[5] = {B_BYTES, B_I64, B_I64, B_COLS, B_I64_W};
    static const char *const names[5] = {"base", "counts", "base_offsets", "out", "rows"};
    Py_buffer *vb = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
    PyObject *res = NULL;
    if (!vb) {
        Py_DECREF(views);
        return PyErr_NoMemory();
    }
    if (take_buffers(5, objs, kinds, names, b) < 0) goto no_buffers;
    if (b[1].len / 8 != n || b[2].len / 8 != n || b[4].len / 8 < n + 1) {
        PyErr_Format(PyExc_ValueError, "counts and base_offsets must hold %zd items, rows %zd", n, n + 1);
        goto done;
    }
    const char *b0 = (const char *)b[0].buf;
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(views, got), &vb[got], PyBUF_SIMPLE) < 0) goto done;
        const char *p = (const char *)vb[got].buf;
        if (p < b0 || p - b0 > b[0].len || vb[got].len > b[0].len - (p - b0)) {
            got++;
            PyErr_Format(PyExc_ValueError, "view %zd does not lie in the base buffer", got - 1);
            goto done;
        }
    }
    const int64_t *counts = (const int64_t *)b[1].buf, *offs = (const int64_t *)b[2].buf;
    int64_t *out = (int64_t *)b[3].buf, *rows = (int64_t *)b[4].buf;
    Py_ssize_t cap = b[3].shape[0];
    scan_err err = {0};
    Py_BEGIN_ALLOW_THREADS
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *d = (const uint8_t *)vb[i].buf;
        Py_ssize_t len = vb[i].len;
        int64_t size = len < B_HEADER_SIZE ? 0 : 12 + (int64_t)(int32_t)load_be32(d + B_LENGTH);
        if (size < B_HEADER_SIZE || size > len ||
            (verify && (d[B_MAGIC] != 2 || crc32c_of(d + B_ATTRIBUTES, (size_t)(size - B_ATTRIBUTES)) != load_be32(d + B_CRC))) ||
            (counts[i] != 0 && (counts[i] < 0 || counts[i] > (size - B_HEADER_SIZE) / 7))) {
            bad = i;
            break;
        }
        total += counts[i];
    }
    if (bad < 0 && total > cap) bad = -2;
    if (bad == -1) {
        static const int shifted[NPOSITION_COLUMNS] = POSITION_COLUMNS_INIT;
        Py_ssize_t row = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            const uint8_t *d = (const uint8_t *)vb[i].buf;
            int64_t at = (int64_t)((const char *)d - b0) + B_HEADER_SIZE;
            Py_ssize_t body = counts[i] ? (Py_ssize_t)(12 + (int64_t)(int32_t)load_be32(d + B_LENGTH) - B_HEADER_SIZE) : 0;
            rows[i] = row;
            if (scan_all(d + B_HEADER_SIZE, body, (Py_ssize_t)counts[i], out + row * NCOLS, &err) < 0) {
                sec = i;
                break;
            }
            for (int64_t r = 0; r < counts[i]; r++) {
                int64_t *rr = out + (row + r) * NCOLS;
                for (int k = 0; k < NPOSITION_COLUMNS; k++) rr[shifted[k]] += at;
                rr[C_OFFSET_DELTA] += offs[i];
            }
            row += (Py_ssize_t)counts[i];
        }
        rows[n] = row;
    }
    Py_END_ALLOW_THREADS
    if (sec >= 0) raise_kernel_error(scan_error_text(&err), sec);
    else res = PyLong_FromSsize_t(bad);
done:
    release_buffers(5, b);
no_buffers:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&vb[i]);
    PyMem_Free(vb);
    Py_DECREF(views);
    return res;
}

/* verify_batches(data, table) -> int
 * Kafka's ensureValid for many batches of one buffer at once: `table` holds a row of 4 int64 per batch,
 * (position in data, size, base offset, last offset), as walk_headers writes them. Each batch must lie in
 * `data` with a size of at least the 61-byte header, have magic 2 and the CRC-32C of its bytes [21, size)
 * equal to the stored one. Returns the first row that fails (RecordBatch.ensure_valid says why), or -1.
 * A bulk reader checks a whole read's batches in one call, without the GIL. */
static PyObject *verify_batches(PyObject *self, PyObject *args) {
    PyObject *data_obj, *table_obj;
    if (!PyArg_ParseTuple(args, "OO", &data_obj, &table_obj)) return NULL;
    Py_buffer b[2];
    PyObject *objs[2] = {data_obj, table_obj};
    static const int kinds[2] = {B_BYTES, B_I64};
    static const char *const names[2] = {"data", "table"};
    if (take_buffers(2, objs, kinds, names, b) < 0) return NULL;
    if (b[1].len % 32) {
        release_buffers(2, b);
        return PyErr_Format(PyExc_ValueError, "table must hold 4 int64 a batch");
    }
    const uint8_t *d = (const uint8_t *)b[0].buf;
    const int64_t *t = (const int64_t *)b[1].buf;
    const Py_ssize_t n = b[1].len / 32, len = b[0].len;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t pos = t[4 * i], size = t[4 * i + 1];
        if (size < B_HEADER_SIZE || !span_ok(pos, size, len) || 12 + (int64_t)(int32_t)load_be32(d + pos + B_LENGTH) != size ||
            d[pos + B_MAGIC] != 2 ||
            crc32c_of(d + pos + B_ATTRIBUTES, (size_t)(size - B_ATTRIBUTES)) != load_be32(d + pos + B_CRC)) {
            bad = i;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    release_buffers(2, b);
    return PyLong_FromSsize_t(bad);
}

/* decode_columns(data, table, start, end, max_size) -> DecodedColumns | None
 * What a bulk reader hands a columnar consumer (the Spark source), from a run of batches of one buffer in
 * one pass: `table` holds (position, size, base offset, last offset) per batch as walk_headers writes them.
 * lz4 and zstd batches are decompressed first (_decompress.c), each to at most `max_size` bytes; pass 0
 * (none is) unless the run's CRCs were verified (the system's codec library may notice damage another
 * way than the Python codecs do, see _decompress.c).
 * For every record of the data batches with an offset in [start, end): key and value in Arrow's binary
 * layout, the offset (int64), the timestamp in microseconds (int64; the batch's maxTimestamp for
 * LogAppendTime, as Chunk.timestamps has it) and the timestamp type (int32). Control batches hold no rows.
 * Each batch is scanned and copied out while it is in cache, and no column table is written between.
 * Returns None when a batch is one this pass does not decode (records compressed otherwise, or in a shape
 * the Python codecs must judge, a size other than its header's, a count its bytes cannot hold) or a
 * record fails scan_records' checks or has a timestamp beyond int64: the caller then scans the run the
 * general way, which decompresses it or names the damage. */
#define B_BASE_TIMESTAMP 27
#define B_MAX_TIMESTAMP 35
#define B_RECORDS_COUNT 57
#define B_CODEC_MASK 0x07
#define B_TIMESTAMP_TYPE_BIT 0x08
#define B_CONTROL_BIT 0x20

static inline int64_t load_be64s(const uint8_t *p) {
    return (int64_t)(((uint64_t)load_be32(p) << 32) | load_be32(p + 4));
}

/* The records a batch of the run gives decode_columns (0 for a control or empty batch), or -1 when the
 * batch is not one it decodes; its codec id in *codec. A compressed batch's count is checked against its
 * records once they are decompressed. */
static inline int64_t decodable_count(const uint8_t *d, Py_ssize_t len, const int64_t *row, int *codec) {
    int64_t pos = row[0], size = row[1];
    *codec = 0;
    if (size < B_HEADER_SIZE || !span_ok(pos, size, len) || 12 + (int64_t)(int32_t)load_be32(d + pos + B_LENGTH) != size)
        return -1;
    const uint8_t *h = d + pos;
    unsigned attrs = ((unsigned)h[B_ATTRIBUTES] << 8) | h[B_ATTRIBUTES + 1];
    int64_t count = (int32_t)load_be32(h + B_RECORDS_COUNT);
    if ((attrs & B_CONTROL_BIT) || count == 0) return 0;
    *codec = (int)(attrs & B_CODEC_MASK);
    if (count < 0 || (!*codec && count > (size - B_HEADER_SIZE) / 7)) return -1;
    return count;
}

/* Where each batch's records lie: in the run (uncompressed) or in the arena its section was
 * decompressed to. */
typedef struct {
    const int64_t *sections; /* per batch: (offset in the arena, length), offset -1 for a batch read in place */
    const uint8_t *arena;
} decoded_from;

/* What decode_columns writes: NULL pointers for its first pass, which only counts. */
typedef struct {
    int32_t *key_offsets, *value_offsets, *types;
    uint8_t *key_values, *value_values, *key_bits, *value_bits;
    int64_t *offsets, *stamps;
    Py_ssize_t cap_rows; /* what the writing pass may write: the counting pass's sizes */
    int64_t cap_key_bytes, cap_value_bytes;
} decoded_out;

typedef struct {
    Py_ssize_t rows, key_nulls, value_nulls;
    int64_t key_bytes, value_bytes;
} decoded_size;

static inline int put_binary(int32_t *offsets, uint8_t *values, uint8_t *bits, Py_ssize_t k, int64_t *at,
                             int64_t cap, Py_ssize_t *nulls, const uint8_t *body, int64_t pos, int64_t len) {
    if (offsets) offsets[k] = (int32_t)*at;
    if (len < 0) {
        ++*nulls;
        return 0;
    }
    if (values) {
        if (len > cap - *at) return -1; /* more than the counting pass saw: the data changed */
        memcpy(values + *at, body + pos, (size_t)len);
    }
    if (bits) bits[k >> 3] |= (uint8_t)(1u << (k & 7)); /* (no bitmap when nothing is null) */
    *at += len;
    return 0;
}

/* One pass of decode_columns over the run: counts into `size`, and writes into `out` unless its
 * pointers are NULL. Returns 0, or -1 when a record does not decode (see decode_columns). */
static int decode_pass(const uint8_t *d, Py_ssize_t len, const int64_t *t, Py_ssize_t n, const decoded_from *from,
                       long long start, long long end, const decoded_out *out, decoded_size *size) {
    memset(size, 0, sizeof *size);
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t *row = t + 4 * i;
        int codec;
        int64_t count = decodable_count(d, len, row, &codec);
        if (count < 0) return -1; /* (the data changed since it was first looked at) */
        if (!count) continue;
        const uint8_t *h = d + row[0], *body = h + B_HEADER_SIZE;
        Py_ssize_t blen = (Py_ssize_t)(row[1] - B_HEADER_SIZE), p = 0;
        if (from->sections[2 * i] >= 0) {
            body = from->arena + from->sections[2 * i];
            blen = (Py_ssize_t)from->sections[2 * i + 1];
        }
        int lat = (h[B_ATTRIBUTES + 1] & B_TIMESTAMP_TYPE_BIT) != 0;
        int64_t base_ts = load_be64s(h + B_BASE_TIMESTAMP), max_ts = load_be64s(h + B_MAX_TIMESTAMP);
        scan_err err = {0};
        for (int64_t r = 0; r < count; r++) {
            int64_t rec[NCOLS], ms;
            if (p >= blen || (p = scan_one(body, blen, p, rec, &err)) < 0) return -1;
            int64_t offset = (int64_t)((uint64_t)row[2] + (uint64_t)rec[C_OFFSET_DELTA]);
            if (offset < start || offset >= end) continue;
            if (lat) ms = max_ts;
            else if (__builtin_add_overflow(base_ts, rec[C_TS_DELTA], &ms)) return -1;
            if (out->offsets && size->rows >= out->cap_rows) return -1; /* the data changed */
            Py_ssize_t k = size->rows++;
            if (out->offsets) {
                out->offsets[k] = offset;
                out->stamps[k] = (int64_t)((uint64_t)ms * 1000u); /* microseconds, wrapping as numpy's int64 does */
                out->types[k] = lat;
            }
            if (put_binary(out->key_offsets, out->key_values, out->key_bits, k, &size->key_bytes, out->cap_key_bytes,
                           &size->key_nulls, body, rec[C_KEY_POS], rec[C_KEY_LEN]) < 0 ||
                put_binary(out->value_offsets, out->value_values, out->value_bits, k, &size->value_bytes,
                           out->cap_value_bytes, &size->value_nulls, body, rec[C_VAL_POS], rec[C_VAL_LEN]) < 0)
                return -1;
        }
        if (p != blen) return -1; /* bytes after the last record */
    }
    if (out->key_offsets) {
        out->key_offsets[size->rows] = (int32_t)size->key_bytes;
        out->value_offsets[size->rows] = (int32_t)size->value_bytes;
    }
    return 0;
}

/* A bytes object of `n` bytes to fill (zeroed when `zero`), its data in *at. */
static PyObject *new_bytes(Py_ssize_t n, int zero, void *at) {
    PyObject *o = PyBytes_FromStringAndSize(NULL, n);
    if (o && zero) memset(PyBytes_AS_STRING(o), 0, (size_t)n);
    *(char **)at = o ? PyBytes_AS_STRING(o) : NULL;
    return o;
}

static PyObject *decode_columns(PyObject *self, PyObject *args) {
    PyObject *objs[2];
    long long start, end;
    Py_ssize_t max_size;
    if (!PyArg_ParseTuple(args, "OOLLn", &objs[0], &objs[1], &start, &end, &max_size)) return NULL;
    static const int kinds[2] = {B_BYTES, B_I64};
    static const char *const names[2] = {"data", "table"};
    Py_buffer b[2];
    if (take_buffers(2, objs, kinds, names, b) < 0) return NULL;
    if (b[1].len % 32) {
        release_buffers(2, b);
        return PyErr_Format(PyExc_ValueError, "table must hold 4 int64 a batch");
    }
    const uint8_t *d = (const uint8_t *)b[0].buf;
    const Py_ssize_t n = b[1].len / 32, len = b[0].len;
    /* The table as it is now, read under the GIL: another thread may write the caller's array while the
     * passes below run without it, and each row is checked once and then used. */
    int64_t *t = PyMem_Malloc((size_t)(n ? n : 1) * 32);
    if (t) memcpy(t, b[1].buf, (size_t)b[1].len);
    int64_t *sections = PyMem_Malloc(2 * (size_t)(n ? n : 1) * sizeof(int64_t));
    arena decompressed = {0};
    decoders decs = {0};
    decoded_out none = {0}, out;
    decoded_size size;
    PyObject *o[9] = {0}, *res = NULL;
    if (!sections || !t) {
        PyErr_NoMemory();
        goto done;
    }
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        int codec;
        int64_t count = decodable_count(d, len, t + 4 * i, &codec);
        ok = count >= 0 && (!count || !codec || (max_size > 0 && can_decompress(codec)));
        sections[2 * i] = -1;
        sections[2 * i + 1] = count ? codec : -1; /* (until decompressed: its codec, -1 for no records) */
    }
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        int64_t bytes = 0;
        for (Py_ssize_t i = 0; i < n && ok; i++) {
            const int64_t *row = t + 4 * i;
            int codec = (int)sections[2 * i + 1];
            int64_t body = row[1] - B_HEADER_SIZE;
            if (codec < 0) {
                sections[2 * i + 1] = 0;
                continue;
            }
            if (codec) { /* decompressed to the arena; its count checked as an uncompressed batch's is */
                size_t lim = (size_t)max_size < (size_t)(INT32_MAX - bytes) ? (size_t)max_size : (size_t)(INT32_MAX - bytes);
                int64_t got = decompress_section(codec, d + row[0] + B_HEADER_SIZE, (size_t)body, &decompressed,
                                                 &decs, lim);
                int32_t count = (int32_t)load_be32(d + row[0] + B_RECORDS_COUNT);
                ok = got >= 0 && count <= got / 7;
                sections[2 * i] = (int64_t)decompressed.len - got;
                sections[2 * i + 1] = body = got;
            } else {
                sections[2 * i + 1] = 0;
            }
            bytes += body;
            if (bytes > INT32_MAX) ok = 0; /* the result could not hold it: stop before decompressing more */
        }
        /* Counted first, then written into results of their exact sizes: a reader's memory is taken from
         * the system a page at a time, so room that is never written still costs. (int32 offsets: past
         * INT32_MAX bytes the general scan says so.) */
        decoded_from from = {sections, decompressed.data};
        ok = ok && bytes <= INT32_MAX && decode_pass(d, len, t, n, &from, start, end, &none, &size) == 0 &&
             size.key_bytes <= INT32_MAX && size.value_bytes <= INT32_MAX;
        Py_END_ALLOW_THREADS
    }
    if (!ok) {
        res = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t k = size.rows;
    o[0] = new_bytes((k + 1) * 4, 0, &out.key_offsets);
    o[1] = new_bytes((Py_ssize_t)size.key_bytes, 0, &out.key_values);
    o[2] = size.key_nulls ? new_bytes((k + 7) / 8, 1, &out.key_bits) : Py_NewRef(Py_None);
    o[3] = new_bytes((k + 1) * 4, 0, &out.value_offsets);
    o[4] = new_bytes((Py_ssize_t)size.value_bytes, 0, &out.value_values);
    o[5] = size.value_nulls ? new_bytes((k + 7) / 8, 1, &out.value_bits) : Py_NewRef(Py_None);
    o[6] = new_bytes(k * 8, 0, &out.offsets);
    o[7] = new_bytes(k * 8, 0, &out.stamps);
    o[8] = new_bytes(k * 4, 0, &out.types);
    out.cap_rows = k;
    out.cap_key_bytes = size.key_bytes;
    out.cap_value_bytes = size.value_bytes;
    if (!size.key_nulls) out.key_bits = NULL;
    if (!size.value_nulls) out.value_bits = NULL;
    for (int i = 0; i < 9; i++)
        if (!o[i]) goto done;
    if (k) {
        decoded_size again;
        decoded_from from = {sections, decompressed.data};
        Py_BEGIN_ALLOW_THREADS
        ok = decode_pass(d, len, t, n, &from, start, end, &out, &again) == 0 && memcmp(&again, &size, sizeof size) == 0;
        Py_END_ALLOW_THREADS
        if (!ok) { /* the buffer changed between the passes: what was written may be torn */
            PyErr_SetString(PyExc_ValueError, "the data changed while it was decoded");
            goto done;
        }
    } else {
        out.key_offsets[0] = out.value_offsets[0] = 0;
    }
    PyObject *key[4] = {o[0], o[1], o[2], PyLong_FromSsize_t(size.key_nulls)};
    PyObject *value[4] = {o[3], o[4], o[5], PyLong_FromSsize_t(size.value_nulls)};
    PyObject *items[6] = {PyLong_FromSsize_t(k), named(BinaryColumn, 4, key), named(BinaryColumn, 4, value), o[6], o[7], o[8]};
    memset(o, 0, sizeof o); /* each item is now the result's, or freed with it */
    res = named(DecodedColumns, 6, items);
done:
    for (int i = 0; i < 9; i++) Py_XDECREF(o[i]);
    decoders_free(&decs);
    arena_free(&decompressed);
    PyMem_Free(sections);
    PyMem_Free(t);
    release_buffers(2, b);
    return res;
}

/* walk_headers(data, position, segment_base, expected_next, known, upper, gaps_below, out) -> int
 * The compiled form of the header rules of storage/integrity.py's header_problem (the one statement of
 * them, and of their messages; this only counts what passes): from `position` in `data`, consecutive
 * batch headers that are whole in `data` (a size, 12 + batchLength, of at least the 61-byte header and
 * within the buffer) with magic 2, a lastOffsetDelta >= 0, a base offset >= the expected next offset
 * (the segment's base for the first batch), a last offset within 2^31 - 1 of the segment's base and
 * below `upper` (None: no bound), and, once the batch before is known (`known`, always from the second
 * batch on), a base offset that jumps past the expected one only below `gaps_below` (None: anywhere).
 * Each batch that passes writes (position, size, base offset, last offset) as one row of `out` (int64,
 * 4 a row) and sets the next expected offset; the walk stops at the first batch that fails or does not
 * fit, or when `out` is full. Returns the rows written. Offsets are compared exactly (in 128 bits), as
 * Python compares them; a last offset beyond int64 (which no stored batch has) also ends the walk. */
#define MAX_RELATIVE_OFFSET 2147483647LL
#define B_LAST_OFFSET_DELTA 23

static int optional_int64(PyObject *obj, int64_t *value, const char *what) {
    if (obj == Py_None) return 0;
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int or None", what);
        return -1;
    }
    *value = (int64_t)PyLong_AsLongLong(obj);
    return *value == -1 && PyErr_Occurred() ? -1 : 1;
}

static PyObject *walk_headers(PyObject *self, PyObject *args) {
    PyObject *data_obj, *upper_obj, *gaps_obj, *out_obj;
    Py_ssize_t position;
    long long segment_base, expected_next;
    int known;
    if (!PyArg_ParseTuple(args, "OnLLpOOO", &data_obj, &position, &segment_base, &expected_next, &known, &upper_obj,
                          &gaps_obj, &out_obj))
        return NULL;
    int64_t upper = 0, gaps_below = 0;
    int has_upper = optional_int64(upper_obj, &upper, "upper"), has_gaps = optional_int64(gaps_obj, &gaps_below, "gaps_below");
    if (has_upper < 0 || has_gaps < 0) return NULL;
    Py_buffer b[2];
    PyObject *objs[2] = {data_obj, out_obj};
    static const int kinds[2] = {B_BYTES, B_I64_W};
    static const char *const names[2] = {"data", "out"};
    if (take_buffers(2, objs, kinds, names, b) < 0) return NULL;
    if (position < 0 || position > b[0].len) {
        release_buffers(2, b);
        return PyErr_Format(PyExc_ValueError, "position %zd lies outside the data", position);
    }
    const uint8_t *d = (const uint8_t *)b[0].buf;
    const Py_ssize_t len = b[0].len, cap = b[1].len / 32;
    int64_t *out = (int64_t *)b[1].buf;
    const __int128 seg = segment_base;
    __int128 expected = expected_next;
    Py_ssize_t n = 0, p = position;
    while (n < cap && len - p >= B_HEADER_SIZE) {
        const uint8_t *h = d + p;
        int64_t size = 12 + (int64_t)(int32_t)load_be32(h + B_LENGTH);
        if (size < B_HEADER_SIZE || size > len - p || h[B_MAGIC] != 2) break;
        int64_t delta = (int32_t)load_be32(h + B_LAST_OFFSET_DELTA);
        int64_t base = (int64_t)(((uint64_t)load_be32(h + B_BASE_OFFSET) << 32) | load_be32(h + B_BASE_OFFSET + 4));
        __int128 last = (__int128)base + delta;
        if (delta < 0 || base < expected || last - seg > MAX_RELATIVE_OFFSET || (has_upper > 0 && last >= upper)) break;
        if (last > INT64_MAX) break; /* no int64 offset: not stored, and left to the Python rules */
        if (known && has_gaps > 0 && base > (expected > gaps_below ? expected : (__int128)gaps_below)) break;
        int64_t *row = out + 4 * n++;
        row[0] = p;
        row[1] = size;
        row[2] = base;
        row[3] = (int64_t)last;
        expected = last + 1;
        known = 1;
        p += (Py_ssize_t)size;
    }
    release_buffers(2, b);
    return PyLong_FromSsize_t(n);
}

/* ------------------------------------------------------------------------------------------------
 * murmur2 (Kafka's default partitioner).
 */
static int32_t murmur2_raw(const uint8_t *d, Py_ssize_t len) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    Py_ssize_t n4 = len & ~(Py_ssize_t)3;
    for (Py_ssize_t i = 0; i < n4; i += 4) {
        uint32_t k = (uint32_t)d[i] | ((uint32_t)d[i + 1] << 8) | ((uint32_t)d[i + 2] << 16) | ((uint32_t)d[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (len & 3) {
    case 3: h ^= (uint32_t)d[n4 + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)d[n4 + 1] << 8;  /* fall through */
    case 1:
        h ^= d[n4];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *murmur2(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    int32_t h = murmur2_raw((const uint8_t *)b.buf, b.len);
    PyBuffer_Release(&b);
    return PyLong_FromLong(h);
}

/* Kafka's default partition of a key: its murmur2, made positive, modulo the partitions. */
static inline long long kafka_partition(const uint8_t *key, Py_ssize_t len, long long partitions) {
    return ((long long)murmur2_raw(key, len) & 0x7fffffffLL) % partitions;
}

/* partition_spans(key_data, key_spans, num_partitions, out) -> None
 * partition_for_keys for keys given as a column (encode_columns' spans: (position, length), -1 for a null
 * key): out[i] is key i's partition, -1 for a null one. Every span is checked before any is hashed. */
static PyObject *partition_spans(PyObject *self, PyObject *args) {
    PyObject *objs[3];
    long long n;
    if (!PyArg_ParseTuple(args, "OOLO", &objs[0], &objs[1], &n, &objs[2])) return NULL;
    if (n <= 0) return PyErr_Format(PyExc_ValueError, "num_partitions must be positive, got %lld", n);
    static const int kinds[3] = {B_BYTES, B_I64, B_I64_W};
    static const char *const names[3] = {"key_data", "key_spans", "out"};
    Py_buffer b[3];
    if (take_buffers(3, objs, kinds, names, b) < 0) return NULL;
    const Py_ssize_t rows = b[2].len / 8;
    const int64_t *ks = (const int64_t *)b[1].buf;
    int64_t *out = (int64_t *)b[2].buf;
    const uint8_t *kd = (const uint8_t *)b[0].buf;
    Py_ssize_t bad = -1;
    if (b[1].len != 16 * rows) {
        release_buffers(3, b);
        return PyErr_Format(PyExc_ValueError, "key_spans must hold a (position, length) pair per row of out");
    }
    for (Py_ssize_t i = 0; i < rows && bad < 0; i++)
        if (ks[2 * i + 1] != -1 && !span_ok(ks[2 * i], ks[2 * i + 1], b[0].len)) bad = i;
    int changed = 0;
    if (bad < 0) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < rows; i++) {
            /* read once and checked again: out may overlap key_spans, or another thread change them */
            int64_t pos = ks[2 * i], len = ks[2 * i + 1];
            if (len != -1 && !span_ok(pos, len, b[0].len)) {
                changed = 1;
                break;
            }
            out[i] = len == -1 ? -1 : kafka_partition(kd + pos, (Py_ssize_t)len, n);
        }
        Py_END_ALLOW_THREADS
    }
    release_buffers(3, b);
    if (bad >= 0) return PyErr_Format(PyExc_ValueError, "the key of record %zd lies outside key_data", bad);
    if (changed) return PyErr_Format(PyExc_ValueError, "key_spans changed while the keys were hashed");
    Py_RETURN_NONE;
}

static PyObject *partition_for_keys(PyObject *self, PyObject *args) {
    PyObject *keys_obj;
    long long n;
    if (!PyArg_ParseTuple(args, "OL", &keys_obj, &n)) return NULL;
    if (n <= 0) return PyErr_Format(PyExc_ValueError, "num_partitions must be positive, got %lld", n);
    PyObject *keys = PySequence_Fast(keys_obj, "keys must be a sequence");
    if (!keys) return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(keys);
    PyObject *out = PyList_New(len);
    for (Py_ssize_t i = 0; out && i < len; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(keys, i);
        long long p = -1;
        if (k != Py_None) {
            Py_buffer b;
            if (PyObject_GetBuffer(k, &b, PyBUF_SIMPLE) < 0) {
                Py_CLEAR(out);
                break;
            }
            p = kafka_partition((const uint8_t *)b.buf, b.len, n);
            PyBuffer_Release(&b);
        }
        PyObject *item = PyLong_FromLongLong(p);
        if (!item) {
            Py_CLEAR(out); /* unset slots are NULL, which list dealloc skips */
            break;
        }
        PyList_SET_ITEM(out, i, item);
    }
    Py_DECREF(keys);
    return out;
}

/* ------------------------------------------------------------------------------------------------
 * The log cleaner's offset map (Kafka's SkimpyOffsetMap): one flat table of 24-byte slots, each a
 * 16-byte key hash and an int64 offset, open addressing with Kafka's probe sequence. The hash is
 * MurmurHash3 x64-128 instead of Kafka's MD5: same width, so the same (negligible) collision odds,
 * several times faster.
 */

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static void murmur3_128(const uint8_t *data, Py_ssize_t len, uint8_t out[16]) {
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = 0, h2 = 0;
    Py_ssize_t nblocks = len / 16;
    for (Py_ssize_t i = 0; i < nblocks; i++) {
        uint64_t k1, k2;
        memcpy(&k1, data + i * 16, 8);
        memcpy(&k2, data + i * 16 + 8, 8);
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }
    const uint8_t *tail = data + nblocks * 16;
    uint64_t k1 = 0, k2 = 0;
    switch (len & 15) {
    case 15: k2 ^= (uint64_t)tail[14] << 48; /* fall through */
    case 14: k2 ^= (uint64_t)tail[13] << 40; /* fall through */
    case 13: k2 ^= (uint64_t)tail[12] << 32; /* fall through */
    case 12: k2 ^= (uint64_t)tail[11] << 24; /* fall through */
    case 11: k2 ^= (uint64_t)tail[10] << 16; /* fall through */
    case 10: k2 ^= (uint64_t)tail[9] << 8;   /* fall through */
    case 9: k2 ^= (uint64_t)tail[8];
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2; /* fall through */
    case 8: k1 ^= (uint64_t)tail[7] << 56; /* fall through */
    case 7: k1 ^= (uint64_t)tail[6] << 48; /* fall through */
    case 6: k1 ^= (uint64_t)tail[5] << 40; /* fall through */
    case 5: k1 ^= (uint64_t)tail[4] << 32; /* fall through */
    case 4: k1 ^= (uint64_t)tail[3] << 24; /* fall through */
    case 3: k1 ^= (uint64_t)tail[2] << 16; /* fall through */
    case 2: k1 ^= (uint64_t)tail[1] << 8;  /* fall through */
    case 1: k1 ^= (uint64_t)tail[0];
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
    }
    h1 ^= (uint64_t)len; h2 ^= (uint64_t)len;
    h1 += h2; h2 += h1;
    h1 = fmix64(h1); h2 = fmix64(h2);
    h1 += h2; h2 += h1;
    memcpy(out, &h1, 8);
    memcpy(out + 8, &h2, 8);
}

/* Kafka's probe: for attempt i <= 12, abs(int32 BE at hash[i..i+4)) mod slots; then linear from there. */
static inline uint64_t probe_slot(const uint8_t h[16], int64_t attempt, uint64_t slots) {
    int64_t base;
    int i = attempt < 12 ? (int)attempt : 12;
    int32_t v = (int32_t)(((uint32_t)h[i] << 24) | ((uint32_t)h[i + 1] << 16) | ((uint32_t)h[i + 2] << 8) | h[i + 3]);
    base = v == INT32_MIN ? 0 : (v < 0 ? -(int64_t)v : v);
    uint64_t x = (uint64_t)base + (uint64_t)(attempt > 12 ? attempt - 12 : 0);
    return (slots & (slots - 1)) == 0 ? x & (slots - 1) : x % slots; /* a mask is no division */
}

static const uint8_t zero16[16] = {0};

/* The map's 16-byte hash of a key: murmur3, with the all-zero hash (the mark of an empty slot) moved. */
static inline void map_hash(const uint8_t *key, int64_t len, uint8_t h[16]) {
    murmur3_128(key, (Py_ssize_t)len, h);
    if (memcmp(h, zero16, 16) == 0) h[0] = 1;
}

/* Lookups in a table larger than the cache wait on memory, one at a time if nothing helps: put and get
 * hash each row's key LOOKAHEAD rows early and prefetch its first slot, so several misses overlap. The
 * hash of row j waits in ring[j % LOOKAHEAD]; rows that have no key, or one outside the data (which the
 * loop itself reports), get none. */
#define LOOKAHEAD 8
static inline void hash_ahead(const int64_t *c, Py_ssize_t j, Py_ssize_t nrows, const uint8_t *d, Py_ssize_t dlen,
                              const uint8_t *table, uint64_t slots, uint8_t ring[LOOKAHEAD][16]) {
    if (j >= nrows) return;
    const int64_t *r = c + j * NCOLS;
    if (r[C_KEY_LEN] < 0 || !span_ok(r[C_KEY_POS], r[C_KEY_LEN], dlen)) return;
    uint8_t *h = ring[j % LOOKAHEAD];
    map_hash(d + r[C_KEY_POS], r[C_KEY_LEN], h);
    const uint8_t *slot = table + probe_slot(h, 0, slots) * SLOT;
    __builtin_prefetch(slot);
    __builtin_prefetch(slot + SLOT - 1);
}

/* Returns the slot holding hash h, or the empty slot where it would go; *found says which. */
static inline uint8_t *map_find(uint8_t *table, uint64_t slots, const uint8_t h[16], int *found, int64_t *probes) {
    for (int64_t attempt = 0;; attempt++) {
        uint8_t *slot = table + probe_slot(h, attempt, slots) * SLOT;
        (*probes)++;
        if (memcmp(slot, h, 16) == 0) {
            *found = 1;
            return slot;
        }
        if (memcmp(slot, zero16, 16) == 0) {
            int64_t off;
            memcpy(&off, slot + 16, 8);
            if (off == 0) {
                *found = 0;
                return slot;
            }
        }
    }
}

/*
 * offset_map_put(table, slots, max_entries, size, data, cols, base_offset, start_row, min_offset)
 *   -> (size, next_row, full, probes)
 * Puts (key -> offset) for keyed records from start_row on, skipping offsets below min_offset, until the
 * map holds max_entries (Kafka checks fullness before every put, even for a key already present).
 */
static PyObject *offset_map_put(PyObject *self, PyObject *args) {
    PyObject *objs[5] = {NULL, NULL, NULL, Py_None, Py_None}; /* table, data, cols, versions, row_versions */
    long long slots, max_entries, size, base_offset, min_offset;
    Py_ssize_t start_row;
    if (!PyArg_ParseTuple(args, "OLLLOOLnL|OO", &objs[0], &slots, &max_entries, &size, &objs[1], &objs[2], &base_offset,
                          &start_row, &min_offset, &objs[3], &objs[4]))
        return NULL;
    int versioned = objs[3] != Py_None;
    static const int kinds[5] = {B_BYTES_W, B_BYTES, B_COLS, B_I64_W, B_I64};
    static const char *const names[5] = {"table", "data", "cols", "versions", "row_versions"};
    int nb = versioned ? 5 : 3;
    Py_buffer b[5];
    if (take_buffers(nb, objs, kinds, names, b) < 0) return NULL;
    Py_ssize_t nrows = b[2].shape[0], row = start_row < 0 ? 0 : start_row;
    if (slots <= 0 || slots > b[0].len / SLOT || (versioned && (b[3].len / 8 < slots || b[4].len / 8 < nrows))) {
        release_buffers(nb, b);
        return PyErr_Format(PyExc_ValueError, "table too small for %lld slots", slots);
    }
    const int64_t *c = (const int64_t *)b[2].buf;
    const uint8_t *d = (const uint8_t *)b[1].buf;
    uint8_t *table = (uint8_t *)b[0].buf;
    const int64_t *rv = versioned ? (const int64_t *)b[4].buf : NULL;
    int64_t *vt = versioned ? (int64_t *)b[3].buf : NULL;
    int full = 0;
    int64_t probes = 0, last_put = -1, puts = 0;
    Py_ssize_t bad = -1;
    uint8_t ring[LOOKAHEAD][16];
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = row; j < row + LOOKAHEAD; j++) hash_ahead(c, j, nrows, d, b[1].len, table, (uint64_t)slots, ring);
    for (; row < nrows; row++) {
        uint8_t h[16];
        memcpy(h, ring[row % LOOKAHEAD], 16);
        hash_ahead(c, row + LOOKAHEAD, nrows, d, b[1].len, table, (uint64_t)slots, ring);
        const int64_t *r = c + row * NCOLS;
        int64_t off = base_offset + r[C_OFFSET_DELTA];
        if (r[C_KEY_LEN] < 0 || off < min_offset) continue;
        if (!span_ok(r[C_KEY_POS], r[C_KEY_LEN], b[1].len)) {
            bad = row;
            break;
        }
        if (size >= max_entries) {
            full = 1;
            break;
        }
        last_put = off;
        puts++;
        int found;
        uint8_t *slot = map_find(table, (uint64_t)slots, h, &found, &probes);
        if (versioned) {
            /* KIP-280: the highest version wins, ties go to the later offset (offsets only grow here) */
            int64_t *sv = vt + (slot - table) / SLOT;
            if (found && rv[row] < *sv) continue;
            *sv = rv[row];
        }
        if (!found) {
            memcpy(slot, h, 16);
            size++;
        }
        memcpy(slot + 16, &off, 8);
    }
    Py_END_ALLOW_THREADS
    release_buffers(nb, b);
    if (bad >= 0) return row_outside(bad);
    PyObject *items[6] = {PyLong_FromLongLong(size), PyLong_FromSsize_t(row), PyBool_FromLong(full),
                          PyLong_FromLongLong(probes), PyLong_FromLongLong(last_put), PyLong_FromLongLong(puts)};
    return named(MapPut, 6, items);
}

/* offset_map_get(table, slots, data, cols, out[, versions, out_versions]) -> None: out[i] = mapped offset of
 * row i's key, or -1; with versions, out_versions[i] = the mapped version (int64 min when missing). */
static PyObject *offset_map_get(PyObject *self, PyObject *args) {
    PyObject *objs[6] = {NULL, NULL, NULL, NULL, Py_None, Py_None}; /* table, data, cols, out, versions, out_versions */
    long long slots;
    if (!PyArg_ParseTuple(args, "OLOOO|OO", &objs[0], &slots, &objs[1], &objs[2], &objs[3], &objs[4], &objs[5]))
        return NULL;
    int versioned = objs[4] != Py_None;
    static const int kinds[6] = {B_BYTES, B_BYTES, B_COLS, B_I64_W, B_I64, B_I64_W};
    static const char *const names[6] = {"table", "data", "cols", "out", "versions", "out_versions"};
    int nb = versioned ? 6 : 4;
    Py_buffer b[6];
    if (take_buffers(nb, objs, kinds, names, b) < 0) return NULL;
    Py_ssize_t nrows = b[2].shape[0];
    if (b[3].len / 8 < nrows || slots <= 0 || slots > b[0].len / SLOT ||
        (versioned && (b[4].len / 8 < slots || b[5].len / 8 < nrows))) {
        release_buffers(nb, b);
        return PyErr_Format(PyExc_ValueError, "bad offset map or output sizes");
    }
    const int64_t *c = (const int64_t *)b[2].buf;
    uint8_t *table = (uint8_t *)b[0].buf;
    int64_t *o = (int64_t *)b[3].buf;
    const int64_t *vt = versioned ? (const int64_t *)b[4].buf : NULL;
    int64_t *ov = versioned ? (int64_t *)b[5].buf : NULL;
    int64_t probes = 0;
    Py_ssize_t bad = -1;
    const uint8_t *d = (const uint8_t *)b[1].buf;
    uint8_t ring[LOOKAHEAD][16];
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < LOOKAHEAD; j++) hash_ahead(c, j, nrows, d, b[1].len, table, (uint64_t)slots, ring);
    for (Py_ssize_t row = 0; row < nrows; row++) {
        uint8_t h[16];
        memcpy(h, ring[row % LOOKAHEAD], 16);
        hash_ahead(c, row + LOOKAHEAD, nrows, d, b[1].len, table, (uint64_t)slots, ring);
        const int64_t *r = c + row * NCOLS;
        if (r[C_KEY_LEN] < 0) {
            o[row] = -1;
            if (versioned) ov[row] = INT64_MIN;
            continue;
        }
        if (!span_ok(r[C_KEY_POS], r[C_KEY_LEN], b[1].len)) {
            bad = row;
            break;
        }
        int found;
        uint8_t *slot = map_find(table, (uint64_t)slots, h, &found, &probes);
        if (found) memcpy(&o[row], slot + 16, 8);
        else o[row] = -1;
        if (versioned) ov[row] = found ? vt[(slot - table) / SLOT] : INT64_MIN;
    }
    Py_END_ALLOW_THREADS
    release_buffers(nb, b);
    if (bad >= 0) return row_outside(bad);
    Py_RETURN_NONE;
}

/* offset_map_set(table, slots, versions, data, cols, rows, offsets, row_versions): point existing keys
 * of the given rows at new (offset, version) entries (a clean record that outranks the mapped one). */
static PyObject *offset_map_set(PyObject *self, PyObject *args) {
    PyObject *objs[7];
    long long slots;
    if (!PyArg_ParseTuple(args, "OLOOOOOO", &objs[0], &slots, &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6]))
        return NULL;
    static const int kinds[7] = {B_BYTES_W, B_I64_W, B_BYTES, B_COLS, B_I64, B_I64, B_I64};
    static const char *const names[7] = {"table", "versions", "data", "cols", "rows", "offsets", "row_versions"};
    Py_buffer b[7];
    if (take_buffers(7, objs, kinds, names, b) < 0) return NULL;
    const int64_t *c = (const int64_t *)b[3].buf, *rows = (const int64_t *)b[4].buf;
    const int64_t *offs = (const int64_t *)b[5].buf, *vers = (const int64_t *)b[6].buf;
    Py_ssize_t n = b[4].len / 8, nrows = b[3].shape[0];
    uint8_t *table = (uint8_t *)b[0].buf;
    if (slots <= 0 || slots > b[0].len / SLOT || b[1].len / 8 < slots || b[5].len / 8 < n || b[6].len / 8 < n) {
        release_buffers(7, b);
        return PyErr_Format(PyExc_ValueError, "bad offset map or input sizes");
    }
    int64_t probes = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (rows[i] < 0 || rows[i] >= nrows) {
            release_buffers(7, b);
            return PyErr_Format(PyExc_IndexError, "row %lld out of range", (long long)rows[i]);
        }
        const int64_t *r = c + rows[i] * NCOLS;
        if (r[C_KEY_LEN] < 0) continue;
        if (!span_ok(r[C_KEY_POS], r[C_KEY_LEN], b[2].len)) {
            release_buffers(7, b);
            return row_outside((Py_ssize_t)rows[i]);
        }
        uint8_t h[16];
        int found;
        map_hash((const uint8_t *)b[2].buf + r[C_KEY_POS], r[C_KEY_LEN], h);
        uint8_t *slot = map_find(table, (uint64_t)slots, h, &found, &probes);
        if (!found) continue;
        memcpy(slot + 16, &offs[i], 8);
        ((int64_t *)b[1].buf)[(slot - table) / SLOT] = vers[i];
    }
    release_buffers(7, b);
    Py_RETURN_NONE;
}

/* offset_map_grow(table, old_slots, new_slots[, versions]) -> None
 * Re-place the entries of the first old_slots slots over the first new_slots, in place, so a map can
 * start small inside its full allocation and spread out as keys arrive: memory it never needs is never
 * touched. Each entry is taken out and probed for in the larger table; a slot that still holds an entry
 * not yet moved is taken over and that entry carried on in its place. Moved entries are marked by the
 * offset's sign bit (offsets are never negative) until a last sweep clears the marks. */
static PyObject *offset_map_grow(PyObject *self, PyObject *args) {
    PyObject *objs[2] = {NULL, Py_None}; /* table, versions */
    long long old_slots, new_slots;
    if (!PyArg_ParseTuple(args, "OLL|O", &objs[0], &old_slots, &new_slots, &objs[1])) return NULL;
    int versioned = objs[1] != Py_None;
    static const int kinds[2] = {B_BYTES_W, B_I64_W};
    static const char *const names[2] = {"table", "versions"};
    Py_buffer b[2];
    if (take_buffers(versioned ? 2 : 1, objs, kinds, names, b) < 0) return NULL;
    if (old_slots <= 0 || new_slots < old_slots || new_slots > b[0].len / SLOT ||
        (versioned && b[1].len / 8 < new_slots)) {
        release_buffers(versioned ? 2 : 1, b);
        return PyErr_Format(PyExc_ValueError, "cannot grow a map of %lld slots to %lld in this table", old_slots,
                            new_slots);
    }
    uint8_t *table = (uint8_t *)b[0].buf;
    int64_t *vt = versioned ? (int64_t *)b[1].buf : NULL;
    const uint64_t moved = (uint64_t)1 << 63;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < old_slots; i++) {
        uint8_t *slot = table + i * SLOT;
        uint64_t off;
        memcpy(&off, slot + 16, 8);
        if (memcmp(slot, zero16, 16) == 0 || (off & moved)) continue;
        uint8_t h[16];
        memcpy(h, slot, 16);
        int64_t ver = versioned ? vt[i] : 0;
        memset(slot, 0, SLOT);
        if (versioned) vt[i] = 0;
        for (int64_t attempt = 0;; attempt++) { /* carry (h, off, ver) until it lands on a free slot */
            uint64_t p = probe_slot(h, attempt, (uint64_t)new_slots);
            uint8_t *s = table + p * SLOT;
            uint64_t soff;
            memcpy(&soff, s + 16, 8);
            int empty = memcmp(s, zero16, 16) == 0;
            if (!empty && (soff & moved)) continue; /* a moved entry: probe on */
            uint8_t th[16];
            int64_t tver = versioned ? vt[p] : 0;
            memcpy(th, s, 16);
            uint64_t marked = off | moved;
            memcpy(s, h, 16);
            memcpy(s + 16, &marked, 8);
            if (versioned) vt[p] = ver;
            if (empty) break;
            memcpy(h, th, 16); /* an entry not moved yet: it is the one carried now */
            off = soff;
            ver = tver;
            attempt = -1;
        }
    }
    for (int64_t i = 0; i < new_slots; i++) {
        uint64_t off;
        memcpy(&off, table + i * SLOT + 16, 8);
        off &= ~moved;
        memcpy(table + i * SLOT + 16, &off, 8);
    }
    Py_END_ALLOW_THREADS
    release_buffers(versioned ? 2 : 1, b);
    Py_RETURN_NONE;
}

/* header_versions(data, cols, name, out): the version in header `name` of each record, as KIP-280 reads
 * it: an 8-byte big-endian long, or ASCII decimal digits; -1 when the header is missing or unreadable. */
static PyObject *header_versions(PyObject *self, PyObject *args) {
    PyObject *objs[3];
    const char *name;
    Py_ssize_t name_len;
    if (!PyArg_ParseTuple(args, "OOs#O", &objs[0], &objs[1], &name, &name_len, &objs[2])) return NULL;
    static const int kinds[3] = {B_BYTES, B_COLS, B_I64_W};
    static const char *const names[3] = {"data", "cols", "out"};
    Py_buffer b[3];
    if (take_buffers(3, objs, kinds, names, b) < 0) return NULL;
    const uint8_t *d = (const uint8_t *)b[0].buf;
    const int64_t *c = (const int64_t *)b[1].buf;
    int64_t *o = (int64_t *)b[2].buf;
    Py_ssize_t n = b[1].shape[0];
    if (b[2].len / 8 < n) {
        release_buffers(3, b);
        return PyErr_Format(PyExc_ValueError, "out must hold %zd rows", n);
    }
    scan_err err = {0};
    for (Py_ssize_t row = 0; row < n; row++) {
        const int64_t *r = c + row * NCOLS;
        if (!span_ok(r[C_HDR_POS], r[C_END] - r[C_HDR_POS], b[0].len)) {
            release_buffers(3, b);
            return row_outside(row);
        }
        Py_ssize_t pos = (Py_ssize_t)r[C_HDR_POS], end = (Py_ssize_t)r[C_END];
        int64_t v = -1;
        for (int64_t h = 0; h < r[C_HDR_COUNT] && pos >= 0; h++) {
            int64_t kp, kl, vp, vl;
            pos = read_field(d, pos, end, "header key", 0, &kp, &kl, &err);
            if (pos >= 0) pos = read_field(d, pos, end, "header value", 1, &vp, &vl, &err);
            if (pos < 0 || kl != name_len || memcmp(d + kp, name, (size_t)name_len) != 0) continue;
            if (vl == 8) {
                uint64_t u = 0;
                for (int i = 0; i < 8; i++) u = (u << 8) | d[vp + i];
                v = (int64_t)u;
            } else if (vl > 0 && vl <= 18) {
                int64_t acc = 0;
                int ok = 1;
                for (int64_t i = 0; i < vl; i++) {
                    uint8_t ch = d[vp + i];
                    if (ch < '0' || ch > '9') { ok = 0; break; }
                    acc = acc * 10 + (ch - '0');
                }
                if (ok) v = acc;
            }
        }
        o[row] = v;
    }
    release_buffers(3, b);
    Py_RETURN_NONE;
}

static PyObject *key_hash(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    uint8_t h[16];
    murmur3_128((const uint8_t *)b.buf, b.len, h);
    PyBuffer_Release(&b);
    if (memcmp(h, zero16, 16) == 0) h[0] = 1;
    return PyBytes_FromStringAndSize((const char *)h, 16);
}

static PyMethodDef methods[] = {
    {"scan_records", scan_records, METH_VARARGS, "Validate records and write their columns into an int64 array."},
    {"scan_many", scan_many, METH_VARARGS, "Scan several record sections of one buffer into one column table."},
    {"gather_column", gather_column, METH_VARARGS, "One binary column in Arrow's layout."},
    {"gather_records", gather_records, METH_VARARGS, "Concatenate the raw bytes of chosen records."},
    {"summarize_records", summarize_records, METH_VARARGS, "Validate records and return the facts append validation needs."},
    {"decode_records", decode_records, METH_VARARGS, "Decode records into record tuples."},
    {"encode_records", encode_records, METH_VARARGS, "Encode records into an uncompressed records section."},
    {"encode_columns", encode_columns, METH_VARARGS, "Encode records from key, value and header columns."},
    {"rebase_records", rebase_records, METH_VARARGS, "Chosen records with their timestamp deltas moved."},
    {"assemble_batches", assemble_batches, METH_VARARGS, "Batches rebuilt around their kept records, in one call."},
    {"offset_map_put", offset_map_put, METH_VARARGS, "Put keyed records into the cleaner's offset map until it is full."},
    {"offset_map_get", offset_map_get, METH_VARARGS, "Look up each record's key in the cleaner's offset map."},
    {"offset_map_set", offset_map_set, METH_VARARGS, "Point mapped keys at new (offset, version) entries."},
    {"offset_map_grow", offset_map_grow, METH_VARARGS, "Spread a map's entries over more slots, in place."},
    {"header_versions", header_versions, METH_VARARGS, "KIP-280 versions from a named header."},
    {"key_hash", key_hash, METH_O, "The offset map's 16-byte hash of a key."},
    {"crc32c", crc32c, METH_O, "CRC-32C of a buffer."},
    {"scan_batches", scan_batches, METH_VARARGS, "Check whole batches and scan their records where they lie."},
    {"decode_columns", decode_columns, METH_VARARGS, "The Kafka source's columns of a run of batches, in one pass."},
    {"verify_batches", verify_batches, METH_VARARGS, "Check the size, magic and CRC of many batches of one buffer."},
    {"walk_headers", walk_headers, METH_VARARGS, "Walk the batch headers that pass storage.integrity's header rules."},
    {"murmur2", murmur2, METH_O, "Kafka's murmur2 hash as a signed 32-bit int."},
    {"partition_for_keys", partition_for_keys, METH_VARARGS, "Kafka's default partition of each key (-1 for null)."},
    {"partition_spans", partition_spans, METH_VARARGS, "Kafka's default partition of each key of a column (-1 for null)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "Compiled record kernels.", -1, methods};

/* Take a class from results.py; a NamedTuple must have the number of fields this module fills. */
static PyObject *result_class(PyObject *results, const char *name, Py_ssize_t fields) {
    PyObject *cls = PyObject_GetAttrString(results, name);
    if (!cls) return NULL;
    if (fields < 0 ? !PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)PyExc_ValueError)
                   : !PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_Format(PyExc_ImportError, "results.%s is not what the compiled kernels expect", name);
        Py_DECREF(cls);
        return NULL;
    }
    if (fields >= 0) {
        PyObject *f = PyObject_GetAttrString(cls, "_fields");
        Py_ssize_t n = f ? PyObject_Length(f) : -1;
        Py_XDECREF(f);
        if (n != fields) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ImportError, "results.%s has %zd fields, the compiled kernels fill %zd: rebuild them",
                             name, n, fields);
            Py_DECREF(cls);
            return NULL;
        }
    }
    return cls;
}

/* LAYOUT (every column number and NCOLS, SLOT) and POSITION_COLUMNS, as this module was compiled. */
static int add_layout(PyObject *m) {
    static const struct { const char *name; int value; } columns[] = LAYOUT_COLUMNS;
    static const int shifted[NPOSITION_COLUMNS] = POSITION_COLUMNS_INIT;
    PyObject *layout = PyDict_New(), *pos = PyTuple_New(NPOSITION_COLUMNS);
    int ok = layout && pos;
    for (size_t i = 0; ok && i < sizeof columns / sizeof columns[0]; i++) {
        PyObject *v = PyLong_FromLong(columns[i].value);
        ok = v && PyDict_SetItemString(layout, columns[i].name, v) == 0;
        Py_XDECREF(v);
    }
    for (int k = 0; ok && k < NPOSITION_COLUMNS; k++) {
        PyObject *v = PyLong_FromLong(shifted[k]);
        ok = v != NULL;
        if (ok) PyTuple_SET_ITEM(pos, k, v);
    }
    PyObject *ncols = ok ? PyLong_FromLong(NCOLS) : NULL, *slot = ok ? PyLong_FromLong(SLOT) : NULL;
    ok = ok && ncols && slot && PyDict_SetItemString(layout, "NCOLS", ncols) == 0 &&
         PyDict_SetItemString(layout, "SLOT", slot) == 0;
    Py_XDECREF(ncols);
    Py_XDECREF(slot);
    ok = ok && PyModule_AddObjectRef(m, "LAYOUT", layout) == 0 && PyModule_AddObjectRef(m, "POSITION_COLUMNS", pos) == 0;
    PyObject *header = ok ? Py_BuildValue("{sisisisisisi}", "baseOffset", B_BASE_OFFSET, "batchLength", B_LENGTH, "magic",
                                          B_MAGIC, "crc", B_CRC, "attributes", B_ATTRIBUTES, "size", B_HEADER_SIZE)
                          : NULL;
    ok = header && PyModule_AddObjectRef(m, "BATCH_HEADER", header) == 0;
    Py_XDECREF(header);
    Py_XDECREF(layout);
    Py_XDECREF(pos);
    return ok ? 0 : -1;
}

PyMODINIT_FUNC PyInit__native(void) {
    crc_init();
    PyObject *results = PyImport_ImportModule("compactlog.records.results");
    if (!results) return NULL;
    Py_CLEAR(KernelError);
    Py_CLEAR(RecordsSummary);
    Py_CLEAR(BinaryColumn);
    Py_CLEAR(MapPut);
    Py_CLEAR(DecodedColumns);
    KernelError = result_class(results, "KernelError", -1);
    RecordsSummary = KernelError ? result_class(results, "RecordsSummary", 5) : NULL;
    BinaryColumn = RecordsSummary ? result_class(results, "BinaryColumn", 4) : NULL;
    MapPut = BinaryColumn ? result_class(results, "MapPut", 6) : NULL;
    DecodedColumns = MapPut ? result_class(results, "DecodedColumns", 6) : NULL;
    Py_DECREF(results);
    if (!DecodedColumns) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && add_layout(m) < 0) Py_CLEAR(m);
    return m;
}
