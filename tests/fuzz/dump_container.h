/* dump_container.h — one byte string holding a whole dump directory, for the
 * dump fuzzer (tests/fuzz/fuzz_dump.c) and its seeds (tests/fuzz/dump_seeds/).
 *
 * Container: up to six files in this fixed order
 *     manifest.json, tokens.bin, seq-0.bin, seq-0.ext.bin, seq-1.bin, seq-1.ext.bin
 * each as a uint16 little-endian length followed by that many bytes. A file
 * whose length field is cut off is absent (so is every later one); a file
 * whose bytes run past the end gets the bytes that remain. Trailing bytes
 * after the sixth file are ignored. Two sequences are enough to reach every
 * reader path; lengths of 16 bits keep mutated sizes reasonable. */
#ifndef KLD_FUZZ_DUMP_CONTAINER_H
#define KLD_FUZZ_DUMP_CONTAINER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DC_N_FILES 6
static const char *const dc_names[DC_N_FILES] = {"manifest.json", "tokens.bin", "seq-0.bin",
                                                 "seq-0.ext.bin", "seq-1.bin",  "seq-1.ext.bin"};

/* Writes the files of the container into dir (which exists) and removes the
 * ones it does not hold. False when a file cannot be written. */
static inline bool dc_unpack(const uint8_t *data, size_t size, const char *dir) {
    char path[4096];
    size_t pos = 0;
    bool present = true;
    for (int i = 0; i < DC_N_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, dc_names[i]);
        if (present && size - pos < 2) present = false;
        if (!present) {
            unlink(path);
            continue;
        }
        size_t n = (size_t)data[pos] | (size_t)data[pos + 1] << 8;
        pos += 2;
        if (n > size - pos) n = size - pos;
        FILE *f = fopen(path, "wb");
        if (!f) return false;
        bool ok = n == 0 || fwrite(data + pos, 1, n, f) == n;
        if (fclose(f) != 0 || !ok) return false;
        pos += n;
    }
    return true;
}

/* Packs the files of dir (missing ones as empty, except that the container
 * stops at the last present file) into out; returns the length or 0 when
 * out is too small or a file is longer than 65535 bytes. */
static inline size_t dc_pack(const char *dir, uint8_t *out, size_t cap) {
    char path[4096];
    size_t pos = 0, end = 0;
    for (int i = 0; i < DC_N_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, dc_names[i]);
        FILE *f = fopen(path, "rb");
        if (pos + 2 > cap) return 0;
        size_t n = 0;
        if (f) {
            n = fread(out + pos + 2, 1, cap - pos - 2, f);
            bool more = fgetc(f) != EOF;
            fclose(f);
            if (more || n > 65535) return 0;
        }
        out[pos] = (uint8_t)(n & 0xff);
        out[pos + 1] = (uint8_t)(n >> 8);
        pos += 2 + n;
        if (f) end = pos;
    }
    return end;
}

#endif
