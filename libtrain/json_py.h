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
 *   - NaN, Infinity and -Infinity, and a real beyond the range of a double
 *     (Python: inf), become the strings "NaN", "Infinity", "-Infinity"; an
 *     integer beyond the range of a double becomes the string of its digits:
 *     a key ztrain reads as a number refuses such a value, naming the key
 *     (never a silent default), and a key it does not use ignores it.
 * Everything else (and the line numbers of jansson's errors) is unchanged. */
#ifndef ZT_JSON_PY_H
#define ZT_JSON_PY_H
#include <jansson.h>
#include <stddef.h>

json_t *zt_json_loadb_py(const char *buf, size_t n, size_t flags, json_error_t *err);
/* The file at path (jansson's error "unable to open" when it cannot be read). */
json_t *zt_json_load_file_py(const char *path, size_t flags, json_error_t *err);

#endif
