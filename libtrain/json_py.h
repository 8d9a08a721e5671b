/* json_py.h -- JSON files as Python's json module reads them, for the files
 * of a Hugging Face model directory (config.json, tokenizer_config.json,
 * generation_config.json, tokenizer.json, ...), which transformers writes
 * with Python's json.dump.
 *
 * Python writes (and reads) integers of any size and the constants NaN,
 * Infinity and -Infinity; jansson refuses them all ("too big integer",
 * "invalid token").  Before jansson parses the text, each such number outside
 * a string is rewritten:
 *   - an integer outside 64 bits becomes the real nearest to it (what
 *     Python's float(x) gives; e.g. model_max_length int(1e30) reads as
 *     1e30, "no limit");
 *   - an integer or real beyond the range of a double, NaN, Infinity and
 *     -Infinity become null (a value no reader of ztrain's uses; a reader
 *     that needs the key finds a null and names it).
 * Everything else (and the line numbers of jansson's errors) is unchanged. */
#ifndef ZT_JSON_PY_H
#define ZT_JSON_PY_H
#include <jansson.h>
#include <stddef.h>

json_t *zt_json_loadb_py(const char *buf, size_t n, size_t flags, json_error_t *err);
/* The file at path (jansson's error "unable to open" when it cannot be read). */
json_t *zt_json_load_file_py(const char *path, size_t flags, json_error_t *err);

#endif
