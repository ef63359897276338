// Small inline wrappers for FFmpeg macros that Swift cannot import
// (function-like macros, compound literals, casted constants).
#ifndef UPSCALE_CFFMPEG_SHIM_H
#define UPSCALE_CFFMPEG_SHIM_H

#include <errno.h>
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libavutil/avutil.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/dovi_meta.h>
#include <libavutil/hdr_dynamic_metadata.h>
#include <libavutil/hwcontext.h>
#include <libavutil/imgutils.h>
#include <libavutil/mastering_display_metadata.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libavutil/spherical.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

// libavfilter is not linked: the deinterlacer opens it with dlopen the first time it is
// needed (it and the 30-odd libraries it brings add ~10 ms to every start). Its calls go
// through pointers of these types, declared from the headers so they cannot drift.
typedef __typeof__(&avfilter_graph_alloc) upscale_avfilter_graph_alloc_fn;
typedef __typeof__(&avfilter_graph_free) upscale_avfilter_graph_free_fn;
typedef __typeof__(&avfilter_get_by_name) upscale_avfilter_get_by_name_fn;
typedef __typeof__(&avfilter_graph_create_filter) upscale_avfilter_graph_create_filter_fn;
typedef __typeof__(&avfilter_link) upscale_avfilter_link_fn;
typedef __typeof__(&avfilter_graph_config) upscale_avfilter_graph_config_fn;
typedef __typeof__(&av_buffersrc_add_frame_flags) upscale_av_buffersrc_add_frame_flags_fn;
typedef __typeof__(&av_buffersink_get_frame) upscale_av_buffersink_get_frame_fn;
typedef __typeof__(&av_buffersink_get_time_base) upscale_av_buffersink_get_time_base_fn;

static inline int upscale_averror(int posixError) { return AVERROR(posixError); }

/// Counts an error a demuxer logged (a Matroska file damaged in the middle: the demuxer skips
/// to the next cluster it recognises, and says so only in its log). Defined in Swift
/// (`MediaLibrary`): one counter for the process, where a static here would be one per object
/// file that inlines it.
void upscale_count_demux_error(void);
/// FFmpeg's log callback: counts demuxer errors, then prints as FFmpeg would (at the level
/// av_log_set_level sets: nothing unless --verbose).
static inline void upscale_log(void *avcl, int level, const char *fmt, va_list vl) {
    if (level <= AV_LOG_ERROR && avcl) {
        const AVClass *cls = *(const AVClass **)avcl;
        AVClassCategory category = !cls ? AV_CLASS_CATEGORY_NA : cls->get_category ? cls->get_category(avcl) : cls->category;
        if (category == AV_CLASS_CATEGORY_DEMUXER) upscale_count_demux_error();
    }
    av_log_default_callback(avcl, level, fmt, vl);
}
static inline void upscale_log_install(void) { av_log_set_callback(upscale_log); }
static inline int upscale_averror_eof(void) { return AVERROR_EOF; }
static inline int upscale_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int upscale_averror_decoder_not_found(void) { return AVERROR_DECODER_NOT_FOUND; }
static inline int64_t upscale_nopts(void) { return AV_NOPTS_VALUE; }
static inline uint32_t upscale_fourcc(char a, char b, char c, char d) { return MKTAG(a, b, c, d); }
static inline void upscale_strerror(int err, char *buf, size_t size) { av_strerror(err, buf, size); }

#endif
