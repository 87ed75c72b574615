"""TVM kernel library for CPU targets (llvm, host features detected at run time).

Import-light on purpose: importing specir (or this package) never imports tvm. Use
`specir.backends.tvm.kernels.CPUKernels` for the kernels; `reference` holds their torch twins.
"""
