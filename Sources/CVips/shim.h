// libvips' public calls are variadic (NULL-terminated option lists); Swift cannot
// call C variadics, so each call the project needs gets a fixed-argument wrapper.
//
// libvips is not linked: it is opened (dlopen) the first time a still image or a chart is
// made. Linked, it and the 30-odd libraries only it brings (OpenEXR, HDF5, FITS, matio,
// ImageMagick's …) were loaded and relocated at every start of `upscale`, also for every
// video job. Every libvips function used here, by these wrappers or by Swift through the
// `upscale_`-prefixed wrappers below, goes through one table of pointers whose types come
// from libvips' own headers; the names below are macros for the table's entries.
#ifndef UPSCALE_CVIPS_SHIM_H
#define UPSCALE_CVIPS_SHIM_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <vips/vips.h>

#define UPSCALE_VIPS_CALLS(X) \
    X(vips_init) X(vips_error_buffer) X(vips_error_clear) X(vips_enum_nick) X(vips_interpretation_get_type) \
    X(vips_image_new_from_file) X(vips_image_new_from_memory) X(vips_image_copy_memory) \
    X(vips_image_write_to_memory) X(vips_image_write_to_file) X(vips_image_get_width) X(vips_image_get_height) \
    X(vips_image_get_bands) X(vips_image_get_format) X(vips_image_get_interpretation) X(vips_image_get_typeof) \
    X(vips_image_get_int) X(vips_image_set_int) X(vips_image_get_blob) X(vips_image_set_blob_copy) \
    X(vips_image_get_fields) X(vips_image_get_string) X(vips_image_set_string) \
    X(vips_foreign_find_save) X(vips_profile_load) X(vips_rawload) X(vips_autorot) X(vips_colourspace) \
    X(vips_cast) X(vips_extract_band) X(vips_resize) X(vips_shrink) X(vips_pngsave) X(vips_text) X(vips_copy) \
    X(vips_bandjoin2) X(vips_arrayjoin) X(vips_crop) X(vips_icc_export) X(vips_icc_transform) \
    X(vips_linear1) X(vips_max) X(vips_image_decode) X(vips_area_unref)

typedef struct {
#define UPSCALE_VIPS_ENTRY(name) __typeof__(&name) name;
    UPSCALE_VIPS_CALLS(UPSCALE_VIPS_ENTRY)
#undef UPSCALE_VIPS_ENTRY
    /// Why libvips could not be opened (empty when it was).
    char failure[512];
} upscale_vips_table;

// Storage as function-local statics: Swift emits the header's inline functions but not its
// file-scope variables.
static inline upscale_vips_table *upscale_vips_storage(void) {
    static upscale_vips_table table;
    return &table;
}

static inline void upscale_vips_load_library(void) {
    upscale_vips_table *loaded = upscale_vips_storage();
    const int abi = VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE;
    char name[64];
    snprintf(name, sizeof name, "libvips.so.%d", abi);
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *reason = dlerror();
        snprintf(loaded->failure, sizeof loaded->failure, "%s cannot be opened (%s); apt-get install libvips%d",
                 name, reason ? reason : "not found", abi);
        return;
    }
#define UPSCALE_VIPS_FIND(entry) \
    loaded->entry = (__typeof__(&entry))dlsym(library, #entry); \
    if (!loaded->entry) { \
        snprintf(loaded->failure, sizeof loaded->failure, "%s has no %s", name, #entry); \
        return; \
    }
    UPSCALE_VIPS_CALLS(UPSCALE_VIPS_FIND)
#undef UPSCALE_VIPS_FIND
}

/// The table, opened on the first call (from any thread, once).
static inline const upscale_vips_table *upscale_vips(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, upscale_vips_load_library);
    return upscale_vips_storage();
}

