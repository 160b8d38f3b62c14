/*
 * Long double arithmetic for INCRBYFLOAT and HINCRBYFLOAT (see long_double.rs for why it is C).
 *
 * Redis 7.0 parses both operands with strtold, adds them as long double, and stores the sum printed with
 * "%.17Lf" and its trailing fractional zeros removed; "-0" becomes "0". Doing the same with the platform's
 * own long double and libc gives the same text byte for byte (x86-64: the 80-bit x87 format).
 *
 * The process never calls setlocale, so the "C" locale is in force: '.' is the decimal point.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest accepted operand text (exclusive) and the size of the result buffer: Redis's 5 KiB. */
#define SHALEDB_LD_TEXT_MAX 5120

/* 1 and the value in *out if `s` is a number by Redis's rules: the whole text read, no leading space, no
 * NaN, no overflow to infinity or underflow to zero (an explicit "inf" is a number); 0 otherwise. */
static int shaledb_ld_read(const unsigned char *s, size_t len, long double *out) {
    char buf[SHALEDB_LD_TEXT_MAX];
    char *end = NULL;
    long double v;

    if (len == 0 || len >= sizeof buf) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (isspace((unsigned char)buf[0])) return 0;
    errno = 0;
    v = strtold(buf, &end);
    /* An embedded NUL stops strtold before `len`. */
    if (end == NULL || *end != '\0' || (size_t)(end - buf) != len) return 0;
    if (errno == ERANGE && (isinf(v) || v == 0.0L)) return 0;
    if (errno == EINVAL || isnan(v)) return 0;
    *out = v;
    return 1;
}

/* 0: not a number; 1: a finite number; 2: an infinite one. */
int shaledb_ld_classify(const unsigned char *s, size_t len) {
    long double v;
    if (!shaledb_ld_read(s, len, &v)) return 0;
    return isinf(v) ? 2 : 1;
}

/*
 * (`has_old` ? old : 0) + by, printed into `out` (`out_cap` bytes, at least SHALEDB_LD_TEXT_MAX) with its
 * length in *out_len. Returns 0 on success, 1 if `old` is not a number, 2 if `by` is not a number, 3 if the sum
 * is NaN or infinite. The old value is checked first, as Redis does.
 */
int shaledb_ld_add(const unsigned char *old, size_t old_len, int has_old, const unsigned char *by, size_t by_len,
                   char *out, size_t out_cap, size_t *out_len) {
    long double a = 0.0L, b, sum;
    int n;
    size_t l;

    *out_len = 0;
    if (has_old && !shaledb_ld_read(old, old_len, &a)) return 1;
    if (!shaledb_ld_read(by, by_len, &b)) return 2;
    sum = a + b;
    if (isnan(sum) || isinf(sum)) return 3;

    n = snprintf(out, out_cap, "%.17Lf", sum);
    /* Too long for the buffer: Redis stores an empty text then (a finite long double never needs 5 KiB). */
    if (n < 0 || (size_t)n + 1 > out_cap) return 0;
    l = (size_t)n;
    if (memchr(out, '.', l) != NULL) {
        while (l > 0 && out[l - 1] == '0') l--;
        if (l > 0 && out[l - 1] == '.') l--;
    }
    if (l == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        l = 1;
    }
    *out_len = l;
    return 0;
}
