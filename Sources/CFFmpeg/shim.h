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
#include <libavutil/hwcontext.h>
#include <libavutil/imgutils.h>
#include <libavutil/mastering_display_metadata.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

static inline int upscale_averror(int posixError) { return AVERROR(posixError); }
static inline int upscale_averror_eof(void) { return AVERROR_EOF; }
static inline int upscale_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int upscale_averror_decoder_not_found(void) { return AVERROR_DECODER_NOT_FOUND; }
static inline int64_t upscale_nopts(void) { return AV_NOPTS_VALUE; }
static inline uint32_t upscale_fourcc(char a, char b, char c, char d) { return MKTAG(a, b, c, d); }
static inline void upscale_strerror(int err, char *buf, size_t size) { av_strerror(err, buf, size); }

#endif