// From here on each libvips name calls through the table.
#define vips_init (upscale_vips()->vips_init)
#define vips_error_buffer (upscale_vips()->vips_error_buffer)
#define vips_error_clear (upscale_vips()->vips_error_clear)
#define vips_enum_nick (upscale_vips()->vips_enum_nick)
#define vips_interpretation_get_type (upscale_vips()->vips_interpretation_get_type)
#define vips_image_new_from_file (upscale_vips()->vips_image_new_from_file)
#define vips_image_new_from_memory (upscale_vips()->vips_image_new_from_memory)
#define vips_image_copy_memory (upscale_vips()->vips_image_copy_memory)
#define vips_image_write_to_memory (upscale_vips()->vips_image_write_to_memory)
#define vips_image_write_to_file (upscale_vips()->vips_image_write_to_file)
#define vips_image_get_width (upscale_vips()->vips_image_get_width)
#define vips_image_get_height (upscale_vips()->vips_image_get_height)
#define vips_image_get_bands (upscale_vips()->vips_image_get_bands)
#define vips_image_get_format (upscale_vips()->vips_image_get_format)
#define vips_image_get_interpretation (upscale_vips()->vips_image_get_interpretation)
#define vips_image_get_typeof (upscale_vips()->vips_image_get_typeof)
#define vips_image_get_int (upscale_vips()->vips_image_get_int)
#define vips_image_set_int (upscale_vips()->vips_image_set_int)
#define vips_image_get_blob (upscale_vips()->vips_image_get_blob)
#define vips_image_set_blob_copy (upscale_vips()->vips_image_set_blob_copy)
#define vips_image_get_fields (upscale_vips()->vips_image_get_fields)
#define vips_image_get_string (upscale_vips()->vips_image_get_string)
#define vips_image_set_string (upscale_vips()->vips_image_set_string)
#define vips_foreign_find_save (upscale_vips()->vips_foreign_find_save)
#define vips_profile_load (upscale_vips()->vips_profile_load)
#define vips_rawload (upscale_vips()->vips_rawload)
#define vips_autorot (upscale_vips()->vips_autorot)
#define vips_colourspace (upscale_vips()->vips_colourspace)
#define vips_cast (upscale_vips()->vips_cast)
#define vips_extract_band (upscale_vips()->vips_extract_band)
#define vips_resize (upscale_vips()->vips_resize)
#define vips_shrink (upscale_vips()->vips_shrink)
#define vips_pngsave (upscale_vips()->vips_pngsave)
#define vips_text (upscale_vips()->vips_text)
#define vips_copy (upscale_vips()->vips_copy)
#define vips_bandjoin2 (upscale_vips()->vips_bandjoin2)
#define vips_arrayjoin (upscale_vips()->vips_arrayjoin)
#define vips_crop (upscale_vips()->vips_crop)
#define vips_icc_export (upscale_vips()->vips_icc_export)
#define vips_icc_transform (upscale_vips()->vips_icc_transform)
#define vips_linear1 (upscale_vips()->vips_linear1)
#define vips_max (upscale_vips()->vips_max)
#define vips_image_decode (upscale_vips()->vips_image_decode)
#define vips_area_unref (upscale_vips()->vips_area_unref)

static inline void upscale_vips_drop_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {}

/// Opens and starts libvips; 0 on success, else -1 with the reason in
/// `upscale_vips_failure()`. Its warnings (a damaged tile, a truncated file) go nowhere:
/// the failure they lead to is reported once, in one line, by the caller.
static inline int upscale_vips_init(const char *argv0) {
    if (upscale_vips()->failure[0]) return -1;
    int status = vips_init(argv0);
    g_log_set_handler("VIPS", (GLogLevelFlags)(G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO), upscale_vips_drop_log, NULL);
    return status;
}

/// Why libvips could not be opened, or "".
static inline const char *upscale_vips_failure(void) { return upscale_vips()->failure; }

