// The CUDA kernel images of logprob.cu and delta.cu, linked into libneedle.so with .incbin from
// the files `make native` writes into their kernels/trainer/<op>/ptx/ folders (the same files
// the Go packages embed); capi/CMakeLists.txt passes their paths, and NEEDLE_HAVE_FATBIN when
// nvcc made fatbins. Each image is followed by a NUL, so the PTX is a C string.
#include "capi_internal.h"

#define NL_INCBIN(sym, path)                                                             \
  __asm__(".section .rodata\n.balign 64\n" #sym ":\n.incbin \"" path "\"\n.byte 0\n" #sym \
          "_end:\n.previous\n");                                                         \
  extern const char sym[] __asm__(#sym) __attribute__((visibility("hidden")));         \
  extern const char sym##_end[] __asm__(#sym "_end") __attribute__((visibility("hidden")))

// IMAGE is an image linked in above, NUL included.
#define IMAGE(name, sym) ((nl_image){name, sym, (size_t)(sym##_end - sym)})

NL_INCBIN(nl_logprob_ptx, NEEDLE_LOGPROB_PTX);
NL_INCBIN(nl_delta_ptx, NEEDLE_DELTA_PTX);
#if NEEDLE_HAVE_FATBIN
NL_INCBIN(nl_logprob_fatbin, NEEDLE_LOGPROB_FATBIN);
NL_INCBIN(nl_delta_fatbin, NEEDLE_DELTA_FATBIN);
#endif

nl_image nl_capi_image(int image, int fatbin) {
#if NEEDLE_HAVE_FATBIN
  if (fatbin)
    return image == NL_IMAGE_LOGPROB ? IMAGE("logprob.fatbin", nl_logprob_fatbin)
                                     : IMAGE("delta.fatbin", nl_delta_fatbin);
#else
  if (fatbin)
    return (nl_image){image == NL_IMAGE_LOGPROB ? "logprob.fatbin" : "delta.fatbin", NULL, 0};
#endif
  return image == NL_IMAGE_LOGPROB ? IMAGE("logprob_sm80.ptx", nl_logprob_ptx)
                                   : IMAGE("delta_sm80.ptx", nl_delta_ptx);
}
