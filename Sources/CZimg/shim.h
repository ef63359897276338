// zimg's API version is a function-like macro; Swift needs it as a function.
#ifndef UPSCALE_CZIMG_SHIM_H
#define UPSCALE_CZIMG_SHIM_H
#include <zimg.h>
static inline unsigned upscale_zimg_api_version(void) { return ZIMG_API_VERSION; }
static inline unsigned upscale_zimg_buffer_max(void) { return ZIMG_BUFFER_MAX; }
// The buffers' plane arrays are anonymous structs, which Swift does not import.
static inline void upscale_zimg_set_source_plane(zimg_image_buffer_const *b, int i, const void *data, ptrdiff_t stride) {
    b->plane[i].data = data;
    b->plane[i].stride = stride;
    b->plane[i].mask = ZIMG_BUFFER_MAX;
}
static inline void upscale_zimg_set_destination_plane(zimg_image_buffer *b, int i, void *data, ptrdiff_t stride) {
    b->plane[i].data = data;
    b->plane[i].stride = stride;
    b->plane[i].mask = ZIMG_BUFFER_MAX;
}
#endif