// The calls Swift makes itself (Swift sees the headers' declarations, not the macros above).
static inline const char *upscale_vips_error_buffer(void) { return vips_error_buffer(); }
static inline void upscale_vips_error_clear(void) { vips_error_clear(); }
static inline const char *upscale_vips_interpretation_name(VipsInterpretation space) {
    return vips_enum_nick(vips_interpretation_get_type(), space);
}
static inline VipsImage *upscale_vips_from_memory(const void *data, size_t size, int width, int height, int bands, VipsBandFormat format) {
    return vips_image_new_from_memory(data, size, width, height, bands, format);
}
static inline VipsImage *upscale_vips_copy_memory(VipsImage *image) { return vips_image_copy_memory(image); }
static inline void *upscale_vips_to_memory(VipsImage *image, size_t *size) { return vips_image_write_to_memory(image, size); }
static inline int upscale_vips_width(const VipsImage *image) { return vips_image_get_width(image); }
static inline int upscale_vips_height(const VipsImage *image) { return vips_image_get_height(image); }
static inline int upscale_vips_bands(const VipsImage *image) { return vips_image_get_bands(image); }
static inline VipsBandFormat upscale_vips_format(const VipsImage *image) { return vips_image_get_format(image); }
static inline VipsInterpretation upscale_vips_interpretation(const VipsImage *image) { return vips_image_get_interpretation(image); }
static inline int upscale_vips_has(const VipsImage *image, const char *name) { return vips_image_get_typeof(image, name) != 0; }
static inline void upscale_vips_set_int(VipsImage *image, const char *name, int value) { vips_image_set_int(image, name, value); }
static inline int upscale_vips_get_blob(VipsImage *image, const char *name, const void **data, size_t *length) {
    return vips_image_get_blob(image, name, data, length);
}
static inline int upscale_vips_can_save(const char *name) { return vips_foreign_find_save(name) != NULL; }

/// Loads an image from a file; sequential access is enough for a single read-through.
static inline VipsImage *upscale_vips_load(const char *path) {
    return vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
}

static inline int upscale_vips_autorot(VipsImage *in, VipsImage **out) { return vips_autorot(in, out, NULL); }
static inline int upscale_vips_colourspace(VipsImage *in, VipsImage **out, VipsInterpretation space) {
    return vips_colourspace(in, out, space, NULL);
}
static inline int upscale_vips_cast_uchar(VipsImage *in, VipsImage **out) { return vips_cast(in, out, VIPS_FORMAT_UCHAR, NULL); }
static inline int upscale_vips_extract_band(VipsImage *in, VipsImage **out, int band) {
    return vips_extract_band(in, out, band, NULL);
}
static inline int upscale_vips_resize_lanczos3(VipsImage *in, VipsImage **out, double scale) {
    return vips_resize(in, out, scale, "kernel", VIPS_KERNEL_LANCZOS3, NULL);
}
static inline int upscale_vips_shrink(VipsImage *in, VipsImage **out, double factor) {
    return vips_shrink(in, out, factor, factor, NULL);
}
static inline int upscale_vips_pngsave(VipsImage *in, const char *path) { return vips_pngsave(in, path, NULL); }
static inline int upscale_vips_text(VipsImage **out, const char *text, const char *font) {
    return vips_text(out, text, "font", font, "dpi", 96, NULL);
}
static inline void upscale_vips_unref(VipsImage *image) { g_object_unref(image); }

