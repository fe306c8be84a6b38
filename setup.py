"""The one native module, built where a C compiler is: `chatparse.runtime._stream_kernels` (see its source).

It is optional (``optional=True``): without a compiler the install still succeeds and
`chatparse.runtime.stream_kernels` uses its Python spellings, which gives the same results."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("chatparse.runtime._stream_kernels", ["chatparse/runtime/_stream_kernels.c"], optional=True)])
