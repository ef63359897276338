// libvips' public calls are variadic (NULL-terminated option lists); Swift cannot
// call C variadics, so each call the project needs gets a fixed-argument wrapper.
#ifndef UPSCALE_CVIPS_SHIM_H
#define UPSCALE_CVIPS_SHIM_H

#include <vips/vips.h>

static inline void upscale_vips_drop_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {}

/// Starts libvips. Its warnings (a damaged tile, a truncated file) go nowhere: the failure
/// they lead to is reported once, in one line, by the caller.
static inline int upscale_vips_init(const char *argv0) {
    int status = VIPS_INIT(argv0);
    g_log_set_handler("VIPS", (GLogLevelFlags)(G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO), upscale_vips_drop_log, NULL);
    return status;
}

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
/// Saves by the file name's suffix; saver options may follow in brackets ("x.jpg[Q=90,strip]").
static inline int upscale_vips_write(VipsImage *in, const char *path) { return vips_image_write_to_file(in, path, NULL); }
static inline int upscale_vips_cast(VipsImage *in, VipsImage **out, VipsBandFormat format) { return vips_cast(in, out, format, NULL); }
static inline int upscale_vips_copy_as(VipsImage *in, VipsImage **out, VipsInterpretation space) {
    return vips_copy(in, out, "interpretation", space, NULL);
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
static inline int upscale_vips_save_plain(VipsImage *in, const char *path) { return vips_image_write_to_file(in, path, NULL); }
static inline void upscale_vips_set_blob_copy(VipsImage *image, const char *name, const void *data, size_t length) {
    vips_image_set_blob_copy(image, name, data, length);
}

#endif
