/* Every kernel the table in cuda_kernels.c names is defined in its module's embedded
 * fatbin, on any machine: no GPU, no driver. A name the table holds and no kernel source
 * instantiates (conv_halo.cu's strip widths are listed in kernel_params.h, in that table
 * and in its instantiations, which must agree) would otherwise fail only on a GPU, in
 * cuModuleGetFunction at a program's prepare. The controls show the lookup can say no: a
 * width no source instantiates, a kernel asked of another module, and a prefix of a name.
 *
 * Usage: test_cuda_kernel_names */
#include <stdio.h>

#include "cuda_kernels.h"
#include "test_support.h"

#define EXPECT(cond, ...) TEST_EXPECT(cond, __VA_ARGS__)

int main(void) {
  const char* undefined = ember_cuda_kernels_first_undefined();
  EXPECT(undefined == NULL, "cuda_kernels.c names %s, which its module's fatbin does not define",
         undefined != NULL ? undefined : "");
  EXPECT(ember_cuda_fatbin_defines("conv_halo", "ember_conv_halo120_f16"),
         "conv_halo's fatbin does not define ember_conv_halo120_f16");
  EXPECT(ember_cuda_fatbin_defines("elementwise", "ember_unary_f32"),
         "elementwise's fatbin does not define ember_unary_f32");
  /* Controls. */
  EXPECT(!ember_cuda_fatbin_defines("conv_halo", "ember_conv_halo121_f16"),
         "a strip width conv_halo.cu does not instantiate was found");
  EXPECT(!ember_cuda_fatbin_defines("elementwise", "ember_conv_halo120_f16"),
         "a conv_halo kernel was found in elementwise's fatbin");
  EXPECT(!ember_cuda_fatbin_defines("conv_halo", "ember_conv_halo120"),
         "a prefix of a kernel's name was taken for a name");
  EXPECT(!ember_cuda_fatbin_defines("no_such_module", "ember_unary_f32"),
         "a module that does not exist was found");
  return test_finish("test_cuda_kernel_names", test_counted_checks());
}