/// Loads the first page/frame of an image with random access (stills are decoded whole).
/// Decoding stops at the first error (a truncated or damaged file fails instead of being
/// filled with gray).
static inline VipsImage *upscale_vips_open(const char *path) {
    return vips_image_new_from_file(path, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}
/// Page `page` of a file of several (an icon's sizes), as `upscale_vips_open` loads page 0.
static inline VipsImage *upscale_vips_open_page(const char *path, int page) {
    return vips_image_new_from_file(path, "page", page, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}
/// Saves by the file name's suffix; saver options may follow in brackets ("x.jpg[Q=90,strip]").
static inline int upscale_vips_write(VipsImage *in, const char *path) { return vips_image_write_to_file(in, path, NULL); }
static inline int upscale_vips_cast(VipsImage *in, VipsImage **out, VipsBandFormat format) { return vips_cast(in, out, format, NULL); }
/// A cast that shifts integer samples to the new width (32-bit to 16-bit: the top 16 bits)
/// instead of clipping them.
static inline int upscale_vips_cast_shift(VipsImage *in, VipsImage **out, VipsBandFormat format) {
    return vips_cast(in, out, format, "shift", TRUE, NULL);
}
/// Every sample times `factor`, then cast to `format` (clipped to its range): signed samples
/// stretched so that their largest positive value is the new format's white.
static inline int upscale_vips_scale_cast(VipsImage *in, VipsImage **out, double factor, VipsBandFormat format) {
    VipsImage *scaled = NULL;
    if (vips_linear1(in, &scaled, factor, 0.0, NULL)) return -1;
    int status = vips_cast(scaled, out, format, NULL);
    g_object_unref(scaled);
    return status;
}
/// A packed image unpacked: Radiance's RGBE (coding "rad") to Float scRGB, LABQ to Lab;
/// an unpacked image is only referenced again.
static inline int upscale_vips_decode(VipsImage *in, VipsImage **out) { return vips_image_decode(in, out); }
/// Whether the image's samples are packed (Radiance RGBE, LABQ) rather than plain numbers.
static inline int upscale_vips_coded(const VipsImage *in) { return in->Coding != VIPS_CODING_NONE; }
/// The largest sample of any band (the whole picture is decoded for it).
static inline int upscale_vips_max(VipsImage *in, double *largest) { return vips_max(in, largest, NULL); }
static inline int upscale_vips_copy_as(VipsImage *in, VipsImage **out, VipsInterpretation space) {
    return vips_copy(in, out, "interpretation", space, NULL);
}
/// The EXIF orientation libvips read (1 when none).
static inline int upscale_vips_orientation(VipsImage *in) {
    int orientation = 1;
    if (vips_image_get_typeof(in, "orientation")) vips_image_get_int(in, "orientation", &orientation);
    return orientation;
}
static inline int upscale_vips_pages(VipsImage *in) {
    int pages = 1;
    if (vips_image_get_typeof(in, "n-pages")) vips_image_get_int(in, "n-pages", &pages);
    return pages;
}
/// One of libvips' built-in ICC profiles ("srgb", "p3", "cmyk"), or NULL.
static inline VipsBlob *upscale_vips_profile(const char *name) {
    VipsBlob *blob = NULL;
    if (vips_profile_load(name, &blob, NULL)) return NULL;
    return blob;
}
/// A blob's bytes and length (a VipsBlob is a VipsArea).
static inline const void *upscale_vips_blob_bytes(VipsBlob *blob, size_t *length) {
    *length = ((VipsArea *)blob)->length;
    return ((VipsArea *)blob)->data;
}
static inline void upscale_vips_blob_unref(VipsBlob *blob) { vips_area_unref((VipsArea *)blob); }
/// A headerless file of interleaved samples (mapped, so saving it streams).
static inline VipsImage *upscale_vips_rawload(const char *path, int width, int height, int bands, VipsBandFormat format) {
    VipsImage *out = NULL;
    if (vips_rawload(path, &out, width, height, bands, "format", format, NULL)) return NULL;
    return out;
}
static inline int upscale_vips_bandjoin2(VipsImage *a, VipsImage *b, VipsImage **out) { return vips_bandjoin2(a, b, out, NULL); }
static inline int upscale_vips_arrayjoin(VipsImage **in, VipsImage **out, int n, int across) {
    return vips_arrayjoin(in, out, n, "across", across, NULL);
}
static inline int upscale_vips_crop(VipsImage *in, VipsImage **out, int left, int top, int width, int height) {
    return vips_crop(in, out, left, top, width, height, NULL);
}
static inline int upscale_vips_icc_export(VipsImage *in, VipsImage **out, const char *profile) {
    return vips_icc_export(in, out, "output_profile", profile, NULL);
}
/// `in`'s pixels from its embedded ICC profile to sRGB, at `depth` bits (8 or 16).
static inline int upscale_vips_to_srgb(VipsImage *in, VipsImage **out, int depth) {
    return vips_icc_transform(in, out, "srgb", "embedded", TRUE, "depth", depth, NULL);
}
static inline int upscale_vips_save_plain(VipsImage *in, const char *path) { return vips_image_write_to_file(in, path, NULL); }
static inline void upscale_vips_set_blob_copy(VipsImage *image, const char *name, const void *data, size_t length) {
    vips_image_set_blob_copy(image, name, data, length);
}
/// Copies every text field of `from` whose name starts with `prefix` to `to` (a PNG's text
/// chunks load as "png-comment-N-key"); returns how many. With `to` NULL, only counts them.
static inline int upscale_vips_copy_strings(VipsImage *from, VipsImage *to, const char *prefix) {
    gchar **names = vips_image_get_fields(from);
    int copied = 0;
    size_t length = strlen(prefix);
    for (gchar **name = names; name && *name; name++) {
        const char *value = NULL;
        if (strncmp(*name, prefix, length) != 0 || vips_image_get_string(from, *name, &value) != 0) continue;
        if (to) vips_image_set_string(to, *name, value);
        copied++;
    }
    g_strfreev(names);
    return copied;
}

#endif
