/* braid's own extensions to the NCCL API. Everything here is prefixed braid*
 * so that a program can tell it runs on braid rather than NVIDIA's NCCL:
 * look the symbol up with dlsym(RTLD_DEFAULT, "braidVersionString"). */
#ifndef BRAID_H_
#define BRAID_H_

#ifdef __cplusplus
extern "C" {
#endif

/* "braid X.Y.Z (NCCL API 2.27.7)": the library that is actually loaded. */
const char* braidVersionString(void);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_H_ */
