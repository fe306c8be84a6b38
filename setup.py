"""The native modules, built where a C compiler is (see each one's source):

* `chatparse.runtime.tokens._stream_kernels`: the loops of `TokenStreams` over every stream;
* `chatparse.runtime.oneshot._lean_regions`: the one-shot path's delimiters and regions, where string tests decide them;
* `chatparse.data._message_columns`: the Arrow buffers of a batch of parsed messages (`chatparse.data.arrow`).

They are optional (``optional=True``): without a compiler the install still succeeds and
`chatparse.runtime.tokens.kernels`, the one-shot path and `chatparse.data.arrow` use their Python spellings, which
give the same results."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("chatparse.runtime.tokens._stream_kernels", ["chatparse/runtime/tokens/_stream_kernels.c"], optional=True),
    Extension("chatparse.runtime.oneshot._lean_regions", ["chatparse/runtime/oneshot/_lean_regions.c"], optional=True),
    Extension("chatparse.data._message_columns", ["chatparse/data/_message_columns.c"], optional=True),
])
